/// @file
/// One design of a co-search evaluated (docs/search.md): the options and hooks of a search, the sound bound
/// that orders and prunes designs, the best plan of one design over every knob setting (evaluate_design), its
/// refinement on the reported scheduler, the Pareto front, and the progress of a run. search/engine.hpp runs
/// a whole search on these; search/baselines.hpp places the baselines with them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/hw/area.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/hw/space.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/any_placer.hpp"
#include "phaze/place/chain_dp.hpp"
#include "phaze/place/model_placement.hpp"
#include "phaze/place/plan_search.hpp"
#include "phaze/sched/layer_problem.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/search/result.hpp"
#include "phaze/search/spec.hpp"
#include "phaze/train/step.hpp"

namespace phaze::search {

/// How a search runs.
struct options {
  bool exhaustive = false;  ///< evaluate every design (no pruning)
  std::size_t round = 64;   ///< designs per round (fixed, so results do not depend on parallelism)
  std::size_t top = 10;     ///< designs listed in summary::top
  bool baselines = true;    ///< run fills summary::baselines (search::baselines), as `phaze search` does
  /// Places each knob setting's layer tables (any place::Placer; the chain DP by default).
  place::model_placer placer = place::chain_placer{};
  /// Schedules each layer on each design (any sched::Scheduler; the list scheduler by default): it orders
  /// and prunes the designs.
  sched::any_scheduler scheduler = sched::list_scheduler{};
  /// When set (the program sets the ILP, sched::ilp_scheduler), the numbers reported (best, top list,
  /// Pareto front) come from this scheduler: every design that could be among them, by sound bounds, is
  /// placed again on its layer times (refine_design), so the top list and the front are exact under it.
  std::optional<sched::any_scheduler> refine;
  /// Seconds between recounts of progress::open (a pass over the designs not reached yet), when hooks::report
  /// is given.
  double recount_every_s = 0.5;
};

/// A sound upper bound on a design's throughput (samples/s): every device computing the iteration's model
/// FLOPs at its peak matrix rate, with no vector work, communication, bubble or recomputation. Every layer's
/// schedule takes at least its matrix FLOPs over the peak (cost::cost_of's physical limit), so no plan is
/// faster.
inline double throughput_bound(const spec& s, const hw::device& d) {
  const flops work = model::training_flops_per_iteration(model_of(s), s.global_batch);
  const double fastest = work.value() / (static_cast<double>(s.devices) * hw::peak_matrix_flops(d).value());
  return static_cast<double>(s.global_batch) / fastest * (1.0 + 1e-9);
}

/// Dynamic energy of one training sample on design `d` with the plan's knobs: every op of every layer
/// (forward, backward, recomputation) at the technology's energy per MAC, vector op and HBM byte (operands
/// and results counted once each from HBM: an upper estimate, the GLB reuse is not modelled here).
inline hw::energy energy_per_sample(const model::model& run, const hw::device& d, const train::parallelism& p,
                                    const train::training_knobs& k,
                                    const hw::technology& tech = hw::tsmc_n7) {
  const model::layer_shape shape = train::layer_shape_of(run, p, k);
  auto pass_energy = [&](const model::layer& l, bool with_backward, bool with_recompute) {
    double joules = 0.0;
    auto add = [&](const model::op& o) {
      const double f = model::flops_of(o).value();
      const auto u = model::unit_of(o);
      if (u == model::unit::tensor) joules += f / 2.0 * tech.mac_op.value();
      if (u == model::unit::vector) joules += f * tech.vector_op.value();
      if (u == model::unit::network) joules += model::bytes_read(o).value() * tech.link_byte.value();
      joules += (model::bytes_read(o).value() + model::bytes_written(o).value()) * tech.hbm_byte.value();
    };
    for (const auto& o : l.ops) add(o);
    if (with_recompute) {
      for (const auto& o : l.ops) add(o);
    }
    if (with_backward) {
      for (const auto& o : model::backward(l)) add(o);
    }
    return joules;
  };
  const bool full = k.recompute == model::recompute::full;
  double per_microbatch_rank = 0.0;
  for (const auto& kind : model::distinct_layers(run)) {
    // Full recomputation runs the blocks' forward pass again.
    const bool again = full && kind.role == model::layer_role::block;
    per_microbatch_rank +=
        static_cast<double>(kind.count) *
        pass_energy(model::layer_at(run, static_cast<std::size_t>(kind.first_node), shape), true, again);
  }
  (void)d;
  return hw::energy{per_microbatch_rank * static_cast<double>(p.tp) / static_cast<double>(k.microbatch)};
}

/// The knobs a spec does not search (global batch, precision, optimizer, schedule, distributed optimizer,
/// virtual stages); the planning service sets microbatch, recomputation and sequence parallelism.
inline train::training_knobs base_knobs(const spec& s) {
  return train::knobs_of(s.knobs, train::knob_setting{1, model::recompute::none, false}, s.global_batch);
}

/// What the planning service (place::search_plans) tries for a spec: its knob lists and widths, uneven
/// stages by the options' placer, the best plan only (`keep` 1), refined with the options' refining
/// scheduler when `refine`.
inline place::plan_choices plan_choices_of(const spec& s, const options& o, bool refine) {
  place::plan_choices choices;
  choices.placement = place::stage_placement::uneven;
  choices.placer = o.placer;
  choices.tensor_parallel.assign(s.knobs.tensor_parallel.begin(), s.knobs.tensor_parallel.end());
  for (const std::int64_t mb : s.knobs.microbatches)
    if (mb > 0 && s.global_batch % mb == 0) choices.microbatches.push_back(mb);
  choices.recompute.assign(s.knobs.recompute.begin(), s.knobs.recompute.end());
  choices.sequence_parallel.assign(s.knobs.sequence_parallel.begin(), s.knobs.sequence_parallel.end());
  choices.keep = 1;
  if (refine) choices.refine = o.refine;
  return choices;
}

/// Whether any knob setting, tensor-parallel width, pipeline depth and data-parallel degree can run the
/// spec's model on its cluster at all (widths as the space's base design admits them: every design of a
/// space shares its links). A spec that admits none is bad input, found before the search; one whose only
/// tensor-parallel width admits no knob setting throws place::no_admissible_configuration naming the rule.
inline bool any_admissible_plan(const spec& s) {
  const model::model run = model_of(s);
  const options o;
  const cluster::cluster c = cluster_of(s, s.space.base());
  const place::plan_choices choices = plan_choices_of(s, o, false);
  if (choices.microbatches.empty()) return false;
  for (const auto& item : place::detail::plan_items(run, c, base_knobs(s), choices)) {
    const int tp = item.parallel.tp;
    for (std::int64_t pp = 1; pp <= model::body_nodes(run); ++pp) {
      if (s.devices % (tp * pp) != 0) continue;
      const std::int64_t dp = s.devices / (tp * pp);
      if ((s.global_batch / item.knobs.microbatch) % dp == 0) return true;
    }
  }
  return false;
}

namespace detail {
/// A design's record before placement: index, device, area and the peak-rate bound.
inline design_result blank_result(const spec& s, const hw::device& d, std::uint64_t index) {
  design_result r;
  r.index = index;
  r.device = d;
  r.die_area = d.kind == hw::device_kind::systolic ? hw::area_of(d.systolic, s.space.tech()) : hw::area{0.0};
  r.upper_bound_samples_per_s = throughput_bound(s, d);
  return r;
}

/// A design's best plan by the planning service (place::search_plans with plan_choices_of), on layer
/// times from `cache`: its record, infeasible when no plan fits (or none is admissible).
inline design_result plan_design(const spec& s, const hw::device& d, std::uint64_t index, const options& o,
                                 bool refine, const sched::schedule_cache& cache,
                                 double refined_within_s = std::numeric_limits<double>::infinity(),
                                 const sched::schedule_cache* refined = nullptr) {
  const model::model run = model_of(s);
  design_result r = blank_result(s, d, index);
  const cluster::cluster c = cluster_of(s, d);
  place::plan_choices choices = plan_choices_of(s, o, refine);
  choices.refined_within_s = refined_within_s;
  if (refined != nullptr) choices.refine_cache = *refined;
  place::plan_search_result found;
  try {
    found = place::search_plans(run, c, base_knobs(s), choices, cache);
  } catch (const place::no_admissible_configuration&) {
    r.status = outcome::infeasible;  // no width, depth and microbatch divide the devices and the batch
    return r;
  }
  r.configurations = found.evaluated;
  // A first-pass design reports every schedule it priced (the refinement's bound: how much better schedules
  // could speed any of its settings up); a refined one its own plan's (below).
  r.schedule_gap = found.worst_gap;
  if (found.feasible.empty()) {
    r.status = outcome::infeasible;
    r.smallest_memory_need = found.smallest_infeasible_need;
    return r;
  }
  const place::ranked_plan& best = found.feasible.front();
  r.status = outcome::evaluated;
  r.parallel = {best.parallel.tp, best.parallel.pp, best.parallel.dp};
  r.knobs = best.knobs;
  r.split = best.split;
  r.estimate = best.estimate;
  r.scheduler = best.scheduler;
  if (refine) r.schedule_gap = best.schedule_gap;
  r.samples_per_s = r.estimate.samples_per_s;
  r.energy_per_sample = energy_per_sample(run, r.device, r.parallel, r.knobs, s.space.tech());
  return r;
}
}  // namespace detail

/// The best plan of one design over every knob setting of the spec, by the planning service
/// (place::search_plans): for each (tensor-parallel width, microbatch, recomputation, sequence parallelism)
/// the options' placer (the chain DP) places the model under step_policy over every pipeline depth and
/// data-parallel degree using all devices, cut off at the best time found so far, on layer times from the
/// options' scheduler. `configurations` counts the (width, knob setting) pairs placed; `schedule_gap` is the
/// largest gap of the schedules used (list schedules: how far the ILP could improve a layer at most).
inline design_result evaluate_design(const spec& s, const hw::device& d, std::uint64_t index,
                                     const options& o = {}) {
  return detail::plan_design(s, d, index, o, false, sched::schedule_cache{o.scheduler});
}

/// evaluate_design with layer schedules from `cache` (made with the options' scheduler): a cache shared by
/// several designs solves each schedule they have in common once (shared_schedules).
inline design_result evaluate_design(const spec& s, const hw::device& d, std::uint64_t index,
                                     const options& o, const sched::schedule_cache& cache) {
  return detail::plan_design(s, d, index, o, false, cache);
}

/// Schedule caches shared by the designs of a search that differ only in their HBM capacity: every layer
/// of such designs is the same scheduling problem (no op's cost reads the capacity, which decides only
/// which plans fit, train/memory.hpp), so one design's schedules serve its siblings. A schedule cache is
/// keyed by the problem itself (sched::schedule_cache::key_of), so a cache shared by any designs gives the
/// same schedules as a cache of each one's own; grouping by design only keeps each cache small.
/// Thread-safe; the engine keeps one per round of designs.
class shared_schedules {
 public:
  explicit shared_schedules(sched::any_scheduler scheduler) : scheduler_(std::move(scheduler)) {}

