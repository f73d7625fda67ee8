/// @file
/// Full plan evaluations at the rate of a sweep: the time per batch, the peak memory per device and whether
/// it fits, of a plan given by its stage boundaries and data-parallel degree, on a model's layer cost table
/// at one tensor-parallel width under the training-step objective (place::step_policy). The table's nodes
/// are summed once into prefix sums, so a plan of p stages costs O(p) step-model terms and no allocation on
/// one device type (a stage of several types asks the cluster for its members). The numbers are
/// place::evaluate's for the same stages (to the rounding of the sums: tests/place/plan_evaluator_test.cpp),
/// which are train::estimate_step's for that split.
///
///     const auto mp = place::model_tables(m, c, k, {8}, cache);
///     const place::plan_evaluator eval{mp};
///     const std::array<std::size_t, 4> first{0, 25, 49, 73};  // four stages of a 98-node chain
///     const place::plan_evaluation e = eval(first, 32);       // dp 32 (tp 8, pp 4: 1024 devices)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/place/cost_table.hpp"
#include "phaze/place/model_placement.hpp"
#include "phaze/place/objective.hpp"
#include "phaze/place/step_policy.hpp"

namespace phaze::place {

/// What one plan evaluation gives.
struct plan_evaluation {
  seconds time_per_batch{0.0};
  bytes peak_memory{0.0};  ///< the largest stage memory per device
  bool fits = false;       ///< every stage within its devices' memory
};

/// Evaluates plans on one width's tables of a model's placement problem (place::model_tables): the first
/// table of the width (`width` counts widths in the order they were built) and, on a cluster of several
/// device types, the others of that width, which a stage of another type is timed on (step_policy::
/// stage_table). The chain's nodes in order; each plan is a list of stage starts. It checks what
/// place::evaluate checks (stages, degrees, microbatches), not what a search would also ask of a plan
/// (place::model_request: every device used, a pipeline depth ZeRO-2 allows).
class plan_evaluator {
 public:
  explicit plan_evaluator(const model_problem& mp, std::size_t width = 0)
      : settings_(mp.problem), policy_(mp.policy), routes_(mp.routes) {
    const std::size_t types = policy_.types();
    first_table_ = width * types;
    if (first_table_ + types > mp.problem.tables.size())
      throw input_error("plan_evaluator: the problem has no tables for width " + std::to_string(width) +
                        " (one per device type)");
    tp_ = mp.problem.tables[first_table_].tp;
    nodes_ = mp.problem.tables[first_table_].nodes.size();
    for (std::size_t t = first_table_; t < first_table_ + types; ++t) {
      const cost_table& table = mp.problem.tables[t];
      if (table.nodes.size() != nodes_ || table.edges.size() + 1 != nodes_)
        throw input_error("plan_evaluator: the tables must be chains of the same nodes");
      sums_.push_back(prefix_sums(table));
    }
  }

  [[nodiscard]] int tp() const { return tp_; }
  [[nodiscard]] std::size_t nodes() const { return nodes_; }

  /// The plan whose stage k starts at node first[k] (first[0] = 0, increasing, below nodes(); the last stage
  /// runs to the end) with `dp` replicas: pp = first.size(). Throws input_error when the stages or the
  /// degrees do not fit the problem (as place::evaluate).
  [[nodiscard]] plan_evaluation operator()(std::span<const std::size_t> first, int dp) const {
    const int pp = static_cast<int>(first.size());
    check(first, dp);
    stage_context c{tp_, pp, dp, settings_.microbatches / dp};
    // The stage times first: a stage's cost depends on every stage's time (stage_time_sum_s).
    double sum = 0.0;
    for (int k = 0; k < pp; ++k) sum += policy_.stage_time_s(settings_, load(first, k, c), c);
    c.stage_time_sum_s = sum;
    double worst = 0.0;
    double largest = 0.0;
    double peak = 0.0;
    bool fits = true;
    for (int k = 0; k < pp; ++k) {
      const stage_load l = load(first, k, c);
      const double memory = policy_.stage_memory(settings_, l, k, c);
      worst = std::max(worst, policy_.stage_cost_s(settings_, l, c));
      largest = std::max(largest, l.parameter_bytes);
      peak = std::max(peak, memory);
      fits = fits && memory <= stage_capacity_of(policy_, settings_, k, c);
    }
    return {seconds{policy_.batch_time_s(settings_, worst, largest, c)}, bytes{peak}, fits};
  }

