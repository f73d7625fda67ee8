/// @file
/// From a layer and a device to a scheduling problem (tasks, durations, dependencies, core pools), and the
/// layer schedule itself, memoized so identical problems are solved once.
#pragma once

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "phaze/cost/op_cost.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/sched/ilp.hpp"
#include "phaze/sched/list_scheduler.hpp"
#include "phaze/sched/problem.hpp"

namespace phaze::sched {

/// Which pass of a layer to schedule.
enum class pass : std::uint8_t { forward, backward };

constexpr std::string_view to_string(pass p) {
  return p == pass::forward ? "forward" : "backward";
}

namespace detail {
template <class Ops>
problem problem_of_ops(const Ops& ops, const hw::device& d) {
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
    const auto c = cost::cost_of(o, d);
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

/// The scheduling problem of one pass of a layer on a device.
inline problem layer_problem(const model::layer& l, const hw::device& d, pass which) {
  if (which == pass::forward) return detail::problem_of_ops(l.ops, d);
  return detail::problem_of_ops(model::backward(l), d);
}

/// Which solver a schedule comes from.
enum class solver : std::uint8_t { ilp, list };

/// Solved schedules by problem, so identical layers (and identical layer x core-configuration problems, from
/// any device with the same per-op costs) are solved once. Safe to share between threads.
class schedule_cache {
 public:
  explicit schedule_cache(ilp_options options = {}) : options_(options) {}

  /// The schedule of `p` by `how`, solved on first request.
  schedule solve(const problem& p, solver how) {
    const std::string key = key_of(p, how);
    {
      const std::lock_guard lock(mutex_);
      if (const auto it = cache_.find(key); it != cache_.end()) {
        ++hits_;
        return it->second;
      }
    }
    schedule s = how == solver::ilp ? ilp_schedule(p, options_) : list_schedule(p);
    const std::lock_guard lock(mutex_);
    ++misses_;
    cache_.emplace(key, s);
    return s;
  }

  [[nodiscard]] std::size_t hits() const {
    const std::lock_guard lock(mutex_);
    return hits_;
  }
  [[nodiscard]] std::size_t misses() const {
    const std::lock_guard lock(mutex_);
    return misses_;
  }

  /// The structural key of a problem: core counts, and per task its kind, both durations (bit-exact) and
  /// predecessors. Names do not matter.
  static std::string key_of(const problem& p, solver how) {
    std::string key;
    auto put = [&key](const void* data, std::size_t size) {
      key.append(static_cast<const char*>(data), size);
    };
    const auto h = static_cast<std::uint8_t>(how);
    put(&h, 1);
    put(&p.tensor_cores, sizeof p.tensor_cores);
    put(&p.vector_cores, sizeof p.vector_cores);
    for (const task& t : p.tasks) {
      const double one = t.one_core.value();
      const double all = t.all_cores.value();
      put(&t.kind, sizeof t.kind);
      put(&one, sizeof one);
      put(&all, sizeof all);
      const auto preds = static_cast<std::uint32_t>(t.preds.size());
      put(&preds, sizeof preds);
      for (int q : t.preds) put(&q, sizeof q);
    }
    return key;
  }

 private:
  ilp_options options_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, schedule> cache_;
  std::size_t hits_ = 0;
  std::size_t misses_ = 0;
};

/// The schedule of one pass of a layer on a device (no cache).
inline schedule schedule_layer(const model::layer& l, const hw::device& d, pass which,
                               solver how = solver::ilp, const ilp_options& options = {}) {
  const problem p = layer_problem(l, d, which);
  return how == solver::ilp ? ilp_schedule(p, options) : list_schedule(p);
}

}  // namespace phaze::sched
