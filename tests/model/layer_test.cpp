// Tests of phaze/model/layer.hpp: the layer builder and its rules, the derived backward DAG (checked against
// a brute-force gradient-flow oracle on every zoo layer), and activation memory by recomputation mode.
#include "phaze/model/layer.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "phaze/model/transformer.hpp"
#include "phaze/model/zoo.hpp"

using namespace phaze;
using namespace phaze::model;

namespace {
constexpr std::int64_t tokens = 64;
constexpr std::int64_t width = 32;

/// The two-layer MLP of the layer_builder documentation.
constexpr layer small_mlp(layer_shape shape = {}) {
  layer_builder b{"mlp", layer_role::block, shape, tokens * width};
  auto h = b.matmul("fc1", b.input(), {1, tokens, width, 4 * width}, tp_split::column, true);
  auto g = b.vector(op_kind::gelu, "gelu", h, saves::input0);
  b.matmul("fc2", g, {1, tokens, 4 * width, width}, tp_split::row);
  return b.build();
}

// --- brute-force gradient-flow oracle ------------------------------------------------------------------

/// How many backward ops the forward op `f` owns (Megatron-style backward; layer.hpp documents it).
int backward_op_count(const op& f) {
  switch (f.kind) {
    case op_kind::matmul:
    case op_kind::batched_matmul:
      return 2;
    case op_kind::all_reduce:
      return 0;  // "g" forward: its backward is the identity
    default:
      return 1;
  }
}

/// For each forward op, the indices of its backward ops in `bwd`, found by walking the forward ops from the
/// last to the first (the order in which the backward pass is emitted).
std::vector<std::vector<int>> backward_ops_of(const layer& l,
                                              const static_vector<op, max_backward_ops>& bwd) {
  std::vector<std::vector<int>> owner(l.ops.size());
  int next = 0;
  for (std::size_t r = 0; r < l.ops.size(); ++r) {
    const std::size_t i = l.ops.size() - 1 - r;
    for (int k = 0; k < backward_op_count(l.ops[i]); ++k) owner[i].push_back(next++);
  }
  REQUIRE(next == static_cast<int>(bwd.size()));
  return owner;
}

/// The backward op that produces the gradient of forward op `d`'s k-th input, or -1 (identity / none).
int gradient_op(const layer& l, const std::vector<std::vector<int>>& owner, std::size_t d, std::size_t k) {
  const op& f = l.ops[d];
  if (owner[d].empty()) return -1;
  if (f.kind == op_kind::matmul) return owner[d][0];          // dX, never dW
  if (f.kind == op_kind::batched_matmul) return owner[d][k];  // dA for operand 0, dB for operand 1
  if (f.kind == op_kind::embedding) return -1;                // no activation input
  return owner[d][0];
}

/// descendant[i][j]: forward op j lies on a path from forward op i (i itself included).
std::vector<std::vector<bool>> forward_descendants(const layer& l) {
  const std::size_t n = l.ops.size();
  std::vector<std::vector<bool>> below(n, std::vector<bool>(n, false));
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t i = n - 1 - r;
    below[i][i] = true;
    for (std::size_t c = i + 1; c < n; ++c)
      for (auto in : l.ops[c].inputs)
        if (in == static_cast<std::int16_t>(i))
          for (std::size_t j = 0; j < n; ++j)
            if (below[c][j]) below[i][j] = true;
  }
  return below;
}

/// closure[j]: the backward ops j depends on, directly or transitively (j excluded).
std::vector<std::vector<bool>> backward_closure(const static_vector<op, max_backward_ops>& bwd) {
  const std::size_t n = bwd.size();
  std::vector<std::vector<bool>> needs(n, std::vector<bool>(n, false));
  for (std::size_t j = 0; j < n; ++j)
    for (auto in : bwd[j].inputs) {
      const auto p = static_cast<std::size_t>(in);
      needs[j][p] = true;
      for (std::size_t q = 0; q < n; ++q)
        if (needs[p][q]) needs[j][q] = true;
    }
  return needs;
}

