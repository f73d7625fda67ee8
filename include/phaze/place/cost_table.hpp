/// @file
/// The layer cost table (per tensor-parallel width) and the placement problem every placer solves
/// (docs/layer-table.md).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::place {

/// One layer node of the table, as one tensor-parallel rank sees it (the table is per TP width, so every
/// time and size here is already per rank).
struct cost_node {
  std::string name;             ///< for reports ("embedding", "block 3", ...)
  seconds forward{};            ///< forward time of one microbatch
  seconds backward{};           ///< backward time of one microbatch
  seconds recompute{};          ///< forward again, paid in backward when activations are recomputed
  bytes parameters{};           ///< parameter bytes held by one rank (weights in their training precision)
  bytes activations{};          ///< activation bytes kept per microbatch until its backward
  bool tensor_parallel = true;  ///< whether the layer is split over the TP group (informational)
};

/// A data edge: `from`'s output feeds `to`; `boundary` bytes cross a stage boundary per microbatch.
struct cost_edge {
  std::size_t from = 0;
  std::size_t to = 0;
  bytes boundary{};
};

/// A layer cost table for one tensor-parallel width: a DAG whose nodes are in topological order
/// (every edge goes from a lower to a higher index).
struct cost_table {
  int tp = 1;
  std::vector<cost_node> nodes;
  std::vector<cost_edge> edges;
};

/// What a placer reads from a table: `tp`, `nodes` (with the fields of cost_node) and `edges`.
template <class T>
concept CostTable = requires(const T& t, std::size_t i) {
  { t.tp } -> std::convertible_to<int>;
  { t.nodes.size() } -> std::convertible_to<std::size_t>;
  { t.nodes[i].forward } -> std::convertible_to<seconds>;
  { t.nodes[i].backward } -> std::convertible_to<seconds>;
  { t.nodes[i].recompute } -> std::convertible_to<seconds>;
  { t.nodes[i].parameters } -> std::convertible_to<bytes>;
  { t.nodes[i].activations } -> std::convertible_to<bytes>;
  { t.edges.size() } -> std::convertible_to<std::size_t>;
  { t.edges[i].from } -> std::convertible_to<std::size_t>;
  { t.edges[i].to } -> std::convertible_to<std::size_t>;
  { t.edges[i].boundary } -> std::convertible_to<bytes>;
};

/// The scalar part of a placement problem: the cluster and the training knobs a placer needs.
struct placement_settings {
  int devices = 1;                          ///< N: tp * pp * dp <= N
  bytes memory_per_device{};                ///< capacity of one device
  std::int64_t microbatches = 1;            ///< per batch: global batch / microbatch size
  double weight_bytes_per_parameter = 2.0;  ///< precision of the table's parameter bytes (bf16: 2)
  double state_bytes_per_parameter = 16.0;  ///< weights + gradients + optimizer state per parameter
  bytes_per_second p2p_bandwidth{1.0};      ///< between adjacent pipeline stages
  bytes_per_second dp_bandwidth{1.0};       ///< of the data-parallel gradient all-reduce
  /// How many microbatches' activations a stage holds: GPipe all of them, 1F1B (and interleaved 1F1B, which
  /// the generic policies treat as 1F1B) p - i at stage i of p, at most the microbatches per replica.
  train::pipeline_schedule schedule = train::pipeline_schedule::one_f_one_b;
  bool recompute = false;  ///< whether backward pays each node's recompute time
};

/// A placement problem: tables for several TP widths and the settings.
template <CostTable Table = cost_table>
struct placement_problem : placement_settings {
  std::vector<Table> tables;
};

namespace detail::place {
[[noreturn]] inline void invalid(const std::string& what) {
  throw input_error("placement problem: " + what);
}
}  // namespace detail::place

