/// @file
/// The chain DP: exact placement for layer chains (transformers), much faster than the downset DP.
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

/// Exact placement on a chain: for every admissible (tp, pp, dp), a DP over prefixes finds the partition into
/// pp consecutive stages that minimizes the largest stage cost subject to each stage's memory (the stage
/// index matters: 1F1B's in-flight microbatches), again under caps on a stage's parameter bytes while the
/// all-reduce of the largest stage can pay off (detail::place::minimize_batch_time). O(L^2 pp) per (tp, pp,
/// dp) in the worst case; in practice far less, because a stage stops growing as soon as its cost reaches the
/// best value known for its prefix or its memory exceeds the capacity, and a (tp, pp, dp) whose lower bound
/// cannot beat the incumbent is skipped.
///
///     auto best = chain_dp(problem).devices(1024).memory(32_GiB).run();
template <CostTable Table = cost_table, class Policy = pipeline_policy>
class chain_dp : public placer_base<chain_dp<Table, Policy>, Table, Policy> {
  using base = placer_base<chain_dp<Table, Policy>, Table, Policy>;

 public:
  using base::base;

  /// How the Placer object of this placer (placer_of) names it.
  static constexpr std::string_view placer_name = "chain";

 private:
  friend base;
  /// The best plan, or an infeasible plan with the smallest memory need. Throws input_error when a table
  /// is not a chain or no (tp, pp, dp) is admissible.
  [[nodiscard]] constexpr plan place_all() const {
    this->check();
    const auto& tables = this->problem_->tables;
    const placement_settings& s = this->settings_;
    const Policy& policy = this->policy_;
    std::vector<prefix> prefixes;
    for (const auto& t : tables) {
      if (!is_chain(t)) {
        detail::place::invalid("chain_dp: the table for tp " + std::to_string(t.tp) +
                               " is not a chain (node i feeding only node i + 1); use downset_dp");
      }
      prefixes.push_back(make_prefix(policy, s, t));
    }
    scratch work;
    double best = this->request_.cutoff_s;
    std::size_t best_table = 0;
    int best_dp = 0;
    std::vector<std::size_t> best_cuts;
    std::vector<std::size_t> best_stage_tables;
    const std::size_t configs =
        detail::place::for_each_config(s, tables, this->request_, [&](std::size_t ti, int pp, int dp) {
          if (!configures(policy, ti)) return;
          const prefix& pre = prefixes[ti];
          const stage_context c{tables[ti].tp, pp, dp, s.microbatches / dp};
          if (!stage_tables(policy, s, prefixes, ti, c, work)) return;
          const auto least_parameters =
              work.mixed ? detail::place::configuration_bound(policy, s, c, work.least_work,
                                                              pre.params.back(), work.least_single, best)
                         : detail::place::configuration_bound(policy, s, c, pre.work.back(),
                                                              pre.params.back(), pre.single, best);
          if (!least_parameters) return;
          detail::place::minimize_batch_time(
              policy, s, c, best, pre.caps, *least_parameters,
              [&](double cost_cap, double parameter_cap) {
                const double cost = solve<false>(policy, s, pre, c, cost_cap, parameter_cap, work);
                double largest = 0.0;
                if (cost < cost_cap) {
                  for (std::size_t k = 0; k + 1 < work.cuts.size(); ++k) {
                    largest = std::max(largest, pre.params[work.cuts[k + 1]] - pre.params[work.cuts[k]]);
                  }
                }
                return std::pair<double, double>{cost < cost_cap ? cost : detail::place::infinity, largest};
              },
              [&] {
                best_table = ti;
                best_dp = dp;
                best_cuts = work.cuts;
                best_stage_tables = work.tables;
              });
        });
    if (configs == 0) detail::place::no_configuration(s, this->request_);
    if (best < this->request_.cutoff_s) {
      std::vector<std::vector<std::size_t>> stages;
      for (std::size_t k = 0; k + 1 < best_cuts.size(); ++k) {
        stages.emplace_back();
        for (std::size_t v = best_cuts[k]; v < best_cuts[k + 1]; ++v) stages.back().push_back(v);
      }
      plan out = evaluate_stages(
          s, tables[best_table],
          [&](int k) -> const Table& { return tables[best_stage_tables[static_cast<std::size_t>(k)]]; },
          best_dp, stages, policy);
      out.time_per_batch = seconds{best};
      return out;
    }
    // Nothing fits: the smallest peak memory over every admissible (tp, pp, dp) and partition.
    if (this->request_.cutoff_s < detail::place::infinity) return this->above_cutoff();
    return detail::place::smallest_memory_need(
        policy, s, tables, this->request_, [&](std::size_t ti) { return prefixes[ti].params.back(); },
        [&](std::size_t ti, int pp, int dp, double bound) {
          const stage_context c{tables[ti].tp, pp, dp, s.microbatches / dp};
          if (!configures(policy, ti) || !stage_tables(policy, s, prefixes, ti, c, work)) {
            return detail::place::infinity;
          }
          return solve<true>(policy, s, prefixes[ti], c, bound, detail::place::infinity, work);
        });
  }

