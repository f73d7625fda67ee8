/// @file
/// The objective every placer minimizes, in one place: a plan's time per batch and memory per device from
/// its stages (docs/layer-table.md), the plan type all placers return, and their shared named parameters.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/place/concepts.hpp"
#include "phaze/place/cost_table.hpp"

namespace phaze::place {

/// No (tp, pp, dp) of a placement problem is admissible (none fits the devices and divides the microbatches):
/// bad input for one problem, and for a search over knob settings a setting that is not a plan.
class no_admissible_configuration : public input_error {
 public:
  using input_error::input_error;
};

/// What a stage adds up from its nodes (base units: seconds and bytes).
struct stage_load {
  double work_s = 0.0;             ///< forward + backward (+ recompute) of one microbatch
  double boundary_bytes = 0.0;     ///< bytes on edges leaving the stage, per microbatch
  double parameter_bytes = 0.0;    ///< parameter bytes per rank
  double activation_bytes = 0.0;   ///< activation bytes kept per microbatch
  double boundary_in_bytes = 0.0;  ///< bytes on edges entering the stage, per microbatch
};

/// Where a stage sits: the table's tensor-parallel width, the pipeline depth, the data-parallel degree and
/// the microbatches each replica runs per batch. Every policy term may depend on it.
struct stage_context {
  int tp = 1;
  int stages = 1;
  int dp = 1;
  std::int64_t microbatches = 1;  ///< per data-parallel replica
  /// The plan's stage times per microbatch added up (stage_time_s of every stage), for a policy whose
  /// pipeline charges it (UnevenPipelinePolicy). The placers fill it in: evaluate() from the plan's stages;
  /// the DPs, on tables of one device type, from the table (with_stage_time_sum: the same for every split),
  /// on mixed tables a lower bound.
  double stage_time_sum_s = 0.0;
};

/// The default objective (docs/layer-table.md): a 1F1B or GPipe pipeline with fill and drain, boundary sends
/// over the p2p link, and a ring all-reduce of the gradients over the data-parallel replicas after the drain:
/// time per batch = (m + p - 1) * max_i t_i + allreduce(max_i params_i).
/// A policy says how a stage's cost (`stage_cost_s`, combined over stages by max) and the largest stage's
/// parameters make the time per batch (`batch_time_s`); `allreduce_of_largest_stage` tells the DPs whether
/// the second matters (then they also enumerate caps on stage parameters). Stage cost and memory must not
/// decrease when a stage gains nodes (the DPs prune on it) and must be linear in the load (their lower bounds
/// average loads over stages). Placers hold a policy object, so a policy may carry data (step_policy, built
/// from a model, a device and training knobs, does); the terms of this one are static.
struct pipeline_policy {
  /// Whether the time per batch adds the all-reduce of the largest stage's parameters to the largest cost.
  static constexpr bool allreduce_of_largest_stage = true;

