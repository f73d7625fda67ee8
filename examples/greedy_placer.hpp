// A placer a user writes: greedy balanced partition of a layer chain. For every tensor-parallel table and
// pipeline depth it cuts the chain where the running work crosses k / pp of the total (the classic
// linear-time heuristic), evaluates the split with phaze's objective and keeps the fastest that fits. Fast,
// never better than the exact chain DP, and often as good on uniform transformer chains. It models
// place::Placer, so the co-search and `phaze plan` can run it (examples/custom_placer.cpp), and bench_place
// compares it with chain_dp and downset_dp on the same tables.
#pragma once

#include <phaze/place/concepts.hpp>
#include <phaze/place/cost_table.hpp>
#include <phaze/place/objective.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

namespace user {

struct greedy_placer {
  [[nodiscard]] static constexpr std::string_view name() { return "greedy"; }

  template <phaze::place::CostTable Table, phaze::place::PlacementPolicy Policy>
  [[nodiscard]] phaze::place::plan place(const phaze::place::placement_problem<Table>& problem,
                                         const Policy& policy,
                                         const phaze::place::placement_request& request) const {
    namespace place = phaze::place;
    place::validate(problem);
    const place::placement_settings& s = problem;
    place::plan best;
    double leanest = std::numeric_limits<double>::infinity();
    bool any_candidate = false;
    for (const Table& t : problem.tables) {
      if (request.tp != 0 && request.tp != t.tp) continue;
      const auto nodes = static_cast<int>(t.nodes.size());
      const int deepest = request.max_pp > 0 ? std::min(request.max_pp, nodes) : nodes;
      for (int pp = 1; pp <= deepest && std::int64_t{t.tp} * pp <= s.devices; ++pp) {
        if (request.pp != 0 && request.pp != pp) continue;
        const int most = s.devices / (t.tp * pp);
        for (int dp = most; dp >= 1; --dp) {
          if (request.dp != 0 && request.dp != dp) continue;
          if (request.use_all_devices && std::int64_t{t.tp} * pp * dp != s.devices) continue;
          if (s.microbatches % dp != 0) continue;
          any_candidate = true;
          const place::plan p = place::evaluate(s, t, dp, balanced_split(policy, s, t, pp), policy);
          if (!p.feasible) {
            leanest = std::min(leanest, p.peak_memory.value());
            continue;
          }
          const double limit = best.feasible ? best.time_per_batch.value() : request.cutoff_s;
          if (p.time_per_batch.value() < limit) best = p;
        }
      }
    }
    if (!any_candidate) {
      throw place::no_admissible_configuration(
          "greedy placer: no (tp, pp, dp) fits the devices and the request");
    }
    if (!best.feasible) {
      // Nothing fits, or nothing beat the cutoff: the library's infeasible plan, with the leanest need.
      const bool above_cutoff = leanest == std::numeric_limits<double>::infinity();
      place::plan none = place::infeasible_plan(s, above_cutoff ? 0.0 : leanest);
      none.above_cutoff = above_cutoff;
      return none;
    }
    return best;
  }

 private:
  /// Cuts a chain into `pp` non-empty runs of consecutive nodes where the running work first reaches
  /// k / pp of the total.
  template <class Table, class Policy>
  static std::vector<std::vector<std::size_t>> balanced_split(const Policy& policy,
                                                              const phaze::place::placement_settings& s,
                                                              const Table& t, int pp) {
    const std::size_t n = t.nodes.size();
    double total = 0.0;
    for (const auto& node : t.nodes) total += policy.work_s(s, node);
    std::vector<std::vector<std::size_t>> stages(static_cast<std::size_t>(pp));
    double running = 0.0;
    std::size_t stage = 0;
    for (std::size_t v = 0; v < n; ++v) {
      const std::size_t left = n - v;  // nodes not yet placed, this one included
      const std::size_t stages_left = static_cast<std::size_t>(pp) - stage;
      // Move on when this stage has its share of the work, or when the rest must fill the later stages.
      const bool share_reached = running >= total * static_cast<double>(stage + 1) / pp;
      if (!stages[stage].empty() && stage + 1 < stages.size() && (share_reached || left < stages_left)) {
        ++stage;
      }
      stages[stage].push_back(v);
      running += policy.work_s(s, t.nodes[v]);
    }
    return stages;
  }
};

static_assert(phaze::place::Placer<greedy_placer>);

}  // namespace user
