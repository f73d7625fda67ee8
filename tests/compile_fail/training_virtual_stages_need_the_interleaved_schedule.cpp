// expect-error: non-.*constexpr.* function .*rules::virtual_stages_need_the_interleaved_schedule\(\)
// Model chunks per device only exist in the interleaved 1F1B schedule.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::virtual_stages = 2);