/// Checks a table: a positive TP width, at least one node, non-negative values, edges within range and
/// in topological order. Throws input_error naming the offending entry.
template <CostTable Table>
constexpr void validate_table(const Table& t) {
  using detail::place::invalid;
  const auto where = [&] { return "table for tp " + std::to_string(t.tp); };  // built only for a message
  if (t.tp < 1) invalid("a table has tp " + std::to_string(t.tp) + "; give a positive TP width");
  if (t.nodes.size() == 0) invalid(where() + " has no nodes; give at least one layer node");
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const auto& n = t.nodes[i];
    if (!(n.forward.value() >= 0) || !(n.backward.value() >= 0) || !(n.recompute.value() >= 0) ||
        !(n.parameters.value() >= 0) || !(n.activations.value() >= 0)) {
      invalid(where() + ", node " + std::to_string(i) + ": times and sizes must be at least 0");
    }
  }
  for (std::size_t e = 0; e < t.edges.size(); ++e) {
    const auto& edge = t.edges[e];
    if (edge.from >= edge.to || edge.to >= t.nodes.size()) {
      invalid(where() + ", edge " + std::to_string(e) + " (" + std::to_string(edge.from) + " -> " +
              std::to_string(edge.to) + "): nodes must exist and be in topological order (from < to)");
    }
    if (!(edge.boundary.value() >= 0)) invalid(where() + ", edge " + std::to_string(e) + ": negative bytes");
  }
}

/// Checks the scalar settings; throws input_error saying what to fix.
constexpr void validate_settings(const placement_settings& p) {
  using detail::place::invalid;
  if (p.devices < 1) invalid("devices is " + std::to_string(p.devices) + "; give at least 1");
  if (!(p.memory_per_device.value() > 0)) invalid("memory per device must be positive");
  if (p.microbatches < 1) invalid("microbatches must be at least 1");
  if (!(p.weight_bytes_per_parameter > 0) || !(p.state_bytes_per_parameter > 0)) {
    invalid("bytes per parameter must be positive");
  }
  if (!(p.p2p_bandwidth.value() > 0) || !(p.dp_bandwidth.value() > 0)) invalid("bandwidths must be positive");
}

/// Checks every table: at least one, one per TP width, each valid; throws input_error saying what to fix.
/// With `one_per_width` false (a policy that costs stages on tables of several device types), tables of the
/// same width must have the same layer graph instead.
template <CostTable Table>
constexpr void validate_tables(const std::vector<Table>& tables, bool one_per_width = true) {
  using detail::place::invalid;
  if (tables.empty()) invalid("no cost tables; give a table for at least one TP width");
  for (std::size_t i = 0; i < tables.size(); ++i) {
    validate_table(tables[i]);
    for (std::size_t j = 0; j < i; ++j) {
      if (!one_per_width) {
        if (tables[j].tp == tables[i].tp && (tables[j].nodes.size() != tables[i].nodes.size() ||
                                             tables[j].edges.size() != tables[i].edges.size()))
          invalid("tables for tp " + std::to_string(tables[i].tp) +
                  " of two device types hold different graphs");
        continue;
      }
      if (tables[j].tp == tables[i].tp) {
        invalid("two tables for tp " + std::to_string(tables[i].tp) + "; give one table per TP width");
      }
    }
  }
}

/// Checks the settings and every table; throws input_error saying what to fix.
template <CostTable Table>
constexpr void validate(const placement_problem<Table>& p) {
  validate_settings(p);
  validate_tables(p.tables);
}

/// Whether a table is a chain: node i feeds node i + 1 and nothing else.
template <CostTable Table>
constexpr bool is_chain(const Table& t) {
  if (t.edges.size() + 1 != t.nodes.size()) return false;
  std::vector<bool> seen(t.nodes.size(), false);
  for (std::size_t e = 0; e < t.edges.size(); ++e) {
    if (t.edges[e].to != t.edges[e].from + 1 || seen[t.edges[e].from]) return false;
    seen[t.edges[e].from] = true;
  }
  return true;
}

}  // namespace phaze::place
