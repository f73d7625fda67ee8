/// @file
/// The brute-force placer: every (tp, pp, dp) and every partition into contiguous stages; the oracle the
/// tests hold every other placer to (small instances only).
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

/// Most nodes brute_force accepts: it enumerates node subsets as bit masks.
inline constexpr std::size_t brute_force_max_nodes = 16;
/// Most steps of brute_force's enumeration (downsets tried as the next stage, over every configuration):
/// about five seconds on one core (a 10-node graph without edges reaches it; an 8-node one is placed in 5 s).
/// A wide DAG has far more chains of downsets than a chain has splits; past this budget brute_force stops
/// with an error rather than run for hours (docs/limits.md).
inline constexpr std::uint64_t brute_force_max_steps = std::uint64_t{1} << 31;

/// Enumerates every admissible (tp, pp, dp) and every chain of downsets (ideals) from the empty set to all
/// nodes (on a chain: every split into consecutive ranges) and evaluates each plan with `evaluate`, the
/// objective recomputed from the nodes. Exponential: for tests and small instances.
///
///     auto oracle = brute_force(problem).devices(8).run();
template <CostTable Table = cost_table, class Policy = pipeline_policy>
class brute_force : public placer_base<brute_force<Table, Policy>, Table, Policy> {
  using base = placer_base<brute_force<Table, Policy>, Table, Policy>;

 public:
  using base::base;

  /// How the Placer object of this placer (placer_of) names it.
  static constexpr std::string_view placer_name = "brute";
  /// Every split evaluated whole, its cuts priced by size; one device type.
  static constexpr placer_capabilities capabilities{.cuts_by_size = true, .mixed_devices = false};

 private:
  friend base;
  /// The best plan, or an infeasible plan with the smallest memory need.
  [[nodiscard]] plan place_all() const {
    this->check();
    const auto& tables = this->problem_->tables;
    const placement_settings& s = this->settings_;
    std::vector<std::vector<std::uint32_t>> downsets;
    for (const auto& t : tables) {
      if (t.nodes.size() > brute_force_max_nodes) {
        detail::place::invalid("brute_force enumerates every partition and takes at most " +
                               std::to_string(brute_force_max_nodes) + " nodes; the table for tp " +
                               std::to_string(t.tp) + " has " + std::to_string(t.nodes.size()));
      }
      downsets.push_back(all_downsets(t));
    }
    plan best;
    double need = detail::place::infinity;
    std::uint64_t steps = 0;
    const std::size_t configs =
        detail::place::for_each_config(s, tables, this->request_, [&](std::size_t ti, int pp, int dp) {
          const auto& t = tables[ti];
          const std::uint32_t all = (std::uint32_t{1} << t.nodes.size()) - 1;
          std::vector<std::uint32_t> chain{0};
          // Depth-first over chains of pp strictly growing downsets ending at `all`.
          auto extend = [&](auto& self) -> void {
            const std::uint32_t last = chain.back();
            if (chain.size() == static_cast<std::size_t>(pp) + 1) {
              if (last != all) return;
              plan candidate = evaluate(s, t, dp, stages_of(chain, t.nodes.size()), this->policy_);
              need = std::min(need, candidate.peak_memory.value());
              if (candidate.feasible && (!best.feasible || candidate.time_per_batch < best.time_per_batch)) {
                best = std::move(candidate);
              }
              return;
            }
            const bool final_step = chain.size() == static_cast<std::size_t>(pp);
            for (const std::uint32_t d : downsets[ti]) {
              if (++steps > brute_force_max_steps) {
                detail::place::invalid(
                    "brute_force would enumerate more than 2^31 partial splits of this graph "
                    "(its nodes admit too many orders); use the chain or downset placer, "
                    "which give the same optimum");
              }
              if (d == last || (last & ~d) != 0 || final_step != (d == all)) continue;
              chain.push_back(d);
              self(self);
              chain.pop_back();
            }
          };
          extend(extend);
        });
    if (configs == 0) detail::place::no_configuration(s, this->request_);
    if (best.feasible && best.time_per_batch.value() < this->request_.cutoff_s) return best;
    if (best.feasible) return this->above_cutoff();
    return infeasible_plan(s, need);
  }

 private:
  /// Every node subset closed under predecessors, as bit masks.
  static std::vector<std::uint32_t> all_downsets(const Table& t) {
    std::vector<std::uint32_t> out;
    const std::uint32_t count = std::uint32_t{1} << t.nodes.size();
    for (std::uint32_t mask = 0; mask < count; ++mask) {
      bool closed = true;
      for (std::size_t e = 0; e < t.edges.size() && closed; ++e) {
        if ((mask >> t.edges[e].to & 1U) != 0 && (mask >> t.edges[e].from & 1U) == 0) closed = false;
      }
      if (closed) out.push_back(mask);
    }
    return out;
  }

  static std::vector<std::vector<std::size_t>> stages_of(const std::vector<std::uint32_t>& chain,
                                                         std::size_t nodes) {
    std::vector<std::vector<std::size_t>> stages;
    for (std::size_t k = 1; k < chain.size(); ++k) {
      stages.emplace_back();
      const std::uint32_t diff = chain[k] & ~chain[k - 1];
      for (std::size_t v = 0; v < nodes; ++v) {
        if ((diff >> v & 1U) != 0) stages.back().push_back(v);
      }
    }
    return stages;
  }
};

template <CostTable Table>
brute_force(const placement_problem<Table>&) -> brute_force<Table>;
template <CostTable Table, class Policy>
brute_force(const placement_problem<Table>&, Policy) -> brute_force<Table, Policy>;

/// brute_force as a Placer (place/concepts.hpp): every partition (the oracle; small tables only). What
/// search::options and `phaze plan --placer brute` run.
using brute_force_placer = placer_of<brute_force>;

}  // namespace phaze::place
