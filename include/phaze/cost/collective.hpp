/// @file
/// Collective latency in the alpha-beta model: ring all-reduce, reduce-scatter, all-gather and
/// point-to-point transfers over the route a group of devices takes (cluster::route: the slowest hop of its
/// ring and the efficiency collectives reach on it).
#pragma once

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
  return 2.0 * (members - 1.0) / members * (message / (r.hop.bandwidth * r.efficiency.all_reduce)) +
         2.0 * (members - 1.0) * r.hop.latency;
};

/// Ring reduce-scatter of a `message`-byte tensor (each device ends with message / n reduced):
/// (n - 1) / n * message / bandwidth + (n - 1) * latency (Thakur et al. 2005).
inline constexpr auto reduce_scatter_time =
    [](bytes message, int n, const cluster::route& r) constexpr -> seconds {
  if (n <= 1) return seconds{0.0};
  const double members = static_cast<double>(n);
  return (members - 1.0) / members * (message / (r.hop.bandwidth * r.efficiency.reduce_scatter)) +
         (members - 1.0) * r.hop.latency;
};

/// Ring all-gather into a `message`-byte tensor (each device contributes message / n): the same steps as the
/// reduce-scatter (Thakur et al. 2005), at the all-gather efficiency.
inline constexpr auto all_gather_time =
    [](bytes message, int n, const cluster::route& r) constexpr -> seconds {
  if (n <= 1) return seconds{0.0};
  const double members = static_cast<double>(n);
  return (members - 1.0) / members * (message / (r.hop.bandwidth * r.efficiency.all_gather)) +
         (members - 1.0) * r.hop.latency;
};

/// A point-to-point transfer (a pipeline-stage boundary) between two devices: message / bandwidth + one
/// latency.
inline constexpr auto point_to_point_time = [](bytes message, const cluster::route& r) constexpr -> seconds {
  return message / (r.hop.bandwidth * r.efficiency.send_recv) + r.hop.latency;
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
