/// @file
/// What a layer scheduler is (the `Scheduler` concept), the list scheduler as one, and `schedule_cache`, the
/// memoizing front every cost table, step estimate and search schedules layers through. The ILP scheduler
/// (sched/ilp.hpp) is the other one; only translation units that ask for it include Lemon and GLPK.
///
///     sched::schedule_cache fast;                              // list schedules
///     sched::schedule_cache ilp{sched::ilp_scheduler{}};       // ILP schedules, the searches' node budget
///                                                              // (include sched/ilp.hpp)
///     const sched::schedule s = ilp.solve(problem);
#pragma once

#include <algorithm>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "phaze/cluster/links.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/sched/bounds.hpp"
#include "phaze/sched/list_scheduler.hpp"
#include "phaze/sched/problem.hpp"

namespace phaze::sched {

namespace detail::concepts {
template <class S>
concept names_itself = requires(const S& s) {
  { s.name() } -> std::convertible_to<std::string_view>;
};
template <class S>
concept solves_problems = requires(const S& s, const problem& p) {
  { s.solve(p) } -> std::same_as<schedule>;
};
}  // namespace detail::concepts

/// A layer scheduler: a copyable value with `name()` (how reports and cache keys call it) and
/// `solve(problem) -> schedule` (a schedule that passes sched::check, its makespan, a lower bound and how
/// it was found). phaze ships `list_scheduler` and `ilp_scheduler`; `explain_scheduler<S>()` says which
/// requirement a type misses.
template <class S>
concept Scheduler =
    std::copy_constructible<S> && detail::concepts::names_itself<S> && detail::concepts::solves_problems<S>;

/// Stops compilation with one sentence naming the first requirement of Scheduler that `S` misses; true when
/// it meets them all. Entry points that take a scheduler call it in a static_assert.
template <class S>
consteval bool explain_scheduler() {
  if constexpr (!std::copy_constructible<S>) {
    static_assert(std::copy_constructible<S>,
                  "phaze::sched::Scheduler: the scheduler must be copyable (schedule caches keep a copy); "
                  "give it a copy constructor");
  } else if constexpr (!detail::concepts::names_itself<S>) {
    static_assert(detail::concepts::names_itself<S>,
                  "phaze::sched::Scheduler: 's.name()' is missing; add `std::string_view name() const` "
                  "returning a short name such as \"list\"");
  } else if constexpr (!detail::concepts::solves_problems<S>) {
    static_assert(detail::concepts::solves_problems<S>,
                  "phaze::sched::Scheduler: 's.solve(problem)' returning sched::schedule is missing; add "
                  "`sched::schedule solve(const sched::problem&) const`");
  }
  return Scheduler<S>;
}

/// The critical-path list scheduler (list_schedule) as a Scheduler: fast, feasible, optimal whenever it meets
/// the lower bound (sched/bounds.hpp), which it reports.
struct list_scheduler {
  [[nodiscard]] static constexpr std::string_view name() { return "list"; }
  [[nodiscard]] schedule solve(const problem& p) const {
    schedule s = list_schedule(p);
    s.lower_bound = std::min(s.makespan, lower_bounds(p).best());
    if (s.makespan.value() <= s.lower_bound.value() * (1.0 + 1e-9)) s.status = solve_status::optimal;
    return s;
  }
};
static_assert(Scheduler<list_scheduler>);

/// Not a scheduler of real schedules: the lower bound of a problem (critical path, work per pool; sched/
/// bounds.hpp) as its makespan, with no placements. Any schedule, the ILP's included, is at least this
/// long, so step times computed from it are lower bounds on the step times of any schedules: the search and
/// plan search rank and prune with them, and never report them.
struct bound_scheduler {
  [[nodiscard]] static constexpr std::string_view name() { return "bound"; }
  [[nodiscard]] schedule solve(const problem& p) const {
    schedule s;
    s.makespan = lower_bounds(p).best();
    s.lower_bound = s.makespan;
    s.status = solve_status::heuristic;  // a bound, not a schedule
    return s;
  }
};
static_assert(Scheduler<bound_scheduler>);

/// Any Scheduler behind one type, for code that chooses its scheduler at run time (search::options, the
/// command line). It is a Scheduler itself.
class any_scheduler {
 public:
  template <class S>
  any_scheduler(S s) {  // NOLINT(google-explicit-constructor): any Scheduler converts, as std::function does
    static_cast<void>(explain_scheduler<S>());  // reports what is missing, once
    if constexpr (Scheduler<S>) {
      name_ = std::string{s.name()};
      solve_ = [s = std::move(s)](const problem& p) { return s.solve(p); };
    }
  }
  [[nodiscard]] std::string_view name() const { return name_; }
  [[nodiscard]] schedule solve(const problem& p) const { return solve_(p); }

