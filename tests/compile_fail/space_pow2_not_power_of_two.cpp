// expect-error: non-.*constexpr.* function .*phaze::dsl::rules::pow2_bounds_must_be_powers_of_two\(\)
// pow2(lo, hi) enumerates powers of two: a bound of 3 is a typo for 2 or 4.
#include <phaze/hw/space.hpp>

namespace dsl = phaze::dsl;

constexpr auto space =
    dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(1, 64), dsl::tc_width = dsl::pow2(3, 256));
