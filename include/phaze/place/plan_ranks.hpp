/// @file
/// Which physical devices run a plan: the rank order of a found plan (place/rank_assignment.hpp) under the
/// training-step model itself — every candidate order is timed by train::estimate_step with the plan's
/// degrees, knobs and split — and the devices of every pipeline stage, data-parallel replica and
/// tensor-parallel group under it (what `phaze plan` prints and what `--emit megatron` launches).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/progress.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/plan_search.hpp"
#include "phaze/place/rank_assignment.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/train/step.hpp"

namespace phaze::place {

/// How ranks are laid on devices: Megatron-LM's order (rank r on device r), the exact search (small
/// clusters), simulated annealing, or automatic (Megatron-LM's on one device type without measured links,
/// where every node is alike; exact up to 8 devices; annealing above).
enum class rank_method : std::uint8_t { automatic, megatron, exact, anneal };

inline rank_method parse_rank_method(std::string_view name) {
  if (name == "auto") return rank_method::automatic;
  if (name == "megatron") return rank_method::megatron;
  if (name == "exact") return rank_method::exact;
  if (name == "anneal") return rank_method::anneal;
  throw input_error("unknown rank method '" + std::string{name} + "'; use auto, megatron, exact or anneal");
}

/// Settings of the annealing (fixed, so that a plan's order does not depend on the machine).
struct rank_search_settings {
  std::uint64_t seed = 1;
  std::int64_t iterations = 20000;
  /// Only orders a node-by-node launcher (torchrun) can start: every node's ranks consecutive
  /// (anneal_ranks::node_blocks; an exact order that is not is searched again by such annealing).
  bool node_blocks = false;
  progress_hook progress{};  ///< the annealing's steps ("rank orders"); empty: none
};

/// A plan's rank order and what it gains.
struct plan_order {
  std::string method;          ///< "megatron", "exact" or "anneal"
  std::vector<int> order;      ///< order[r]: the device of rank r (empty: Megatron-LM's)
  double megatron_s = 0.0;     ///< time per batch in Megatron-LM's order
  double ordered_s = 0.0;      ///< time per batch in `order`
  std::int64_t evaluated = 0;  ///< orders timed
  bool exact = false;          ///< proven optimal for this plan
  /// The plan's split placed again on the devices of `order` (the chain DP under the step model, degrees and
  /// knobs kept) when that is strictly faster; empty when the plan's own split stays.
  std::vector<train::stage_layers> split;
  train::step_estimate estimate;  ///< the plan's estimate in `order` (on `split` when it is given)
};

/// The time per batch of `p` on cluster `c` in its current order; +infinity when the plan does not fit
/// there (a stage of several device types runs at its slowest member's pace and must fit the least memory).
inline double plan_time_on(const model::model& m, const cluster::cluster& c, const ranked_plan& p,
                           const sched::schedule_cache& cache) {
  const auto e = train::estimate_step(m, c, p.parallel, p.knobs, cache, p.split);
  return e.fits ? e.time_per_batch.value() : std::numeric_limits<double>::infinity();
}

/// The best rank order for plan `p` (degrees, knobs and split fixed) on cluster `c` by `method`. The order
/// is never slower than Megatron-LM's: both solvers start from it. With Megatron-LM's order (chosen, or
/// what automatic picks) nothing is timed: `p.estimate`, the plan's estimate on `c`, is returned. With
/// `replace_split` (and a 1F1B or GPipe plan), once another order is chosen the layers are placed again on
/// its devices (place_model with the plan's degrees and knobs: the split was chosen for Megatron-LM's order,
/// and a stage that now runs on faster devices or links may take more layers); the new split is kept only
/// when strictly faster, so the result is never slower than the ordered plan.
inline plan_order order_ranks(const model::model& m, const cluster::cluster& c, const ranked_plan& p,
                              const sched::schedule_cache& cache, rank_method method,
                              rank_search_settings settings = {}, bool replace_split = true) {
  if (method == rank_method::automatic) {
    if (c.groups().size() == 1 && !c.measured()) {
      method = rank_method::megatron;
    } else {
      method = c.devices() <= 8 ? rank_method::exact : rank_method::anneal;
    }
  }
  plan_order out;
  if (method == rank_method::megatron) {
    // Nothing to search: the plan's own estimate is its time in Megatron-LM's order (no layer is timed
    // again, which on the ILP would solve its schedules a second time).
    out.method = "megatron";
    out.megatron_s = out.ordered_s = p.estimate.time_per_batch.value();
    out.estimate = p.estimate;
    return out;
  }
  out.megatron_s = plan_time_on(m, c, p, cache);
  auto cost = [&](const cluster::cluster& ordered) { return plan_time_on(m, ordered, p, cache); };
  rank_assignment found;
  const auto anneal = [&] {
    return anneal_ranks(c, p.parallel, cost)
        .seed(settings.seed)
        .iterations(settings.iterations)
        .node_blocks(settings.node_blocks)
        .progress(settings.progress)
        .run();
  };
  if (method == rank_method::exact) {
    out.method = "exact";
    found = exact_ranks(c, p.parallel, cost).run();
    if (settings.node_blocks && !found.order.empty() &&
        !detail::ranks::node_blocks(c.with_order(found.order), static_cast<int>(p.parallel.devices()))) {
      out.method = "anneal";
      found = anneal();
    }
  } else {
    out.method = "anneal";
    found = anneal();
  }
  out.evaluated = found.evaluated;
  out.exact = found.exact;
  // Keep Megatron-LM's order unless another is strictly faster.
  if (!found.order.empty() && found.cost < out.megatron_s) {
    out.order = found.order;
    out.ordered_s = found.cost;
  } else {
    out.ordered_s = out.megatron_s;
  }
  const cluster::cluster ordered = out.order.empty() ? c : c.with_order(out.order);
  out.estimate = train::estimate_step(m, ordered, p.parallel, p.knobs, cache, p.split);
  if (replace_split && !out.order.empty() && p.knobs.schedule != train::pipeline_schedule::interleaved &&
      p.parallel.pp > 1) {
    placement_request fixed;
    fixed.tp = p.parallel.tp;
    fixed.pp = p.parallel.pp;
    fixed.dp = p.parallel.dp;
    const model_placement again = place_model(m, ordered, p.knobs, {p.parallel.tp}, cache, fixed);
    if (again.placed.feasible && again.estimate.fits &&
        again.estimate.time_per_batch.value() < out.ordered_s * (1.0 - 1e-12)) {
      out.split = again.split;
      out.estimate = again.estimate;
      out.ordered_s = again.estimate.time_per_batch.value();
    }
  }
  return out;
}

/// The devices of tensor-parallel group `group` of replica `replica` of stage `stage` (Megatron-LM's rank
/// order tp, dp, pp over `c`'s rank order).
inline std::vector<int> group_devices(const cluster::cluster& c, const train::parallelism& p, int stage,
                                      int replica) {
  std::vector<int> out;
  const int first = (stage * p.dp + replica) * p.tp;
  for (int i = 0; i < p.tp; ++i) out.push_back(c.device_of_rank(first + i));
  return out;
}

}  // namespace phaze::place
