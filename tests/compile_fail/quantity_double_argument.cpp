// expect-error: could not convert [^ ]*5.0e-1[^ ]* from [^ ]*double[^ ]* to [^ ]*phaze::seconds
// A function taking seconds does not accept a bare number: the unit would be a guess.
#include <phaze/core/quantity.hpp>

double in_ms(phaze::seconds s) {
  return s.value() * 1e3;
}
double half = in_ms(0.5);
