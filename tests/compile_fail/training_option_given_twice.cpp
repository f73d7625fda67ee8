// expect-error: static assertion failed: phaze::dsl::training: 'microbatch' was given twice; give each
// A knob takes one value set; the second microbatch would silently replace the first.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs =
    dsl::training(dsl::global_batch = 512, dsl::microbatch = dsl::pow2(1, 8), dsl::microbatch = 2);
