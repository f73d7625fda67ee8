// expect-error: non-.*constexpr.* function .*rules::microbatch_sizes_must_be_positive\(\)
// A microbatch holds at least one sequence.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::microbatch = dsl::one_of(0, 1, 2));
