/// @file
/// The downset DP of Piper (Tarnawski et al., NeurIPS 2021) and PHAZE (ICML 2024): exact placement on any
/// layer DAG, with stages that are differences of nested downsets.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/place/cost_table.hpp"
#include "phaze/place/objective.hpp"

namespace phaze::place {

/// Most downsets (ideals) downset_dp enumerates per table; wider DAGs have exponentially many.
inline constexpr std::size_t downset_dp_max_downsets = 4096;
/// Most nested pairs of downsets (candidate stages) it keeps per table.
inline constexpr std::size_t downset_dp_max_stages = std::size_t{1} << 22;

/// Exact placement on a layer DAG. A downset is a node set closed under predecessors; a pipeline of pp
/// stages is a chain of downsets from the empty set to all nodes, and stage k is the difference of the k-th
/// and (k-1)-th downsets (contiguous: no edge leaves it and comes back). For every admissible (tp, pp, dp) a
/// DP over (stages so far, downset) minimizes the largest stage cost subject to each stage's memory (again
/// under caps on a stage's parameter bytes, as chain_dp). On a chain the downsets are the prefixes, so it
/// finds what chain_dp finds, more slowly.
///
///     auto best = downset_dp(problem).devices(64).memory(80_GiB).run();
template <CostTable Table = cost_table, class Policy = pipeline_policy>
class downset_dp : public placer_base<downset_dp<Table, Policy>, Table, Policy> {
  using base = placer_base<downset_dp<Table, Policy>, Table, Policy>;

 public:
  using base::base;

  /// How the Placer object of this placer (placer_of) names it.
  static constexpr std::string_view placer_name = "downset";
  /// Equal cuts and one device type.
  static constexpr placer_capabilities capabilities{.cuts_by_size = false, .mixed_devices = false};

 private:
  friend base;
  /// The best plan, or an infeasible plan with the smallest memory need. Throws input_error when a table has
  /// more downsets than downset_dp_max_downsets or no (tp, pp, dp) is admissible.
  [[nodiscard]] plan place_all() const {
    this->check();
    const auto& tables = this->problem_->tables;
    const placement_settings& s = this->settings_;
    const Policy& policy = this->policy_;
    std::vector<lattice> lattices;
    for (const auto& t : tables) lattices.push_back(make_lattice(policy, s, t));
    scratch work;
    double best = this->request_.cutoff_s;
    std::size_t best_table = 0;
    int best_dp = 0;
    std::vector<std::size_t> best_chain;
    const std::size_t configs =
        detail::place::for_each_config(s, tables, this->request_, [&](std::size_t ti, int pp, int dp) {
          const lattice& lat = lattices[ti];
          // Every split's stage times add up to the same (an UnevenPipelinePolicy's stage costs read it).
          const stage_context c = detail::place::with_stage_time_sum(
              policy, s, {tables[ti].tp, pp, dp, s.microbatches / dp}, lat.total.work_s);
          const auto least_parameters = detail::place::configuration_bound(
              policy, s, c, lat.total.work_s, lat.total.parameter_bytes, lat.single, best);
          if (!least_parameters) return;
          detail::place::minimize_batch_time(
              policy, s, c, best, [&](double least) { return detail::place::sorted_caps(lat.caps, least); },
              *least_parameters,
              [&](double cost_cap, double parameter_cap) {
                const double cost = solve<false>(policy, s, lat, c, cost_cap, parameter_cap, work);
                return std::pair<double, double>{cost < cost_cap ? cost : detail::place::infinity,
                                                 cost < cost_cap ? work.largest_parameters : 0.0};
              },
              [&] {
                best_table = ti;
                best_dp = dp;
                best_chain = work.chain;
              });
        });
    if (configs == 0) detail::place::no_configuration(s, this->request_);
    if (best < this->request_.cutoff_s) {
      const lattice& lat = lattices[best_table];
      std::vector<std::vector<std::size_t>> stages;
      for (std::size_t k = 1; k < best_chain.size(); ++k) {
        stages.emplace_back();
        const auto& upper = lat.sets[best_chain[k]];
        const auto& lower = lat.sets[best_chain[k - 1]];
        for (std::size_t v = 0; v < lat.nodes; ++v) {
          if (contains(upper, v) && !contains(lower, v)) stages.back().push_back(v);
        }
      }
      plan out = evaluate(s, tables[best_table], best_dp, stages, policy);
      out.time_per_batch = seconds{best};
      return out;
    }
    if (this->request_.cutoff_s < detail::place::infinity || !this->request_.memory_need)
      return this->above_cutoff();
    return detail::place::smallest_memory_need(
        policy, s, tables, this->request_, [&](std::size_t ti) { return lattices[ti].total.parameter_bytes; },
        [&](std::size_t ti, int pp, int dp, double bound) {
          const stage_context c{tables[ti].tp, pp, dp, s.microbatches / dp};
          return solve<true>(policy, s, lattices[ti], c, bound, detail::place::infinity, work);
        });
  }

