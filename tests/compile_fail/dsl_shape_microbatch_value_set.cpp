// expect-error: static assertion failed: phaze::dsl::shape: 'microbatch' takes one value
// A layer has one shape; value sets list what a training run tries (dsl::training).
#include <phaze/phaze.hpp>

namespace dsl = phaze::dsl;

constexpr auto shape = dsl::shape(dsl::microbatch = dsl::pow2(1, 8), dsl::tp = 8);
