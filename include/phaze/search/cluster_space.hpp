/// @file
/// Which cluster to build: a space of clusters (device types, each with a price, a power and a range of
/// counts; a budget and an optional power cap), its compositions in increasing cost, and the search that
/// plans each composition (place::search_plans, uneven stages under the step-time model) and returns the
/// Pareto fronts of throughput against cost and against power. It is exact: a composition is skipped only
/// when a sound upper bound on its throughput (layer_throughput_bound, peak_throughput_bound) shows that a
/// composition already planned, no dearer and drawing no more power, is strictly faster
/// (docs/cluster-search.md).
///
///     const auto found = search::cluster_search(space, model, knobs).choices(cheap).run();
///     for (const auto& p : found.cost_front) ...  // increasing cost and throughput
///
/// Complexity: one plan search per composition and group order planned; the compositions (at most
/// cluster_space::max_compositions) are enumerated depth first with the budget cutting each count range.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/links.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/progress.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/plan_search.hpp"
#include "phaze/sched/bounds.hpp"
#include "phaze/sched/layer_problem.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/search/result.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::search {

/// Electrical power, in watts (joules per second).
using watts = quantity<dimension{.second = -1, .joule = 1}>;

/// One device type a cluster may be built of: the device, the node it comes in, what one device costs and
/// draws (its share of the node included), and how many of it a cluster may hold: `min`, `min + step`, ...
/// up to `max` (0 among them when `min` is 0: the type may be left out).
struct device_offer {
  std::string label;  ///< how reports name it (the preset, the device file's stem or the device's name)
  hw::device device{};
  cluster::node_spec node{};
  double price_usd = 0.0;  ///< per device, its share of the node (host, network, chassis) included
  watts power{0.0};        ///< per device, its share of the node included
  int min = 0;
  int max = 0;
  int step = 0;  ///< 0: the node's size

  /// The step between counts: `step`, or the node's size when it is 0.
  [[nodiscard]] int count_step() const { return step > 0 ? step : node.devices; }
};

/// A space of clusters: the device types, how many types one cluster may mix, the budget and the power cap.
struct cluster_space {
  static constexpr std::size_t max_device_types = 16;
  /// The most device types one cluster may mix (every rank order of them is planned: 4! = 24 at most).
  static constexpr int max_types_per_cluster = 4;
  /// The most compositions a search plans; a larger space is refused with what to change.
  static constexpr std::size_t max_compositions = 4096;

  std::vector<device_offer> devices;
  int max_types = 2;  ///< device types one cluster may mix, 1 to max_types_per_cluster
  double budget_usd = 0.0;
  std::optional<watts> power_cap;  ///< none: no cap
  /// The collectives' efficiency on every cluster of the space (a calibration's collective factor,
  /// train::calibrated; the links at their full rate otherwise).
  cluster::collective_efficiency efficiency{};
};

namespace rules {
[[noreturn]] inline void a_cluster_space_needs_device_types() {
  throw input_error("a cluster space needs between 1 and " + std::to_string(cluster_space::max_device_types) +
                    " device types");
}
[[noreturn]] inline void max_types_must_be_between_1_and_4(int given) {
  throw input_error("max_types must be between 1 and " +
                    std::to_string(cluster_space::max_types_per_cluster) +
                    " (device types per cluster), got " + std::to_string(given));
}
[[noreturn]] inline void budget_must_be_positive() {
  throw input_error("the budget (budget_usd) must be a finite number above 0");
}
[[noreturn]] inline void power_cap_must_be_positive() {
  throw input_error("the power cap (power_cap_w) must be a finite number above 0");
}
[[noreturn]] inline void device_price_and_power_must_be_positive(std::size_t type) {
  throw input_error("device type " + std::to_string(type) +
                    ": price_usd and power_w must be finite numbers above 0 (per device, its share of the "
                    "node included)");
}
[[noreturn]] inline void device_counts_must_satisfy_0_le_min_le_max(std::size_t type) {
  throw input_error("device type " + std::to_string(type) +
                    ": counts need 0 <= min <= max, max >= 1, step >= 1 " + "and max at most " +
                    std::to_string(cluster::cluster::max_devices));
}
[[noreturn]] inline void too_many_compositions() {
  throw input_error("the cluster space holds more than " + std::to_string(cluster_space::max_compositions) +
                    " compositions within the budget and power cap; raise the steps, narrow min..max, lower "
                    "the budget or set max_types to 1");
}
[[noreturn]] inline void map_must_return_every_point() {
  throw error("a cluster search's map returned another number of points than it was given compositions");
}
}  // namespace rules

