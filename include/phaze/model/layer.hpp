/// @file
/// A layer: a small DAG of ops for the forward pass, the builder that makes one (usable in constant
/// expressions), the derived backward DAG, and per-layer totals (FLOPs, parameters, stored activations).
#pragma once

#include <cstdint>
#include <string_view>

#include "phaze/core/error.hpp"
#include "phaze/core/fixed_string.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/core/static_vector.hpp"
#include "phaze/model/op.hpp"

namespace phaze::model {

/// Most forward ops in one layer (a Llama or GPT block with tensor and sequence parallelism needs ~25, a
/// DeepSeek-V3 block 36, its output layer with the multi-token prediction module 50).
inline constexpr std::size_t max_layer_ops = 64;
/// Most backward ops: up to two per forward op.
inline constexpr std::size_t max_backward_ops = 2 * max_layer_ops;

/// The role of a layer in a model graph: the input layer (a transformer's embedding), a transformer block
/// (what activation recomputation checkpoints), the output layer (a transformer's head), or an adapter
/// between blocks of different shapes (a reshape, resize or position embedding of a composite model).
enum class layer_role : std::uint8_t { embedding, block, head, adapter };

constexpr std::string_view to_string(layer_role r) {
  switch (r) {
    case layer_role::embedding:
      return "embedding";
    case layer_role::block:
      return "block";
    case layer_role::head:
      return "head";
    case layer_role::adapter:
      return "adapter";
  }
  return "?";
}

/// Activation recomputation modes (Korthikanti et al. 2022): keep everything, recompute the attention core
/// ("selective"), or keep only each layer's input and recompute the whole forward pass ("full").
enum class recompute : std::uint8_t { none, selective, full };

constexpr std::string_view to_string(recompute r) {
  switch (r) {
    case recompute::none:
      return "none";
    case recompute::selective:
      return "selective";
    case recompute::full:
      return "full";
  }
  return "?";
}

/// The shape a layer is instantiated for: microbatch, sequence, tensor-parallel width, sequence parallelism
/// and element size. Layer graphs are per shape; the architecture is not.
struct layer_shape {
  std::int64_t microbatch = 1;
  std::int64_t sequence = 0;  ///< 0: the model's own sequence length
  int tp = 1;
  bool sequence_parallel = false;
  int elem_bytes = 2;
  /// Attention as one fused kernel (FlashAttention / cuDNN fused attention, what Megatron-Core runs by
  /// default through Transformer Engine) instead of score GEMM, softmax, dropout and context GEMM.
  bool fused_attention = false;
  /// FP8 training (Transformer Engine): the GEMMs of the blocks' linear layers run in FP8
  /// (model::op::fp8); attention, norms, the embedding and the output layer stay in bf16 (elem_bytes).
  bool fp8 = false;
  /// Context parallelism: each rank holds sequence / cp tokens of every sequence (2 cp chunks, two per rank,
  /// Megatron-Core's load balancing under a causal mask) and its queries attend to all the keys, which
  /// circulate around the cp ranks (ring attention over Transformer Engine's fused kernel).
  int cp = 1;
  /// Vocabulary padding as Megatron-LM pads it (--make-vocab-size-divisible-by): the embedding and output
  /// layer hold the vocabulary rounded up to a multiple of vocab_multiple * tp; 1: to a multiple of tp.
  int vocab_multiple = 1;
  /// Expert parallelism (mixture-of-experts blocks): each rank holds experts / ep of a block's routed
  /// experts and exchanges tokens with the ep - 1 others of its group by all-to-all (Megatron-Core's
  /// --expert-model-parallel-size; ranks carved from the data-parallel ones).
  int ep = 1;
  /// The implementation of the fused attention kernel (model::attention_kernel).
  attention_kernel kernel = attention_kernel::standard;
  /// Expert tensor parallelism (Megatron-Core's --expert-tensor-parallel-size, MoE parallel folding): the
  /// routed experts' GEMMs split over etp ranks, a divisor of tp, instead of tp; 0: tp.
  int etp = 0;
  [[nodiscard]] constexpr int expert_tp() const { return etp > 0 ? etp : tp; }
  /// The submodules selective recomputation runs again (recompute_module bits; Megatron-Core's
  /// --recompute-modules, default the attention core).
  std::uint8_t recompute_modules = recompute_module::core_attn;
  /// Host (CPU) time the training framework spends per op of a pass (Python, autograd and the kernel
  /// launches behind one op): a pass of a layer takes at least its ops times this, since the GPU cannot run
  /// kernels faster than they are launched (cost::host_bound). 0: the GPU's time alone (CUDA graphs).
  double host_per_op = 0.0;
  /// The loss as one fused kernel each way (flash-attn's CrossEntropyLoss over apex's xentropy kernel, what
  /// LLM Foundry runs by default): the forward reads the logits in their own format once and keeps one
  /// fp32 log-sum-exp per token, the backward reads them again and writes their gradient. Off: Megatron-LM's
  /// vocabulary-parallel cross-entropy (fp32 passes, the fp32 softmax kept; cost/vector.hpp).
  bool fused_loss = false;
  /// The memory-bound ops (norms, activations, rotary embedding, residual adds) as eager PyTorch runs them:
  /// its own kernels, at the rates and fixed times measured on Hopper (cost::eager_kernel_of). Off: fused
  /// kernels at the device's copy rate (Transformer Engine, Megatron-Core's fusions, a compiler).
  bool eager_vector = false;
  /// A mixture of experts' permutation and unpermutation as Megatron-Core runs them without
  /// --moe-permute-fusion (index_kernel); off: Transformer Engine's fused kernels.
  bool unfused_permutation = false;
  /// Expert parallelism's dispatch hands each rank its tokens already grouped by expert (DeepEP's and
  /// HybridEP's kernels, train::moe_dispatcher::flex): no sort of the received chunks by local expert.
  bool grouped_dispatch = false;
  /// Bytes per weight a kernel of its own moves after each backward pass to add the weight's gradient into
  /// its main gradient (train::main_grad_bytes_of: no gradient-accumulation fusion); 0: the weight-gradient
  /// GEMM accumulates it (Megatron-Core's gradient_accumulation_fusion) or nothing accumulates.
  int main_grad_bytes = 0;
  friend constexpr bool operator==(const layer_shape&, const layer_shape&) = default;
};

/// A layer: forward ops in topological order; the last op's output is the layer's output.
struct layer {
  fixed_string<32> name;
  layer_role role = layer_role::block;
  layer_shape shape{};
  std::int64_t input_elements = 0;  ///< activation entering the layer, per rank (0 for token ids)
  static_vector<op, max_layer_ops> ops;

