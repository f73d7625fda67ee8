/// @file
/// The best Megatron-style training plan for a model on a cluster (one device type or several): every
/// admissible tensor-parallel width, pipeline depth, data-parallel degree, microbatch size, recomputation
/// mode and sequence-parallel setting, each evaluated by the training-step model (train/step.hpp) and ranked
/// by time per batch among the plans that fit. Choices the caller fixes are not searched.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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
  /// When set with `refine`, the refined schedules come from (and go into) this cache, made with the same
  /// scheduler: searches whose layers are alike (the co-search's designs that differ only in HBM) solve
  /// each once. Empty: a cache of this search's own.
  std::optional<sched::schedule_cache> refine_cache;
  std::size_t refine_top = 1;
  /// With `refine` and `keep` > 0: a time the keep-th fastest refined plan is known to reach (the co-search
  /// gives its design's best time on list schedules, which the ILP never does worse than). The lower-bound
  /// pass cuts every placement off there: a plan whose bound does not beat it can be neither kept nor
  /// refined, so it is neither placed to the end nor searched for its memory need. Infinity: none known.
  double refined_within_s = std::numeric_limits<double>::infinity();
  /// Plans kept, fastest first: 0 keeps every plan that fits (`phaze plan` ranks them all). Above 0 the
  /// search keeps that many and prunes: the items go knob setting by knob setting, a placement that cannot
  /// beat the keep-th fastest so far is cut off, the smallest memory need is searched only when nothing
  /// fits, and with `refine` the plans are priced on lower-bound layer times only, then refined in their
  /// order (the co-search keeps 1 per design).
  std::size_t keep = 0;
  /// Called after every plan evaluated ("plans") and every plan refined ("refining plans"); empty: none.
  progress_hook progress{};

  /// The microbatch sizes tried: those listed, or the powers of two up to max_microbatch.
  [[nodiscard]] std::vector<std::int64_t> microbatch_sizes() const {
    if (!microbatches.empty()) return microbatches;
    std::vector<std::int64_t> sizes;
    for (std::int64_t mb = 1; mb <= max_microbatch; mb *= 2) sizes.push_back(mb);
    return sizes;
  }
  /// The recomputation modes tried with knobs `base`: those listed (none, selective and full when none
  /// are), without selective under fused attention where none is tried too (nothing of the attention core
  /// is stored there, so selective recomputation is the plan without recomputation under another name).
  [[nodiscard]] std::vector<model::recompute> recompute_modes(const train::training_knobs& base) const {
    std::vector<model::recompute> modes = recompute;
    if (modes.empty()) modes = {model::recompute::none, model::recompute::selective, model::recompute::full};
    const auto tried = [&](model::recompute r) {
      return std::find(modes.begin(), modes.end(), r) != modes.end();
    };
    if (base.fused_attention && tried(model::recompute::none)) std::erase(modes, model::recompute::selective);
    return modes;
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
  std::size_t evaluated = 0;  ///< (tp, knob setting) items placed: every plan priced, pruned or not
  std::size_t refined = 0;    ///< plans timed again with plan_choices::refine
  /// Peak memory per device of the leanest plan that did not fit (with plan_choices::keep > 0: searched only
  /// when no plan fits at all; 0 otherwise).
  bytes smallest_infeasible_need{0.0};
  /// The largest gap of any layer schedule the search looked up (0: every one proven optimal; with
  /// plan_choices::refine and `keep`, of the refined plans' schedules): how much better schedules could
  /// speed any plan it priced up, at most.
  double worst_gap = 0.0;
};

