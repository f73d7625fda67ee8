/// @file
/// A model: an architecture, its distinct layers and the graph of its layers (a transformer's embedding,
/// blocks and head, or the layers of a composite model), with the totals users ask for first: parameters,
/// FLOPs per token and per iteration.
#pragma once

#include <cstdint>
#include <optional>

#include "phaze/core/quantity.hpp"
#include "phaze/core/static_vector.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/transformer.hpp"

namespace phaze::model {

/// Most layer nodes in a model graph (megatron-1T has 128 blocks, plus embedding and head).
inline constexpr std::size_t max_model_layers = 256;
static_assert(max_model_layers == static_cast<std::size_t>(limits::max_layers) + 2,
              "the blocks the readers accept, with the embedding and the head, fill a model's graph");
/// Most distinct layers in one model (a transformer has three; AMP's TransGAN generator fourteen).
inline constexpr std::size_t max_layer_kinds = 24;

/// An edge of the layer graph: the output of `from` feeds `to`.
struct layer_edge {
  std::int16_t from = 0;
  std::int16_t to = 0;
  friend constexpr bool operator==(const layer_edge&, const layer_edge&) = default;
};

/// How a distinct layer of a model is built.
enum class layer_recipe : std::uint8_t {
  transformer,  ///< the embedding, a block or the head of a transformer architecture
  dense,        ///< a linear layer with weights: rows x in -> rows x out per sample (+ bias)
  pointwise,    ///< a memory-bound op: in elements per sample -> out (a copy or resize; with `params`, the
                ///< addition of a learned table such as a position embedding)
  view,         ///< a reshape: the same elements, no work
};

/// One distinct layer of a model: its role, and what it is built from. A transformer layer is built from
/// the model's architecture, or from an architecture of its own (a model whose blocks differ, such as a
/// generator whose blocks grow an image) that it runs over `sequences` sequences per sample (windows of an
/// image; its architecture's `sequence` is the tokens of one). The other recipes are not split by tensor
/// parallelism (every rank runs them whole).
struct layer_spec {
  fixed_string<32> name;
  layer_role role = layer_role::block;
  layer_recipe recipe = layer_recipe::transformer;
  bool own_architecture = false;      ///< transformer: built from `architecture`, not the model's config
  transformer_config architecture{};  ///< transformer with an architecture of its own
  std::int64_t sequences = 1;         ///< transformer with an architecture of its own: sequences per sample
  std::int64_t rows = 1;              ///< dense: rows per sample
  std::int64_t in = 0;                ///< dense: input features; pointwise and view: elements per sample in
  std::int64_t out = 0;               ///< dense: output features; pointwise and view: elements per sample out
  std::int64_t params = 0;            ///< pointwise: learned elements added (0: a copy)
  bool bias = false;                  ///< dense
  /// transformer block of a mixture-of-experts model that keeps a dense MLP of the model's ffn
  /// (transformer_config::dense_layers)
  bool dense_mlp = false;
  /// transformer block kept in bf16 under FP8 training (layer_shape::fp8 off for it): Megatron-Core's
  /// --first-last-layers-bf16, which Megatron-Bridge's FP8 current-scaling recipe turns on for the first and
  /// the last block (with_bf16_blocks)
  bool bf16 = false;
  /// transformer block that attends to every earlier key where the model's others slide a window
  /// (transformer_config::full_attention_every)
  bool full_attention = false;
  /// transformer block of a hybrid model: its symbol in the layer pattern ('M', '*', '-' or 'E';
  /// transformer_config::hybrid_pattern); 0: attention and MLP
  char hybrid = '\0';
  friend constexpr bool operator==(const layer_spec&, const layer_spec&) = default;
};

/// A model: its architecture, its distinct layers and its layer graph, whose nodes index the distinct
/// layers (two nodes of one kind are the same layer, which is what lets a scheduler solve a block once).
/// Node 0 is the input layer and the last node the output layer; the nodes between them are the body
/// (a transformer's blocks). For a transformer the kinds are its embedding, block and head, built from
/// `config`; a composite model (model::composite) lists kinds of its own and `config` names and summarises
/// it.
struct model {
  transformer_config config;
  static_vector<layer_spec, max_layer_kinds> kinds;
  static_vector<std::uint8_t, max_model_layers> nodes;  ///< the kind of every node
  static_vector<layer_edge, max_model_layers> edges;

