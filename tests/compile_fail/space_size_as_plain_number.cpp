// expect-error: static assertion failed: phaze::dsl: this option takes a quantity with its unit, not a plain
// Sizes carry their unit: one_of(32_GiB, 64_GiB), not one_of(32, 64).
#include <phaze/hw/space.hpp>

using namespace phaze::literals;
namespace dsl = phaze::dsl;

constexpr auto space =
    dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(2, 16), dsl::hbm = dsl::one_of(32, 64));
