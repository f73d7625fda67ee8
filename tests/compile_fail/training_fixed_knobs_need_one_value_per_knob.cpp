// expect-error: non-.*constexpr.* function .*rules::fixed_knobs_need_one_value_per_knob\(\)
// A run's training_knobs need one microbatch size; the space lists four.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr phaze::train::training_knobs knobs = phaze::train::fixed_knobs(
    dsl::training(dsl::global_batch = 512, dsl::recompute = phaze::full, dsl::sequence_parallel = false));
