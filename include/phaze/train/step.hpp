/// @file
/// The training-step model, once: how long one training iteration takes and what each device holds, for a
/// plan on a cluster. `step_model` holds the formulas (a stage's time per microbatch with its pipeline sends,
/// the pipeline with fill and drain, data-parallel gradient synchronization, the optimizer step, memory per
/// device); `estimate_step` applies them to a model split into stages and attributes the time to its parts
/// (docs/step-time.md). The placers' step policy (place/model_placement.hpp) calls the same `step_model`, so
/// a placement and its estimate agree by construction.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/route_tracker.hpp"
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
  /// A rank of the stage whose device type paces it: its only type, or on a stage of several types the
  /// slowest (step_model::pacing_member).
  std::int64_t pacing_rank = 0;
  bool mixed = false;      ///< its ranks hold more than one device type
  seconds forward{0.0};    ///< per microbatch, TP collectives included
  seconds backward{0.0};   ///< per microbatch, TP collectives included
  seconds recompute{0.0};  ///< per microbatch
  seconds tp_comm{0.0};    ///< per microbatch: the TP collectives' share of forward + backward + recompute
  seconds pp_comm{0.0};    ///< per microbatch: point-to-point sends this stage waits for
  bytes memory{0.0};       ///< per device
  bytes capacity{0.0};     ///< memory of one of its devices a plan may fill (usable_memory)
  [[nodiscard]] seconds per_microbatch() const { return forward + backward + recompute + pp_comm; }
};

/// Where an iteration's time goes. The parts add up to the iteration time.
struct step_breakdown {
  seconds compute{0.0};  ///< m x the slowest stage's forward + backward, without TP collectives
  seconds bubble{0.0};   ///< fill and drain: sum_i t_i - t_max (1F1B, GPipe), (p - 1) / v t_max (interleaved)
  seconds recompute{0.0};  ///< m x the slowest stage's recomputation, without TP collectives
  seconds tp_comm{0.0};  ///< m x the slowest stage's TP collectives (exposed: GPUs run one kernel at a time)
  seconds pp_comm{0.0};  ///< m x the slowest stage's point-to-point sends
  seconds dp_comm{0.0};  ///< what stays exposed of the data-parallel gradient reduction and parameter
                         ///< gather, and the tied embedding's all-reduce between the first and last stage
  seconds optimizer{0.0};  ///< the optimizer step: memory-bound update of the model states
  /// The calibrated fixed times (training_knobs::microbatch_overhead, step_overhead): m x the per-microbatch
  /// one and the per-iteration one; 0 uncalibrated.
  seconds overhead{0.0};
  [[nodiscard]] seconds total() const {
    return compute + bubble + recompute + tp_comm + pp_comm + dp_comm + optimizer + overhead;
  }
};

/// The estimate of one training iteration.
struct step_estimate {
  seconds time_per_batch{0.0};
  double samples_per_s = 0.0;
  double tokens_per_s = 0.0;
  flops_per_second model_flops_per_device{0.0};
  double mfu = 0.0;  ///< model FLOPs only (no recomputation) over the devices' peak matrix rate
  bytes peak_memory{0.0};
  bytes memory_capacity{0.0};  ///< memory a plan may fill on a device of the peak stage (usable_memory)
  int peak_stage = 0;
  bool fits = false;              ///< every stage's memory fits its devices
  std::int64_t microbatches = 0;  ///< per data-parallel replica
  std::vector<stage_estimate> stages;
  step_breakdown breakdown;
};

/// Where a stage sits: the plan's degrees and the microbatches each data-parallel replica runs.
struct plan_shape {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  std::int64_t microbatches = 1;  ///< per data-parallel replica
  int cp = 1;   ///< context-parallel ranks (parallelism::cp), between tp and dp in rank order
  int ep = 1;   ///< expert-parallel ranks (parallelism::ep), carved from the dp * cp ranks
  int etp = 0;  ///< expert tensor-parallel ranks (parallelism::etp); 0: tp
  [[nodiscard]] constexpr int expert_tp() const { return etp > 0 ? etp : tp; }
  [[nodiscard]] constexpr int devices() const { return tp * pp * dp * cp; }
  /// Ranks of one pipeline stage: tp * cp * dp, consecutive in Megatron's order.
  [[nodiscard]] constexpr int stage_ranks() const { return tp * cp * dp; }
  /// Ranks the gradients are reduced over (Megatron-Core's data-parallel group with context parallelism).
  [[nodiscard]] constexpr int gradient_ranks() const { return dp * cp; }
  /// Ranks the routed experts' gradients are reduced over (Megatron-Core's expert-data-parallel group): the
  /// stage's tp * cp * dp ranks over ep * etp (dp * cp / ep when etp = tp).
  [[nodiscard]] constexpr int expert_gradient_ranks() const {
    return tp * dp * cp / (std::max(ep, 1) * expert_tp());
  }
};

/// One device type among the ranks of a pipeline stage (step_model::stage_members).
struct stage_member {
  const hw::device* device = nullptr;  ///< the type (a device of the cluster's groups)
  int ranks = 0;                       ///< how many of the stage's ranks it plays
  int first_rank = 0;                  ///< the first of them
};

/// Bytes per parameter Adam's update moves as one fused kernel (torch's _fused_adam_, Transformer Engine's
/// and Apex's FusedAdam): the weight, its gradient and the two moments read, the weight and the moments
/// written, 4 bytes each.
inline constexpr double fused_adam_bytes = 28.0;
/// Bytes per parameter torch's multi-tensor Adam moves (torch/optim/adam.py, _multi_tensor_adam with
/// decoupled weight decay, PyTorch 2.11; training_knobs::foreach_optimizer), one pass per foreach call over
/// 4-byte states: the weights scaled by the decay (read, write: 8), the first moment lerped toward the
/// gradient (12), the second moment scaled (8) and the gradient's square added (gradient read twice: 16), its
/// square root into a new list (8), divided by the bias correction (8), plus epsilon (8), and the update
/// addcdiv into the weights (16): 84. The eight kernel kinds and their counts are those of one Megatron-Core
/// iteration's profile on an H200 (tests/data/gpu/h200-megatron-step-top.csv), where they took 40.2 ms for
/// 1.881 B parameters: 0.82 of the peak on these bytes.
inline constexpr double foreach_adam_bytes = 84.0;

/// The routes a model asks a cluster for again and again (the same rings and pairs for every stage of an
/// estimate, for every stage a placer prices), each kept once asked. Worth it where a route is followed rank
/// by rank: a cluster in a rank order of its own or with measured links, O(devices) per route, and a
/// cluster of several device groups, whose rings that straddle two groups are followed hop by hop (a
/// data-parallel ring's block of dp x tp ranks per group boundary; worth_remembering). An estimate of p
/// stages asks for the same few routes about 10 p times, a placer thousands of times. Safe to share between
/// threads (each call locks).
class route_memo {
 public:
  /// Whether `c`'s routes are followed rank by rank, in whole or in part (closed forms of one group are
  /// cheaper than a lookup).
  [[nodiscard]] static bool worth_remembering(const cluster::cluster& c) {
    return c.measured().has_value() || !c.order().empty() || c.groups().size() > 1;
  }
  /// The route kept for a ring (or pairs) of `shape` over `used` ranks; nullopt when not asked before.
  [[nodiscard]] std::optional<cluster::route> find(bool ring, cluster::group_shape shape, int used) const {
    const std::lock_guard<std::mutex> hold{mutex_};
    for (const entry& e : entries_)
      if (e.ring == ring && e.shape == shape && e.used == used) return e.route;
    return std::nullopt;
  }
  void keep(bool ring, cluster::group_shape shape, int used, const cluster::route& r) {
    const std::lock_guard<std::mutex> hold{mutex_};
    entries_.push_back({ring, shape, used, r});
  }

 private:
  struct entry {
    bool ring = true;  ///< cluster::ring (shape, used); else cluster::pairs (shape.size is the distance)
    cluster::group_shape shape{};
    int used = 0;
    cluster::route route{};
  };
  mutable std::mutex mutex_;
  std::vector<entry> entries_;
};

/// The training-step model of a cluster and knobs: every formula the estimate and the placers use
/// (Narayanan et al., SC'21; Korthikanti et al. 2022; docs/step-time.md). Routes of the collectives come from
/// the cluster for the plan's shape (cluster::cluster::ring, pairs).
class step_model {
 public:
  step_model() = default;
  constexpr step_model(cluster::cluster c, const training_knobs& k) : cluster_(std::move(c)), knobs_(k) {}
  /// A model over a cluster it does not copy: `c` must outlive the model and its copies. What one estimate
  /// builds (estimate_step), so that a measured matrix of 4096 nodes (16.7 M links) or a rank order of 2^20
  /// devices is not copied per estimate.
  constexpr step_model(const cluster::cluster* c, const training_knobs& k) : borrowed_(c), knobs_(k) {}

  /// Keeps every route this model is asked for in `memo` from now on (a route is the cluster's whatever the
  /// plan, so the answers are the same); `memo` outlives the model and its copies.
  constexpr void remember_routes(route_memo& memo) { memo_ = &memo; }
  /// Takes every ring and pairs route from `routes`, a tracker of this model's cluster as its order changes
  /// (the rank annealing: cluster::route_tracker); it must outlive the model's use.
  constexpr void track_routes(cluster::route_tracker& routes) { tracker_ = &routes; }

  [[nodiscard]] constexpr const cluster::cluster& cluster() const {
    return borrowed_ != nullptr ? *borrowed_ : cluster_;
  }
  [[nodiscard]] constexpr const training_knobs& knobs() const { return knobs_; }

  /// Model chunks per device: v under the interleaved schedule, 1 otherwise.
  [[nodiscard]] constexpr int chunks() const {
    return knobs_.schedule == pipeline_schedule::interleaved ? std::max(knobs_.virtual_stages, 1) : 1;
  }

