// expect-error: non-.*constexpr.* function .*phaze::model::rules::kv_heads_must_divide_attention_heads\(\)
// Grouped-query attention shares each key/value head among heads/kv_heads query heads: 32 / 6 is not whole.
#include <phaze/phaze.hpp>

namespace dsl = phaze::dsl;

constexpr auto m = dsl::transformer(dsl::hidden = 4096, dsl::heads = 32, dsl::kv_heads = 6, dsl::layers = 32,
                                    dsl::vocab = 32000, dsl::sequence = 4096);
