/// @file
/// The best Megatron-style training plan for a model on a cluster (one device type or several): every
/// admissible tensor-parallel width, pipeline depth, data-parallel degree, microbatch size, recomputation
/// mode and sequence-parallel setting, each evaluated by the training-step model (train/step.hpp) and ranked
/// by time per batch among the plans that fit. Choices the caller fixes are not searched.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/progress.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/model_placement.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/train/knob_settings.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

namespace phaze::place {

/// How stages get their layers: Megatron-LM's uniform split, or any contiguous split chosen by chain_dp
/// under the same step-time model (model_placement.hpp).
enum class stage_placement { uniform, uneven };

/// What the search may vary: an empty optional or list means "search it"; a list gives the values tried.
struct plan_choices {
  stage_placement placement = stage_placement::uneven;  ///< as `phaze plan`: the placer splits stages
  model_placer placer = chain_placer{};                 ///< places uneven stages
  std::vector<int> tensor_parallel;                     ///< empty: every admissible width
  /// Expert-parallel sizes tried (mixture-of-experts models; each must divide dp): empty means 1. Only the
  /// uniform placement carries them (the placers' tables hold one parameter count per layer, not the
  /// experts' share that expert parallelism shards over fewer ranks).
  std::vector<int> expert_parallel;
  /// Also try each expert-parallel size that does not divide dp but divides tp x dp x cp with expert tensor
  /// parallelism 1 (parallelism::etp, Megatron-Core's MoE parallel folding), where tp > 1.
  bool fold_experts = false;
  /// Context-parallel sizes tried (the sequence split over cp ranks; cp multiplies the devices a replica
  /// takes): empty means 1. Both placements carry them (uneven: the placers place groups of cp ranks,
  /// model_tables).
  std::vector<int> context_parallel;
  std::optional<int> pp;
  std::optional<int> dp;
  std::vector<std::int64_t> microbatches;   ///< empty: powers of two up to max_microbatch
  std::vector<model::recompute> recompute;  ///< empty: none, selective and full
  std::vector<bool> sequence_parallel;      ///< empty: off, and on where tp > 1
  std::int64_t max_microbatch = 16;         ///< largest microbatch tried when it is searched
  /// When set (the program sets the ILP), the best `refine_top` plans are placed and timed again on layer
  /// times from this scheduler, exactly: every plan whose lower-bound time (sched::bound_scheduler) could
  /// reach them is refined. Plans further down keep their first times.
  std::optional<sched::any_scheduler> refine;
  std::size_t refine_top = 1;
  /// Called after every plan evaluated ("plans") and every plan refined ("refining plans"); empty: none.
  progress_hook progress{};