namespace detail {
/// Every knob setting the search tries at tensor-parallel width `tp`, in train::knob_settings' order
/// (microbatch, recomputation, sequence parallelism), with the one rule of a setting at a width
/// (train::sequence_parallel_runs; a single sequence-parallel setting the caller gives is forced). `fn`
/// gets the knobs and the setting's place in that order.
template <class Fn>
void for_each_knob_setting(const train::training_knobs& base, const plan_choices& fixed, int tp, Fn&& fn) {
  const bool forced = fixed.sequence_parallel.size() == 1;
  std::size_t ordinal = 0;
  for (const train::knob_setting& setting : train::knob_settings(
           fixed.microbatch_sizes(), fixed.recompute_modes(base), fixed.sequence_parallel_settings())) {
    const std::size_t at = ordinal++;
    if (!train::sequence_parallel_runs(setting.sequence_parallel, tp, forced)) continue;
    train::training_knobs k = base;
    k.microbatch = setting.microbatch;
    k.recompute = setting.recompute;
    k.sequence_parallel = setting.sequence_parallel;
    fn(k, at);
  }
}

/// One thing plan search evaluates: a fully given uniform plan, or a (tp, knob setting) whose stages the
/// placer chooses.
struct plan_item {
  bool uneven = false;
  train::parallelism parallel;  ///< uneven: tp and cp only
  train::training_knobs knobs;
  std::size_t setting = 0;  ///< the knob setting's place in for_each_knob_setting's order
};

/// The outcome of one item through a schedule cache.
struct item_outcome {
  enum class kind { not_admissible, pruned, priced };
  kind what = kind::priced;
  /// priced: the plan (estimate.fits false: it does not fit, estimate.peak_memory its least need); always:
  /// scheduler and schedule_gap, those of the schedules the item looked up.
  ranked_plan plan;
};

/// Places or times one item on layer times from `cache`. An uneven item is placed by the choices' placer
/// and cut off at `cutoff_s` (pruned: no plan beats it; also when nothing fits and `memory_need` is off, the
/// smallest memory need not searched); not_admissible when no (pp, dp) uses the devices with its batch.
inline item_outcome evaluate_item(const model::model& m, const cluster::cluster& c, const plan_item& item,
                                  const plan_choices& fixed, const sched::schedule_cache& cache,
                                  double cutoff_s = std::numeric_limits<double>::infinity(),
                                  bool memory_need = true,
                                  const std::shared_ptr<train::route_memo>& routes = nullptr) {
  item_outcome out;
  const sched::schedule_cache own = cache.tracked();  // the gap of this item's schedules alone
  if (!item.uneven) {
    out.plan =
        ranked_plan{item.parallel, item.knobs, train::estimate_step(m, c, item.parallel, item.knobs, own),
                    train::uniform_split(m, item.parallel.pp, item.knobs)};
  } else {
    placement_request request;
    request.pp = fixed.pp.value_or(0);
    request.dp = fixed.dp.value_or(0);
    request.cutoff_s = cutoff_s;
    request.memory_need = memory_need;
    try {
      const model_placement placed = place_model(m, c, item.knobs, {item.parallel.tp}, own, request,
                                                 fixed.placer, item.parallel.cp, routes);
      if (placed.placed.above_cutoff) {
        out.what = item_outcome::kind::pruned;
      } else if (!placed.placed.feasible) {
        out.plan.estimate.fits = false;
        out.plan.estimate.peak_memory = placed.placed.smallest_memory_need;
      } else {
        out.plan = ranked_plan{placed.parallel, item.knobs, placed.estimate, placed.split};
      }
    } catch (const no_admissible_configuration&) {
      out.what = item_outcome::kind::not_admissible;  // no (pp, dp) uses the devices with this batch
    }
  }
  out.plan.scheduler = std::string{cache.scheduler()};
  out.plan.schedule_gap = own.worst_gap();
  return out;
}

/// Lowers the result's smallest infeasible need to a plan's that did not fit (0 there means none yet).
inline void note_need(plan_search_result& result, const ranked_plan& unfit) {
  const bytes need = unfit.estimate.peak_memory;
  if (result.smallest_infeasible_need.value() == 0.0 || need < result.smallest_infeasible_need)
    result.smallest_infeasible_need = need;
}

/// Counts one item's outcome in the result (priced or pruned: evaluated; a plan that does not fit: the
/// smallest infeasible need) and hands back the plan when it fits.
inline std::optional<ranked_plan> record(plan_search_result& result, item_outcome outcome) {
  if (outcome.what == item_outcome::kind::not_admissible) return std::nullopt;
  ++result.evaluated;
  if (outcome.what == item_outcome::kind::pruned) return std::nullopt;
  if (outcome.plan.estimate.fits) return std::move(outcome.plan);
  note_need(result, outcome.plan);
  return std::nullopt;
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
      // A single width the user fixed is tried even where admissible_widths leaves it out (wider than a
      // node, for one); its settings must still pass train::validate.
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
        "uniform placer (`placement` uniform)");
  }
  if (uneven && train::counts_embedding_or_loss(base)) {
    throw input_error(
        "the embedding or loss counted as a pipeline layer sets Megatron-Core's even split; use the uniform "
        "placement (`placement` uniform), or leave them out to search uneven splits");
  }
  // Rules of the base knobs alone, said here rather than lost in every item's refusal.
  if (base.shard_gradients && (!base.distributed_optimizer || base.fsdp))
    train::rules::gradient_sharding_needs_the_distributed_optimizer();
  if (base.fsdp_reshard_after_forward != train::fsdp_reshard::by_pipeline && !base.fsdp)
    train::rules::fsdp_reshard_needs_fsdp();
  if (base.shard_gradients && fixed.pp && *fixed.pp > 1) train::rules::gradient_sharding_without_pipeline();
  if (base.fp8_param_gather && base.precision != hw::precision::fp8)
    train::rules::fp8_param_gather_needs_fp8_training();
  if (base.fp8_param_gather && !base.distributed_optimizer && !base.fsdp)
    train::rules::fp8_param_gather_needs_the_distributed_optimizer();
  if (base.schedule == train::pipeline_schedule::interleaved && fixed.pp &&
      (*fixed.pp < 2 || (*fixed.pp == 2 && !base.overlap_p2p)))
    train::rules::interleaved_schedule_needs_more_than_two_pipeline_stages();
  // EP overlap's rules where every plan with expert parallelism would break them.
  if (base.overlap_expert_comm && std::any_of(eps.begin(), eps.end(), [](int ep) { return ep > 1; })) {
    if (fixed.pp && *fixed.pp > 1 && base.schedule != train::pipeline_schedule::interleaved)
      train::rules::expert_overlap_needs_interleaving();
    if (fixed.recompute == std::vector<model::recompute>{model::recompute::full})
      train::rules::expert_overlap_without_full_recomputation();
  }
  std::vector<plan_item> items;
  // Every knob setting of plan `p` whose rules hold on `checked` devices.
  // The first rule a candidate breaks, and whether another candidate broke another: when none is
  // admissible, said for the one width given, or when every candidate broke that one rule (context
  // parallelism beside unfused attention, say), rather than the generic answer.
  std::string first_refusal;
  bool refusals_differ = false;
  auto admit = [&](const train::parallelism& p, int checked, bool placed_unevenly) {
    for_each_knob_setting(base, fixed, p.tp, [&](const train::training_knobs& k, std::size_t setting) {
      try {
        train::validate(m, p, k, checked);
      } catch (const input_error& e) {
        if (first_refusal.empty()) {
          first_refusal = e.what();
        } else if (first_refusal != e.what()) {
          refusals_differ = true;
        }
        return;  // not admissible (batch not divisible, schedule rules, ...): not a plan
      }
      items.push_back({placed_unevenly, p, k, setting});
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
  if (items.empty() && !first_refusal.empty() && fixed.tensor_parallel.size() == 1) {
    throw no_admissible_configuration(
        "no admissible plan at the one tensor-parallel width given (`tensor_parallel` " +
        std::to_string(fixed.tensor_parallel.front()) + "): " + first_refusal);
  }
  if (items.empty() && !first_refusal.empty() && !refusals_differ)
    throw no_admissible_configuration("no admissible plan: every candidate checked breaks one rule: " +
                                      first_refusal);
  return items;
}

inline bool faster(const ranked_plan& a, const ranked_plan& b) {
  return a.estimate.time_per_batch < b.estimate.time_per_batch;
}

/// The k-th smallest of `times`; infinity while there are fewer than k (or k is 0).
inline double kth_fastest(std::vector<double> times, std::size_t k) {
  if (k == 0 || times.size() < k) return std::numeric_limits<double>::infinity();
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(k - 1), times.end());
  return times[k - 1];
}

/// One search's items, choices and progress, shared by its passes.
struct plan_run {
  const model::model& m;
  const cluster::cluster& c;
  const plan_choices& fixed;
  std::vector<plan_item> items;
  /// The cluster's routes, remembered across the items (every item's placements ask for the same rings
  /// and pairs) where they are followed rank by rank (train::route_memo::worth_remembering); empty otherwise.
  std::shared_ptr<train::route_memo> routes =
      train::route_memo::worth_remembering(c) ? std::make_shared<train::route_memo>() : nullptr;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  void report(std::string_view what, std::size_t done, std::size_t total) const {
    if (fixed.progress)
      fixed.progress({what, done, total,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()});
  }
  [[nodiscard]] item_outcome evaluate(std::size_t i, const sched::schedule_cache& cache,
                                      double cutoff_s = std::numeric_limits<double>::infinity(),
                                      bool memory_need = true) const {
    return evaluate_item(m, c, items[i], fixed, cache, cutoff_s, memory_need, routes);
  }
  [[noreturn]] static void none_admissible() {
    throw no_admissible_configuration(
        "no admissible plan: no tensor-parallel width, pipeline depth and microbatch divide the "
        "model, the devices and the global batch; check the cluster's devices, `global_batch` and the "
        "choices fixed (`tensor_parallel`, `pp`, `dp`, `microbatches`)");
  }
};

/// A plan that fits, with the item it came from.
struct kept_plan {
  std::size_t item = 0;
  ranked_plan plan;
};

/// Every item priced on `cache`. With `keep` > 0 an uneven item is cut off at the keep-th fastest time so
/// far (a plan that cannot be kept is not placed to the end), and the smallest memory need is searched only
/// when no item fits at all (a second pass), as the co-search needs it. A finite `cutoff` cuts every
/// placement off there too (and no memory need is searched).
inline std::vector<kept_plan> price_items(const plan_run& run, const sched::schedule_cache& cache,
                                          std::size_t keep, plan_search_result& result,
                                          double cutoff = std::numeric_limits<double>::infinity()) {
  std::vector<kept_plan> kept;
  std::vector<double> times;
  bool any_admissible = false;
  const bool cut = cutoff < std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < run.items.size(); ++i) {
    run.report("plans", i, run.items.size());
    item_outcome outcome =
        run.evaluate(i, cache, std::min(cutoff, kth_fastest(times, keep)), keep == 0 && !cut);
    result.worst_gap = std::max(result.worst_gap, outcome.plan.schedule_gap);
    if (outcome.what == item_outcome::kind::not_admissible) continue;
    any_admissible = true;
    if (auto plan = record(result, std::move(outcome))) {
      times.push_back(plan->estimate.time_per_batch.value());
      kept.push_back({i, std::move(*plan)});
    }
  }
  if (!any_admissible) plan_run::none_admissible();
  if (keep > 0 && kept.empty()) {
    // Nothing fits: each item's smallest memory need, which the first pass did not search.
    for (std::size_t i = 0; i < run.items.size(); ++i) {
      const item_outcome outcome = run.evaluate(i, cache);
      if (outcome.what == item_outcome::kind::priced && !outcome.plan.estimate.fits)
        note_need(result, outcome.plan);
    }
  }
  return kept;
}