  [[nodiscard]] constexpr std::int64_t output_elements() const {
    return ops.empty() ? 0 : ops.back().out_elements;
  }
  friend constexpr bool operator==(const layer&, const layer&) = default;
};

namespace rules {
// Each rule is a function named after the mistake. In a constant expression, calling it (it is not
// constexpr) stops compilation and the compiler prints its name; at run time it throws input_error.
[[noreturn]] inline void op_input_must_be_an_earlier_op_of_the_same_layer() {
  throw input_error(
      "an op is wired to an input that is not an earlier op of its layer; build producers first");
}
[[noreturn]] inline void op_shapes_must_be_positive() {
  throw input_error("an op has a zero or negative dimension; every GEMM and tensor size must be positive");
}
[[noreturn]] inline void layer_has_too_many_ops_raise_max_layer_ops() {
  throw input_error("a layer has more ops than phaze::model::max_layer_ops allows");
}
[[noreturn]] inline void layer_must_have_at_least_one_op() {
  throw input_error("a layer has no ops; add at least one op before build()");
}
}  // namespace rules

/// A handle to a tensor produced while building a layer: its producer and its element count.
struct tensor {
  std::int16_t producer = layer_input;
  std::int64_t elements = 0;
};

/// Builds a layer op by op, in constant expressions or at run time:
/// @code
///   constexpr layer mlp = [] {
///     layer_builder b{"mlp", layer_role::block, shape, tokens * hidden};
///     auto h = b.matmul("fc1", b.input(), {1, tokens, hidden, 4 * hidden}, tp_split::column);
///     auto g = b.vector(op_kind::gelu, "gelu", h, saves::input0);
///     b.matmul("fc2", g, {1, tokens, 4 * hidden, hidden}, tp_split::row);
///     return std::move(b).build();
///   }();
/// @endcode
/// A wiring or shape mistake stops compilation with a message naming the rule that was broken.
class layer_builder {
 public:
  constexpr layer_builder(std::string_view name, layer_role role, layer_shape shape,
                          std::int64_t input_elements) {
    layer_.name = name;
    layer_.role = role;
    layer_.shape = shape;
    layer_.input_elements = input_elements;
  }

  /// The layer's input tensor.
  [[nodiscard]] constexpr tensor input() const { return {layer_input, layer_.input_elements}; }
  /// Tags the ops added from now on as members of the submodules `bits` too (recompute_module; scopes
  /// nest); returns the tags before, for leave_module.
  constexpr std::uint8_t enter_module(std::uint8_t bits) {
    const std::uint8_t before = module_;
    module_ = static_cast<std::uint8_t>(module_ | bits);
    return before;
  }
  /// Restores the tags enter_module returned.
  constexpr void leave_module(std::uint8_t before) { module_ = before; }
  /// The shape the layer is built for.
  [[nodiscard]] constexpr const layer_shape& shape() const { return layer_.shape; }