 private:
  /// Per table: the running sums of every node's work, parameters and activations (entry v: nodes before v),
  /// and each edge's bytes (edge v: node v to v + 1).
  struct sums {
    std::vector<double> work;
    std::vector<double> parameters;
    std::vector<double> activations;
    std::vector<double> boundary;
  };

  placement_settings settings_;
  step_policy policy_;
  std::shared_ptr<train::route_memo> routes_;  ///< what policy_'s step model remembers routes in, if anything
  std::size_t first_table_ = 0;
  int tp_ = 1;
  std::size_t nodes_ = 0;
  std::vector<sums> sums_;

  [[nodiscard]] sums prefix_sums(const cost_table& t) const {
    sums s;
    s.work.push_back(0.0);
    s.parameters.push_back(0.0);
    s.activations.push_back(0.0);
    for (const cost_node& n : t.nodes) {
      s.work.push_back(s.work.back() + policy_.work_s(settings_, n));
      s.parameters.push_back(s.parameters.back() + n.parameters.value());
      s.activations.push_back(s.activations.back() + n.activations.value());
    }
    for (std::size_t v = 0; v + 1 < t.nodes.size(); ++v) {
      const cost_edge& e = t.edges[v];
      if (e.from != v || e.to != v + 1)
        throw input_error("plan_evaluator: edge " + std::to_string(v) + " must run from node " +
                          std::to_string(v) + " to node " + std::to_string(v + 1) + " (a chain in order)");
      s.boundary.push_back(e.boundary.value());
    }
    return s;
  }

  /// Stage k's load on the table that times it (its own type's, or its slowest member's).
  [[nodiscard]] stage_load load(std::span<const std::size_t> first, int k, const stage_context& c) const {
    const std::size_t table = stage_table_of(policy_, first_table_, k, c) - first_table_;
    if (table >= sums_.size())
      throw input_error("plan_evaluator: stage " + std::to_string(k) + " has no table of its devices");
    const sums& s = sums_[table];
    const std::size_t begin = first[static_cast<std::size_t>(k)];
    const std::size_t end =
        static_cast<std::size_t>(k) + 1 < first.size() ? first[static_cast<std::size_t>(k) + 1] : nodes_;
    stage_load l;
    l.work_s = s.work[end] - s.work[begin];
    l.parameter_bytes = s.parameters[end] - s.parameters[begin];
    l.activation_bytes = s.activations[end] - s.activations[begin];
    l.boundary_in_bytes = begin > 0 ? s.boundary[begin - 1] : 0.0;
    l.boundary_bytes = end < nodes_ ? s.boundary[end - 1] : 0.0;
    return l;
  }

  void check(std::span<const std::size_t> first, int dp) const {
    const auto pp = static_cast<std::int64_t>(first.size());
    if (pp < 1 || dp < 1) throw input_error("plan_evaluator: a plan needs dp >= 1 and at least one stage");
    if (settings_.microbatches % dp != 0) {
      throw input_error("plan_evaluator: dp " + std::to_string(dp) + " does not divide the " +
                        std::to_string(settings_.microbatches) + " microbatches; choose a divisor");
    }
    if (static_cast<std::int64_t>(tp_) * pp * dp > settings_.devices) {
      throw input_error("plan_evaluator: tp * pp * dp = " + std::to_string(tp_ * pp * dp) + " exceeds the " +
                        std::to_string(settings_.devices) + " devices");
    }
    if (first.front() != 0) throw input_error("plan_evaluator: the first stage must start at node 0");
    for (std::size_t k = 1; k < first.size(); ++k) {
      if (first[k] <= first[k - 1] || first[k] >= nodes_) {
        throw input_error("plan_evaluator: stage " + std::to_string(k) + " starts at node " +
                          std::to_string(first[k]) + "; stage starts must increase and stay below the " +
                          std::to_string(nodes_) + " nodes");
      }
    }
  }
};

}  // namespace phaze::place
