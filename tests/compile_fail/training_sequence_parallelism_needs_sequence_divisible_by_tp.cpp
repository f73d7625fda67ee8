// expect-error: non-.*constexpr.* function .*rules::sequence_parallelism_needs_sequence_divisible_by_tp\(\)
// Sequence parallelism splits the 1000 tokens of a sequence over the 16 tensor-parallel ranks: it cannot.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto model = dsl::transformer(dsl::hidden = 1024, dsl::heads = 16, dsl::layers = 24,
                                        dsl::vocab = 50257, dsl::sequence = 1000);
constexpr auto knobs = dsl::training_for(model, dsl::global_batch = 512, dsl::tensor_parallel = 16,
                                         dsl::sequence_parallel = true);
