// expect-error: non-.*constexpr.* function .*rules::tensor_parallel_width_must_divide_ffn_size\(\)
// An MLP 3000 wide does not split over 16 ranks, though the 16 heads do.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto model = dsl::transformer(dsl::hidden = 1024, dsl::heads = 16, dsl::ffn = 3000,
                                        dsl::layers = 24, dsl::vocab = 50257, dsl::sequence = 1024);
constexpr auto knobs = dsl::training_for(model, dsl::global_batch = 512, dsl::tensor_parallel = 16);