 private:
  /// Prefix sums of a chain: entry i covers nodes [0, i); boundary[i] is the edge leaving node i - 1.
  struct prefix {
    std::vector<double> work{0.0};
    std::vector<double> params{0.0};
    std::vector<double> activations{0.0};
    std::vector<double> boundary{0.0};
    std::vector<stage_load> single;  ///< each node's own load, without boundary: a lower bound
    std::vector<double> caps;        ///< every range's parameter bytes, ascending, distinct
  };

  struct scratch {
    std::vector<double> previous, current;
    std::vector<std::size_t> argument;  ///< (k, i) -> where stage k starts
    std::vector<std::size_t> cuts;      ///< stage boundaries of the last solution: 0 = c0 < ... < cpp = L
    // The configuration's stages (stage_tables): each one's table, work prefix and device memory.
    std::vector<std::size_t> tables;
    std::vector<const std::vector<double>*> stage_work;
    std::vector<double> capacity;
    bool mixed = false;                    ///< stages costed on more than one table
    double least_work = 0.0;               ///< mixed: the least total work (each node on its fastest table)
    std::vector<stage_load> least_single;  ///< mixed: each node's least load
  };

  /// Fills work's per-stage tables, work prefixes and capacities for a configuration of first table `ti`;
  /// false when a stage would run on two device types (not a plan). With mixed tables the bounds take
  /// each node at its fastest table's work.
  static constexpr bool stage_tables(const Policy& policy, const placement_settings& s,
                                     const std::vector<prefix>& prefixes, std::size_t ti,
                                     const stage_context& c, scratch& work) {
    work.tables.clear();
    work.stage_work.clear();
    work.capacity.clear();
    work.mixed = false;
    for (int k = 0; k < c.stages; ++k) {
      const std::size_t tk = stage_table_of(policy, ti, k, c);
      if (tk == no_stage_table) return false;
      if (tk >= prefixes.size()) detail::place::invalid("a policy named a stage table that does not exist");
      work.mixed = work.mixed || tk != ti;
      work.tables.push_back(tk);
      work.stage_work.push_back(&prefixes[tk].work);
      work.capacity.push_back(stage_capacity_of(policy, s, k, c));
    }
    if (work.mixed) {
      work.least_single = prefixes[ti].single;
      for (const std::size_t tk : work.tables) {
        for (std::size_t v = 0; v < work.least_single.size(); ++v) {
          work.least_single[v].work_s = std::min(work.least_single[v].work_s, prefixes[tk].single[v].work_s);
        }
      }
      work.least_work = 0.0;
      for (const auto& l : work.least_single) work.least_work += l.work_s;
    }
    return true;
  }