  [[nodiscard]] constexpr std::size_t size() const { return nodes.size(); }
  /// The spec of node `i`'s layer.
  [[nodiscard]] constexpr const layer_spec& kind_at(std::size_t i) const { return kinds.at(nodes.at(i)); }
  /// The role of node `i`.
  [[nodiscard]] constexpr layer_role role_at(std::size_t i) const { return kind_at(i).role; }
  friend constexpr bool operator==(const model&, const model&) = default;
};

namespace rules {
[[noreturn]] inline void model_has_too_many_layers_raise_max_model_layers() {
  throw input_error(
      "the model has more than 256 layer nodes (254 transformer blocks with the embedding and the head), "
      "the most phaze builds (docs/limits.md); the deepest published models have 128 blocks");
}
[[noreturn]] inline void model_has_too_many_layer_kinds_raise_max_layer_kinds() {
  throw input_error("the model has more distinct layers than phaze::model::max_layer_kinds allows");
}
[[noreturn]] inline void a_model_needs_an_input_layer_a_body_and_an_output_layer() {
  throw input_error(
      "a model needs at least three layer nodes: an input layer, one or more body layers and an output "
      "layer");
}
[[noreturn]] inline void a_node_names_a_layer_kind_the_model_does_not_have() {
  throw input_error("a layer node names a layer kind the model does not list; give kinds 0 .. kinds - 1");
}
[[noreturn]] inline void layer_sizes_must_be_positive() {
  throw input_error(
      "a dense, pointwise or view layer has a zero or negative size; give rows, in and out >= 1 and params "
      ">= 0");
}
[[noreturn]] inline void a_view_keeps_its_elements() {
  throw input_error("a view layer reshapes its input: give it as many elements out as in");
}
[[noreturn]] inline void the_sequence_of_a_composite_model_is_fixed_by_its_layers() {
  throw input_error(
      "this model's layers have sequence lengths of their own (a composite model); its sequence cannot be "
      "changed: drop `sequence`");
}
[[noreturn]] inline void a_composite_model_has_no_vocabulary_to_change() {
  throw input_error("no layer of this model is built from its vocabulary (a composite model); drop `vocab`");
}
}  // namespace rules

/// The model graph of a transformer: embedding -> blocks -> head, a chain.
inline constexpr auto make_model = [](const transformer_config& c) constexpr -> model {
  validate(c);
  if (c.layers + 2 > static_cast<std::int64_t>(max_model_layers))
    rules::model_has_too_many_layers_raise_max_model_layers();
  model m;
  m.config = c;
  m.kinds.push_back({.name = "embedding", .role = layer_role::embedding});
  m.kinds.push_back({.name = "block", .role = layer_role::block});
  m.kinds.push_back({.name = "head", .role = layer_role::head});
  // The kind of every variant a block can be: with a dense MLP (the first dense_layers blocks and, with
  // moe_every, those between the expert blocks), with full
  // attention among windowed blocks (every full_attention_every-th), or both.
  const auto kind_of = [&](bool dense, bool full) -> std::uint8_t {
    if (!dense && !full) return 1;
    for (std::size_t k = 3; k < m.kinds.size(); ++k)
      if (m.kinds[k].dense_mlp == dense && m.kinds[k].full_attention == full)
        return static_cast<std::uint8_t>(k);
    m.kinds.push_back({.name = dense && full ? "dense_full_block"
                               : dense       ? "dense_block"
                                             : "full_block",
                       .role = layer_role::block,
                       .dense_mlp = dense,
                       .full_attention = full});
    return static_cast<std::uint8_t>(m.kinds.size() - 1);
  };
  // A hybrid model's blocks: one kind per symbol of its pattern ('-' blocks keep a dense MLP), the first
  // block's in kind 1.
  const auto hybrid_spec = [](char symbol) -> layer_spec {
    return {.name = symbol == 'M'   ? "mamba_block"
                    : symbol == '*' ? "attention_block"
                    : symbol == '-' ? "mlp_block"
                                    : "moe_block",
            .role = layer_role::block,
            .dense_mlp = symbol == '-',
            .hybrid = symbol};
  };
  if (c.hybrid()) m.kinds[1] = hybrid_spec(c.block_symbol(0));
  const auto hybrid_kind = [&](char symbol) -> std::uint8_t {
    for (std::size_t k = 1; k < m.kinds.size(); ++k)  // the head (kind 2) carries no symbol
      if (m.kinds[k].hybrid == symbol) return static_cast<std::uint8_t>(k);
    m.kinds.push_back(hybrid_spec(symbol));
    return static_cast<std::uint8_t>(m.kinds.size() - 1);
  };
  m.nodes.push_back(0);
  for (std::int64_t i = 0; i < c.layers; ++i) {
    if (c.hybrid()) {
      m.nodes.push_back(hybrid_kind(c.block_symbol(i)));
      continue;
    }
    const bool full = c.full_attention_every > 1 && i % c.full_attention_every == c.full_attention_every - 1;
    m.nodes.push_back(kind_of(c.experts > 0 && !c.moe_block(i), full));
  }
  m.nodes.push_back(2);
  for (std::size_t i = 0; i + 1 < m.nodes.size(); ++i) {
    m.edges.push_back({static_cast<std::int16_t>(i), static_cast<std::int16_t>(i + 1)});
  }
  return m;
};

/// A composite model: the chain of `chain` (each entry a kind's index in `kinds`, node 0 the input layer,
/// the last the output layer), described by `summary` (its name and headline numbers; `summary.layers`
/// counts the transformer blocks). Checks every kind and node.
inline constexpr auto make_chain_model =
    [](const transformer_config& summary, std::initializer_list<layer_spec> kinds,
       std::initializer_list<std::uint8_t> chain) constexpr -> model {
  validate(summary);
  if (kinds.size() > max_layer_kinds) rules::model_has_too_many_layer_kinds_raise_max_layer_kinds();
  if (chain.size() > max_model_layers) rules::model_has_too_many_layers_raise_max_model_layers();
  if (chain.size() < 3) rules::a_model_needs_an_input_layer_a_body_and_an_output_layer();
  model m;
  m.config = summary;
  for (const layer_spec& k : kinds) {
    if (k.recipe == layer_recipe::transformer) {
      if (k.own_architecture) validate(k.architecture);
      if (k.sequences < 1) rules::layer_sizes_must_be_positive();
    } else {
      if (k.rows < 1 || k.in < 1 || k.out < 1 || k.params < 0) rules::layer_sizes_must_be_positive();
      if (k.recipe == layer_recipe::view && k.in != k.out) rules::a_view_keeps_its_elements();
    }
    m.kinds.push_back(k);
  }
  for (const std::uint8_t n : chain) {
    if (n >= m.kinds.size()) rules::a_node_names_a_layer_kind_the_model_does_not_have();
    m.nodes.push_back(n);
  }
  for (std::size_t i = 0; i + 1 < m.nodes.size(); ++i) {
    m.edges.push_back({static_cast<std::int16_t>(i), static_cast<std::int16_t>(i + 1)});
  }
  return m;
};

/// Whether some layer of `m` is not built from its architecture (`config`): a composite model.
inline constexpr auto composite = [](const model& m) constexpr -> bool {
  for (const auto& k : m.kinds)
    if (k.recipe != layer_recipe::transformer || k.own_architecture) return true;
  return false;
};

/// The nodes between the input and the output layer: a transformer's blocks.
inline constexpr auto body_nodes = [](const model& m) constexpr -> std::int64_t {
  return static_cast<std::int64_t>(m.size()) - 2;
};

/// The architecture a transformer kind is built from.
constexpr const transformer_config& architecture_of(const model& m, const layer_spec& k) {
  return k.own_architecture ? k.architecture : m.config;
}

/// The shape a kind's layer is built for when the run's layers are built for `shape`: a transformer of its
/// own architecture runs its own sequence over `sequences` sequences per sample.
constexpr layer_shape shape_of_kind(const layer_spec& k, layer_shape shape) {
  if (k.recipe == layer_recipe::transformer && k.own_architecture) {
    shape.sequence = 0;
    shape.microbatch *= k.sequences;
  }
  return shape;
}

/// The layer of kind `k` of model `m`, built for `shape`.
inline constexpr auto build_kind =
    [](const model& m, const layer_spec& k, const layer_shape& shape) constexpr -> layer {
  const std::int64_t b = shape.microbatch;
  switch (k.recipe) {
    case layer_recipe::transformer: {
      layer_shape own = shape_of_kind(k, shape);
      if (k.bf16) own.fp8 = false;
      transformer_config arch = architecture_of(m, k);
      if (k.full_attention) {
        arch.attention_window = 0;
        arch.full_attention_every = 0;
      }
      if (k.dense_mlp) {
        own.ep = 1;  // no experts to spread
        own.etp = 0;
        return make_layer(arch.without_experts(), k.role, own, k.hybrid);
      }
      return make_layer(arch, k.role, own, k.hybrid);
    }
    case layer_recipe::dense: {
      layer_builder lb{k.name.view(), k.role, shape, b * k.rows * k.in};
      lb.matmul(k.name.view(), lb.input(), {1, b * k.rows, k.in, k.out}, tp_split::replicated, k.bias);
      return lb.build();
    }
    case layer_recipe::pointwise: {
      layer_builder lb{k.name.view(), k.role, shape, b * k.in};
      lb.vector(k.params > 0 ? op_kind::residual_add : op_kind::copy, k.name.view(), lb.input(),
                saves::nothing, tp_split::replicated, k.params, b * k.out);
      return lb.build();
    }
    case layer_recipe::view: {
      layer_builder lb{k.name.view(), k.role, shape, b * k.in};
      lb.vector(op_kind::view, k.name.view(), lb.input(), saves::nothing);
      return lb.build();
    }
  }
  return {};
};

/// The layer at node `i`, built for `shape`.
inline constexpr auto layer_at =
    [](const model& m, std::size_t i, const layer_shape& shape) constexpr -> layer {
  return build_kind(m, m.kind_at(i), shape);
};

/// Checks that every transformer layer of `m` can be split by `shape` (tensor-parallel width, sequence
/// parallelism): throws input_error (or stops constant evaluation) naming the broken rule.
inline constexpr auto validate_model_shape = [](const model& m, const layer_shape& shape) constexpr {
  if (shape.microbatch <= 0) rules::microbatch_must_be_positive();
  for (const auto& k : m.kinds) {
    if (k.recipe == layer_recipe::transformer) validate_shape(architecture_of(m, k), shape_of_kind(k, shape));
  }
};

/// Whether every transformer layer of `m` splits over `tp` tensor-parallel ranks (heads, key/value heads, MLP
/// width and Mamba-2 heads and groups divisible by it).
inline constexpr auto splits_over = [](const model& m, int tp) constexpr -> bool {
  for (const auto& k : m.kinds) {
    if (k.recipe != layer_recipe::transformer) continue;
    const transformer_config& c = architecture_of(m, k);
    if (c.heads % tp != 0 || c.kv_heads_or_default() % tp != 0 || c.ffn % tp != 0) return false;
    if (!c.mamba_splits_over(tp)) return false;
    if (c.experts > 0 && (c.expert_ffn_or_default() % tp != 0 || c.shared_expert_ffn % tp != 0)) return false;
  }
  return true;
};

/// A distinct layer of a model and how many nodes repeat it.
struct distinct_layer {
  layer_role role = layer_role::block;
  std::uint8_t kind = 0;  ///< index in model::kinds
  std::int16_t first_node = 0;
  std::int64_t count = 0;
};

/// The distinct layers of a model, in order of first appearance (a GPT has three: embedding, block, head).
inline constexpr auto distinct_layers =
    [](const model& m) constexpr -> static_vector<distinct_layer, max_layer_kinds> {
  static_vector<distinct_layer, max_layer_kinds> out;
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    bool seen = false;
    for (auto& d : out) {
      if (d.kind == m.nodes[i]) {
        ++d.count;
        seen = true;
      }
    }
    if (!seen) out.push_back({m.role_at(i), m.nodes[i], static_cast<std::int16_t>(i), 1});
  }
  return out;
};