  /// The cache of design `d` and of every design that differs from it in HBM capacity alone.
  [[nodiscard]] sched::schedule_cache of(const hw::device& d) {
    const hw::device key = sched::costing_device(d);
    const std::lock_guard lock(mutex_);
    for (const auto& [k, cache] : caches_)
      if (k == key) return cache;
    caches_.emplace_back(key, sched::schedule_cache{scheduler_});
    return caches_.back().second;
  }

 private:
  sched::any_scheduler scheduler_;
  std::mutex mutex_;
  std::vector<std::pair<hw::device, sched::schedule_cache>> caches_;
};

/// The best plan of one design with layer times from `refined` (the ILP): exact over the knob settings
/// without refining most of them. The planning service places each knob setting and tensor-parallel width
/// on lower-bound layer times (sched::bound_scheduler), which no schedule beats, and refines them in the
/// order of those bounds until no bound is faster than the best refined plan. `schedule_gap` is the gap of
/// the chosen plan's refined schedules (0 when all are proven optimal). `listed`, when given, is the
/// design's record on the options' scheduler (the first pass): its best time, which the refined plan
/// reaches (the refining scheduler never does worse), cuts the lower-bound placements off
/// (place::plan_choices::refined_within_s): the same plan, found with fewer placements. `cache`, when
/// given, holds the refined schedules (made with `refined`; shared_schedules shares it among designs).
inline design_result refine_design(const spec& s, const hw::device& d, std::uint64_t index, const options& o,
                                   const sched::any_scheduler& refined, const design_result* listed = nullptr,
                                   const sched::schedule_cache* cache = nullptr) {
  options with = o;
  with.refine = refined;
  double within = std::numeric_limits<double>::infinity();
  if (listed != nullptr && listed->status == outcome::evaluated && listed->samples_per_s > 0) {
    // A little above the listed time: the refined best plan is no slower, so its bound is below this.
    within = static_cast<double>(s.global_batch) / listed->samples_per_s * (1.0 + 1e-6);
  }
  design_result r =
      detail::plan_design(s, d, index, with, true, sched::schedule_cache{o.scheduler}, within, cache);
  // A refining scheduler worse than the first (a user's) may leave no plan below the listed time: then the
  // design is refined without the cutoff.
  if (within < std::numeric_limits<double>::infinity() &&
      (r.status != outcome::evaluated || !(r.samples_per_s * within > static_cast<double>(s.global_batch))))
    r = detail::plan_design(s, d, index, with, true, sched::schedule_cache{o.scheduler},
                            std::numeric_limits<double>::infinity(), cache);
  return r;
}

/// A design's best plan as the search reports it: refined with `o.refine` when the options set it.
inline design_result evaluate_reported(const spec& s, const hw::device& d, std::uint64_t index,
                                       const options& o) {
  return o.refine ? refine_design(s, d, index, o, *o.refine) : evaluate_design(s, d, index, o);
}

/// Recomputes a design's estimate from its plan: results.jsonl (resume, MPI) carries plans and throughputs,
/// not estimates; search::run restores them for the designs its summary reports.
inline void restore_estimate(const spec& s, design_result& r, const options& o = {}) {
  if (r.status != outcome::evaluated) return;
  const bool refined = o.refine && r.scheduler == o.refine->name();
  const sched::schedule_cache cache{refined ? *o.refine : o.scheduler};
  const model::model run = model_of(s);
  r.estimate = train::estimate_step(run, cluster_of(s, r.device), r.parallel, r.knobs, cache, r.split);
  r.samples_per_s = r.estimate.samples_per_s;
  r.energy_per_sample = energy_per_sample(run, r.device, r.parallel, r.knobs, s.space.tech());
}

/// Checks a record read back from results.jsonl (resume) against what its design and plan give: the die
/// area and the throughput bound are recomputed, a plan scheduled with `o.scheduler` (the first pass's) is
/// timed again and must give the recorded throughput and energy, and a refined one must stay within the
/// bound. Throws input_error saying which number disagrees; a record that passes is as good as one this run
/// computed (an edited or stale line cannot change the answer).
inline void verify_record(const spec& s, const design_result& r, const options& o = {}) {
  auto close = [](double a, double b) {
    return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
  };
  auto fail = [](const std::string& what) {
    throw input_error(what + "; the record does not match its design");
  };
  if (r.device.kind == hw::device_kind::systolic &&
      !close(r.die_area.value(), hw::area_of(r.device.systolic, s.space.tech()).value())) {
    fail("area_mm2 " + std::to_string(r.die_area.value()) + " is not the design's area " +
         std::to_string(hw::area_of(r.device.systolic, s.space.tech()).value()));
  }
  const double bound = throughput_bound(s, r.device);
  if (!(r.upper_bound_samples_per_s > 0.0 && r.upper_bound_samples_per_s <= bound)) {
    fail("upper_bound_samples_per_s " + std::to_string(r.upper_bound_samples_per_s) + " is not in (0, " +
         std::to_string(bound) + "], the design's peak-compute bound");
  }
  if (r.status == outcome::infeasible &&
      !(r.smallest_memory_need.value() > 0.0 && std::isfinite(r.smallest_memory_need.value()))) {
    fail("smallest_memory_need_bytes must be a positive number");
  }
  if (r.status != outcome::evaluated) return;
  if (!(r.samples_per_s > 0.0 && r.samples_per_s <= r.upper_bound_samples_per_s)) {
    fail("throughput_samples_per_s " + std::to_string(r.samples_per_s) + " is not in (0, " +
         std::to_string(r.upper_bound_samples_per_s) + "], the design's bound");
  }
  if (r.scheduler != o.scheduler.name()) return;  // refined: the ILP is not cheap to run again
  design_result again = r;
  again.estimate = {};
  restore_estimate(s, again, o);
  if (!close(again.samples_per_s, r.samples_per_s)) {
    fail("throughput_samples_per_s " + std::to_string(r.samples_per_s) + " is not what its plan gives (" +
         std::to_string(again.samples_per_s) + ")");
  }
  if (!close(again.energy_per_sample.value(), r.energy_per_sample.value())) {
    fail("energy_per_sample_j " + std::to_string(r.energy_per_sample.value()) +
         " is not what its plan gives (" + std::to_string(again.energy_per_sample.value()) + ")");
  }
}

/// Whether `a` ranks before `b`: higher throughput, then lower index.
inline bool ranks_before(const design_result& a, const design_result& b) {
  if (a.samples_per_s != b.samples_per_s) return a.samples_per_s > b.samples_per_s;
  return a.index < b.index;
}

/// The Pareto front of throughput against die area over evaluated designs: ascending area, each strictly
/// faster than every design of no larger area (ties in area: the faster, then the lower index).
inline std::vector<design_result> pareto_front(std::vector<design_result> designs) {
  designs.erase(std::remove_if(designs.begin(), designs.end(),
                               [](const design_result& r) { return r.status != outcome::evaluated; }),
                designs.end());
  std::sort(designs.begin(), designs.end(), [](const design_result& a, const design_result& b) {
    if (a.die_area != b.die_area) return a.die_area < b.die_area;
    return ranks_before(a, b);
  });
  std::vector<design_result> front;
  for (auto& r : designs) {
    if (front.empty() || r.samples_per_s > front.back().samples_per_s) front.push_back(std::move(r));
  }
  return front;
}

/// The pruning test of a round: the front so far, as (area, best throughput at no larger area) steps.
class front_bound {
 public:
  void add(const design_result& r) {
    if (r.status == outcome::evaluated) points_.emplace_back(r.die_area.value(), r.samples_per_s);
    sorted_ = false;
  }
  /// Whether a design of this area and throughput bound cannot reach the front.
  [[nodiscard]] bool dominates(double area, double bound) {
    if (!sorted_) rebuild();
    auto it = std::upper_bound(steps_.begin(), steps_.end(), area,
                               [](double a, const std::pair<double, double>& p) { return a < p.first; });
    if (it == steps_.begin()) return false;
    return std::prev(it)->second > bound;
  }

