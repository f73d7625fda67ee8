/// @file
/// What `phaze schedule` prints: a layer pass's schedule (per op: start, end, cores), its makespan, bounds
/// and solver status, as a value that becomes JSON or an aligned text table.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "phaze/io/table.hpp"
#include "phaze/sched/bounds.hpp"
#include "phaze/sched/problem.hpp"

namespace phaze::io {

/// One op of a scheduled pass.
struct scheduled_op {
  std::string name;
  std::string kind;  ///< the pool it holds: tensor, vector, paired, none
  seconds start{0.0};
  seconds end{0.0};
  bool all_cores = false;
  int core = -1;  ///< for one-core ops, the core of its pool
};

/// One scheduled pass of a layer.
struct pass_report {
  std::string pass;    ///< forward or backward
  std::string solver;  ///< ilp or list
  std::string status;  ///< optimal, time_limit or heuristic
  seconds makespan{0.0};
  seconds lower_bound{0.0};
  seconds critical_path{0.0};
  seconds work_bound{0.0};
  double gap = 0.0;
  seconds solve_time{0.0};
  std::vector<scheduled_op> ops;
};

/// The report of one pass from its problem and schedule.
inline pass_report report_pass(std::string pass, std::string solver, const sched::problem& p,
                               const sched::schedule& s, seconds solve_time) {
  pass_report r;
  r.pass = std::move(pass);
  r.solver = std::move(solver);
  r.status = std::string{sched::to_string(s.status)};
  r.makespan = s.makespan;
  r.lower_bound = s.lower_bound;
  const auto b = sched::lower_bounds(p);
  r.critical_path = b.critical_path;
  r.work_bound = b.work;
  r.gap = s.gap();
  r.solve_time = solve_time;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const auto& pl = s.tasks[i];
    scheduled_op o;
    o.name = p.tasks[i].name;
    o.kind = std::string{sched::to_string(p.tasks[i].kind)};
    o.start = pl.start;
    o.end = pl.start + sched::duration(p, i, pl.all_cores);
    o.all_cores = pl.all_cores;
    o.core = pl.core[0] >= 0 ? pl.core[0] : pl.core[1];
    r.ops.push_back(std::move(o));
  }
  return r;
}

inline void to_json(nlohmann::ordered_json& j, const scheduled_op& o) {
  j = nlohmann::ordered_json{
      {"name", o.name},         {"kind", o.kind},           {"start_s", o.start.value()},
      {"end_s", o.end.value()}, {"all_cores", o.all_cores}, {"core", o.core}};
}

inline void to_json(nlohmann::ordered_json& j, const pass_report& r) {
  j = nlohmann::ordered_json{{"pass", r.pass},
                             {"solver", r.solver},
                             {"status", r.status},
                             {"makespan_s", r.makespan.value()},
                             {"lower_bound_s", r.lower_bound.value()},
                             {"critical_path_s", r.critical_path.value()},
                             {"work_bound_s", r.work_bound.value()},
                             {"gap", r.gap},
                             {"ops", r.ops}};  // no solve time: the same input gives the same bytes
}

/// A time in the unit that suits it (ns, us, ms, s).
inline std::string format_time(seconds t) {
  const double v = t.value();
  if (v == 0.0) return "0";
  if (v < 1e-6) return fmt::format("{:.3g} ns", v * 1e9);
  if (v < 1e-3) return fmt::format("{:.4g} us", v * 1e6);
  if (v < 1.0) return fmt::format("{:.4g} ms", v * 1e3);
  return fmt::format("{:.4g} s", v);
}

/// The pass as text: a summary, then one row per op.
inline std::string to_table(const pass_report& r) {
  std::string out = fmt::format(
      "{} pass: makespan {} ({} by {}, gap {:.2f}%), lower bounds: critical path {}, "
      "work {}; solved in {}\n",
      r.pass, format_time(r.makespan), r.status, r.solver, 100.0 * r.gap, format_time(r.critical_path),
      format_time(r.work_bound), format_time(r.solve_time));
  text_table t{{"#", "op", "unit", "start", "end", "cores"},
               {align::right, align::left, align::left, align::right, align::right, align::left}};
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const auto& o = r.ops[i];
    const std::string cores = o.kind == "none" ? "-" : o.all_cores ? "all" : fmt::format("core {}", o.core);
    t.add_row({std::to_string(i), o.name, o.kind, format_time(o.start), format_time(o.end), cores});
  }
  return out + t.render();
}

}  // namespace phaze::io