  static constexpr prefix make_prefix(const Policy& policy, const placement_settings& s, const Table& t) {
    prefix pre;
    const std::size_t n = t.nodes.size();
    for (std::size_t v = 0; v < n; ++v) {
      pre.work.push_back(pre.work.back() + policy.work_s(s, t.nodes[v]));
      pre.params.push_back(pre.params.back() + t.nodes[v].parameters.value());
      pre.activations.push_back(pre.activations.back() + t.nodes[v].activations.value());
      pre.boundary.push_back(0.0);
    }
    for (std::size_t e = 0; e < t.edges.size(); ++e)
      pre.boundary[t.edges[e].to] += t.edges[e].boundary.value();
    for (std::size_t v = 0; v < n; ++v) {
      // No boundary: a stage holding v may end past v's outgoing edge, so only work and parameters bound it.
      pre.single.push_back({pre.work[v + 1] - pre.work[v], 0.0, pre.params[v + 1] - pre.params[v],
                            pre.activations[v + 1] - pre.activations[v]});
    }
    if constexpr (Policy::allreduce_of_largest_stage) {
      for (std::size_t i = 1; i <= n; ++i) {
        for (std::size_t j = 0; j < i; ++j) pre.caps.push_back(pre.params[i] - pre.params[j]);
      }
      std::sort(pre.caps.begin(), pre.caps.end());
      pre.caps.erase(std::unique(pre.caps.begin(), pre.caps.end()), pre.caps.end());
    }
    return pre;
  }

  /// min over partitions into pp stages whose stages hold at most `parameter_cap` parameter bytes of the
  /// largest stage cost (Memory = false; stages must fit) or of the largest stage memory (Memory = true),
  /// counting only values below `cap`; infinity when none.
  /// Leaves the partition in work.cuts.
  template <bool Memory>
  static constexpr double solve(const Policy& policy, const placement_settings& s, const prefix& pre,
                                const stage_context& c, double cap, double parameter_cap, scratch& work) {
    const std::size_t n = pre.work.size() - 1;
    const auto stages = static_cast<std::size_t>(c.stages);
    constexpr double inf = detail::place::infinity;
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    work.previous.assign(n + 1, inf);
    work.previous[0] = 0.0;
    work.argument.assign((stages + 1) * (n + 1), none);
    for (std::size_t k = 1; k <= stages; ++k) {
      work.current.assign(n + 1, inf);
      const int stage = static_cast<int>(k - 1);
      const std::vector<double>& stage_work = *work.stage_work[k - 1];
      [[maybe_unused]] const double capacity = work.capacity[k - 1];
      for (std::size_t i = k; i + (stages - k) <= n; ++i) {
        double value = cap;
        std::size_t from = none;
        for (std::size_t j = i; j-- > k - 1;) {
          const stage_load l{stage_work[i] - stage_work[j], pre.boundary[i], pre.params[i] - pre.params[j],
                             pre.activations[i] - pre.activations[j]};
          if (l.parameter_bytes > parameter_cap) break;  // a longer stage holds more
          const double memory = policy.stage_memory(s, l, stage, c);
          double cost = memory;
          if constexpr (!Memory) {
            if (memory > capacity) break;  // a longer stage needs more
            cost = policy.stage_cost_s(s, l, c);
          }
          if (cost >= value) break;  // a longer stage costs more
          const double v = std::max(work.previous[j], cost);
          if (v < value) {
            value = v;
            from = j;
          }
        }
        if (from != none) {
          work.current[i] = value;
          work.argument[k * (n + 1) + i] = from;
        }
      }
      std::swap(work.previous, work.current);
    }
    const double result = work.previous[n];
    if (result < cap) {
      work.cuts.assign(stages + 1, 0);
      std::size_t i = n;
      for (std::size_t k = stages; k >= 1; --k) {
        work.cuts[k] = i;
        i = work.argument[k * (n + 1) + i];
      }
      work.cuts[0] = 0;
    }
    return result;
  }
};

template <CostTable Table>
chain_dp(const placement_problem<Table>&) -> chain_dp<Table>;
template <CostTable Table, class Policy>
chain_dp(const placement_problem<Table>&, Policy) -> chain_dp<Table, Policy>;

/// chain_dp as a Placer (place/concepts.hpp): the chain DP (exact on chains; the default). What
/// search::options and `phaze plan --placer chain` run.
using chain_placer = placer_of<chain_dp>;

}  // namespace phaze::place