 private:
  void rebuild() {
    std::sort(points_.begin(), points_.end());
    steps_.clear();
    double best = -1.0;
    for (const auto& [area, throughput] : points_) {
      best = std::max(best, throughput);
      steps_.emplace_back(area, best);
    }
    sorted_ = true;
  }
  std::vector<std::pair<double, double>> points_;
  std::vector<std::pair<double, double>> steps_;
  bool sorted_ = true;
};

/// Progress of a running search: of its first pass over the designs, then (`refining`) of the refinement.
struct progress {
  std::uint64_t done = 0;   ///< designs finished (evaluated, pruned or infeasible), resumed ones included
  std::uint64_t total = 0;  ///< designs in the space
  std::uint64_t configurations = 0;
  double seconds = 0.0;      ///< since this pass began
  std::uint64_t placed = 0;  ///< designs this run evaluated in this pass (not the resumed or pruned ones)
  /// At most this many designs are still to be evaluated in this pass. First pass: the designs not reached
  /// yet that the pruning test with the front and the top list found so far does not rule out (both only
  /// improve, so a design ruled out now is pruned when its round comes), recounted every
  /// options::recount_every_s. Refinement: the designs that could still be reported and are not refined yet.
  std::uint64_t open = 0;
  /// The refinement (options::refine): `done` and `placed` count the designs placed again.
  bool refining = false;
};

/// The designs of a search order not reached yet that a pruning test does not rule out: for the progress's
/// `open`. A test that only rules out more as the search goes on lets a design be dropped for good.
class open_designs {
 public:
  /// Every position of `order` whose design is not `known` (resumed), with its die area.
  open_designs(const spec& s, const std::vector<std::pair<std::uint64_t, double>>& order,
               const std::vector<std::optional<design_result>>& known) {
    std::vector<double> area_of_index;
    area_of_index.reserve(order.size());
    for (const hw::device& d : s.space)
      area_of_index.push_back(hw::area_of(d.systolic, s.space.tech()).value());
    for (std::size_t j = 0; j < order.size(); ++j) {
      const auto [index, bound] = order[j];
      if (!known[index]) open_.push_back({j, area_of_index[index], bound});
    }
  }
  /// The open designs at positions from `reached` on. With `recount`, first drops those `ruled_out(area,
  /// bound)` rules out (every position before `reached` is dropped too).
  template <class RuledOut>
  std::uint64_t count(std::size_t reached, bool recount, RuledOut ruled_out) {
    if (recount) {
      std::erase_if(open_,
                    [&](const entry& e) { return e.position < reached || ruled_out(e.area, e.bound); });
    }
    const auto first = std::lower_bound(open_.begin(), open_.end(), reached,
                                        [](const entry& e, std::size_t j) { return e.position < j; });
    return static_cast<std::uint64_t>(open_.end() - first);
  }

