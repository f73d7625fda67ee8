// expect-error: non-.*constexpr.* function .*rules::interleaved_schedule_needs_more_than_two_pipeline_stages
// 16 devices at tp 8 leave pp 1 or 2, and Megatron-LM interleaves only pipelines of more than two stages.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::devices = 16, dsl::global_batch = 512, dsl::tensor_parallel = 8,
                                     dsl::schedule = phaze::interleaved, dsl::virtual_stages = 2);