 private:
  using bitset = std::vector<std::uint64_t>;

  static bool contains(const bitset& b, std::size_t v) { return (b[v / 64] >> (v % 64) & 1U) != 0; }

  /// A candidate stage: the difference of downset `lower` and the downset that lists it.
  struct stage_candidate {
    std::size_t lower = 0;
    stage_load load;
  };

  /// The downsets of a table, smallest first, and for each the candidate stages that end at it.
  struct lattice {
    std::size_t nodes = 0;
    std::vector<bitset> sets;
    std::vector<std::size_t> size;
    std::vector<std::vector<stage_candidate>> ending_at;
    stage_load total;
    std::vector<stage_load> single;  ///< each node's own load, without boundary: a lower bound
    std::vector<double> caps;        ///< every candidate stage's parameter bytes, ascending, distinct
  };

  struct scratch {
    std::vector<double> previous, current;
    std::vector<std::size_t> argument;
    std::vector<std::size_t> chain;   ///< downset indices of the last solution, empty set first
    double largest_parameters = 0.0;  ///< of the last solution's stages
  };

  static lattice make_lattice(const Policy& policy, const placement_settings& s, const Table& t) {
    lattice lat;
    const std::size_t n = t.nodes.size();
    lat.nodes = n;
    const std::size_t words = (n + 63) / 64;
    std::vector<std::vector<std::size_t>> predecessors(n);
    for (std::size_t e = 0; e < t.edges.size(); ++e) predecessors[t.edges[e].to].push_back(t.edges[e].from);
    // Depth-first over nodes in topological order: include a node only when its predecessors are in.
    bitset current(words, 0);
    auto visit = [&](auto& self, std::size_t v, std::size_t count) -> void {
      if (v == n) {
        if (lat.sets.size() >= downset_dp_max_downsets) {
          detail::place::invalid("downset_dp: the table for tp " + std::to_string(t.tp) + " has more than " +
                                 std::to_string(downset_dp_max_downsets) +
                                 " downsets (the DAG is too wide); merge parallel branches into layer nodes "
                                 "or use chain_dp on a chain");
        }
        lat.sets.push_back(current);
        lat.size.push_back(count);
        return;
      }
      self(self, v + 1, count);
      const bool ready = std::all_of(predecessors[v].begin(), predecessors[v].end(),
                                     [&](std::size_t u) { return contains(current, u); });
      if (ready) {
        current[v / 64] |= std::uint64_t{1} << (v % 64);
        self(self, v + 1, count + 1);
        current[v / 64] &= ~(std::uint64_t{1} << (v % 64));
      }
    };
    visit(visit, 0, 0);
    // Smallest first, so the DP may sweep downsets in order.
    std::vector<std::size_t> order(lat.sets.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return lat.size[a] < lat.size[b]; });
    std::vector<bitset> sets;
    std::vector<std::size_t> sizes;
    for (const std::size_t i : order) {
      sets.push_back(lat.sets[i]);
      sizes.push_back(lat.size[i]);
    }
    lat.sets = std::move(sets);
    lat.size = std::move(sizes);
    // Additive sums per downset.
    std::vector<stage_load> sums(lat.sets.size());
    for (std::size_t d = 0; d < lat.sets.size(); ++d) {
      for (std::size_t v = 0; v < n; ++v) {
        if (!contains(lat.sets[d], v)) continue;
        sums[d].work_s += policy.work_s(s, t.nodes[v]);
        sums[d].parameter_bytes += t.nodes[v].parameters.value();
        sums[d].activation_bytes += t.nodes[v].activations.value();
      }
    }
    lat.total = sums.back();
    for (std::size_t v = 0; v < n; ++v) {
      lat.single.push_back(
          {policy.work_s(s, t.nodes[v]), 0.0, t.nodes[v].parameters.value(), t.nodes[v].activations.value()});
    }
    lat.ending_at.resize(lat.sets.size());
    std::size_t candidates = 0;
    for (std::size_t b = 0; b < lat.sets.size(); ++b) {
      for (std::size_t a = 0; a < b && lat.size[a] < lat.size[b]; ++a) {
        bool nested = true;
        for (std::size_t w = 0; w < words && nested; ++w) nested = (lat.sets[a][w] & ~lat.sets[b][w]) == 0;
        if (!nested) continue;
        if (++candidates > downset_dp_max_stages) {
          detail::place::invalid("downset_dp: the table for tp " + std::to_string(t.tp) + " has more than " +
                                 std::to_string(downset_dp_max_stages) + " candidate stages; merge nodes");
        }
        stage_load l{sums[b].work_s - sums[a].work_s, 0.0, sums[b].parameter_bytes - sums[a].parameter_bytes,
                     sums[b].activation_bytes - sums[a].activation_bytes};
        for (std::size_t e = 0; e < t.edges.size(); ++e) {
          const auto& edge = t.edges[e];
          if (contains(lat.sets[b], edge.from) && !contains(lat.sets[a], edge.from) &&
              !contains(lat.sets[b], edge.to)) {
            l.boundary_bytes += edge.boundary.value();
          }
        }
        lat.ending_at[b].push_back({a, l});
        if constexpr (Policy::allreduce_of_largest_stage) lat.caps.push_back(l.parameter_bytes);
      }
    }
    std::sort(lat.caps.begin(), lat.caps.end());
    lat.caps.erase(std::unique(lat.caps.begin(), lat.caps.end()), lat.caps.end());
    return lat;
  }

