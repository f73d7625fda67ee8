// expect-error: static assertion failed: phaze::dsl::accelerator_space: 'tc_width' was given twice; give each
// A dimension takes one value set; the second tc_width would silently replace the first.
#include <phaze/hw/space.hpp>

namespace dsl = phaze::dsl;

constexpr auto space = dsl::accelerator_space(
    dsl::tc_width = dsl::pow2(2, 256), dsl::tc_depth = dsl::pow2(2, 256), dsl::tc_width = dsl::one_of(128));
