// A model written in the DSL, checked and measured at compile time: a 7B Llama-style decoder,
// its parameter count, a tensor-parallel block's activation memory, and its FLOPs per token.
#include <phaze/phaze.hpp>

#include <cstdio>

namespace dsl = phaze::dsl;
using namespace phaze::literals;

// [readme-example]
constexpr auto my_model = dsl::transformer(
    dsl::name = "my-7b", dsl::hidden = 4096, dsl::heads = 32, dsl::layers = 32, dsl::ffn = 11008,
    dsl::vocab = 32000, dsl::sequence = 4096, dsl::norm = phaze::rmsnorm, dsl::mlp = phaze::swiglu,
    dsl::positions = phaze::rotary, dsl::bias = false, dsl::tied_embeddings = false, dsl::dropout = false);

constexpr auto block =
    dsl::layer(my_model, dsl::shape(dsl::microbatch = 1, dsl::tp = 8, dsl::sequence_parallel = true));
constexpr auto kept = phaze::model::activation_bytes(block, phaze::model::recompute::selective);

static_assert(phaze::model::parameter_count(my_model) == 6'738'415'616);  // same as Llama-2-7B
static_assert(kept < 128_MiB, "a tensor-parallel block keeps under 128 MiB of activations per sequence");
// [readme-example]

int main() {
  const auto totals = phaze::model::totals(my_model, {1, 4096, 1, false, 2});
  std::printf(
      "%s: %.3f B parameters, %.2f GFLOP per token (forward + backward), block at tp 8: %.1f MiB kept\n",
      my_model.config.name.str().c_str(), static_cast<double>(phaze::model::parameter_count(my_model)) / 1e9,
      phaze::in_gflops(totals.forward_matmul + totals.backward_matmul) / 4096.0, phaze::in_mib(kept));
  return 0;
}