  /// Microbatches whose activations stage `stage` (0-based) holds at once.
  static constexpr std::int64_t microbatches_in_flight(const placement_settings& s, int stage,
                                                       const stage_context& c) {
    if (s.schedule == train::pipeline_schedule::gpipe) return c.microbatches;
    return std::min<std::int64_t>(c.stages - stage, c.microbatches);
  }
  /// Work of one node for one microbatch.
  template <class Node>
  static constexpr double work_s(const placement_settings& s, const Node& n) {
    return n.forward.value() + n.backward.value() + (s.recompute ? n.recompute.value() : 0.0);
  }
  /// Time of one microbatch through a stage: compute plus sending activations forward and receiving their
  /// gradients backward over the p2p link.
  static constexpr double stage_time_s(const placement_settings& s, const stage_load& l,
                                       const stage_context& /*c*/) {
    return l.work_s + 2.0 * l.boundary_bytes / s.p2p_bandwidth.value();
  }
  /// Ring all-reduce of the stage's gradients over the dp replicas: 2 (dp - 1) / dp * bytes / bandwidth.
  static constexpr double allreduce_s(const placement_settings& s, double parameter_bytes,
                                      const stage_context& c) {
    if (c.dp <= 1) return 0.0;
    return 2.0 * static_cast<double>(c.dp - 1) / static_cast<double>(c.dp) * parameter_bytes /
           s.dp_bandwidth.value();
  }
  /// (m + p - 1) * stage time: the pipeline with fill and drain if every stage were this one.
  static constexpr double stage_cost_s(const placement_settings& s, const stage_load& l,
                                       const stage_context& c) {
    return static_cast<double>(c.microbatches + c.stages - 1) * stage_time_s(s, l, c);
  }
  /// The largest stage cost plus the all-reduce of the largest stage's gradients.
  static constexpr double batch_time_s(const placement_settings& s, double largest_stage_cost,
                                       double largest_stage_parameters, const stage_context& c) {
    return largest_stage_cost + allreduce_s(s, largest_stage_parameters, c);
  }
  /// Weights, gradients and optimizer state of the stage's parameters plus the activations in flight.
  static constexpr double stage_memory(const placement_settings& s, const stage_load& l, int stage,
                                       const stage_context& c) {
    return l.parameter_bytes / s.weight_bytes_per_parameter * s.state_bytes_per_parameter +
           l.activation_bytes * static_cast<double>(microbatches_in_flight(s, stage, c));
  }
};

/// A variant that decomposes over stages: stage i costs (m + p - 1) * t_i + allreduce_i (each stage's
/// all-reduce follows its own work) and the time per batch is the largest stage cost. Never above
/// pipeline_policy's time; equal when the slowest stage also holds the most parameters.
struct bottleneck_policy : pipeline_policy {
  static constexpr bool allreduce_of_largest_stage = false;
  static constexpr double stage_cost_s(const placement_settings& s, const stage_load& l,
                                       const stage_context& c) {
    return static_cast<double>(c.microbatches + c.stages - 1) * stage_time_s(s, l, c) +
           allreduce_s(s, l.parameter_bytes, c);
  }
  static constexpr double batch_time_s(const placement_settings&, double largest_stage_cost, double,
                                       const stage_context&) {
    return largest_stage_cost;
  }
};

// What an UnevenPipelinePolicy (place/concepts.hpp) must satisfy: a pipeline not set by the slowest stage
// alone, the training-step model's (m - 1) t_max + sum_i t_i for stages of uneven times (step_policy;
// train::step_model::pipeline_time). Its `pipeline_s(settings, slowest_stage_time, stage_time_sum,
// context)` is nondecreasing in both times, and its stage cost is the pipeline if that stage were the
// slowest: pipeline_s(settings, stage_time_s(settings, load, context), context.stage_time_sum_s, context),
// whose largest over the stages is the pipeline; its
// batch_time_s adds the data-parallel terms to it. What a stage adds to its work may depend only on the
// cuts it waits for: either the same for every load (stage_time_s(load) - load.work_s constant), or, for a
// CutPricingPolicy (`cut_s(settings, cut_bytes, context)`), stage_time_s(load) = (work + cut_s(forward)) +
// cut_s(backward) with the cuts of train::step_model::cuts_waited_for (step_policy: the sends of the stage's
// own cuts), and a load without boundaries paying a lower bound of any cut. When every cut costs the same,
// the stage times add up to the same for every split of one table (stage_time_sum) and the DPs stay exact
// by minimizing the slowest stage; chain_dp minimizes the sum too on mixed tables and uneven cuts.

/// One stage of a plan.
struct plan_stage {
  std::vector<std::size_t> nodes;  ///< table node indices, ascending
  seconds time{};                  ///< one microbatch: compute + boundary sends
  seconds allreduce{};             ///< data-parallel gradient all-reduce
  seconds cost{};  ///< the policy's stage cost: (m + p - 1) * time by default; under an UnevenPipelinePolicy
                   ///< the pipeline's time if this stage were the slowest
  bytes memory{};  ///< per device
  bytes parameters{};  ///< per rank
  std::int64_t microbatches_in_flight = 0;
};

/// A plan (what every placer returns). When no plan fits, `feasible` is false and `smallest_memory_need`
/// is the smallest peak memory per device any candidate needed.
struct plan {
  bool feasible = false;
  int tp = 0;
  int pp = 0;
  int dp = 0;
  std::int64_t microbatches_per_replica = 0;
  std::vector<plan_stage> stages;
  seconds time_per_batch{};
  bytes peak_memory{};           ///< largest stage memory of this plan
  bytes smallest_memory_need{};  ///< infeasible: the smallest peak found; feasible: peak_memory
  bytes memory_per_device{};     ///< the capacity the plan was checked against
  bool above_cutoff = false;     ///< infeasible because no plan beat the placer's cutoff (not memory)

