/// @file
/// Placement of a model with uneven stages under the training-step model: the model's layer cost tables (one
/// per tensor-parallel width, built from train::layer_times), `step_policy` (the objective of
/// place/step_time.hpp and the memory of place/memory.hpp as a placer policy) and `place_model`, which runs
/// chain_dp on them and re-checks the chosen split with train::estimate_step. One timing and one memory model
/// for `phaze estimate`, `phaze plan` and the placers (docs/step-time.md, "Uneven stages").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/chain_dp.hpp"
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

/// The training-step model as a placer policy: a stage's time per microbatch is its layers' work plus
/// 2 v pipeline sends (train::detail::pipeline_send), the iteration (m + (p - 1) / v) t_max plus the largest
/// stage's gradient synchronization and optimizer step, and a stage's memory the model states and in-flight
/// activations of place/memory.hpp. For a split of a model's tables, plan::time_per_batch equals
/// train::estimate_step's time for that split (tests/place/model_placement_test.cpp holds them together).
/// Every cut of a transformer chain carries the same hidden state, so all stages pay the same sends.
struct step_policy {
  static constexpr bool allreduce_of_largest_stage = true;

  hw::device device{};
  train::training_knobs knobs{};
  std::vector<width_terms> widths;  ///< one per table

  [[nodiscard]] const width_terms& terms(int tp) const {
    for (const auto& w : widths)
      if (w.tp == tp) return w;
    throw input_error("step_policy: no terms for tp " + std::to_string(tp));
  }
  [[nodiscard]] double chunks() const { return static_cast<double>(train::detail::chunks_per_device(knobs)); }
  [[nodiscard]] double parameters_of(const placement_settings& s, double parameter_bytes,
                                     const stage_context& c) const {
    // A single stage holds the embedding and the head together: no second copy of a tied matrix.
    const double copy = c.stages == 1 ? terms(c.tp).tied_copy_parameters : 0.0;
    return parameter_bytes / s.weight_bytes_per_parameter - copy;
  }

  [[nodiscard]] double microbatches_in_flight(const placement_settings&, int stage,
                                              const stage_context& c) const {
    return train::microbatches_in_flight(knobs.schedule, stage, c.stages, c.microbatches,
                                         knobs.virtual_stages);
  }
  template <class Node>
  static double work_s(const placement_settings& s, const Node& n) {
    return pipeline_policy::work_s(s, n);
  }
  [[nodiscard]] double stage_time_s(const placement_settings&, const stage_load& l,
                                    const stage_context& c) const {
    if (c.stages <= 1) return l.work_s;
    const seconds send =
        train::detail::pipeline_send(terms(c.tp).boundary, c.tp, c.dp, knobs.sequence_parallel, device.link);
    return l.work_s + 2.0 * chunks() * send.value();
  }
  [[nodiscard]] double allreduce_s(const placement_settings& s, double parameter_bytes,
                                   const stage_context& c) const {
    return train::detail::gradient_sync(parameters_of(s, parameter_bytes, c), c.tp, c.dp, knobs, device.link)
        .value();
  }
  [[nodiscard]] double stage_cost_s(const placement_settings& s, const stage_load& l,
                                    const stage_context& c) const {
    const double fill = static_cast<double>(c.stages - 1) / chunks();
    return (static_cast<double>(c.microbatches) + fill) * stage_time_s(s, l, c);
  }
  [[nodiscard]] double batch_time_s(const placement_settings& s, double largest_stage_cost,
                                    double largest_stage_parameters, const stage_context& c) const {
    const double params = parameters_of(s, largest_stage_parameters, c);
    return largest_stage_cost + train::detail::gradient_sync(params, c.tp, c.dp, knobs, device.link).value() +
           train::detail::optimizer_step(params, c.dp, knobs, device).value();
  }
  [[nodiscard]] double stage_memory(const placement_settings& s, const stage_load& l, int stage,
                                    const stage_context& c) const {
    const train::bytes_per_parameter per = train::state_bytes_per_parameter(knobs.precision, knobs.opt);
    const double shard = knobs.distributed_optimizer ? static_cast<double>(c.dp) : 1.0;
    const double states =
        parameters_of(s, l.parameter_bytes, c) * (per.weights + per.gradients + per.optimizer / shard);
    // Assumption of memory.hpp: under full recomputation one block's full activations live on top of the
    // stored inputs. Charged to every stage (a stage without a block is over-estimated by it).
    return states + l.activation_bytes * microbatches_in_flight(s, stage, c) +
           terms(c.tp).recompute_working_set.value();
  }
};

