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
/// cannot beat the incumbent is skipped. Under an UnevenPipelinePolicy (step_policy: the pipeline is (m - 1)
/// t_max + sum_i t_i) the stages' times add up to the same for every split of one table, so the DP minimizes
/// the slowest stage's time, as fast as before; on tables of mixed device types the sum depends on the split,
/// and for each cap on the slowest stage's time a DP minimizes the sum (least_pipeline): exact, a few DPs per
/// (tp, pp, dp, parameter cap) because the caps stop where (m - 1) x cap alone loses.
///
///     auto best = chain_dp(problem).devices(1024).memory(32_GiB).run();
template <CostTable Table = cost_table, class Policy = pipeline_policy>
class chain_dp : public placer_base<chain_dp<Table, Policy>, Table, Policy> {
  using base = placer_base<chain_dp<Table, Policy>, Table, Policy>;

 public:
  using base::base;

  /// How the Placer object of this placer (placer_of) names it.
  static constexpr std::string_view placer_name = "chain";
  /// Every cut priced with its own bytes (cut_s), each stage on its own devices' table (stage_table_of).
  static constexpr placer_capabilities capabilities{.cuts_by_size = true, .mixed_devices = true};

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
          const stage_context where{tables[ti].tp, pp, dp, s.microbatches / dp};
          if (!stage_tables(policy, s, prefixes, ti, where, work)) return;
          price_cuts(policy, s, pre, where, work);
          // On one table with equal cuts every split's stage times add up to the same; on mixed tables or
          // uneven cuts, at least this (a bare load pays the least cut).
          const stage_context c = detail::place::with_stage_time_sum(
              policy, s, where, work.mixed ? work.least_work : pre.work.back());
          const auto least_parameters =
              work.mixed ? detail::place::configuration_bound(policy, s, c, work.least_work,
                                                              pre.params.back(), work.least_single, best)
                         : detail::place::configuration_bound(policy, s, c, pre.work.back(),
                                                              pre.params.back(), pre.single, best);
          if (!least_parameters) return;
          detail::place::minimize_batch_time(
              policy, s, c, best,
              [&](double least) { return detail::place::range_sum_caps(pre.params, least, work.caps); },
              *least_parameters,
              [&](double cost_cap, double parameter_cap) {
                const double cost = largest_cost(policy, s, pre, c, cost_cap, parameter_cap, work);
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
    if (this->request_.cutoff_s < detail::place::infinity || !this->request_.memory_need)
      return this->above_cutoff();
    return detail::place::smallest_memory_need(
        policy, s, tables, this->request_, [&](std::size_t ti) { return prefixes[ti].params.back(); },
        [&](std::size_t ti, int pp, int dp, double bound) {
          const stage_context c{tables[ti].tp, pp, dp, s.microbatches / dp};
          if (!configures(policy, ti) || !stage_tables(policy, s, prefixes, ti, c, work)) {
            return detail::place::infinity;
          }
          return solve<measure::memory>(policy, s, prefixes[ti], c, bound, detail::place::infinity, work);
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
  };

  struct scratch {
    std::vector<double> previous, current;
    std::vector<detail::place::range_sum_caps::entry> caps;  ///< the caps' merge (range_sum_caps)
    std::vector<std::size_t> first_end, last_end;            ///< per stage: stage_ends
    std::vector<std::size_t> argument;                       ///< (k, i) -> where stage k starts
    std::vector<std::size_t> cuts;       ///< stage boundaries of the last solution: 0 = c0 < ... < cpp = L
    std::vector<std::size_t> best_cuts;  ///< least_pipeline's best so far
    // The configuration's stages (stage_tables): each one's table, work prefix and device memory.
    std::vector<std::size_t> tables;
    std::vector<const std::vector<double>*> stage_work;
    std::vector<double> capacity;
    bool mixed = false;  ///< stages costed on more than one table
    // The configuration's cuts (price_cuts).
    std::vector<double> cut;   ///< per node index i: what the cut before node i adds to a stage beside it
    double least_cut = 0.0;    ///< the least of them
    bool per_cut = false;      ///< the policy prices cuts (cut_s); otherwise every stage adds `overhead`
    bool uniform_cuts = true;  ///< every cut costs the same (so does every stage's sends)
    double overhead = 0.0;     ///< !per_cut: what every stage adds to its work
    double least_work = 0.0;   ///< mixed: the least total work (each node on its fastest table)
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
    return pre;
  }

  /// What a DP minimizes the largest of over the stages.
  enum class measure : std::uint8_t {
    cost,    ///< stage_cost_s (stages must fit)
    memory,  ///< stage_memory
    time,    ///< stage_time_s (stages must fit, and each stage's cost, its pipeline_s, stay below the cap)
  };

  /// The largest stage cost of a best partition into pp stages whose stages fit and hold at most
  /// `parameter_cap` parameter bytes, when it is below `cap` (infinity otherwise); leaves the partition in
  /// work.cuts. Under an UnevenPipelinePolicy the largest cost is the pipeline, pipeline_s(t_max, sum_i t_i):
  /// on one table the sum is the same for every split (c.stage_time_sum_s), so a partition of the least
  /// slowest stage is best (measure::time: ties go to the least t_max for any number of microbatches); on
  /// mixed tables the sum depends on the split (least_pipeline).
  static constexpr double largest_cost(const Policy& policy, const placement_settings& s, const prefix& pre,
                                       const stage_context& c, double cap, double parameter_cap,
                                       scratch& work) {
    if constexpr (UnevenPipelinePolicy<Policy>) {
      if (work.mixed || !work.uniform_cuts)
        return least_pipeline(policy, s, pre, c, cap, parameter_cap, work);
      const double slowest = solve<measure::time>(policy, s, pre, c, cap, parameter_cap, work);
      return slowest < detail::place::infinity ? policy.pipeline_s(s, slowest, c.stage_time_sum_s, c)
                                               : detail::place::infinity;
    } else {
      const double cost = solve<measure::cost>(policy, s, pre, c, cap, parameter_cap, work);
      return cost < cap ? cost : detail::place::infinity;
    }
  }

  /// Mixed tables under an UnevenPipelinePolicy: the least pipeline_s(max_k t_k, sum_k t_k) below `cap` over
  /// the partitions whose stages fit and hold at most `parameter_cap` (infinity when none), each stage timed
  /// on its own table. For a cap on the slowest stage's time, min_sum finds the least sum of stage times of a
  /// partition under it; caps go up from the least feasible one (the min-max DP on times), each the least
  /// stage time the previous DP had to refuse, until the pipeline of the cap with the least sum of any
  /// partition reaches the best found. Exact: the caps between two tried ones admit no other partition, so
  /// the cap tried just below the best partition's slowest time admits it, and its DP finds a sum no larger
  /// with a slowest stage no slower. Leaves the partition in work.cuts.
  static constexpr double least_pipeline(const Policy& policy, const placement_settings& s, const prefix& pre,
                                         const stage_context& c, double cap, double parameter_cap,
                                         scratch& work) {
    constexpr double inf = detail::place::infinity;
    const std::size_t n = pre.work.size() - 1;
    double best = cap;
    bool found = false;
    // Keeps a partition min_sum left in work.cuts when its pipeline is below the best.
    auto consider = [&](double sum) {
      if (!(sum < inf)) return;
      double slowest = 0.0;
      for (std::size_t k = 0; k + 1 < work.cuts.size(); ++k) {
        slowest = std::max(slowest, stage_time(work, stage_load_of(pre, work, k).work_s, work.cuts[k],
                                               work.cuts[k + 1], n, c.stages));
      }
      if (const double v = policy.pipeline_s(s, slowest, sum, c); v < best) {
        best = v;
        work.best_cuts = work.cuts;
        found = true;
      }
    };
    double next = inf;
    const double least_sum = min_sum(policy, s, pre, c, inf, parameter_cap, work, next);
    if (!(least_sum < inf)) return inf;
    consider(least_sum);
    double time_cap = solve<measure::time>(policy, s, pre, c, best, parameter_cap, work);
    while (time_cap < inf && policy.pipeline_s(s, time_cap, least_sum, c) < best) {
      next = inf;
      consider(min_sum(policy, s, pre, c, time_cap, parameter_cap, work, next));
      time_cap = next;
    }
    if (!found) return inf;
    work.cuts = work.best_cuts;
    return best;
  }

  /// Prices the cuts of a configuration once, for an UnevenPipelinePolicy: with the policy's cut_s,
  /// work.cut[i] is what the cut before node i (the bytes crossing it) adds to each stage beside it, asked
  /// once per distinct size rather than for every candidate stage (and the cluster's routes with it);
  /// without, every stage adds the same overhead (stage_time_s of a bare load).
  static constexpr void price_cuts(const Policy& policy, const placement_settings& s, const prefix& pre,
                                   const stage_context& c, scratch& work) {
    if constexpr (UnevenPipelinePolicy<Policy>) {
      const std::size_t n = pre.work.size() - 1;
      work.uniform_cuts = true;
      if constexpr (CutPricingPolicy<Policy>) {
        work.per_cut = true;
        work.cut.assign(n + 1, 0.0);
        double priced_bytes = -1.0;
        double priced = 0.0;
        for (std::size_t i = 1; i < n; ++i) {
          if (pre.boundary[i] != priced_bytes) {
            priced_bytes = pre.boundary[i];
            priced = policy.cut_s(s, priced_bytes, c);
          }
          work.cut[i] = priced;
          work.uniform_cuts = work.uniform_cuts && priced == work.cut[1];
          work.least_cut = i == 1 ? priced : std::min(work.least_cut, priced);
        }
      } else {
        work.per_cut = false;
        work.overhead = policy.stage_time_s(s, stage_load{}, c);
      }
    }
  }

  /// The time of the stage holding nodes [j, i) of n whose work is `stage_work`, bit for bit the policy's
  /// stage_time_s: its work plus the cuts it waits for (train::step_model::cuts_waited_for: the one before it
  /// forward and the one after it backward, the one it has at an end of the pipeline).
  static constexpr double stage_time(const scratch& work, double stage_work, std::size_t j, std::size_t i,
                                     std::size_t n, int stages) {
    if (!work.per_cut) return stage_work + work.overhead;
    if (stages <= 1) return stage_work;
    return stage_work + work.cut[j > 0 ? j : i] + work.cut[i < n ? i : j];
  }

  /// A lower bound of stage_time for a stage of `stage_work` and of every longer stage ending at the same
  /// node (more work, and cuts no cheaper than the least): what lets the DPs stop growing a stage.
  static constexpr double stage_time_floor(const scratch& work, double stage_work, int stages) {
    if (!work.per_cut) return stage_work + work.overhead;
    if (stages <= 1) return stage_work;
    return stage_work + work.least_cut + work.least_cut;
  }

  /// Stage k of the partition in work.cuts, on its own table.
  static constexpr stage_load stage_load_of(const prefix& pre, const scratch& work, std::size_t k) {
    const std::size_t j = work.cuts[k];
    const std::size_t i = work.cuts[k + 1];
    const std::vector<double>& stage_work = *work.stage_work[k];
    return {stage_work[i] - stage_work[j], pre.boundary[i], pre.params[i] - pre.params[j],
            pre.activations[i] - pre.activations[j]};
  }

  /// The least sum of stage times over partitions into pp stages whose stages fit, hold at most
  /// `parameter_cap` parameter bytes and take at most `time_cap` each (infinity when none); lowers `next` to
  /// every stage time above time_cap it refused (the next cap that admits another stage). Leaves the
  /// partition in work.cuts. O(L^2 pp): a sum has no bound to stop a stage's growth early.
  static constexpr double min_sum(const Policy& policy, const placement_settings& s, const prefix& pre,
                                  const stage_context& where, double time_cap, double parameter_cap,
                                  scratch& work, double& next) {
    const stage_context c = where;  // as in solve
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
      const double capacity = work.capacity[k - 1];
      for (std::size_t i = k; i + (stages - k) <= n; ++i) {
        double value = inf;
        std::size_t from = none;
        for (std::size_t j = i; j-- > k - 1;) {
          const stage_load l = load(stage_work, pre, j, i);
          if (l.parameter_bytes > parameter_cap) break;               // a longer stage holds more
          if (policy.stage_memory(s, l, stage, c) > capacity) break;  // needs more
          const double t = stage_time(work, l.work_s, j, i, n, c.stages);
          if (t > time_cap) {  // takes longer; so does every longer stage once its floor does
            next = std::min(next, t);
            const double floor = stage_time_floor(work, l.work_s, c.stages);
            if (floor > time_cap) {
              next = std::min(next, floor);
              break;
            }
            continue;
          }
          if (const double v = work.previous[j] + t; v < value) {
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
    if (result < inf) trace_back(work, n, stages);
    return result;
  }

  /// min over partitions into pp stages whose stages hold at most `parameter_cap` parameter bytes of the
  /// largest stage `Measure`, counting only stages below `cap` (measure::time: whose pipeline_s, with the
  /// context's stage_time_sum_s, is below it); infinity when none. Leaves the partition in work.cuts.
  template <measure Measure>
  static constexpr double solve(const Policy& policy, const placement_settings& s, const prefix& pre,
                                const stage_context& where, double cap, double parameter_cap, scratch& work) {
    // A const copy: no store into work can change it, so what depends on the stage alone (in-flight
    // microbatches) leaves the inner loop.
    const stage_context c = where;
    const std::size_t n = pre.work.size() - 1;
    const auto stages = static_cast<std::size_t>(c.stages);
    constexpr double inf = detail::place::infinity;
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    if constexpr (Measure == measure::time) {
      stage_ends(policy, s, pre, c, cap, parameter_cap, work);
    }
    work.previous.assign(n + 1, inf);
    work.previous[0] = 0.0;
    work.argument.assign((stages + 1) * (n + 1), none);
    for (std::size_t k = 1; k <= stages; ++k) {
      work.current.assign(n + 1, inf);
      const int stage = static_cast<int>(k - 1);
      const std::vector<double>& stage_work = *work.stage_work[k - 1];
      [[maybe_unused]] const double capacity = work.capacity[k - 1];
      std::size_t first_end = k;
      std::size_t last_end = n - (stages - k);
      if constexpr (Measure == measure::time) {
        first_end = std::max(first_end, work.first_end[k]);
        last_end = std::min(last_end, work.last_end[k]);
      }
      for (std::size_t i = first_end; i <= last_end; ++i) {
        // measure::time compares times, so the cap on costs is checked stage by stage instead.
        double value = Measure == measure::time ? inf : cap;
        std::size_t from = none;
        for (std::size_t j = i; j-- > k - 1;) {
          const stage_load l = load(stage_work, pre, j, i);
          if (l.parameter_bytes > parameter_cap) break;  // a longer stage holds more
          const double memory = policy.stage_memory(s, l, stage, c);
          double amount = memory;
          if constexpr (Measure != measure::memory) {
            if (memory > capacity) break;  // a longer stage needs more
          }
          if constexpr (Measure == measure::cost) amount = policy.stage_cost_s(s, l, c);
          if constexpr (Measure == measure::time) {
            // A longer stage takes at least this stage's floor (uneven cuts: its own cuts may be cheaper).
            const double floor = stage_time_floor(work, l.work_s, c.stages);
            if (policy.pipeline_s(s, floor, c.stage_time_sum_s, c) >= cap || floor >= value) break;
            amount = stage_time(work, l.work_s, j, i, n, c.stages);
            if (policy.pipeline_s(s, amount, c.stage_time_sum_s, c) >= cap || amount >= value) continue;
          }
          if (amount >= value) break;  // a longer stage costs more
          const double v = std::max(work.previous[j], amount);
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
    if (result < (Measure == measure::time ? inf : cap)) trace_back(work, n, stages);
    return result;
  }

  /// Where stage k (1-based) can end on a partition of the n nodes whose every stage solve<measure::time>
  /// may take: one that holds at most `parameter_cap`, fits its devices' memory and whose time is below
  /// `cap`, by a relaxation of the last rule (a stage's time is at least its floor, stage_time_floor, so a
  /// stage whose floor's pipeline reaches the cap is never taken). A stage that gains a node breaks each rule
  /// it broke before. So stage k ends at most where k such stages reach from the start (each as long as it
  /// can: a stage that starts later is no longer, so the longest first stages reach farthest), and at least
  /// where the stages after it, each as long as it can, must start to reach the end; stages that reach past
  /// the other end are cut short (any part of a stage below the cap is below it), and a stage that cannot
  /// grow by one node ends where it is at the latest (it may start earlier: each stage has its own memory).
  /// Into work.first_end[k] and work.last_end[k]. A pair (k, i) outside these lies on no partition below the
  /// cap, nor does any pair that takes its value, so solve skips it: the result, the partition traced back
  /// and every tie are those of the whole DP.
  static constexpr void stage_ends(const Policy& policy, const placement_settings& s, const prefix& pre,
                                   const stage_context& c, double cap, double parameter_cap, scratch& work) {
    const std::size_t n = pre.work.size() - 1;
    const auto stages = static_cast<std::size_t>(c.stages);
    auto below = [&](std::size_t k, std::size_t j, std::size_t i) {
      const stage_load l = load(*work.stage_work[k - 1], pre, j, i);
      if (l.parameter_bytes > parameter_cap) return false;
      if (policy.stage_memory(s, l, static_cast<int>(k - 1), c) > work.capacity[k - 1]) return false;
      return policy.pipeline_s(s, stage_time_floor(work, l.work_s, c.stages), c.stage_time_sum_s, c) < cap;
    };
    work.first_end.assign(stages + 2, 0);
    work.last_end.assign(stages + 2, n);
    std::size_t reach = 0;  // where the first k stages, each as long as it can be, end
    for (std::size_t k = 1; k <= stages; ++k) {
      std::size_t end = reach;
      while (end < n && below(k, reach, end + 1)) ++end;
      work.last_end[k] = reach = end;
    }
    std::size_t start = n;  // where stages k + 1 .. pp, each as long as it can be, start
    work.first_end[stages] = n;
    for (std::size_t k = stages; k >= 2; --k) {
      std::size_t from = start;
      while (from > 0 && below(k, from - 1, start)) --from;
      work.first_end[k - 1] = start = from;
    }
  }

  /// The stage holding nodes [j, i) whose work is `stage_work`.
  static constexpr stage_load load(const std::vector<double>& stage_work, const prefix& pre, std::size_t j,
                                   std::size_t i) {
    return {stage_work[i] - stage_work[j], pre.boundary[i], pre.params[i] - pre.params[j],
            pre.activations[i] - pre.activations[j], pre.boundary[j]};
  }

  /// The partition the last DP's work.argument leads to from all n nodes, into work.cuts.
  static constexpr void trace_back(scratch& work, std::size_t n, std::size_t stages) {
    work.cuts.assign(stages + 1, 0);
    std::size_t i = n;
    for (std::size_t k = stages; k >= 1; --k) {
      work.cuts[k] = i;
      i = work.argument[k * (n + 1) + i];
    }
    work.cuts[0] = 0;
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
