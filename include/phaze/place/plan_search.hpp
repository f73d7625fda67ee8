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

#include "phaze/cluster/cluster.hpp"
#include "phaze/core/error.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/model_placement.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

namespace phaze::place {

/// How stages get their layers: Megatron-LM's uniform split, or any contiguous split chosen by chain_dp
/// under the same step-time model (model_placement.hpp).
enum class stage_placement { uniform, uneven };

/// What the search may vary; an empty optional means "search it".
struct plan_choices {
  stage_placement placement = stage_placement::uniform;
  model_placer placer = chain_placer{};  ///< places uneven stages
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
  train::step_estimate estimate;
  std::vector<train::stage_layers> split;  ///< each stage's layers (the uniform split when placed uniformly)
};

/// The outcome of a search: the plans that fit, best first, and the smallest memory need of those that do
/// not.
struct plan_search_result {
  std::vector<ranked_plan> feasible;
  std::size_t evaluated = 0;
  bytes smallest_infeasible_need{0.0};  ///< peak memory per device of the leanest plan that did not fit
};

namespace detail {
/// Every knob setting the search tries (microbatch, recomputation, sequence parallelism), in a fixed order.
template <class Fn>
void for_each_knob_setting(const train::training_knobs& base, const plan_choices& fixed, int tp, Fn&& fn) {
  std::vector<model::recompute> modes{model::recompute::none, model::recompute::selective,
                                      model::recompute::full};
  if (fixed.recompute) modes = {*fixed.recompute};
  std::vector<std::int64_t> sizes;
  if (fixed.microbatch) {
    sizes.push_back(*fixed.microbatch);
  } else {
    for (std::int64_t mb = 1; mb <= fixed.max_microbatch; mb *= 2) sizes.push_back(mb);
  }
  for (const std::int64_t mb : sizes) {
    for (model::recompute mode : modes) {
      for (bool sp : {false, true}) {
        if (fixed.sequence_parallel ? sp != *fixed.sequence_parallel : (sp && tp == 1)) continue;
        train::training_knobs k = base;
        k.microbatch = mb;
        k.recompute = mode;
        k.sequence_parallel = sp;
        fn(k);
      }
    }
  }
}

/// Adds one evaluated plan to the result: to the feasible list, or to the smallest infeasible need.
inline void record(plan_search_result& result, ranked_plan r) {
  ++result.evaluated;
  if (r.estimate.fits) {
    result.feasible.push_back(std::move(r));
  } else if (result.smallest_infeasible_need.value() == 0.0 ||
             r.estimate.peak_memory < result.smallest_infeasible_need) {
    result.smallest_infeasible_need = r.estimate.peak_memory;
  }
}
}  // namespace detail

/// Searches the plans of `m` on every device of cluster `c`. `base` gives the knobs that are not searched
/// (global batch, sequence, precision, optimizer, distributed optimizer, schedule, virtual stages).
/// With stage_placement::uniform every admissible (tp, pp, dp) and knob setting is evaluated with the
/// uniform split; with stage_placement::uneven, for every tp and knob setting `fixed.placer` (chain_dp by
/// default) finds the best pp, dp and split under the same model (one plan per tp and knob setting; the
/// interleaved schedule is always placed uniformly). The uneven plan of a setting is never slower than its
/// best uniform plan.
inline plan_search_result search_plans(const model::model& m, const cluster::cluster& c,
                                       const train::training_knobs& base, const plan_choices& fixed,
                                       const sched::schedule_cache& cache) {
  const int devices = c.devices();
  plan_search_result result;
  std::vector<int> tps = admissible_widths(m, c);
  if (fixed.tp) tps = {*fixed.tp};
  const bool uneven =
      fixed.placement == stage_placement::uneven && base.schedule != train::pipeline_schedule::interleaved;
  bool any_admissible = false;
  for (int tp : tps) {
    if (uneven) {
      detail::for_each_knob_setting(base, fixed, tp, [&](const train::training_knobs& k) {
        // The rules that do not depend on pp and dp (shape, batch, precision) must hold at pp = dp = 1.
        try {
          train::validate(m, train::parallelism{tp, 1, 1}, k, tp);
        } catch (const input_error&) {
          return;
        }
        placement_request f;
        f.pp = fixed.pp.value_or(0);
        f.dp = fixed.dp.value_or(0);
        model_placement placed;
        try {
          placed = place_model(m, c, k, {tp}, cache, f, fixed.placer);
        } catch (const no_admissible_configuration&) {
          return;  // no (pp, dp) uses the devices with this batch: not a plan
        }
        any_admissible = true;
        if (!placed.placed.feasible) {
          ++result.evaluated;
          if (result.smallest_infeasible_need.value() == 0.0 ||
              placed.placed.smallest_memory_need < result.smallest_infeasible_need) {
            result.smallest_infeasible_need = placed.placed.smallest_memory_need;
          }
          return;
        }
        detail::record(result, ranked_plan{placed.parallel, k, placed.estimate, placed.split});
      });
      continue;
    }
    for (int pp = 1; pp <= devices / tp && pp <= m.config.layers; ++pp) {
      if (fixed.pp && pp != *fixed.pp) continue;
      if ((devices / tp) % pp != 0 && !fixed.dp) continue;
      const int dp = fixed.dp ? *fixed.dp : devices / (tp * pp);
      if (tp * pp * dp != devices) continue;
      detail::for_each_knob_setting(base, fixed, tp, [&](const train::training_knobs& k) {
        train::parallelism p{tp, pp, dp};
        try {
          train::validate(m, p, k, devices);
        } catch (const input_error&) {
          return;  // not admissible (batch not divisible, schedule rules, ...): not a plan
        }
        any_admissible = true;
        std::vector<train::stage_layers> split;
        for (int i = 0; i < pp; ++i) split.push_back(train::uniform_stage(m, pp, i));
        detail::record(result, ranked_plan{p, k, train::estimate_step(m, c, p, k, cache), std::move(split)});
      });
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