  /// A matmul with weights: x[m,k] * W[k,n] (+ bias of n), `g.batch` independent ones with weights of their
  /// own (grouped GEMMs). Keeps its input for the weight gradient. In a block under FP8 training it runs
  /// in FP8 unless `bf16_only` (a router, which Transformer Engine leaves in higher precision).
  constexpr tensor matmul(std::string_view name, tensor x, gemm_dims g, tp_split split, bool bias = false,
                          bool tied_weights = false, bool bf16_only = false) {
    check_dims(g);
    op o = base(op_kind::matmul, name, split);
    o.gemm = g;
    o.in_elements = x.elements;
    o.out_elements = g.batch * g.m * g.n;
    o.params = g.batch * (g.k * g.n + (bias ? g.n : 0));
    o.tied_params = tied_weights ? g.k * g.n : 0;
    o.saved = saves::input0;
    o.fp8 = layer_.shape.fp8 && layer_.role == layer_role::block && !bf16_only;
    o.fp8_cast = o.fp8 && !produced_by_norm(x);
    return add(o, {x});
  }

  /// The grouped GEMM of a block's routed experts on one rank: `g.batch` experts, `g.m` tokens each
  /// (model::op::expert), each with a bias of its own when `bias`.
  constexpr tensor expert_matmul(std::string_view name, tensor x, gemm_dims g, tp_split split,
                                 bool bias = false) {
    const tensor t = matmul(name, x, g, split, bias);
    layer_.ops.back().expert = true;
    return t;
  }

  /// A matmul of two activations, per (batch, head): a[m,k] * b[k,n].
  constexpr tensor batched_matmul(std::string_view name, tensor a, tensor b, gemm_dims g, std::uint8_t saved,
                                  bool attention_core = true) {
    check_dims(g);
    op o = base(op_kind::batched_matmul, name, tp_split::heads);
    o.gemm = g;
    o.in_elements = a.elements + (a.producer == b.producer ? 0 : b.elements);
    o.out_elements = g.batch * g.m * g.n;
    o.saved = saved;
    if (attention_core) o.modules = static_cast<std::uint8_t>(o.modules | recompute_module::core_attn);
    return add(o, {a, b});
  }

  /// Fused attention over `batch` (microbatch x heads) independent heads of `head_dim` over a sequence of
  /// `s`, reading the projected queries, keys and values `qkv` and writing `batch * s * head_dim` context
  /// elements. It keeps its input and its output for the backward pass (with a per-row softmax statistic,
  /// s per head, fp32) and never the s x s scores: the backward pass recomputes them (Dao et al. 2022).
  /// Under context parallelism a rank's `s` queries attend to `keys` (the whole sequence); 0: `s`.
  /// `value_dim` (0: head_dim) is the width of each head's output when it differs (latent attention).
  constexpr tensor fused_attention(std::string_view name, tensor qkv, std::int64_t batch, std::int64_t s,
                                   std::int64_t head_dim, bool causal, std::int64_t window = 0,
                                   std::int64_t keys = 0, std::int64_t value_dim = 0) {
    const std::int64_t n = keys > 0 ? keys : s;
    check_dims({batch, s, head_dim, n});
    op o = base(op_kind::fused_attention, name, tp_split::heads);
    o.gemm = {batch, s, head_dim, n};
    o.in_elements = qkv.elements;
    o.out_elements = batch * s * (value_dim > 0 ? value_dim : head_dim);
    o.saved = saves::input0 | saves::output;
    o.causal = causal;
    o.window = window > 0 && window < n ? window : 0;
    o.kernel = shape().kernel;
    return add(o, {qkv});
  }

  /// An elementwise or normalising vector op over one input. `out_elements` defaults to the input's.
  constexpr tensor vector(op_kind kind, std::string_view name, tensor x, std::uint8_t saved,
                          tp_split split = tp_split::replicated, std::int64_t params = 0,
                          std::int64_t out_elements = 0, bool attention_core = false) {
    op o = base(kind, name, split);
    o.in_elements = x.elements;
    o.out_elements = out_elements > 0 ? out_elements : x.elements;
    o.params = params;
    o.saved = saved;
    o.fused_loss = kind == op_kind::cross_entropy && layer_.shape.fused_loss;
    if (attention_core) o.modules = static_cast<std::uint8_t>(o.modules | recompute_module::core_attn);
    check_positive(o.out_elements);
    return add(o, {x});
  }

