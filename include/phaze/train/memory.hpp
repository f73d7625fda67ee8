/// @file
/// Memory per device of a pipeline stage: weights, gradients, optimizer state and activations (by
/// recomputation mode, sequence parallelism and microbatches in flight), as Megatron-LM keeps them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/pipeline_layout.hpp"

namespace phaze::train {

/// Memory one device needs, by what it holds. `total` is the sum of the other four.
struct memory_breakdown {
  bytes weights{0.0};
  bytes gradients{0.0};
  bytes optimizer{0.0};  ///< optimizer state: fp32 master weights and moments
  bytes activations{0.0};
  bytes total{0.0};

  /// Weights + gradients + optimizer state: what ZeRO calls the model states (Rajbhandari et al. 2020).
  [[nodiscard]] constexpr bytes model_states() const { return weights + gradients + optimizer; }
  friend constexpr bool operator==(const memory_breakdown&, const memory_breakdown&) = default;
};

/// Bytes a device keeps per parameter it holds, by role.
struct bytes_per_parameter {
  double weights = 0.0;
  double gradients = 0.0;
  double optimizer = 0.0;
  /// FP8 training: the FP8 copies of the weights Transformer Engine caches over an iteration's microbatches,
  /// as is and transposed (2 bytes); counted with the weights.
  double fp8_copies = 0.0;
  [[nodiscard]] constexpr double total() const { return weights + gradients + optimizer + fp8_copies; }
  friend constexpr bool operator==(const bytes_per_parameter&, const bytes_per_parameter&) = default;
};

/// Bytes per parameter of the model states, as Megatron-LM keeps them (docs/distrib_optimizer.md, "bf16/fp16
/// param, fp32 grads: 18 bytes"; ZeRO, Rajbhandari et al. 2020, section 3.1, K = 12 for mixed-precision
/// Adam):
/// - mixed precision (bf16, fp16): 2-byte weights, fp32 main gradients (4; Megatron accumulates and
///   all-reduces gradients in fp32), and fp32 master weights plus the optimizer's fp32 moments: Adam 4 + 4 +
///   4 = 12 (18 in all), SGD with momentum 4 + 4 = 8 (14 in all);
/// - fp32 (and tf32, stored as fp32): 4-byte weights and gradients, no master copy: Adam 8 (16 in all, as
///   Megatron's table), SGD with momentum 4 (12 in all).
/// - fp8 (Transformer Engine): as bf16, plus FP8 copies of the weights, as is and transposed (2 bytes; every
///   parameter is counted, the embedding and output layer too, which stay in bf16: an upper bound by their
///   share of the parameters).
/// Korthikanti et al. 2022 (fp16, Adam) report 18 bytes per parameter: their Figure 1 equals 18 * 12 l h^2 /
/// (t p) bytes (see docs/memory-model.md).
inline constexpr auto state_bytes_per_parameter =
    [](hw::precision p, train::optimizer o) constexpr -> bytes_per_parameter {
  const bool full_precision = p == hw::precision::fp32 || p == hw::precision::tf32;
  const double moments = o == train::optimizer::adam ? 8.0 : 4.0;
  if (full_precision) return {4.0, 4.0, moments};
  const double fp8_copies = p == hw::precision::fp8 ? 2.0 : 0.0;
  return {static_cast<double>(activation_element_bytes(p)), 4.0, 4.0 + moments, fp8_copies};
};

/// state_bytes_per_parameter for the knobs `k`: with --grad-reduce-in-bf16 (training_knobs::
/// grad_reduce_in_bf16) the gradients are 2-byte bf16 instead of fp32 main gradients (16 bytes in all for
/// bf16 + Adam; the fp32 master weights and moments stay).
/// With --fp8-param-gather (training_knobs::fp8_param_gather) the blocks' weights are FP8 tensors, 1 byte
/// plus their 1-byte transposed copy, where they were a bf16 weight and its two FP8 copies; the embedding,
/// output layer and norms stay bf16 (2 bytes): 2 bytes per parameter either way, as weights.
///
/// With --optimizer-dtype (training_knobs::optimizer_dtype) the optimizer state shrinks under mixed
/// precision: fp16 halves the master weights and the moments (Adam 2 + 2 + 2 = 6 bytes, SGD 2 + 2 = 4);
/// bf16 halves the moments and drops the master copy, the bf16 weights being updated in place (Adam 4, SGD
/// 2).
constexpr bytes_per_parameter state_bytes_of(const training_knobs& k) {
  bytes_per_parameter per = state_bytes_per_parameter(k.precision, k.opt);
  const double moments = k.opt == train::optimizer::adam ? 4.0 : 2.0;  // in 2-byte formats
  if (k.optimizer_dtype == hw::precision::fp16) per.optimizer = 2.0 + moments;
  if (k.optimizer_dtype == hw::precision::bf16) per.optimizer = moments;
  if (k.grad_reduce_in_bf16) per.gradients = 2.0;
  if (k.fp8_param_gather && k.precision == hw::precision::fp8) {
    per.weights = 2.0;
    per.fp8_copies = 0.0;
  }
  return per;
}

/// Bytes one rank holds of `bytes_each` per parameter for `parameters` per rank of which `expert` are routed
/// experts', sharded over `ranks` data-parallel ranks (the experts' over the `expert_ranks`
/// expert-data-parallel ranks) when `sharded`, else whole.
constexpr double sharded_bytes(double parameters, double expert, double bytes_each, bool sharded, int ranks,
                               int expert_ranks) {
  const double shard = sharded ? static_cast<double>(std::max(ranks, 1)) : 1.0;
  const double expert_shard = sharded ? static_cast<double>(std::max(expert_ranks, 1)) : 1.0;
  return (parameters - expert) * bytes_each / shard + expert * bytes_each / expert_shard;
}

/// Optimizer-state elements' bytes one rank holds for `parameters` per rank of which `expert` are routed
/// experts' (ZeRO stage 1 / Megatron's distributed optimizer when `sharded`): the others' state over
/// `ranks` data-parallel ranks, the experts' over `expert_ranks` (the expert-data-parallel ranks).
constexpr double optimizer_state_bytes(double parameters, double expert, const bytes_per_parameter& per,
                                       bool sharded, int ranks, int expert_ranks) {
  return sharded_bytes(parameters, expert, per.optimizer, sharded, ranks, expert_ranks);
}

/// The layers one device holds for a pipeline stage: a number of body nodes (a transformer's blocks; over
/// all its model chunks when the schedule is interleaved), and whether it holds the input layer (the
/// embedding) and the output layer (the head). Stages hold consecutive nodes in pipeline order, so a split
/// (one stage_layers per stage) gives every stage's nodes (node_ranges).
struct stage_layers {
  std::int64_t blocks = 0;
  bool embedding = false;
  bool head = false;
  friend constexpr bool operator==(const stage_layers&, const stage_layers&) = default;
};

/// The nodes of a model one pipeline stage holds: [first, last).
struct node_range {
  std::size_t first = 0;
  std::size_t last = 0;
  [[nodiscard]] constexpr std::size_t size() const { return last - first; }
  friend constexpr bool operator==(const node_range&, const node_range&) = default;
};

namespace rules {
[[noreturn]] inline void a_split_must_hold_the_model_in_order() {
  throw input_error(
      "a stage split must give the model's layers in pipeline order: the first stage holds the input layer "
      "(embedding), the last the output layer (head), and the stages' body layers (blocks) add up to the "
      "model's");
}
}  // namespace rules

/// The nodes every stage of `split` holds, in order: stage k starts where stage k - 1 ends. Throws
/// input_error (rules::a_split_must_hold_the_model_in_order) unless exactly the first stage holds the
/// input layer, exactly the last the output layer, and together they hold every node.
inline constexpr auto node_ranges =
    [](const model::model& m, const std::vector<stage_layers>& split) constexpr {
  std::vector<node_range> out;
  std::size_t next = 0;
  for (std::size_t k = 0; k < split.size(); ++k) {
    const stage_layers& s = split[k];
    if (s.blocks < 0 || s.embedding != (k == 0) || s.head != (k + 1 == split.size()))
      rules::a_split_must_hold_the_model_in_order();
    const auto n = static_cast<std::size_t>(s.blocks) + (s.embedding ? 1U : 0U) + (s.head ? 1U : 0U);
    out.push_back({next, next + n});
    next += n;
  }
  if (next != m.size()) rules::a_split_must_hold_the_model_in_order();
  return out;
};

/// The nodes of one stage given on its own: from node 0 when it holds the input layer, up to the last node
/// when it holds the output layer, else body nodes from node 1 (any interior position holds the same on a
/// transformer, whose blocks are identical; a composite model's interior stages need node_ranges of the
/// whole split).
constexpr node_range nodes_of_stage(const model::model& m, const stage_layers& s) {
  const auto n = static_cast<std::size_t>(s.blocks) + (s.embedding ? 1U : 0U) + (s.head ? 1U : 0U);
  if (s.embedding) return {0, n};
  if (s.head) return {m.size() - n, m.size()};
  return {1, 1 + n};
}

/// Megatron-style uniform split of a model's body nodes (blocks) over `stages` pipeline stages: every stage
/// gets blocks / stages; when that leaves a remainder r, the last r stages get one block more (the first
/// stage already holds the most activations in flight). Stage 0 holds the embedding and the last stage the
/// head, also under the interleaved schedule (the first chunk lives on device 0 and the last on device
/// p - 1).
inline constexpr auto uniform_stage =
    [](const model::model& m, int stages, int stage) constexpr -> stage_layers {
  const std::int64_t blocks = model::body_nodes(m);
  const std::int64_t remainder = blocks % stages;
  stage_layers s;
  s.blocks = blocks / stages + (stage >= stages - remainder ? 1 : 0);
  s.embedding = stage == 0;
  s.head = stage == stages - 1;
  return s;
};

/// Megatron-Core's even split of a transformer over `stages` pipeline stages under the knobs `k`:
/// uniform_stage for each stage, or, where the embedding or the loss counts as a pipeline layer
/// (training_knobs:: embedding_in_pipeline_split, loss_in_pipeline_split), every one of the stages x chunks
/// model chunks gets (blocks + counted layers) / (stages x chunks) layers and the first chunk (on stage 0)
/// and the last (on the last stage) hold the embedding and the loss in place of a block each
/// (TransformerBlock's get_num_layers_to_build and layer offsets, Megatron-Core core_r0.11.0).
/// train::validate checks that the layers divide; here a remainder is an input_error.
constexpr std::vector<stage_layers> uniform_split(const model::model& m, int stages,
                                                  const training_knobs& k) {
  std::vector<stage_layers> split;
  if (!counts_embedding_or_loss(k)) {
    for (int i = 0; i < stages; ++i) split.push_back(uniform_stage(m, stages, i));
    return split;
  }
  check_pipeline_split_layers(model::body_nodes(m), stages, k);
  const std::int64_t per_stage = pipeline_split_layers(model::body_nodes(m), k) / stages;
  for (int i = 0; i < stages; ++i) {
    stage_layers s;
    s.embedding = i == 0;
    s.head = i == stages - 1;
    s.blocks = per_stage - (s.embedding && k.embedding_in_pipeline_split ? 1 : 0) -
               (s.head && k.loss_in_pipeline_split ? 1 : 0);
    split.push_back(s);
  }
  return split;
}

/// Microbatches whose activations stage `stage` (0-based) of `stages` keeps at its peak, in units of the
/// stage's whole layer set, when each data-parallel replica runs `microbatches` microbatches per iteration.
/// - 1F1B (PipeDream-Flush; Narayanan et al., SC'21, section 2.2.1): stage i runs p - i warm-up forwards
///   before its first backward, so it holds min(p - i, m).
/// - Interleaved 1F1B with v chunks per device (Narayanan et al., section 2.2.2; Megatron-LM's
///   forward_backward_pipelining_with_interleaving): device i runs 2 (p - i - 1) + (v - 1) p warm-up chunk
///   forwards and one more in the steady state, each of one chunk (1/v of the device's layers), capped at the
///   m v chunk forwards of the iteration: min(v p + p - 2 i - 1, m v) / v. For the first stage that is
///   p (1 + (p - 1) / (p v)), Korthikanti et al.'s factor (2022, section 4.2.3). With v <= 1 it is 1F1B.
/// - GPipe (Huang et al. 2019): all m forwards run before any backward, so every stage holds m.
inline constexpr auto microbatches_in_flight =
    [](train::pipeline_schedule schedule, int stage, int stages, std::int64_t microbatches,
       int virtual_stages = 1) constexpr -> double {
  const auto m = static_cast<double>(microbatches);
  const auto p = static_cast<double>(stages);
  const auto i = static_cast<double>(stage);
  if (schedule == train::pipeline_schedule::gpipe) return m;
  if (schedule == train::pipeline_schedule::interleaved && virtual_stages > 1) {
    const auto v = static_cast<double>(virtual_stages);
    return std::min(v * p + p - 2.0 * i - 1.0, m * v) / v;
  }
  return std::min(p - i, m);
};

/// The stage split a Megatron-Core pipeline layout gives (train::parse_pipeline_layout): each stage holds
/// its chunks' blocks, the first the embedding and the last the head (where the layout's rules put them).
inline std::vector<stage_layers> split_of_layout(const pipeline_layout& layout) {
  std::vector<stage_layers> split;
  for (int s = 0; s < layout.stages(); ++s)
    split.push_back({layout.stage_blocks(s), s == 0, s == layout.stages() - 1});
  return split;
}

/// A stage split from blocks per stage (the embedding joins the first stage, the head the last), as
/// `phaze estimate --stage-blocks` takes it. Throws input_error unless there is one count per stage and the
/// counts add up to the model's blocks; a stage may hold no block (the first and last still hold the
/// embedding and the head; an interior one only passes the activations on, as AMP's cut points allow). Under
/// the interleaved schedule of `virtual_stages` chunks per stage every stage's count must divide into them:
/// Megatron-Core builds each chunk of a stage with the same number of layers and stops with "number of layers
/// at last stage ... must be divisible by virtual pipeline parallel degree" otherwise (its uneven pipeline,
/// --decoder-first/last-pipeline-num-layers with virtual stages).
inline std::vector<stage_layers> split_of_blocks(const model::model& m,
                                                 const std::vector<std::int64_t>& blocks, int stages,
                                                 int virtual_stages = 1, bool embedding_layer = false,
                                                 bool loss_layer = false) {
  if (static_cast<int>(blocks.size()) != stages) {
    throw input_error("`stage_blocks` gives " + std::to_string(blocks.size()) + " counts for " +
                      std::to_string(stages) + " pipeline stages; give one count per stage");
  }
  std::vector<stage_layers> split;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    stage_layers s{blocks[i], i == 0, i + 1 == blocks.size()};
    // An interior stage may hold no block (AMP's cut points allow it): its devices only pass the
    // activations on, one more pipeline hop.
    if (s.blocks < 0) {
      throw input_error("`stage_blocks`: stage " + std::to_string(i) + " has " + std::to_string(s.blocks) +
                        " blocks; give 0 or more blocks per stage");
    }
    // Where the embedding or the loss counts as a layer, it fills the place of a block in its stage's chunks.
    const std::int64_t layers =
        s.blocks + (s.embedding && embedding_layer ? 1 : 0) + (s.head && loss_layer ? 1 : 0);
    if (virtual_stages > 1 && layers % virtual_stages != 0) {
      throw input_error("`stage_blocks`: stage " + std::to_string(i) + " has " + std::to_string(s.blocks) +
                        " blocks" + (layers != s.blocks ? " (and the embedding or loss as a layer)" : "") +
                        ", which do not split into its " + std::to_string(virtual_stages) +
                        " interleaved model chunks; give every stage a multiple of `virtual_stages` layers");
    }
    total += s.blocks;
    split.push_back(s);
  }
  if (total != model::body_nodes(m)) {
    throw input_error("`stage_blocks` adds up to " + std::to_string(total) + " blocks but the model has " +
                      std::to_string(model::body_nodes(m)) +
                      (model::composite(m) ? " body layers (between its input and output layers)" : "") +
                      "; give counts that add up to the block count");
  }
  return split;
}

