// Uses an installed phaze: a zoo model's parameter count, checked at compile time and printed at run time.
#include <phaze/phaze.hpp>

#include <cstdio>

int main() {
  constexpr auto params = phaze::model::parameter_count(phaze::zoo::llama2_7b());
  static_assert(params == 6'738'415'616, "Llama-2-7B has 6,738,415,616 parameters (HF model card)");
  std::printf("llama2-7b parameters: %lld\n", static_cast<long long>(params));
  return 0;
}
