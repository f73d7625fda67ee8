/// @file
/// Collective latency in the alpha-beta model: ring all-reduce, reduce-scatter, all-gather and
/// point-to-point transfers over the route a group of devices takes (cluster::route: the slowest hop of its
/// ring and the efficiency collectives reach on it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "phaze/cluster/links.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/model/op.hpp"

namespace phaze::cost {

/// Ring all-reduce of `message` bytes (the whole tensor) over n devices: a reduce-scatter and an all-gather,
/// each n - 1 steps moving message / n per device: 2 (n - 1) / n * message / bandwidth + 2 (n - 1) * latency
/// (Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication Operations in MPICH", 2005;
/// Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms", 2009), the bandwidth scaled by the route's
/// all-reduce efficiency. Zero for one device.
inline constexpr auto all_reduce_time =
    [](bytes message, int n, const cluster::route& r) constexpr -> seconds {
  if (n <= 1) return seconds{0.0};
  const double members = static_cast<double>(n);
  return 2.0 * (members - 1.0) / members *
             (message / (r.hop.bandwidth * r.efficiency.reached(r.efficiency.all_reduce))) +
         2.0 * (members - 1.0) * r.hop.latency;
};

/// Ring reduce-scatter of a `message`-byte tensor (each device ends with message / n reduced):
/// (n - 1) / n * message / bandwidth + (n - 1) * latency (Thakur et al. 2005).
inline constexpr auto reduce_scatter_time =
    [](bytes message, int n, const cluster::route& r) constexpr -> seconds {
  if (n <= 1) return seconds{0.0};
  const double members = static_cast<double>(n);
  return (members - 1.0) / members *
             (message / (r.hop.bandwidth * r.efficiency.reached(r.efficiency.reduce_scatter))) +
         (members - 1.0) * r.hop.latency;
};

/// Ring all-gather into a `message`-byte tensor (each device contributes message / n): the same steps as the
/// reduce-scatter (Thakur et al. 2005), at the all-gather efficiency.
inline constexpr auto all_gather_time =
    [](bytes message, int n, const cluster::route& r) constexpr -> seconds {
  if (n <= 1) return seconds{0.0};
  const double members = static_cast<double>(n);
  return (members - 1.0) / members *
             (message / (r.hop.bandwidth * r.efficiency.reached(r.efficiency.all_gather))) +
         (members - 1.0) * r.hop.latency;
};

/// A point-to-point transfer (a pipeline-stage boundary) between two devices: message / bandwidth + one
/// latency.
inline constexpr auto point_to_point_time = [](bytes message, const cluster::route& r) constexpr -> seconds {
  return message / (r.hop.bandwidth * r.efficiency.reached(r.efficiency.send_recv)) + r.hop.latency;
};

/// The links of an all-to-all group: `local` of its members share a node (route `inside` among them); the
/// others are reached over `across` (a node's interfaces).
/// `shares`: the parts of a rank's message bound for its own node's ranks and for the other nodes; unset,
/// NCCL's all-to-all's, (local - 1) / n and (n - local) / n. A dispatcher that sends fewer copies sets them
/// (train::moe_dispatcher::flex; deduplicated_copies).
struct all_to_all_routes {
  int local = 1;
  cluster::route inside{};
  cluster::route across{};
  std::optional<std::pair<double, double>> shares;
};

/// The expected number of the `groups` equal groups of `experts` experts that a token's top_k distinct
/// experts fall in, the experts drawn uniformly (balanced routing): groups x (1 - C(E - E/g, k) / C(E, k)).
constexpr double expected_groups_hit(std::int64_t experts, std::int64_t top_k, std::int64_t groups) {
  if (groups <= 1) return 1.0;
  const auto e = static_cast<double>(experts);
  const double outside = e - e / static_cast<double>(groups);
  double miss = 1.0;
  for (std::int64_t i = 0; i < top_k; ++i)
    miss *= std::max(0.0, outside - static_cast<double>(i)) / (e - static_cast<double>(i));
  return static_cast<double>(groups) * (1.0 - miss);
}

/// The copies of one token a rank of an expert-parallel group of n ranks, `local` of them per node, sends in
/// a dispatch that deduplicates (DeepEP's and HybridEP's kernels): over the network, one per other node
/// holding any of its top_k experts; over NVLink, one per other rank of its own node holding any, plus, for
/// each token it receives from another node, one per other rank of its node holding any of that token's
/// experts (the forwarding), given that the node holds one. Returns {inside, across} copies per token;
/// divided by top_k, the shares of the message (all_to_all_routes::shares). NCCL's all-to-all sends
/// top_k x (local - 1) / n and top_k x (n - local) / n.
constexpr std::pair<double, double> deduplicated_copies(std::int64_t experts, std::int64_t top_k, int n,
                                                        int local) {
  const int nodes = n / std::max(local, 1);
  const double rank_hit = expected_groups_hit(experts, top_k, n) / static_cast<double>(n);
  const double node_hit = expected_groups_hit(experts, top_k, nodes) / static_cast<double>(nodes);
  const double across = static_cast<double>(nodes - 1) * node_hit;
  const double others = static_cast<double>(local - 1) * rank_hit;
  const double inside = others + (node_hit > 0.0 ? across * others / node_hit : 0.0);
  return {inside, across};
}

/// An all-to-all in which each of n devices sends `message` bytes split evenly over the group (expert
/// parallelism's token dispatch and combine; NCCL's alltoall runs the n - 1 sends and receives of a device
/// at once): of a device's message, (local - 1) / n goes to the members in its node over `inside` and
/// (n - local) / n to the others over `across`, at the same time, so the slower of the two sets the time,
/// plus (n - 1) latencies: max((local - 1) / n m / B_inside, (n - local) / n m / B_across) + (n - 1) latency,
/// at the routes' send/recv efficiency; the routes' own shares in place of NCCL's where they carry them.
inline constexpr auto all_to_all_time =
    [](bytes message, int n, const all_to_all_routes& r) constexpr -> seconds {
  if (n <= 1) return seconds{0.0};
  const double members = static_cast<double>(n);
  const int local = r.local < n ? std::max(r.local, 1) : n;
  const double in_share = r.shares ? r.shares->first : static_cast<double>(local - 1) / members;
  const double out_share = r.shares ? r.shares->second : static_cast<double>(n - local) / members;
  seconds in{0.0};
  seconds out{0.0};
  seconds latency{0.0};
  if (local > 1) {
    in = message * in_share /
         (r.inside.hop.bandwidth * r.inside.efficiency.reached(r.inside.efficiency.send_recv));
    latency = r.inside.hop.latency;
  }
  if (local < n) {
    out = message * out_share /
          (r.across.hop.bandwidth * r.across.efficiency.reached(r.across.efficiency.send_recv));
    latency = std::max(latency, r.across.hop.latency);
  }
  return std::max(in, out) + latency * (members - 1.0);
};

/// The time of a collective op kind (all_reduce, reduce_scatter, all_gather) on `message` bytes over n
/// devices; zero for anything else (tp_copy is the identity in its forward pass).
inline constexpr auto collective_time =
    [](model::op_kind k, bytes message, int n, const cluster::route& r) constexpr -> seconds {
  switch (k) {
    case model::op_kind::all_reduce:
      return all_reduce_time(message, n, r);
    case model::op_kind::reduce_scatter:
      return reduce_scatter_time(message, n, r);
    case model::op_kind::all_gather:
      return all_gather_time(message, n, r);
    default:
      return seconds{0.0};
  }
};

}  // namespace phaze::cost
