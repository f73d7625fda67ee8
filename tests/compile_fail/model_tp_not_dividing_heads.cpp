// expect-error: non-.*constexpr.* function .*rules::tensor_parallel_width_must_divide_attention_heads\(\)
// GPT-3 has 96 heads: a tensor-parallel width of 5 cannot split them.
#include <phaze/phaze.hpp>

namespace dsl = phaze::dsl;

constexpr auto block = dsl::layer(phaze::zoo::gpt3_175b(), dsl::shape(dsl::tp = 5));
