// expect-error: no match for .*operator=.* \(operand types are .*phaze::bytes.* and .*phaze::seconds
// A duration cannot be stored in a size.
#include <phaze/core/quantity.hpp>

using namespace phaze::literals;

void store() {
  phaze::bytes hbm = 80_GiB;
  hbm = 2_ms;
}