  /// Marks the op added last as a permutation by index run unfused (op::permutation).
  constexpr void mark_permutation(index_kernel k) { layer_.ops.back().permutation = k; }
  /// Marks the op added last as `share` of one of mamba_ssm's kernels over `tokens` (op::mamba).
  constexpr void mark_mamba(mamba_kernel k, std::int64_t tokens, double share) {
    op& o = layer_.ops.back();
    o.mamba = k;
    o.kernel_tokens = tokens;
    o.kernel_share = share;
  }

  /// Two tensors joined along their features (torch.cat, with parts broadcast): one memory-bound copy that
  /// reads both and writes `out_elements`.
  constexpr tensor concat(std::string_view name, tensor a, tensor b, std::int64_t out_elements,
                          tp_split split = tp_split::replicated) {
    op o = base(op_kind::copy, name, split);
    o.in_elements = a.elements + b.elements;
    o.out_elements = out_elements;
    o.saved = saves::nothing;
    check_positive(o.out_elements);
    return add(o, {a, b});
  }

  /// Elementwise sum of two tensors of the same size (a residual connection).
  constexpr tensor add_residual(std::string_view name, tensor a, tensor b,
                                tp_split split = tp_split::replicated) {
    op o = base(op_kind::residual_add, name, split);
    o.in_elements = a.elements + b.elements;
    o.out_elements = a.elements;
    check_positive(o.out_elements);
    return add(o, {a, b});
  }

  /// An embedding-table lookup of `tokens` rows from a table of `rows` x `width` (per rank). `tied_copy`: the
  /// table is a copy of the input embedding's, kept where this layer runs (counted once in the model, as a
  /// tied output projection is: op::tied_params).
  constexpr tensor embedding(std::string_view name, std::int64_t tokens, std::int64_t rows,
                             std::int64_t width, tp_split split = tp_split::replicated,
                             bool tied_copy = false) {
    check_positive(tokens);
    check_positive(rows);
    check_positive(width);
    op o = base(op_kind::embedding, name, split);
    o.in_elements = 0;
    o.out_elements = tokens * width;
    o.params = rows * width;
    o.tied_params = tied_copy ? o.params : 0;
    return add(o, {});
  }

  /// A matmul with the weights of an earlier matmul of the same layer (the output projection the
  /// multi-token prediction modules share with the head): its work and its gradients, no parameters of its
  /// own.
  constexpr tensor shared_matmul(std::string_view name, tensor x, gemm_dims g, tp_split split) {
    const tensor t = matmul(name, x, g, split);
    layer_.ops.back().params = 0;
    layer_.ops.back().tied_params = 0;
    return t;
  }

  /// A tensor-parallel collective or marker over `group` ranks. `out_elements` is the per-rank result.
  constexpr tensor collective(op_kind kind, std::string_view name, tensor x, int group,
                              std::int64_t out_elements) {
    op o = base(kind, name, tp_split::replicated);
    o.in_elements = x.elements;
    o.out_elements = out_elements;
    o.group = group;
    check_positive(out_elements);
    return add(o, {x});
  }

  /// The layer, checked.
  [[nodiscard]] constexpr layer build() const {
    if (layer_.ops.empty()) rules::layer_must_have_at_least_one_op();
    return layer_;
  }

 private:
  [[nodiscard]] constexpr op base(op_kind kind, std::string_view name, tp_split split) const {
    op o;
    o.kind = kind;
    o.name = name;
    o.split = split;
    o.elem_bytes = layer_.shape.elem_bytes;
    o.modules = module_;
    o.eager = layer_.shape.eager_vector;
    return o;
  }
  static constexpr void check_positive(std::int64_t v) {
    if (v <= 0) rules::op_shapes_must_be_positive();
  }
  /// Whether `x` is a norm's output, directly or through the tensor-parallel markers and the
  /// sequence-parallel all-gather after it: Transformer Engine's LayerNormLinear writes its norm's output in
  /// FP8, so that GEMM needs no quantization pass of its own.
  [[nodiscard]] constexpr bool produced_by_norm(tensor x) const {
    std::int16_t p = x.producer;
    while (p != layer_input) {
      const op& o = layer_.ops[static_cast<std::size_t>(p)];
      if (o.kind == op_kind::layernorm || o.kind == op_kind::rmsnorm) return true;
      if ((o.kind != op_kind::tp_copy && o.kind != op_kind::all_gather) || o.inputs.empty()) return false;
      p = o.inputs[0];
    }
    return false;
  }
  static constexpr void check_dims(gemm_dims g) {
    check_positive(g.batch);
    check_positive(g.m);
    check_positive(g.k);
    check_positive(g.n);
  }
  constexpr tensor add(op o, std::initializer_list<tensor> inputs) {
    const auto index = static_cast<std::int16_t>(layer_.ops.size());
    for (const tensor& t : inputs) {
      if (t.producer != layer_input && (t.producer < 0 || t.producer >= index)) {
        rules::op_input_must_be_an_earlier_op_of_the_same_layer();
      }
      o.inputs.push_back(t.producer);
    }
    if (layer_.ops.size() == max_layer_ops) rules::layer_has_too_many_ops_raise_max_layer_ops();
    layer_.ops.push_back(o);
    return {index, o.out_elements};
  }