  /// Devices in the largest node of the cluster (the most ranks a group can keep inside one node).
  [[nodiscard]] constexpr int largest_node() const {
    int node = 1;
    for (const auto& g : cluster().groups()) node = std::max(node, g.node.devices);
    return node;
  }

  /// The route of the tensor-parallel groups of width `tp` (what a layer's collectives run over).
  [[nodiscard]] constexpr cluster::route tensor_parallel_route(int tp) const {
    return ring_route({tp, 1}, cluster().devices() - cluster().devices() % tp);
  }

  /// The route of the context-parallel rings: cp ranks tp apart (Megatron's order tp, cp, dp, pp).
  [[nodiscard]] constexpr cluster::route context_parallel_route(const plan_shape& s) const {
    return ring_route({std::max(s.cp, 1), s.tp}, s.devices());
  }

  /// The links of the expert-parallel groups: ep consecutive ranks etp apart (Megatron-Core's expert rank
  /// order etp, ep, edp, pp over a stage's ranks; with etp = tp: ep consecutive data-parallel ranks, tp
  /// apart).
  /// `local` of a group's ranks share a node (the largest divisor of ep whose ranks fit in one); `inside` is
  /// the route among them, `across` the route a rank's transfers to the other nodes take (cluster::pairs
  /// between ranks a node's worth apart: its own interface, or its share of a shared one). Under the flex
  /// dispatcher (moe_dispatcher::flex) the routes carry the shares of the deduplicated copies of a model of
  /// `experts` routed experts, `top_k` per token (cost::deduplicated_copies).
  [[nodiscard]] constexpr cost::all_to_all_routes expert_parallel_routes(const plan_shape& s,
                                                                         std::int64_t experts = 0,
                                                                         std::int64_t top_k = 0) const {
    const int n = std::max(s.ep, 1);
    const int stride = std::max(s.expert_tp(), 1);
    int local = std::max(1, std::min(n, largest_node() / stride));
    while (n % local != 0) --local;
    cost::all_to_all_routes r;
    r.local = local;
    if (local > 1) r.inside = ring_route({local, stride}, s.devices());
    if (local < n) r.across = pairs_route(local * stride, s.devices());
    if (knobs_.dispatcher == moe_dispatcher::flex && experts > 0 && top_k > 0 && n > 1) {
      const auto [inside, across] = cost::deduplicated_copies(experts, top_k, n, local);
      const auto k = static_cast<double>(top_k);
      r.shares = {inside / k, across / k};
    }
    return r;
  }

  /// One boundary transfer of a pipeline stage per microbatch (activations forward or gradients backward) of
  /// a `boundary`-byte tensor per rank, between ranks tp * dp apart (Megatron's rank order tp, dp, pp), over
  /// the slowest such pair. Megatron-LM's scatter-gather optimization (Narayanan et al., SC'21, section 4.1;
  /// on by default): without sequence parallelism the boundary tensor is replicated over the tp ranks, so
  /// each rank sends 1/tp of it over its own link and the receiving stage all-gathers it inside its
  /// tensor-parallel group. With sequence parallelism the boundary is already split over the tp ranks.
  [[nodiscard]] constexpr seconds pipeline_send(bytes boundary, const plan_shape& s) const {
    return pipeline_send_over(boundary, s, pipeline_route(s));
  }

  /// What one cut of the pipeline (a `boundary`-byte tensor per rank between two stages) adds to each
  /// stage beside it per microbatch: one transfer per model chunk (v under the interleaved schedule, as
  /// Megatron-LM's blocking send/recv pairs); nothing without a pipeline.
  [[nodiscard]] constexpr seconds pipeline_cut(bytes boundary, const plan_shape& s) const {
    if (s.pp <= 1) return seconds{0.0};
    return pipeline_cut_over(boundary, s, pipeline_route(s));
  }

  /// The route of the pipeline's transfers: every pair of ranks a stage apart (tp * dp * cp, Megatron's rank
  /// order), the slowest of them (cluster::pairs). With pp > 1 only. The same for every stage of a plan: on a
  /// cluster whose routes are followed rank by rank, the route memo keeps it once asked.
  [[nodiscard]] constexpr cluster::route pipeline_route(const plan_shape& s) const {
    return pairs_route(s.stage_ranks(), s.devices());
  }

  /// The cut a stage waits for in each pass, for a stage whose input cut carries `in` and whose output cut
  /// carries `out` bytes per rank (0 at an end of the pipeline): in the forward pass the activation it
  /// receives, in the backward pass the gradient of its output; the first stage, which receives no
  /// activation, waits on its output cut in both, the last on its input cut in both. So every stage pays two
  /// transfers per microbatch and chunk, of its own cuts' sizes (on a transformer, whose cuts all carry the
  /// hidden state, the same for every stage).
  [[nodiscard]] static constexpr std::pair<bytes, bytes> cuts_waited_for(bytes in, bytes out) {
    return {in.value() > 0.0 ? in : out, out.value() > 0.0 ? out : in};
  }

  /// The pipeline sends a stage whose layers take `work` per microbatch waits for, for input and output cuts
  /// of `in` and `out` bytes per rank (cuts_waited_for, pipeline_cut): all of them, or under the interleaved
  /// schedule with overlap_p2p (Megatron-Core's default --overlap-p2p-communication, core_r0.11.0) what the
  /// chunks' computation does not hide in the steady state. There (schedules.py,
  /// forward_backward_pipelining_with_interleaving) each forward step posts its send and the next step's
  /// receive and waits for them only after the backward step that follows, and each backward step's
  /// transfers wait through the next forward step: the v forward transfers hide under the backward passes
  /// (two thirds of the work, Narayanan et al., SC'21, section 5.1), the v backward ones under the forward
  /// passes (one third). The warm-up and cool-down transfers stay blocking (fill_drain_sends).
  [[nodiscard]] constexpr seconds pipeline_sends(bytes in, bytes out, seconds work,
                                                 const plan_shape& s) const {
    if (s.pp <= 1) return seconds{0.0};
    const auto [forward, backward] = cuts_waited_for(in, out);
    const cluster::route pair = pipeline_route(s);
    const seconds f = pipeline_cut_over(forward, s, pair);
    const seconds b = pipeline_cut_over(backward, s, pair);
    if (!overlapped_sends()) return f + b;
    const seconds none{0.0};
    return std::max(none, f - work * (2.0 / 3.0)) + std::max(none, b - work / 3.0);
  }

  /// Whether the pipeline sends run under computation (overlap_p2p under the interleaved schedule).
  [[nodiscard]] constexpr bool overlapped_sends() const {
    return knobs_.overlap_p2p && knobs_.schedule == pipeline_schedule::interleaved;
  }

  /// With overlapped_sends, the sends of the pipeline's fill and drain, which Megatron-Core runs blocking
  /// unless --overlap-p2p-communication-warmup-flush is given (off by default in core_r0.11.0): stage r runs
  /// W_r = 2 (p - r - 1) + (v - 1) p warm-up forward chunks (num_warmup_microbatches in schedules.py, with
  /// the default microbatch group of p; at most m v) and as many cool-down backward chunks, each waiting for
  /// one transfer, W_r / v of a microbatch's `blocking` sends (pipeline_sends without overlap) in all. Stage
  /// 0 waits longest; the largest over the stages, whose blocking sends are `blocking[r]`. 0 without
  /// overlapped_sends (the sends are then in every stage's time).
  [[nodiscard]] constexpr seconds fill_drain_sends(const std::vector<seconds>& blocking,
                                                   std::int64_t microbatches, const plan_shape& s) const {
    if (!overlapped_sends() || s.pp <= 1) return seconds{0.0};
    const std::int64_t v = chunks();
    seconds most{0.0};
    for (std::size_t r = 0; r < blocking.size(); ++r) {
      const std::int64_t warmup = std::min<std::int64_t>(
          2 * (s.pp - static_cast<std::int64_t>(r) - 1) + (v - 1) * s.pp, microbatches * v);
      most = std::max(most, blocking[r] * (static_cast<double>(warmup) / static_cast<double>(v)));
    }
    return most;
  }

  /// A stage's time per microbatch: its layers' `work` (forward, backward, recomputation, TP collectives)
  /// plus the pipeline sends it waits for (pipeline_sends). Never less for more work, so the placers' bounds
  /// hold.
  [[nodiscard]] constexpr seconds stage_time(seconds work, bytes in, bytes out, const plan_shape& s) const {
    return work + pipeline_sends(in, out, work, s);
  }