/// Checks a space (not its compositions: compositions_of counts them); throws input_error naming the rule.
inline void validate(const cluster_space& s) {
  if (s.devices.empty() || s.devices.size() > cluster_space::max_device_types)
    rules::a_cluster_space_needs_device_types();
  if (s.max_types < 1 || s.max_types > cluster_space::max_types_per_cluster)
    rules::max_types_must_be_between_1_and_4(s.max_types);
  if (!(s.budget_usd > 0.0 && s.budget_usd <= 1e18)) rules::budget_must_be_positive();
  if (s.power_cap && !(s.power_cap->value() > 0.0 && s.power_cap->value() <= 1e18))
    rules::power_cap_must_be_positive();
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const device_offer& o = s.devices[i];
    hw::validate(o.device);
    cluster::validate(o.node);
    if (!(o.price_usd > 0.0 && o.price_usd <= 1e18 && o.power.value() > 0.0 && o.power.value() <= 1e18))
      rules::device_price_and_power_must_be_positive(i);
    if (o.min < 0 || o.max < 1 || o.min > o.max || o.step < 0 || o.max > cluster::cluster::max_devices)
      rules::device_counts_must_satisfy_0_le_min_le_max(i);
  }
}

/// One cluster of the space: how many devices of each type, and what they cost, draw and compute at peak.
struct composition {
  std::vector<int> counts;  ///< devices of each type, in the space's order (0: the type is left out)
  double cost_usd = 0.0;
  watts power{0.0};
  flops_per_second peak{0.0};  ///< the devices' peak matrix rates summed (hw::peak_matrix_flops)

  [[nodiscard]] int devices() const {
    int n = 0;
    for (const int c : counts) n += c;
    return n;
  }
  [[nodiscard]] int types() const {
    return static_cast<int>(std::count_if(counts.begin(), counts.end(), [](int c) { return c > 0; }));
  }
  friend bool operator==(const composition&, const composition&) = default;
};

namespace detail::cluster_space_search {
/// Depth first over the types, each count range cut at the budget and the power cap (costs and powers only
/// grow with a count). Throws as soon as the list outgrows the limit, so a huge space costs no more than
/// the limit to refuse.
inline void enumerate(const cluster_space& s, std::size_t type, composition& partial, int types_used,
                      std::vector<composition>& out) {
  if (type == s.devices.size()) {
    if (types_used == 0) return;
    out.push_back(partial);
    if (out.size() > cluster_space::max_compositions) rules::too_many_compositions();
    return;
  }
  const device_offer& o = s.devices[type];
  const int step = o.count_step();
  for (std::int64_t n = o.min; n <= o.max; n += step) {
    const int used = types_used + (n > 0 ? 1 : 0);
    if (used > s.max_types) break;
    const double cost = partial.cost_usd + static_cast<double>(n) * o.price_usd;
    const watts power = partial.power + o.power * static_cast<double>(n);
    if (cost > s.budget_usd || (s.power_cap && power > *s.power_cap)) break;
    composition next = partial;
    next.counts[type] = static_cast<int>(n);
    next.cost_usd = cost;
    next.power = power;
    next.peak = partial.peak + hw::peak_matrix_flops(o.device) * static_cast<double>(n);
    enumerate(s, type + 1, next, used, out);
  }
}
}  // namespace detail::cluster_space_search

/// Every composition of a space within its budget and power cap, with at least one device and at most
/// `max_types` types, in increasing cost (then power, then counts in lexicographic order: a total order, so
/// the list does not depend on how it was built). Throws input_error for a broken space or one with more
/// than cluster_space::max_compositions compositions.
inline constexpr auto compositions_of = [](const cluster_space& s) -> std::vector<composition> {
  validate(s);
  std::vector<composition> out;
  composition empty;
  empty.counts.assign(s.devices.size(), 0);
  detail::cluster_space_search::enumerate(s, 0, empty, 0, out);
  std::sort(out.begin(), out.end(), [](const composition& a, const composition& b) {
    if (a.cost_usd != b.cost_usd) return a.cost_usd < b.cost_usd;
    if (a.power != b.power) return a.power < b.power;
    return a.counts < b.counts;
  });
  return out;
};

