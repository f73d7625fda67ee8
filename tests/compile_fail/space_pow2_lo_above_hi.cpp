// expect-error: non-.*constexpr.* function .*rules::pow2_lower_bound_must_not_exceed_upper_bound\(\)
// pow2(lo, hi) takes the smaller bound first.
#include <phaze/hw/space.hpp>

using namespace phaze::literals;
namespace dsl = phaze::dsl;

constexpr auto space = dsl::accelerator_space(dsl::global_buffer = dsl::pow2(128_MiB, 2_MiB));