  [[nodiscard]] constexpr int devices_used() const { return tp * pp * dp; }
};

namespace detail::place {
inline constexpr double infinity = std::numeric_limits<double>::infinity();
}  // namespace detail::place

/// The plan a placer returns when no candidate fits problem `s`: infeasible, with the smallest peak memory
/// per device any candidate needed (`smallest_need` bytes), which the callers' messages quote. A custom
/// placer (docs/layer-table.md, examples/greedy_placer.hpp) returns it as the library's placers do.
constexpr plan infeasible_plan(const placement_settings& s, double smallest_need) {
  plan out;
  out.feasible = false;
  out.smallest_memory_need = bytes{smallest_need};
  out.memory_per_device = s.memory_per_device;
  return out;
}

/// No table can cost a stage: it would run on devices of two types (stage_table_of).
inline constexpr std::size_t no_stage_table = static_cast<std::size_t>(-1);

/// Which table costs stage `stage` of a configuration whose first table is `ti`. Clusters of one device type
/// cost every stage with table ti; a policy for mixed devices (step_policy on a heterogeneous cluster) says
/// `stage_table(ti, stage, c)`: the table of the same width timed on the stage's device type, or
/// no_stage_table when the stage's devices are of two types (the configuration is then not a plan). Tables
/// of one width differ only in their times (parameters, activations and edges are the device's business
/// only through its memory, stage_capacity_of).
template <class Policy>
constexpr std::size_t stage_table_of(const Policy& policy, std::size_t ti, int stage,
                                     const stage_context& c) {
  if constexpr (MixedDevicePolicy<Policy>) {
    return policy.stage_table(ti, stage, c);
  } else {
    return ti;
  }
}

/// The memory of one device of stage `stage`: the problem's capacity, or the policy's `stage_capacity(s,
/// stage, c)` on a cluster of mixed devices.
template <class Policy>
constexpr double stage_capacity_of(const Policy& policy, const placement_settings& s, int stage,
                                   const stage_context& c) {
  if constexpr (MixedDevicePolicy<Policy>) {
    return policy.stage_capacity(s, stage, c);
  } else {
    return s.memory_per_device.value();
  }
}

/// Whether table `ti` starts configurations (every table does, unless the policy's `configures(ti)` says it
/// only serves other tables' stages: the tables of other device types).
template <class Policy>
constexpr bool configures(const Policy& policy, std::size_t ti) {
  if constexpr (MixedDevicePolicy<Policy>) {
    return policy.configures(ti);
  } else {
    return true;
  }
}

namespace detail::place {

/// Sums a node set into a stage load; `in_stage[v]` marks the set.
template <class Policy, CostTable Table>
constexpr stage_load load_of(const Policy& policy, const placement_settings& s, const Table& t,
                             const std::vector<std::size_t>& nodes, const std::vector<int>& stage_of,
                             int stage) {
  stage_load l;
  for (const std::size_t v : nodes) {
    l.work_s += policy.work_s(s, t.nodes[v]);
    l.parameter_bytes += t.nodes[v].parameters.value();
    l.activation_bytes += t.nodes[v].activations.value();
  }
  for (std::size_t e = 0; e < t.edges.size(); ++e) {
    const auto& edge = t.edges[e];
    if (stage_of[edge.from] == stage && stage_of[edge.to] != stage) l.boundary_bytes += edge.boundary.value();
    if (stage_of[edge.to] == stage && stage_of[edge.from] != stage)
      l.boundary_in_bytes += edge.boundary.value();
  }
  return l;
}

/// Context `c` with its stage_time_sum_s for stages whose work adds up to `total_work`: the work plus what
/// each of the c.stages stages adds to it (the same for every stage under an UnevenPipelinePolicy), so the
/// same for every split of one table. (The DPs keep the result const: their inner loops then need not reload
/// it after every store.)
template <class Policy>
constexpr stage_context with_stage_time_sum(const Policy& policy, const placement_settings& s,
                                            stage_context c, double total_work) {
  c.stage_time_sum_s = total_work + static_cast<double>(c.stages) * policy.stage_time_s(s, stage_load{}, c);
  return c;
}
}  // namespace detail::place

template <class Policy, CostTable Table, class TableOf>
constexpr plan evaluate_stages(const placement_settings& s, const Table& t, TableOf&& table_of, int dp,
                               const std::vector<std::vector<std::size_t>>& stages, const Policy& policy);

/// The objective of a plan given as stages (node sets) of table `t` with `dp` replicas: recomputed from the
/// nodes alone (the oracle the tests hold every placer to). Throws input_error when the stages are not a
/// partition into contiguous sets in pipeline order, or the degrees do not fit.
template <class Policy = pipeline_policy, CostTable Table>
constexpr plan evaluate(const placement_settings& s, const Table& t, int dp,
                        const std::vector<std::vector<std::size_t>>& stages,
                        const Policy& policy = Policy{}) {
  return evaluate_stages(
      s, t, [&](int) -> const Table& { return t; }, dp, stages, policy);
}

/// evaluate() with each stage k costed on its own table, `table_of(k)` (tables of the same width timed on
/// different devices: a heterogeneous cluster); `t` gives the structure (nodes and edges). A stage must fit
/// its own devices' memory (stage_capacity_of).
template <class Policy, CostTable Table, class TableOf>
constexpr plan evaluate_stages(const placement_settings& s, const Table& t, TableOf&& table_of, int dp,
                               const std::vector<std::vector<std::size_t>>& stages, const Policy& policy) {
  using detail::place::invalid;
  const int pp = static_cast<int>(stages.size());
  if (dp < 1 || pp < 1) invalid("a plan needs dp >= 1 and at least one stage");
  if (s.microbatches % dp != 0) {
    invalid("dp " + std::to_string(dp) + " does not divide the " + std::to_string(s.microbatches) +
            " microbatches; choose a divisor");
  }
  if (static_cast<std::int64_t>(t.tp) * pp * dp > s.devices) {
    invalid("tp * pp * dp = " + std::to_string(static_cast<std::int64_t>(t.tp) * pp * dp) + " exceeds the " +
            std::to_string(s.devices) + " devices");
  }
  std::vector<int> stage_of(t.nodes.size(), -1);
  for (int k = 0; k < pp; ++k) {
    if (stages[static_cast<std::size_t>(k)].empty()) invalid("stage " + std::to_string(k) + " is empty");
    for (const std::size_t v : stages[static_cast<std::size_t>(k)]) {
      if (v >= t.nodes.size() || stage_of[v] != -1) invalid("stages must partition the nodes");
      stage_of[v] = k;
    }
  }
  for (const int k : stage_of) {
    if (k == -1) invalid("stages must cover every node");
  }
  for (const auto& edge : t.edges) {
    if (stage_of[edge.from] > stage_of[edge.to]) {
      invalid("an edge goes from stage " + std::to_string(stage_of[edge.from]) + " back to stage " +
              std::to_string(stage_of[edge.to]) + "; stages must be contiguous and in pipeline order");
    }
  }
  plan out;
  out.tp = t.tp;
  out.pp = pp;
  out.dp = dp;
  out.microbatches_per_replica = s.microbatches / dp;
  out.memory_per_device = s.memory_per_device;
  // The loads first: a stage's cost may depend on every stage's time (stage_time_sum_s).
  stage_context sum{t.tp, pp, dp, out.microbatches_per_replica};
  std::vector<std::vector<std::size_t>> sorted = stages;
  std::vector<stage_load> loads;
  for (int k = 0; k < pp; ++k) {
    auto& nodes = sorted[static_cast<std::size_t>(k)];
    std::sort(nodes.begin(), nodes.end());
    loads.push_back(detail::place::load_of(policy, s, table_of(k), nodes, stage_of, k));
    sum.stage_time_sum_s += policy.stage_time_s(s, loads.back(), sum);
  }
  const stage_context c = sum;
  double worst = 0.0;
  double largest = 0.0;
  double peak = 0.0;
  bool fits = true;
  for (int k = 0; k < pp; ++k) {
    const stage_load& l = loads[static_cast<std::size_t>(k)];
    plan_stage st;
    st.nodes = std::move(sorted[static_cast<std::size_t>(k)]);
    st.time = seconds{policy.stage_time_s(s, l, c)};
    st.allreduce = seconds{policy.allreduce_s(s, l.parameter_bytes, c)};
    st.cost = seconds{policy.stage_cost_s(s, l, c)};
    st.memory = bytes{policy.stage_memory(s, l, k, c)};
    st.parameters = bytes{l.parameter_bytes};
    st.microbatches_in_flight = static_cast<std::int64_t>(policy.microbatches_in_flight(s, k, c));
    worst = std::max(worst, st.cost.value());
    largest = std::max(largest, l.parameter_bytes);
    peak = std::max(peak, st.memory.value());
    fits = fits && st.memory.value() <= stage_capacity_of(policy, s, k, c);
    out.stages.push_back(std::move(st));
  }
  out.time_per_batch = seconds{policy.batch_time_s(s, worst, largest, c)};
  out.peak_memory = bytes{peak};
  out.smallest_memory_need = out.peak_memory;
  out.feasible = fits;
  return out;
}

/// A plan as text: its degrees, time per batch and peak memory, then one row per stage (every
/// model can print itself).
inline std::string to_string(const plan& p) {
  // Built with snprintf and appends only: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string at
  // -O2.
  char line[256];
  if (!p.feasible) {
    std::snprintf(line, sizeof line, "no feasible plan: needs at least %.2f GiB per device, has %.2f GiB\n",
                  in_gib(p.smallest_memory_need), in_gib(p.memory_per_device));
    return std::string{line};
  }
  std::snprintf(
      line, sizeof line,
      "tp %d, pp %d, dp %d (%d devices), %lld microbatches per replica: %.6f s per batch, peak %.2f of "
      "%.2f GiB\n",
      p.tp, p.pp, p.dp, p.devices_used(), static_cast<long long>(p.microbatches_per_replica),
      p.time_per_batch.value(), in_gib(p.peak_memory), in_gib(p.memory_per_device));
  std::string out{line};
  out += "stage  nodes      time/ubatch (ms)  allreduce (s)  cost (s)  memory (GiB)  in flight\n";
  for (std::size_t k = 0; k < p.stages.size(); ++k) {
    const auto& st = p.stages[k];
    // Consecutive indices as a range ("3..8"), others listed ("0,2").
    std::string nodes;
    if (!st.nodes.empty() && st.nodes.back() - st.nodes.front() + 1 == st.nodes.size()) {
      nodes += std::to_string(st.nodes.front());
      nodes += "..";
      nodes += std::to_string(st.nodes.back());
    } else {
      for (const std::size_t v : st.nodes) {
        if (!nodes.empty()) nodes += ',';
        nodes += std::to_string(v);
      }
    }
    std::snprintf(line, sizeof line, "%5zu  %-9s  %16.3f  %13.6f  %8.4f  %12.3f  %9lld\n", k, nodes.c_str(),
                  in_ms(st.time), st.allreduce.value(), st.cost.value(), in_gib(st.memory),
                  static_cast<long long>(st.microbatches_in_flight));
    out += line;
  }
  return out;
}

namespace detail::place {
/// Calls fn(table_index, pp, dp) for every admissible (tp, pp, dp): pp at most the node count (and
/// fixed.max_pp), dp dividing the microbatches, tp * pp * dp <= devices (== with fixed.use_all_devices); pp
/// ascending, dp descending. Returns how many it visited.
template <CostTable Table, class Fn>
constexpr std::size_t for_each_config(const placement_settings& s, const std::vector<Table>& tables,
                                      const placement_request& fixed, Fn&& fn) {
  std::size_t visited = 0;
  for (std::size_t ti = 0; ti < tables.size(); ++ti) {
    const std::int64_t tp = tables[ti].tp;
    if (fixed.tp != 0 && fixed.tp != tp) continue;
    const auto nodes = static_cast<std::int64_t>(tables[ti].nodes.size());
    const std::int64_t deepest = fixed.max_pp > 0 ? std::min<std::int64_t>(fixed.max_pp, nodes) : nodes;
    for (std::int64_t pp = 1; pp <= deepest && tp * pp <= s.devices; ++pp) {
      if (fixed.pp != 0 && fixed.pp != pp) continue;
      if (fixed.use_all_devices && s.devices % (tp * pp) != 0) continue;
      for (std::int64_t dp = s.devices / (tp * pp); dp >= 1; --dp) {
        if (fixed.dp != 0 && fixed.dp != dp) continue;
        if (fixed.use_all_devices && tp * pp * dp != s.devices) continue;
        if (s.microbatches % dp != 0) continue;
        ++visited;
        fn(ti, static_cast<int>(pp), static_cast<int>(dp));
      }
    }
  }
  return visited;
}

/// The caps of minimize_batch_time from a sorted list of distinct values: those from `least` up.
class sorted_caps {
 public:
  constexpr sorted_caps(const std::vector<double>& list, double least)
      : at_(std::lower_bound(list.begin(), list.end(), least)), end_(list.end()) {}
  /// The next cap, false when none is left.
  constexpr bool next(double& cap) {
    if (at_ == end_) return false;
    cap = *at_++;
    return true;
  }

