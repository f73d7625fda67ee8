/// @file
/// Placement of a model with uneven stages under the training-step model: the model's layer cost tables (one
/// per tensor-parallel width, built from train::layer_times), `step_policy` (the training-step model of
/// train/step.hpp as a placer policy) and `place_model`, which runs chain_dp on them and re-checks the chosen
/// split with train::estimate_step. One timing and one memory model for `phaze estimate`, `phaze plan`, the
/// placers and the search (docs/step-time.md, "Uneven stages").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/any_placer.hpp"
#include "phaze/place/chain_dp.hpp"
#include "phaze/place/constant_tables.hpp"
#include "phaze/place/cost_table.hpp"
#include "phaze/place/objective.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

namespace phaze::place {

/// What step_policy needs per tensor-parallel width besides the table.
struct width_terms {
  int tp = 1;
  bytes boundary{};                   ///< a transformer block's output per rank: what every stage cut carries
  double tied_copy_parameters = 0.0;  ///< the head's copy of a tied embedding, per rank (0 when untied)
  bytes recompute_working_set{};      ///< full recomputation: one block's full activations (memory.hpp)
};

/// The training-step model (train::step_model) as a placer policy: every term forwards to the step model,
/// so for a split of a model's tables plan::time_per_batch equals train::estimate_step's time for that split
/// and a stage's memory is train::stage_memory_of_load's (tests/place/model_placement_test.cpp checks it).
/// What the step model needs besides a stage's load comes from the table's width (width_terms): every cut of
/// a transformer chain carries the same hidden state, so all stages pay the same sends; the full
/// recomputation working set is charged to every stage (a stage without a block is over-estimated by it).
/// Clusters of mixed device types (AMP's heterogeneous setting): the tables come in runs of one per device
/// type for each width (`devices`: the types, in the order of their tables), a stage is costed on the table
/// of its own devices' type and must fit their memory, and a stage whose devices are of two types makes
/// its configuration no plan (stage_table, stage_capacity, configures: place/objective.hpp).
struct step_policy {
  static constexpr bool allreduce_of_largest_stage = true;

  train::step_model model;
  std::vector<width_terms> widths;  ///< one per table
  std::vector<hw::device> devices;  ///< the device types, one table of each per width (empty: one type)

  [[nodiscard]] std::size_t types() const { return std::max<std::size_t>(devices.size(), 1); }
  /// Only the first table of each width starts configurations; the others cost stages on other types.
  [[nodiscard]] bool configures(std::size_t ti) const { return ti % types() == 0; }
  /// The table of the same width as `ti` timed on stage `stage`'s device type; no_stage_table when the
  /// stage's devices are of two types.
  [[nodiscard]] std::size_t stage_table(std::size_t ti, int stage, const stage_context& c) const {
    if (types() == 1) return ti;
    const hw::device* d = stage_device(stage, c);
    if (d == nullptr) return no_stage_table;
    const auto type =
        static_cast<std::size_t>(std::find(devices.begin(), devices.end(), *d) - devices.begin());
    return ti - ti % types() + type;
  }
  /// The memory of one device of stage `stage`.
  [[nodiscard]] double stage_capacity(const placement_settings& s, int stage, const stage_context& c) const {
    if (types() == 1) return s.memory_per_device.value();
    const hw::device* d = stage_device(stage, c);
    return d == nullptr ? 0.0 : d->hbm.value();
  }
  /// The device type of every rank of stage `stage` (Megatron-LM's rank order), or nullptr when they differ.
  [[nodiscard]] const hw::device* stage_device(int stage, const stage_context& c) const {
    return model.stage_device_if_one_type(stage, shape_of(c));
  }

  [[nodiscard]] const width_terms& terms(int tp) const {
    for (const auto& w : widths)
      if (w.tp == tp) return w;
    throw input_error("step_policy: no terms for tp " + std::to_string(tp));
  }
  [[nodiscard]] static train::plan_shape shape_of(const stage_context& c) {
    return {c.tp, c.stages, c.dp, c.microbatches};
  }
  [[nodiscard]] double parameters_of(const placement_settings& s, double parameter_bytes,
                                     const stage_context& c) const {
    // A single stage holds the embedding and the head together: no second copy of a tied matrix.
    const double copy = c.stages == 1 ? terms(c.tp).tied_copy_parameters : 0.0;
    return parameter_bytes / s.weight_bytes_per_parameter - copy;
  }

