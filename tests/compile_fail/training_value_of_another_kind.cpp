// expect-error: static assertion failed: phaze::dsl: this option does not take a value of this kind
// Recomputation takes modes (phaze::none, phaze::selective, phaze::full), not a range of numbers.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::recompute = dsl::pow2(1, 4));