  /// The microbatch sizes tried: those listed, or the powers of two up to max_microbatch.
  [[nodiscard]] std::vector<std::int64_t> microbatch_sizes() const {
    if (!microbatches.empty()) return microbatches;
    std::vector<std::int64_t> sizes;
    for (std::int64_t mb = 1; mb <= max_microbatch; mb *= 2) sizes.push_back(mb);
    return sizes;
  }
  /// The recomputation modes tried with knobs `base`: those listed, or none, selective and full, without
  /// selective under fused attention (nothing of the attention core is stored there, so selective
  /// recomputation is the plan without recomputation under another name).
  [[nodiscard]] std::vector<model::recompute> recompute_modes(const train::training_knobs& base) const {
    if (!recompute.empty()) return recompute;
    if (base.fused_attention) return {model::recompute::none, model::recompute::full};
    return {model::recompute::none, model::recompute::selective, model::recompute::full};
  }
  /// The sequence-parallel settings tried: those listed, or off and on (on only where tp > 1:
  /// train::sequence_parallel_runs).
  [[nodiscard]] std::vector<bool> sequence_parallel_settings() const {
    return sequence_parallel.empty() ? std::vector<bool>{false, true} : sequence_parallel;
  }
};

/// One evaluated plan.
struct ranked_plan {
  train::parallelism parallel;
  train::training_knobs knobs;
  train::step_estimate estimate;
  std::vector<train::stage_layers> split;  ///< each stage's layers (the uniform split when placed uniformly)
  std::string scheduler = "list";          ///< the scheduler its layer times come from
  double schedule_gap = 0.0;               ///< largest gap of the schedules behind it (0: all proven optimal)
};

/// The outcome of a search: the plans that fit, best first, and the smallest memory need of those that do
/// not.
struct plan_search_result {
  std::vector<ranked_plan> feasible;
  std::size_t evaluated = 0;
  std::size_t refined = 0;              ///< plans timed again with plan_choices::refine
  bytes smallest_infeasible_need{0.0};  ///< peak memory per device of the leanest plan that did not fit
};

namespace detail {
/// Every knob setting the search tries at tensor-parallel width `tp`, in train::knob_settings' order
/// (microbatch, recomputation, sequence parallelism), with the one rule of a setting at a width
/// (train::sequence_parallel_runs; a single sequence-parallel setting the caller gives is forced).
template <class Fn>
void for_each_knob_setting(const train::training_knobs& base, const plan_choices& fixed, int tp, Fn&& fn) {
  const bool forced = fixed.sequence_parallel.size() == 1;
  for (const train::knob_setting& setting : train::knob_settings(
           fixed.microbatch_sizes(), fixed.recompute_modes(base), fixed.sequence_parallel_settings())) {
    if (!train::sequence_parallel_runs(setting.sequence_parallel, tp, forced)) continue;
    train::training_knobs k = base;
    k.microbatch = setting.microbatch;
    k.recompute = setting.recompute;
    k.sequence_parallel = setting.sequence_parallel;
    fn(k);
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

namespace detail {
/// One thing plan search evaluates: a fully given uniform plan, or a (tp, knob setting) whose stages the
/// placer chooses.
struct plan_item {
  bool uneven = false;
  train::parallelism parallel;  ///< uneven: tp and cp only
  train::training_knobs knobs;
};

/// The outcome of one item through a schedule cache: a plan (fitting or not), or nothing when no (pp, dp)
/// uses the devices (uneven items only).
struct item_outcome {
  std::optional<ranked_plan> plan;
};

inline item_outcome evaluate_item(const model::model& m, const cluster::cluster& c, const plan_item& item,
                                  const plan_choices& fixed, const sched::schedule_cache& cache) {
  item_outcome out;
  if (!item.uneven) {
    std::vector<train::stage_layers> split = train::uniform_split(m, item.parallel.pp, item.knobs);
    out.plan = ranked_plan{item.parallel, item.knobs,
                           train::estimate_step(m, c, item.parallel, item.knobs, cache), std::move(split)};
  } else {
    placement_request f;
    f.pp = fixed.pp.value_or(0);
    f.dp = fixed.dp.value_or(0);
    model_placement placed;
    try {
      placed = place_model(m, c, item.knobs, {item.parallel.tp}, cache, f, fixed.placer, item.parallel.cp);
    } catch (const no_admissible_configuration&) {
      return out;  // no (pp, dp) uses the devices with this batch: not a plan
    }
    if (!placed.placed.feasible) {
      out.plan = ranked_plan{};  // evaluated, did not fit
      out.plan->estimate.fits = false;
      out.plan->estimate.peak_memory = placed.placed.smallest_memory_need;
      return out;
    }
    out.plan = ranked_plan{placed.parallel, item.knobs, placed.estimate, placed.split};
  }
  out.plan->scheduler = std::string{cache.scheduler()};
  out.plan->schedule_gap = cache.worst_gap();
  return out;
}

/// The items of a search: every admissible (tp, pp, dp) and knob setting (uniform), or every tp and knob
/// setting whose shape, batch and precision rules hold (uneven).
inline std::vector<plan_item> plan_items(const model::model& m, const cluster::cluster& c,
                                         const train::training_knobs& base, const plan_choices& fixed) {
  const int devices = c.devices();
  std::vector<int> tps = admissible_widths(m, c);
  if (!fixed.tensor_parallel.empty()) {
    std::vector<int> kept;
    for (const int tp : fixed.tensor_parallel) {
      // A width the user fixed is tried even if it is not admissible (its rules then say why it fails).
      if (fixed.tensor_parallel.size() == 1 || std::find(tps.begin(), tps.end(), tp) != tps.end())
        kept.push_back(tp);
    }
    tps = kept;
  }
  const bool uneven =
      fixed.placement == stage_placement::uneven && base.schedule != train::pipeline_schedule::interleaved;
  const std::vector<int> cps = fixed.context_parallel.empty() ? std::vector<int>{1} : fixed.context_parallel;
  const std::vector<int> eps = fixed.expert_parallel.empty() ? std::vector<int>{1} : fixed.expert_parallel;
  if (uneven && std::any_of(eps.begin(), eps.end(), [](int ep) { return ep > 1; })) {
    throw input_error(
        "expert parallelism above 1 needs the uniform placement: the placers split stages on one "
        "parameter count per layer, not the experts' share that expert parallelism shards; use the "
        "uniform placer (--placer uniform)");
  }
  if (uneven && train::counts_embedding_or_loss(base)) {
    throw input_error(
        "the embedding or loss counted as a pipeline layer sets Megatron-Core's even split; use the uniform "
        "placement (--placer uniform), or leave them out to search uneven splits");
  }
  // Rules of the base knobs alone, said here rather than lost in every item's refusal.
  if (base.shard_gradients && (!base.distributed_optimizer || base.fsdp))
    train::rules::gradient_sharding_needs_the_distributed_optimizer();
  if (base.fsdp_reshard_after_forward != train::fsdp_reshard::by_pipeline && !base.fsdp)
    train::rules::fsdp_reshard_needs_fsdp();
  if (base.shard_gradients && fixed.pp && *fixed.pp > 1) train::rules::gradient_sharding_without_pipeline();
  // EP overlap's rules where every plan with expert parallelism would break them.
  if (base.overlap_expert_comm && std::any_of(eps.begin(), eps.end(), [](int ep) { return ep > 1; })) {
    if (fixed.pp && *fixed.pp > 1 && base.schedule != train::pipeline_schedule::interleaved)
      train::rules::expert_overlap_needs_interleaving();
    if (fixed.recompute == std::vector<model::recompute>{model::recompute::full})
      train::rules::expert_overlap_without_full_recomputation();
  }
  std::vector<plan_item> items;
  // Every knob setting of plan `p` whose rules hold on `checked` devices.
  auto admit = [&](const train::parallelism& p, int checked, bool placed_unevenly) {
    for_each_knob_setting(base, fixed, p.tp, [&](const train::training_knobs& k) {
      try {
        train::validate(m, p, k, checked);
      } catch (const input_error&) {
        return;  // not admissible (batch not divisible, schedule rules, ...): not a plan
      }
      items.push_back({placed_unevenly, p, k});
    });
  };
  for (const int tp : tps) {
    for (const int cp : cps) {
      if (cp < 1 || devices % (tp * cp) != 0) continue;
      if (uneven) {
        // The placer chooses pp and dp: the rules that do not depend on them (shape, batch, precision, the
        // sequence's split over cp) must hold at pp = dp = 1.
        admit({tp, 1, 1, cp}, tp * cp, true);
        continue;
      }
      const int replicas = devices / (tp * cp);  // devices per tp x cp group count: pp * dp
      for (int pp = 1; pp <= replicas && pp <= model::body_nodes(m); ++pp) {
        if (fixed.pp && pp != *fixed.pp) continue;
        if (replicas % pp != 0 && !fixed.dp) continue;
        const int dp = fixed.dp ? *fixed.dp : replicas / pp;
        if (static_cast<std::int64_t>(tp) * pp * dp * cp != devices) continue;
        for (const int ep : eps) {
          if (ep >= 1 && dp % ep == 0) {
            admit({tp, pp, dp, cp, ep}, devices, false);
          } else if (fixed.fold_experts && ep > 1 && tp > 1 && (tp * dp * cp) % ep == 0) {
            admit({tp, pp, dp, cp, ep, 1}, devices, false);
          }
        }
      }
    }
  }
  return items;
}

inline bool faster(const ranked_plan& a, const ranked_plan& b) {
  return a.estimate.time_per_batch < b.estimate.time_per_batch;
}
}  // namespace detail

/// Searches the plans of `m` on every device of cluster `c`. `base` gives the knobs that are not searched
/// (global batch, sequence, precision, optimizer, distributed optimizer, schedule, virtual stages).
/// With stage_placement::uniform every admissible (tp, pp, dp) and knob setting is evaluated with the
/// uniform split; with stage_placement::uneven, for every tp, cp and knob setting `fixed.placer` (chain_dp
/// by default) finds the best pp, dp and split under the same model (one plan per tp, cp and knob setting;
/// the interleaved schedule is always placed uniformly; expert parallelism above 1 needs the uniform
/// placement, an input_error otherwise). The uneven plan of a setting is never slower than its
/// best uniform plan. Layer times come from `cache`; with `fixed.refine` the best `fixed.refine_top` plans
/// are exact under that scheduler: a plan's time with lower-bound layer times (sched::bound_scheduler) is no
/// later than with any schedule, and no refined time is later than the first, so every item whose bound is
/// within the refine_top-th first time is evaluated again with the refined scheduler.
inline plan_search_result search_plans(const model::model& m, const cluster::cluster& c,
                                       const train::training_knobs& base, const plan_choices& fixed,
                                       const sched::schedule_cache& cache) {
  const auto items = detail::plan_items(m, c, base, fixed);
  const auto started = std::chrono::steady_clock::now();
  const auto report = [&](std::string_view what, std::size_t done, std::size_t total) {
    if (fixed.progress)
      fixed.progress({what, done, total,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()});
  };
  plan_search_result result;
  std::vector<std::size_t> feasible_items;  // item of each feasible plan
  bool any_admissible = false;
  for (std::size_t i = 0; i < items.size(); ++i) {
    report("plans", i, items.size());
    auto outcome = detail::evaluate_item(m, c, items[i], fixed, cache);
    if (!outcome.plan) continue;
    any_admissible = true;
    if (outcome.plan->estimate.fits) feasible_items.push_back(i);
    detail::record(result, std::move(*outcome.plan));
  }
  if (!any_admissible) {
    throw input_error(
        "no admissible plan: no tensor-parallel width, pipeline depth and microbatch divide the "
        "model, the devices and the global batch; check the cluster's devices, the knobs' global_batch and "
        "the choices fixed in plan_choices (tensor_parallel, pp, dp, microbatches)");
  }
  if (fixed.refine && !result.feasible.empty()) {
    // The refine_top-th time so far, the bound every refined candidate must reach.
    std::vector<double> times;
    for (const auto& r : result.feasible) times.push_back(r.estimate.time_per_batch.value());
    std::sort(times.begin(), times.end());
    const double threshold = times[std::min(times.size(), std::max<std::size_t>(fixed.refine_top, 1)) - 1];
    const sched::schedule_cache bounds{sched::bound_scheduler{}};
    const sched::schedule_cache refined{*fixed.refine};
    for (std::size_t k = 0; k < feasible_items.size(); ++k) {
      report("refining plans", k, feasible_items.size());
      const auto bound = detail::evaluate_item(m, c, items[feasible_items[k]], fixed, bounds);
      if (!bound.plan || bound.plan->estimate.time_per_batch.value() > threshold * (1 + 1e-12)) continue;
      auto better = detail::evaluate_item(m, c, items[feasible_items[k]], fixed, refined);
      if (better.plan && better.plan->estimate.fits) {
        result.feasible[k] = std::move(*better.plan);
        ++result.refined;
      }
    }
  }
  std::stable_sort(result.feasible.begin(), result.feasible.end(), detail::faster);
  return result;
}

}  // namespace phaze::place