/// Memory per device of a pipeline stage from what it holds: `parameters` per tensor-parallel rank (weights,
/// gradients and optimizer state, state_bytes_per_parameter; the distributed optimizer, ZeRO stage 1, shards
/// the optimizer state over the dp ranks), `activations` kept per microbatch times the microbatches in flight
/// at position `stage` of `stages` under the schedule (microbatches_in_flight), and a `working_set` held once
/// (full recomputation: one block's full activations while it is recomputed); `dp` counts the ranks the
/// distributed optimizer shards over (dp * cp under context parallelism). The one memory formula of
/// phaze: the step estimate and the placers' step policy both call it.
///
/// With fully sharded data parallelism (training_knobs::fsdp) the weights and gradients are sharded like the
/// optimizer state, and the FP8 copies exist only for gathered layers: a layer or two of them, like the
/// unsharded gradients of one, in `working_set` (detail::fully_sharded_working_set), or all of the stage's,
/// with their FP8 copies, where the weights stay gathered from the forward to the backward pass or across
/// the microbatches of a pipeline (fsdp_keeps_weights, fsdp_reduces_once), and under pipeline parallelism
/// the stage's unsharded gradients too, accumulated over its microbatches. With the gradients sharded and
/// the weights whole (ZeRO-2, training_knobs::shard_gradients) the gradients are divided like the optimizer
/// state, one layer's unsharded gradients in the working set.
constexpr memory_breakdown stage_memory_of_load(double parameters, bytes activations, bytes working_set,
                                                int stage, int stages, int dp, std::int64_t microbatches,
                                                const training_knobs& k, double expert = 0.0, int ep = 1,
                                                int expert_fold = 1) {
  memory_breakdown r;
  const bytes_per_parameter per = state_bytes_of(k);
  // The expert-data-parallel ranks: dp / ep, times tp / etp when the expert groups are carved from the
  // tensor-parallel ranks too (parallelism::etp).
  const int expert_ranks = dp * std::max(expert_fold, 1) / std::max(ep, 1);
  // Under fsdp the states are sharded over the hybrid-sharding group (all dp ranks unless fsdp_shard).
  const int shard = k.fsdp ? shard_ranks(k, dp) : dp;
  const int expert_shard = k.fsdp && shard != dp ? shard : expert_ranks;
  if (k.fsdp) {
    r.weights = bytes{sharded_bytes(parameters, expert, per.weights, true, shard, expert_shard)};
    r.gradients = bytes{sharded_bytes(parameters, expert, per.gradients, true, shard, expert_shard)};
    const bool once = fsdp_reduces_once(k, stages);
    if (once || fsdp_keeps_weights(k, stages))
      r.weights += bytes{parameters * (per.weights + per.fp8_copies)};
    if (once) r.gradients += bytes{parameters * per.gradients};
  } else {
    r.weights = bytes{parameters * (per.weights + per.fp8_copies)};
    r.gradients =
        bytes{k.shard_gradients ? sharded_bytes(parameters, expert, per.gradients, true, dp, expert_ranks)
                                : parameters * per.gradients};
  }
  r.optimizer = bytes{
      optimizer_state_bytes(parameters, expert, per, k.distributed_optimizer || k.fsdp, shard, expert_shard)};
  r.activations =
      activations * microbatches_in_flight(k.schedule, stage, stages, microbatches, k.virtual_stages) +
      working_set;
  r.total = r.model_states() + r.activations;
  return r;
}

