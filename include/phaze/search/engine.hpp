/// @file
/// The co-search engine (docs/search.md): every accelerator design of a space x every knob setting x the
/// placement of the model on a cluster of that design, the best plan per design, the overall best, the
/// Pareto front of throughput against die area, and the baselines.
///
/// Exact by default: a design is skipped only when a sound upper bound on its throughput (its peak matrix
/// rate on every device running the model's training FLOPs, nothing else) is below the throughput of a design
/// already evaluated with no larger area and below the top-th best throughput found; such a design can be
/// neither the best, nor on the front, nor among the top designs. Designs go
/// in a fixed order (highest bound first) in fixed-size rounds, and a round prunes only with the rounds
/// before it, so which designs are evaluated, and every result, is the same for any number of threads or
/// processes and after any resume.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
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
  bool baselines = true;    ///< evaluate the baselines too
  /// Places each knob setting's layer tables (any place::Placer; the chain DP by default).
  place::model_placer placer = place::chain_placer{};
  /// Schedules each layer on each design (any sched::Scheduler; the list scheduler by default).
  sched::any_scheduler scheduler = sched::list_scheduler{};
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
  per_microbatch_rank +=
      pass_energy(model::make_layer(run.config, model::layer_role::embedding, shape), true, false);
  per_microbatch_rank +=
      static_cast<double>(run.config.layers) *
      pass_energy(model::make_layer(run.config, model::layer_role::block, shape), true, full);
  per_microbatch_rank +=
      pass_energy(model::make_layer(run.config, model::layer_role::head, shape), true, false);
  (void)d;
  return hw::energy{per_microbatch_rank * static_cast<double>(p.tp) / static_cast<double>(k.microbatch)};
}

namespace detail {
/// The widths tried on a design: the admissible ones, restricted to the spec's list when it gives one.
inline std::vector<int> widths_for(const spec& s, const model::model& run, const cluster::cluster& c) {
  std::vector<int> out;
  for (const int tp : place::admissible_widths(run, c)) {
    if (s.knobs.tensor_parallel.empty() ||
        std::find(s.knobs.tensor_parallel.begin(), s.knobs.tensor_parallel.end(), tp) !=
            s.knobs.tensor_parallel.end()) {
      out.push_back(tp);
    }
  }
  return out;
}
}  // namespace detail

/// Whether any knob setting, tensor-parallel width, pipeline depth and data-parallel degree can run the
/// spec's model on its cluster at all (widths as the space's base design admits them: every design of a
/// space shares its links). A spec that admits none is bad input, found before the search.
inline bool any_admissible_plan(const spec& s) {
  const model::model run = model_of(s);
  for (const std::int64_t mb : s.knobs.microbatches) {
    if (mb < 1 || s.global_batch % mb != 0) continue;
    for (const bool sp : s.knobs.sequence_parallel) {
      for (const int tp : detail::widths_for(s, run, cluster_of(s, s.space.base()))) {
        if (sp && tp == 1) continue;
        train::training_knobs k;
        k.global_batch = s.global_batch;
        k.microbatch = mb;
        k.sequence_parallel = sp;
        try {
          train::validate(run, train::parallelism{tp, 1, 1}, k, tp);
        } catch (const input_error&) {
          continue;
        }
        for (std::int64_t pp = 1; pp <= run.config.layers; ++pp) {
          if (s.devices % (tp * pp) != 0) continue;
          const std::int64_t dp = s.devices / (tp * pp);
          if ((s.global_batch / mb) % dp == 0) return true;
        }
      }
    }
  }
  return false;
}

