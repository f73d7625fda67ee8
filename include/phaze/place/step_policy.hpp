/// @file
/// The training-step model of train/step.hpp as a placer policy: `step_policy`, whose every term forwards to
/// train::step_model, and the per-width terms it needs beside a layer cost table (`width_terms`,
/// `width_terms_of`). Everything here is `constexpr`, so the placers can run under the training-step
/// objective at compile time (place::constant_placement) as at run time (place::place_model).
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/cost_table.hpp"
#include "phaze/place/objective.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

namespace phaze::place {

namespace rules {
[[noreturn]] inline void uneven_stages_need_1f1b_or_gpipe() {
  throw input_error(
      "uneven stages need the 1F1B or GPipe schedule; the interleaved schedule is placed uniformly (use the "
      "uniform placer)");
}
}  // namespace rules

/// What placing model `m` with knobs `k` asks of a placer beside the caller's `fixed` choices: every device
/// used (as Megatron-LM runs a plan) and at most one pipeline stage per body node, or one stage under ZeRO-2,
/// which runs without a pipeline (train::validate); a shallower limit the caller asked for stays.
constexpr placement_request model_request(const model::model& m, const train::training_knobs& k,
                                          placement_request fixed = {}) {
  const int deepest = k.shard_gradients ? 1 : static_cast<int>(model::body_nodes(m));
  fixed.max_pp = fixed.max_pp > 0 ? std::min(fixed.max_pp, deepest) : deepest;
  fixed.use_all_devices = true;
  return fixed;
}

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

/// What step_policy needs for width `tp` of model `run` (its sequence set), whose layers at that width are
/// `built`, with knobs `k`: the least cut, whether all cuts carry it, the head's tied copy, the full
/// recomputation working set and the largest layer's parameters. The run-time tables (model_tables) and
/// the compile-time ones (constant_placement) both take them from here.
constexpr width_terms width_terms_of(const model::model& run, const train::detail::built_layers& built,
                                     const train::training_knobs& k, int tp) {
  width_terms w;
  w.tp = tp;
  const std::size_t n = run.size();
  // What a node alone holds depends on its kind only: each kind's terms once, the nodes in order.
  struct of_kind {
    std::int64_t tied = 0;  ///< its tied copy: its parameters with tied weights counted less without
    bytes working_set{0.0};
    bytes cut{0.0};  ///< the bytes it hands to the next node
  };
  std::vector<std::optional<of_kind>> kinds(built.kinds.size());
  auto kind_of = [&](std::size_t v) -> const of_kind& {
    std::optional<of_kind>& k_v = kinds[run.nodes[v]];
    if (!k_v) {
      const model::layer& l = built.at(run, v);
      k_v = of_kind{model::layer_params(l, true) - model::layer_params(l, false),
                    train::detail::recompute_working_set(run, built, {v, v + 1}, k.recompute),
                    model::boundary_bytes(l)};
    }
    return *k_v;
  };
  for (std::size_t v = 0; v < n; ++v) {
    w.tied_copy_parameters += static_cast<double>(kind_of(v).tied);
    w.working_set = std::max(w.working_set, kind_of(v).working_set);
  }
  w.largest_layer_parameters = static_cast<double>(train::detail::largest_layer_parameters(run, built));
  // Node 0's own tied weights are not a copy.
  w.tied_copy_parameters -= static_cast<double>(kind_of(0).tied);
  for (std::size_t v = 0; v + 1 < n; ++v) {
    const bytes cut = kind_of(v).cut;
    if (v == 0 || cut < w.boundary) w.boundary = cut;
    if (v > 0 && !(cut == kind_of(0).cut)) w.uniform_cuts = false;
  }
  return w;
}

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

