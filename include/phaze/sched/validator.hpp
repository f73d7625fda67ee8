/// @file
/// An independent check of any schedule against its problem: precedence, core capacity, exclusivity of
/// all-cores tasks, core indices and timing. Every schedule phaze produces is checked by it in the tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "phaze/sched/problem.hpp"

namespace phaze::sched {

/// The outcome of a check: empty `violation` means the schedule is valid.
struct verdict {
  std::string violation;
  [[nodiscard]] bool ok() const { return violation.empty(); }
  explicit operator bool() const { return ok(); }
};

/// Checks `s` against `p`. Times are compared with a tolerance of 1e-9 of the makespan (solver round-off).
inline constexpr auto check_schedule = [](const problem& p, const schedule& s) -> verdict {
  const std::size_t n = p.size();
  if (s.tasks.size() != n) {
    return {"the schedule places " + std::to_string(s.tasks.size()) + " tasks, the problem has " +
            std::to_string(n)};
  }
  const double eps = 1e-9 * std::max(1e-12, std::abs(s.makespan.value()));
  auto name = [&](std::size_t i) { return "task " + std::to_string(i) + " '" + p.tasks[i].name + "'"; };
  auto start = [&](std::size_t i) { return s.tasks[i].start.value(); };
  auto end = [&](std::size_t i) { return start(i) + duration(p, i, s.tasks[i].all_cores).value(); };

  double last = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const placement& pl = s.tasks[i];
    const task& t = p.tasks[i];
    if (!std::isfinite(start(i)) || start(i) < -eps)
      return {name(i) + " starts at a negative or non-finite time"};
    last = std::max(last, end(i));
    for (int q : t.preds) {
      const auto pred = static_cast<std::size_t>(q);
      if (start(i) < end(pred) - eps) {
        return {name(i) + " starts at " + std::to_string(start(i)) + " before its predecessor " + name(pred) +
                " ends at " + std::to_string(end(pred))};
      }
    }
    for (int pool = 0; pool < pool_count; ++pool) {
      const bool holds = uses_pool(t.kind, pool);
      const int core = pl.core[pool];
      if (!holds || pl.all_cores) {
        if (core != -1) return {name(i) + " names a core of a pool it does not hold one core of"};
      } else if (core < 0 || core >= p.pool_size(pool)) {
        return {name(i) + " runs on core " + std::to_string(core) + ", outside its pool of " +
                std::to_string(p.pool_size(pool))};
      }
    }
    if (t.kind == resource::none && pl.all_cores)
      return {name(i) + " holds no cores but is marked all-cores"};
  }
  // Exclusivity: two tasks sharing a pool may overlap in time only on different cores, never when either
  // holds the whole pool.
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      if (!(start(i) < end(j) - eps && start(j) < end(i) - eps)) continue;
      for (int pool = 0; pool < pool_count; ++pool) {
        if (!uses_pool(p.tasks[i].kind, pool) || !uses_pool(p.tasks[j].kind, pool)) continue;
        const bool clash =
            s.tasks[i].all_cores || s.tasks[j].all_cores || s.tasks[i].core[pool] == s.tasks[j].core[pool];
        if (clash) {
          return {name(i) + " and " + name(j) + " overlap in time on the same " +
                  (pool == 0 ? std::string{"tensor"} : std::string{"vector"}) + " core(s)"};
        }
      }
    }
  }
  if (std::abs(s.makespan.value() - last) > eps) {
    return {"the makespan " + std::to_string(s.makespan.value()) + " is not the last finish time " +
            std::to_string(last)};
  }
  if (s.lower_bound.value() > s.makespan.value() + eps) return {"the lower bound exceeds the makespan"};
  return {};
};

}  // namespace phaze::sched
