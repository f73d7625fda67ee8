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
  /// The least bytes any cut of the model carries per rank (on a transformer every cut carries the hidden
  /// state, so all cuts carry these): what a stage load without boundaries pays (place's bounds and
  /// with_stage_time_sum ask for it; a lower bound of every stage's sends).
  bytes boundary{};
  bool uniform_cuts = true;           ///< every cut carries `boundary` (the sum of stage times is split-free)
  double tied_copy_parameters = 0.0;  ///< the head's copy of a tied embedding, per rank (0 when untied)
  /// What a stage holds once beside its layers' states and activations under full recomputation: the
  /// largest block's full activations (memory.hpp).
  bytes working_set{};
  /// The parameters per rank of the model's largest layer: what fully sharded data parallelism holds
  /// gathered beside a stage's shards depends on it and on the pipeline depth
  /// (train::detail::fully_sharded_working_set).
  double largest_layer_parameters = 0.0;
};

/// The training-step model (train::step_model) as a placer policy: every term forwards to the step model,
/// so for a split of a model's tables plan::time_per_batch equals train::estimate_step's time for that split
/// and a stage's memory is train::stage_memory_of_load's (tests/place/model_placement_test.cpp checks it).
/// A stage pays the sends of its own cuts (step_model::stage_time: the bytes of the edges entering and
/// leaving it); on a transformer every cut carries the same hidden state, so all stages pay the same sends,
/// while the cuts of a composite model differ (width_terms::uniform_cuts). What the step model needs besides
/// a stage's load comes from the table's width (width_terms); the full recomputation working set is charged
/// to every stage (a stage without a block is over-estimated by it).
/// Clusters of mixed device types (AMP's heterogeneous setting): the tables come in runs of one per device
/// type for each width (`devices`: the types, in the order of their tables), a stage is costed on the table
/// of its own devices' type and must fit their memory; a stage whose devices are of several types is costed
/// on the table of the slowest of them (the most work over the whole model, `model_s`; the measure
/// train::estimate_step paces such a stage by) and must fit the least memory among them (stage_table,
/// stage_capacity: place/objective.hpp).
struct step_policy {
  static constexpr bool allreduce_of_largest_stage = true;
  /// The pipeline of uneven stages (pipeline_s), each cut priced by its bytes (cut_s), each stage on its own
  /// devices (stage_table, stage_capacity, configures).
  static constexpr policy_capabilities capabilities{
      .uneven_pipeline = true, .prices_cuts = true, .mixed_devices = true};

  train::step_model model;
  std::vector<width_terms> widths;  ///< one per table
  std::vector<hw::device> devices;  ///< the device types, one table of each per width (empty: one type)
  std::vector<double> model_s;      ///< per table: the work of all its nodes (a stage's pace on mixed types)
  /// Context-parallel ranks of every plan placed on these tables (parallelism::cp): each table's tp ranks
  /// times cp make one replica's share of a stage, so the placers see c.devices() / cp devices and choose
  /// tp * pp * dp of them; the step model's terms take the whole shape (tp, cp, dp, pp).
  int cp = 1;

  [[nodiscard]] std::size_t types() const { return std::max<std::size_t>(devices.size(), 1); }
  /// Only the first table of each width starts configurations; the others cost stages on other types.
  [[nodiscard]] bool configures(std::size_t ti) const { return ti % types() == 0; }
  /// The table of the same width as `ti` timed on the device type that paces stage `stage`: its only type,
  /// or the slowest of its types (train::step_model::pacing_member).
  [[nodiscard]] std::size_t stage_table(std::size_t ti, int stage, const stage_context& c) const {
    if (types() == 1) return ti;
    const std::size_t base = ti - ti % types();
    const auto members = model.stage_members(stage, shape_of(c));
    const auto table_of = [&](const hw::device& d) {
      return base + static_cast<std::size_t>(std::find(devices.begin(), devices.end(), d) - devices.begin());
    };
    const auto& pacing = train::step_model::pacing_member(
        members, [&](const hw::device& d) { return model_s.at(table_of(d)); });
    return table_of(*pacing.device);
  }
  /// The memory of one device of stage `stage`: the least of its members' types.
  [[nodiscard]] double stage_capacity(const placement_settings& s, int stage, const stage_context& c) const {
    if (types() == 1) return s.memory_per_device.value();
    return model.stage_capacity(model.stage_members(stage, shape_of(c))).value();
  }