  layer layer_{};
  std::uint8_t module_ = 0;  // the submodules the ops added now belong to (enter_module)
};

// ---------------------------------------------------------------------------------------------------------
// Backward pass.

namespace detail {
using op_set = static_vector<std::int16_t, max_op_inputs>;

constexpr void add_unique(op_set& s, std::int16_t v) {
  for (auto x : s)
    if (x == v) return;
  s.push_back(v);
}

/// The forward op whose backward is pure bookkeeping (no work): passes gradient dependencies through.
constexpr bool backward_is_identity(op_kind k) {
  return k == op_kind::all_reduce;
}

/// The collective a forward marker becomes in the backward pass (Megatron's conjugate f/g operators).
constexpr op_kind backward_kind(op_kind k) {
  switch (k) {
    case op_kind::tp_copy:
      return op_kind::all_reduce;
    case op_kind::all_gather:
      return op_kind::reduce_scatter;
    case op_kind::reduce_scatter:
      return op_kind::all_gather;
    default:
      return k;
  }
}
}  // namespace detail

/// The backward DAG of a layer, derived from its forward ops in reverse order. Every matmul gets an
/// input-gradient GEMM (dX = dY W^T) and a weight-gradient GEMM (dW = X^T dY); a batched matmul gets a
/// gradient GEMM for each operand; vector ops get their gradient op; embeddings get only a weight gradient
/// (a scatter-add); Megatron's conjugate collectives swap (f <-> g, all-gather <-> reduce-scatter).
/// Inputs of backward ops index the returned list; an empty input list means "the incoming output gradient".
inline constexpr auto backward = [](const layer& l) constexpr -> static_vector<op, max_backward_ops> {
  static_vector<op, max_backward_ops> out;
  const std::size_t n = l.ops.size();
  // grad_of_input[i][k]: backward ops that produce the gradient of forward op i's k-th input.
  std::array<std::array<detail::op_set, 3>, max_layer_ops> grad_of_input{};

  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t i = n - 1 - r;
    const op& f = l.ops[i];
    // The gradient of f's output is ready when every consumer has produced the gradient of that input.
    detail::op_set deps;
    for (std::size_t c = i + 1; c < n; ++c) {
      const op& consumer = l.ops[c];
      for (std::size_t k = 0; k < consumer.inputs.size(); ++k) {
        if (consumer.inputs[k] == static_cast<std::int16_t>(i)) {
          for (auto d : grad_of_input[c][k]) detail::add_unique(deps, d);
        }
      }
    }
    auto make = [&](op_kind kind, op_phase phase, std::string_view suffix) {
      op b = f;
      b.kind = kind;
      b.phase = phase;
      b.name = fixed_string<24>{f.name.view(), suffix};
      b.inputs.clear();
      for (auto d : deps) b.inputs.push_back(d);  // same capacity as deps: every dependency is kept
      b.saved = saves::nothing;
      b.params = 0;
      b.tied_params = 0;
      return b;
    };
    auto emit = [&](op b) {
      const auto index = static_cast<std::int16_t>(out.size());
      out.push_back(b);
      return index;
    };

    if (detail::backward_is_identity(f.kind)) {
      for (std::size_t k = 0; k < f.inputs.size(); ++k) grad_of_input[i][k] = deps;
      continue;
    }
    switch (f.kind) {
      case op_kind::matmul: {
        op dx = make(op_kind::matmul, op_phase::backward_data, "_dx");
        dx.gemm = {f.gemm.batch, f.gemm.m, f.gemm.n, f.gemm.k};
        dx.in_elements = f.out_elements;
        dx.out_elements = f.gemm.batch * f.gemm.m * f.gemm.k;
        op dw = make(op_kind::matmul, op_phase::backward_weight, "_dw");
        dw.gemm = {f.gemm.batch, f.gemm.k, f.gemm.m, f.gemm.n};
        dw.in_elements = f.in_elements + f.out_elements;
        dw.out_elements = f.params;
        // A weight tied to the embedding is one parameter: its gradient is added once, by the embedding's
        // op (an output layer on another pipeline stage than the embedding, which holds a copy of its own,
        // is charged the same, one add short).
        dw.accumulated = l.shape.main_grad_bytes > 0 ? f.params - f.tied_params : 0;
        dw.main_grad_bytes = l.shape.main_grad_bytes;
        const auto dx_index = emit(dx);
        emit(dw);
        grad_of_input[i][0].push_back(dx_index);
        break;
      }
      case op_kind::batched_matmul: {
        op da = make(op_kind::batched_matmul, op_phase::backward_data, "_da");
        da.gemm = {f.gemm.batch, f.gemm.m, f.gemm.n, f.gemm.k};
        da.out_elements = f.gemm.batch * f.gemm.m * f.gemm.k;
        op db = make(op_kind::batched_matmul, op_phase::backward_data, "_db");
        db.gemm = {f.gemm.batch, f.gemm.k, f.gemm.m, f.gemm.n};
        db.out_elements = f.gemm.batch * f.gemm.k * f.gemm.n;
        const auto a_index = emit(da);
        const auto b_index = emit(db);
        grad_of_input[i][0].push_back(a_index);
        if (f.inputs.size() > 1) grad_of_input[i][1].push_back(b_index);
        break;
      }
      case op_kind::fused_attention: {
        // One kernel computes dQ, dK and dV from the output gradient and what the forward kept.
        op d = make(op_kind::fused_attention, op_phase::backward_data, "_d");
        d.in_elements = f.out_elements + f.in_elements;
        d.out_elements = f.in_elements;
        const auto index = emit(d);
        grad_of_input[i][0].push_back(index);
        break;
      }
      case op_kind::embedding: {
        op dw = make(op_kind::embedding, op_phase::backward_weight, "_dw");
        dw.in_elements = f.out_elements;
        dw.accumulated = l.shape.main_grad_bytes > 0 ? f.params : 0;
        dw.main_grad_bytes = l.shape.main_grad_bytes;
        emit(dw);
        break;
      }
      default: {
        op b = make(detail::backward_kind(f.kind), op_phase::backward_data, "_d");
        // A gradient op reads the output gradient (and what was saved) and writes the input gradient.
        b.in_elements = f.out_elements;
        b.out_elements = f.in_elements > 0 ? f.in_elements : f.out_elements;
        // A sum of two tensors passes its output gradient to both inputs unchanged; a one-input sum over
        // rows (a mixture of experts' unpermutation, top_k rows onto each token) gathers it back to every
        // row it summed, as its forward read them.
        if (f.kind == op_kind::residual_add && f.inputs.size() > 1) b.out_elements = f.out_elements;
        const auto index = emit(b);
        for (std::size_t k = 0; k < f.inputs.size(); ++k) grad_of_input[i][k].push_back(index);
        break;
      }
    }
  }
  return out;
};

