// expect-error: static assertion failed: phaze::dsl::accelerator_space: this option does not belong to an acc
// hidden is an option of the model DSL (dsl::transformer), not a dimension of an accelerator space.
#include <phaze/hw/space.hpp>
#include <phaze/model/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto space = dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(1, 64), dsl::hidden = 4096);
