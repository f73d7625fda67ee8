// expect-error: non-.*constexpr.* function .*rules::tensor_parallel_width_must_divide_kv_heads\(\)
// Llama 2 70B has 64 query heads but 8 key/value heads (grouped-query attention): tp 16 cannot split them.
#include <phaze/model/zoo.hpp>
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training_for(phaze::zoo::llama2_70b(), dsl::devices = 512,
                                         dsl::global_batch = 1024, dsl::tensor_parallel = dsl::one_of(8, 16));