/// Checks the backward DAG of `l` against the chain rule, op by op. Returns the number of checks made.
int check_gradient_flow(const layer& l) {
  INFO("layer " << l.name.str() << " tp " << l.shape.tp << " sp " << l.shape.sequence_parallel);
  const auto bwd = backward(l);
  const auto owner = backward_ops_of(l, bwd);
  const auto below = forward_descendants(l);
  const auto needs = backward_closure(bwd);
  const std::size_t n = l.ops.size();
  int checks = 0;

  // Backward inputs only reference earlier backward ops (the list is topologically ordered).
  for (std::size_t j = 0; j < bwd.size(); ++j)
    for (auto in : bwd[j].inputs) {
      REQUIRE(in >= 0);
      REQUIRE(static_cast<std::size_t>(in) < j);
    }

  for (std::size_t i = 0; i < n; ++i) {
    // Chain rule: the gradient of op i's output needs exactly the input gradients of every op downstream
    // of i, taken for the inputs that lie on a path from i.
    std::vector<bool> expected(bwd.size(), false);
    for (std::size_t d = i + 1; d < n; ++d)
      for (std::size_t k = 0; k < l.ops[d].inputs.size(); ++k) {
        const auto p = l.ops[d].inputs[k];
        if (p == layer_input || !below[i][static_cast<std::size_t>(p)]) continue;
        if (const int g = gradient_op(l, owner, d, k); g >= 0) expected[static_cast<std::size_t>(g)] = true;
      }
    for (int b : owner[i]) {
      INFO("backward op " << bwd[static_cast<std::size_t>(b)].name.str());
      CHECK(needs[static_cast<std::size_t>(b)] == expected);
      ++checks;
    }
  }

  // Reachability from the layer-output gradient: following edges producer -> consumer from the ops that
  // read the incoming gradient reaches every backward op.
  std::vector<bool> reached(bwd.size(), false);
  for (std::size_t j = 0; j < bwd.size(); ++j) {
    if (bwd[j].inputs.empty()) reached[j] = true;
    for (auto in : bwd[j].inputs)
      if (reached[static_cast<std::size_t>(in)]) reached[j] = true;
  }
  for (std::size_t j = 0; j < bwd.size(); ++j) CHECK(reached[j]);

  // The layer's input gradient (the backward of the ops that read the layer input; for an embedding layer,
  // the table gradients) depends on every backward_data op.
  std::vector<int> input_gradient;
  for (std::size_t d = 0; d < n; ++d) {
    const op& f = l.ops[d];
    for (std::size_t k = 0; k < f.inputs.size(); ++k)
      if (f.inputs[k] == layer_input) input_gradient.push_back(gradient_op(l, owner, d, k));
    if (f.inputs.empty() && l.input_elements == 0)
      for (int b : owner[d]) input_gradient.push_back(b);
  }
  REQUIRE_FALSE(input_gradient.empty());
  for (std::size_t q = 0; q < bwd.size(); ++q) {
    if (bwd[q].phase != op_phase::backward_data) continue;
    bool covered = false;
    for (int g : input_gradient) {
      REQUIRE(g >= 0);
      const auto gi = static_cast<std::size_t>(g);
      covered = covered || gi == q || needs[gi][q];
    }
    INFO("backward_data op " << bwd[q].name.str() << " is not needed by the layer's input gradient");
    CHECK(covered);
  }
  return checks;
}
}  // namespace

