// expect-error: static assertion failed: phaze::dsl: this option takes a quantity with.*areas as 600_mm2
// An area budget carries its unit: 600_mm2, not 600.
#include <phaze/hw/space.hpp>

using namespace phaze::literals;
namespace dsl = phaze::dsl;

constexpr auto space = dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(2, 16), dsl::area_budget = 600);
