/// @file
/// The best Megatron-style training plan for a model on a cluster of one device type: every admissible
/// tensor-parallel width, pipeline depth, data-parallel degree, microbatch size, recomputation mode and
/// sequence-parallel setting, each evaluated by the training-step model (place/step_time.hpp) and ranked by
/// time per batch among the plans that fit. Choices the caller fixes are not searched.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/step_time.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::place {

/// What the search may vary; an empty optional means "search it".
struct plan_choices {
  std::optional<int> tp;
  std::optional<int> pp;
  std::optional<int> dp;
  std::optional<std::int64_t> microbatch;
  std::optional<model::recompute> recompute;
  std::optional<bool> sequence_parallel;
  std::int64_t max_microbatch = 16;  ///< largest microbatch tried when it is searched
};

/// One evaluated plan.
struct ranked_plan {
  train::parallelism parallel;
  train::training_knobs knobs;
  step_estimate estimate;
};

/// The outcome of a search: the plans that fit, best first, and the smallest memory need of those that do
/// not.
struct plan_search_result {
  std::vector<ranked_plan> feasible;
  std::size_t evaluated = 0;
  bytes smallest_infeasible_need{0.0};  ///< peak memory per device of the leanest plan that did not fit
};

/// Searches the plans of `m` on `devices` devices of type `d`. `base` gives the knobs that are not searched
/// (global batch, sequence, precision, optimizer, distributed optimizer, schedule, virtual stages).
inline plan_search_result search_plans(const model::model& m, const hw::device& d, int devices,
                                       const train::training_knobs& base, const plan_choices& fixed,
                                       sched::schedule_cache& cache,
                                       sched::solver how = sched::solver::list) {
  if (devices < 1) throw input_error("--devices must be at least 1");
  plan_search_result result;
  const auto& c = m.config;
  std::vector<int> tps;
  for (int tp = 1; tp <= devices; tp *= 2) {
    const bool divides = c.heads % tp == 0 && c.kv_heads_or_default() % tp == 0 && c.ffn % tp == 0;
    // Tensor parallelism stays inside a node (its all-reduces need the fast links), as Megatron-LM runs it.
    if (divides && tp <= std::max(1, d.link.devices_per_node)) tps.push_back(tp);
  }
  if (fixed.tp) tps = {*fixed.tp};
  std::vector<model::recompute> modes{model::recompute::none, model::recompute::selective,
                                      model::recompute::full};
  if (fixed.recompute) modes = {*fixed.recompute};
  bool any_admissible = false;
  for (int tp : tps) {
    for (int pp = 1; pp <= devices / tp && pp <= c.layers; ++pp) {
      if (fixed.pp && pp != *fixed.pp) continue;
      if ((devices / tp) % pp != 0 && !fixed.dp) continue;
      const int dp = fixed.dp ? *fixed.dp : devices / (tp * pp);
      if (tp * pp * dp != devices) continue;
      for (std::int64_t mb = 1; mb <= (fixed.microbatch ? *fixed.microbatch : fixed.max_microbatch);
           mb *= 2) {
        if (fixed.microbatch && mb != *fixed.microbatch) continue;
        for (model::recompute mode : modes) {
          for (bool sp : {false, true}) {
            if (fixed.sequence_parallel ? sp != *fixed.sequence_parallel : (sp && tp == 1)) continue;
            train::parallelism p{tp, pp, dp};
            train::training_knobs k = base;
            k.microbatch = mb;
            k.recompute = mode;
            k.sequence_parallel = sp;
            try {
              train::validate(m, p, k, devices);
            } catch (const input_error&) {
              continue;  // not admissible (batch not divisible, schedule rules, ...): not a plan
            }
            any_admissible = true;
            ranked_plan r{p, k, estimate_step(m, d, p, k, cache, how)};
            ++result.evaluated;
            if (r.estimate.fits) {
              result.feasible.push_back(std::move(r));
            } else if (result.smallest_infeasible_need.value() == 0.0 ||
                       r.estimate.peak_memory < result.smallest_infeasible_need) {
              result.smallest_infeasible_need = r.estimate.peak_memory;
            }
          }
        }
      }
    }
  }
  if (!any_admissible) {
    throw input_error(
        "no admissible plan: no tensor-parallel width, pipeline depth and microbatch divide the "
        "model, the devices and the global batch; check --devices, --global-batch and the fixed "
        "choices");
  }
  std::stable_sort(result.feasible.begin(), result.feasible.end(),
                   [](const ranked_plan& a, const ranked_plan& b) {
                     return a.estimate.time_per_batch < b.estimate.time_per_batch;
                   });
  return result;
}

}  // namespace phaze::place