/// Model FLOPs (matrix work, forward and backward, no recomputation) of one training sample at the knobs'
/// sequence length: what MFU counts (model::training_flops_per_iteration).
inline flops model_flops_per_sample(const model::model& m, const train::training_knobs& k) {
  const model::at_sequence resized{m, k.sequence};
  const model::model& run = *resized;
  return model::training_flops_per_iteration(run, 1);
}

/// The peak bound: an upper bound on the samples per second of every plan phaze estimates on a cluster
/// whose devices' peak matrix rates sum to `peak`, with `per_sample` model FLOPs per sample: peak /
/// per_sample, times 1 + 1e-9 for rounding (so it lies strictly above every estimate). Every op takes at
/// least its FLOPs over the device's peak (cost::cost_of; tests/cost/op_cost_test.cpp), tensor parallelism
/// splits a layer's matrix FLOPs over its tp devices, and the argument of layer_throughput_bound with the
/// peak in place of each layer's device-seconds gives T sum_s tp dp P_s >= B F. Weaker than
/// layer_throughput_bound on datasheet devices (GEMMs reach only part of the peak); the search takes the
/// lesser of the two.
inline constexpr auto peak_throughput_bound = [](flops_per_second peak, flops per_sample) -> double {
  return peak.value() / per_sample.value() * (1.0 + 1e-9);
};

/// What a sample costs a device type at least, per distinct layer of the model (model::distinct_layers):
/// the least device-seconds tp t_l / mb over the settings the plan search may try, where t_l is the lower
/// bound (sched::lower_bounds: critical path, work per pool) of the layer's forward plus backward pass on
/// the device for a microbatch of mb samples at tensor-parallel width tp, with ideal links.
struct layer_work {
  std::vector<double> device_seconds;  ///< per distinct layer: the least device-seconds per sample
  std::vector<std::int64_t> count;     ///< per distinct layer: how many nodes of the model repeat it
};

/// The layer_work of `run` on device `d` over every setting place::search_plans may try with `choices`:
/// tensor-parallel widths that are powers of two up to `widest` (and any `choices` fixes), its microbatch
/// sizes, sequence parallelism off and on. Why each is a lower bound of phaze's own layer times: every
/// schedule of a pass is at least its lower bound; the lower bound only grows with the tasks' durations,
/// and real links only lengthen the collectives; settings the plan search does not try only lower the
/// minimum. A shape the model cannot take is skipped (no plan uses it).
inline layer_work layer_work_of(const model::model& run, const hw::device& d,
                                const train::training_knobs& base, const place::plan_choices& choices,
                                int widest) {
  const cluster::route ideal{cluster::link{bytes_per_second{1e30}, seconds{0.0}}, {}};
  std::vector<int> widths;
  for (int tp = 1; tp <= widest; tp *= 2) widths.push_back(tp);
  for (const int tp : choices.tensor_parallel)
    if (tp > 0 && std::find(widths.begin(), widths.end(), tp) == widths.end()) widths.push_back(tp);
  const std::vector<std::int64_t> sizes = choices.microbatch_sizes();
  const auto kinds = model::distinct_layers(run);
  layer_work out;
  out.device_seconds.assign(kinds.size(), std::numeric_limits<double>::infinity());
  for (const auto& kind : kinds) out.count.push_back(kind.count);
  for (const int tp : widths) {
    for (const std::int64_t mb : sizes) {
      for (const bool sp : {false, true}) {
        train::training_knobs k = base;
        k.microbatch = mb;
        k.sequence_parallel = sp;
        const model::layer_shape shape = train::layer_shape_of(run, train::parallelism{tp, 1, 1}, k);
        for (std::size_t i = 0; i < kinds.size(); ++i) {
          model::layer l;
          try {
            l = model::layer_at(run, static_cast<std::size_t>(kinds[i].first_node), shape);
          } catch (const input_error&) {
            continue;
          }
          const seconds t =
              sched::lower_bounds(sched::layer_problem(l, d, ideal, sched::pass::forward)).best() +
              sched::lower_bounds(sched::layer_problem(l, d, ideal, sched::pass::backward)).best();
          out.device_seconds[i] =
              std::min(out.device_seconds[i], t.value() * static_cast<double>(tp) / static_cast<double>(mb));
        }
      }
    }
  }
  // A layer no shape admits costs nothing here (0 keeps the bound sound: it only loosens it).
  for (double& w : out.device_seconds)
    if (!std::isfinite(w)) w = 0.0;
  return out;
}

