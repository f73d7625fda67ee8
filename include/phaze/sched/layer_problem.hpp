/// @file
/// From a layer and a device to a scheduling problem (tasks, durations, dependencies, core pools), and the
/// schedule of one pass of a layer by any Scheduler (sched/scheduler.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/cluster/links.hpp"
#include "phaze/cost/op_cost.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/sched/problem.hpp"
#include "phaze/sched/scheduler.hpp"

namespace phaze::sched {

/// Which pass of a layer to schedule.
enum class pass : std::uint8_t { forward, backward };

constexpr std::string_view to_string(pass p) {
  return p == pass::forward ? "forward" : "backward";
}

namespace detail {
template <class Ops>
problem problem_of_ops(const Ops& ops, const hw::device& d, const cluster::route& tp) {
  problem p;
  const bool systolic = d.kind == hw::device_kind::systolic;
  // A datasheet device (a GPU) runs one kernel at a time over all its units: one pool of each kind, every
  // task holding both, so tasks run one after another. The systolic template has num_tc tensor cores and
  // num_vc vector cores; collectives occupy the vector cores (PHAZE, section 4.2).
  p.tensor_cores = systolic ? d.systolic.num_tc : 1;
  p.vector_cores = systolic ? d.systolic.num_vc : 1;
  for (const model::op& o : ops) {
    task t;
    t.name = std::string{o.name.view()};
    const auto c = cost::cost_of(o, d, tp);
    t.one_core = c.one_core;
    t.all_cores = c.all_cores;
    switch (model::unit_of(o)) {
      case model::unit::tensor:
        t.kind = systolic ? resource::tensor : resource::paired;
        break;
      case model::unit::vector:
      case model::unit::network:
        t.kind = systolic ? resource::vector : resource::paired;
        break;
      case model::unit::none:
        t.kind = resource::none;
        break;
    }
    for (auto in : o.inputs)
      if (in != model::layer_input) t.preds.push_back(in);
    p.tasks.push_back(std::move(t));
  }
  return p;
}
}  // namespace detail

/// The scheduling problem of one pass of a layer on a device whose tensor-parallel group takes route `tp`.
inline problem layer_problem(const model::layer& l, const hw::device& d, const cluster::route& tp,
                             pass which) {
  if (which == pass::forward) return detail::problem_of_ops(l.ops, d, tp);
  return detail::problem_of_ops(model::backward(l), d, tp);
}

namespace detail {
/// The all-cores times of the network ops of `ops` (a pass's tensor-parallel collectives), added in op order.
template <class Ops>
seconds collectives_of(const Ops& ops, const hw::device& d, const cluster::route& tp) {
  seconds s{0.0};
  for (const model::op& o : ops)
    if (model::unit_of(o) == model::unit::network) s += cost::cost_of(o, d, tp).all_cores;
  return s;
}
}  // namespace detail

/// layer_problem kept in `cache` (schedule_cache::problem_of) with its pass's collectives: each distinct
/// pass of a layer on a device and route is costed once for as long as the cache lives.
inline const pass_problem& layer_problem(const model::layer& l, const hw::device& d, const cluster::route& tp,
                                         pass which, const schedule_cache& cache) {
  const std::uint8_t part = which == pass::forward ? 0 : 1;
  return cache.problem_of(l, d, tp, part, [&] {
    if (which == pass::forward)
      return pass_problem{detail::problem_of_ops(l.ops, d, tp), detail::collectives_of(l.ops, d, tp), {}};
    const auto ops = model::backward(l);
    return pass_problem{detail::problem_of_ops(ops, d, tp), detail::collectives_of(ops, d, tp), {}};
  });
}

/// A pass kept by a cache that is about to go: refused (the reference would dangle).
const pass_problem& layer_problem(const model::layer&, const hw::device&, const cluster::route&, pass,
                                  const schedule_cache&&) = delete;

/// The forward ops of the submodules selective recomputation runs again (the attention core by default;
/// layer_shape::recompute_modules) as their own problem, each for the share of it that runs again
/// (model::recomputed_share: a matmul part-kept under torchtitan's per-op policy runs for the rest), cut
/// from the layer's forward problem `full` (layer_problem of the forward pass).
inline problem recomputed_problem(const model::layer& l, const problem& full) {
  problem core;
  core.tensor_cores = full.tensor_cores;
  core.vector_cores = full.vector_cores;
  std::vector<int> index_in_core(l.ops.size(), -1);
  for (std::size_t i = 0; i < l.ops.size(); ++i) {
    const double share = model::recomputed_share(l, l.ops[i]);
    if (share <= 0.0) continue;
    task t = full.tasks[i];
    t.one_core *= share;
    t.all_cores *= share;
    std::vector<int> preds;
    for (int q : t.preds)
      if (index_in_core[static_cast<std::size_t>(q)] >= 0)
        preds.push_back(index_in_core[static_cast<std::size_t>(q)]);
    t.preds = preds;
    index_in_core[i] = static_cast<int>(core.tasks.size());
    core.tasks.push_back(std::move(t));
  }
  return core;
}

/// recomputed_problem kept in `cache` beside the layer's passes (its collectives are not counted: the
/// recomputed share holds none of them, or the whole forward runs again).
inline const pass_problem& recomputed_problem(const model::layer& l, const hw::device& d,
                                              const cluster::route& tp, const schedule_cache& cache) {
  return cache.problem_of(l, d, tp, 2, [&] {
    return pass_problem{recomputed_problem(l, layer_problem(l, d, tp, pass::forward, cache).tasks), {}, {}};
  });
}

/// The schedule of one pass of a layer by scheduler `s` (no cache).
template <class S>
schedule schedule_layer(const model::layer& l, const hw::device& d, const cluster::route& tp, pass which,
                        const S& s) {
  static_cast<void>(explain_scheduler<S>());  // reports what is missing, once
  if constexpr (Scheduler<S>) {
    return s.solve(layer_problem(l, d, tp, which));
  } else {
    return {};
  }
}

/// A recomputed share kept by a cache that is about to go: refused (the reference would dangle).
const pass_problem& recomputed_problem(const model::layer&, const hw::device&, const cluster::route&,
                                       const schedule_cache&&) = delete;

}  // namespace phaze::sched
