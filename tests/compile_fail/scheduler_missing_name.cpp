// expect-error: phaze::sched::Scheduler: 's.name\(\)' is missing
// Reports and cache keys name the scheduler that produced each schedule.
#include <phaze/sched/scheduler.hpp>

struct anonymous {
  phaze::sched::schedule solve(const phaze::sched::problem& p) const {
    return phaze::sched::list_schedule(p);
  }
};

phaze::sched::any_scheduler scheduler = anonymous{};