/// Refines plans on `refined` layer times in the order of their lower bounds (`order`: (bound, index into
/// `kept`), sorted), until no bound can reach the `exact`-th fastest time: a bound is no later than the
/// plan under any schedule, and a refined time no later than the first, so every plan that can be among
/// the `exact` fastest is refined. With `cutoff`, a refinement is cut off at that time (the plans beyond it
/// are not kept).
inline void refine_in_bound_order(const plan_run& run,
                                  const std::vector<std::pair<double, std::size_t>>& order,
                                  const sched::schedule_cache& refined, std::size_t exact, bool cutoff,
                                  std::vector<kept_plan>& kept, plan_search_result& result) {
  std::vector<double> times;
  for (const kept_plan& k : kept) times.push_back(k.plan.estimate.time_per_batch.value());
  for (std::size_t n = 0; n < order.size(); ++n) {
    run.report("refining plans", n, order.size());
    const auto& [bound, at] = order[n];
    const double reach = kth_fastest(times, exact);
    if (bound > reach * (1 + 1e-12)) break;  // no later bound can reach the exact plans either
    item_outcome better =
        run.evaluate(kept[at].item, refined, cutoff ? reach : std::numeric_limits<double>::infinity());
    ++result.refined;
    if (better.what != item_outcome::kind::priced || !better.plan.estimate.fits) continue;
    result.worst_gap = std::max(result.worst_gap, better.plan.schedule_gap);
    times[at] = better.plan.estimate.time_per_batch.value();
    kept[at].plan = std::move(better.plan);
  }
  run.report("refining plans", order.size(), order.size());  // done: no later bound can reach them
}
}  // namespace detail