/// The layer bound: an upper bound on the samples per second of every plan phaze estimates on a
/// cluster of n_t devices of each type t (`types[t] = {n_t, work_t}` with work_t that type's layer_work),
/// times 1 + 1e-9 for rounding. Why, with B the global batch, T the time per batch and x = B / T: a pipeline
/// stage s of tp x dp devices of type t with microbatches of mb samples takes per microbatch at least its
/// layers' forward and backward times (recomputation and sends only add), each at least W_l,t mb / tp
/// (layer_work); the pipeline takes at least m = B / (dp mb) stage times of its slowest stage ((m - 1) t_max
/// + sum t_i >= m t_max; (m + (p - 1) / v) t_max interleaved), and gradient synchronization and the
/// optimizer step only add, so T tp dp >= B sum_{l in s} W_l,t. Summed over the stages on type t, which use
/// at most n_t devices: x sum_{l on t} W_l,t <= n_t, each layer on one type.
/// - One type: x <= n / sum_l W_l.
/// - Several types: for any weights lambda on the simplex, lambda_t / n_t times type t's inequality, summed,
///   gives x sum_l min_t lambda_t W_l,t / n_t <= 1 whatever the split of the layers (the weak duality of the
///   split's linear relaxation), so x <= 1 / g(lambda) for the concave g. Two types: g is evaluated where one
///   layer's two terms meet (its breakpoints), its maximum. Three or four: on a grid of the simplex (steps of
///   1/48 and 1/24) and at the weights proportional to each type's own bound n_t / sum_l W_l,t; any weights
///   give a sound bound, these a close one.
/// Infinite when the work bounds say nothing (all zero).
inline double layer_throughput_bound(const std::vector<std::pair<int, const layer_work*>>& types) {
  std::vector<std::pair<double, const layer_work*>> used;  // 1 / n_t and the type's work
  for (const auto& [n, work] : types)
    if (n > 0) used.emplace_back(1.0 / static_cast<double>(n), work);
  if (used.empty()) return 0.0;
  auto g = [&](const std::vector<double>& weights) {
    double sum = 0.0;
    const std::size_t kinds = used.front().second->device_seconds.size();
    for (std::size_t k = 0; k < kinds; ++k) {
      double least = std::numeric_limits<double>::infinity();
      for (std::size_t t = 0; t < used.size(); ++t)
        least = std::min(least, weights[t] * used[t].first * used[t].second->device_seconds[k]);
      sum += static_cast<double>(used.front().second->count[k]) * least;
    }
    return sum;
  };
  double best = 0.0;
  if (used.size() == 1) {
    best = g({1.0});
  } else if (used.size() == 2) {
    // Breakpoints of the two-type g: lambda a = (1 - lambda) b for a layer's a = W_1 / n_1, b = W_2 / n_2.
    const auto& w1 = used[0].second->device_seconds;
    const auto& w2 = used[1].second->device_seconds;
    for (std::size_t k = 0; k < w1.size(); ++k) {
      const double a = used[0].first * w1[k];
      const double b = used[1].first * w2[k];
      if (!(a + b > 0.0)) continue;
      const double lambda = b / (a + b);
      best = std::max(best, g({lambda, 1.0 - lambda}));
    }
  } else {
    const std::size_t n = used.size();
    // The weights proportional to each type's own bound: 1 / (1 / n_t sum_l count_l W_l,t).
    std::vector<double> weights(n, 0.0);
    double total = 0.0;
    for (std::size_t t = 0; t < n; ++t) {
      double work = 0.0;
      for (std::size_t k = 0; k < used[t].second->device_seconds.size(); ++k)
        work += static_cast<double>(used[t].second->count[k]) * used[t].second->device_seconds[k];
      weights[t] = work > 0.0 ? 1.0 / (used[t].first * work) : 0.0;
      total += weights[t];
    }
    if (total > 0.0) {
      for (double& w : weights) w /= total;
      best = g(weights);
    }
    // A grid of the simplex: every composition of `steps` into n non-negative parts.
    const int steps = n == 3 ? 48 : 24;
    std::vector<int> parts(n, 0);
    auto visit = [&](auto&& self, std::size_t t, int left) -> void {
      if (t + 1 == n) {
        parts[t] = left;
        for (std::size_t i = 0; i < n; ++i) weights[i] = static_cast<double>(parts[i]) / steps;
        best = std::max(best, g(weights));
        return;
      }
      for (int q = 0; q <= left; ++q) {
        parts[t] = q;
        self(self, t + 1, left - q);
      }
    };
    visit(visit, 0, steps);
  }
  return best > 0.0 ? 1.0 / best * (1.0 + 1e-9) : std::numeric_limits<double>::infinity();
}

