// expect-error: static assertion failed: phaze::dsl: this option takes one value, not a set
// An area budget is one number: a space varies its dimensions, not its budget.
#include <phaze/hw/space.hpp>

using namespace phaze::literals;
namespace dsl = phaze::dsl;

constexpr auto space = dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(2, 16),
                                              dsl::area_budget = dsl::one_of(600_mm2, 700_mm2));
