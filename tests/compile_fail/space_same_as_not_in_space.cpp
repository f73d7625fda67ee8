// expect-error: 'vc_width' = same_as\(\.\.\.\) names an option that is not in this space; give that option
// tc_width is not given, so it is not a dimension of this space: vc_width would tie to a constant.
#include <phaze/hw/space.hpp>

namespace dsl = phaze::dsl;

constexpr auto space =
    dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(1, 64), dsl::vc_width = dsl::same_as(dsl::tc_width));