/// In which rank orders the device types of a composition of several types are planned. The order decides
/// which type runs the first pipeline stages (the embedding) and which the last (the head): Megatron-LM's
/// order lays stages over the devices group by group, and the chain DP keeps that order.
enum class group_orders : std::uint8_t {
  every,  ///< every order (both for two types, 6 for three, 24 for four); the faster plan wins (the
          ///< first order, in the space's order permuted lexicographically, on a tie): exact over orders
  faster_first,  ///< the types in decreasing peak matrix rate (the space's order on a tie): one order
};

/// A composition and what became of it.
struct cluster_point {
  std::size_t index = 0;  ///< position in compositions_of's order (increasing cost)
  composition mix;
  outcome status = outcome::pruned;
  double upper_bound_samples_per_s = 0.0;  ///< the lesser of the peak and the layer bounds
  /// Evaluated: the types of the space in the rank order of the best plan's cluster (its first stages run on
  /// the first type).
  std::vector<std::size_t> group_order;
  std::optional<cluster::cluster> cluster;  ///< evaluated: the cluster the best plan runs on
  std::optional<place::ranked_plan> plan;   ///< evaluated: the best plan
  double samples_per_s = 0.0;               ///< evaluated: the best plan's throughput
  std::size_t plans_evaluated = 0;          ///< plans the plan searches of this composition timed
  bytes smallest_memory_need{0.0};          ///< infeasible: the leanest plan's need (0: no plan admissible)
};

/// The outcome of a cluster search.
struct cluster_search_result {
  std::vector<cluster_point> compositions;  ///< every composition within the budget and cap, cost order
  std::vector<cluster_point> cost_front;    ///< Pareto front of throughput up, cost down: increasing cost
  std::vector<cluster_point> power_front;   ///< Pareto front of throughput up, power down: increasing power
  std::size_t evaluated = 0;                ///< compositions planned (infeasible ones included)
  std::size_t infeasible = 0;               ///< planned, but no plan fits or none is admissible
  std::size_t pruned = 0;                   ///< skipped by the bound
  std::size_t plans_evaluated = 0;
  std::size_t unsearched = 0;    ///< compositions left when cluster_search::stop_when stopped the search
  flops per_sample{0.0};         ///< model FLOPs per sample (model_flops_per_sample)
  std::vector<layer_work> work;  ///< per device type of the space: what a sample costs it at least
  std::string scheduler;         ///< the layer schedules behind the numbers
  double seconds = 0.0;          ///< wall time of the search
};