 private:
  struct entry {
    std::size_t position = 0;
    double area = 0.0;
    double bound = 0.0;
  };
  std::vector<entry> open_;
};

/// Hooks a caller gives the engine. `map(items, evaluate)` evaluates a round (`evaluate(i)` for every item
/// position i, in any order or in parallel; returns the results in item order): serial by default; a thread
/// pool, or an MPI all-gather of each rank's share, in the app. `finished(r)` sees every design as it
/// completes (results.jsonl); `report(p)` after every round.
struct hooks {
  std::function<std::vector<design_result>(std::size_t, const std::function<design_result(std::size_t)>&)>
      map;
  /// Like `map`, for evaluations that are not records of results.jsonl (the refinement's bounds, the
  /// baselines): nothing is written. Serial when not given.
  std::function<std::vector<design_result>(std::size_t, const std::function<design_result(std::size_t)>&)>
      exchange;
  std::function<void(const design_result&)> finished;
  std::function<void(const progress&)> report;
};

/// Serial map: evaluate(0), evaluate(1), ...
inline std::vector<design_result> serial_map(std::size_t n,
                                             const std::function<design_result(std::size_t)>& f) {
  std::vector<design_result> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(f(i));
  return out;
}

/// The design order of a space: highest throughput bound first, then enumeration index.
inline std::vector<std::pair<std::uint64_t, double>> design_order(const spec& s) {
  std::vector<std::pair<std::uint64_t, double>> order;
  std::uint64_t i = 0;
  for (const hw::device& d : s.space) order.emplace_back(i++, throughput_bound(s, d));
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return order;
}

/// The evaluated designs (positions in `all`) that could be among the `top` best or on the Pareto front once
/// refined by a scheduler whose schedules are no longer than the list scheduler's and no shorter than the
/// lower bound. A design's step times on such schedules shrink at most by 1 / (1 - schedule_gap) (every
/// layer time by at most that factor, and the step time is linear in layer times with non-negative extra
/// terms), so its refined throughput is at most samples_per_s / (1 - schedule_gap), and at most its
/// peak-rate bound; a refined throughput never drops below the list one. A design is left out when that
/// bound is below the top-th list throughput and below the best list throughput of another design with no
/// larger area: refining can then neither lift it into the top list nor onto the front. Exact when the
/// placer is exact (chain_dp, downset_dp).
inline std::vector<std::size_t> refinement_candidates(const std::vector<design_result>& all,
                                                      std::size_t top) {
  std::vector<std::size_t> evaluated;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].status == outcome::evaluated) evaluated.push_back(i);
  // The top-th list throughput.
  std::vector<double> speeds;
  for (const std::size_t i : evaluated) speeds.push_back(all[i].samples_per_s);
  std::sort(speeds.begin(), speeds.end(), std::greater<>());
  const double top_th = top > 0 && speeds.size() >= top ? speeds[top - 1] : 0.0;
  // The best list throughput of another design with no larger area: designs by area, the best before each
  // area group and the two best inside it.
  std::sort(evaluated.begin(), evaluated.end(),
            [&](std::size_t a, std::size_t b) { return all[a].die_area < all[b].die_area; });
  std::vector<std::size_t> out;
  double before = 0.0;  // best of strictly smaller areas
  for (std::size_t g = 0; g < evaluated.size();) {
    std::size_t end = g;
    double first = 0.0, second = 0.0;
    while (end < evaluated.size() && all[evaluated[end]].die_area == all[evaluated[g]].die_area) {
      const double x = all[evaluated[end]].samples_per_s;
      if (x > first) {
        second = first;
        first = x;
      } else if (x > second) {
        second = x;
      }
      ++end;
    }
    for (std::size_t k = g; k < end; ++k) {
      const design_result& r = all[evaluated[k]];
      const double others = std::max(before, r.samples_per_s == first ? second : first);
      const double gap = std::min(r.schedule_gap, 1.0 - 1e-12);
      const double bound =
          std::min(r.upper_bound_samples_per_s, r.samples_per_s / (1.0 - gap)) * (1.0 + 1e-9);
      if (bound >= std::min(top_th, others)) out.push_back(evaluated[k]);
    }
    before = std::max(before, first);
    g = end;
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Refines, in `all`, the designs that could be reported (refinement_candidates) with `o.refine`, through
/// the hooks' map (threads, processes) and `finished` (results.jsonl); designs whose list schedules are all
/// proven optimal already have the refined numbers and are only relabelled. Returns how many were placed
/// again.
inline std::uint64_t refine(const spec& s, const options& o, const hooks& h, std::vector<design_result>& all,
                            const std::vector<std::optional<design_result>>& known) {
  const std::string name{o.refine->name()};
  const auto map = h.map ? h.map : serial_map;
  const auto exchange = h.exchange ? h.exchange : serial_map;
  // First, a tighter bound for the designs the cheap bound keeps: each design placed on lower-bound layer
  // times (sched::bound_scheduler), no faster than any schedule lets it be. Its throughput replaces the
  // peak-rate bound where it is lower.
  std::vector<std::size_t> loose;
  for (const std::size_t i : refinement_candidates(all, o.top)) {
    if (!known[all[i].index] && all[i].schedule_gap > 0.0) loose.push_back(i);
  }
  options bounding = o;
  bounding.scheduler = sched::bound_scheduler{};
  const auto bounds = exchange(loose.size(), [&](std::size_t t) {
    design_result b = all[loose[t]];
    b.upper_bound_samples_per_s =
        evaluate_design(s, b.device, b.index, bounding).samples_per_s * (1.0 + 1e-9);
    return b;
  });
  for (std::size_t t = 0; t < loose.size(); ++t) {
    design_result& r = all[loose[t]];
    r.upper_bound_samples_per_s = std::min(r.upper_bound_samples_per_s, bounds[t].upper_bound_samples_per_s);
  }
  // Then the designs that could still be reported, placed again on refined schedules, the most promising
  // first, in rounds of o.round: refined throughputs only rise, so every round may rule out more of the rest
  // (the same rounds for any number of threads or processes).
  std::vector<bool> refined(all.size(), false);
  std::uint64_t placed = 0;
  // Designs that differ only in HBM solve each refined schedule once, whichever round they are in.
  shared_schedules refined_schedules{*o.refine};
  const auto start = std::chrono::steady_clock::now();
  auto report = [&](std::size_t left) {
    if (!h.report) return;
    progress p;
    p.refining = true;
    p.done = p.placed = placed;
    p.open = left;
    p.total = placed + left;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    h.report(p);
  };
  while (true) {
    std::vector<std::size_t> todo;
    for (const std::size_t i : refinement_candidates(all, o.top)) {
      if (refined[i]) continue;
      design_result& r = all[i];
      if (known[r.index]) {
        r = *known[r.index];
        refined[i] = true;
      } else if (r.schedule_gap == 0.0) {
        r.scheduler = name;  // the refined scheduler returns these very schedules (they meet the bound)
        refined[i] = true;
      } else {
        todo.push_back(i);
      }
    }
    // Refined throughputs only rise, so the designs that could still be reported only become fewer: at most
    // todo.size() more are placed again.
    report(todo.size());
    if (todo.empty()) break;
    std::stable_sort(todo.begin(), todo.end(), [&](std::size_t a, std::size_t b) {
      return all[a].upper_bound_samples_per_s > all[b].upper_bound_samples_per_s;
    });
    todo.resize(std::min(todo.size(), std::max<std::size_t>(o.round, 1)));
    const auto results = map(todo.size(), [&](std::size_t t) {
      const design_result& listed = all[todo[t]];
      const sched::schedule_cache cache = refined_schedules.of(listed.device);
      design_result r = refine_design(s, listed.device, listed.index, o, *o.refine, &listed, &cache);
      r.upper_bound_samples_per_s = listed.upper_bound_samples_per_s;
      if (h.finished) h.finished(r);
      return r;
    });
    for (std::size_t t = 0; t < todo.size(); ++t) {
      all[todo[t]] = results[t];
      refined[todo[t]] = true;
    }
    placed += todo.size();
  }
  return placed;
}

}  // namespace phaze::search
