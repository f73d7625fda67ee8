/// @file
/// Lower bounds on the makespan of a scheduling problem: the critical path and the work per pool of cores.
/// When a heuristic schedule meets them it is optimal and the ILP is skipped.
#pragma once

#include <algorithm>

#include "phaze/sched/list_scheduler.hpp"
#include "phaze/sched/problem.hpp"

namespace phaze::sched {

/// The bounds of a problem.
struct bounds {
  seconds critical_path{0.0};  ///< longest dependency chain, every task at its fastest duration
  seconds work{0.0};           ///< the largest pool's total core-time divided by its cores
  [[nodiscard]] seconds best() const { return critical_path > work ? critical_path : work; }
};

/// Critical path: no schedule ends before its longest chain of dependent tasks does. Work: a task holds
/// `one_core` core-seconds on one core or `all_cores * cores` spread over a pool, so a pool of C cores is
/// busy at least sum(min(one_core, C * all_cores)) / C.
inline constexpr auto lower_bounds = [](const problem& p) -> bounds {
  bounds b;
  for (double level : bottom_levels(p)) b.critical_path = std::max(b.critical_path, seconds{level});
  for (int pool = 0; pool < pool_count; ++pool) {
    const double cores = static_cast<double>(p.pool_size(pool));
    double core_seconds = 0.0;
    for (const task& t : p.tasks) {
      if (!uses_pool(t.kind, pool)) continue;
      core_seconds += std::min(t.one_core.value(), cores * t.all_cores.value());
    }
    b.work = std::max(b.work, seconds{core_seconds / cores});
  }
  return b;
};

}  // namespace phaze::sched
