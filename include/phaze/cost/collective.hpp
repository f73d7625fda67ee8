/// @file
/// Collective latency in the alpha-beta model: ring all-reduce, reduce-scatter, all-gather and
/// point-to-point transfers over the slowest link a group of devices spans.
#pragma once

#include <cstdint>

#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/op.hpp"

namespace phaze::cost {

/// The devices a collective runs over: how many, and whether they span more than one node. Placement code
/// says what it knows (a data-parallel group of 64 devices spans nodes; a tensor-parallel group of 8 on
/// 8-GPU nodes does not); `packed_group` assumes the group's devices are packed into as few nodes as
/// possible.
struct group {
  int size = 1;
  bool spans_nodes = false;
  friend constexpr bool operator==(const group&, const group&) = default;
};

/// A group of `size` devices packed into nodes: it fits inside one node when size <= devices_per_node.
inline constexpr auto packed_group = [](int size, const hw::links& l) constexpr -> group {
  return {size, size > l.devices_per_node};
};

/// The link a group communicates over: the slowest one it spans. A group inside one node uses the node's
/// fast domain (NVLink, ICI); one that spans nodes is limited by the network between nodes, since a ring
/// through all its members crosses it (every ring step waits for its slowest hop).
struct link_params {
  bytes_per_second bandwidth{0.0};  ///< per device, per direction
  seconds latency{0.0};             ///< per message step
};

inline constexpr auto slowest_link = [](group g, const hw::links& l) constexpr -> link_params {
  if (g.spans_nodes) return {l.inter_node, l.inter_latency};
  return {l.intra_node, l.intra_latency};
};

/// Ring all-reduce of `message` bytes (the whole tensor) over n devices: a reduce-scatter and an all-gather,
/// each n - 1 steps moving message / n per device: 2 (n - 1) / n * message / bandwidth + 2 (n - 1) * latency
/// (Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication Operations in MPICH", 2005;
/// Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms", 2009). Zero for one device.
inline constexpr auto all_reduce_time = [](bytes message, group g, const hw::links& l) constexpr -> seconds {
  if (g.size <= 1) return seconds{0.0};
  const auto link = slowest_link(g, l);
  const double n = static_cast<double>(g.size);
  return 2.0 * (n - 1.0) / n * (message / link.bandwidth) + 2.0 * (n - 1.0) * link.latency;
};

/// Ring reduce-scatter of a `message`-byte tensor (each device ends with message / n reduced):
/// (n - 1) / n * message / bandwidth + (n - 1) * latency (Thakur et al. 2005).
inline constexpr auto reduce_scatter_time =
    [](bytes message, group g, const hw::links& l) constexpr -> seconds {
  if (g.size <= 1) return seconds{0.0};
  const auto link = slowest_link(g, l);
  const double n = static_cast<double>(g.size);
  return (n - 1.0) / n * (message / link.bandwidth) + (n - 1.0) * link.latency;
};

/// Ring all-gather into a `message`-byte tensor (each device contributes message / n): the same cost as
/// the reduce-scatter (Thakur et al. 2005).
inline constexpr auto all_gather_time = [](bytes message, group g, const hw::links& l) constexpr -> seconds {
  return reduce_scatter_time(message, g, l);
};

/// A point-to-point transfer (a pipeline-stage boundary) between two devices: message / bandwidth + one
/// latency, over the network when the pair spans nodes (`g.spans_nodes`), inside the node otherwise.
inline constexpr auto point_to_point_time =
    [](bytes message, group g, const hw::links& l) constexpr -> seconds {
  const auto link = slowest_link(g, l);
  return message / link.bandwidth + link.latency;
};

/// The time of a collective op kind (all_reduce, reduce_scatter, all_gather) on `message` bytes; zero for
/// anything else (tp_copy is the identity in its forward pass).
inline constexpr auto collective_time =
    [](model::op_kind k, bytes message, group g, const hw::links& l) constexpr -> seconds {
  switch (k) {
    case model::op_kind::all_reduce:
      return all_reduce_time(message, g, l);
    case model::op_kind::reduce_scatter:
      return reduce_scatter_time(message, g, l);
    case model::op_kind::all_gather:
      return all_gather_time(message, g, l);
    default:
      return seconds{0.0};
  }
};

}  // namespace phaze::cost