 private:
  std::vector<double>::const_iterator at_, end_;
};

/// The caps of minimize_batch_time on a chain: every range's parameter bytes prefix[i] - prefix[j] (j < i)
/// from `least` up, ascending and distinct, one at a time. For one start j the sums grow with i (the
/// prefix never decreases, and rounding keeps the order), so a merge of one ascending run per start (a
/// heap of at most n entries, in `heap`) gives them in order without sorting all n (n + 1) / 2 of them:
/// the same values, in the same order, as sorting and removing duplicates.
class range_sum_caps {
 public:
  /// One run's next sum: prefix[end] - prefix[start].
  struct entry {
    double value;
    std::size_t start, end;
  };

  constexpr range_sum_caps(const std::vector<double>& prefix, double least, std::vector<entry>& heap)
      : prefix_(&prefix), heap_(&heap) {
    heap.clear();
    const std::size_t n = prefix.size() - 1;
    for (std::size_t j = 0; j < n; ++j) {
      // The first end whose sum reaches `least`.
      std::size_t low = j + 1;
      std::size_t high = n + 1;
      while (low < high) {
        const std::size_t mid = low + (high - low) / 2;
        if (prefix[mid] - prefix[j] < least) {
          low = mid + 1;
        } else {
          high = mid;
        }
      }
      if (low <= n) heap.push_back({prefix[low] - prefix[j], j, low});
    }
    std::make_heap(heap.begin(), heap.end(), later);
  }

