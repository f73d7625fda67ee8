// expect-error: non-.*constexpr.* function .*rules::pow2_lower_bound_must_not_exceed_upper_bound\(\)
// pow2(lo, hi) takes the smaller bound first.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::microbatch = dsl::pow2(8, 1));