 private:
  std::string name_;
  std::function<schedule(const problem&)> solve_;
};
static_assert(Scheduler<any_scheduler>);

/// What the problem of one pass of a layer is built from (sched::layer_problem): the layer, the device and
/// the route of its tensor-parallel group. The device's HBM capacity and name are not part of it (no op's
/// cost reads them; they decide only which plans fit): designs that differ only in those share problems.
struct layer_pass {
  model::layer layer;
  hw::device device;  ///< with hbm 0 and no name
  cluster::route route;
  std::uint8_t part = 0;  ///< the pass: forward 0, backward 1, the forward share recomputed 2
};

/// `d` as a layer's costs see it: without its HBM capacity and name, which no op's cost reads (layer_pass).
inline hw::device costing_device(hw::device d) {
  d.hbm = bytes{0.0};
  d.name = {};
  return d;
}

/// One pass of a layer as a schedule_cache keeps it: its scheduling problem, what its tensor-parallel
/// collectives take one after another (the all-cores times of its network ops added in op order), and its
/// schedule once solved through the cache that keeps it (schedule_cache::solve of a pass).
struct pass_problem {
  problem tasks;
  seconds collectives{0.0};
  mutable const schedule* solved = nullptr;  ///< its schedule in the keeping cache's memo, once solved
  const void* owner = nullptr;               ///< the keeping cache's memo
};

/// Solved schedules by problem, so identical layers (and identical layer x core-configuration problems, from
/// any device with the same per-op costs) are solved once, by the scheduler the cache was made with, and the
/// problems of layer passes (problem_of) built once. Safe to share between threads (a thread asking for a
/// problem another is solving waits for it, so a scheduler must not wait on work of the caller's thread
/// pool); copies share the memo and the kept problems.
class schedule_cache {
 public:
  /// A cache of list schedules.
  schedule_cache() : schedule_cache(list_scheduler{}) {}
  /// A cache of the schedules `s` finds.
  template <class S>
  explicit schedule_cache(S s) : state_(std::make_shared<state>()) {
    static_cast<void>(explain_scheduler<S>());  // reports what is missing, once
    if constexpr (Scheduler<S>) {
      state_->name = std::string{s.name()};
      state_->solve = [s = std::move(s)](const problem& p) { return s.solve(p); };
    }
  }

  /// The schedule of `p`, solved on first request. A thread that asks for a problem another thread is
  /// solving waits for that schedule rather than solving it again.
  schedule solve(const problem& p) const { return kept(p); }

  /// The problem of one pass of layer `l` on device `d` whose tensor-parallel group takes route `tp`, made by
  /// `make` (sched::layer_problem) the first time it is asked for and kept: a layer timed again (another
  /// knob setting with the same layers, another design that differs only in HBM: layer_pass) is costed
  /// once. The reference lives as long as the cache.
  template <class Make>
  const pass_problem& problem_of(const model::layer& l, const hw::device& d, const cluster::route& tp,
                                 std::uint8_t part, Make&& make) const {
    const hw::device device = costing_device(d);
    const std::size_t hash = hash_of(l, device, tp, part);
    auto find = [&]() -> const pass_problem* {
      const auto [first, last] = state_->problems.equal_range(hash);
      for (auto it = first; it != last; ++it) {
        const layer_pass& k = it->second.first;
        if (k.part == part && k.route == tp && k.device == device && k.layer == l) return &it->second.second;
      }
      return nullptr;
    };
    {
      const std::lock_guard lock(state_->mutex);
      if (const pass_problem* kept = find()) return *kept;
    }
    pass_problem made = make();
    made.solved = nullptr;
    made.owner = state_.get();
    const std::lock_guard lock(state_->mutex);
    if (const pass_problem* kept = find()) return *kept;  // made meanwhile by another thread
    return state_->problems.emplace(hash, std::pair{layer_pass{l, device, tp, part}, std::move(made)})
        ->second.second;
  }

  /// The schedule of a pass the cache keeps (problem_of's), solved through the cache the first time and then
  /// kept with the pass: no key is built again. The reference lives as long as the cache.
  const schedule& solve(const pass_problem& p) const {
    if (p.owner != state_.get()) return kept(p.tasks);  // another cache's pass (or a copy): by problem
    {
      const std::lock_guard lock(state_->mutex);
      if (p.solved != nullptr) {
        ++state_->hits;
        seen_->worst_gap = std::max(seen_->worst_gap, p.solved->gap());
        return *p.solved;
      }
    }
    const schedule& s = kept(p.tasks);
    const std::lock_guard lock(state_->mutex);
    p.solved = &s;
    return s;
  }

