// expect-error: non-.*constexpr.* function .*rules::tensor_parallel_width_must_divide_attention_heads\(\)
// GPT-3 has 96 heads: a tensor-parallel width of 64 cannot split them.
#include <phaze/model/zoo.hpp>
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training_for(phaze::zoo::gpt3_175b(), dsl::devices = 1024,
                                         dsl::global_batch = 1536, dsl::tensor_parallel = dsl::pow2(1, 64));
