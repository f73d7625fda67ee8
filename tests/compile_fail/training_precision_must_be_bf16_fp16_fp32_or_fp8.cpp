// expect-error: non-.*constexpr.* function .*rules::precision_must_be_bf16_fp16_fp32_or_fp8\(\)
// phaze trains in bf16, fp16, fp32 or fp8; tf32 is a GEMM mode of fp32 training, not a format to train in.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::precision = phaze::hw::precision::tf32);
