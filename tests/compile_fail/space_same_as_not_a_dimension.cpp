// expect-error: 'tc_depth' = same_as\(\.\.\.\) names an option that is not a dimension of the space
// same_as ties one dimension to another; the area budget is a bound, not a dimension.
#include <phaze/hw/space.hpp>

namespace dsl = phaze::dsl;

constexpr auto space =
    dsl::accelerator_space(dsl::tc_width = dsl::pow2(2, 256), dsl::tc_depth = dsl::same_as(dsl::area_budget));
