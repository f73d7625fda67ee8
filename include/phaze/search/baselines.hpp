/// @file
/// The baselines a co-search reports next to its best design (docs/search.md) and a one-line description of a
/// spec.
/// - tpuv4-like: PHAZE's reference accelerator (the TPU v4 chip) with its best plan under the same knobs.
/// - spotlight-style: the design of the space with the lowest single-accelerator latency of the model's
///   layers (one microbatch of one sequence, forward and backward, no parallelism), as a design-space search
///   for layer latency alone picks it (Spotlight, Sakhuja et al., HPCA 2023), then placed like every design.
/// - megatron-uniform: the best design with PHAZE's fixed Megatron-style plans: uniform stages, every
///   (tp, pp, dp) and knob setting evaluated, the fastest kept (no uneven placement).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "phaze/hw/presets.hpp"
#include "phaze/place/plan_search.hpp"
#include "phaze/search/evaluate.hpp"
#include "phaze/train/layer_times.hpp"

namespace phaze::search {

/// Index given to designs that are not in the searched space.
inline constexpr std::uint64_t outside_the_space = std::numeric_limits<std::uint64_t>::max();

/// Single-accelerator latency of a model's layers on `d`: forward + backward of the embedding, every
/// block and the head for one sequence, no parallelism (list schedules).
inline seconds layer_latency(const model::model& run, const hw::device& d) {
  sched::schedule_cache cache;
  const model::layer_shape shape{1, run.config.sequence, 1, false, 2};
  seconds total{0.0};
  for (const auto& kind : model::distinct_layers(run)) {
    // One device, no tensor parallelism: no collective runs (the route is never used).
    const auto t = train::time_layer(model::layer_at(run, static_cast<std::size_t>(kind.first_node), shape),
                                     d, cluster::route{}, cache);
    total += (t.forward + t.backward) * static_cast<double>(kind.count);
  }
  return total;
}

/// The baselines of a search whose best design is `best`; `map` evaluates in parallel as in search::run.
inline std::vector<baseline> baselines(
    const spec& s, const design_result& best,
    const std::function<std::vector<design_result>(
        std::size_t, const std::function<design_result(std::size_t)>&)>& map = serial_map,
    const options& o = {}) {
  std::vector<baseline> out;
  out.push_back({"tpuv4-like",
                 "PHAZE's reference accelerator (TPU v4) with its best plan under the same knobs",
                 evaluate_reported(s, hw::tpuv4_like, outside_the_space, o)});

  // Spotlight-style: lowest layer latency over the whole space (ties: the lower index).
  const model::model run = model_of(s);
  const hw::space::design_table designs = s.space.designs();  // by index, O(1) each
  const std::uint64_t n = designs.size();
  // Each design's 1 / latency travels in upper_bound_samples_per_s of a record that is otherwise a pruned
  // design's, so the same map (threads, or MPI's exchange of results.jsonl lines) evaluates it.
  const auto latencies = map(n, [&](std::size_t i) {
    design_result r;
    r.index = i;
    r.device = designs[i];
    r.die_area = hw::area_of(r.device.systolic, s.space.tech());
    r.status = outcome::pruned;
    r.upper_bound_samples_per_s = 1.0 / layer_latency(run, r.device).value();
    return r;
  });
  std::uint64_t fastest = 0;
  for (std::uint64_t i = 1; i < n; ++i)
    if (latencies[i].upper_bound_samples_per_s > latencies[fastest].upper_bound_samples_per_s) fastest = i;
  out.push_back({"spotlight-style",
                 "the design with the lowest single-accelerator layer latency (forward + backward of one "
                 "sequence), then placed",
                 evaluate_reported(s, designs[fastest], fastest, o)});

  // Megatron-uniform: the best design with uniform stages only, over the spec's own knobs.
  design_result uniform = best;
  uniform.status = outcome::infeasible;
  uniform.samples_per_s = 0.0;
  // One plan search over the spec's own widths and knob lists with uniform stages, refined like the designs
  // when the options refine (the planning service, place::search_plans).
  const sched::schedule_cache cache{o.scheduler};
  const cluster::cluster on = cluster_of(s, best.device);
  place::plan_choices choices = plan_choices_of(s, o, o.refine.has_value());
  choices.placement = place::stage_placement::uniform;
  try {
    const auto found = place::search_plans(run, on, base_knobs(s), choices, cache);
    if (!found.feasible.empty()) {
      const auto& r = found.feasible.front();
      uniform.status = outcome::evaluated;
      uniform.parallel = r.parallel;
      uniform.knobs = r.knobs;
      uniform.split = r.split;
      uniform.estimate = r.estimate;
      uniform.samples_per_s = r.estimate.samples_per_s;
      uniform.scheduler = r.scheduler;
      uniform.schedule_gap = r.schedule_gap;
    }
  } catch (const input_error&) {
    // no uniform plan is admissible with these knobs
  }
  if (uniform.status == outcome::evaluated) {
    uniform.energy_per_sample =
        energy_per_sample(run, best.device, uniform.parallel, uniform.knobs, s.space.tech());
  }
  out.push_back({"megatron-uniform",
                 "the best design with Megatron-style uniform stages only (PHAZE's fixed plans)", uniform});
  return out;
}

/// The area rule a space applies (hw::space::admits), in words: "area at most 599 mm2, at least 180 mm2
/// except designs of one tensor core and one vector core".
inline std::string area_rule(const hw::space& space) {
  std::vector<std::string> parts;
  if (std::isfinite(space.area_budget().value())) {
    parts.push_back(fmt::format("at most {:.0f} mm2", space.area_budget().value()));
  }
  if (space.min_area().value() > 0.0) {
    parts.push_back(fmt::format(
        "at least {:.0f} mm2{}", space.min_area().value(),
        space.exempts_single_core() ? " except designs of one tensor core and one vector core" : ""));
  }
  if (parts.empty()) return "any area";
  std::string out = "area " + parts[0];
  if (parts.size() > 1) out += ", " + parts[1];
  return out;
}

/// One line describing what a spec searches.
inline std::string describe(const spec& s) {
  std::string knobs = "microbatches";
  for (const auto mb : s.knobs.microbatches) knobs += " " + std::to_string(mb);
  knobs += "; recompute";
  for (const auto m : s.knobs.recompute) knobs += " " + std::string{model::to_string(m)};
  knobs += "; sequence parallel";
  for (const bool sp : s.knobs.sequence_parallel) knobs += sp ? " on" : " off";
  knobs += "; tp ";
  if (s.knobs.tensor_parallel.empty()) {
    knobs += "all that fit a node";
  } else {
    for (const int tp : s.knobs.tensor_parallel) knobs += std::to_string(tp) + " ";
  }
  return fmt::format("{} designs ({}) x {}", s.space.count(), area_rule(s.space), knobs);
}

}  // namespace phaze::search