/// The best plan of one design over every knob setting of the spec: for each (microbatch, recomputation,
/// sequence parallelism) chain_dp places the model under step_policy over every width, pipeline depth and
/// data-parallel degree using all devices, with the best time found so far as its cutoff. `configurations`
/// counts the knob settings placed.
inline design_result evaluate_design(const spec& s, const hw::device& d, std::uint64_t index,
                                     const options& o = {}) {
  const model::model run = model_of(s);
  design_result r;
  r.index = index;
  r.device = d;
  r.die_area = d.kind == hw::device_kind::systolic ? hw::area_of(d.systolic, s.space.tech()) : hw::area{0.0};
  r.upper_bound_samples_per_s = throughput_bound(s, d);
  const cluster::cluster c = cluster_of(s, d);
  const std::vector<int> all_widths = detail::widths_for(s, run, c);
  sched::schedule_cache cache{o.scheduler};
  double best = std::numeric_limits<double>::infinity();
  double smallest_need = std::numeric_limits<double>::infinity();
  std::optional<place::model_placement> chosen;
  train::training_knobs chosen_knobs;
  for (const std::int64_t mb : s.knobs.microbatches) {
    if (s.global_batch % mb != 0) continue;
    for (const model::recompute mode : s.knobs.recompute) {
      for (const bool sp : s.knobs.sequence_parallel) {
        train::training_knobs k;
        k.global_batch = s.global_batch;
        k.microbatch = mb;
        k.sequence = 0;  // run already has the spec's sequence
        k.precision = s.knobs.precision;
        k.opt = s.knobs.opt;
        k.recompute = mode;
        k.sequence_parallel = sp;
        k.schedule = s.knobs.schedule;
        k.distributed_optimizer = s.knobs.distributed_optimizer;
        std::vector<int> widths;
        for (const int tp : all_widths) {
          if (sp && tp == 1) continue;  // sequence parallelism is a no-op without tensor parallelism
          try {
            train::validate(run, train::parallelism{tp, 1, 1}, k, tp);
          } catch (const input_error&) {
            continue;
          }
          widths.push_back(tp);
        }
        if (widths.empty()) continue;
        const place::model_problem mp = place::model_tables(run, c, k, widths, cache);
        place::placement_request request;
        request.max_pp = static_cast<int>(run.config.layers);
        request.use_all_devices = true;
        request.cutoff_s = best;
        place::plan found;
        try {
          found = o.placer.place(mp.problem, mp.policy, request);
        } catch (const place::no_admissible_configuration&) {
          continue;  // no (tp, pp, dp) uses every device with this batch
        }
        ++r.configurations;
        if (!found.feasible) {
          if (!found.above_cutoff)
            smallest_need = std::min(smallest_need, found.smallest_memory_need.value());
          continue;
        }
        best = found.time_per_batch.value();
        place::model_placement m;
        m.placed = found;
        m.parallel = {found.tp, found.pp, found.dp};
        m.split = place::stage_split(found, mp.problem.tables.front().nodes.size());
        chosen = std::move(m);
        chosen_knobs = k;
      }
    }
  }
  if (!chosen) {
    r.status = outcome::infeasible;
    r.smallest_memory_need =
        bytes{smallest_need < std::numeric_limits<double>::infinity() ? smallest_need : 0.0};
    return r;
  }
  r.status = outcome::evaluated;
  r.parallel = chosen->parallel;
  r.knobs = chosen_knobs;
  r.split = chosen->split;
  r.estimate = train::estimate_step(run, c, r.parallel, r.knobs, cache, r.split);
  r.samples_per_s = r.estimate.samples_per_s;
  r.energy_per_sample = energy_per_sample(run, d, r.parallel, r.knobs, s.space.tech());
  return r;
}

