/// @file
/// The optimal intra-layer schedule as a mixed-integer program, modelled with Lemon's LP interface and
/// solved by GLPK: start times, the makespan, the intra-op (one core or all cores) choice per task, ordering
/// variables only for pairs of tasks the DAG leaves unordered, and core-capacity cuts added lazily.
/// This is the only header family in phaze that includes Lemon.
#pragma once

#include <glpk.h>
#include <lemon/glpk.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "phaze/sched/bounds.hpp"
#include "phaze/sched/list_scheduler.hpp"
#include "phaze/sched/problem.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/sched/validator.hpp"

namespace phaze::sched {

/// Options of the ILP scheduler.
struct ilp_options {
  seconds time_limit{10.0};    ///< per solve; when hit, the best schedule and its proven gap are returned
  double relative_gap = 1e-6;  ///< stop when proven this close to optimal
  bool skip_when_bound_met =
      true;                 ///< return the list schedule when it meets a lower bound (provably optimal)
  int max_cut_rounds = 50;  ///< rounds of lazily added core-capacity cuts
  /// Branch-and-bound nodes per solve (0: no limit). Unlike the time limit, a node budget stops GLPK at the
  /// same point on every machine and under any load, so searches that set it give the same schedules for any
  /// number of threads or processes; when it stops a solve, the schedule's gap says how far it may be.
  int max_nodes = 0;
};

/// What the ILP did, for reports and benchmarks.
struct ilp_report {
  int variables = 0;
  int binaries = 0;
  int rows = 0;
  int ordering_pairs = 0;  ///< pairs of tasks given ordering variables (DAG-incomparable, sharing a pool)
  int cut_rounds = 0;      ///< re-solves after adding core-capacity cuts
  bool skipped = false;    ///< the list schedule met a lower bound; no ILP was solved
  seconds solve_time{0.0};
};

namespace detail {

/// Which task can reach which (transitive closure of the predecessor lists).
inline std::vector<std::vector<bool>> reachability(const problem& p) {
  const std::size_t n = p.size();
  std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));  // before[i][j]: i precedes j
  for (std::size_t j = 0; j < n; ++j) {
    for (int q : p.tasks[j].preds) {
      const auto i = static_cast<std::size_t>(q);
      before[i][j] = true;
      for (std::size_t k = 0; k < n; ++k)
        if (before[k][i]) before[k][j] = true;
    }
  }
  return before;
}

/// State shared with GLPK's branch-and-bound callback: the incumbent to offer and the best bound seen.
struct callback_state {
  std::vector<double> incumbent;  ///< 1-based column values, as glp_ios_heur_sol expects
  bool offered = false;
  double best_bound = 0.0;
  int max_nodes = 0;  ///< stop after this many branch-and-bound nodes (0: no limit)
  bool stopped = false;
};

inline void on_branch_and_bound_event(glp_tree* tree, void* info) {
  auto* state = static_cast<callback_state*>(info);
  if (state->max_nodes > 0 && !state->stopped) {
    int active = 0, in_tree = 0, total = 0;
    glp_ios_tree_size(tree, &active, &in_tree, &total);
    if (total >= state->max_nodes) {
      state->stopped = true;
      glp_ios_terminate(tree);
    }
  }
  switch (glp_ios_reason(tree)) {
    case GLP_IHEUR:
      if (!state->offered && !state->incumbent.empty()) {
        state->offered = true;
        glp_ios_heur_sol(tree, state->incumbent.data());
      }
      break;
    case GLP_ISELECT:
    case GLP_IBINGO:
    case GLP_IPREPRO: {
      const int node = glp_ios_best_node(tree);
      if (node != 0) state->best_bound = std::max(state->best_bound, glp_ios_node_bound(tree, node));
      break;
    }
    default:
      break;
  }
}

