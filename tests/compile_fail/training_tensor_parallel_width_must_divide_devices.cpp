// expect-error: non-.*constexpr.* function .*rules::tensor_parallel_width_must_divide_devices\(\)
// 48 devices cannot be split into tensor-parallel groups of 32.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs =
    dsl::training(dsl::devices = 48, dsl::global_batch = 512, dsl::tensor_parallel = dsl::pow2(1, 32));
