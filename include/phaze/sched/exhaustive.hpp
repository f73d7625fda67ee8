/// @file
/// The exhaustive scheduler: the exact optimum of a small problem by trying every precedence-feasible order
/// and every mode, with branch-and-bound. The oracle the ILP and the list scheduler are tested against.
#pragma once

#include <cstddef>
#include <vector>

#include "phaze/sched/bounds.hpp"
#include "phaze/sched/list_scheduler.hpp"
#include "phaze/sched/problem.hpp"

namespace phaze::sched {

/// Most tasks the exhaustive scheduler accepts (its work grows like n! * 2^n).
inline constexpr std::size_t exhaustive_max_tasks = 10;

namespace rules {
[[noreturn]] inline void exhaustive_scheduler_is_for_small_problems() {
  throw input_error("the exhaustive scheduler takes at most 10 tasks; use the ILP for larger problems");
}
}  // namespace rules

namespace detail {
inline void exhaustive_search(const problem& p, const schedule_builder& partial, std::vector<bool>& placed,
                              std::size_t remaining, double& best_makespan, schedule& best) {
  if (remaining == 0) {
    if (partial.result().makespan.value() < best_makespan) {
      best_makespan = partial.result().makespan.value();
      best = partial.finished();
    }
    return;
  }
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (placed[i]) continue;
    bool ready = true;
    for (int q : p.tasks[i].preds) ready = ready && placed[static_cast<std::size_t>(q)];
    if (!ready) continue;
    const int modes = p.tasks[i].kind == resource::none ? 1 : 2;
    for (int m = 0; m < modes; ++m) {
      schedule_builder child = partial;
      child.commit(i, m == 1);
      // A partial schedule only grows: prune when it already reaches the best complete one.
      if (child.result().makespan.value() >= best_makespan) continue;
      placed[i] = true;
      exhaustive_search(p, child, placed, remaining - 1, best_makespan, best);
      placed[i] = false;
    }
  }
}
}  // namespace detail

/// The optimal schedule of a problem of at most exhaustive_max_tasks tasks. Serial schedule generation over
/// every order and mode reaches every active schedule, and some active schedule is optimal (Kolisch 1996).
inline constexpr auto exhaustive_schedule = [](const problem& p) -> schedule {
  validate(p);
  if (p.size() > exhaustive_max_tasks) rules::exhaustive_scheduler_is_for_small_problems();
  schedule best = list_schedule(p);
  double best_makespan = best.makespan.value() * (1.0 + 1e-12) + 1e-300;
  std::vector<bool> placed(p.size(), false);
  detail::exhaustive_search(p, schedule_builder(p), placed, p.size(), best_makespan, best);
  best.status = solve_status::optimal;
  best.lower_bound = best.makespan;
  return best;
};

}  // namespace phaze::sched
