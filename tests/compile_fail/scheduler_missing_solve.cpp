// expect-error: phaze::sched::Scheduler: 's.solve\(problem\)' returning sched::schedule is missing
// A scheduler that returns only a makespan cannot feed the cost tables (they check each schedule).
#include <phaze/sched/scheduler.hpp>

#include <string_view>

struct makespan_only {
  std::string_view name() const { return "makespan-only"; }
  phaze::seconds solve(const phaze::sched::problem&) const { return phaze::seconds{0.0}; }
};

phaze::sched::schedule_cache cache{makespan_only{}};
