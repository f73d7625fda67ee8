// expect-error: no match for .*operator\+.* \(operand types are .*phaze::bytes.* and .*phaze::seconds
// Adding a size to a duration has no meaning; the dimensions must match.
#include <phaze/core/quantity.hpp>

using namespace phaze::literals;

auto nonsense = 1_GiB + 1_s;
