// expect-error: non-.*constexpr.* function .*rules::precision_must_be_bf16_fp16_or_fp32\(\)
// phaze trains in bf16, fp16 or fp32; fp8 is an inference format here.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::precision = phaze::hw::precision::fp8);