  [[nodiscard]] const width_terms& terms(int tp) const {
    for (const auto& w : widths)
      if (w.tp == tp) return w;
    throw input_error("step_policy: no terms for tp " + std::to_string(tp));
  }
  [[nodiscard]] train::plan_shape shape_of(const stage_context& c) const {
    return {c.tp, c.stages, c.dp, c.microbatches, cp};
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
  /// What one cut of `cut_bytes` per rank adds to each stage beside it per microbatch
  /// (step_model::pipeline_cut); a stage's time is its work plus the cut_s of the two cuts it waits for
  /// (stage_time_s), which is what lets chain_dp price cuts once per configuration.
  [[nodiscard]] double cut_s(const placement_settings&, double cut_bytes, const stage_context& c) const {
    return model.pipeline_cut(bytes{cut_bytes}, shape_of(c)).value();
  }
  /// A stage's time per microbatch: its work plus the pipeline sends of its cuts (the bytes of the edges
  /// entering and leaving it; step_model::stage_time). A load without boundaries (a bound's) pays the least
  /// cut of the width, width_terms::boundary.
  [[nodiscard]] double stage_time_s(const placement_settings&, const stage_load& l,
                                    const stage_context& c) const {
    if (c.stages <= 1) return l.work_s;
    const double least = terms(c.tp).boundary.value();
    const bool bare = !(l.boundary_in_bytes > 0.0) && !(l.boundary_bytes > 0.0);
    return model
        .stage_time(seconds{l.work_s}, bytes{bare ? least : l.boundary_in_bytes},
                    bytes{bare ? least : l.boundary_bytes}, shape_of(c))
        .value();
  }
  [[nodiscard]] double allreduce_s(const placement_settings& s, double parameter_bytes,
                                   const stage_context& c) const {
    return model
        .exposed_data_parallel(parameters_of(s, parameter_bytes, c), shape_of(c), seconds{c.stage_time_sum_s})
        .value();
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
  /// of the stage holding the most parameters and the tied embedding's all-reduce (step_model::iteration).
  [[nodiscard]] double batch_time_s(const placement_settings& s, double pipeline,
                                    double largest_stage_parameters, const stage_context& c) const {
    return model
        .iteration(seconds{pipeline}, seconds{c.stage_time_sum_s},
                   parameters_of(s, largest_stage_parameters, c), terms(c.tp).tied_copy_parameters,
                   shape_of(c), model.optimizer_device(shape_of(c)))
        .value();
  }
  [[nodiscard]] double stage_memory(const placement_settings& s, const stage_load& l, int stage,
                                    const stage_context& c) const {
    const width_terms& w = terms(c.tp);
    const train::plan_shape shape = shape_of(c);
    return model
        .stage_memory(parameters_of(s, l.parameter_bytes, c), bytes{l.activation_bytes},
                      w.working_set + train::detail::fully_sharded_working_set(w.largest_layer_parameters,
                                                                               model.knobs(), shape.pp),
                      stage, shape)
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

/// Builds the tables for `widths` (each must split every transformer layer of the model) on cluster `c` with
/// the knobs `k` (microbatch, sequence, precision, recomputation, sequence parallelism, schedule): one node
/// per layer node of the model (its forward, backward and recomputation times with TP collectives on the
/// device type, parameters with a tied copy counted, activations as train/memory.hpp keeps them), one edge
/// per cut carrying the layer's output; one table per width and device type. With context parallelism
/// (`cp` > 1) the layers are those of one rank of a context-parallel group (a 1/cp share of each sequence,
/// with ring attention's exchange timed on the cp ranks' links), and the placers place them on
/// c.devices() / cp groups of cp ranks (step_policy::cp); a cp that does not divide the devices is
/// no_admissible_configuration.
inline model_problem model_tables(const model::model& m, const cluster::cluster& c,
                                  const train::training_knobs& k, const std::vector<int>& widths,
                                  const sched::schedule_cache& cache, int cp = 1) {
  if (cp < 1) train::rules::parallel_degrees_must_be_positive();
  if (c.devices() % cp != 0) {
    throw no_admissible_configuration("a context-parallel size of " + std::to_string(cp) +
                                      " does not divide the cluster's " + std::to_string(c.devices()) +
                                      " devices; give a cp that divides them");
  }
  model_problem out;
  // The device types, in the order of their groups; one table per width and type.
  std::vector<hw::device> types;
  for (const auto& g : c.groups())
    if (std::find(types.begin(), types.end(), g.device) == types.end()) types.push_back(g.device);
  const model::model run = k.sequence > 0 ? model::with_sequence(m, k.sequence) : m;
  const double weight_bytes = static_cast<double>(train::activation_element_bytes(k.precision));
  auto& p = out.problem;
  static_cast<placement_settings&>(p) =
      model_settings(types.front(), c.groups().front().node, c.devices() / cp, k);
  // The bounds of the DPs take the largest memory; each stage is checked against its own (stage_capacity).
  for (const auto& t : types) p.memory_per_device = std::max(p.memory_per_device, train::usable_memory(t, k));
  out.policy.model = train::step_model{c, k};
  out.policy.cp = cp;
  if (types.size() > 1) out.policy.devices = types;
  const std::size_t n = run.size();
  for (const int tp : widths) {
    const auto built =
        train::detail::build_layers(run, train::layer_shape_of(run, train::parallelism{tp, 1, 1, cp}, k));
    const cluster::route route = out.policy.model.tensor_parallel_route(tp);
    // The context-parallel ring: cp ranks tp apart, the same for every pipeline depth and data-parallel
    // degree that uses all the devices (train::step_model::context_parallel_route).
    const cluster::route cp_route =
        out.policy.model.context_parallel_route({tp, 1, std::max(1, c.devices() / (tp * cp)), 1, cp});
    // What a node holds does not depend on the device: parameters (a tied copy counted: a node alone is on
    // a stage without node 0 unless it is node 0) and activations.
    std::vector<bytes> parameters(n);
    std::vector<bytes> activations(n);
    width_terms w;
    w.tp = tp;
    for (std::size_t v = 0; v < n; ++v) {
      const train::node_range alone{v, v + 1};
      parameters[v] =
          bytes{static_cast<double>(train::detail::stage_parameters(run, built, alone)) * weight_bytes};
      activations[v] = train::detail::stage_activations_per_microbatch(run, built, alone, k.recompute);
      w.tied_copy_parameters += static_cast<double>(model::layer_params(built.at(run, v), true) -
                                                    model::layer_params(built.at(run, v), false));
      w.working_set =
          std::max(w.working_set, train::detail::recompute_working_set(run, built, alone, k.recompute));
    }
    w.largest_layer_parameters = static_cast<double>(train::detail::largest_layer_parameters(run, built));
    // Node 0's own tied weights are not a copy.
    w.tied_copy_parameters -= static_cast<double>(model::layer_params(built.at(run, 0), true) -
                                                  model::layer_params(built.at(run, 0), false));
    for (std::size_t v = 0; v + 1 < n; ++v) {
      const bytes cut = model::boundary_bytes(built.at(run, v));
      if (v == 0 || cut < w.boundary) w.boundary = cut;
      if (v > 0 && !(cut == model::boundary_bytes(built.at(run, 0)))) w.uniform_cuts = false;
    }
    for (const hw::device& d : types) {
      std::vector<train::detail::timed_layer> timed;
      for (const auto& kind : run.kinds) {
        const bool block = kind.role == model::layer_role::block;
        timed.push_back(train::detail::time_with_shares(built.kinds[timed.size()], d, route, cache,
                                                        block ? k.recompute : model::recompute::none,
                                                        k.tp_comm_overlap, cp_route));
      }
      cost_table t;
      t.tp = tp;
      for (std::size_t v = 0; v < n; ++v) {
        const train::detail::timed_layer& l = timed[run.nodes[v]];
        cost_node node;
        node.name = run.kind_at(v).name.str();
        node.forward = l.t.forward;
        node.backward = l.t.backward;
        node.recompute =
            run.role_at(v) == model::layer_role::block ? l.t.recompute(k.recompute) : seconds{0.0};
        node.parameters = parameters[v];
        node.activations = activations[v];
        t.nodes.push_back(std::move(node));
      }
      for (std::size_t v = 0; v + 1 < n; ++v) t.edges.push_back({v, v + 1, timed[run.nodes[v]].t.boundary});
      double work = 0.0;
      for (const cost_node& node : t.nodes) work += (node.forward + node.backward + node.recompute).value();
      out.policy.model_s.push_back(work);
      out.policy.widths.push_back(w);
      p.tables.push_back(std::move(t));
    }
  }
  return out;
}

/// The layers each stage of a plan on a model's table holds (node 0 is the input layer, the last the output
/// layer, the others the body).
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
  int node = c.devices();
  for (const auto& g : c.groups()) node = std::min(node, g.node.devices);
  std::vector<int> out;
  for (int tp = 1; tp <= c.devices(); tp *= 2) {
    if (model::splits_over(m, tp) && tp <= std::max(1, node)) out.push_back(tp);
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
/// pipeline depths up to the block count and dp = devices / (tp * cp * pp) (every device used), by `placer`
/// under step_policy, with context-parallel size `cp`. `fixed` may fix tp, pp or dp and set a cutoff. The
/// plan's time equals train::estimate_step's for its split. The interleaved schedule is not placed unevenly
/// (its chunks are not contiguous): give 1F1B or GPipe.
inline model_placement place_model(const model::model& m, const cluster::cluster& c,
                                   const train::training_knobs& k, const std::vector<int>& widths,
                                   const sched::schedule_cache& cache, placement_request fixed = {},
                                   const model_placer& placer = chain_placer{}, int cp = 1) {
  if (k.schedule == train::pipeline_schedule::interleaved) {
    throw input_error(
        "uneven stages need the 1F1B or GPipe schedule; the interleaved schedule is placed "
        "uniformly (use the uniform placer)");
  }
  const model_problem mp = model_tables(m, c, k, widths, cache, cp);
  // What the placer must price, by the capabilities it declares (placer_capabilities).
  if (mp.policy.types() > 1 && !placer.capabilities().mixed_devices) {
    throw input_error(
        "on a cluster of several device types a placer must cost each stage on its own devices, and the " +
        std::string{placer.name()} +
        " placer does not declare placer_capabilities::mixed_devices; use the chain placer (`placer` "
        "chain)");
  }
  const bool uniform_cuts = std::all_of(mp.policy.widths.begin(), mp.policy.widths.end(),
                                        [](const width_terms& w) { return w.uniform_cuts; });
  if (!uniform_cuts && !placer.capabilities().cuts_by_size) {
    throw input_error("the cuts of " + m.config.name.str() + " carry different sizes, and the " +
                      std::string{placer.name()} +
                      " placer does not declare placer_capabilities::cuts_by_size (pricing each cut by its "
                      "bytes); use the chain placer or brute force (`placer` chain or brute)");
  }
  // ZeRO-2 runs without a pipeline (train::validate); a deeper limit the caller asked for stays.
  const int deepest = k.shard_gradients ? 1 : static_cast<int>(model::body_nodes(m));
  fixed.max_pp = fixed.max_pp > 0 ? std::min(fixed.max_pp, deepest) : deepest;
  fixed.use_all_devices = true;
  model_placement out;
  out.placed = placer.place(mp.problem, mp.policy, fixed);
  if (!out.placed.feasible) return out;
  out.parallel = {out.placed.tp, out.placed.pp, out.placed.dp, cp};
  out.split = stage_split(out.placed, mp.problem.tables.front().nodes.size());
  out.estimate = train::estimate_step(m, c, out.parallel, k, cache, out.split);
  return out;
}

}  // namespace phaze::place
