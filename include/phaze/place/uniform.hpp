/// @file
/// The Megatron-style baseline: blocks split evenly over the pipeline stages, embedding with the first stage
/// and output head with the last (Narayanan et al., SC 2021), evaluated by the same objective.
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

/// Uniform placement on a chain: the first `leading` nodes (embedding) join stage 0, the last `trailing`
/// nodes (head) join the last stage, and the blocks between are split into pp equal runs; pp must divide the
/// block count, as Megatron-LM requires. With tp, pp and dp fixed it evaluates that one plan; otherwise it
/// returns the best uniform plan over every admissible (tp, pp, dp).
///
///     auto baseline = uniform(problem).tp(8).pp(16).dp(8).run();
template <CostTable Table = cost_table, class Policy = pipeline_policy>
class uniform : public placer_base<uniform<Table, Policy>, Table, Policy> {
  using base = placer_base<uniform<Table, Policy>, Table, Policy>;

 public:
  using base::base;

  /// How many nodes at the front (embedding) and back (head) stay outside the even split. Default: one
  /// each on chains of three nodes or more, none on shorter ones.
  uniform& pinned(std::size_t leading, std::size_t trailing) {
    leading_ = static_cast<std::int64_t>(leading);
    trailing_ = static_cast<std::int64_t>(trailing);
    return *this;
  }

  /// How the Placer object of this placer (placer_of) names it.
  static constexpr std::string_view placer_name = "uniform";
  /// Equal cuts and one device type.
  static constexpr placer_capabilities capabilities{.cuts_by_size = false, .mixed_devices = false};

 private:
  friend base;
  /// The best uniform plan, or an infeasible plan with the smallest memory need among uniform plans.
  /// Throws input_error when a table is not a chain or no (tp, pp, dp) splits the blocks evenly.
  [[nodiscard]] plan place_all() const {
    this->check();
    const auto& tables = this->problem_->tables;
    const placement_settings& s = this->settings_;
    plan best;
    double need = detail::place::infinity;
    std::size_t even = 0;
    detail::place::for_each_config(s, tables, this->request_, [&](std::size_t ti, int pp, int dp) {
      const auto& t = tables[ti];
      if (!is_chain(t)) {
        detail::place::invalid("uniform: the table for tp " + std::to_string(t.tp) +
                               " is not a chain; uniform splits chains of blocks only");
      }
      const auto n = static_cast<std::int64_t>(t.nodes.size());
      const std::int64_t lead = leading_ >= 0 ? leading_ : (n >= 3 ? 1 : 0);
      const std::int64_t trail = trailing_ >= 0 ? trailing_ : (n >= 3 ? 1 : 0);
      const std::int64_t blocks = n - lead - trail;
      if (blocks < pp || blocks % pp != 0) return;
      ++even;
      const std::int64_t per_stage = blocks / pp;
      std::vector<std::vector<std::size_t>> stages(static_cast<std::size_t>(pp));
      for (std::int64_t v = 0; v < n; ++v) {
        const std::int64_t block = std::clamp<std::int64_t>(v - lead, 0, blocks - 1);
        stages[static_cast<std::size_t>(block / per_stage)].push_back(static_cast<std::size_t>(v));
      }
      plan candidate = evaluate(s, t, dp, stages, this->policy_);
      need = std::min(need, candidate.peak_memory.value());
      if (candidate.feasible && (!best.feasible || candidate.time_per_batch < best.time_per_batch)) {
        best = std::move(candidate);
      }
    });
    if (even == 0) {
      detail::place::invalid(
          "uniform: no admissible (tp, pp, dp) splits the blocks evenly; choose pp dividing the number of "
          "blocks (nodes between the pinned embedding and head), and tp * pp * dp within the devices");
    }
    if (best.feasible && best.time_per_batch.value() < this->request_.cutoff_s) return best;
    if (best.feasible) return this->above_cutoff();
    return infeasible_plan(s, need);
  }

 private:
  std::int64_t leading_ = -1;  ///< -1: the default
  std::int64_t trailing_ = -1;
};

template <CostTable Table>
uniform(const placement_problem<Table>&) -> uniform<Table>;
template <CostTable Table, class Policy>
uniform(const placement_problem<Table>&, Policy) -> uniform<Table, Policy>;

/// uniform as a Placer (place/concepts.hpp): Megatron-LM's even split. What search::options and `phaze plan
/// --placer uniform` run.
using uniform_placer = placer_of<uniform>;

}  // namespace phaze::place