  /// The pipeline of one iteration (all microbatches through every stage, with fill and drain) when its
  /// stages take `slowest` at most and `sum` together per microbatch:
  /// - 1F1B and GPipe: (m - 1) t_max + sum_i t_i. The first microbatch crosses every stage forward and
  ///   backward (sum_i t_i); the slowest stage paces the other m - 1. This is the pipeline of uneven stages
  ///   in AMP's cost model (Li et al., NeurIPS 2022; `pipe_cost` in its code, src/pipe.py: (B - 1) max_i
  ///   e_i + sum_i e_i + sum_i c_i) and Alpa's (Zheng et al., OSDI 2022, section 5.1). With equal stages it
  ///   is Narayanan et al.'s (m + p - 1) t (SC'21, section 2.2). Why, with f_i and b_i a stage's forward and
  ///   backward (sends and recomputation included) and t_i = f_i + b_i:
  ///   * Any schedule: stage k cannot start before microbatch 0 crossed the stages before it
  ///     (sum_{i<k} f_i), runs its m forwards and m backwards one at a time (m t_k), and the last gradient
  ///     it sends still crosses the stages before it (sum_{i<k} b_i). So the pipeline takes at least
  ///     sum_{i<k} t_i + m t_k for every k; for the last stage that is sum_i t_i + (m - 1) t_{p-1}.
  ///   * GPipe (all forwards, then all backwards): the forwards are a flow shop of m identical jobs, whose
  ///     makespan is the heaviest monotone path through the (microbatch, stage) grid: sum_i f_i + (m - 1)
  ///     max_i f_i; the backwards start when the last stage has its last activation and take sum_i b_i +
  ///     (m - 1) max_i b_i. Together sum_i t_i + (m - 1)(max f + max b): exactly the formula when one stage
  ///     has both the slowest forward and the slowest backward (stages of the same layers, whose backward
  ///     is a fixed multiple of the forward), above it by at most (m - 1)(max f + max b - t_max) otherwise.
  ///   * 1F1B (PipeDream-Flush): when the last stage is a slowest one it never waits after its first
  ///     forward (each upstream stage, no slower, has the next activation ready by the time the last stage
  ///     finishes a backward), so it reaches the lower bound above: exactly the formula. Megatron's uniform
  ///     split puts the head on the last stage, which makes it the slowest there. When the slowest stage k
  ///     sits earlier, its p - k - 1 warm-up forwards hide part of the first microbatch's round trip through
  ///     the stages after it: with stages whose backward is the same multiple of their forward (stages of
  ///     the same blocks) the pipeline ends between the lower bound, the formula minus sum_{i>k} t_i, and
  ///     the formula; with other ratios it may end later, but not after GPipe's time above.
  ///   tests/train/step_test.cpp checks each case against the event simulation train::simulate_pipeline.
  /// - Interleaved 1F1B with v chunks: (m + (p - 1) / v) t_max (Narayanan et al., section 2.2.2), as for
  ///   equal stages; it is placed uniformly only.
  [[nodiscard]] constexpr seconds pipeline_time(seconds slowest, seconds sum, const plan_shape& s) const {
    // A calibrated fixed time per microbatch (training_knobs::microbatch_overhead) adds to every stage.
    slowest += knobs_.microbatch_overhead;
    sum += knobs_.microbatch_overhead * static_cast<double>(std::max(s.pp, 1));
    if (knobs_.schedule == pipeline_schedule::interleaved) {
      const double fill = static_cast<double>(s.pp - 1) / static_cast<double>(chunks());
      return slowest * (static_cast<double>(s.microbatches) + fill);
    }
    if (s.pp <= 1) return slowest * static_cast<double>(s.microbatches);
    // (m - 1) t_max + sum rather than m t_max + bubble: with one microbatch it is the sum exactly, the
    // same for every split of one device type (the placers tie there).
    return slowest * static_cast<double>(s.microbatches - 1) + sum;
  }

  /// The pipeline's fill and drain alone, pipeline_time - m t_max: sum_i t_i - t_max for 1F1B and GPipe,
  /// (p - 1) / v t_max for interleaved 1F1B.
  [[nodiscard]] constexpr seconds bubble(seconds slowest, seconds sum, const plan_shape& s) const {
    slowest += knobs_.microbatch_overhead;
    sum += knobs_.microbatch_overhead * static_cast<double>(std::max(s.pp, 1));
    if (knobs_.schedule == pipeline_schedule::interleaved) {
      return slowest * (static_cast<double>(s.pp - 1) / static_cast<double>(chunks()));
    }
    if (s.pp <= 1) return seconds{0.0};
    return sum - slowest;
  }

  /// pipeline_time of stages taking `stage_times` per microbatch (one per pipeline stage, in order).
  [[nodiscard]] constexpr seconds pipeline_time(const std::vector<seconds>& stage_times,
                                                const plan_shape& s) const {
    const auto [slowest, sum] = slowest_and_sum(stage_times, s);
    return pipeline_time(slowest, sum, s);
  }

  /// bubble of stages taking `stage_times` per microbatch (one per pipeline stage, in order).
  [[nodiscard]] constexpr seconds bubble(const std::vector<seconds>& stage_times, const plan_shape& s) const {
    const auto [slowest, sum] = slowest_and_sum(stage_times, s);
    return bubble(slowest, sum, s);
  }

  /// The pipeline if every one of the p stages took `stage_time`: (m + (p - 1) / v) t.
  [[nodiscard]] constexpr seconds pipeline_time(seconds stage_time, const plan_shape& s) const {
    return pipeline_time(stage_time, stage_time * static_cast<double>(s.pp), s);
  }

  /// The fill and drain if every one of the p stages took `stage_time`: (p - 1) / v t.
  [[nodiscard]] constexpr seconds bubble(seconds stage_time, const plan_shape& s) const {
    return bubble(stage_time, stage_time * static_cast<double>(s.pp), s);
  }

  /// Data-parallel gradient synchronization of a stage holding `parameters` per rank: an all-reduce of the
  /// fp32 main gradients (Megatron-LM), not overlapped; with the distributed optimizer a reduce-scatter of
  /// gradients and an all-gather of weights (the same volume). The faster of the two algorithms NCCL and
  /// Horovod run over nodes:
  /// - a flat ring over the dp ranks on the route of the data-parallel rings (Thakur et al. 2005);
  /// - a two-level all-reduce (Horovod's hierarchical all-reduce; Jia et al., "Highly Scalable Deep Learning
  ///   Training System with Mixed-Precision", 2018, section 3.3): groups of k consecutive dp ranks (at most a
  ///   node's devices over tp, k dividing dp) reduce-scatter inside the group, k rings of dp / k ranks, one
  ///   member per group, all-reduce their 1/k shard across the groups, and the groups all-gather. Across
  ///   nodes each rank then sends (dp/k - 1)/(dp/k) of 1/k of the gradients instead of (dp - 1)/dp of all of
  ///   them, which matters where a node's interfaces are shared (one network interface for four GPUs).
  /// Every route is the cluster's (cluster::ring over the group shapes), so links, measurements and rank
  /// orders apply to both.
  /// With `expert` of the parameters a routed expert's, those are reduced over the expert-data-parallel
  /// ranks instead (plan_shape::expert_gradient_ranks, etp ep apart) after the others.
  [[nodiscard]] constexpr seconds gradient_sync(double parameters, const plan_shape& s,
                                                double expert = 0.0) const {
    return ring_sync(parameters - expert, s.gradient_ranks(), s.tp, s) +
           ring_sync(expert, s.expert_gradient_ranks(), s.expert_tp() * std::max(s.ep, 1), s);
  }

  /// gradient_sync of `parameters` over n ranks `stride` apart.
  [[nodiscard]] constexpr seconds ring_sync(double parameters, int n, int stride, const plan_shape& s) const {
    if (n <= 1 || !(parameters > 0.0)) return seconds{0.0};
    const bytes_per_parameter per = state_bytes_of(knobs_);
    const bytes gradients{parameters * per.gradients};
    seconds best = cost::all_reduce_time(gradients, n, ring_route({n, stride}, s.devices()));
    const int node = largest_node();
    for (int k = 2; k < n && k * stride <= node; ++k) {
      if (n % k != 0) continue;
      const cluster::route inside = ring_route({k, stride}, s.devices());
      const cluster::route across = ring_route({n / k, k * stride}, s.devices());
      best = std::min(best, cost::reduce_scatter_time(gradients, k, inside) +
                                cost::all_reduce_time(gradients / static_cast<double>(k), n / k, across) +
                                cost::all_gather_time(gradients, k, inside));
    }
    return best;
  }

  /// Gradient buckets of a stage holding `parameters` per rank: Megatron-Core's DistributedDataParallel
  /// groups gradients into buckets of max(40 M, 1 M * dp) parameters (distributed_data_parallel.py, the
  /// default `bucket_size`) and reduces one bucket as soon as all its gradients are made.
  [[nodiscard]] static constexpr double gradient_buckets(double parameters, const plan_shape& s) {
    const double bucket = std::max(40e6, 1e6 * static_cast<double>(s.gradient_ranks()));
    return std::max(1.0, std::ceil(parameters / bucket));
  }

  /// What stays exposed of a bucketed collective taking `total` when its n buckets become ready one after
  /// another over a `window` of computation (bucket j at (j + 1) / n of it) and run one at a time: the
  /// collective ends at max_j ((j + 1) w / n + (n - j) T / n), so max(T / n, T - (n - 1) / n w) stays
  /// after the window: the last bucket at least, all of what the window cannot cover at most.
  [[nodiscard]] static constexpr seconds exposed_after(seconds total, double buckets, seconds window) {
    const double n = std::max(buckets, 1.0);
    return std::max(total / n, total - window * ((n - 1.0) / n));
  }

  /// The computation a bucketed collective can hide under: in the last microbatch's backward pass (gradient
  /// reduction) or the first microbatch's forward pass (parameter gather) of a stage taking `stage_time`
  /// per microbatch. Without recomputation the backward pass is 2/3 of a stage's FLOPs (twice the forward:
  /// Narayanan et al., SC'21, section 5.1), with full recomputation 3/4 (the forward runs again in it).
  [[nodiscard]] constexpr std::pair<seconds, seconds> overlap_windows(seconds stage_time) const {
    const double again = knobs_.recompute == model::recompute::full ? 1.0 : 0.0;
    const double backward = (2.0 + again) / (3.0 + again);
    return {stage_time * (1.0 - backward), stage_time * backward};
  }

