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
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/search/baselines.hpp"
#include "phaze/search/evaluate.hpp"
#include "phaze/search/result.hpp"
#include "phaze/search/spec.hpp"

namespace phaze::search {

/// Runs the search. `resumed` holds designs already finished by an earlier run of the same spec (by index);
/// they are not evaluated again. With options::baselines (the default) the summary holds the baselines
/// (search::baselines), evaluated through the hooks' exchange map. Throws input_error for a bad spec.
inline summary run(const spec& s, const options& o, const hooks& h = {},
                   const std::vector<design_result>& resumed = {}) {
  validate(s);
  if (!any_admissible_plan(s)) {
    throw input_error(
        "no admissible plan: no tensor-parallel width (dividing the heads and MLP, within a node), pipeline "
        "depth and data-parallel degree use the " +
        std::to_string(s.devices) + " devices with a microbatch that divides the global batch " +
        std::to_string(s.global_batch) +
        "; check the spec's devices, global_batch, knobs.tensor_parallel and knobs.microbatches");
  }
  const auto start = std::chrono::steady_clock::now();
  const auto order = design_order(s);
  const hw::space::design_table designs = s.space.designs();  // by index, O(1) each
  // Records of an earlier run: the first pass's, and the refined ones (by the scheduler's name).
  std::vector<std::optional<design_result>> known(order.size());
  std::vector<std::optional<design_result>> known_refined(order.size());
  for (const auto& r : resumed) {
    if (r.index >= known.size()) continue;
    if (o.refine && r.scheduler == o.refine->name() && r.scheduler != o.scheduler.name()) {
      known_refined[r.index] = r;
    } else {
      known[r.index] = r;
    }
  }
  const auto map = h.map ? h.map : serial_map;
  summary out;
  out.model = std::string{s.model.config.name.view()};
  out.devices = s.devices;
  out.global_batch = s.global_batch;
  const model::model trained = model_of(s);
  out.sequence = trained.config.sequence;
  out.vocab = trained.config.vocab;
  out.precision = s.knobs.precision;
  out.designs = order.size();
  std::vector<design_result> all;
  all.reserve(order.size());
  front_bound front;
  // Throughputs of the designs evaluated in earlier rounds, best first, at most `top`: a design may also be
  // skipped only when its bound is below the top-th of them, so the top list is exact too.
  std::vector<double> leaders;
  // A design whose bound is below the top-th throughput and the front at its area can be neither reported
  // nor on the front: pruned (unless exhaustive).
  auto ruled_out = [&](double area, double bound) {
    const bool below_top = o.top == 0 || (leaders.size() >= o.top && leaders.back() > bound);
    return !o.exhaustive && below_top && front.dominates(area, bound);
  };
  progress p;
  p.total = order.size();
  std::optional<open_designs> open;
  if (h.report) open.emplace(s, order, known);
  double recounted = -1.0;
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
      const hw::device d = designs[index];
      const double area = hw::area_of(d.systolic, s.space.tech()).value();
      if (ruled_out(area, bound)) {
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
    // Designs of the round that differ only in HBM capacity (neighbours in the order: their bound is the
    // same) solve their layers' schedules once.
    shared_schedules schedules{o.scheduler};
    const auto results = map(todo.size(), [&](std::size_t t) {
      const std::uint64_t index = order[todo[t]].first;
      const hw::device d = designs[index];
      design_result r = evaluate_design(s, d, index, o, schedules.of(d));
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
    p.placed += todo.size();
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (h.report) {
      const bool recount = p.seconds - recounted >= o.recount_every_s || last == order.size();
      if (recount) recounted = p.seconds;
      p.open = open->count(last, recount, ruled_out);
      h.report(p);
    }
  }
  out.configurations = p.configurations;
  out.scheduler = std::string{o.scheduler.name()};
  if (o.refine) {
    out.scheduler = std::string{o.refine->name()};
    out.refined = refine(s, o, h, all, known_refined);
  }
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
  out.space = describe(s);
  // The search's own time; the baselines come after it.
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The baselines' evaluations are not records of the run: through the exchange map, never `finished`.
  if (o.baselines) out.baselines = baselines(s, out.best, h.exchange ? h.exchange : serial_map, o);
  return out;
}

}  // namespace phaze::search