/// A model's placement problem: one table per tensor-parallel width (nodes = the layer graph: embedding,
/// blocks, head; per-rank times from train::layer_times with TP collectives and recomputation, parameter
/// bytes and activation bytes as place/memory.hpp counts them) and the matching step_policy.
struct model_problem {
  placement_problem<cost_table> problem;
  step_policy policy;
};

/// Builds the tables for `widths` (each must divide the model's heads and MLP) on `devices` copies of `d`
/// with the knobs `k` (microbatch, sequence, precision, recomputation, sequence parallelism, schedule).
inline model_problem model_tables(const model::model& m, const hw::device& d, int devices,
                                  const train::training_knobs& k, const std::vector<int>& widths,
                                  sched::schedule_cache& cache) {
  model_problem out;
  const model::model run = k.sequence > 0 ? model::with_sequence(m, k.sequence) : m;
  const double weight_bytes = static_cast<double>(hw::element_bytes(k.precision));
  const train::bytes_per_parameter per = train::state_bytes_per_parameter(k.precision, k.opt);
  auto& p = out.problem;
  p.devices = devices;
  p.memory_per_device = d.hbm;
  p.microbatches = k.global_batch / std::max<std::int64_t>(k.microbatch, 1);
  p.weight_bytes_per_parameter = weight_bytes;
  p.state_bytes_per_parameter = per.total();
  p.p2p_bandwidth = d.link.inter_node;
  p.dp_bandwidth = d.link.inter_node;
  p.schedule = k.schedule;
  p.recompute = k.recompute != model::recompute::none;
  out.policy.device = d;
  out.policy.knobs = k;
  const bool tied = run.config.tied_embeddings;
  for (const int tp : widths) {
    const auto built =
        train::detail::build_layers(run, train::layer_shape_of(run, train::parallelism{tp, 1, 1}, k));
    const auto emb = train::detail::time_with_shares(built.embedding, d, cache, model::recompute::none);
    const auto block = train::detail::time_with_shares(built.block, d, cache, k.recompute);
    const auto head = train::detail::time_with_shares(built.head, d, cache, model::recompute::none);
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

/// The tensor-parallel widths a model admits on `d`: powers of two dividing the heads, key/value heads and
/// MLP width, inside one node (Megatron-LM keeps TP's all-reduces on the fast links), at most `devices`.
inline std::vector<int> admissible_widths(const model::model& m, const hw::device& d, int devices) {
  const auto& c = m.config;
  std::vector<int> out;
  for (int tp = 1; tp <= devices; tp *= 2) {
    const bool divides = c.heads % tp == 0 && c.kv_heads_or_default() % tp == 0 && c.ffn % tp == 0;
    if (divides && tp <= std::max(1, d.link.devices_per_node)) out.push_back(tp);
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

/// The best placement with uneven stages of `m` for the knobs `k` over tensor-parallel widths `widths`,
/// pipeline depths up to the block count and dp = devices / (tp * pp) (every device used), by chain_dp under
/// step_policy. `fixed` may fix tp, pp or dp. The plan's time equals train::estimate_step's for its split.
/// The interleaved schedule is not placed unevenly (its chunks are not contiguous): give 1F1B or GPipe.
inline model_placement place_model(const model::model& m, const hw::device& d, int devices,
                                   const train::training_knobs& k, const std::vector<int>& widths,
                                   sched::schedule_cache& cache, fixed_choices fixed = {}) {
  if (k.schedule == train::pipeline_schedule::interleaved) {
    throw input_error(
        "uneven stages need the 1F1B or GPipe schedule; the interleaved schedule is placed "
        "uniformly (use the uniform placer)");
  }
  const model_problem mp = model_tables(m, d, devices, k, widths, cache);
  auto placer = chain_dp(mp.problem, mp.policy);
  if (fixed.tp != 0) placer.tp(fixed.tp);
  if (fixed.pp != 0) placer.pp(fixed.pp);
  if (fixed.dp != 0) placer.dp(fixed.dp);
  placer.max_pp(static_cast<int>(m.config.layers)).use_all_devices(true);
  model_placement out;
  out.placed = placer.run();
  if (!out.placed.feasible) return out;
  out.parallel = {out.placed.tp, out.placed.pp, out.placed.dp};
  out.split = stage_split(out.placed, mp.problem.tables.front().nodes.size());
  out.estimate = train::estimate_step(m, d, out.parallel, k, cache, out.split);
  return out;
}

}  // namespace phaze::place
