// expect-error: static assertion failed: phaze::dsl: this option does not belong to this call
// hidden is an architecture option (dsl::transformer), not a shape option.
#include <phaze/phaze.hpp>

namespace dsl = phaze::dsl;

constexpr auto s = dsl::shape(dsl::microbatch = 2, dsl::hidden = 1024);