// ---------------------------------------------------------------------------------------------------------
// Totals.

/// Parameters of a layer on one rank. Tied parameters (an output projection sharing the input embedding)
/// are left out unless `include_tied`.
inline constexpr auto layer_params = [](const layer& l, bool include_tied = false) constexpr -> std::int64_t {
  std::int64_t total = 0;
  for (const op& o : l.ops) total += include_tied ? o.params : o.params - o.tied_params;
  return total;
};

/// Parameters of a layer's routed experts on one rank (model::op::expert): part of layer_params.
inline constexpr auto layer_expert_params = [](const layer& l) constexpr -> std::int64_t {
  std::int64_t total = 0;
  for (const op& o : l.ops)
    if (o.expert) total += o.params;
  return total;
};

/// FLOPs of a list of ops, optionally only those on one unit.
template <class Ops>
constexpr flops sum_flops(const Ops& ops, unit only) {
  flops total{0.0};
  for (const op& o : ops)
    if (unit_of(o) == only) total += flops_of(o);
  return total;
}

/// Matrix (tensor-unit) FLOPs of the forward pass: the "model FLOPs" of Narayanan et al. (SC'21).
inline constexpr auto forward_matmul_flops = [](const layer& l) constexpr {
  return sum_flops(l.ops, unit::tensor);
};
/// Vector-unit FLOPs of the forward pass.
inline constexpr auto forward_vector_flops = [](const layer& l) constexpr {
  return sum_flops(l.ops, unit::vector);
};
/// Matrix FLOPs of the backward pass (input- and weight-gradient GEMMs): twice the forward's.
inline constexpr auto backward_matmul_flops = [](const layer& l) constexpr {
  return sum_flops(backward(l), unit::tensor);
};
inline constexpr auto backward_vector_flops = [](const layer& l) constexpr {
  return sum_flops(backward(l), unit::vector);
};