  /// The next cap, false when none is left.
  constexpr bool next(double& cap) {
    std::vector<entry>& heap = *heap_;
    const std::vector<double>& prefix = *prefix_;
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const entry e = heap.back();
      heap.pop_back();
      if (e.end + 1 < prefix.size()) {
        heap.push_back({prefix[e.end + 1] - prefix[e.start], e.start, e.end + 1});
        std::push_heap(heap.begin(), heap.end(), later);
      }
      if (given_ && e.value == last_) continue;  // a value given already
      given_ = true;
      last_ = cap = e.value;
      return true;
    }
    return false;
  }

 private:
  static constexpr bool later(const entry& a, const entry& b) { return a.value > b.value; }
  const std::vector<double>* prefix_;
  std::vector<entry>* heap_;
  bool given_ = false;
  double last_ = 0.0;
};

/// The bounds of one (tp, pp, dp) that the DPs prune with, from a table's totals and each node's own load
/// (`singles`, without boundary): the largest stage cost is at least the average load's and any single
/// node's; the largest stage holds at least the average and the heaviest node's parameter bytes. Returns that
/// parameter bound, or nothing when the configuration cannot beat `best` or even an even split of the
/// parameters does not fit.
template <class Policy>
constexpr std::optional<double> configuration_bound(const Policy& policy, const placement_settings& s,
                                                    const stage_context& c, double total_work,
                                                    double total_parameters,
                                                    const std::vector<stage_load>& singles, double best) {
  const double p = static_cast<double>(c.stages);
  double lower = policy.stage_cost_s(s, stage_load{total_work / p, 0.0, total_parameters / p, 0.0}, c);
  double least_parameters = total_parameters / p;
  // A model's identical blocks give a few distinct loads (their prefix sums round differently): each
  // distinct one among the last few is costed once, the same max as costing every node.
  constexpr std::size_t remembered = 4;
  std::array<const stage_load*, remembered> costed{};
  std::size_t next = 0;
  for (const auto& l : singles) {
    least_parameters = std::max(least_parameters, l.parameter_bytes);
    const bool seen = std::any_of(costed.begin(), costed.end(), [&](const stage_load* m) {
      return m != nullptr && m->work_s == l.work_s && m->boundary_bytes == l.boundary_bytes &&
             m->parameter_bytes == l.parameter_bytes && m->activation_bytes == l.activation_bytes &&
             m->boundary_in_bytes == l.boundary_in_bytes;
    });
    if (seen) continue;
    costed[next++ % remembered] = &l;
    lower = std::max(lower, policy.stage_cost_s(s, l, c));
  }
  if (policy.batch_time_s(s, lower, least_parameters, c) >= best) return std::nullopt;
  const stage_load average_parameters{0.0, 0.0, total_parameters / p, 0.0};
  if (policy.stage_memory(s, average_parameters, c.stages - 1, c) > s.memory_per_device.value()) {
    return std::nullopt;
  }
  return least_parameters;
}

/// Minimizes Policy::batch_time_s over the partitions of one (tp, pp, dp), lowering `best` and calling
/// record() whenever it does. solve(cost_cap, parameter_cap) returns {largest stage cost, largest stage
/// parameters} of a partition minimizing the largest stage cost among those whose stages fit and hold at most
/// parameter_cap parameter bytes (cost infinity when none is below cost_cap; under an UnevenPipelinePolicy
/// the largest stage cost is the pipeline). When the policy adds the
/// largest stage's all-reduce, the caps (every stage's possible parameter bytes, ascending, distinct: the
/// cursor `caps(least_parameters)` returns, asked for only when a capped partition could beat `best`; its
/// `next(cap)` gives them from `least_parameters` up, as sorted_caps or range_sum_caps do) are tried in
/// turn: exact, since the best plan's largest stage holds one of them.
/// batch_time_s must be the largest cost plus a term that grows with the parameters.
template <class Policy, class Caps, class Solve, class Record>
constexpr void minimize_batch_time(const Policy& policy, const placement_settings& s, const stage_context& c,
                                   double& best, Caps&& caps, double least_parameters, Solve&& solve,
                                   Record&& record) {
  const auto [free_cost, free_parameters] = solve(best, infinity);
  if (!(free_cost < best)) return;
  if (const double v = policy.batch_time_s(s, free_cost, free_parameters, c); v < best) {
    best = v;
    record();
  }
  if constexpr (Policy::allreduce_of_largest_stage) {
    if (!(least_parameters < free_parameters)) return;  // no cap lies between them
    const double least_extra = policy.batch_time_s(s, 0.0, least_parameters, c);
    auto list = caps(least_parameters);
    for (double cap = 0.0; list.next(cap) && cap < free_parameters;) {
      // Capping the parameters never lowers the largest cost below free_cost.
      if (policy.batch_time_s(s, free_cost, cap, c) >= best) break;
      const auto [cost, parameters] = solve(best - least_extra, cap);
      if (!(cost < infinity)) continue;
      if (const double v = policy.batch_time_s(s, cost, parameters, c); v < best) {
        best = v;
        record();
      }
      if (cost <= free_cost) break;  // larger caps keep this cost and only add parameters
    }
  }
}

[[noreturn]] inline void no_configuration(const placement_settings& s, const placement_request& f) {
  throw no_admissible_configuration(
      "placement problem: no (tp, pp, dp) fits " + std::to_string(s.devices) + " devices with " +
      std::to_string(s.microbatches) + " microbatches" +
      (f.tp != 0 ? ", tp " + std::to_string(f.tp) : std::string{}) +
      (f.pp != 0 ? ", pp " + std::to_string(f.pp) : std::string{}) +
      (f.dp != 0 ? ", dp " + std::to_string(f.dp) : std::string{}) +
      "; give a table for a TP width that fits, more devices, pp at most the node count and dp dividing "
      "the microbatches");
}

/// When nothing fits: the smallest peak memory over every admissible (tp, pp, dp) and partition, as an
/// infeasible plan. total_parameters(ti) is table ti's parameter bytes; need(ti, pp, dp, bound) is the
/// smallest peak memory of a partition below `bound` (or at least `bound` when none is).
template <class Policy, class Tables, class Total, class Need>
constexpr plan smallest_memory_need(const Policy& policy, const placement_settings& s, const Tables& tables,
                                    const placement_request& fixed, Total&& total_parameters, Need&& need) {
  double smallest = infinity;
  for_each_config(s, tables, fixed, [&](std::size_t ti, int pp, int dp) {
    const stage_context c{tables[ti].tp, pp, dp, s.microbatches / dp};
    // Even an even split of the parameters over the stages must beat the best need found so far.
    const stage_load average_params{0.0, 0.0, total_parameters(ti) / static_cast<double>(pp), 0.0};
    if (policy.stage_memory(s, average_params, pp - 1, c) >= smallest) return;
    smallest = std::min(smallest, need(ti, pp, dp, smallest));
  });
  return infeasible_plan(s, smallest);
}
}  // namespace detail::place

