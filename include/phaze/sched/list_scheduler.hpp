/// @file
/// The serial schedule-generation scheme and the critical-path list scheduler built on it: a fast feasible
/// schedule, the ILP's starting incumbent and a mode of its own (`--solver list`).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "phaze/sched/problem.hpp"

namespace phaze::sched {

namespace detail {

/// How many cores of one pool are busy over time: intervals with a weight of 1 (a one-core task) or the
/// pool size (an all-cores task). Feasibility is decided on these counts; which core runs what is decided at
/// the end (assign_cores), which is always possible because intervals that never exceed C at any instant can
/// be coloured with C colours (interval graphs are perfect).
class pool_timeline {
 public:
  explicit pool_timeline(int cores) : cores_(cores) {}

  /// Whether `weight` more cores are free over all of [start, end).
  [[nodiscard]] bool fits(double start, double end, int weight) const {
    if (weight > cores_) return false;
    // The usage over [start, end) peaks at start or at some interval's start inside it.
    auto usage_at = [&](double t) {
      int used = 0;
      for (const auto& iv : busy_)
        if (iv.start <= t && t < iv.end) used += iv.weight;
      return used;
    };
    if (usage_at(start) + weight > cores_) return false;
    for (const auto& iv : busy_)
      if (iv.start > start && iv.start < end && usage_at(iv.start) + weight > cores_) return false;
    return true;
  }
  void occupy(double start, double end, int weight) {
    if (end > start) busy_.push_back({start, end, weight});
  }
  /// Every time at which some interval of this pool ends: the only places a delayed start can move to.
  void add_release_times(std::vector<double>& out) const {
    for (const auto& iv : busy_) out.push_back(iv.end);
  }
  [[nodiscard]] int cores() const { return cores_; }

 private:
  struct interval {
    double start, end;
    int weight;
  };
  int cores_;
  std::vector<interval> busy_;
};

}  // namespace detail

/// Gives every one-core task a core, lowest free first in start order (interval-graph colouring). Returns
/// false when some instant needs more cores than a pool has.
inline bool assign_cores(const problem& p, schedule& s) {
  const std::size_t n = p.size();
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return s.tasks[a].start < s.tasks[b].start; });
  const double eps = 1e-9 * std::max(1e-12, std::abs(s.makespan.value()));
  for (int pool = 0; pool < pool_count; ++pool) {
    std::vector<double> free_at(static_cast<std::size_t>(p.pool_size(pool)), -1e300);
    for (std::size_t i : order) {
      placement& pl = s.tasks[i];
      if (!uses_pool(p.tasks[i].kind, pool)) {
        pl.core[pool] = -1;
        continue;
      }
      if (pl.all_cores) {  // holds every core of the pool until it ends
        pl.core[pool] = -1;
        const double finish = pl.start.value() + duration(p, i, true).value();
        for (double& f : free_at) f = std::max(f, finish);
        continue;
      }
      const double begin = pl.start.value();
      const double finish = begin + duration(p, i, false).value();
      int chosen = -1;
      for (std::size_t c = 0; c < free_at.size() && chosen < 0; ++c)
        if (free_at[c] <= begin + eps) chosen = static_cast<int>(c);
      if (chosen < 0) return false;
      pl.core[pool] = chosen;
      free_at[static_cast<std::size_t>(chosen)] = std::max(finish, begin);
    }
  }
  return true;
}

/// Builds a schedule task by task: each task goes at the earliest time its predecessors are done and its
/// cores are free (the serial schedule-generation scheme, Kolisch 1996).
class schedule_builder {
 public:
  explicit schedule_builder(const problem& p) : p_(p), finish_(p.size(), 0.0) {
    out_.tasks.resize(p.size());
    for (int pool = 0; pool < pool_count; ++pool) pools_.emplace_back(p.pool_size(pool));
  }

  /// Where task `i` would go in the given mode: its placement and finish time, without committing it.
  [[nodiscard]] std::pair<placement, double> probe(std::size_t i, bool spread) const {
    const task& t = p_.tasks[i];
    const double d = duration(p_, i, spread).value();
    double earliest = 0.0;
    for (int q : t.preds) earliest = std::max(earliest, finish_[static_cast<std::size_t>(q)]);
    placement pl;
    pl.all_cores = spread && t.kind != resource::none;
    if (t.kind == resource::none || d <= 0.0) {
      pl.start = seconds{earliest};
      return {pl, earliest};
    }
    // Candidate starts: the earliest start, then every later release time of the pools the task uses.
    std::vector<double> candidates;
    candidates.reserve(1 + p_.size());
    candidates.push_back(earliest);
    for (int pool = 0; pool < pool_count; ++pool)
      if (uses_pool(t.kind, pool)) pools_[static_cast<std::size_t>(pool)].add_release_times(candidates);
    std::sort(candidates.begin(), candidates.end());
    for (double start : candidates) {
      if (start < earliest) continue;
      const double end = start + d;
      bool ok = true;
      for (int pool = 0; pool < pool_count && ok; ++pool) {
        if (!uses_pool(t.kind, pool)) continue;
        const auto& timeline = pools_[static_cast<std::size_t>(pool)];
        ok = timeline.fits(start, end, spread ? timeline.cores() : 1);
      }
      if (!ok) continue;
      pl.start = seconds{start};
      return {pl, end};
    }
    return {pl, earliest};  // unreachable: the last release time always frees every core
  }