/// The MIP of one problem, normalised so the list schedule's makespan is 1 (all times in [0, 1]).
class schedule_mip {
 public:
  schedule_mip(const problem& p, const schedule& incumbent) : p_(p), horizon_(incumbent.makespan.value()) {
    const std::size_t n = p.size();
    before_ = reachability(p);
    reachable_ = before_;
    // Time windows: a task starts no earlier than its longest chain of predecessors allows (head) and, in any
    // schedule no longer than the incumbent, no later than 1 minus its longest chain to the end (tail).
    // They bound the start columns and give each ordering row its own, much smaller, big-M.
    const auto bottom = bottom_levels(p);
    head_.assign(n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (int q : p.tasks[i].preds) {
        const auto pred = static_cast<std::size_t>(q);
        head_[i] = std::max(head_[i], head_[pred] + fastest(p.tasks[pred]).value() / horizon_);
      }
    latest_.assign(n, 1.0);
    for (std::size_t i = 0; i < n; ++i) latest_[i] = std::max(head_[i], 1.0 - bottom[i] / horizon_);
    // Pairs the windows already order (i's latest end comes before j's earliest start) need no variables.
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j)
        if (i != j && !before_[j][i] && latest_[i] + longest(i) <= head_[j]) before_[i][j] = true;
    glp_set_prob_name(glpk(), "phaze_layer_schedule");
    makespan_ = mip_.addCol();
    mip_.colName(makespan_, "makespan");
    mip_.colLowerBound(makespan_, 0.0);
    mip_.colUpperBound(makespan_, 1.0);
    for (std::size_t i = 0; i < n; ++i) {
      start_.push_back(mip_.addCol());
      mip_.colLowerBound(start_[i], head_[i]);
      mip_.colUpperBound(start_[i], latest_[i]);
      mip_.colName(start_[i], "start_" + label(i));
      spread_.push_back(mip_.addCol());
      mip_.colName(spread_[i], "all_cores_" + label(i));
      mip_.colType(spread_[i], lemon::GlpkMip::INTEGER);
      mip_.colLowerBound(spread_[i], 0.0);
      mip_.colUpperBound(spread_[i], p.tasks[i].kind == resource::none ? 0.0 : 1.0);
      ++binaries_;
    }
    // A task no other task can overlap on its pools simply takes its faster mode (shortening it never
    // delays anything). Fixed only when the incumbent agrees, so the incumbent stays feasible.
    for (std::size_t i = 0; i < n; ++i) {
      if (p.tasks[i].kind == resource::none || !alone(i)) continue;
      const bool faster_spread = duration(p, i, true) < duration(p, i, false);
      if (incumbent.tasks[i].all_cores != faster_spread) continue;
      mip_.colLowerBound(spread_[i], faster_spread ? 1.0 : 0.0);
      mip_.colUpperBound(spread_[i], faster_spread ? 1.0 : 0.0);
      --binaries_;
    }
    for (std::size_t i = 0; i < n; ++i) {
      mip_.addRow(makespan_ >= start_[i] + length(i));
      for (int q : p.tasks[i].preds) {
        const auto pred = static_cast<std::size_t>(q);
        mip_.addRow(start_[i] >= start_[pred] + length(pred));
      }
    }
    // Ordering variables for DAG-incomparable pairs sharing a pool. A pair must be ordered when either task
    // holds a whole pool, or when a pool they share has a single core.
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = i + 1; j < n; ++j) {
        if (before_[i][j] || before_[j][i]) continue;
        bool share = false;
        bool single_core = false;
        for (int pool = 0; pool < pool_count; ++pool) {
          if (uses_pool(p.tasks[i].kind, pool) && uses_pool(p.tasks[j].kind, pool)) {
            share = true;
            single_core = single_core || p.pool_size(pool) == 1;
          }
        }
        if (!share) continue;
        const auto [ij, ji] = ordering(i, j);
        if (single_core) {
          mip_.addRow(ij + ji == 1);
        } else {
          mip_.addRow(ij + ji >= spread_[i]);
          mip_.addRow(ij + ji >= spread_[j]);
        }
        ++pairs_;
      }
    }
    // Energy rows: a pool of C cores is busy at least (its tasks' core-seconds) / C, and a task holds
    // one_core core-seconds on one core or C * all_cores spread. Valid for every schedule, and much
    // tighter than the big-M rows in the LP relaxation.
    for (int pool = 0; pool < pool_count; ++pool) {
      lemon::GlpkMip::Expr busy;
      bool any = false;
      for (std::size_t i = 0; i < n; ++i) {
        if (!uses_pool(p.tasks[i].kind, pool)) continue;
        busy += energy(i, pool);
        any = true;
      }
      if (any) mip_.addRow(makespan_ >= busy);
    }
    // Head and tail energy rows: everything a task transitively waits for must be done before it starts,
    // and everything waiting for it must still run after it ends, each at least its core-seconds / C per
    // pool. Valid for every schedule; they lift the relaxation where the DAG is a chain with side work.
    for (std::size_t j = 0; j < n; ++j) {
      for (int pool = 0; pool < pool_count; ++pool) {
        lemon::GlpkMip::Expr before_j;
        lemon::GlpkMip::Expr after_j;
        bool any_before = false;
        bool any_after = false;
        for (std::size_t k = 0; k < n; ++k) {
          if (!uses_pool(p.tasks[k].kind, pool) || !reachable_[k][j] == !reachable_[j][k]) continue;
          if (reachable_[k][j]) {
            before_j += energy(k, pool);
            any_before = true;
          } else {
            after_j += energy(k, pool);
            any_after = true;
          }
        }
        if (any_before) mip_.addRow(start_[j] >= before_j);
        if (any_after) mip_.addRow(makespan_ >= start_[j] + length(j) + after_j);
      }
    }
    // Core-capacity cuts known up front: every set of C + 1 pairwise unordered tasks of a pool of C cores
    // (an antichain) must have some pair ordered. Added eagerly while there are few; the rest come lazily.
    for (int pool = 0; pool < pool_count; ++pool) {
      const auto cliques = antichains(pool, static_cast<std::size_t>(p.pool_size(pool)) + 1, eager_cut_limit);
      if (cliques.size() < eager_cut_limit)
        for (const auto& c : cliques) add_capacity_cut(c);
    }
    mip_.min();
    mip_.obj(lemon::GlpkMip::Expr{makespan_});
    offer(incumbent);
  }

  /// Most core-capacity cuts added before the first solve.
  static constexpr std::size_t eager_cut_limit = 256;

  /// Up to `limit` sets of `size` pairwise DAG-unordered tasks that each hold one core of `pool` (positive
  /// durations only): the sets that could oversubscribe a pool of size - 1 cores.
  [[nodiscard]] std::vector<std::vector<std::size_t>> antichains(int pool, std::size_t size,
                                                                 std::size_t limit) const {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < p_.size(); ++i)
      if (uses_pool(p_.tasks[i].kind, pool) && duration(p_, i, false).value() > 0) members.push_back(i);
    std::vector<std::vector<std::size_t>> out;
    std::vector<std::size_t> current;
    auto grow = [&](auto&& self, std::size_t from) -> void {
      if (out.size() >= limit) return;
      if (current.size() == size) {
        out.push_back(current);
        return;
      }
      for (std::size_t m = from; m < members.size(); ++m) {
        bool unordered = true;
        for (std::size_t c : current)
          unordered = unordered && !before_[c][members[m]] && !before_[members[m]][c];
        if (!unordered) continue;
        current.push_back(members[m]);
        self(self, m + 1);
        current.pop_back();
      }
    };
    grow(grow, 0);
    return out;
  }

  /// Adds the cut "of these tasks, which cannot all run at once, some pair is ordered".
  void add_capacity_cut(const std::vector<std::size_t>& clique) {
    lemon::GlpkMip::Expr ordered;
    for (std::size_t a = 0; a < clique.size(); ++a)
      for (std::size_t b = a + 1; b < clique.size(); ++b) {
        const auto [ij, ji] = ordering(clique[a], clique[b]);
        ordered += ij + ji;
      }
    mip_.addRow(ordered >= 1);
  }

  /// Solves; returns the schedule found (starts and modes; cores unassigned) and the proven bound.
  std::pair<schedule, double> solve(const ilp_options& options, seconds time_left) {
    glp_prob* lp = glpk();
    glp_smcp simplex;
    glp_init_smcp(&simplex);
    simplex.msg_lev = GLP_MSG_OFF;
    glp_simplex(lp, &simplex);  // the root relaxation (glp_intopt without presolve needs a basis)

    callback_state state;
    state.incumbent = incumbent_;
    state.max_nodes = options.max_nodes;
    state.best_bound = glp_get_status(lp) == GLP_OPT ? glp_get_obj_val(lp) : 0.0;
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.tm_lim = static_cast<int>(std::clamp(time_left.value() * 1e3, 1.0, 2.0e9));  // GLPK takes int ms
    parm.mip_gap = options.relative_gap;
    parm.tol_int = 1e-9;  // an "integer" 0.99999 would relax a big-M row by 1e-5 of the horizon
    parm.cb_func = &on_branch_and_bound_event;
    parm.cb_info = &state;
    parm.gmi_cuts = GLP_ON;
    parm.mir_cuts = GLP_ON;
    const int rc = glp_intopt(lp, &parm);
    const int status = glp_mip_status(lp);

    schedule s;
    s.tasks.resize(p_.size());
    const bool have_solution = status == GLP_OPT || status == GLP_FEAS;
    if (!have_solution) return {s, state.best_bound * horizon_};
    for (std::size_t i = 0; i < p_.size(); ++i) {
      s.tasks[i].start = seconds{mip_.sol(start_[i]) * horizon_};
      s.tasks[i].all_cores = p_.tasks[i].kind != resource::none && mip_.sol(spread_[i]) > 0.5;
    }
    const bool proven = status == GLP_OPT && rc == 0;
    const double bound = proven ? glp_mip_obj_val(lp) : state.best_bound;
    s.status = proven ? solve_status::optimal : solve_status::time_limit;
    return {s, bound * horizon_};
  }

  /// Writes the model in CPLEX LP text to `path`.
  void write_lp(const std::filesystem::path& path) {
    glp_term_out(GLP_OFF);  // GLPK announces every file it writes on stdout
    const int rc = glp_write_lp(glpk(), nullptr, path.string().c_str());
    glp_term_out(GLP_ON);
    if (rc != 0) {
      throw input_error("cannot write the ILP to '" + path.string() +
                        "': check the path and its permissions");
    }
  }

  [[nodiscard]] int pairs() const { return pairs_; }
  [[nodiscard]] int binaries() const { return binaries_; }
  [[nodiscard]] int variables() { return glp_get_num_cols(glpk()); }
  [[nodiscard]] int rows() { return glp_get_num_rows(glpk()); }

 private:
  glp_prob* glpk() { return static_cast<glp_prob*>(mip_.lpx()); }

  /// A name for task i usable in LP text: its index and its name with anything but letters, digits and
  /// underscores replaced.
  [[nodiscard]] std::string label(std::size_t i) const {
    std::string out = std::to_string(i);
    for (char c : p_.tasks[i].name) {
      const bool plain =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      out += plain ? c : '_';
    }
    return out.substr(0, 60);
  }

  /// Task i's core-seconds on `pool` divided by the pool's cores (normalised): the least time it keeps the
  /// whole pool busy, as an expression of its mode.
  [[nodiscard]] lemon::GlpkMip::Expr energy(std::size_t i, int pool) const {
    const double cores = static_cast<double>(p_.pool_size(pool));
    const double one = duration(p_, i, false).value() / horizon_;
    const double all = duration(p_, i, true).value() / horizon_;
    return one / cores + (all - one / cores) * spread_[i];
  }

  /// The longer of a task's two durations (normalised).
  [[nodiscard]] double longest(std::size_t i) const {
    return std::max(duration(p_, i, false).value(), duration(p_, i, true).value()) / horizon_;
  }

  /// The largest value s_i + d_i - s_j can take inside the time windows (the big-M of "i before j").
  [[nodiscard]] double big_m(std::size_t i, std::size_t j) const {
    return std::max(0.0, latest_[i] + longest(i) - head_[j]);
  }

  /// Whether no task that shares a pool with task i can overlap it (every such task is ordered with it).
  [[nodiscard]] bool alone(std::size_t i) const {
    for (std::size_t j = 0; j < p_.size(); ++j) {
      if (j == i || before_[i][j] || before_[j][i]) continue;
      for (int pool = 0; pool < pool_count; ++pool)
        if (uses_pool(p_.tasks[i].kind, pool) && uses_pool(p_.tasks[j].kind, pool)) return false;
    }
    return true;
  }

  /// The task's duration (normalised) as an expression of its mode variable.
  lemon::GlpkMip::Expr length(std::size_t i) const {
    const double one = duration(p_, i, false).value() / horizon_;
    const double all = duration(p_, i, true).value() / horizon_;
    return one + (all - one) * spread_[i];
  }

  /// The ordering variables of a pair (i before j, j before i), created on first use with their big-M rows.
  std::pair<lemon::GlpkMip::Col, lemon::GlpkMip::Col> ordering(std::size_t i, std::size_t j) {
    if (i > j) {
      const auto [a, b] = ordering(j, i);
      return {b, a};
    }
    const auto key = std::make_pair(i, j);
    if (const auto it = orders_.find(key); it != orders_.end()) return it->second;
    lemon::GlpkMip::Col ij = mip_.addCol();
    lemon::GlpkMip::Col ji = mip_.addCol();
    mip_.colName(ij, "order_" + label(i) + "_before_" + label(j));
    mip_.colName(ji, "order_" + label(j) + "_before_" + label(i));
    for (auto c : {ij, ji}) {
      mip_.colType(c, lemon::GlpkMip::INTEGER);
      mip_.colLowerBound(c, 0.0);
      mip_.colUpperBound(c, 1.0);
    }
    binaries_ += 2;
    // Manne's disjunction with the smallest big-M the time windows allow: i's latest end minus j's head.
    mip_.addRow(start_[j] >= start_[i] + length(i) - big_m(i, j) * (1 - ij));
    mip_.addRow(start_[i] >= start_[j] + length(j) - big_m(j, i) * (1 - ji));
    mip_.addRow(ij + ji <= 1);
    orders_.emplace(key, std::make_pair(ij, ji));
    // Extend the incumbent with these columns so the heuristic solution stays complete.
    if (!incumbent_.empty()) {
      incumbent_.resize(static_cast<std::size_t>(glp_get_num_cols(glpk())) + 1, 0.0);
      set_order_values(i, j, ij, ji);
    }
    return {ij, ji};
  }

  void set_order_values(std::size_t i, std::size_t j, lemon::GlpkMip::Col ij, lemon::GlpkMip::Col ji) {
    const double end_i = incumbent_starts_[i] + incumbent_lengths_[i];
    const double end_j = incumbent_starts_[j] + incumbent_lengths_[j];
    const double eps = 1e-12;
    if (end_i <= incumbent_starts_[j] + eps) {
      incumbent_[column(ij)] = 1.0;
    } else if (end_j <= incumbent_starts_[i] + eps) {
      incumbent_[column(ji)] = 1.0;
    }
  }

  /// GLPK's 1-based column index of a Lemon column (Lemon numbers columns in creation order from 0 and
  /// GLPK from 1; phaze never erases columns).
  static std::size_t column(lemon::GlpkMip::Col c) {
    return static_cast<std::size_t>(lemon::GlpkMip::id(c)) + 1;
  }

  /// Records the list schedule as the incumbent GLPK is offered at its first heuristic call.
  void offer(const schedule& s) {
    const std::size_t n = p_.size();
    incumbent_.assign(static_cast<std::size_t>(glp_get_num_cols(glpk())) + 1, 0.0);
    incumbent_starts_.resize(n);
    incumbent_lengths_.resize(n);
    incumbent_[column(makespan_)] = s.makespan.value() / horizon_;
    for (std::size_t i = 0; i < n; ++i) {
      incumbent_starts_[i] = s.tasks[i].start.value() / horizon_;
      incumbent_lengths_[i] = duration(p_, i, s.tasks[i].all_cores).value() / horizon_;
      incumbent_[column(start_[i])] = incumbent_starts_[i];
      incumbent_[column(spread_[i])] = s.tasks[i].all_cores ? 1.0 : 0.0;
    }
    for (const auto& [key, cols] : orders_) set_order_values(key.first, key.second, cols.first, cols.second);
  }

  const problem& p_;
  double horizon_;
  std::vector<std::vector<bool>> before_;     ///< ordered by the DAG or by the time windows
  std::vector<std::vector<bool>> reachable_;  ///< ordered by the DAG (transitive closure)
  std::vector<double> head_;                  ///< earliest start (normalised)
  std::vector<double> latest_;  ///< latest start in a schedule no longer than the incumbent (normalised)
  lemon::GlpkMip mip_;
  lemon::GlpkMip::Col makespan_;
  std::vector<lemon::GlpkMip::Col> start_;
  std::vector<lemon::GlpkMip::Col> spread_;
  std::map<std::pair<std::size_t, std::size_t>, std::pair<lemon::GlpkMip::Col, lemon::GlpkMip::Col>> orders_;
  std::vector<double> incumbent_;
  std::vector<double> incumbent_starts_;
  std::vector<double> incumbent_lengths_;
  int pairs_ = 0;
  int binaries_ = 0;
};