/// Totals of a model for one microbatch of a given shape, summed over its layers (each distinct layer built
/// once and multiplied by its count).
struct model_totals {
  std::int64_t params = 0;    ///< per tensor-parallel rank, tied weights counted once
  flops forward_matmul{0.0};  ///< model FLOPs of the forward pass
  flops backward_matmul{0.0};
  flops forward_vector{0.0};
  flops backward_vector{0.0};
};

inline constexpr auto totals = [](const model& m, const layer_shape& shape) constexpr -> model_totals {
  model_totals t;
  for (const auto& d : distinct_layers(m)) {
    const layer l = layer_at(m, static_cast<std::size_t>(d.first_node), shape);
    const auto n = static_cast<double>(d.count);
    t.params += layer_params(l) * d.count;
    t.forward_matmul += forward_matmul_flops(l) * n;
    t.forward_vector += forward_vector_flops(l) * n;
    const auto bwd = backward(l);
    t.backward_matmul += sum_flops(bwd, unit::tensor) * n;
    t.backward_vector += sum_flops(bwd, unit::vector) * n;
  }
  return t;
};

/// Parameters of the whole model (no parallelism, tied weights counted once).
inline constexpr auto parameter_count = [](const model& m) constexpr -> std::int64_t {
  return totals(m, layer_shape{1, m.config.sequence, 1, false, 2}).params;
};