/// Named parameters shared by every placer, as in
/// `chain_dp(problem).devices(1024).memory(32_GiB).run()`. Setters override the problem's settings for this
/// run; tp/pp/dp fix a choice; `with(request)` takes a whole placement_request (what the Placer objects
/// pass). Made with a policy that is not a PlacementPolicy, it stops compilation with one sentence naming
/// the missing member (explain_placement_policy), and its run() is not instantiated.
template <class Derived, CostTable Table, class Policy>
class placer_base {
 public:
  constexpr explicit placer_base(const placement_problem<Table>& problem, Policy policy = Policy{})
      : problem_(&problem),
        settings_(static_cast<const placement_settings&>(problem)),
        policy_(std::move(policy)) {
    static_cast<void>(
        explain_placement_policy<
            Policy, std::decay_t<decltype(problem.tables.front().nodes.front())>>());  // reports what is
                                                                                       // missing, once
  }

  constexpr Derived& devices(int n) { return set(settings_.devices, n); }
  constexpr Derived& memory(bytes per_device) { return set(settings_.memory_per_device, per_device); }
  constexpr Derived& microbatches(std::int64_t m) { return set(settings_.microbatches, m); }
  constexpr Derived& schedule(train::pipeline_schedule sch) { return set(settings_.schedule, sch); }
  constexpr Derived& recompute(bool on) { return set(settings_.recompute, on); }
  constexpr Derived& tp(int t) { return set(request_.tp, t); }
  constexpr Derived& pp(int p) { return set(request_.pp, p); }
  constexpr Derived& dp(int d) { return set(request_.dp, d); }
  /// Deepest pipeline to try (0: as many stages as nodes).
  constexpr Derived& max_pp(int p) { return set(request_.max_pp, p); }
  /// Only plans that use every device (tp * pp * dp == devices), as Megatron-LM runs them.
  constexpr Derived& use_all_devices(bool on) { return set(request_.use_all_devices, on); }
  /// Only plans faster than `t` are of interest (a search's incumbent): the DP prunes with it and, when no
  /// plan beats it, returns an infeasible plan with above_cutoff set (and no memory-need search).
  constexpr Derived& cutoff(seconds t) { return set(request_.cutoff_s, t.value()); }
  /// Every choice, limit and the cutoff of a request at once.
  constexpr Derived& with(const placement_request& r) { return set(request_, r); }