  /// exposed_after for a stage of v model chunks (the interleaved schedule; v = 1 otherwise) whose pass of
  /// one microbatch over all its chunks takes `window`. Megatron-Core reduces each chunk's gradients as soon
  /// as that chunk's last backward step ends (schedules.py, forward_backward_pipelining_with_interleaving:
  /// the grad_sync_func of a model chunk runs after its last microbatch), and the cool-down runs the chunks'
  /// last steps in groups of min(p, m) microbatches, so chunk c's gradients are ready c min(p, m) window / v
  /// before the end (c = 0 the last); the parameter gathers of the first forward steps are the same in
  /// mirror image. With the n buckets spread evenly over the chunks and reduced one at a time, what stays is
  /// the last chunk's share over its own step, exposed_after(T / v, n / v, w / v), plus the backlog of the
  /// others where they take longer than the steps between them: max(0, (v - 1) / v (T - min(p, m) w)).
  [[nodiscard]] constexpr seconds exposed_over_chunks(seconds total, double buckets, seconds window,
                                                      const plan_shape& s) const {
    const int v = chunks();
    if (v <= 1 || s.pp <= 1) return exposed_after(total, buckets, window);
    const double chunk_count = static_cast<double>(v);
    const double group =
        static_cast<double>(std::min<std::int64_t>(s.pp, std::max<std::int64_t>(s.microbatches, 1)));
    const seconds last =
        exposed_after(total / chunk_count, std::max(1.0, buckets / chunk_count), window / chunk_count);
    const seconds backlog =
        std::max(seconds{0.0}, (total - window * group) * ((chunk_count - 1.0) / chunk_count));
    return last + backlog;
  }

  /// The share by which a device's computation slows while a collective it overlaps runs beside it (the
  /// largest over the plan's device types; hw::datasheet_spec::overlap_slowdown): NCCL's kernels take SMs and
  /// memory bandwidth from the GEMMs under them.
  [[nodiscard]] constexpr double overlap_slowdown() const {
    double most = 0.0;
    for (const auto& g : cluster().groups())
      if (g.device.kind == hw::device_kind::datasheet) most = std::max(most, g.device.sheet.overlap_slowdown);
    return most;
  }

  /// What a collective of `total` that stays `exposed` after the computation it overlaps adds to the
  /// iteration: the exposed part, and the computation slowed for as long as the rest ran beside it
  /// (overlap_slowdown).
  [[nodiscard]] constexpr seconds with_overlap_cost(seconds total, seconds exposed) const {
    return exposed + (total - exposed) * overlap_slowdown();
  }

  /// The data-parallel gradient reduction of a stage holding `parameters` per rank as it adds to the
  /// iteration: gradient_sync (with the distributed optimizer its reduce-scatter half), all of it, or with
  /// overlap_grad_reduce only what the backward pass of the last microbatch (`stage_time` per microbatch, the
  /// mean stage; the chunks' last steps under the interleaved schedule, exposed_over_chunks) does not hide,
  /// plus the computation it slows while it runs (with_overlap_cost). With the gradients sharded (ZeRO-2,
  /// training_knobs::shard_gradients) in every microbatch: the reduce-scatter after each backward pass,
  /// overlapped with it as with the last (DeepSpeed's overlap_comm) or not.
  [[nodiscard]] constexpr seconds exposed_gradient_reduction(double parameters, const plan_shape& s,
                                                             seconds stage_time, double expert = 0.0) const {
    if (knobs_.fsdp) return seconds{0.0};  // every microbatch's: exposed_fully_sharded
    const seconds all = gradient_sync(parameters, s, expert) * (knobs_.distributed_optimizer ? 0.5 : 1.0);
    if (knobs_.shard_gradients) {
      const double microbatches = static_cast<double>(std::max<std::int64_t>(s.microbatches, 1));
      if (!knobs_.overlap_grad_reduce) return all * microbatches;
      return with_overlap_cost(all, exposed_after(all, gradient_buckets(parameters, s),
                                                  overlap_windows(stage_time).second)) *
             microbatches;
    }
    if (!knobs_.overlap_grad_reduce) return all;
    return with_overlap_cost(all, exposed_over_chunks(all, gradient_buckets(parameters, s),
                                                      overlap_windows(stage_time).second, s));
  }

  /// The distributed optimizer's all-gather of the updated weights (none without the distributed
  /// optimizer, nor under fsdp, whose gathers exposed_fully_sharded counts): weight_gather, the other half
  /// of gradient_sync's rings, where the reduce-scatter carried fp32 gradients (Megatron-LM reduces bf16
  /// gradients in fp32: accumulate_allreduce_grads_in_fp32, megatron/training/arguments.py; bf16 ones with
  /// grad_reduce_in_bf16); all of it, or with overlap_param_gather what the first microbatch's forward pass
  /// does not hide (exposed_over_chunks), plus the computation it slows (with_overlap_cost).
  [[nodiscard]] constexpr seconds exposed_parameter_gather(double parameters, const plan_shape& s,
                                                           seconds stage_time, double expert = 0.0) const {
    if (!knobs_.distributed_optimizer || knobs_.fsdp) return seconds{0.0};
    const seconds all = weight_gather(parameters, s, expert);
    if (!knobs_.overlap_param_gather) return all;
    return with_overlap_cost(
        all, exposed_over_chunks(all, gradient_buckets(parameters, s), overlap_windows(stage_time).first, s));
  }

  /// One all-gather of the weights of a stage holding `parameters` per rank over the data-parallel ranks: the
  /// other half of gradient_sync's rings, carrying weights (2 bytes in bf16 and fp16, 1 with
  /// fp8_param_gather; the embedding's FP8-less weights left out) where the reduce-scatter carries gradients.
  [[nodiscard]] constexpr seconds weight_gather(double parameters, const plan_shape& s,
                                                double expert = 0.0) const {
    return gradient_sync(parameters, s, expert) * weight_gather_share();
  }

  /// The share of an all-reduce of the gradients that the all-gather of the same weights over the same ranks
  /// takes: half of the rings, carrying weights (2 bytes in bf16 and fp16, 1 with fp8_param_gather) where the
  /// all-reduce carries gradients.
  [[nodiscard]] constexpr double weight_gather_share() const {
    const bytes_per_parameter per = state_bytes_of(knobs_);
    return 0.5 * (knobs_.fp8_param_gather ? 1.0 : per.weights) / per.gradients;
  }

  /// Fully sharded data parallelism's communication (training_knobs::fsdp) as it adds to the iteration, for
  /// a stage holding `parameters` per rank that takes `stage_time` per microbatch. Without pipeline
  /// parallelism, in every one of the microbatches: an all-gather of the weights before the forward pass,
  /// another before the backward pass unless the weights stay gathered between them (train::
  /// fsdp_keeps_weights; FSDP2 frees them after the forward by default: reshard_after_forward), and a
  /// reduce-scatter of the gradients after it (FSDP2 reduces in every backward pass unless gradient sync is
  /// turned off between microbatches, which PyTorch leaves on by default). Each pass prefetches the next
  /// layer's gather under the current layer's computation, so of each pass's collectives what stays is what
  /// exposed_after leaves over the pass (overlap_windows), in units of gradient_buckets.
  ///
  /// Under pipeline parallelism PyTorch's schedules keep the weights gathered and the gradients unsharded
  /// after every backward pass but the last, and reduce-scatter them once after it (train::
  /// fsdp_reduces_once): exposed whole, as the schedule runs it after that pass. The weights are gathered
  /// once, under the first forward pass, when they stay gathered; otherwise each forward frees them and each
  /// backward keeps them, so a pass gathers whenever a forward pass ran before it: under 1F1B the first
  /// stage's min(pp, m) = w warm-up forwards and m - w + 1 backward passes, under GPipe m forwards and one
  /// backward.
  ///
  /// Under hybrid sharding (training_knobs::fsdp_shard: groups of g consecutive data-parallel ranks, tp
  /// apart) the gathers and reduce-scatters run inside the group, and each backward pass then all-reduces
  /// the group's gradient shard (1/g of them) across the dp cp / g replicas, g tp apart (FSDP2's HSDP
  /// reduces both ways in every backward pass by default); it overlaps like the reduce-scatter.
  [[nodiscard]] constexpr seconds exposed_fully_sharded(double parameters, const plan_shape& s,
                                                        seconds stage_time, double expert = 0.0) const {
    if (!knobs_.fsdp) return seconds{0.0};
    const int group = shard_ranks(knobs_, s.gradient_ranks());
    seconds gather = weight_gather(parameters, s, expert);
    seconds reduce = gradient_sync(parameters, s, expert) * 0.5;
    if (group != s.gradient_ranks()) {
      // Inside the group: the same rings over g ranks (no experts: train::validate refuses them here).
      const seconds inside = ring_sync(parameters, group, s.tp, s);
      gather = inside * weight_gather_share();
      reduce = inside * 0.5 + ring_sync(parameters / static_cast<double>(group), s.gradient_ranks() / group,
                                        s.tp * group, s);
    }
    const double units = gradient_buckets(parameters, s);
    const auto [forward, backward] = overlap_windows(stage_time);
    const double microbatches = static_cast<double>(std::max<std::int64_t>(s.microbatches, 1));
    const bool keeps = fsdp_keeps_weights(knobs_, s.pp);
    const seconds forward_gather = with_overlap_cost(gather, exposed_after(gather, units, forward));
    if (fsdp_reduces_once(knobs_, s.pp)) {
      if (keeps) return forward_gather + reduce;
      // Freed after each forward and kept after each backward: a pass gathers when a forward pass ran last.
      // GPipe runs every forward, then every backward: m forward gathers, one backward gather. 1F1B runs
      // min(pp, m) warm-up forwards (the first stage's, the most), each gathering, then alternates a backward
      // after a forward (each gathering) and ends with backwards in a row (the first of them gathering):
      // w forward gathers and m - w + 1 backward ones; the interleaved schedule is counted as 1F1B.
      const double w = knobs_.schedule == pipeline_schedule::gpipe
                           ? microbatches
                           : std::min(static_cast<double>(s.pp), microbatches);
      return forward_gather * w +
             with_overlap_cost(gather, exposed_after(gather, units, backward)) * (microbatches - w + 1.0) +
             reduce;
    }
    const seconds backward_moved = keeps ? reduce : gather + reduce;
    return (forward_gather +
            with_overlap_cost(backward_moved, exposed_after(backward_moved, units, backward))) *
           microbatches;
  }