namespace detail::cluster_space_search {
/// The Pareto front of the evaluated points by `key` (cost or power) down and throughput up, in increasing
/// key: a point is on it unless another has a key no larger and a throughput no smaller, with one of the two
/// strictly better or both equal and an earlier index (ties keep the cheaper enumeration, deterministically).
template <class Key>
std::vector<cluster_point> front_of(const std::vector<cluster_point>& points, Key key) {
  std::vector<const cluster_point*> feasible;
  for (const auto& p : points)
    if (p.status == outcome::evaluated) feasible.push_back(&p);
  std::sort(feasible.begin(), feasible.end(), [&](const cluster_point* a, const cluster_point* b) {
    if (key(*a) != key(*b)) return key(*a) < key(*b);
    if (a->samples_per_s != b->samples_per_s) return a->samples_per_s > b->samples_per_s;
    return a->index < b->index;
  });
  std::vector<cluster_point> front;
  double best = 0.0;
  for (const cluster_point* p : feasible) {
    if (front.empty() || p->samples_per_s > best) {
      front.push_back(*p);
      best = p->samples_per_s;
    }
  }
  return front;
}
}  // namespace detail::cluster_space_search

/// The Pareto front of throughput against cost among the evaluated points, in increasing cost.
inline std::vector<cluster_point> cost_front_of(const std::vector<cluster_point>& points) {
  return detail::cluster_space_search::front_of(points,
                                                [](const cluster_point& p) { return p.mix.cost_usd; });
}
/// The Pareto front of throughput against power among the evaluated points, in increasing power.
inline std::vector<cluster_point> power_front_of(const std::vector<cluster_point>& points) {
  return detail::cluster_space_search::front_of(points,
                                                [](const cluster_point& p) { return p.mix.power.value(); });
}

/// How a cluster search plans one round of compositions (cluster_search::map): given the indices to plan (in
/// compositions_of's order) and the function that plans one, the planned points in the same order. A point
/// may come back without its plan and cluster (planned elsewhere, by another process): only its status,
/// throughput, plans timed and memory need are read; cluster_search::complete plans the fronts' such points
/// again.
using cluster_map = std::function<std::vector<cluster_point>(
    const std::vector<std::size_t>&, const std::function<cluster_point(std::size_t)>&)>;

/// The search over a cluster space, with named parameters:
///
///     search::cluster_search(space, model, knobs).choices(c).exhaustive().run();
///
/// `knobs` gives what is not searched (global batch, sequence, precision, optimizer, schedule); every
/// composition is planned by place::search_plans with `choices` (by default uneven stages by the chain DP,
/// every tensor-parallel width, microbatch, recomputation mode and sequence-parallel setting).
///
/// Pruning (exact): compositions are visited in increasing cost. Before planning one, its bound U
/// (the lesser of layer_throughput_bound and peak_throughput_bound) is compared with the points planned so
/// far: when one of them, no dearer (all of them are, in cost order), reaches U, and one of them drawing no
/// more power reaches U, the composition is strictly dominated on both fronts (its throughput is below U) and
/// is skipped. A skipped composition lies on neither front, and every point it would dominate is dominated by
/// the point that dominates it, so both fronts equal those of planning every composition (`exhaustive()`;
/// tests/search/cluster_space_test.cpp).
class cluster_search {
 public:
  cluster_search(cluster_space space, model::model m, train::training_knobs base)
      : space_(std::move(space)), model_(std::move(m)), base_(base) {
    choices_.placement = place::stage_placement::uneven;
    choices_.keep = 1;
  }

  /// What each composition's plan search varies and fixes (place::plan_choices). A composition keeps its
  /// best plan only (plan_choices::keep is set to 1: placements that cannot beat it are cut off).
  cluster_search& choices(place::plan_choices c) {
    choices_ = std::move(c);
    choices_.keep = 1;
    return *this;
  }
  /// Plan every composition (no pruning): the oracle the tests compare with.
  cluster_search& exhaustive(bool on = true) {
    exhaustive_ = on;
    return *this;
  }
  /// The rank orders a composition of several types is planned in (every order by default).
  cluster_search& orders(group_orders o) {
    orders_ = o;
    return *this;
  }
  /// The scheduler of the layer schedules (the list scheduler by default: optimal on datasheet devices).
  cluster_search& scheduler(sched::any_scheduler s) {
    scheduler_ = std::move(s);
    return *this;
  }
  /// Reports the compositions visited ("compositions") as the search goes; default none.
  cluster_search& progress(progress_hook hook) {
    progress_ = std::move(hook);
    return *this;
  }

