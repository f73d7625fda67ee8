// A layer built op by op with layer_builder, at compile time: a GPT-2-small MLP for a microbatch of 4
// sequences of 1024 tokens, with its backward pass and stored activations checked by the compiler.
#include <phaze/phaze.hpp>

#include <cstdio>

using namespace phaze::model;

// [docs-example]
constexpr layer mlp = [] {
  layer_builder b{"mlp", layer_role::block, layer_shape{4, 1024}, 4 * 1024 * 768};
  auto up = b.matmul("fc1", b.input(), {1, 4 * 1024, 768, 3072}, tp_split::column, /*bias=*/true);
  auto act = b.vector(op_kind::gelu, "gelu", up, saves::input0);
  b.matmul("fc2", act, {1, 4 * 1024, 3072, 768}, tp_split::row);
  return b.build();
}();
// [docs-example]

// The backward pass: input- and weight-gradient GEMMs for both matmuls plus the GELU gradient.
static_assert(backward(mlp).size() == 5);
static_assert(backward_matmul_flops(mlp) == 2.0 * forward_matmul_flops(mlp));
// Kept for backward, per token, 2 bytes each: fc1's input (768 wide), GELU's input (3072) and fc2's input
// (3072): Korthikanti et al.'s 2 + 8 + 8 bytes per hidden element of an MLP, without the dropout mask.
static_assert(activation_bytes(mlp, recompute::none).value() == 4.0 * 1024 * (768 + 3072 + 3072) * 2);

int main() {
  std::printf("mlp: %zu forward ops, %zu backward ops, %.1f GFLOP forward, %.1f MiB kept for backward\n",
              mlp.ops.size(), backward(mlp).size(), phaze::in_gflops(forward_matmul_flops(mlp)),
              phaze::in_mib(activation_bytes(mlp, recompute::none)));
  return 0;
}
