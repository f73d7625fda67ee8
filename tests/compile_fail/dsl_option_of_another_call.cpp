// expect-error: static assertion failed: phaze::dsl: this option does not belong to this call
// tp is a shape option (dsl::shape), not an architecture option.
#include <phaze/phaze.hpp>

namespace dsl = phaze::dsl;

constexpr auto m = dsl::transformer(dsl::hidden = 1024, dsl::heads = 16, dsl::layers = 24, dsl::vocab = 50257,
                                    dsl::sequence = 1024, dsl::tp = 8);
