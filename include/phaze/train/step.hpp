/// @file
/// How long one training iteration takes for a fully given plan (model, device, tp/pp/dp, knobs): pipeline
/// steady state and bubble from the stage loads, exposed tensor-parallel, pipeline point-to-point and
/// data-parallel communication, the optimizer step, throughput, MFU and memory (docs/step-time.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/cost/collective.hpp"
#include "phaze/cost/op_cost.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/op.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/layer_times.hpp"
#include "phaze/train/memory.hpp"

namespace phaze::train {

/// One pipeline stage of the estimate: what it holds and what one microbatch costs on each of its devices.
struct stage_estimate {
  std::int64_t layers = 0;   ///< layer-graph nodes (blocks, plus the embedding and the head where they live)
  std::int64_t blocks = 0;   ///< transformer blocks
  std::int64_t devices = 0;  ///< tp * dp
  seconds forward{0.0};      ///< per microbatch, TP collectives included
  seconds backward{0.0};     ///< per microbatch, TP collectives included
  seconds recompute{0.0};    ///< per microbatch
  seconds tp_comm{0.0};      ///< per microbatch: the TP collectives' share of forward + backward + recompute
  seconds pp_comm{0.0};      ///< per microbatch: point-to-point sends this stage waits for
  bytes memory{0.0};         ///< per device
  [[nodiscard]] seconds per_microbatch() const { return forward + backward + recompute + pp_comm; }
};

/// Where an iteration's time goes. The parts add up to the iteration time.
struct step_breakdown {
  seconds compute{0.0};    ///< m x the slowest stage's forward + backward, without TP collectives
  seconds bubble{0.0};     ///< pipeline fill and drain
  seconds recompute{0.0};  ///< m x the slowest stage's recomputation, without TP collectives
  seconds tp_comm{0.0};  ///< m x the slowest stage's TP collectives (exposed: GPUs run one kernel at a time)
  seconds pp_comm{0.0};  ///< m x the slowest stage's point-to-point sends
  seconds dp_comm{0.0};  ///< gradient all-reduce over the data-parallel replicas, not overlapped
  seconds optimizer{0.0};  ///< the optimizer step: memory-bound update of the model states
  [[nodiscard]] seconds total() const {
    return compute + bubble + recompute + tp_comm + pp_comm + dp_comm + optimizer;
  }
};

/// The estimate of one training iteration.
struct step_estimate {
  seconds time_per_batch{0.0};
  double samples_per_s = 0.0;
  double tokens_per_s = 0.0;
  flops_per_second model_flops_per_device{0.0};
  double mfu = 0.0;  ///< model FLOPs only (no recomputation) over the device's peak matrix rate
  bytes peak_memory{0.0};
  int peak_stage = 0;
  bool fits = false;
  std::int64_t microbatches = 0;  ///< per data-parallel replica
  std::vector<stage_estimate> stages;
  step_breakdown breakdown;
};

namespace detail {
/// The TP collectives' cost in one pass of a layer (forward ops or backward ops), serial as on a GPU.
inline seconds collective_share(const model::layer& l, const hw::device& d, bool backward) {
  const auto table = cost::layer_costs(l, d);
  seconds s{0.0};
  if (!backward) {
    for (std::size_t i = 0; i < l.ops.size(); ++i)
      if (model::unit_of(l.ops[i]) == model::unit::network) s += table.forward[i].all_cores;
  } else {
    const auto ops = model::backward(l);
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (model::unit_of(ops[i]) == model::unit::network) s += table.backward[i].all_cores;
  }
  return s;
}

/// The TP collectives in the part of the forward that recomputation runs again.
inline seconds recompute_collective_share(const model::layer& l, const hw::device& d, model::recompute mode) {
  if (mode != model::recompute::full) return seconds{0.0};  // the attention core holds no collective
  return collective_share(l, d, false);
}

/// One layer's costs plus its collective shares.
struct timed_layer {
  layer_times t;
  seconds tp_forward{0.0};
  seconds tp_backward{0.0};
  seconds tp_recompute{0.0};
};

/// The all-gathers that sequence parallelism runs again in the backward pass: Megatron-LM stores only the
/// sequence-sharded input of each column-parallel GEMM and all-gathers it once more to compute the weight
/// gradient (Korthikanti et al. 2022, section 4.2.2; Megatron-LM's
/// LinearWithGradAccumulationAndAsyncCommunication.backward). Zero without sequence parallelism.
inline seconds sequence_parallel_regather(const model::layer& l, const hw::device& d) {
  if (!l.shape.sequence_parallel || l.shape.tp <= 1) return seconds{0.0};
  const auto table = cost::layer_costs(l, d);
  seconds s{0.0};
  for (std::size_t i = 0; i < l.ops.size(); ++i)
    if (l.ops[i].kind == model::op_kind::all_gather) s += table.forward[i].all_cores;
  return s;
}

inline timed_layer time_with_shares(const model::layer& l, const hw::device& d, sched::schedule_cache& cache,
                                    model::recompute mode) {
  timed_layer r{time_layer(l, d, cache), collective_share(l, d, false), collective_share(l, d, true),
                recompute_collective_share(l, d, mode)};
  const seconds regather = sequence_parallel_regather(l, d);
  r.t.backward += regather;
  r.tp_backward += regather;
  return r;
}

/// One boundary transfer of a pipeline stage per microbatch (activations forward or gradients backward) of a
/// `boundary`-byte tensor per rank, with tp x dp ranks per stage. Over the network when consecutive stages
/// sit in different nodes (tp * dp >= devices per node, Megatron's rank order tp, dp, pp), over NVLink
/// otherwise. Megatron-LM's scatter-gather optimization (Narayanan et al., SC'21, section 4.1; on by
/// default): without sequence parallelism the boundary tensor is replicated over the tp ranks, so each rank
/// sends 1/tp of it over its own link and the receiving stage all-gathers it inside the node. With sequence
/// parallelism the boundary is already split over the tp ranks.
inline seconds pipeline_send(bytes boundary, int tp, int dp, bool sequence_parallel, const hw::links& links) {
  const bool crosses_nodes = static_cast<std::int64_t>(tp) * dp >= links.devices_per_node;
  const cost::group pair{2, crosses_nodes};
  if (sequence_parallel || tp == 1) return cost::point_to_point_time(boundary, pair, links);
  return cost::point_to_point_time(boundary / static_cast<double>(tp), pair, links) +
         cost::all_gather_time(boundary, cost::packed_group(tp, links), links);
}

/// Data-parallel gradient synchronization of a stage holding `parameters` per rank: a ring all-reduce of
/// the fp32 main gradients (Megatron-LM) over dp ranks (Thakur et al. 2005) on the slowest link the group
/// spans (it spans nodes when tp * dp > devices per node), not overlapped; with the distributed optimizer a
/// reduce-scatter of gradients and an all-gather of weights (same volume).
inline seconds gradient_sync(double parameters, int tp, int dp, const train::training_knobs& k,
                             const hw::links& links) {
  if (dp <= 1) return seconds{0.0};
  const bytes_per_parameter per = state_bytes_per_parameter(k.precision, k.opt);
  const cost::group group{dp, static_cast<std::int64_t>(tp) * dp > links.devices_per_node};
  return cost::all_reduce_time(bytes{parameters * per.gradients}, group, links);
}

/// The optimizer step of a stage holding `parameters` per rank: weights, gradients and this rank's share of
/// the optimizer state read and written once at the achievable HBM bandwidth.
inline seconds optimizer_step(double parameters, int dp, const train::training_knobs& k,
                              const hw::device& d) {
  const bytes_per_parameter per = state_bytes_per_parameter(k.precision, k.opt);
  const double shard = k.distributed_optimizer ? static_cast<double>(dp) : 1.0;
  const double state_bytes = parameters * (per.weights + per.gradients + per.optimizer / shard);
  const double hbm =
      d.hbm_bandwidth.value() * (d.kind == hw::device_kind::datasheet ? d.sheet.memory_efficiency : 1.0);
  return seconds{2.0 * state_bytes / hbm};
}

/// Model chunks per device: v under the interleaved schedule, 1 otherwise.
inline int chunks_per_device(const train::training_knobs& k) {
  return k.schedule == train::pipeline_schedule::interleaved ? std::max(k.virtual_stages, 1) : 1;
}
}  // namespace detail

/// The time of one training iteration of `m` on `devices` = tp * pp * dp copies of `d` (the caller validated
/// the plan with train::validate). Formulas (docs/step-time.md):
/// - Stages: `split` gives each stage's layers (pp entries, blocks adding up to the model's, the embedding on
///   stage 0 and the head on the last); empty means the uniform Megatron split (uniform_stage). Per
///   microbatch a stage takes the forward, backward and recomputation of its layers (layer_times; on GPUs TP
///   collectives are ops inside them) plus its pipeline sends: 2 v boundary transfers (activation forward,
///   gradient backward, once per model chunk; detail::pipeline_send).
/// - Pipeline (Narayanan et al., SC'21, section 2.2): iteration = m t_max + bubble, bubble = (p - 1) t_max
///   for 1F1B and GPipe, (p - 1) / v t_max for interleaved 1F1B with v chunks, t_max the slowest stage.
/// - Data parallelism: the largest stage's gradient synchronization (detail::gradient_sync), not overlapped.
/// - Optimizer step: the model states of the device read and written once (detail::optimizer_step).
/// place::step_policy puts the same terms in a placer's objective, so a placement found by chain_dp on a
/// model's tables has exactly this time.
inline step_estimate estimate_step(const model::model& m, const hw::device& d, const train::parallelism& p,
                                   const train::training_knobs& k, sched::schedule_cache& cache,
                                   const std::vector<stage_layers>& split = {}) {
  step_estimate e;
  const model::layer_shape shape = train::layer_shape_of(m, p, k);
  const model::model run = k.sequence > 0 ? model::with_sequence(m, k.sequence) : m;
  std::vector<stage_layers> stages = split;
  if (stages.empty()) {
    for (int i = 0; i < p.pp; ++i) stages.push_back(uniform_stage(run, p.pp, i));
  }
  if (static_cast<int>(stages.size()) != p.pp) {
    throw input_error("a stage split needs one entry per pipeline stage (" + std::to_string(p.pp) + ")");
  }
  const auto built = detail::build_layers(run, shape);
  const auto emb = detail::time_with_shares(built.embedding, d, cache, model::recompute::none);
  const auto block = detail::time_with_shares(built.block, d, cache, k.recompute);
  const auto head = detail::time_with_shares(built.head, d, cache, model::recompute::none);

  const std::int64_t mb = train::microbatches_per_replica(p, k);
  e.microbatches = mb;
  const int v = detail::chunks_per_device(k);
  const seconds send = p.pp > 1
                           ? detail::pipeline_send(block.t.boundary, p.tp, p.dp, k.sequence_parallel, d.link)
                           : seconds{0.0};

  int slowest = 0;
  std::int64_t largest_params = 0;
  memory_breakdown peak;
  for (int i = 0; i < p.pp; ++i) {
    const stage_layers& s = stages[static_cast<std::size_t>(i)];
    const auto blocks = static_cast<double>(s.blocks);
    stage_estimate st;
    st.layers = s.blocks + (s.embedding ? 1 : 0) + (s.head ? 1 : 0);
    st.blocks = s.blocks;
    st.devices = static_cast<std::int64_t>(p.tp) * p.dp;
    st.forward = block.t.forward * blocks;
    st.backward = block.t.backward * blocks;
    st.recompute = block.t.recompute(k.recompute) * blocks;
    st.tp_comm = (block.tp_forward + block.tp_backward + block.tp_recompute) * blocks;
    if (s.embedding) {
      st.forward += emb.t.forward;
      st.backward += emb.t.backward;
      st.tp_comm += emb.tp_forward + emb.tp_backward;
    }
    if (s.head) {
      st.forward += head.t.forward;
      st.backward += head.t.backward;
      st.tp_comm += head.tp_forward + head.tp_backward;
    }
    // Interior stages receive and send in both passes; with v chunks every chunk does (2 v transfers on the
    // critical path per microbatch, as Megatron-LM's blocking send/recv pairs).
    st.pp_comm = send * (2.0 * static_cast<double>(v));
    const memory_breakdown mem = detail::stage_memory_of(run, built, p, k, s, i);
    st.memory = mem.total;
    if (i == 0 || mem.total > peak.total) {
      peak = mem;
      e.peak_stage = i;
    }
    largest_params = std::max(largest_params, detail::stage_parameters(built, run.config.tied_embeddings, s));
    e.stages.push_back(st);
    if (st.per_microbatch() > e.stages[static_cast<std::size_t>(slowest)].per_microbatch()) slowest = i;
  }

  const stage_estimate& worst = e.stages[static_cast<std::size_t>(slowest)];
  const seconds t_max = worst.per_microbatch();
  const double m_count = static_cast<double>(mb);
  const seconds rec_tp =
      block.tp_recompute * static_cast<double>(stages[static_cast<std::size_t>(slowest)].blocks);
  step_breakdown& b = e.breakdown;
  b.tp_comm = worst.tp_comm * m_count;
  b.recompute = (worst.recompute - rec_tp) * m_count;
  b.compute = (worst.forward + worst.backward - (worst.tp_comm - rec_tp)) * m_count;
  b.pp_comm = worst.pp_comm * m_count;
  const double bubble_stages = static_cast<double>(p.pp - 1) / static_cast<double>(v);
  b.bubble = t_max * bubble_stages;
  const auto params = static_cast<double>(largest_params);
  b.dp_comm = detail::gradient_sync(params, p.tp, p.dp, k, d.link);
  b.optimizer = detail::optimizer_step(params, p.dp, k, d);

  e.time_per_batch = b.total();
  const double t = e.time_per_batch.value();
  const auto seq = static_cast<double>(train::sequence_of(m, k));
  e.samples_per_s = static_cast<double>(k.global_batch) / t;
  e.tokens_per_s = e.samples_per_s * seq;
  const flops model_flops = model::training_flops_per_iteration(run, k.global_batch);
  e.model_flops_per_device = flops_per_second{model_flops.value() / t / static_cast<double>(p.devices())};
  e.mfu = e.model_flops_per_device.value() / hw::peak_matrix_flops(d).value();
  e.peak_memory = peak.total;
  e.fits = fits(peak, d);
  return e;
}

}  // namespace phaze::train
