// expect-error: non-.*constexpr.* function .*rules::interleaved_schedule_needs_blocks_divisible_by_pp_times_v
// GPT-3's 96 blocks split into pp x 5 chunks for no pipeline depth: 96 is not a multiple of 5.
#include <phaze/model/zoo.hpp>
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs =
    dsl::training_for(phaze::zoo::gpt3_175b(), dsl::devices = 1024, dsl::global_batch = 1536,
                      dsl::schedule = phaze::interleaved, dsl::virtual_stages = 5);