/// Under torchtitan's per-op selective checkpointing (recompute_module::op; torchtitan's
/// activation_checkpoint.selective_ac_option "op", torchtitan/distributed/activation_checkpoint.py,
/// _apply_op_sac, at commit cfb93265): the share of an op's output the policy keeps for the backward
/// pass instead of computing it again. The policy keeps the outputs of the ops on its list, every bias-free
/// matrix multiplication (aten.mm) but every second one of a block, the attention kernels and the
/// reduce-scatters (the llama3 model's _op_sac_save_list), and runs
/// everything else of the block again in its backward pass. A matmul's share is op::op_policy_saved
/// (keep_by_op_policy); the other ops keep all or nothing.
constexpr double kept_by_op_policy(const op& o) {
  switch (o.kind) {
    case op_kind::matmul:
      return o.op_policy_saved;
    case op_kind::fused_attention:
    case op_kind::reduce_scatter:
      return 1.0;
    default:
      return 0.0;
  }
}

/// The share of op `o`'s forward pass that selective recomputation runs again in layer `l`: all of it for
/// an op of the submodules the shape names (layer_shape::recompute_modules), none for the others; under
/// torchtitan's per-op policy what the policy does not keep of a block's (kept_by_op_policy), and nothing of
/// the other layers, which torchtitan does not checkpoint.
constexpr double recomputed_share(const layer& l, const op& o) {
  if ((l.shape.recompute_modules & recompute_module::op) != 0)
    return l.role == layer_role::block ? 1.0 - kept_by_op_policy(o) : 0.0;
  return (o.modules & l.shape.recompute_modules) != 0 ? 1.0 : 0.0;
}

