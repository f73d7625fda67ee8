/// @file
/// From a layer and a device to a scheduling problem (tasks, durations, dependencies, core pools), and the
/// schedule of one pass of a layer by any Scheduler (sched/scheduler.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

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

/// layer_problem kept in `cache` (schedule_cache::problem_of): each distinct pass of a layer on a device and
/// route is costed once for as long as the cache lives.
inline const problem& layer_problem(const model::layer& l, const hw::device& d, const cluster::route& tp,
                                    pass which, const schedule_cache& cache) {
  layer_pass key{l, d, tp, which == pass::backward};
  key.device.hbm = bytes{0.0};
  key.device.name = {};
  return cache.problem_of(key, [&] { return layer_problem(l, d, tp, which); });
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

}  // namespace phaze::sched
