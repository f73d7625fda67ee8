// expect-error: non-.*constexpr.* function .*rules::tensor_parallel_widths_must_be_positive\(\)
// A tensor-parallel group holds at least one device.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::tensor_parallel = dsl::one_of(0, 2, 4));
