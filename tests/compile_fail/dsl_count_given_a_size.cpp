// expect-error: static assertion failed: phaze::dsl: this option takes a plain count or setting, not a
// A model's hidden size is a count.
#include <phaze/model/dsl.hpp>

using namespace phaze::literals;
namespace dsl = phaze::dsl;

constexpr auto m = dsl::transformer(dsl::hidden = 4_GiB, dsl::heads = 16, dsl::layers = 24,
                                    dsl::vocab = 50257, dsl::sequence = 1024);