  /// Stops the search before the next round of compositions once `stop` answers true (a signal a program
  /// caught, a deadline): run() then returns the points planned so far, their fronts, and in
  /// cluster_search_result::unsearched how many compositions it left. The fronts are those of the
  /// compositions searched (the cheapest ones: they are visited in increasing cost). Default: never.
  cluster_search& stop_when(std::function<bool()> stop) {
    stop_ = std::move(stop);
    return *this;
  }

  /// Plans the compositions in rounds of `round` through `m` (by default one at a time, here). The pruning
  /// test of a round's compositions sees the points of the rounds before it only, which are no dearer, so
  /// the fronts are those of a search one at a time; more compositions may be planned (none of a round
  /// prunes another of it).
  cluster_search& map(cluster_map m, std::size_t round) {
    map_ = std::move(m);
    round_ = std::max<std::size_t>(round, 1);
    return *this;
  }

  /// Runs the search; throws input_error for a broken space.
  [[nodiscard]] cluster_search_result run() const {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<composition> mixes = compositions_of(space_);
    const sched::schedule_cache cache{scheduler_};
    cluster_search_result out;
    out.per_sample = model_flops_per_sample(model_, base_);
    out.scheduler = std::string{cache.scheduler()};
    out.work = work_of();
    const auto plan_one = [&](std::size_t i) {
      cluster_point p = bounded(i, mixes[i], out);
      plan(p, cache);
      return p;
    };
    double fastest = 0.0;  // the best throughput planned so far, at no larger cost (cost order)
    std::vector<std::pair<watts, double>> planned;  // power and throughput of every feasible point so far
    for (std::size_t first = 0; first < mixes.size(); first += round_) {
      if (stop_ && stop_()) {
        out.unsearched = mixes.size() - first;
        break;
      }
      const std::size_t end = std::min(mixes.size(), first + round_);
      std::vector<cluster_point> points;
      std::vector<std::size_t> to_plan;
      for (std::size_t i = first; i < end; ++i) {
        if (progress_)
          progress_({"compositions", i, mixes.size(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
        cluster_point p = bounded(i, mixes[i], out);
        const double bound = p.upper_bound_samples_per_s;
        const bool dominated_on_cost = fastest >= bound;
        const bool dominated_on_power = std::any_of(planned.begin(), planned.end(), [&](const auto& q) {
          return q.first <= p.mix.power && q.second >= bound;
        });
        if (!exhaustive_ && dominated_on_cost && dominated_on_power) {
          p.status = outcome::pruned;
          ++out.pruned;
        } else {
          to_plan.push_back(i);
        }
        points.push_back(std::move(p));
      }
      std::vector<cluster_point> done;
      if (map_) {
        done = map_(to_plan, plan_one);
        if (done.size() != to_plan.size()) rules::map_must_return_every_point();
      } else {
        for (const std::size_t i : to_plan) done.push_back(plan_one(i));
      }
      for (std::size_t k = 0; k < to_plan.size(); ++k) {
        cluster_point& p = points[to_plan[k] - first];
        cluster_point q = std::move(done[k]);
        q.index = p.index;
        q.mix = p.mix;
        q.upper_bound_samples_per_s = p.upper_bound_samples_per_s;
        p = std::move(q);
        ++out.evaluated;
        out.plans_evaluated += p.plans_evaluated;
        if (p.status == outcome::evaluated) {
          fastest = std::max(fastest, p.samples_per_s);
          planned.emplace_back(p.mix.power, p.samples_per_s);
        } else {
          ++out.infeasible;
        }
      }
      for (auto& p : points) out.compositions.push_back(std::move(p));
    }
    out.cost_front = cost_front_of(out.compositions);
    out.power_front = power_front_of(out.compositions);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }

  /// Plans again the points of `r`'s fronts that came back from the map without their plan (planned by
  /// another process): the same search on the same composition gives the same plan. Throws internal_error
  /// where it does not.
  void complete(cluster_search_result& r) const {
    const sched::schedule_cache cache{scheduler_};
    for (auto* front : {&r.cost_front, &r.power_front}) {
      for (cluster_point& p : *front) {
        if (p.status != outcome::evaluated || p.plan) continue;
        cluster_point again = bounded(p.index, p.mix, r);
        plan(again, cache);
        if (again.status != outcome::evaluated || again.samples_per_s != p.samples_per_s)
          throw error("a composition planned again gave another plan than the first time");
        p = again;
        r.compositions.at(p.index) = std::move(again);
      }
    }
  }

  /// The rank orders a composition is planned in: its types (indices into the space), first stages first.
  [[nodiscard]] std::vector<std::vector<std::size_t>> orders_of(const composition& mix) const {
    std::vector<std::size_t> types;
    for (std::size_t t = 0; t < mix.counts.size(); ++t)
      if (mix.counts[t] > 0) types.push_back(t);
    if (types.size() < 2) return {types};
    if (orders_ == group_orders::every) {
      std::vector<std::vector<std::size_t>> all;
      do {
        all.push_back(types);
      } while (std::next_permutation(types.begin(), types.end()));
      return all;
    }
    const auto peak = [&](std::size_t t) { return hw::peak_matrix_flops(space_.devices[t].device); };
    std::stable_sort(types.begin(), types.end(),
                     [&](std::size_t a, std::size_t b) { return peak(a) > peak(b); });
    return {types};
  }

 private:
  /// What a sample costs each device type of the space at least (layer_work_of).
  [[nodiscard]] std::vector<layer_work> work_of() const {
    const model::at_sequence resized{model_, base_.sequence};
    const model::model& run = *resized;
    int widest = 1;
    for (const auto& o : space_.devices) widest = std::max(widest, o.node.devices);
    std::vector<layer_work> work;
    for (const auto& o : space_.devices)
      work.push_back(layer_work_of(run, o.device, base_, choices_, widest));
    return work;
  }
  /// Composition `i` (`mix`) with its throughput bound, not planned yet.
  [[nodiscard]] static cluster_point bounded(std::size_t i, const composition& mix,
                                             const cluster_search_result& r) {
    cluster_point p;
    p.index = i;
    p.mix = mix;
    std::vector<std::pair<int, const layer_work*>> types;
    for (std::size_t t = 0; t < p.mix.counts.size(); ++t)
      if (p.mix.counts[t] > 0) types.emplace_back(p.mix.counts[t], &r.work[t]);
    p.upper_bound_samples_per_s =
        std::min(peak_throughput_bound(p.mix.peak, r.per_sample), layer_throughput_bound(types));
    return p;
  }
  /// Plans one composition in each of its orders and keeps the fastest plan.
  void plan(cluster_point& p, const sched::schedule_cache& cache) const {
    p.status = outcome::infeasible;
    for (const auto& order : orders_of(p.mix)) {
      std::vector<cluster::device_group> groups;
      for (const std::size_t t : order) {
        const device_offer& o = space_.devices[t];
        groups.push_back({o.device, p.mix.counts[t], o.node});
      }
      cluster::cluster c{std::move(groups), space_.efficiency};
      place::plan_search_result found;
      try {
        // A tracked copy shares the solved schedules; its gap is that of this composition's plans alone.
        found = place::search_plans(model_, c, base_, choices_, cache.tracked());
      } catch (const input_error&) {
        continue;  // no width, depth and microbatch divide the model, these devices and the batch
      }
      p.plans_evaluated += found.evaluated;
      if (found.feasible.empty()) {
        const bytes need = found.smallest_infeasible_need;
        if (p.smallest_memory_need.value() == 0.0 || (need.value() > 0.0 && need < p.smallest_memory_need))
          p.smallest_memory_need = need;
        continue;
      }
      const place::ranked_plan& best = found.feasible.front();
      if (p.status != outcome::evaluated || best.estimate.samples_per_s > p.samples_per_s) {
        p.status = outcome::evaluated;
        p.samples_per_s = best.estimate.samples_per_s;
        p.plan = best;
        p.group_order = order;
        p.cluster = std::move(c);
      }
    }
    if (p.status == outcome::evaluated) p.smallest_memory_need = bytes{0.0};
  }

  cluster_space space_;
  cluster_map map_;
  std::size_t round_ = 1;
  model::model model_;
  train::training_knobs base_;
  place::plan_choices choices_;
  bool exhaustive_ = false;
  group_orders orders_ = group_orders::every;
  sched::any_scheduler scheduler_ = sched::list_scheduler{};
  progress_hook progress_;
  std::function<bool()> stop_;
};

}  // namespace phaze::search