  [[nodiscard]] constexpr const placement_settings& settings() const { return settings_; }

  /// The best plan, or an infeasible plan saying why none fits (each placer's place_all). Compiled only for
  /// a PlacementPolicy: otherwise the constructor has reported what the policy misses.
  [[nodiscard]] constexpr plan run() const {
    if constexpr (valid_policy) {
      return static_cast<const Derived&>(*this).place_all();
    } else {
      return plan{};
    }
  }

 protected:
  /// Whether the policy is a PlacementPolicy: the placers' run() is compiled only then (the constructor's
  /// static_assert has reported the missing member otherwise).
  static constexpr bool valid_policy =
      PlacementPolicy<Policy, std::decay_t<decltype(std::declval<const Table&>().nodes.front())>>;

  /// Validates the problem as this run sees it.
  constexpr void check() const {
    validate_settings(settings_);
    constexpr bool typed_tables = requires(const Policy& p, std::size_t ti, int k, const stage_context& c) {
      p.stage_table(ti, k, c);
    };
    validate_tables(problem_->tables, !typed_tables);
  }

  const placement_problem<Table>* problem_;
  placement_settings settings_;
  Policy policy_;
  placement_request request_;

  /// The plan to return when nothing beat the cutoff.
  [[nodiscard]] constexpr plan above_cutoff() const {
    plan out = infeasible_plan(settings_, 0.0);
    out.above_cutoff = true;
    return out;
  }

 private:
  template <class T, class U>
  constexpr Derived& set(T& field, U value) {
    field = value;
    return static_cast<Derived&>(*this);
  }
};

/// A placer class template (chain_dp, downset_dp, ...) as a Placer object (place/concepts.hpp), named by its
/// `placer_name`: what search::options and `phaze plan --placer` run.
template <template <class, class> class Algorithm>
struct placer_of {
  [[nodiscard]] static constexpr std::string_view name() {
    return Algorithm<cost_table, pipeline_policy>::placer_name;
  }
  /// What the algorithm prices (its `placer_capabilities`).
  static constexpr placer_capabilities capabilities =
      capabilities_of<Algorithm<cost_table, pipeline_policy>>();
  template <CostTable Table, class Policy>
  [[nodiscard]] constexpr plan place(const placement_problem<Table>& problem, const Policy& policy,
                                     const placement_request& request) const {
    return Algorithm<Table, Policy>(problem, policy).with(request).run();
  }
};

}  // namespace phaze::place