TEST_CASE("layer_builder wires ops in order and counts parameters (constexpr)", "[layer]") {
  constexpr layer mlp = small_mlp();
  STATIC_REQUIRE(mlp.ops.size() == 3);
  STATIC_REQUIRE(mlp.input_elements == tokens * width);
  STATIC_REQUIRE(mlp.output_elements() == tokens * width);
  STATIC_REQUIRE(layer_params(mlp) == width * 4 * width + 4 * width + 4 * width * width);
  STATIC_REQUIRE(mlp.ops[0].inputs.size() == 1 && mlp.ops[0].inputs[0] == layer_input);
  STATIC_REQUIRE(mlp.ops[1].inputs[0] == 0);
  STATIC_REQUIRE(mlp.ops[2].inputs[0] == 1);
  STATIC_REQUIRE(mlp.ops[1].out_elements == tokens * 4 * width);
  STATIC_REQUIRE(mlp.ops[0].saved == saves::input0);
  STATIC_REQUIRE(mlp.ops[2].split == tp_split::row);
  STATIC_REQUIRE(boundary_bytes(mlp) == bytes{2.0 * tokens * width});
  // Forward matmul FLOPs: 2 * tokens * width * 4width for each of the two GEMMs.
  STATIC_REQUIRE(forward_matmul_flops(mlp) == flops{2.0 * 2.0 * tokens * width * 4.0 * width});
  STATIC_REQUIRE(forward_vector_flops(mlp) == flops{8.0 * tokens * 4.0 * width});
  STATIC_REQUIRE(backward_matmul_flops(mlp) == flops{2.0 * 2.0 * 2.0 * tokens * width * 4.0 * width});
  STATIC_REQUIRE(backward_vector_flops(mlp) == flops{2.0 * 8.0 * tokens * 4.0 * width});
  // Runtime and compile-time builds agree.
  CHECK(small_mlp() == mlp);
}

TEST_CASE("tied parameters are counted once unless asked for", "[layer]") {
  layer_builder b{"head", layer_role::head, {}, 8 * 16};
  b.matmul("output_projection", b.input(), {1, 8, 16, 100}, tp_split::vocab, false, true);
  const layer l = b.build();
  CHECK(layer_params(l) == 0);
  CHECK(layer_params(l, true) == 16 * 100);
}

TEST_CASE("layer_builder rules throw input_error at run time", "[layer]") {
  const auto expect_rule = [](auto&& build, const std::string& fragment) {
    try {
      build();
      FAIL("expected input_error mentioning: " << fragment);
    } catch (const input_error& e) {
      CHECK(e.code() == exit_code::bad_input);
      CHECK_THAT(e.what(), Catch::Matchers::Contains(fragment));
    }
  };
  expect_rule(
      [] {
        layer_builder b{"x", layer_role::block, {}, 16};
        b.vector(op_kind::gelu, "gelu", tensor{0, 16}, saves::nothing);  // op 0 does not exist yet
      },
      "not an earlier op");
  expect_rule(
      [] {
        layer_builder b{"x", layer_role::block, {}, 16};
        b.vector(op_kind::gelu, "gelu", tensor{-2, 16}, saves::nothing);
      },
      "not an earlier op");
  expect_rule(
      [] {
        layer_builder b{"x", layer_role::block, {}, 16};
        b.matmul("fc", b.input(), {1, 4, 0, 4}, tp_split::column);
      },
      "zero or negative dimension");
  expect_rule(
      [] {
        layer_builder b{"x", layer_role::block, {}, 16};
        b.embedding("emb", 4, -1, 4);
      },
      "zero or negative dimension");
  expect_rule([] { (void)layer_builder{"x", layer_role::block, {}, 16}.build(); }, "no ops");
  expect_rule(
      [] {
        layer_builder b{"x", layer_role::block, {}, 16};
        tensor t = b.input();
        for (std::size_t i = 0; i <= max_layer_ops; ++i)
          t = b.vector(op_kind::relu, "relu", t, saves::nothing);
      },
      "max_layer_ops");
  // Exactly max_layer_ops ops are fine.
  layer_builder b{"x", layer_role::block, {}, 16};
  tensor t = b.input();
  for (std::size_t i = 0; i < max_layer_ops; ++i) t = b.vector(op_kind::relu, "relu", t, saves::nothing);
  CHECK(b.build().ops.size() == max_layer_ops);
}