  /// The data-parallel communication an iteration waits for: exposed_gradient_reduction plus
  /// exposed_parameter_gather of the stage holding `parameters`, when the stages take `stage_time_sum`
  /// together per microbatch (their mean is the overlap window; the same for every split of one device type,
  /// so the placers' bounds hold).
  [[nodiscard]] constexpr seconds exposed_data_parallel(double parameters, const plan_shape& s,
                                                        seconds stage_time_sum, double expert = 0.0) const {
    const seconds mean = stage_time_sum / static_cast<double>(std::max(s.pp, 1));
    return exposed_gradient_reduction(parameters, s, mean, expert) +
           exposed_parameter_gather(parameters, s, mean, expert) +
           exposed_fully_sharded(parameters, s, mean, expert);
  }

  /// The optimizer step of a stage holding `parameters` per rank on device `d`: weights, gradients and this
  /// rank's share of the optimizer state read and written once at the achievable HBM bandwidth (the
  /// `expert` parameters' state sharded over the expert-data-parallel ranks), times the device's calibrated
  /// memory factor; as many times over as torch's multi-tensor Adam makes passes (foreach_adam_bytes).
  [[nodiscard]] constexpr seconds optimizer_step(double parameters, const plan_shape& s, const hw::device& d,
                                                 double expert = 0.0) const {
    const bytes_per_parameter per = state_bytes_of(knobs_);
    const int ranks = knobs_.fsdp ? shard_ranks(knobs_, s.gradient_ranks()) : s.gradient_ranks();
    const int expert_ranks = knobs_.fsdp && ranks != s.gradient_ranks() ? ranks : s.expert_gradient_ranks();
    const double state_bytes =
        sharded_bytes(parameters, expert, per.weights, knobs_.fsdp, ranks, expert_ranks) +
        sharded_bytes(parameters, expert, per.gradients, knobs_.fsdp || knobs_.shard_gradients, ranks,
                      expert_ranks) +
        optimizer_state_bytes(parameters, expert, per, knobs_.distributed_optimizer || knobs_.fsdp, ranks,
                              expert_ranks);
    // A calibrated memory factor scales it as every memory-bound kernel, never past the peak bandwidth.
    // torch's multi-tensor Adam makes foreach_adam_bytes / fused_adam_bytes as many passes.
    const double factor = d.kind == hw::device_kind::datasheet ? d.sheet.calibrated.memory : 1.0;
    const double passes = knobs_.foreach_optimizer ? foreach_adam_bytes / fused_adam_bytes : 1.0;
    return seconds{passes * std::max(2.0 * state_bytes / hw::achievable_hbm_bandwidth(d).value() * factor,
                                     2.0 * state_bytes / d.hbm_bandwidth.value())};
  }

  /// The device whose optimizer step a plan waits for: of the devices the plan uses, the one with the
  /// slowest memory (every stage updates its states at once; the estimate charges the largest stage's update
  /// on it, which is exact on one device type and an upper bound on mixed ones).
  [[nodiscard]] constexpr const hw::device& optimizer_device(const plan_shape& s) const {
    const hw::device* slowest = &cluster().device_at(0);
    if (cluster().groups().size() == 1) return *slowest;
    cluster().for_each_group_run(0, s.devices(), [&](std::size_t g, int, int) {
      const hw::device& d = cluster().groups()[g].device;
      if (hw::achievable_hbm_bandwidth(d) < hw::achievable_hbm_bandwidth(*slowest)) slowest = &d;
    });
    return *slowest;
  }

  /// The all-reduce of a tied embedding's gradient between the first and the last pipeline stage: when the
  /// output layer shares the input embedding's matrix and the two sit on different stages, each keeps a copy,
  /// and after the backward pass Megatron-LM sums their fp32 gradients over the two ranks that hold the same
  /// shard (`_allreduce_embedding_grads`, in finalize_model_grads after the data-parallel synchronization;
  /// Shoeybi et al. 2019 tie the embeddings, Narayanan et al. SC'21 split them over stages).
  /// `tied_parameters` per rank, over the pairs of ranks (p - 1) tp dp apart, all at once; none without a
  /// pipeline or a tie.
  [[nodiscard]] constexpr seconds embedding_sync(double tied_parameters, const plan_shape& s) const {
    if (s.pp <= 1 || !(tied_parameters > 0.0)) return seconds{0.0};
    const bytes_per_parameter per = state_bytes_of(knobs_);
    return cost::all_reduce_time(bytes{tied_parameters * per.gradients}, 2,
                                 pairs_route((s.pp - 1) * s.stage_ranks(), s.devices()));
  }

  /// The iteration: the pipeline (`pipeline` = pipeline_time of the stages' times, which add up to
  /// `stage_time_sum` per microbatch), then what stays exposed of the data-parallel communication of the
  /// stage holding the most parameters (exposed_data_parallel), the tied embedding's all-reduce
  /// (`tied_parameters` per rank; 0 for none), that stage's optimizer step and the calibrated fixed time
  /// of an iteration (training_knobs::step_overhead).
  [[nodiscard]] constexpr seconds iteration(seconds pipeline, seconds stage_time_sum,
                                            double largest_parameters, double tied_parameters,
                                            const plan_shape& s, const hw::device& d,
                                            double expert = 0.0) const {
    return pipeline + exposed_data_parallel(largest_parameters, s, stage_time_sum, expert) +
           embedding_sync(tied_parameters, s) + optimizer_step(largest_parameters, s, d, expert) +
           knobs_.step_overhead;
  }

  /// Memory per device of stage `stage` (stage_memory_of_load: states, activations in flight, working set).
  [[nodiscard]] constexpr memory_breakdown stage_memory(double parameters, bytes activations,
                                                        bytes working_set, int stage,
                                                        const plan_shape& s) const {
    return stage_memory_of_load(parameters, activations, working_set, stage, s.pp, s.gradient_ranks(),
                                s.microbatches, knobs_);
  }

  /// The device types of the ranks of pipeline stage `stage` (its tp * cp * dp consecutive ranks), each once
  /// in the order first met, with how many ranks each plays. Two groups of the same device are one type.
  [[nodiscard]] constexpr std::vector<stage_member> stage_members(int stage, const plan_shape& s) const {
    const int first = stage * s.stage_ranks();
    const int end = first + s.stage_ranks();
    std::vector<stage_member> out{{&cluster().device_at(first), 0, first}};
    if (cluster().groups().size() == 1) {
      out.front().ranks = s.stage_ranks();
      return out;
    }
    cluster().for_each_group_run(first, end, [&](std::size_t g, int from, int ranks) {
      const hw::device& d = cluster().groups()[g].device;
      auto it = std::find_if(out.begin(), out.end(), [&](const stage_member& m) { return *m.device == d; });
      if (it == out.end()) it = out.insert(out.end(), stage_member{&d, 0, from});
      it->ranks += ranks;
    });
    return out;
  }

  /// The member that paces a stage of several device types: the one whose type is slowest by `slowness`
  /// (a device's time for the whole model at the plan's width: estimate_step and the placers' tables use
  /// the same measure, so a plan's time equals its estimate). Every tensor-parallel collective and every
  /// data-parallel ring waits for its slowest member, and a stage's replicas all wait for the data-parallel
  /// reduction at the end of the iteration, so the slowest member's time is the stage's (an upper bound
  /// where a replica's pipeline meets slow devices in fewer stages than another's). The first of equals.
  template <class Slowness>
  [[nodiscard]] static constexpr const stage_member& pacing_member(const std::vector<stage_member>& members,
                                                                   Slowness&& slowness) {
    const stage_member* pacing = &members.front();
    double slowest = members.size() > 1 ? slowness(*pacing->device) : 0.0;
    for (std::size_t i = 1; i < members.size(); ++i) {
      const double t = slowness(*members[i].device);
      if (t > slowest) {
        slowest = t;
        pacing = &members[i];
      }
    }
    return *pacing;
  }

  /// The memory a plan may fill on every device of a stage: the least usable memory of its members' types
  /// (every rank of a stage holds the same states and activations).
  [[nodiscard]] constexpr bytes stage_capacity(const std::vector<stage_member>& members) const {
    bytes least = usable_memory(*members.front().device, knobs_);
    for (const auto& m : members) least = std::min(least, usable_memory(*m.device, knobs_));
    return least;
  }

 private:
  /// The slowest of a pipeline's stage times and their sum (in stage order); one time per stage.
  static constexpr std::pair<seconds, seconds> slowest_and_sum(const std::vector<seconds>& stage_times,
                                                               const plan_shape& s) {
    if (static_cast<int>(stage_times.size()) != s.pp) {
      throw input_error("a pipeline of " + std::to_string(s.pp) + " stages needs as many stage times, not " +
                        std::to_string(stage_times.size()));
    }
    seconds slowest{0.0};
    seconds sum{0.0};
    for (const seconds t : stage_times) {
      slowest = std::max(slowest, t);
      sum += t;
    }
    return {slowest, sum};
  }

  /// pipeline_send and pipeline_cut over the pipeline's route `pair`: pipeline_sends asks it once for both
  /// of a stage's cuts (it prices every stage a placer tries).
  [[nodiscard]] constexpr seconds pipeline_send_over(bytes boundary, const plan_shape& s,
                                                     const cluster::route& pair) const {
    if (knobs_.sequence_parallel || s.tp == 1) return cost::point_to_point_time(boundary, pair);
    return cost::point_to_point_time(boundary / static_cast<double>(s.tp), pair) +
           cost::all_gather_time(boundary, s.tp, tensor_parallel_route(s.tp));
  }

