// expect-error: non-.*constexpr.* function .*rules::sequence_parallelism_needs_tensor_parallelism\(\)
// Sequence parallelism splits activations over the tensor-parallel group; with tp 1 there is none.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs =
    dsl::training(dsl::global_batch = 512, dsl::sequence_parallel = true, dsl::tensor_parallel = 1);