  /// The largest relative gap (makespan - lower bound) / makespan of any schedule this cache (or a copy of
  /// it) has returned: 0 when every one is proven optimal. A plan timed through it is within this share of
  /// its optimal schedules.
  [[nodiscard]] double worst_gap() const {
    const std::lock_guard lock(state_->mutex);
    return seen_->worst_gap;
  }

  /// A cache that shares this one's solved schedules but counts worst_gap() afresh: time one plan through it
  /// to learn the gap of that plan's schedules alone.
  [[nodiscard]] schedule_cache tracked() const {
    schedule_cache out = *this;
    out.seen_ = std::make_shared<seen>();
    return out;
  }

  /// The scheduler's name ("list", "ilp", or a user scheduler's).
  [[nodiscard]] std::string_view scheduler() const { return state_->name; }
  [[nodiscard]] std::size_t hits() const {
    const std::lock_guard lock(state_->mutex);
    return state_->hits;
  }
  [[nodiscard]] std::size_t misses() const {
    const std::lock_guard lock(state_->mutex);
    return state_->misses;
  }

  /// The structural key of a problem: core counts, and per task its kind, both durations (bit-exact) and
  /// predecessors. Names do not matter.
  static std::string key_of(const problem& p) {
    std::string key;
    auto put = [&key](const void* data, std::size_t size) {
      key.append(static_cast<const char*>(data), size);
    };
    put(&p.tensor_cores, sizeof p.tensor_cores);
    put(&p.vector_cores, sizeof p.vector_cores);
    for (const task& t : p.tasks) {
      const double one = t.one_core.value();
      const double all = t.all_cores.value();
      put(&t.kind, sizeof t.kind);
      put(&one, sizeof one);
      put(&all, sizeof all);
      const auto preds = static_cast<std::uint32_t>(t.preds.size());
      put(&preds, sizeof preds);
      for (int q : t.preds) put(&q, sizeof q);
    }
    return key;
  }

  /// A hash of a layer pass from the fields that tell layers and designs apart most often; equality
  /// decides.
  static std::size_t hash_of(const model::layer& l, const hw::device& d, const cluster::route& tp,
                             std::uint8_t part) {
    std::size_t h = 1469598103934665603ULL;
    auto mix = [&h](auto v) { h = (h ^ std::hash<decltype(v)>{}(v)) * 1099511628211ULL; };
    mix(l.name.view());
    mix(l.shape.microbatch);
    mix(l.shape.sequence);
    mix(l.shape.tp);
    mix(l.shape.sequence_parallel);
    mix(l.ops.size());
    mix(part);
    mix(d.systolic.num_tc);
    mix(d.systolic.tc_width);
    mix(d.systolic.tc_depth);
    mix(d.systolic.num_vc);
    mix(d.systolic.glb.value());
    mix(d.hbm_bandwidth.value());
    mix(tp.hop.bandwidth.value());
    return h;
  }

 private:
  /// The memo's schedule of `p` (solve), solved on first request; the reference lives as long as the cache
  /// (the memo's entries never move).
  const schedule& kept(const problem& p) const {
    const std::string key = key_of(p);
    std::unique_lock lock(state_->mutex);
    while (true) {
      if (const auto it = state_->memo.find(key); it != state_->memo.end()) {
        ++state_->hits;
        seen_->worst_gap = std::max(seen_->worst_gap, it->second.gap());
        return it->second;
      }
      if (state_->solving.count(key) == 0) break;
      state_->solved.wait(lock);
    }
    // Whatever happens to this solve, the others waiting for the problem are woken (to solve it themselves
    // if it threw).
    struct release {
      const schedule_cache& cache;
      const std::string& key;
      ~release() {
        {
          const std::lock_guard again(cache.state_->mutex);
          cache.state_->solving.erase(key);
        }
        cache.state_->solved.notify_all();
      }
    };
    state_->solving.insert(key);
    lock.unlock();
    const release done{*this, key};
    schedule s = state_->solve(p);
    const std::lock_guard again(state_->mutex);
    ++state_->misses;
    seen_->worst_gap = std::max(seen_->worst_gap, s.gap());
    return state_->memo.emplace(key, std::move(s)).first->second;
  }

  struct state {
    std::string name;
    std::function<schedule(const problem&)> solve;
    std::mutex mutex;
    std::condition_variable solved;  ///< a problem being solved (in `solving`) is done
    std::unordered_set<std::string> solving;
    std::unordered_map<std::string, schedule> memo;
    std::unordered_multimap<std::size_t, std::pair<layer_pass, pass_problem>> problems;  ///< problem_of
    std::size_t hits = 0;
    std::size_t misses = 0;
  };
  /// What one handle (and its copies) has returned.
  struct seen {
    double worst_gap = 0.0;
  };
  std::shared_ptr<state> state_;
  std::shared_ptr<seen> seen_ = std::make_shared<seen>();
};

}  // namespace phaze::sched