TEST_CASE("backward of an MLP: input- and weight-gradient GEMMs with transposed dimensions", "[layer]") {
  constexpr layer mlp = small_mlp();
  constexpr auto bwd = backward(mlp);
  STATIC_REQUIRE(bwd.size() == 5);
  // Emitted from the last forward op to the first: fc2 (dx, dw), gelu, fc1 (dx, dw).
  CHECK(bwd[0].name.view() == "fc2_dx");
  CHECK(bwd[1].name.view() == "fc2_dw");
  CHECK(bwd[2].name.view() == "gelu_d");
  CHECK(bwd[3].name.view() == "fc1_dx");
  CHECK(bwd[4].name.view() == "fc1_dw");
  // fc2 forward: [tokens, 4w] x [4w, w]. dX = dY [tokens, w] x W^T [w, 4w]; dW = X^T [4w, tokens] x dY
  // [tokens, w].
  CHECK(bwd[0].gemm == gemm_dims{1, tokens, width, 4 * width});
  CHECK(bwd[1].gemm == gemm_dims{1, 4 * width, tokens, width});
  CHECK(bwd[0].phase == op_phase::backward_data);
  CHECK(bwd[1].phase == op_phase::backward_weight);
  CHECK(bwd[2].phase == op_phase::backward_data);
  CHECK(bwd[2].kind == op_kind::gelu);
  CHECK(bwd[0].inputs.empty());  // reads the incoming output gradient
  CHECK(bwd[1].inputs.empty());
  CHECK(bwd[2].inputs.size() == 1);
  CHECK(bwd[2].inputs[0] == 0);  // gelu's gradient needs fc2's dX, not its dW
  CHECK(bwd[3].inputs[0] == 2);
  CHECK(bwd[4].inputs[0] == 2);
  CHECK(bwd[3].out_elements == mlp.input_elements);  // the layer's input gradient
  CHECK(bwd[4].out_elements == mlp.ops[0].params);
  for (const op& o : bwd) CHECK(o.params == 0);  // gradients own no parameters
  check_gradient_flow(mlp);
}

TEST_CASE("backward swaps Megatron's conjugate collectives", "[layer]") {
  // f (tp_copy) forward is an all-reduce backward; g (all_reduce) forward is the identity backward;
  // all-gather and reduce-scatter swap (Shoeybi et al. 2019, Figure 3; Korthikanti et al. 2022,
  // section 4.2.2).
  layer_builder b{"x", layer_role::block, {1, 8, 4, true, 2}, 8 * 16 / 4};
  auto g = b.collective(op_kind::all_gather, "enter_sp", b.input(), 4, 8 * 16);
  auto f = b.collective(op_kind::tp_copy, "enter_tp", g, 4, 8 * 16);
  auto m = b.matmul("fc", f, {1, 8, 16, 16}, tp_split::column);
  auto r = b.collective(op_kind::all_reduce, "exit_tp", m, 4, 8 * 16);
  b.collective(op_kind::reduce_scatter, "exit_sp", r, 4, 8 * 16 / 4);
  const layer l = b.build();
  const auto bwd = backward(l);
  REQUIRE(bwd.size() == 5);  // the all-reduce has no backward op
  CHECK(bwd[0].kind == op_kind::all_gather);
  CHECK(bwd[0].name.view() == "exit_sp_d");
  CHECK(bwd[1].name.view() == "fc_dx");
  CHECK(bwd[1].inputs.size() == 1);
  CHECK(bwd[1].inputs[0] == 0);  // passes straight through the identity
  CHECK(bwd[3].kind == op_kind::all_reduce);
  CHECK(bwd[3].name.view() == "enter_tp_d");
  CHECK(bwd[4].kind == op_kind::reduce_scatter);
  CHECK(bwd[4].name.view() == "enter_sp_d");
  check_gradient_flow(l);
}