namespace detail {
/// The distinct layers of a model, built once for a shape: one per kind (model::model::kinds).
struct built_layers {
  std::vector<model::layer> kinds;
  /// The layer of node `v` of `m`.
  [[nodiscard]] constexpr const model::layer& at(const model::model& m, std::size_t v) const {
    return kinds[m.nodes[v]];
  }
};

constexpr built_layers build_layers(const model::model& m, const model::layer_shape& shape) {
  built_layers out;
  out.kinds.reserve(m.kinds.size());
  for (const auto& k : m.kinds) out.kinds.push_back(model::build_kind(m, k, shape));
  return out;
}

/// Parameters per tensor-parallel rank of a stage holding nodes `r`. A tied output projection on a stage
/// without the input layer (node 0, whose embedding owns the matrix) keeps its own copy (Megatron-LM: the
/// last stage allocates word_embeddings and all-reduces its gradient with the first stage's).
constexpr std::int64_t stage_parameters(const model::model& m, const built_layers& l, node_range r) {
  std::int64_t n = 0;
  for (std::size_t v = r.first; v < r.last; ++v) n += model::layer_params(l.at(m, v), r.first != 0);
  return n;
}

/// Of stage_parameters, the routed experts' (model::layer_expert_params).
constexpr std::int64_t stage_expert_parameters(const model::model& m, const built_layers& l, node_range r) {
  std::int64_t n = 0;
  for (std::size_t v = r.first; v < r.last; ++v) n += model::layer_expert_params(l.at(m, v));
  return n;
}

/// The recomputation mode a node's activations are kept under: blocks follow `mode` (Megatron checkpoints
/// blocks); other layers keep theirs as without recomputation under full recomputation.
constexpr model::recompute mode_of_node(model::layer_role role, model::recompute mode) {
  return role == model::layer_role::block || mode != model::recompute::full ? mode : model::recompute::none;
}

/// What full recomputation keeps of a block: all its activations (not recomputed), its input (a checkpoint,
/// recomputed in the backward pass), or nothing (recomputed from the checkpoint of its group).
enum class block_keeps : std::uint8_t { everything, input, nothing };

/// What full recomputation keeps of the block at position `index` (0-based) of the `blocks` blocks a stage
/// holds in `chunks` model chunks, with training_knobs::recompute_layers `layers` read by `method`
/// (training_knobs::recompute_method). `lead` (`trail`): the stage's first (last) chunk holds the embedding
/// (the loss) counted as a layer in place of a block (training_knobs::embedding_in_pipeline_split,
/// loss_in_pipeline_split), so that chunk holds one block fewer; the counted layer is not a block
/// Megatron-Core checkpoints.
constexpr block_keeps kept_of_block(std::int64_t index, std::int64_t blocks, int layers, int chunks,
                                    bool lead = false, bool trail = false,
                                    recompute_method method = recompute_method::block) {
  if (layers <= 0 || (layers == 1 && method != recompute_method::block)) return block_keeps::input;
  const std::int64_t counted = blocks + (lead ? 1 : 0) + (trail ? 1 : 0);
  const std::int64_t per_chunk = std::max<std::int64_t>(counted / std::max(chunks, 1), 1);
  const std::int64_t position = index + (lead ? 1 : 0);
  const std::int64_t local = position % per_chunk - (lead && position < per_chunk ? 1 : 0);
  switch (method) {
    case recompute_method::block:
      return local < layers ? block_keeps::input : block_keeps::everything;
    case recompute_method::uniform:
      return local % layers == 0 ? block_keeps::input : block_keeps::nothing;
    case recompute_method::every:
      return local % layers == 0 ? block_keeps::input : block_keeps::everything;
  }
  return block_keeps::input;
}

/// Whether full recomputation recomputes that block (kept_of_block: all but the blocks it keeps whole).
constexpr bool recomputes_block(std::int64_t index, std::int64_t blocks, int layers, int chunks,
                                bool lead = false, bool trail = false,
                                recompute_method method = recompute_method::block) {
  return kept_of_block(index, blocks, layers, chunks, lead, trail, method) != block_keeps::everything;
}

/// The blocks among the nodes `r`.
constexpr std::int64_t blocks_in(const model::model& m, node_range r) {
  std::int64_t n = 0;
  for (std::size_t v = r.first; v < r.last; ++v) n += m.role_at(v) == model::layer_role::block ? 1 : 0;
  return n;
}

/// Activation bytes per microbatch of the nodes `r` under recomputation `mode`; with full recomputation of
/// the first `layers` blocks of each of `chunks` chunks only (recomputes_block), the other blocks keep all
/// their activations.
constexpr bytes stage_activations_per_microbatch(const model::model& m, const built_layers& l, node_range r,
                                                 model::recompute mode, int layers = 0, int chunks = 1,
                                                 bool embedding_layer = false, bool loss_layer = false,
                                                 recompute_method method = recompute_method::block) {
  bytes b{0.0};
  const std::int64_t blocks = blocks_in(m, r);
  const bool lead = embedding_layer && r.first == 0;
  const bool trail = loss_layer && r.last == m.size();
  std::int64_t index = 0;
  for (std::size_t v = r.first; v < r.last; ++v) {
    model::recompute node_mode = mode_of_node(m.role_at(v), mode);
    if (m.role_at(v) == model::layer_role::block) {
      const block_keeps kept = mode == model::recompute::full
                                   ? kept_of_block(index, blocks, layers, chunks, lead, trail, method)
                                   : block_keeps::input;
      ++index;
      if (kept == block_keeps::nothing) continue;  // a uniform group's later block: its input is not kept
      if (kept == block_keeps::everything) node_mode = model::recompute::none;
    }
    b += model::activation_bytes(l.at(m, v), node_mode);
  }
  return b;
}

/// What full recomputation holds once on top of the stored inputs: while one microbatch's block is
/// recomputed, its full activations (as without recomputation), one block at a time (Megatron's default
/// --recompute-num-layers 1 granularity): the largest block of `r`; under the uniform method with groups of
/// `group` blocks, the group's activations at once (`group` times the largest block, at most the stage's
/// blocks). Under torchtitan's per-op selective policy (model::recompute_module::op) what a block's
/// recomputation brings back: the largest block's activations less what the policy keeps. Nothing
/// otherwise.
constexpr bytes recompute_working_set(const model::model& m, const built_layers& l, node_range r,
                                      model::recompute mode, int group = 1) {
  bytes most{0.0};
  if (mode == model::recompute::selective) {
    // torchtitan's per-op policy runs a block's forward again whole in its backward pass, holding what it
    // did not keep until that backward pass has used it: one block at a time.
    for (std::size_t v = r.first; v < r.last; ++v) {
      const model::layer& b = l.at(m, v);
      if (m.role_at(v) != model::layer_role::block ||
          (b.shape.recompute_modules & model::recompute_module::op) == 0)
        continue;
      most = std::max(most, model::activation_bytes(b, model::recompute::none) -
                                model::activation_bytes(b, model::recompute::selective));
    }
    return most;
  }
  if (mode != model::recompute::full) return most;
  for (std::size_t v = r.first; v < r.last; ++v) {
    if (m.role_at(v) != model::layer_role::block) continue;
    most = std::max(most, model::activation_bytes(l.at(m, v), model::recompute::none));
  }
  const std::int64_t together =
      std::min<std::int64_t>(std::max(group, 1), std::max<std::int64_t>(blocks_in(m, r), 1));
  return most * static_cast<double>(together);
}

/// The parameters per rank of the model's largest layer (the embedding or head included).
constexpr std::int64_t largest_layer_parameters(const model::model& m, const built_layers& l) {
  // Over the kinds the nodes use: a node's parameters are its kind's.
  std::vector<bool> used(l.kinds.size(), false);
  for (std::size_t v = 0; v < m.size(); ++v) used[m.nodes[v]] = true;
  std::int64_t largest = 0;
  for (std::size_t kind = 0; kind < l.kinds.size(); ++kind)
    if (used[kind]) largest = std::max(largest, model::layer_params(l.kinds[kind], true));
  return largest;
}

/// What fully sharded data parallelism (training_knobs::fsdp) holds beside the shards and the whole-stage
/// copies stage_memory_of_load counts, for `pp` pipeline stages and a largest layer of `largest` parameters
/// per rank (largest_layer_parameters, whichever stage it is on, so a split's stages count alike):
/// - weights freed after each forward: the weights of two gathered layers, the one running and the one
///   prefetched (PyTorch FSDP2's default prefetch of one unit, a unit per layer), with their FP8 copies
///   under FP8 training, and the unsharded gradients of one layer before its reduce-scatter;
/// - weights kept gathered (fsdp_keeps_weights), no pipeline: the unsharded gradients of one layer;
/// - under pipeline parallelism (fsdp_reduces_once): nothing more.
/// With the gradients sharded without fsdp (ZeRO-2, training_knobs::shard_gradients) the unsharded gradients
/// of one layer before its reduce-scatter. Nothing otherwise.
constexpr bytes fully_sharded_working_set(double largest, const training_knobs& k, int pp) {
  const bytes_per_parameter per = state_bytes_of(k);
  if (k.shard_gradients && !k.fsdp) return bytes{largest * per.gradients};
  if (!k.fsdp || fsdp_reduces_once(k, pp)) return bytes{0.0};
  const double gathered = fsdp_keeps_weights(k, pp) ? 0.0 : 2.0 * (per.weights + per.fp8_copies);
  return bytes{largest * (gathered + per.gradients)};
}

/// fully_sharded_working_set of model `m` built as `l`.
constexpr bytes fully_sharded_working_set(const model::model& m, const built_layers& l,
                                          const training_knobs& k, int pp) {
  return fully_sharded_working_set(static_cast<double>(largest_layer_parameters(m, l)), k, pp);
}

constexpr memory_breakdown stage_memory_of(const model::model& m, const built_layers& l, const parallelism& p,
                                           const training_knobs& k, node_range r, int stage) {
  return stage_memory_of_load(
      static_cast<double>(stage_parameters(m, l, r)),
      stage_activations_per_microbatch(m, l, r, k.recompute, k.recompute_layers, k.virtual_stages,
                                       k.embedding_in_pipeline_split, k.loss_in_pipeline_split,
                                       k.recompute_by),
      recompute_working_set(m, l, r, k.recompute,
                            k.recompute_by == recompute_method::uniform ? k.recompute_layers : 1) +
          fully_sharded_working_set(m, l, k, p.pp),
      stage, p.pp, p.dp * p.cp, microbatches_per_replica(p, k), k,
      static_cast<double>(stage_expert_parameters(m, l, r)), p.ep, p.tp / p.expert_tp());
}
}  // namespace detail