/// Searches the plans of `m` on every device of cluster `c`: the planning service behind `phaze plan`, the
/// co-search (one search per design), the cluster search (one per composition) and the baselines. `base`
/// gives the knobs that are not searched (global batch, sequence, precision, optimizer, distributed
/// optimizer, schedule, virtual stages).
///
/// Items: with stage_placement::uniform every admissible (tp, pp, dp, cp, ep) and knob setting, timed on the
/// uniform split; with stage_placement::uneven, every tp, cp and knob setting, for which `fixed.placer`
/// (chain_dp by default) finds the best pp, dp and split under the same model (the interleaved schedule is
/// always placed uniformly; expert parallelism above 1 needs the uniform placement, an input_error
/// otherwise). The uneven plan of a setting is never slower than its best uniform plan. Each item's layer
/// times come from `cache`; `fixed.keep` > 0 keeps the fastest `keep` plans and cuts every placement off at
/// the keep-th fastest time so far.
///
/// Refinement (`fixed.refine`): the fastest `refine_top` plans (`keep` with `keep` > 0) are exact under
/// that scheduler when the placer is exact (chain or downset DP, brute force) and the refining scheduler
/// never does worse than the first (the ILP starts from the list schedule). A plan's time with lower-bound
/// layer times (sched::bound_scheduler) is no later than with any schedule, and a refined time no later than
/// the first, so plans are refined in the order of their bounds until no bound reaches the refine_top-th
/// fastest time. With `keep` > 0 the plans are never priced on `cache` at all: every item is priced on bounds
/// and refined in their order (the co-search's one best plan per design). Throws no_admissible_configuration
/// when no item is admissible.
inline plan_search_result search_plans(const model::model& m, const cluster::cluster& c,
                                       const train::training_knobs& base, const plan_choices& fixed,
                                       const sched::schedule_cache& cache) {
  detail::plan_run run{m, c, fixed, detail::plan_items(m, c, base, fixed)};
  // Keeping the best few, the items go knob setting by knob setting (every width of one setting, then the
  // next): a good plan is found early, and its time cuts the placements of the others off.
  if (fixed.keep > 0) {
    std::stable_sort(
        run.items.begin(), run.items.end(),
        [](const detail::plan_item& a, const detail::plan_item& b) { return a.setting < b.setting; });
  }
  plan_search_result result;
  std::vector<detail::kept_plan> kept;
  if (fixed.refine) {
    // The first pass prices every plan (keep 0: all are ranked) or only bounds them (keep > 0).
    const sched::schedule_cache bounds{sched::bound_scheduler{}};
    std::vector<std::pair<double, std::size_t>> order;  // (lower bound on time, index into kept)
    if (fixed.keep > 0) {
      plan_search_result bounded;
      auto candidates = detail::price_items(run, bounds, 0, bounded, fixed.refined_within_s);
      result.evaluated = bounded.evaluated;
      result.smallest_infeasible_need = bounded.smallest_infeasible_need;  // memory is the same under any
      for (std::size_t k = 0; k < candidates.size(); ++k)
        order.emplace_back(candidates[k].plan.estimate.time_per_batch.value(), k);
      kept = std::move(candidates);
      for (auto& k : kept) k.plan.estimate.time_per_batch = seconds{std::numeric_limits<double>::infinity()};
    } else {
      kept = detail::price_items(run, cache, 0, result);
      for (std::size_t k = 0; k < kept.size(); ++k) {
        run.report("bounding plans", k, kept.size());
        const detail::item_outcome bound = run.evaluate(kept[k].item, bounds);
        order.emplace_back(bound.plan.estimate.time_per_batch.value(), k);
      }
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const std::size_t exact = fixed.keep > 0 ? fixed.keep : std::max<std::size_t>(fixed.refine_top, 1);
    detail::refine_in_bound_order(
        run, order, fixed.refine_cache ? *fixed.refine_cache : sched::schedule_cache{*fixed.refine}, exact,
        fixed.keep > 0, kept, result);
    if (fixed.keep > 0) {  // the plans never refined have no time on the refined scheduler: not kept
      std::erase_if(kept, [](const detail::kept_plan& k) {
        return !std::isfinite(k.plan.estimate.time_per_batch.value());
      });
    }
  } else {
    kept = detail::price_items(run, cache, fixed.keep, result);
  }
  for (auto& k : kept) result.feasible.push_back(std::move(k.plan));
  std::stable_sort(result.feasible.begin(), result.feasible.end(), detail::faster);
  if (fixed.keep > 0 && result.feasible.size() > fixed.keep) result.feasible.resize(fixed.keep);
  return result;
}

}  // namespace phaze::place