  /// As chain_dp's: min over chains of pp downsets, whose stages hold at most `parameter_cap` parameter
  /// bytes, of the largest stage cost (stages must fit) or memory, counting only values below `cap`. Leaves
  /// the chain of downsets in work.chain.
  template <bool Memory>
  static double solve(const Policy& policy, const placement_settings& s, const lattice& lat,
                      const stage_context& c, double cap, double parameter_cap, scratch& work) {
    const std::size_t count = lat.sets.size();
    const auto stages = static_cast<std::size_t>(c.stages);
    const double capacity = s.memory_per_device.value();
    constexpr double inf = detail::place::infinity;
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    work.previous.assign(count, inf);
    work.previous[0] = 0.0;  // the empty downset sorts first
    work.argument.assign((stages + 1) * count, none);
    for (std::size_t k = 1; k <= stages; ++k) {
      work.current.assign(count, inf);
      const int stage = static_cast<int>(k - 1);
      for (std::size_t b = 0; b < count; ++b) {
        if (lat.size[b] < k || lat.size[b] + (stages - k) > lat.nodes) continue;
        double value = cap;
        std::size_t from = none;
        for (const stage_candidate& candidate : lat.ending_at[b]) {
          if (work.previous[candidate.lower] >= value || candidate.load.parameter_bytes > parameter_cap)
            continue;
          const double memory = policy.stage_memory(s, candidate.load, stage, c);
          double cost = memory;
          if constexpr (!Memory) {
            if (memory > capacity) continue;
            cost = policy.stage_cost_s(s, candidate.load, c);
          }
          const double v = std::max(work.previous[candidate.lower], cost);
          if (v < value) {
            value = v;
            from = candidate.lower;
          }
        }
        if (from != none) {
          work.current[b] = value;
          work.argument[k * count + b] = from;
        }
      }
      std::swap(work.previous, work.current);
    }
    const double result = work.previous[count - 1];  // all nodes sorts last
    if (result < cap) {
      work.chain.assign(stages + 1, 0);
      std::size_t d = count - 1;
      for (std::size_t k = stages; k >= 1; --k) {
        work.chain[k] = d;
        d = work.argument[k * count + d];
      }
      work.chain[0] = d;
      work.largest_parameters = 0.0;
      for (std::size_t k = 1; k <= stages; ++k) {
        for (const stage_candidate& candidate : lat.ending_at[work.chain[k]]) {
          if (candidate.lower == work.chain[k - 1]) {
            work.largest_parameters = std::max(work.largest_parameters, candidate.load.parameter_bytes);
          }
        }
      }
    }
    return result;
  }
};

template <CostTable Table>
downset_dp(const placement_problem<Table>&) -> downset_dp<Table>;
template <CostTable Table, class Policy>
downset_dp(const placement_problem<Table>&, Policy) -> downset_dp<Table, Policy>;

/// downset_dp as a Placer (place/concepts.hpp): the downset DP (exact on any layer DAG, slower). What
/// search::options and `phaze plan --placer downset` run.
using downset_placer = placer_of<downset_dp>;

}  // namespace phaze::place