/// Parameters per tensor-parallel rank that a device of stage `s` holds (tied embeddings counted as kept;
/// nodes_of_stage says which nodes).
inline constexpr auto stage_parameters = [](const model::model& m, const stage_layers& s, int tp) constexpr {
  const auto l = detail::build_layers(m, model::layer_shape{1, m.config.sequence, tp, false, 2});
  return detail::stage_parameters(m, l, nodes_of_stage(m, s));
};

/// Memory per device of pipeline stage `stage` (0-based) holding the layers `s` (nodes_of_stage), for the
/// given degrees and knobs: weights, gradients and optimizer state of its parameters per tensor-parallel
/// rank, and the activations of its layers (model::activation_bytes, Korthikanti et al. 2022 section 4) times
/// the microbatches in flight at that stage under the schedule.
inline constexpr auto stage_memory =
    [](const model::model& m, const train::parallelism& p, const train::training_knobs& k,
       const stage_layers& s, int stage) constexpr -> memory_breakdown {
  const auto l = detail::build_layers(m, train::layer_shape_of(m, p, k));
  return detail::stage_memory_of(m, l, p, k, nodes_of_stage(m, s), stage);
};

/// Memory per device of stage `stage` under Megatron's even split (uniform_split).
inline constexpr auto device_memory =
    [](const model::model& m, const train::parallelism& p, const train::training_knobs& k,
       int stage) constexpr -> memory_breakdown {
  return stage_memory(m, p, k, uniform_split(m, p.pp, k).at(static_cast<std::size_t>(stage)), stage);
};

