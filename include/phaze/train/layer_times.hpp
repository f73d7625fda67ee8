/// @file
/// What one layer costs on one device for one microbatch: forward and backward time from its operator
/// schedule (the ILP or list scheduler on PHAZE-template accelerators; one kernel after another on GPUs),
/// the time its recomputation adds under each recomputation mode, its parameters, the activations it keeps
/// and the bytes it hands to the next pipeline stage. The rows of a placement's layer cost table.
#pragma once

#include <vector>

#include "phaze/cluster/links.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/cost/op_cost.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/sched/layer_problem.hpp"

namespace phaze::train {

/// One layer's costs for one microbatch on one tensor-parallel rank.
struct layer_times {
  seconds forward{0.0};
  seconds backward{0.0};
  /// The passes' GPU time before the host bound (cost::host_bound; layer_shape::host_per_op): what GPU-side
  /// adjustments (tensor-parallel overlap) start from before the bound is applied again.
  seconds gpu_forward{0.0};
  seconds gpu_backward{0.0};
  /// forward of the selected submodules again: the attention core by default (Korthikanti et al. 2022)
  seconds recompute_selective{0.0};
  seconds recompute_full{0.0};  ///< the whole forward again
  std::int64_t params = 0;      ///< per rank, tied weights counted (a stage holding the head keeps a copy)
  bytes activations_none{0.0};
  bytes activations_selective{0.0};
  bytes activations_full{0.0};
  bytes boundary{0.0};  ///< output activation sent to the next stage

  [[nodiscard]] seconds recompute(model::recompute mode) const {
    return mode == model::recompute::full        ? recompute_full
           : mode == model::recompute::selective ? recompute_selective
                                                 : seconds{0.0};
  }
  [[nodiscard]] bytes activations(model::recompute mode) const {
    return mode == model::recompute::full        ? activations_full
           : mode == model::recompute::selective ? activations_selective
                                                 : activations_none;
  }
};

/// The costs of one layer on a device whose tensor-parallel group takes route `tp`. Schedules are solved
/// through `cache` (identical layers once) by the cache's scheduler (the ILP for reported numbers; the list
/// scheduler for fast sweeps and bounds).
inline layer_times time_layer(const model::layer& l, const hw::device& d, const cluster::route& tp,
                              const sched::schedule_cache& cache) {
  layer_times t;
  const sched::pass_problem& forward = sched::layer_problem(l, d, tp, sched::pass::forward, cache);
  const sched::pass_problem& backward = sched::layer_problem(l, d, tp, sched::pass::backward, cache);
  const double host = l.shape.host_per_op;
  t.gpu_forward = cache.solve(forward).makespan;
  t.gpu_backward = cache.solve(backward).makespan;
  t.forward = cost::host_bound(t.gpu_forward, forward.tasks.size(), host);
  t.backward = cost::host_bound(t.gpu_backward, backward.tasks.size(), host);
  t.recompute_full = t.forward;
  const sched::pass_problem& core = sched::recomputed_problem(l, d, tp, cache);
  if (core.tasks.size() > 0)
    t.recompute_selective = cost::host_bound(cache.solve(core).makespan, core.tasks.size(), host);
  t.params = model::layer_params(l, true);
  t.activations_none = model::activation_bytes(l, model::recompute::none);
  t.activations_selective = model::activation_bytes(l, model::recompute::selective);
  t.activations_full = model::activation_bytes(l, model::recompute::full);
  t.boundary = model::boundary_bytes(l);
  return t;
}

/// The costs of every node of a model's layer graph for a shape (distinct layers computed once).
inline std::vector<layer_times> time_model(const model::model& m, const model::layer_shape& shape,
                                           const hw::device& d, const cluster::route& tp,
                                           const sched::schedule_cache& cache) {
  std::vector<layer_times> out(m.size());
  for (const auto& kind : model::distinct_layers(m)) {
    const auto times =
        time_layer(model::layer_at(m, static_cast<std::size_t>(kind.first_node), shape), d, tp, cache);
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m.nodes[i] == kind.kind) out[i] = times;
  }
  return out;
}

}  // namespace phaze::train