/// One-core tasks of a pool running at the busiest instant, when more than the pool's cores; else empty.
inline std::vector<std::size_t> oversubscribed(const problem& p, const schedule& s, int pool) {
  const double eps = 1e-9 * std::max(1e-12, s.makespan.value());
  std::vector<std::size_t> worst;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (!uses_pool(p.tasks[i].kind, pool) || s.tasks[i].all_cores) continue;
    const double t = s.tasks[i].start.value();
    if (duration(p, i, false).value() <= 0) continue;
    std::vector<std::size_t> active;
    for (std::size_t j = 0; j < p.size(); ++j) {
      if (!uses_pool(p.tasks[j].kind, pool) || s.tasks[j].all_cores || duration(p, j, false).value() <= 0)
        continue;
      const double b = s.tasks[j].start.value();
      const double e = b + duration(p, j, false).value();
      if (b <= t + eps && t < e - eps) active.push_back(j);
    }
    if (active.size() > worst.size()) worst = active;
  }
  if (worst.size() <= static_cast<std::size_t>(p.pool_size(pool))) return {};
  worst.resize(static_cast<std::size_t>(p.pool_size(pool)) + 1);
  return worst;
}

}  // namespace detail

/// The minimum-makespan schedule of a problem by ILP. Starts from the list schedule; skips the ILP when that
/// schedule meets a lower bound; adds core-capacity cuts while the solution oversubscribes a pool; at the
/// time limit returns the best schedule with its proven gap (status time_limit), never a silent guess.
inline schedule ilp_schedule(const problem& p, const ilp_options& options = {},
                             ilp_report* report = nullptr) {
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
  };
  ilp_report local;
  ilp_report& r = report != nullptr ? *report : local;
  r = {};

  schedule best = list_schedule(p);
  const bounds b = lower_bounds(p);
  // A better incumbent (when the plain list schedule is not already provably optimal) tightens the model.
  if (best.makespan.value() > b.best().value() * (1 + 1e-9)) best = improved_list_schedule(p);
  best.lower_bound = b.best();
  const double tolerance = 1e-9 * best.makespan.value();
  if (best.makespan.value() <= 0.0 ||
      (options.skip_when_bound_met && best.makespan.value() <= b.best().value() + tolerance)) {
    best.status = solve_status::optimal;
    best.lower_bound = best.makespan;
    r.skipped = true;
    r.solve_time = elapsed();
    return best;
  }

  detail::schedule_mip mip(p, best);
  r.ordering_pairs = mip.pairs();
  for (int round = 0;; ++round) {
    const seconds left = options.time_limit - elapsed();
    auto [candidate, bound] =
        left.value() > 0 ? mip.solve(options, left) : std::pair<schedule, double>{{}, 0.0};
    best.lower_bound = std::max(best.lower_bound, seconds{bound});
    if (candidate.tasks.empty()) break;  // no solution within the time left: keep the incumbent
    candidate.makespan = seconds{0.0};
    for (std::size_t i = 0; i < p.size(); ++i) {
      candidate.makespan = std::max(candidate.makespan,
                                    candidate.tasks[i].start + duration(p, i, candidate.tasks[i].all_cores));
    }
    std::vector<std::size_t> clique;
    for (int pool = 0; pool < pool_count && clique.empty(); ++pool)
      clique = detail::oversubscribed(p, candidate, pool);
    if (clique.empty()) {
      // The solver's numbers satisfy the rows only up to its tolerances (an "integer" 0.99999 relaxes a
      // big-M row a little). Rebuild the schedule exactly: the solver's modes, its order of start times,
      // each task at its earliest feasible start (which never starts a task later than the solver did).
      // The order: ready tasks by the solver's start time (precedence-feasible even where the solver's
      // starts of zero-length tasks are off by round-off).
      std::vector<bool> modes(p.size());
      std::vector<bool> placed(p.size(), false);
      std::vector<int> order;
      for (std::size_t i = 0; i < p.size(); ++i) modes[i] = candidate.tasks[i].all_cores;
      while (order.size() < p.size()) {
        std::size_t next = p.size();
        for (std::size_t i = 0; i < p.size(); ++i) {
          if (placed[i]) continue;
          bool ready = true;
          for (int q : p.tasks[i].preds) ready = ready && placed[static_cast<std::size_t>(q)];
          if (ready && (next == p.size() || candidate.tasks[i].start < candidate.tasks[next].start)) next = i;
        }
        placed[next] = true;
        order.push_back(static_cast<int>(next));
      }
      schedule exact = serial_schedule(p, order, modes);
      if (exact.makespan <= best.makespan) {
        best.tasks = exact.tasks;
        best.makespan = exact.makespan;
      }
      const bool proven = candidate.status == solve_status::optimal &&
                          best.makespan.value() <= candidate.makespan.value() * (1 + 1e-6) + 1e-300;
      if (proven) best.lower_bound = best.makespan;
      best.status = proven ? solve_status::optimal : solve_status::time_limit;
      break;
    }
    if (round >= options.max_cut_rounds) {
      best.status = solve_status::time_limit;
      break;
    }
    mip.add_capacity_cut(clique);
    ++r.cut_rounds;
  }
  if (best.status == solve_status::heuristic) best.status = solve_status::time_limit;
  best.lower_bound = std::min(best.lower_bound, best.makespan);
  r.variables = mip.variables();
  r.binaries = mip.binaries();
  r.rows = mip.rows();
  r.solve_time = elapsed();
  return best;
}

