/// @file
/// Which physical devices run a plan: the rank order of a found plan (place/rank_assignment.hpp) under the
/// training-step model itself — every candidate order is timed by train::estimate_step with the plan's
/// degrees, knobs and split — and the devices of every pipeline stage, data-parallel replica and
/// tensor-parallel group under it (what `phaze plan` prints and what `--emit megatron` launches).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/parallel.hpp"
#include "phaze/core/progress.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/plan_search.hpp"
#include "phaze/place/rank_assignment.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/train/step.hpp"

namespace phaze::place {

/// How ranks are laid on devices: Megatron-LM's order (rank r on device r), the exact search (small
/// clusters), the group orders (every sequence of the cluster's device groups laid whole, in every rank
/// layout, each with the layers placed again; clusters without measured links), simulated annealing, or
/// automatic (Megatron-LM's on one device type without measured links, where every node is alike; exact up
/// to 8 devices; above that the group orders on a cluster of at most 8 groups without measured links or a
/// rank order, annealing otherwise).
enum class rank_method : std::uint8_t { automatic, megatron, exact, anneal, groups };

inline rank_method parse_rank_method(std::string_view name) {
  if (name == "auto") return rank_method::automatic;
  if (name == "megatron") return rank_method::megatron;
  if (name == "exact") return rank_method::exact;
  if (name == "anneal") return rank_method::anneal;
  if (name == "groups") return rank_method::groups;
  throw input_error("unknown rank method '" + std::string{name} +
                    "'; use auto, megatron, exact, groups or anneal");
}

/// The most device groups the group orders take (8! = 40,320 orders, each placed); more: anneal_ranks.
inline constexpr std::size_t max_group_orders_groups = 8;
/// The group orders time every rank layout of every group sequence while sequences x layouts x devices stays
/// within this many (their routes are followed hop by hop, O(devices) each: on 131,072 devices of four groups
/// 288 such timings, 37.7 M device-timings, took about 2.4 s on the development machine, so 2^26 about 4 s);
/// beyond it, the layouts of Megatron-LM's sequence and of the fastest.
inline constexpr std::uint64_t group_orders_budget = std::uint64_t{1} << 26;

/// Settings of the annealing (fixed, so that a plan's order does not depend on the machine).
struct rank_search_settings {
  std::uint64_t seed = 1;
  std::int64_t iterations = 20000;
  /// Only orders a node-by-node launcher (torchrun) can start: every node's ranks consecutive
  /// (anneal_ranks::node_blocks; an exact order that is not is searched again by such annealing).
  bool node_blocks = false;
  progress_hook progress{};  ///< the annealing's steps ("rank orders"); empty: none
  /// Runs the group orders' timings (each sequence of groups with its layouts) on a thread pool; empty: on
  /// the calling thread. They are then decided in the order of the serial search: the same order found.
  index_runner parallel{};
};

/// A plan's rank order and what it gains.
struct plan_order {
  std::string method;          ///< "megatron", "exact", "groups" or "anneal"
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
/// `tracked`, when given, tracks `c`'s routes (cluster::route_tracker): the same time.
inline double plan_time_on(const model::model& m, const cluster::cluster& c, const ranked_plan& p,
                           const sched::schedule_cache& cache, cluster::route_tracker* tracked = nullptr) {
  const auto e = train::estimate_step(m, c, p.parallel, p.knobs, cache, p.split, tracked);
  return e.fits ? e.time_per_batch.value() : std::numeric_limits<double>::infinity();
}

namespace detail {
/// Whether plan `p`'s layers may be placed again by the uneven placer: a 1F1B or GPipe pipeline whose degrees
/// and layout place_model can keep (no expert parallelism of its own, no embedding or loss counted as a
/// pipeline layer, which place_model does not carry).
inline bool placeable_again(const ranked_plan& p) {
  return p.knobs.schedule != train::pipeline_schedule::interleaved && p.parallel.pp > 1 &&
         p.parallel.ep <= 1 && (p.parallel.etp == 0 || p.parallel.etp == p.parallel.tp) &&
         !train::counts_embedding_or_loss(p.knobs);
}

/// The plan's split placed again on cluster `c` with its degrees and knobs (the chain DP under the step
/// model), when it is placeable_again and that is strictly faster than `than_s`; nullopt otherwise.
inline std::optional<model_placement> placed_again(const model::model& m, const cluster::cluster& c,
                                                   const ranked_plan& p, const sched::schedule_cache& cache,
                                                   double than_s) {
  if (!placeable_again(p)) return std::nullopt;
  placement_request fixed;
  fixed.tp = p.parallel.tp;
  fixed.pp = p.parallel.pp;
  fixed.dp = p.parallel.dp;
  model_placement again =
      place_model(m, c, p.knobs, {p.parallel.tp}, cache, fixed, chain_placer{}, p.parallel.cp);
  if (again.placed.feasible && again.estimate.fits &&
      again.estimate.time_per_batch.value() < than_s * (1.0 - 1e-12))
    return again;
  return std::nullopt;
}

/// order_ranks by the group orders: every sequence of the cluster's device groups, each group's devices laid
/// whole in their own order (place::regroup), in Megatron-LM's rank layout, Megatron-LM's order (the groups
/// as listed) first, and in every other rank layout (place::all_rank_layouts: which of the plan's dimensions
/// runs fastest along the devices, stages in order or folded; none with settings.node_blocks, since they
/// split a node's ranks). Each is timed with the plan's split and, with `replace_split`, with the layers
/// placed again on it (for the other layouts only when it already beats the best so far: their routes are
/// followed hop by hop); the fastest is kept when strictly faster than Megatron-LM's order, so the result is
/// never slower. Megatron-LM's layout is timed on the regrouped cluster, whose routes keep their closed
/// forms: groups! placements whatever the device count. Within group_orders_budget every other layout of
/// every sequence is timed too (the search is then exact over these orders); beyond it only those of
/// Megatron-LM's sequence and of the fastest (at most 22 timings followed hop by hop, O(devices) each).
/// The candidates of 32 sequences at a time are timed through settings.parallel (each sequence's on one
/// thread), then decided one after another in the order above, so the order found is the serial search's.
inline plan_order group_orders(const model::model& m, const cluster::cluster& c, const ranked_plan& p,
                               const sched::schedule_cache& cache, const rank_search_settings& settings,
                               bool replace_split) {
  if (c.groups().size() > max_group_orders_groups) {
    throw input_error("the group orders take at most " + std::to_string(max_group_orders_groups) +
                      " device groups and the cluster has " + std::to_string(c.groups().size()) +
                      "; use the annealing (`rank_method::anneal`)");
  }
  plan_order out;
  out.method = "groups";
  out.megatron_s = out.ordered_s =
      p.estimate.fits ? p.estimate.time_per_batch.value() : std::numeric_limits<double>::infinity();
  out.estimate = p.estimate;
  // The orders the layouts other than Megatron-LM's give a sequence, each once (with a dimension of 1 some
  // coincide); none under node_blocks, since they split a node's ranks.
  std::vector<std::pair<rank_layout, std::vector<int>>> layouts;
  const std::vector<int> identity = detail::ranks::identity(c.devices());
  for (const rank_layout& layout : all_rank_layouts()) {
    if (settings.node_blocks) break;
    std::vector<int> on = laid_out(identity, p.parallel, layout);
    const bool seen = on == identity || std::any_of(layouts.begin(), layouts.end(),
                                                    [&](const auto& l) { return l.second == on; });
    if (!seen) layouts.emplace_back(layout, std::move(on));
  }
  // Groups equal in device, count and node are interchangeable (their devices answer alike): each is named
  // by its class, the first group equal to it, and every distinct arrangement of the classes is one
  // sequence, the equal groups taken in their listed order.
  const std::size_t n = c.groups().size();
  std::vector<std::size_t> arrangement(n);
  for (std::size_t g = 0; g < n; ++g) {
    arrangement[g] = g;
    for (std::size_t h = 0; h < g; ++h) {
      if (c.groups()[h] == c.groups()[g]) {
        arrangement[g] = h;
        break;
      }
    }
  }
  const auto groups_of = [&](const std::vector<std::size_t>& classes) {
    std::vector<std::size_t> sequence;
    std::vector<bool> taken(n, false);
    for (const std::size_t k : classes) {
      std::size_t g = k;
      while (taken[g] || !(c.groups()[g] == c.groups()[k])) ++g;
      taken[g] = true;
      sequence.push_back(g);
    }
    return sequence;
  };
  std::sort(arrangement.begin(), arrangement.end());
  std::uint64_t sequences = 0;  // the distinct arrangements
  {
    std::vector<std::size_t> counting = arrangement;
    do ++sequences;
    while (std::next_permutation(counting.begin(), counting.end()));
  }
  // Every layout of every sequence while their hop-by-hop timings stay within group_orders_budget device-
  // timings; beyond it, of Megatron-LM's sequence and the fastest only.
  const bool every =
      sequences * layouts.size() * static_cast<std::uint64_t>(c.devices()) <= group_orders_budget;
  std::uint64_t total = every ? sequences * (layouts.size() + 1) : sequences + 2 * layouts.size();
  std::uint64_t done = 0;
  const auto started = std::chrono::steady_clock::now();
  // The sequences in the order the search visits them: Megatron-LM's (the groups as listed) first.
  const std::vector<std::size_t> listed = detail::ranks::sequence(n);
  std::vector<std::vector<std::size_t>> visited{listed};
  do {
    std::vector<std::size_t> sequence = groups_of(arrangement);
    if (sequence != listed) visited.push_back(std::move(sequence));
  } while (std::next_permutation(arrangement.begin(), arrangement.end()));
  // One candidate order: a sequence in Megatron-LM's layout (-1) or in layouts[layout]. Timed on its own
  // (in parallel: the estimate, and for a sequence in Megatron-LM's layout its layers placed again, kept when
  // faster than its own time), then decided in the serial search's order against the best so far.
  struct candidate {
    std::size_t sequence = 0;
    int layout = -1;
    train::step_estimate estimate;
    double own_s = 0.0;
    std::optional<model_placement> again;
  };
  const auto ordered_cluster = [&](const regrouped_cluster& r, int layout) {
    return layout < 0 ? r.cluster : r.cluster.with_order(layouts[static_cast<std::size_t>(layout)].second);
  };
  const auto time_alone = [&](const regrouped_cluster& r, candidate& k) {
    const cluster::cluster on = ordered_cluster(r, k.layout);
    k.estimate = train::estimate_step(m, on, p.parallel, p.knobs, cache, p.split);
    k.own_s = k.estimate.fits ? k.estimate.time_per_batch.value() : std::numeric_limits<double>::infinity();
    // Megatron-LM's order keeps the plan's split (the plan search placed it there already); the other
    // sequences are placed again in Megatron-LM's layout always, the other layouts only when they lead.
    if (replace_split && k.layout < 0 && k.sequence != 0) k.again = placed_again(m, on, p, cache, k.own_s);
  };
  // Decides candidate `k` as the serial search did: its layers placed again when it leads (or always, in
  // Megatron-LM's layout), kept when strictly faster than the best so far. Returns its time.
  const auto decide = [&](candidate& k) -> double {
    ++out.evaluated;
    const double than = std::min(k.own_s, out.ordered_s);
    std::optional<model_placement> again;
    if (replace_split) {
      if (k.layout < 0) {  // k.again is empty for Megatron-LM's own order
        if (k.again && k.again->estimate.time_per_batch.value() < than * (1.0 - 1e-12))
          again = std::move(k.again);
      } else if (k.own_s < out.ordered_s) {
        again = placed_again(m, ordered_cluster(regroup(c, visited[k.sequence]), k.layout), p, cache, than);
      }
    }
    const double t = again ? again->estimate.time_per_batch.value() : k.own_s;
    if (t < out.ordered_s * (1.0 - 1e-12)) {
      const regrouped_cluster r = regroup(c, visited[k.sequence]);
      out.order = k.layout < 0
                      ? r.order
                      : laid_out(r.order, p.parallel, layouts[static_cast<std::size_t>(k.layout)].first);
      out.ordered_s = t;
      out.estimate = again ? again->estimate : k.estimate;
      out.split = again ? again->split : std::vector<train::stage_layers>{};
    }
    ++done;
    if (settings.progress)
      settings.progress({"rank orders", done, total,
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()});
    return t;
  };
  // Times the candidates of the `chosen` sequences (indices into `visited`), each in Megatron-LM's layout
  // when `megatron` and in every other layout when `others`, a batch of sequences at a time through
  // settings.parallel, and decides them in order; the fastest sequence in Megatron-LM's layout is remembered.
  std::size_t fastest = 0;
  double fastest_s = std::numeric_limits<double>::infinity();
  const auto search = [&](const std::vector<std::size_t>& chosen, bool megatron, bool others) {
    constexpr std::size_t batch = 32;  // sequences timed before they are decided (bounds the memory kept)
    for (std::size_t from = 0; from < chosen.size(); from += batch) {
      const std::size_t count = std::min(batch, chosen.size() - from);
      std::vector<std::vector<candidate>> timed(count);
      run_indices(settings.parallel, count, [&](std::size_t b) {
        const std::size_t sequence = chosen[from + b];
        const regrouped_cluster r = regroup(c, visited[sequence]);
        if (megatron) timed[b].push_back({sequence, -1, {}, 0.0, std::nullopt});
        if (others)
          for (std::size_t l = 0; l < layouts.size(); ++l)
            timed[b].push_back({sequence, static_cast<int>(l), {}, 0.0, std::nullopt});
        for (candidate& k : timed[b]) time_alone(r, k);
      });
      for (auto& of_sequence : timed) {
        for (candidate& k : of_sequence) {
          const double t = decide(k);
          if (k.layout < 0 && t < fastest_s * (1.0 - 1e-12)) {
            fastest_s = t;
            fastest = k.sequence;
          }
        }
      }
    }
  };
  std::vector<std::size_t> all(visited.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  // Every sequence in Megatron-LM's layout (closed-form routes) and, within the budget, in the others (their
  // routes are followed hop by hop); beyond it the others on Megatron-LM's sequence and the fastest.
  search(all, true, every);
  if (!every) {
    std::vector<std::size_t> again{0};
    if (fastest != 0) again.push_back(fastest);
    total = sequences + again.size() * layouts.size();
    search(again, false, true);
  }
  // Megatron-LM's order is the identity: an order equal to it says nothing new.
  if (out.order == identity) out.order.clear();
  return out;
}
}  // namespace detail

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
    } else if (c.devices() <= 8) {
      method = rank_method::exact;
    } else {
      method = !c.measured() && c.order().empty() && c.groups().size() <= max_group_orders_groups
                   ? rank_method::groups
                   : rank_method::anneal;
    }
  }
  if (method == rank_method::groups) return detail::group_orders(m, c, p, cache, settings, replace_split);
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
  // The annealing changes one order in place by exchanges of ranks: its routes are kept up to date
  // (cluster::route_tracker) instead of followed rank by rank for every order it times, with the same
  // times. Other clusters (the exact search's) are timed afresh.
  std::optional<cluster::route_tracker> tracker;
  const cluster::cluster* watched = nullptr;
  auto cost = [&](const cluster::cluster& ordered) {
    return plan_time_on(m, ordered, p, cache, &ordered == watched ? &*tracker : nullptr);
  };
  rank_assignment found;
  const auto anneal = [&] {
    rank_assignment r = anneal_ranks(c, p.parallel, cost)
                            .seed(settings.seed)
                            .iterations(settings.iterations)
                            .node_blocks(settings.node_blocks)
                            .progress(settings.progress)
                            .watch({[&](const cluster::cluster& work) {
                                      tracker.emplace(work);
                                      watched = &work;
                                    },
                                    [&](int a, int b) { tracker->exchanged(a, b); },
                                    [&] { watched = nullptr; }})  // the chain's cluster goes
                            .run();
    return r;
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
  if (replace_split && !out.order.empty()) {
    if (const auto again = detail::placed_again(m, ordered, p, cache, out.ordered_s)) {
      out.split = again->split;
      out.estimate = again->estimate;
      out.ordered_s = again->estimate.time_per_batch.value();
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
