// expect-error: 'vc_width' = same_as\(\.\.\.\) names an option that is itself same_as another; tie both
// Ties do not chain: tie vc_width to tc_width directly.
#include <phaze/hw/space.hpp>

namespace dsl = phaze::dsl;

constexpr auto space =
    dsl::accelerator_space(dsl::tc_width = dsl::pow2(2, 256), dsl::tc_depth = dsl::same_as(dsl::tc_width),
                           dsl::vc_width = dsl::same_as(dsl::tc_depth));