  /// Places task `i` in the given mode; returns its finish time.
  double commit(std::size_t i, bool spread) {
    const auto [pl, end] = probe(i, spread);
    const double start = pl.start.value();
    for (int pool = 0; pool < pool_count; ++pool) {
      if (!uses_pool(p_.tasks[i].kind, pool)) continue;
      auto& timeline = pools_[static_cast<std::size_t>(pool)];
      timeline.occupy(start, end, pl.all_cores ? timeline.cores() : 1);
    }
    out_.tasks[i] = pl;
    finish_[i] = end;
    out_.makespan = std::max(out_.makespan, seconds{end});
    return end;
  }

  /// The partial schedule so far; cores are given to one-core tasks by `finished()`.
  [[nodiscard]] const schedule& result() const { return out_; }
  /// The schedule with a core assigned to every one-core task.
  [[nodiscard]] schedule finished() const {
    schedule s = out_;
    assign_cores(p_, s);
    return s;
  }

 private:
  const problem& p_;
  std::vector<double> finish_;
  std::vector<detail::pool_timeline> pools_;
  schedule out_;
};

/// Schedules tasks one by one in `order` (a precedence-feasible permutation), each in its given mode. Every
/// active schedule, and so an optimal one, comes out of this for some order and modes.
inline schedule serial_schedule(const problem& p, const std::vector<int>& order,
                                const std::vector<bool>& all_cores) {
  schedule_builder builder(p);
  for (int i : order) builder.commit(static_cast<std::size_t>(i), all_cores[static_cast<std::size_t>(i)]);
  return builder.finished();
}

/// Longest path from each task to the end of the DAG, each task at its fastest duration (its "bottom level").
inline std::vector<double> bottom_levels(const problem& p) {
  const std::size_t n = p.size();
  std::vector<double> level(n, 0.0);
  std::vector<std::vector<int>> succs(n);
  for (std::size_t i = 0; i < n; ++i)
    for (int q : p.tasks[i].preds) succs[static_cast<std::size_t>(q)].push_back(static_cast<int>(i));
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t i = n - 1 - r;
    double tail = 0.0;
    for (int s : succs[i]) tail = std::max(tail, level[static_cast<std::size_t>(s)]);
    level[i] = fastest(p.tasks[i]).value() + tail;
  }
  return level;
}

namespace detail {
/// How the list scheduler picks a task's mode.
enum class mode_policy { earliest_finish, one_core, all_cores };

inline schedule list_schedule_with(const problem& p, const std::vector<double>& level, mode_policy policy,
                                   const std::vector<bool>* forced_modes = nullptr) {
  const std::size_t n = p.size();
  std::vector<bool> placed(n, false);
  schedule_builder builder(p);
  for (std::size_t step = 0; step < n; ++step) {
    std::size_t best = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (placed[i]) continue;
      bool ready = true;
      for (int q : p.tasks[i].preds) ready = ready && placed[static_cast<std::size_t>(q)];
      if (ready && (best == n || level[i] > level[best])) best = i;
    }
    placed[best] = true;
    bool spread = policy == mode_policy::all_cores;
    if (forced_modes != nullptr) {
      spread = (*forced_modes)[best];
    } else if (policy == mode_policy::earliest_finish && p.tasks[best].kind != resource::none) {
      spread = builder.probe(best, true).second < builder.probe(best, false).second;
    }
    builder.commit(best, spread);
  }
  return builder.finished();
}
}  // namespace detail

/// Critical-path list scheduling: repeatedly take the ready task with the longest path to the end and place
/// it at its earliest feasible start. Three mode policies are tried (the mode that finishes the task first,
/// always one core, always all cores) and the shortest schedule is kept.
inline constexpr auto list_schedule = [](const problem& p) -> schedule {
  validate(p);
  const auto level = bottom_levels(p);
  schedule best = detail::list_schedule_with(p, level, detail::mode_policy::earliest_finish);
  for (auto policy : {detail::mode_policy::one_core, detail::mode_policy::all_cores}) {
    schedule s = detail::list_schedule_with(p, level, policy);
    if (s.makespan < best.makespan) best = std::move(s);
  }
  best.status = solve_status::heuristic;
  return best;
};

/// The list schedule improved by a deterministic randomized search: `rounds` more list schedules with
/// perturbed priorities (each task's bottom level scaled by a random factor in [1 - spread, 1 + spread])
/// and each of the three mode policies, plus `rounds` with random modes; the shortest is kept. A better
/// incumbent tightens the ILP's time windows and big-Ms.
inline schedule improved_list_schedule(const problem& p, int rounds = 64, double spread = 0.3,
                                       unsigned seed = 12345) {
  schedule best = list_schedule(p);
  const auto level = bottom_levels(p);
  std::uint64_t state = seed;
  auto uniform = [&state] {  // splitmix64: reproducible on every platform
    state += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<double>((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
  };
  std::vector<double> perturbed(level.size());
  std::vector<bool> modes(level.size());
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < level.size(); ++i)
      perturbed[i] = level[i] * (1.0 + spread * (2.0 * uniform() - 1.0));
    for (auto policy : {detail::mode_policy::earliest_finish, detail::mode_policy::one_core,
                        detail::mode_policy::all_cores}) {
      schedule s = detail::list_schedule_with(p, perturbed, policy);
      if (s.makespan < best.makespan) best = std::move(s);
    }
    for (std::size_t i = 0; i < modes.size(); ++i) modes[i] = uniform() < 0.5;
    schedule s = detail::list_schedule_with(p, perturbed, detail::mode_policy::earliest_finish, &modes);
    if (s.makespan < best.makespan) best = std::move(s);
  }
  best.status = solve_status::heuristic;
  return best;
}

}  // namespace phaze::sched
