// The schedulers `--solver` names: the one translation unit of the program's commands (besides `phaze
// schedule`) that includes the ILP (Lemon and GLPK), so the others compile without the solver's headers.
#include <string>

#include "cli.hpp"
#include "phaze/sched/ilp.hpp"
#include "phaze/sched/scheduler.hpp"

namespace phaze::cli {

/// `--solver ilp`: the ILP with its search defaults (sched::search_ilp_options: a node budget per solve, so
/// results do not depend on the machine's load); `list`: the list scheduler.
sched::any_scheduler scheduler_for(const std::string& solver) {
  if (solver == "ilp") return sched::ilp_scheduler{};
  return sched::list_scheduler{};
}

sched::schedule_cache schedule_cache_for(const std::string& solver) {
  return sched::schedule_cache{scheduler_for(solver)};
}

}  // namespace phaze::cli