/// Model FLOPs (matrix work, forward + backward, no recomputation) of one training iteration over
/// `global_batch` sequences: the quantity Narayanan et al. (SC'21) write as 72 B s l h^2 (1 + s/6h + V/12lh).
inline constexpr auto training_flops_per_iteration =
    [](const model& m, std::int64_t global_batch) constexpr -> flops {
  const auto t = totals(m, layer_shape{1, m.config.sequence, 1, false, 2});
  return (t.forward_matmul + t.backward_matmul) * static_cast<double>(global_batch);
};

/// A copy of `m` trained at another sequence length (learned position tables grow to cover it). A composite
/// model's layers have their own sequences: asking for another is an error.
inline constexpr auto with_sequence = [](model m, std::int64_t sequence) constexpr -> model {
  if (composite(m) && sequence != m.config.sequence)
    rules::the_sequence_of_a_composite_model_is_fixed_by_its_layers();
  m.config.sequence = sequence;
  if (m.config.positions == position_kind::learned && m.config.max_positions < sequence) {
    m.config.max_positions = sequence;
  }
  validate(m.config);
  return m;
};

/// `m` at `sequence` tokens (0 or less: its own), as with_sequence gives it, copied only where that changes
/// it:
///
///     const model::at_sequence resized{m, k.sequence};
///     const model::model& run = *resized;  // m itself when it already is at that sequence
class at_sequence {
 public:
  at_sequence(const model& m, std::int64_t sequence) : model_(&m) {
    const bool same = sequence <= 0 ||
                      (sequence == m.config.sequence &&
                       !(m.config.positions == position_kind::learned && m.config.max_positions < sequence));
    if (!same) copy_ = with_sequence(m, sequence);
  }
  at_sequence(const model&&, std::int64_t) = delete;  // it would point at a temporary
  at_sequence(const at_sequence&) = delete;           // a reference holder, not a value
  at_sequence& operator=(const at_sequence&) = delete;