  [[nodiscard]] constexpr seconds pipeline_cut_over(bytes boundary, const plan_shape& s,
                                                    const cluster::route& pair) const {
    if (s.pp <= 1) return seconds{0.0};
    return pipeline_send_over(boundary, s, pair) * static_cast<double>(chunks());
  }

  /// cluster::ring and cluster::pairs, from the tracker when track_routes gave one, else through the memo
  /// when remember_routes gave one.
  [[nodiscard]] constexpr cluster::route ring_route(cluster::group_shape shape, int used) const {
    if (tracker_ != nullptr) return tracker_->ring(shape, used);
    return remembered(true, shape, used, [&] { return cluster().ring(shape, used); });
  }
  [[nodiscard]] constexpr cluster::route pairs_route(int distance, int used) const {
    if (tracker_ != nullptr) return tracker_->pairs(distance, used);
    return remembered(false, {distance, 1}, used, [&] { return cluster().pairs(distance, used); });
  }
  template <class Find>
  constexpr cluster::route remembered(bool ring, cluster::group_shape shape, int used, Find find) const {
    if (memo_ == nullptr) return find();
    if (const auto kept = memo_->find(ring, shape, used)) return *kept;
    const cluster::route r = find();
    memo_->keep(ring, shape, used, r);
    return r;
  }

  cluster::cluster cluster_;
  const cluster::cluster* borrowed_ = nullptr;  ///< the cluster when borrowed (the pointer constructor)
  training_knobs knobs_{};
  route_memo* memo_ = nullptr;                 ///< remember_routes: not the model's state, so copies share it
  cluster::route_tracker* tracker_ = nullptr;  ///< track_routes: likewise
};

namespace detail {
/// The TP collectives' cost in one pass of a layer (forward ops or backward ops), serial as on a GPU: the
/// pass's network ops costed (cost::cost_of), in order, kept with the pass's problem in `cache`.
inline seconds collective_share(const model::layer& l, const hw::device& d, const cluster::route& tp,
                                bool backward, const sched::schedule_cache& cache) {
  return sched::layer_problem(l, d, tp, backward ? sched::pass::backward : sched::pass::forward, cache)
      .collectives;
}

/// What context parallelism's ring attention leaves exposed in a layer's forward and backward pass
/// (Megatron-Core's default cp_comm_type "p2p": Transformer Engine's AttnFuncWithCPAndKVP2P; Liu et al.,
/// "Ring Attention with Blockwise Transformers", 2023). The cp ranks each hold sequence / cp of the keys and
/// values; in cp steps every rank's queries meet every block while the blocks move one rank along the ring,
/// each transfer under the attention of the block before it: cp - 1 sends of a rank's keys and values
/// (forward), of its keys, values and their gradients (backward: twice the bytes), each exposed by what the
/// attention step beside it (1 / cp of the layer's attention in that pass; load balancing makes the steps
/// equal) does not cover: (cp - 1) max(0, send - attention / cp). Nothing without context parallelism.
inline std::pair<seconds, seconds> context_parallel_exposed(const model::layer& l, const hw::device& d,
                                                            const cluster::route& tp,
                                                            const cluster::route& cp) {
  const int n = l.shape.cp;
  if (n <= 1) return {seconds{0.0}, seconds{0.0}};
  // model::backward lists the forward ops' gradients in reverse order: the k-th attention from the end of
  // the backward pass is the gradient of the k-th attention of the forward pass.
  std::vector<seconds> backward;
  for (const model::op& b : model::backward(l))
    if (b.kind == model::op_kind::fused_attention) backward.push_back(cost::cost_of(b, d, tp).all_cores);
  std::pair<seconds, seconds> exposed{seconds{0.0}, seconds{0.0}};
  const double steps = static_cast<double>(n - 1);
  for (const model::op& o : l.ops) {
    if (o.kind != model::op_kind::fused_attention || backward.empty()) continue;
    // The projected keys and values: what the kernel reads beside its queries (the output's size).
    const bytes kv{static_cast<double>(o.in_elements - o.out_elements) * static_cast<double>(o.elem_bytes)};
    const seconds send = cost::point_to_point_time(kv, cp);
    const seconds forward = cost::cost_of(o, d, tp).all_cores;
    exposed.first += std::max(seconds{0.0}, send - forward / static_cast<double>(n)) * steps;
    exposed.second += std::max(seconds{0.0}, send * 2.0 - backward.back() / static_cast<double>(n)) * steps;
    backward.pop_back();
  }
  return exposed;
}

/// A layer's expert-parallel all-to-alls (model::op_kind::all_to_all), each of `b` bytes per rank over its
/// `group` ranks on the expert-parallel links (cost::all_to_all_time): their total, and the dispatch's and
/// the combine's times when the layer runs that one pair (a mixture-of-experts block).
struct expert_exchanges {
  seconds total{0.0};
  seconds dispatch{0.0};
  seconds combine{0.0};
  int count = 0;
};
inline expert_exchanges expert_exchanges_of(const model::layer& l, const cost::all_to_all_routes& ep) {
  expert_exchanges x;
  for (const model::op& o : l.ops) {
    if (o.kind != model::op_kind::all_to_all) continue;
    const seconds a = cost::all_to_all_time(model::output_bytes(o), o.group, ep);
    if (x.count == 0) x.dispatch = a;
    if (x.count == 1) x.combine = a;
    x.total += a;
    ++x.count;
  }
  return x;
}

/// What expert parallelism's token exchange adds to a layer's forward and backward pass: each all-to-all
/// once forward and once backward (its gradient goes back the same way), not overlapped (Megatron-Core's
/// default; expert_exchanges_of).
inline std::pair<seconds, seconds> expert_parallel_exposed(const model::layer& l,
                                                           const cost::all_to_all_routes& ep) {
  const seconds t = expert_exchanges_of(l, ep).total;
  return {t, t};
}

/// A pass of a mixture-of-experts layer split where Megatron-Core's EP overlap cuts it: `experts` the share
/// of the pass's op time between its two all-to-alls (the experts' GEMMs; in the backward pass, between the
/// combine's gradient and the dispatch's) plus the shared experts, which run in the same node; the rest
/// (attention, norms, router, permutation, unpermutation) is the pre-dispatch part.
template <class Ops, class Costs>
double expert_share(const Ops& ops, const Costs& costs) {
  double inside = 0.0;
  double all = 0.0;
  int exchanges = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == model::op_kind::all_to_all) {
      ++exchanges;
      continue;
    }
    const double t = costs[i].all_cores.value();
    all += t;
    if (exchanges == 1 || (ops[i].modules & model::recompute_module::shared_experts) != 0) inside += t;
  }
  return all > 0.0 ? inside / all : 0.0;
}

/// A forward pass and a backward pass of a mixture-of-experts layer run together under EP overlap: the
/// pre-dispatch and expert parts of each pass beside the all-to-alls of the other, four pairs one after the
/// other, each as long as its longer side (expert_overlap_saving).
constexpr seconds paired_passes(seconds pre_f, seconds mlp_f, seconds pre_b, seconds mlp_b, seconds dispatch,
                                seconds combine) {
  return std::max(pre_f, combine) + std::max(mlp_b, dispatch) + std::max(mlp_f, dispatch) +
         std::max(combine, pre_b);
}

/// What Megatron-Core's EP overlap (--overlap-moe-expert-parallel-comm) hides of a layer's all-to-alls per
/// microbatch once the schedule pairs a forward pass with the backward pass of the microbatch before
/// (combined_1f1b.py; TransformerLayerSchedulePlan.run in model_chunk_schedule_plan.py, Megatron-Core at
/// d98e8a6): layer by layer, the communication stream runs the combine's backward, the dispatch forward then
/// backward, the combine forward, while the computation stream runs beside them the forward's pre-dispatch
/// part, the experts' backward then forward, the backward's pre-dispatch part. Each of the four pairs waits
/// for the longer side: max(pre_f, c_b) + max(mlp_b, d_f) + max(mlp_f, d_b) + max(c_f, pre_b), against all
/// of them one after the other. `forward` and `backward` are the layer's GPU times per pass, `x` its
/// exchanges; returns the saving, half of it credited to each pass (none unless the layer runs one dispatch
/// and one combine).
inline seconds expert_overlap_saving(const model::layer& l, const hw::device& d, const cluster::route& tp,
                                     const expert_exchanges& x, seconds forward, seconds backward) {
  if (x.count != 2) return seconds{0.0};
  const auto table = cost::layer_costs(l, d, tp);
  const double forward_experts = expert_share(l.ops, table.forward);
  const double backward_experts = expert_share(model::backward(l), table.backward);
  const seconds mlp_f = forward * forward_experts;
  const seconds pre_f = forward - mlp_f;
  const seconds mlp_b = backward * backward_experts;
  const seconds pre_b = backward - mlp_b;
  const seconds dispatch = x.dispatch;
  const seconds combine = x.combine;
  const seconds serial = forward + backward + (dispatch + combine) * 2.0;
  const seconds paired = paired_passes(pre_f, mlp_f, pre_b, mlp_b, dispatch, combine);
  return std::max(seconds{0.0}, serial - paired);
}

/// How the layers of a run overlap expert parallelism's all-to-alls: `on` (training_knobs::
/// overlap_expert_comm), and the share of the passes the schedule runs unpaired (expert_overlap_unpaired).
struct expert_overlap {
  bool on = false;
  double unpaired = 0.0;
};

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
inline seconds sequence_parallel_regather(const model::layer& l, const hw::device& d,
                                          const cluster::route& tp) {
  if (!l.shape.sequence_parallel || l.shape.tp <= 1) return seconds{0.0};
  const auto table = cost::layer_costs(l, d, tp);
  seconds s{0.0};
  for (std::size_t i = 0; i < l.ops.size(); ++i)
    if (l.ops[i].kind == model::op_kind::all_gather) s += table.forward[i].all_cores;
  return s;
}

