// expect-error: non-.*constexpr.* function .*rules::global_batch_must_be_positive\(\)
// An iteration trains on at least one sequence.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 0, dsl::microbatch = 1);
