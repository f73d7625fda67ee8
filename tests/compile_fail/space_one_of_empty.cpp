// expect-error: static assertion failed: phaze::dsl::one_of: the list is empty; give at least one value
// An empty list would leave the space with no designs.
#include <phaze/hw/space.hpp>

namespace dsl = phaze::dsl;

constexpr auto space = dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(1, 64), dsl::hbm = dsl::one_of());