/// What Transformer Engine's tensor-parallel communication overlap (Megatron-LM --tp-comm-overlap, with
/// sequence parallelism) hides in one pass of a layer on a GPU, `ops` the pass's ops and `costs` their costs:
/// TE splits each all-gather before a column-parallel GEMM and each reduce-scatter after a row-parallel GEMM
/// into tp chunks exchanged over the ring while the GEMM computes on the chunks already there (Wang et al.,
/// "Overlap Communication with Dependent Computation via Decomposition", ASPLOS 2023; TE's userbuffers). A
/// collective of time c beside a GEMM of time g then leaves max(c / tp, c - g) exposed: the first chunk, or
/// what the GEMM cannot cover. The all-gather is paired with the first GEMM reading it, the reduce-scatter
/// with the GEMM it reduces.
template <class Ops, class Costs>
seconds tp_overlap_savings(const Ops& ops, const Costs& costs, int tp) {
  seconds saved{0.0};
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const model::op_kind k = ops[i].kind;
    if (k != model::op_kind::all_gather && k != model::op_kind::reduce_scatter) continue;
    seconds gemm{0.0};
    if (k == model::op_kind::reduce_scatter) {
      for (const auto in : ops[i].inputs)
        if (in >= 0 && ops[static_cast<std::size_t>(in)].kind == model::op_kind::matmul)
          gemm = std::max(gemm, costs[static_cast<std::size_t>(in)].all_cores);
    } else {
      for (std::size_t j = i + 1; j < ops.size() && gemm.value() == 0.0; ++j) {
        if (ops[j].kind != model::op_kind::matmul) continue;
        for (const auto in : ops[j].inputs)
          if (in == static_cast<std::int16_t>(i)) gemm = costs[j].all_cores;
      }
    }
    const seconds c = costs[i].all_cores;
    const seconds exposed = std::max(c / static_cast<double>(tp), c - gemm);
    saved += c - exposed;
  }
  return saved;
}

/// Streaming multiprocessors Transformer Engine's userbuffers take from the GEMMs they overlap under
/// --tp-comm-overlap, in its default configuration (transformer_engine/pytorch/module/base.py, initialize_ub
/// and get_default_config, v2.x): the reduce-scatters after the row-parallel forward GEMMs ("pipeline":
/// proj_fprop, fc2_fprop) and the bulk overlaps of the column-parallel layers' backward GEMMs ("bulk": qkv
/// and fc1 dgrad and wgrad) run on num_sm = 16 SMs with set_sm_margin, so those GEMMs run on the others; its
/// ring-exchange overlaps (the all-gathers before the column-parallel forward GEMMs and the row-parallel
/// input-gradient GEMMs) move data with the copy engines.
inline constexpr int tp_overlap_sm_margin = 16;

/// What those GEMMs of one pass (`ops`; forward: the row-parallel ones, backward: the column-parallel ones)
/// lose on `d` by running on tp_overlap_sm_margin fewer SMs (cost::gemm_fraction's waves over fewer units).
template <class Ops>
seconds tp_overlap_sm_cost(const Ops& ops, const hw::device& d, const cluster::route& tp, bool forward) {
  if (d.kind != hw::device_kind::datasheet) return seconds{0.0};
  hw::device narrowed = d;
  auto& g = narrowed.sheet.gemm;
  const int units = std::max(1, g.compute_units - tp_overlap_sm_margin);
  const double share = static_cast<double>(units) / static_cast<double>(std::max(1, g.compute_units));
  g.compute_units = units;  // fewer waves' worth of SMs, each SM at its own rate:
  g.max_fraction *= share;
  g.fp8_max_fraction *= share;
  const model::tp_split paired = forward ? model::tp_split::row : model::tp_split::column;
  seconds lost{0.0};
  for (const model::op& o : ops) {
    if (o.kind != model::op_kind::matmul || o.split != paired) continue;
    lost += cost::cost_of(o, narrowed, tp).all_cores - cost::cost_of(o, d, tp).all_cores;
  }
  return lost;
}

/// A layer's costs on `d` with TP route `tp` through `cache`, with its TP collectives' shares (the part of
/// the forward that recomputation `mode` runs again holds collectives only under full recomputation: the
/// attention core holds none). With `tp_overlap` (a sequence-parallel layer on a GPU) the collectives keep
/// only what tp_overlap_savings leaves exposed; the all-gathers that the backward pass runs again for the
/// weight gradients are overlapped with the input-gradient GEMMs the same way (TE's bulk overlap), their
/// first chunk left, and the GEMMs beside TE's SM-driven overlaps run on fewer SMs (tp_overlap_sm_cost).
inline timed_layer time_with_shares(const model::layer& l, const hw::device& d, const cluster::route& tp,
                                    const sched::schedule_cache& cache, model::recompute mode,
                                    bool tp_overlap = false, const cluster::route& cp = {},
                                    const cost::all_to_all_routes& ep = {}, const expert_overlap& eo = {}) {
  const seconds tp_forward = collective_share(l, d, tp, false, cache);
  timed_layer r{time_layer(l, d, tp, cache), tp_forward, collective_share(l, d, tp, true, cache),
                mode == model::recompute::full ? tp_forward : seconds{0.0}};
  seconds regather = sequence_parallel_regather(l, d, tp);
  if (tp_overlap && l.shape.sequence_parallel && l.shape.tp > 1 && d.kind == hw::device_kind::datasheet) {
    const auto table = cost::layer_costs(l, d, tp);
    const auto backward_ops = model::backward(l);
    const seconds forward =
        tp_overlap_savings(l.ops, table.forward, l.shape.tp) - tp_overlap_sm_cost(l.ops, d, tp, true);
    const seconds backward = tp_overlap_savings(backward_ops, table.backward, l.shape.tp) -
                             tp_overlap_sm_cost(backward_ops, d, tp, false);
    // GPU-side changes: made to the GPU's time, then the host bound again (a host-bound pass stays so).
    const double host = l.shape.host_per_op;
    const seconds saved_forward =
        r.t.forward - cost::host_bound(r.t.gpu_forward - forward, l.ops.size(), host);
    const seconds saved_backward =
        r.t.backward - cost::host_bound(r.t.gpu_backward - backward, backward_ops.size(), host);
    r.t.gpu_forward -= forward;
    r.t.gpu_backward -= backward;
    r.t.forward -= saved_forward;
    r.tp_forward -= saved_forward;
    r.t.backward -= saved_backward;
    r.tp_backward -= saved_backward;
    if (mode == model::recompute::full) {
      r.t.recompute_full -= saved_forward;
      r.tp_recompute -= saved_forward;
    }
    regather = regather / static_cast<double>(l.shape.tp);
  }
  r.t.backward += regather;
  r.tp_backward += regather;
  // Context parallelism's ring and expert parallelism's all-to-alls, each outside the layer's op costs.
  const auto [ring_forward, ring_backward] = context_parallel_exposed(l, d, tp, cp);
  const expert_exchanges exchanges = expert_exchanges_of(l, ep);
  seconds exchange_forward = exchanges.total;
  seconds exchange_backward = exchanges.total;
  if (eo.on && exchanges.count > 0) {
    const seconds hidden = expert_overlap_saving(l, d, tp, exchanges, r.t.gpu_forward, r.t.gpu_backward) *
                           (1.0 - eo.unpaired) / 2.0;
    exchange_forward -= std::min(exchange_forward, hidden);
    exchange_backward -= std::min(exchange_backward, hidden);
  }
  const seconds exposed_forward = ring_forward + exchange_forward;
  const seconds exposed_backward = ring_backward + exchange_backward;
  r.t.forward += exposed_forward;
  r.tp_forward += exposed_forward;
  r.t.backward += exposed_backward;
  r.tp_backward += exposed_backward;
  if (mode == model::recompute::full) {
    r.t.recompute_full += exposed_forward;
    r.tp_recompute += exposed_forward;
  }
  return r;
}

/// The share of a rank's passes that Megatron-Core's EP overlap leaves unpaired, `m` microbatches per
/// replica: without a pipeline the first forward and the last backward (1 / m); under the interleaved
/// schedule the first stage's warm-up forwards, (pp - 1) x 2 + (vp - 1) x pp plus the one more the overlap
/// schedules, and as many cool-down backwards, of its m x vp (schedules.py,
/// get_pp_rank_microbatches, Megatron-Core at d98e8a6).
inline double expert_overlap_unpaired(int pp, int vp, std::int64_t m) {
  const double passes = static_cast<double>(std::max<std::int64_t>(m, 1)) * std::max(vp, 1);
  const double alone = pp <= 1 ? 1.0 : 2.0 * (pp - 1) + static_cast<double>((vp - 1) * pp) + 1.0;
  return std::min(1.0, alone / passes);
}

/// The distinct layers of a run (one per kind of the model), timed on one device.
struct timed_layers {
  const hw::device* device = nullptr;
  std::vector<timed_layer> kinds;
  double model_s = 0.0;  ///< every node of the run: forward, backward and recomputation (a stage's pace)
};
}  // namespace detail

