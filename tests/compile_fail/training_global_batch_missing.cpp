// expect-error: static assertion failed: phaze::dsl::training: 'global_batch' is missing
// Every training run needs its global batch: the microbatch and data-parallel rules are checked against it.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::microbatch = dsl::pow2(1, 8), dsl::devices = 64);