  [[nodiscard]] constexpr std::size_t types() const { return std::max<std::size_t>(devices.size(), 1); }
  /// Only the first table of each width starts configurations; the others cost stages on other types.
  [[nodiscard]] constexpr bool configures(std::size_t ti) const { return ti % types() == 0; }
  /// The table of the same width as `ti` timed on the device type that paces stage `stage`: its only type,
  /// or the slowest of its types (train::step_model::pacing_member).
  [[nodiscard]] constexpr std::size_t stage_table(std::size_t ti, int stage, const stage_context& c) const {
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
  [[nodiscard]] constexpr double stage_capacity(const placement_settings& s, int stage,
                                                const stage_context& c) const {
    if (types() == 1) return s.memory_per_device.value();
    return model.stage_capacity(model.stage_members(stage, shape_of(c))).value();
  }

  [[nodiscard]] constexpr const width_terms& terms(int tp) const {
    for (const auto& w : widths)
      if (w.tp == tp) return w;
    throw input_error("step_policy: no terms for tp " + std::to_string(tp));
  }
  [[nodiscard]] constexpr train::plan_shape shape_of(const stage_context& c) const {
    return {c.tp, c.stages, c.dp, c.microbatches, cp};
  }
  [[nodiscard]] constexpr double parameters_of(const placement_settings& s, double parameter_bytes,
                                               const stage_context& c) const {
    // A single stage holds the embedding and the head together: no second copy of a tied matrix.
    const double copy = c.stages == 1 ? terms(c.tp).tied_copy_parameters : 0.0;
    return parameter_bytes / s.weight_bytes_per_parameter - copy;
  }

  [[nodiscard]] constexpr double microbatches_in_flight(const placement_settings&, int stage,
                                                        const stage_context& c) const {
    const auto& k = model.knobs();
    return train::microbatches_in_flight(k.schedule, stage, c.stages, c.microbatches, k.virtual_stages);
  }
  template <class Node>
  static constexpr double work_s(const placement_settings& s, const Node& n) {
    return pipeline_policy::work_s(s, n);
  }
  /// What one cut of `cut_bytes` per rank adds to each stage beside it per microbatch
  /// (step_model::pipeline_cut); a stage's time is its work plus the cut_s of the two cuts it waits for
  /// (stage_time_s), which is what lets chain_dp price cuts once per configuration.
  [[nodiscard]] constexpr double cut_s(const placement_settings&, double cut_bytes,
                                       const stage_context& c) const {
    return model.pipeline_cut(bytes{cut_bytes}, shape_of(c)).value();
  }
  /// A stage's time per microbatch: its work plus the pipeline sends of its cuts (the bytes of the edges
  /// entering and leaving it; step_model::stage_time). A load without boundaries (a bound's) pays the least
  /// cut of the width, width_terms::boundary.
  [[nodiscard]] constexpr double stage_time_s(const placement_settings&, const stage_load& l,
                                              const stage_context& c) const {
    if (c.stages <= 1) return l.work_s;
    const double least = terms(c.tp).boundary.value();
    const bool bare = !(l.boundary_in_bytes > 0.0) && !(l.boundary_bytes > 0.0);
    return model
        .stage_time(seconds{l.work_s}, bytes{bare ? least : l.boundary_in_bytes},
                    bytes{bare ? least : l.boundary_bytes}, shape_of(c))
        .value();
  }
  [[nodiscard]] constexpr double allreduce_s(const placement_settings& s, double parameter_bytes,
                                             const stage_context& c) const {
    return model
        .exposed_data_parallel(parameters_of(s, parameter_bytes, c), shape_of(c), seconds{c.stage_time_sum_s})
        .value();
  }
  /// The pipeline of stages whose slowest takes `slowest_stage_time_s` and which take `stage_time_sum_s`
  /// together per microbatch (step_model::pipeline_time: (m - 1) t_max + sum_i t_i for 1F1B and GPipe):
  /// what makes this an UnevenPipelinePolicy.
  [[nodiscard]] constexpr double pipeline_s(const placement_settings&, double slowest_stage_time_s,
                                            double stage_time_sum_s, const stage_context& c) const {
    return model.pipeline_time(seconds{slowest_stage_time_s}, seconds{stage_time_sum_s}, shape_of(c)).value();
  }
  /// The pipeline if this stage were the slowest, the stages' times adding up to c.stage_time_sum_s: the
  /// largest stage cost is the pipeline. On one device type that sum is the same for every split (every
  /// stage's time is its work plus the same sends), so the placers minimize the slowest stage.
  [[nodiscard]] constexpr double stage_cost_s(const placement_settings& s, const stage_load& l,
                                              const stage_context& c) const {
    return pipeline_s(s, stage_time_s(s, l, c), c.stage_time_sum_s, c);
  }
  /// The pipeline (`pipeline`: the largest stage cost), then the gradient synchronization and optimizer step
  /// of the stage holding the most parameters and the tied embedding's all-reduce (step_model::iteration).
  [[nodiscard]] constexpr double batch_time_s(const placement_settings& s, double pipeline,
                                              double largest_stage_parameters, const stage_context& c) const {
    return model
        .iteration(seconds{pipeline}, seconds{c.stage_time_sum_s},
                   parameters_of(s, largest_stage_parameters, c), terms(c.tp).tied_copy_parameters,
                   shape_of(c), model.optimizer_device(shape_of(c)))
        .value();
  }
  [[nodiscard]] constexpr double stage_memory(const placement_settings& s, const stage_load& l, int stage,
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

}  // namespace phaze::place
