// expect-error: non-.*constexpr.* function .*rules::global_batch_must_be_divisible_by_microbatch_times_dp\(\)
// On 64 devices with tp 1 and pp at most 8, dp is at least 8: microbatch 16 x 8 replicas exceeds the batch
// of 96.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs =
    dsl::training_for(phaze::dsl::transformer(dsl::hidden = 1024, dsl::heads = 16, dsl::layers = 8,
                                              dsl::vocab = 50257, dsl::sequence = 1024),
                      dsl::devices = 64, dsl::global_batch = 96, dsl::microbatch = dsl::one_of(1, 2, 16),
                      dsl::tensor_parallel = 1);
