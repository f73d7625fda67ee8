// expect-error: non-.*constexpr.* function .*rules::knob_values_must_be_distinct\(\)
// A microbatch size listed twice would be tried twice.
#include <phaze/train/dsl.hpp>

namespace dsl = phaze::dsl;

constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::microbatch = dsl::one_of(1, 2, 2));
