// expect-error: static assertion failed: phaze::dsl: an option was given twice .*give each option once
// Each keyword may appear once in a call.
#include <phaze/phaze.hpp>

namespace dsl = phaze::dsl;

constexpr auto m = dsl::transformer(dsl::hidden = 1024, dsl::heads = 16, dsl::layers = 24, dsl::vocab = 50257,
                                    dsl::sequence = 1024, dsl::heads = 8);