/// The time of one training iteration of `m` on the first tp * pp * dp devices of cluster `c` (the caller
/// validated the plan with train::validate). Formulas (docs/step-time.md), all from step_model:
/// - Stages: `split` gives each stage's layers (pp entries in pipeline order: node_ranges); empty means the
///   Megatron split (uniform_split). Per microbatch a stage takes the forward, backward and
///   recomputation of its layers on its own devices (layer_times through `cache`, each distinct layer timed
///   once per device type; on GPUs TP collectives are ops inside them) plus the pipeline sends of its cuts
///   (step_model::stage_time).
/// - Pipeline: (m - 1) t_max + sum_i t_i for 1F1B and GPipe, (m + (p - 1) / v) t_max for interleaved 1F1B,
///   t_i stage i's time per microbatch (step_model::pipeline_time).
/// - Data parallelism and optimizer: the largest stage's gradient synchronization and optimizer step
///   (step_model::iteration).
/// The breakdown attributes the same time to compute, bubble, recomputation and communication.
/// `tracked`, when given, is a tracker of `c`'s routes (cluster::route_tracker) that the estimate takes
/// every ring and pairs route from: the same numbers, without following the routes rank by rank again
/// after each exchange of the rank annealing.
inline step_estimate estimate_step(const model::model& m, const cluster::cluster& c, const parallelism& p,
                                   const training_knobs& k, const sched::schedule_cache& cache,
                                   const std::vector<stage_layers>& split = {},
                                   cluster::route_tracker* tracked = nullptr) {
  if (p.devices() > c.devices()) {
    throw input_error("the plan uses " + std::to_string(p.devices()) + " devices but the cluster has " +
                      std::to_string(c.devices()) + "; give degrees whose product fits the cluster");
  }
  step_estimate e;
  const model::layer_shape shape = layer_shape_of(m, p, k);
  const model::at_sequence resized{m, k.sequence};
  const model::model& run = *resized;
  std::vector<stage_layers> stages = split;
  if (stages.empty()) stages = uniform_split(run, p.pp, k);
  if (static_cast<int>(stages.size()) != p.pp) {
    throw input_error("a stage split needs one entry per pipeline stage (" + std::to_string(p.pp) + ")");
  }
  const std::vector<node_range> ranges = node_ranges(run, stages);
  const std::int64_t mb = microbatches_per_replica(p, k);
  e.microbatches = mb;
  route_memo routes;
  step_model model{&c, k};
  if (tracked != nullptr) {
    model.track_routes(*tracked);
  } else if (route_memo::worth_remembering(c)) {
    model.remember_routes(routes);
  }
  const plan_shape where{p.tp, p.pp, p.dp, mb, p.cp, p.ep, p.etp};
  const cluster::route cp_route = model.context_parallel_route(where);
  const cost::all_to_all_routes ep_route =
      model.expert_parallel_routes(where, run.config.experts, run.config.top_k);
  const cluster::route tp_route = model.tensor_parallel_route(p.tp);
  const detail::expert_overlap ep_overlap{
      k.overlap_expert_comm,
      detail::expert_overlap_unpaired(
          p.pp, k.schedule == pipeline_schedule::interleaved ? k.virtual_stages : 1, mb)};
  const auto built = detail::build_layers(run, shape);
  // Every distinct layer timed once per device type the stages run on; blocks under the knobs'
  // recomputation, the other layers without.
  std::vector<detail::timed_layers> timed;
  auto timed_on = [&](const hw::device& d) -> const detail::timed_layers& {
    for (const auto& t : timed)
      if (*t.device == d) return t;
    detail::timed_layers t{&d, {}};
    for (std::size_t i = 0; i < run.kinds.size(); ++i) {
      const bool block = run.kinds[i].role == model::layer_role::block;
      t.kinds.push_back(detail::time_with_shares(built.kinds[i], d, tp_route, cache,
                                                 block ? k.recompute : model::recompute::none,
                                                 k.tp_comm_overlap, cp_route, ep_route, ep_overlap));
    }
    for (std::size_t v = 0; v < run.size(); ++v) {
      const detail::timed_layer& l = t.kinds[run.nodes[v]];
      const bool block = run.role_at(v) == model::layer_role::block;
      t.model_s += (l.t.forward + l.t.backward + (block ? l.t.recompute(k.recompute) : seconds{0.0})).value();
    }
    timed.push_back(std::move(t));
    return timed.back();
  };

  int slowest = 0;
  std::int64_t largest_params = -1;
  std::int64_t largest_expert = 0;
  seconds t_max{0.0};
  std::vector<seconds> stage_times;
  std::vector<seconds> recompute_tp;
  std::vector<seconds> blocking_sends;  // each stage's pipeline sends per microbatch, none overlapped
  double capacity_sum = 0.0;
  bool all_fit = true;
  for (int i = 0; i < p.pp; ++i) {
    const node_range r = ranges[static_cast<std::size_t>(i)];
    // A stage of several device types runs at its slowest member's pace (step_model::pacing_member).
    const std::vector<stage_member> members = model.stage_members(i, where);
    const stage_member& pacing =
        step_model::pacing_member(members, [&](const hw::device& d) { return timed_on(d).model_s; });
    const hw::device& d = *pacing.device;
    const detail::timed_layers& l = timed_on(d);
    stage_estimate st;
    st.layers = static_cast<std::int64_t>(r.size());
    st.devices = static_cast<std::int64_t>(where.stage_ranks());
    st.pacing_rank = pacing.first_rank;
    st.mixed = members.size() > 1;
    seconds tp_recompute{0.0};
    const std::int64_t blocks = detail::blocks_in(run, r);
    for (std::size_t v = r.first; v < r.last; ++v) {
      const detail::timed_layer& t = l.kinds[run.nodes[v]];
      st.forward += t.t.forward;
      st.backward += t.t.backward;
      st.tp_comm += t.tp_forward + t.tp_backward;
      if (run.role_at(v) == model::layer_role::block) {
        const bool again =
            k.recompute != model::recompute::full ||
            detail::recomputes_block(st.blocks, blocks, k.recompute_layers, k.virtual_stages,
                                     k.embedding_in_pipeline_split && r.first == 0,
                                     k.loss_in_pipeline_split && r.last == run.size(), k.recompute_by);
        ++st.blocks;
        if (!again) continue;
        st.recompute += t.t.recompute(k.recompute);
        st.tp_comm += t.tp_recompute;
        tp_recompute += t.tp_recompute;
      }
    }
    // The cuts: what the stage receives from the one before it and hands to the one after it.
    const bytes in = r.first > 0 ? l.kinds[run.nodes[r.first - 1]].t.boundary : bytes{0.0};
    const bytes out = r.last < run.size() ? l.kinds[run.nodes[r.last - 1]].t.boundary : bytes{0.0};
    st.pp_comm = model.pipeline_sends(in, out, st.forward + st.backward + st.recompute, where);
    blocking_sends.push_back(model.pipeline_sends(in, out, seconds{0.0}, where));
    const memory_breakdown mem = detail::stage_memory_of(run, built, p, k, r, i);
    st.memory = mem.total;
    st.capacity = model.stage_capacity(members);
    all_fit = all_fit && mem.total <= st.capacity;
    if (i == 0 || mem.total > e.peak_memory) {
      e.peak_memory = mem.total;
      e.memory_capacity = st.capacity;
      e.peak_stage = i;
    }
    const std::int64_t params = detail::stage_parameters(run, built, r);
    if (params > largest_params) largest_expert = detail::stage_expert_parameters(run, built, r);
    largest_params = std::max(largest_params, params);
    for (const auto& member : members)
      capacity_sum += hw::peak_matrix_flops(*member.device).value() * static_cast<double>(member.ranks);
    e.stages.push_back(st);
    recompute_tp.push_back(tp_recompute);
    stage_times.push_back(st.per_microbatch());
    if (i == 0 || st.per_microbatch() > t_max) {
      t_max = st.per_microbatch();
      slowest = i;
    }
  }

  const stage_estimate& worst = e.stages[static_cast<std::size_t>(slowest)];
  const double m_count = static_cast<double>(mb);
  const seconds rec_tp = recompute_tp[static_cast<std::size_t>(slowest)];
  const auto params = static_cast<double>(largest_params);
  // The copy of a tied embedding the later layers keep (its weights counted once more than the model's).
  double tied = 0.0;
  for (std::size_t v = 1; v < run.size(); ++v) {
    const model::layer& l = built.at(run, v);
    tied += static_cast<double>(model::layer_params(l, true) - model::layer_params(l, false));
  }
  const hw::device& largest_device = model.optimizer_device(where);
  seconds stage_time_sum{0.0};
  for (const seconds t : stage_times) stage_time_sum += t;
  const auto expert = static_cast<double>(largest_expert);
  // The fill and drain's blocking sends under overlapped interleaving (step_model::fill_drain_sends).
  const seconds fill_sends = model.fill_drain_sends(blocking_sends, mb, where);
  e.time_per_batch = model.iteration(model.pipeline_time(stage_times, where) + fill_sends, stage_time_sum,
                                     params, tied, where, largest_device, expert);
  step_breakdown& b = e.breakdown;
  b.tp_comm = worst.tp_comm * m_count;
  b.recompute = (worst.recompute - rec_tp) * m_count;
  b.compute = (worst.forward + worst.backward - (worst.tp_comm - rec_tp)) * m_count;
  b.pp_comm = worst.pp_comm * m_count;
  b.bubble = model.bubble(stage_times, where) + fill_sends;
  b.dp_comm =
      model.exposed_data_parallel(params, where, stage_time_sum, expert) + model.embedding_sync(tied, where);
  b.optimizer = model.optimizer_step(params, where, largest_device, expert);
  b.overhead = k.microbatch_overhead * m_count + k.step_overhead;

  const double t = e.time_per_batch.value();
  const auto seq = static_cast<double>(sequence_of(m, k));
  e.samples_per_s = static_cast<double>(k.global_batch) / t;
  e.tokens_per_s = e.samples_per_s * seq;
  const flops model_flops = model::training_flops_per_iteration(run, k.global_batch);
  e.model_flops_per_device = flops_per_second{model_flops.value() / t / static_cast<double>(p.devices())};
  // Over the mean peak of the devices used (one device type: its peak).
  const double mean_peak = c.groups().size() == 1 ? hw::peak_matrix_flops(c.groups().front().device).value()
                                                  : capacity_sum / static_cast<double>(p.devices());
  e.mfu = e.model_flops_per_device.value() / mean_peak;
  e.fits = all_fit;
  return e;
}

}  // namespace phaze::train