  [[nodiscard]] double microbatches_in_flight(const placement_settings&, int stage,
                                              const stage_context& c) const {
    const auto& k = model.knobs();
    return train::microbatches_in_flight(k.schedule, stage, c.stages, c.microbatches, k.virtual_stages);
  }
  template <class Node>
  static double work_s(const placement_settings& s, const Node& n) {
    return pipeline_policy::work_s(s, n);
  }
  /// A stage's time per microbatch: its work plus the pipeline sends of a block's output, the same for every
  /// stage whatever it holds (every cut of the chain carries the hidden state; the first stage's sends and
  /// the last's are charged as an interior stage's, as train::estimate_step does).
  [[nodiscard]] double stage_time_s(const placement_settings&, const stage_load& l,
                                    const stage_context& c) const {
    return model.stage_time(seconds{l.work_s}, terms(c.tp).boundary, shape_of(c)).value();
  }
  [[nodiscard]] double allreduce_s(const placement_settings& s, double parameter_bytes,
                                   const stage_context& c) const {
    return model.gradient_sync(parameters_of(s, parameter_bytes, c), shape_of(c)).value();
  }
  /// The pipeline of stages whose slowest takes `slowest_stage_time_s` and which take `stage_time_sum_s`
  /// together per microbatch (step_model::pipeline_time: (m - 1) t_max + sum_i t_i for 1F1B and GPipe):
  /// what makes this an UnevenPipelinePolicy.
  [[nodiscard]] double pipeline_s(const placement_settings&, double slowest_stage_time_s,
                                  double stage_time_sum_s, const stage_context& c) const {
    return model.pipeline_time(seconds{slowest_stage_time_s}, seconds{stage_time_sum_s}, shape_of(c)).value();
  }
  /// The pipeline if this stage were the slowest, the stages' times adding up to c.stage_time_sum_s: the
  /// largest stage cost is the pipeline. On one device type that sum is the same for every split (every
  /// stage's time is its work plus the same sends), so the placers minimize the slowest stage.
  [[nodiscard]] double stage_cost_s(const placement_settings& s, const stage_load& l,
                                    const stage_context& c) const {
    return pipeline_s(s, stage_time_s(s, l, c), c.stage_time_sum_s, c);
  }
  /// The pipeline (`pipeline`: the largest stage cost), then the gradient synchronization and optimizer step
  /// of the stage holding the most parameters (step_model::iteration).
  [[nodiscard]] double batch_time_s(const placement_settings& s, double pipeline,
                                    double largest_stage_parameters, const stage_context& c) const {
    return model
        .iteration(seconds{pipeline}, parameters_of(s, largest_stage_parameters, c), shape_of(c),
                   model.optimizer_device(shape_of(c)))
        .value();
  }
  [[nodiscard]] double stage_memory(const placement_settings& s, const stage_load& l, int stage,
                                    const stage_context& c) const {
    return model
        .stage_memory(parameters_of(s, l.parameter_bytes, c), bytes{l.activation_bytes},
                      terms(c.tp).recompute_working_set, stage, shape_of(c))
        .total.value();
  }
};

/// A model's placement problem: one table per tensor-parallel width (nodes = the layer graph: embedding,
/// blocks, head; per-rank times from train::layer_times with TP collectives and recomputation, parameter
/// bytes and activation bytes as place/memory.hpp counts them) and the matching step_policy.
struct model_problem {
  placement_problem<cost_table> problem;
  step_policy policy;
};

/// Builds the tables for `widths` (each must divide the model's heads and MLP) on cluster `c` (one device
/// group) with the knobs `k` (microbatch, sequence, precision, recomputation, sequence parallelism,
/// schedule).
inline model_problem model_tables(const model::model& m, const cluster::cluster& c,
                                  const train::training_knobs& k, const std::vector<int>& widths,
                                  const sched::schedule_cache& cache) {
  model_problem out;
  // The device types, in the order of their groups; one table per width and type.
  std::vector<hw::device> types;
  for (const auto& g : c.groups())
    if (std::find(types.begin(), types.end(), g.device) == types.end()) types.push_back(g.device);
  const model::model run = k.sequence > 0 ? model::with_sequence(m, k.sequence) : m;
  const double weight_bytes = static_cast<double>(hw::element_bytes(k.precision));
  auto& p = out.problem;
  static_cast<placement_settings&>(p) =
      model_settings(types.front(), c.groups().front().node, c.devices(), k);
  // The bounds of the DPs take the largest memory; each stage is checked against its own (stage_capacity).
  for (const auto& t : types) p.memory_per_device = std::max(p.memory_per_device, t.hbm);
  out.policy.model = train::step_model{c, k};
  if (types.size() > 1) out.policy.devices = types;
  const bool tied = run.config.tied_embeddings;
  for (const int tp : widths) {
    for (const hw::device& d : types) {
      const auto built =
          train::detail::build_layers(run, train::layer_shape_of(run, train::parallelism{tp, 1, 1}, k));
      const cluster::route route = out.policy.model.tensor_parallel_route(tp);
      const auto emb =
          train::detail::time_with_shares(built.embedding, d, route, cache, model::recompute::none);
      const auto block = train::detail::time_with_shares(built.block, d, route, cache, k.recompute);
      const auto head = train::detail::time_with_shares(built.head, d, route, cache, model::recompute::none);
      auto node = [&](const char* name, const train::detail::timed_layer& t, const train::stage_layers& holds,
                      seconds rec) {
        cost_node n;
        n.name = name;
        n.forward = t.t.forward;
        n.backward = t.t.backward;
        n.recompute = rec;
        n.parameters =
            bytes{static_cast<double>(train::detail::stage_parameters(built, tied, holds)) * weight_bytes};
        n.activations = train::detail::stage_activations_per_microbatch(built, holds, k.recompute);
        return n;
      };
      cost_table t;
      t.tp = tp;
      t.nodes.push_back(node("embedding", emb, {0, true, false}, seconds{0.0}));
      for (std::int64_t b = 0; b < run.config.layers; ++b) {
        t.nodes.push_back(node("block", block, {1, false, false}, block.t.recompute(k.recompute)));
      }
      t.nodes.push_back(node("head", head, {0, false, true}, seconds{0.0}));
      for (std::size_t i = 0; i + 1 < t.nodes.size(); ++i) {
        t.edges.push_back({i, i + 1, i == 0 ? emb.t.boundary : block.t.boundary});
      }
      width_terms w;
      w.tp = tp;
      w.boundary = block.t.boundary;
      w.tied_copy_parameters =
          static_cast<double>(train::detail::stage_parameters(built, tied, {0, true, false}) +
                              train::detail::stage_parameters(built, tied, {0, false, true}) -
                              train::detail::stage_parameters(built, tied, {0, true, true}));
      if (k.recompute == model::recompute::full) {
        w.recompute_working_set = model::activation_bytes(built.block, model::recompute::none);
      }
      out.policy.widths.push_back(w);
      p.tables.push_back(std::move(t));
    }
  }
  return out;
}

/// The layers each stage of a plan on a model's table holds (node 0 is the embedding, the last the head).
inline std::vector<train::stage_layers> stage_split(const plan& pl, std::size_t nodes) {
  std::vector<train::stage_layers> split;
  for (const auto& st : pl.stages) {
    train::stage_layers s;
    for (const std::size_t v : st.nodes) {
      if (v == 0) {
        s.embedding = true;
      } else if (v + 1 == nodes) {
        s.head = true;
      } else {
        ++s.blocks;
      }
    }
    split.push_back(s);
  }
  return split;
}

/// The tensor-parallel widths a model admits on cluster `c`: powers of two dividing the heads, key/value
/// heads and MLP width, inside one node of every device group (Megatron-LM keeps TP's all-reduces on the
/// fast links), at most the cluster's devices.
inline std::vector<int> admissible_widths(const model::model& m, const cluster::cluster& c) {
  const auto& config = m.config;
  int node = c.devices();
  for (const auto& g : c.groups()) node = std::min(node, g.node.devices);
  std::vector<int> out;
  for (int tp = 1; tp <= c.devices(); tp *= 2) {
    const bool divides =
        config.heads % tp == 0 && config.kv_heads_or_default() % tp == 0 && config.ffn % tp == 0;
    if (divides && tp <= std::max(1, node)) out.push_back(tp);
  }
  return out;
}

/// The outcome of placing a model with fixed knobs.
struct model_placement {
  plan placed;                             ///< chain_dp's plan on the model's tables
  train::parallelism parallel{};           ///< its degrees (when feasible)
  std::vector<train::stage_layers> split;  ///< its stages' layers (when feasible)
  train::step_estimate estimate;           ///< train::estimate_step of that split (when feasible)
};

/// A placer for a model's tables under the step model, chosen at run time (chain_placer by default).
using model_placer = any_placer<cost_table, step_policy>;

/// The best placement with uneven stages of `m` for the knobs `k` over tensor-parallel widths `widths`,
/// pipeline depths up to the block count and dp = devices / (tp * pp) (every device used), by `placer` under
/// step_policy. `fixed` may fix tp, pp or dp and set a cutoff. The plan's time equals
/// train::estimate_step's for its split. The interleaved schedule is not placed unevenly (its chunks are not
/// contiguous): give 1F1B or GPipe.
inline model_placement place_model(const model::model& m, const cluster::cluster& c,
                                   const train::training_knobs& k, const std::vector<int>& widths,
                                   const sched::schedule_cache& cache, placement_request fixed = {},
                                   const model_placer& placer = chain_placer{}) {
  if (k.schedule == train::pipeline_schedule::interleaved) {
    throw input_error(
        "uneven stages need the 1F1B or GPipe schedule; the interleaved schedule is placed "
        "uniformly (use the uniform placer)");
  }
  const model_problem mp = model_tables(m, c, k, widths, cache);
  if (mp.policy.types() > 1 && placer.name() != chain_placer::name()) {
    throw input_error(
        "on a cluster of several device types only the chain placer costs each stage on its own "
        "devices; use the chain placer (--placer chain), not " +
        std::string{placer.name()});
  }
  fixed.max_pp = static_cast<int>(m.config.layers);
  fixed.use_all_devices = true;
  model_placement out;
  out.placed = placer.place(mp.problem, mp.policy, fixed);
  if (!out.placed.feasible) return out;
  out.parallel = {out.placed.tp, out.placed.pp, out.placed.dp};
  out.split = stage_split(out.placed, mp.problem.tables.front().nodes.size());
  out.estimate = train::estimate_step(m, c, out.parallel, k, cache, out.split);
  return out;
}

}  // namespace phaze::place
