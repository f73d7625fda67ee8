// expect-error: non-.*constexpr.* function .*phaze::model::rules::hidden_size_must_be_positive\(\)
// A model needs a positive width.
#include <phaze/phaze.hpp>

namespace dsl = phaze::dsl;

constexpr auto m = dsl::transformer(dsl::hidden = 0, dsl::heads = 16, dsl::layers = 24, dsl::vocab = 50257,
                                    dsl::sequence = 1024);