  [[nodiscard]] const model& operator*() const { return copy_ ? *copy_ : *model_; }
  [[nodiscard]] const model* operator->() const { return &**this; }

 private:
  const model* model_;
  std::optional<model> copy_;
};

namespace rules {
[[noreturn]] inline void bf16_blocks_exceed_the_blocks_of_the_model() {
  throw input_error(
      "`bf16_blocks` asks for more blocks in bf16 at the start and the end than the model has blocks; give "
      "START,END with START + END at most the block count");
}
[[noreturn]] inline void bf16_blocks_must_not_be_negative() {
  throw input_error("`bf16_blocks` counts blocks: give START,END with both >= 0");
}
}  // namespace rules

/// A copy of `m` whose first `start` and last `end` transformer blocks (body nodes of the block role) stay
/// in bf16 under FP8 training: each of them takes a copy of its kind marked layer_spec::bf16 (named with a
/// `_bf16` suffix), so every consumer (step model, memory, placers) sees them as layers of their own.
/// Megatron-Core's --first-last-layers-bf16 --num-layers-at-start-in-bf16 START --num-layers-at-end-in-bf16
/// END (megatron/core/fp8_utils.py); Megatron-Bridge's FP8 current-scaling recipe uses 1 and 1
/// (bf16_with_fp8_current_scaling_mixed).
inline constexpr auto with_bf16_blocks =
    [](model m, std::int64_t start, std::int64_t end) constexpr -> model {
  if (start < 0 || end < 0) rules::bf16_blocks_must_not_be_negative();
  static_vector<std::size_t, max_model_layers> blocks;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m.role_at(i) == layer_role::block) blocks.push_back(i);
  if (start + end > static_cast<std::int64_t>(blocks.size()))
    rules::bf16_blocks_exceed_the_blocks_of_the_model();
  auto keep_in_bf16 = [&](std::size_t node) {
    const layer_spec& k = m.kind_at(node);
    if (k.bf16) return;
    // The bf16 twin of this kind, added once.
    layer_spec t = k;
    t.bf16 = true;
    t.name = fixed_string<32>{fixed_string<27>{k.name.view()}.view(), "_bf16"};  // a UTF-8-safe cut
    std::size_t twin = 0;
    while (twin < m.kinds.size() && !(m.kinds[twin] == t)) ++twin;
    if (twin == m.kinds.size()) {
      if (m.kinds.size() == max_layer_kinds) rules::model_has_too_many_layer_kinds_raise_max_layer_kinds();
      m.kinds.push_back(t);
    }
    m.nodes[node] = static_cast<std::uint8_t>(twin);
  };
  for (std::int64_t i = 0; i < start; ++i) keep_in_bf16(blocks[static_cast<std::size_t>(i)]);
  for (std::int64_t i = 0; i < end; ++i)
    keep_in_bf16(blocks[blocks.size() - 1 - static_cast<std::size_t>(i)]);
  return m;
};

/// A copy of `m` with another vocabulary size.
inline constexpr auto with_vocab = [](model m, std::int64_t vocab) constexpr -> model {
  if (composite(m) && vocab != m.config.vocab) rules::a_composite_model_has_no_vocabulary_to_change();
  m.config.vocab = vocab;
  validate(m.config);
  return m;
};

}  // namespace phaze::model