/// Recomputes a design's estimate from its plan: results.jsonl (resume, MPI) carries plans and throughputs,
/// not estimates; search::run restores them for the designs its summary reports.
inline void restore_estimate(const spec& s, design_result& r, const options& o = {}) {
  if (r.status != outcome::evaluated) return;
  sched::schedule_cache cache{o.scheduler};
  const model::model run = model_of(s);
  r.estimate = train::estimate_step(run, cluster_of(s, r.device), r.parallel, r.knobs, cache, r.split);
  r.samples_per_s = r.estimate.samples_per_s;
  r.energy_per_sample = energy_per_sample(run, r.device, r.parallel, r.knobs, s.space.tech());
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

/// Progress of a running search.
struct progress {
  std::uint64_t done = 0;   ///< designs finished (evaluated, pruned or infeasible), resumed ones included
  std::uint64_t total = 0;  ///< designs in the space
  std::uint64_t configurations = 0;
  double seconds = 0.0;
};

/// Hooks a caller gives the engine. `map(items, evaluate)` evaluates a round (`evaluate(i)` for every item
/// position i, in any order or in parallel; returns the results in item order): serial by default; a thread
/// pool, or an MPI all-gather of each rank's share, in the app. `finished(r)` sees every design as it
/// completes (results.jsonl); `report(p)` after every round.
struct hooks {
  std::function<std::vector<design_result>(std::size_t, const std::function<design_result(std::size_t)>&)>
      map;
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

/// Runs the search. `resumed` holds designs already finished by an earlier run of the same spec (by index);
/// they are not evaluated again. Throws input_error for a bad spec.
inline summary run(const spec& s, const options& o, const hooks& h = {},
                   const std::vector<design_result>& resumed = {}) {
  validate(s);
  if (!any_admissible_plan(s)) {
    throw input_error(
        "no admissible plan: no tensor-parallel width (dividing the heads and MLP, within a node), pipeline "
        "depth and data-parallel degree use the " +
        std::to_string(s.devices) + " devices with a microbatch that divides the global batch " +
        std::to_string(s.global_batch) + "; check --devices, --global-batch, --tp and --microbatches");
  }
  const auto start = std::chrono::steady_clock::now();
  const auto order = design_order(s);
  std::vector<std::optional<design_result>> known(order.size());
  for (const auto& r : resumed) {
    if (r.index < known.size()) known[r.index] = r;
  }
  const auto map = h.map ? h.map : serial_map;
  summary out;
  out.model = std::string{s.model.config.name.view()};
  out.devices = s.devices;
  out.global_batch = s.global_batch;
  out.sequence = model_of(s).config.sequence;
  out.designs = order.size();
  std::vector<design_result> all;
  all.reserve(order.size());
  front_bound front;
  // Throughputs of the designs evaluated in earlier rounds, best first, at most `top`: a design may also be
  // skipped only when its bound is below the top-th of them, so the top list is exact too.
  std::vector<double> leaders;
  progress p;
  p.total = order.size();
  for (std::size_t first = 0; first < order.size(); first += o.round) {
    const std::size_t last = std::min(order.size(), first + o.round);
    // Decide the round's work with the front of earlier rounds only.
    std::vector<design_result> round(last - first);
    std::vector<std::size_t> todo;
    for (std::size_t j = first; j < last; ++j) {
      const auto [index, bound] = order[j];
      if (known[index]) {
        round[j - first] = *known[index];
        continue;
      }
      const hw::device d = s.space.at(index);
      const double area = hw::area_of(d.systolic, s.space.tech()).value();
      const bool below_top = o.top == 0 || (leaders.size() >= o.top && leaders.back() > bound);
      if (!o.exhaustive && below_top && front.dominates(area, bound)) {
        design_result r;
        r.index = index;
        r.device = d;
        r.die_area = hw::area{area};
        r.status = outcome::pruned;
        r.upper_bound_samples_per_s = bound;
        round[j - first] = r;
        if (h.finished) h.finished(r);
        continue;
      }
      todo.push_back(j);
    }
    const auto results = map(todo.size(), [&](std::size_t t) {
      const std::uint64_t index = order[todo[t]].first;
      design_result r = evaluate_design(s, s.space.at(index), index, o);
      if (h.finished) h.finished(r);
      return r;
    });
    for (std::size_t t = 0; t < todo.size(); ++t) round[todo[t] - first] = results[t];
    for (auto& r : round) {
      if (r.status == outcome::evaluated) {
        ++out.evaluated;
        leaders.insert(std::upper_bound(leaders.begin(), leaders.end(), r.samples_per_s, std::greater<>()),
                       r.samples_per_s);
        if (leaders.size() > o.top) leaders.pop_back();
      }
      if (r.status == outcome::pruned) ++out.pruned;
      if (r.status == outcome::infeasible) ++out.infeasible;
      p.configurations += r.configurations;
      front.add(r);
      all.push_back(std::move(r));
    }
    p.done = last;
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (h.report) h.report(p);
  }
  out.configurations = p.configurations;
  std::vector<design_result> ranked;
  for (const auto& r : all)
    if (r.status == outcome::evaluated) ranked.push_back(r);
  std::sort(ranked.begin(), ranked.end(), ranks_before);
  if (ranked.empty()) {
    double leanest = 0.0;
    for (const auto& r : all) {
      const double need = r.smallest_memory_need.value();
      if (need > 0 && (leanest == 0 || need < leanest)) leanest = need;
    }
    char need[64] = "";
    if (leanest > 0) {
      std::snprintf(need, sizeof need, "; the leanest plan needs %.1f GiB per device", leanest / (1 << 30));
    }
    throw infeasible_error("no design of the space fits the model on " + std::to_string(s.devices) +
                           " devices with any knob setting" + need +
                           "; allow more HBM, more devices or recomputation");
  }
  out.best = ranked.front();
  ranked.resize(std::min(ranked.size(), o.top));
  out.top = ranked;
  out.pareto = pareto_front(std::move(all));
  // Designs read back (resumed, or evaluated by another process) carry no estimate: restore the reported
  // ones.
  auto restore = [&](design_result& r) {
    if (r.status == outcome::evaluated && r.estimate.stages.empty()) restore_estimate(s, r, o);
  };
  restore(out.best);
  for (auto& r : out.top) restore(r);
  for (auto& r : out.pareto) restore(r);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace phaze::search
