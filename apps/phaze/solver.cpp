// The schedulers `--solver` names: the one translation unit of the program's commands (besides `phaze
// schedule`) that includes the ILP (Lemon and GLPK), so the others compile without the solver's headers.
#include <string>

#include "cli.hpp"
#include "phaze/sched/ilp.hpp"
#include "phaze/sched/scheduler.hpp"

namespace phaze::cli {

/// The ILP as the commands run it: a branch-and-bound budget per solve instead of a time budget, so results
/// do not depend on the machine's speed or load (the same schedules for any number of threads or
/// processes); the time limit is only a safety net. A solve stopped by the budget keeps its best schedule
/// and reports its gap.
inline constexpr int ilp_node_budget = 200;

sched::any_scheduler scheduler_for(const std::string& solver) {
  if (solver == "ilp") {
    sched::ilp_options options;
    options.max_nodes = ilp_node_budget;
    options.time_limit = seconds{60.0};
    return sched::ilp_scheduler{options};
  }
  return sched::list_scheduler{};
}

sched::schedule_cache schedule_cache_for(const std::string& solver) {
  return sched::schedule_cache{scheduler_for(solver)};
}

}  // namespace phaze::cli
