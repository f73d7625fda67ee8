// expect-error: static assertion failed: phaze::dsl::training: this option does not belong to a training run
// tp is a shape option (dsl::shape); a training run lists its widths as dsl::tensor_parallel.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::tp = 8);