/// The stage that needs the most memory per device, and what it needs.
struct stage_peak {
  int stage = 0;
  memory_breakdown memory{};
};

/// The peak over all stages of Megatron's even split (uniform_split; ties go to the earlier stage).
inline constexpr auto peak_memory = [](const model::model& m, const train::parallelism& p,
                                       const train::training_knobs& k) constexpr -> stage_peak {
  const auto l = detail::build_layers(m, train::layer_shape_of(m, p, k));
  const std::vector<stage_layers> split = uniform_split(m, p.pp, k);
  const auto ranges = node_ranges(m, split);
  stage_peak best;
  for (int i = 0; i < p.pp; ++i) {
    const memory_breakdown b = detail::stage_memory_of(m, l, p, k, ranges[static_cast<std::size_t>(i)], i);
    if (i == 0 || b.total > best.memory.total) best = {i, b};
  }
  return best;
};

/// Whether a device's memory holds the breakdown (no allowance for framework buffers or fragmentation).
inline constexpr auto fits = [](const memory_breakdown& b, const hw::device& d) constexpr {
  return b.total <= d.hbm;
};

/// The memory of device `d` a plan may fill under knobs `k`: all of it but the knobs' memory_headroom.
constexpr bytes usable_memory(const hw::device& d, const training_knobs& k) {
  return d.hbm * (1.0 - k.memory_headroom);
}

}  // namespace phaze::train
