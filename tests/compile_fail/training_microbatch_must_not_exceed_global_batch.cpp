// expect-error: non-.*constexpr.* function .*rules::microbatch_must_not_exceed_global_batch\(\)
// A microbatch of 64 sequences cannot come out of a batch of 32.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 32, dsl::microbatch = dsl::pow2(1, 64));
