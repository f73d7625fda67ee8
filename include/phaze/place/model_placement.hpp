/// @file
/// Placement of a model with uneven stages under the training-step model: the model's layer cost tables (one
/// per tensor-parallel width, built from train::layer_times) for `step_policy` (place/step_policy.hpp: the
/// training-step model of train/step.hpp as a placer policy) and `place_model`, which runs chain_dp on them
/// and re-checks the chosen split with train::estimate_step. One timing and one memory model for `phaze
/// estimate`, `phaze plan`, the placers and the search (docs/step-time.md, "Uneven stages").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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
#include "phaze/place/step_policy.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

namespace phaze::place {

/// A model's placement problem: one table per tensor-parallel width (nodes = the layer graph: embedding,
/// blocks, head; per-rank times from train::layer_times with TP collectives and recomputation, parameter
/// bytes and activation bytes as place/memory.hpp counts them) and the matching step_policy.
struct model_problem {
  placement_problem<cost_table> problem;
  step_policy policy;
  /// The routes the policy's step model has asked for, on a cluster whose routes are followed rank by rank
  /// (train::route_memo::worth_remembering); shared by the problem's copies. Empty otherwise.
  std::shared_ptr<train::route_memo> routes;
};

namespace detail {
/// model_tables; with `borrow` the policy's step model refers to `c` instead of holding a copy (place_model,
/// whose problem does not outlive `c`: a measured matrix of 4096 nodes is 268 MB). `routes`, when given,
/// is the memo of `c`'s routes the step model remembers them in (shared by the problems of one cluster).
inline model_problem model_tables_of(const model::model& m, const cluster::cluster& c,
                                     const train::training_knobs& k, const std::vector<int>& widths,
                                     const sched::schedule_cache& cache, int cp, bool borrow,
                                     std::shared_ptr<train::route_memo> routes = nullptr) {
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
  const model::at_sequence resized{m, k.sequence};
  const model::model& run = *resized;
  const double weight_bytes = static_cast<double>(train::activation_element_bytes(k.precision));
  auto& p = out.problem;
  static_cast<placement_settings&>(p) =
      model_settings(types.front(), c.groups().front().node, c.devices() / cp, k);
  // The bounds of the DPs take the largest memory; each stage is checked against its own (stage_capacity).
  for (const auto& t : types) p.memory_per_device = std::max(p.memory_per_device, train::usable_memory(t, k));
  out.policy.model = borrow ? train::step_model{&c, k} : train::step_model{c, k};
  if (train::route_memo::worth_remembering(c)) {
    out.routes = routes ? std::move(routes) : std::make_shared<train::route_memo>();
    out.policy.model.remember_routes(*out.routes);
  }
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
    // A node alone holds and keeps what every node of its kind does (train::detail::stage_parameters of one
    // node: its parameters with a tied copy, but node 0, whose embedding owns the matrix): once per kind.
    std::vector<std::optional<std::pair<bytes, bytes>>> of_kind(run.kinds.size());
    for (std::size_t v = 0; v < n; ++v) {
      const model::layer& l = built.at(run, v);
      auto& alone = of_kind[static_cast<std::size_t>(run.nodes[v])];
      if (!alone) {
        alone = {bytes{static_cast<double>(model::layer_params(l, true)) * weight_bytes},
                 train::detail::stage_activations_per_microbatch(run, built, {v, v + 1}, k.recompute)};
      }
      parameters[v] =
          v == 0 ? bytes{static_cast<double>(model::layer_params(l, false)) * weight_bytes} : alone->first;
      activations[v] = alone->second;
    }
    const width_terms w = width_terms_of(run, built, k, tp);
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
}  // namespace detail

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
  return detail::model_tables_of(m, c, k, widths, cache, cp, false);
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
/// (its chunks are not contiguous): give 1F1B or GPipe. `routes`, when given, remembers `c`'s routes across
/// the placements of one cluster (place::search_plans shares one over its items); it must be `c`'s alone.
inline model_placement place_model(const model::model& m, const cluster::cluster& c,
                                   const train::training_knobs& k, const std::vector<int>& widths,
                                   const sched::schedule_cache& cache, placement_request fixed = {},
                                   const model_placer& placer = chain_placer{}, int cp = 1,
                                   std::shared_ptr<train::route_memo> routes = nullptr) {
  if (k.schedule == train::pipeline_schedule::interleaved) rules::uneven_stages_need_1f1b_or_gpipe();
  const model_problem mp = detail::model_tables_of(m, c, k, widths, cache, cp, true, std::move(routes));
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
  model_placement out;
  out.placed = placer.place(mp.problem, mp.policy, model_request(m, k, fixed));
  if (!out.placed.feasible) return out;
  out.parallel = {out.placed.tp, out.placed.pp, out.placed.dp, cp};
  out.split = stage_split(out.placed, mp.problem.tables.front().nodes.size());
  out.estimate = train::estimate_step(m, c, out.parallel, k, cache, out.split);
  return out;
}

}  // namespace phaze::place