TEST_CASE("activation bytes: each kept tensor counted once, masks one byte, recomputation modes",
          "[layer][activations]") {
  // A tiny attention-like layer whose kept tensors are easy to list by hand (fp16):
  //   proj (matmul, keeps x)            x: 16 elements
  //   scores (bmm of proj with itself, keeps proj once even though it is both operands), core
  //   probs (softmax, keeps its output), core
  //   drop (dropout, 1-byte mask), core
  //   ctx (bmm, keeps drop's output and proj), core
  //   out (matmul, keeps ctx)
  layer_builder b{"x", layer_role::block, {}, 16};
  auto proj = b.matmul("proj", b.input(), {1, 4, 4, 8}, tp_split::column);                            // 32
  auto scores = b.batched_matmul("scores", proj, proj, {2, 4, 4, 4}, saves::input0 | saves::input1);  // 32
  auto probs = b.vector(op_kind::softmax, "softmax", scores, saves::output, tp_split::heads, 0, 0, true);
  auto drop = b.vector(op_kind::dropout, "drop", probs, saves::mask, tp_split::heads, 0, 0, true);
  auto ctx = b.batched_matmul("ctx", drop, proj, {2, 4, 4, 4}, saves::input0 | saves::input1);  // 32
  b.matmul("out", ctx, {1, 4, 8, 4}, tp_split::row);
  const layer l = b.build();
  // none: x 16 + proj 32 + probs 32 + drop 32 + ctx 32 elements at 2 bytes, plus a 32-byte mask.
  CHECK(activation_bytes(l, recompute::none) == bytes{2.0 * (16 + 32 + 32 + 32 + 32) + 32});
  // selective: the softmax and dropout outputs (produced and kept only inside the attention core) and the
  // mask are recomputed; proj and ctx stay (produced outside the core, or kept by an op outside it).
  CHECK(activation_bytes(l, recompute::selective) == bytes{2.0 * (16 + 32 + 32)});
  CHECK(activation_bytes(l, recompute::full) == bytes{2.0 * 16});

  // A tensor produced by an all-gather is kept in its sharded (pre-gather) form.
  layer_builder s{"sp", layer_role::block, {1, 8, 4, true, 2}, 32};
  auto gathered = s.collective(op_kind::all_gather, "gather", s.input(), 4, 128);
  s.matmul("fc", gathered, {1, 8, 16, 16}, tp_split::column);
  CHECK(activation_bytes(s.build(), recompute::none) == bytes{2.0 * 32});
}

TEST_CASE("a tensor read by many ops waits for every consumer's gradient", "[layer][backward]") {
  // fc's output feeds four activations whose results are summed: fc's gradient needs all four gradients.
  // (A backward op that kept only its first three dependencies would let fc_dx run before act4_d.)
  layer_builder b{"fan_out", layer_role::block, {}, 16};
  const tensor fc = b.matmul("fc", b.input(), {1, 4, 4, 4}, tp_split::column);
  tensor sum = b.vector(op_kind::gelu, "act1", fc, saves::input0);
  for (const char* name : {"act2", "act3", "act4"}) {
    const tensor act = b.vector(op_kind::relu, name, fc, saves::input0);
    sum = b.add_residual("sum", sum, act);
  }
  const layer l = b.build();
  const auto bwd = backward(l);
  const op& fc_dx = bwd[bwd.size() - 2];
  REQUIRE(fc_dx.name.view() == "fc_dx");
  CHECK(fc_dx.inputs.size() == 4);
  check_gradient_flow(l);

  // More consumers than an op can depend on is an error, never a silently dropped dependency.
  layer_builder wide{"fan_out", layer_role::block, {}, 16};
  const tensor x = wide.matmul("fc", wide.input(), {1, 4, 4, 4}, tp_split::column);
  tensor total = wide.vector(op_kind::gelu, "act", x, saves::input0);
  for (std::size_t i = 0; i < max_op_inputs; ++i)
    total = wide.add_residual("sum", total, wide.vector(op_kind::relu, "act", x, saves::input0));
  CHECK_THROWS(backward(wide.build()));
}

TEST_CASE("the backward DAG of every zoo layer follows the chain rule", "[layer][backward]") {
  int checks = 0;
  int layers_checked = 0;
  for (const auto& e : zoo::entries) {
    for (int tp : {1, 2, 4, 8}) {
      const auto& c = e.config;
      if (c.heads % tp != 0 || c.kv_heads_or_default() % tp != 0 || c.ffn % tp != 0) continue;
      for (bool sp : {false, true}) {
        if (tp == 1 && sp) continue;
        const layer_shape shape{1, 0, tp, sp, 2};
        for (layer_role role : {layer_role::embedding, layer_role::block, layer_role::head}) {
          INFO(e.name << " role " << to_string(role));
          checks += check_gradient_flow(make_layer(c, role, shape));
          ++layers_checked;
        }
      }
    }
  }
  CHECK(layers_checked > 150);
  CHECK(checks > 4000);
}
