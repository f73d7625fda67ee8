/// @file
/// The intra-layer scheduling problem: a DAG of tasks, each running on one core of its kind or across all
/// cores of its kind, and the schedule that answers it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"

namespace phaze::sched {

/// The kind of core a task occupies. Collectives occupy the vector cores, as in PHAZE (Wang et al., ICML
/// 2024, section 4.2); `paired` tasks (fused matrix + vector work) hold one tensor core and one vector core
/// together; `none` tasks (identity markers) hold nothing.
enum class resource : std::uint8_t { tensor, vector, paired, none };

constexpr std::string_view to_string(resource r) {
  switch (r) {
    case resource::tensor:
      return "tensor";
    case resource::vector:
      return "vector";
    case resource::paired:
      return "paired";
    case resource::none:
      return "none";
  }
  return "?";
}

/// One task: its resource, its duration on one core and spread over all cores of its kind (exclusive while
/// it runs), and the tasks that must finish before it starts (indices of earlier tasks).
struct task {
  std::string name;
  resource kind = resource::tensor;
  seconds one_core{0.0};
  seconds all_cores{0.0};
  std::vector<int> preds;
};

/// A scheduling problem: tasks in topological order (every predecessor index is smaller) and the core
/// counts of the accelerator.
struct problem {
  std::vector<task> tasks;
  int tensor_cores = 1;
  int vector_cores = 1;

  [[nodiscard]] std::size_t size() const { return tasks.size(); }
  /// Cores in a pool (0: tensor, 1: vector).
  [[nodiscard]] int pool_size(int pool) const { return pool == 0 ? tensor_cores : vector_cores; }
};

/// The pools of cores (0: tensor, 1: vector) a task of this kind holds while it runs.
constexpr bool uses_pool(resource r, int pool) {
  switch (r) {
    case resource::tensor:
      return pool == 0;
    case resource::vector:
      return pool == 1;
    case resource::paired:
      return true;
    case resource::none:
      return false;
  }
  return false;
}
inline constexpr int pool_count = 2;

namespace rules {
[[noreturn]] inline void task_predecessor_must_be_an_earlier_task() {
  throw input_error("a task's predecessor must be an earlier task (tasks are given in topological order)");
}
[[noreturn]] inline void task_durations_must_be_non_negative() {
  throw input_error("task durations must be non-negative and finite");
}
[[noreturn]] inline void core_counts_must_be_positive() {
  throw input_error("a scheduling problem needs at least one tensor core and one vector core");
}
}  // namespace rules

/// Checks a problem's shape; throws input_error naming the broken rule.
inline void validate(const problem& p) {
  if (p.tensor_cores < 1 || p.vector_cores < 1) rules::core_counts_must_be_positive();
  for (std::size_t i = 0; i < p.tasks.size(); ++i) {
    const task& t = p.tasks[i];
    if (!(t.one_core.value() >= 0.0) || !(t.all_cores.value() >= 0.0) || t.one_core.value() > 1e30 ||
        t.all_cores.value() > 1e30) {
      rules::task_durations_must_be_non_negative();
    }
    for (int q : t.preds)
      if (q < 0 || static_cast<std::size_t>(q) >= i) rules::task_predecessor_must_be_an_earlier_task();
  }
}

/// Where and when one task runs.
struct placement {
  seconds start{0.0};
  bool all_cores = false;  ///< spread over every core of its kind (intra-op parallel)
  /// For a one-core task, which core of each pool it holds (0-based; -1 where it holds none of that pool or
  /// holds the whole pool). A paired task holds one tensor core and one vector core.
  int core[pool_count] = {-1, -1};
};

/// How a schedule was found and how good it is known to be.
enum class solve_status : std::uint8_t {
  optimal,     ///< proven optimal (the ILP, or a heuristic schedule that meets a lower bound)
  time_limit,  ///< the ILP stopped at its time or node limit: `gap` says how far from optimal it may be
  heuristic,   ///< the list scheduler alone, optimality not proven
};

constexpr std::string_view to_string(solve_status s) {
  switch (s) {
    case solve_status::optimal:
      return "optimal";
    case solve_status::time_limit:
      return "time_limit";
    case solve_status::heuristic:
      return "heuristic";
  }
  return "?";
}

/// A schedule: one placement per task, the makespan, the best lower bound known and how it was found.
struct schedule {
  std::vector<placement> tasks;
  seconds makespan{0.0};
  seconds lower_bound{0.0};
  solve_status status = solve_status::heuristic;
  /// Relative gap (makespan - lower_bound) / makespan; 0 when optimal.
  [[nodiscard]] double gap() const {
    return makespan.value() > 0 ? (makespan.value() - lower_bound.value()) / makespan.value() : 0.0;
  }
};

/// Duration of task `i` in the chosen mode.
inline seconds duration(const problem& p, std::size_t i, bool all_cores) {
  const task& t = p.tasks[i];
  if (t.kind == resource::none) return seconds{0.0};
  return all_cores ? t.all_cores : t.one_core;
}

/// The shorter of a task's two durations.
inline seconds fastest(const task& t) {
  if (t.kind == resource::none) return seconds{0.0};
  return t.one_core < t.all_cores ? t.one_core : t.all_cores;
}

}  // namespace phaze::sched