/// Bytes of activations a layer keeps between its forward and backward pass on one rank, by recomputation
/// mode (Korthikanti et al. 2022, section 4). Each saved tensor is counted once however many ops keep it
/// (an FP8 GEMM keeps its own one-byte copy: once more at one byte when other ops keep it too, at one byte
/// only when no other op does); a tensor produced by an all-gather is kept in its sharded form (as Megatron
/// does with sequence parallelism); dropout masks take one byte per element. Selective recomputation drops
/// the tensors that are produced and kept only inside the attention core; full recomputation keeps only the
/// layer input.
inline constexpr auto activation_bytes = [](const layer& l, recompute mode) constexpr -> bytes {
  const double eb = static_cast<double>(l.shape.elem_bytes);
  if (mode == recompute::full) return bytes{static_cast<double>(l.input_elements) * eb};
  if (mode == recompute::selective && l.role == layer_role::block &&
      (l.shape.recompute_modules & recompute_module::op) != 0) {
    // torchtitan's per-op policy: the block's input (the checkpoint keeps it) and what the policy keeps of
    // each op's output (kept_by_op_policy), with fused attention's fp32 log-sum-exp per row of each head.
    double total = static_cast<double>(l.input_elements) * eb;
    for (const op& o : l.ops) {
      total += kept_by_op_policy(o) * static_cast<double>(o.out_elements) * eb;
      if (o.kind == op_kind::fused_attention) total += 4.0 * static_cast<double>(o.gemm.batch * o.gemm.m);
    }
    return bytes{total};
  }

  // Selective recomputation of the submodules the shape names (layer_shape::recompute_modules): a
  // checkpointed one drops what it computes and keeps only for itself, an output-discarding one its outputs.
  const std::uint8_t selected = mode == recompute::selective ? l.shape.recompute_modules : std::uint8_t{0};
  const auto checkpointed = static_cast<std::uint8_t>(selected & recompute_module::checkpointed);
  const auto discarded = static_cast<std::uint8_t>(selected & recompute_module::output_discarding);
  const std::size_t n = l.ops.size();
  // For each tensor (index 0: the layer input, i+1: op i's output): is it kept, and by an op outside every
  // checkpointed submodule its producer belongs to?
  std::array<bool, max_layer_ops + 1> kept{};
  std::array<bool, max_layer_ops + 1> kept_outside{};
  // Kept by an FP8 GEMM (one byte per element) and by any other op (elem_bytes): Transformer Engine's
  // linear layers keep their own FP8 copy of their input, beside what the other consumers keep.
  std::array<bool, max_layer_ops + 1> kept_in_fp8{};
  std::array<bool, max_layer_ops + 1> kept_in_full{};
  double masks = 0.0;
  double statistics = 0.0;
  auto keep = [&](std::int16_t producer, const op& by, bool in_fp8) {
    const auto t = static_cast<std::size_t>(producer + 1);
    kept[t] = true;
    const std::uint8_t inside =
        producer >= 0 ? l.ops[static_cast<std::size_t>(producer)].modules & checkpointed : std::uint8_t{0};
    if ((by.modules & inside) == 0) kept_outside[t] = true;
    (in_fp8 ? kept_in_fp8 : kept_in_full)[t] = true;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const op& o = l.ops[i];
    if ((o.saved & saves::input0) && !o.inputs.empty()) keep(o.inputs[0], o, o.fp8);
    if ((o.saved & saves::input1) && o.inputs.size() > 1) keep(o.inputs[1], o, false);
    // An eager fp32 softmax keeps its fp32 output for its backward pass; the probabilities in the training
    // format are kept only where another op keeps them (the context GEMM without dropout).
    if (eager_fp32_softmax(o) && (o.saved & saves::output)) {
      if ((o.modules & checkpointed) == 0) statistics += 4.0 * static_cast<double>(o.out_elements);
    } else if (o.saved & saves::output) {
      keep(static_cast<std::int16_t>(i), o, false);
    }
    if ((o.saved & saves::mask) && (o.modules & checkpointed) == 0)
      masks += static_cast<double>(o.out_elements);
    // Fused attention keeps one fp32 softmax statistic (log-sum-exp) per row of each head's scores.
    if (o.kind == op_kind::fused_attention) statistics += 4.0 * static_cast<double>(o.gemm.batch * o.gemm.m);
    // The cross-entropy keeps the softmax of the logits in fp32 (Megatron-LM's vocab-parallel cross-entropy
    // computes in fp32 and saves its softmax for the backward pass): 4 bytes per logit where the logits
    // themselves take fewer.
    // A fused loss keeps the logits (its input, kept above) and one fp32 log-sum-exp per token instead.
    if (o.kind == op_kind::cross_entropy && !o.fused_loss && eb < 4.0)
      statistics += (4.0 - eb) * static_cast<double>(o.in_elements);
    if (o.kind == op_kind::cross_entropy && o.fused_loss)
      statistics += 4.0 * static_cast<double>(o.out_elements);
  }
  // A checkpointed submodule keeps the inputs that enter it from outside: its forward runs again from them
  // (the sequence-sharded input of an MLP entered through an all-gather, say).
  for (std::size_t i = 0; i < n; ++i) {
    const auto inside = static_cast<std::uint8_t>(l.ops[i].modules & checkpointed);
    if (inside == 0) continue;
    for (const std::int16_t in : l.ops[i].inputs) {
      const std::uint8_t from = in >= 0 ? l.ops[static_cast<std::size_t>(in)].modules : std::uint8_t{0};
      if ((from & inside) != 0) continue;
      const auto t = static_cast<std::size_t>(in + 1);
      kept[t] = kept_outside[t] = kept_in_full[t] = true;
    }
  }
  double total = masks + statistics;
  for (std::size_t t = 0; t <= n; ++t) {
    if (!kept[t]) continue;
    std::uint8_t producer = t > 0 ? l.ops[t - 1].modules : std::uint8_t{0};
    if ((producer & checkpointed) != 0 && !kept_outside[t]) continue;
    // A tensor-parallel entry (all-gather or marker) passes on the tensor it enters with: kept for a GEMM,
    // it is a discarded norm's output all the same.
    if (t > 0) {
      const op& p = l.ops[t - 1];
      if ((p.kind == op_kind::all_gather || p.kind == op_kind::tp_copy) && !p.inputs.empty() &&
          p.inputs[0] >= 0)
        producer = static_cast<std::uint8_t>(producer | l.ops[static_cast<std::size_t>(p.inputs[0])].modules);
    }
    // An output-discarding submodule's output: its bf16 copy is computed again; an FP8 GEMM's own quantized
    // copy of it stays (Transformer Engine keeps it).
    const bool full_copy = kept_in_full[t] && (producer & discarded) == 0;
    std::int64_t elements = l.input_elements;
    if (t > 0) {
      const op& p = l.ops[t - 1];
      elements = p.kind == op_kind::all_gather ? p.in_elements : p.out_elements;
    }
    total += static_cast<double>(elements) * ((full_copy ? eb : 0.0) + (kept_in_fp8[t] ? 1.0 : 0.0));
  }
  return bytes{total};
};

/// Bytes leaving the layer towards the next one (a pipeline boundary): its output activation.
inline constexpr auto boundary_bytes = [](const layer& l) constexpr -> bytes {
  return bytes{static_cast<double>(l.output_elements()) * static_cast<double>(l.shape.elem_bytes)};
};

}  // namespace phaze::model