/// Branch-and-bound nodes per solve of the ILP as searches run it (search_ilp_options).
inline constexpr int search_node_budget = 200;

/// The ILP as phaze's searches run it, the default of ilp_scheduler and what `phaze plan`, `estimate` and
/// `search` run under `--solver ilp`: a budget of search_node_budget branch-and-bound nodes per solve
/// instead of a time budget, so results do not depend on the machine's speed or load (the same schedules
/// for any number of threads or processes); 60 s per solve only as a safety net. A solve stopped by the
/// budget keeps its best schedule and reports its gap. ilp_options{} alone (ilp_schedule's default) has no
/// node budget: it proves a single problem optimal within its time limit.
inline constexpr ilp_options search_ilp_options{.time_limit = seconds{60.0}, .max_nodes = search_node_budget};

/// The ILP as a Scheduler (sched/scheduler.hpp): `sched::schedule_cache exact{sched::ilp_scheduler{}}`
/// schedules as the command line's `--solver ilp` does (search_ilp_options).
struct ilp_scheduler {
  ilp_options options = search_ilp_options;
  [[nodiscard]] static constexpr std::string_view name() { return "ilp"; }
  [[nodiscard]] schedule solve(const problem& p) const { return ilp_schedule(p, options); }
};
static_assert(Scheduler<ilp_scheduler>);

/// Writes the ILP of a problem (built around its list schedule) in CPLEX LP text, for
/// `phaze schedule --emit-lp FILE`.
inline void write_ilp(const problem& p, const std::filesystem::path& path) {
  detail::schedule_mip mip(p, list_schedule(p));
  mip.write_lp(path);
}

}  // namespace phaze::sched
