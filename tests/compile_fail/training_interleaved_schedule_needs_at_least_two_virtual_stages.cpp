// expect-error: non-.*constexpr.* function .*rules::interleaved_schedule_needs_at_least_two_virtual_stages
// The interleaved schedule with one chunk per device is plain 1F1B; give dsl::virtual_stages = 2 or more.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::schedule = phaze::interleaved);
