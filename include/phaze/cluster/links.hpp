/// @file
/// What connects devices: a link (bandwidth and latency of one hop), the node a device group is built of
/// (devices per node, the fast domain inside it, the network interfaces that leave it), a matrix of measured
/// links, the efficiency collectives reach on a link, and the route a collective runs over.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"

namespace phaze::cluster {

/// One hop between two devices: bandwidth per direction and the latency of one message step (the alpha of
/// the alpha-beta model).
struct link {
  bytes_per_second bandwidth{0.0};
  seconds latency{0.0};
  friend constexpr bool operator==(const link&, const link&) = default;
};

/// The share of a link's bandwidth each collective reaches: the bus bandwidth nccl-tests reports over the
/// link's bandwidth (all_reduce_perf, all_gather_perf, reduce_scatter_perf, sendrecv_perf). 1 is the link at
/// its full rate, which the presets assume (their constants were calibrated on whole iterations with it).
struct collective_efficiency {
  double all_reduce = 1.0;
  double all_gather = 1.0;
  double reduce_scatter = 1.0;
  double send_recv = 1.0;
  /// A time multiplier fitted to a user's measured steps (train::apply_calibration): each collective's
  /// bandwidth term runs at the efficiency above divided by it, never above the link's rate.
  double calibrated = 1.0;
  friend constexpr bool operator==(const collective_efficiency&, const collective_efficiency&) = default;

  /// The share of a link's bandwidth reached at efficiency `e` under the calibration: min(1, e / calibrated).
  [[nodiscard]] constexpr double reached(double e) const {
    const double x = e / calibrated;
    return x < 1.0 ? x : 1.0;
  }
};

/// One node of a device group: how many devices it holds, the fast domain between them (NVLink, ICI, PCIe)
/// and its network interfaces. A ring that leaves a node with k of its members there shares the node's
/// interfaces with the other rings running at the same time, so it gets nics * nic.bandwidth * k / devices
/// (with one interface per device, the rails of a DGX node, a ring with one member per node gets one
/// interface and a ring with every device of the node gets all of them).
struct node_spec {
  int devices = 1;  ///< devices per node
  link intra{};     ///< between two devices of the node, per device per direction
  int nics = 1;     ///< network interfaces per node
  link nic{};       ///< one interface: bandwidth per direction, latency of a network message step
  friend constexpr bool operator==(const node_spec&, const node_spec&) = default;

  /// Bandwidth a ring with `members` of its devices in this node gets over the network.
  [[nodiscard]] constexpr bytes_per_second network_share(int members) const {
    return bytes_per_second{nic.bandwidth.value() * static_cast<double>(nics) * static_cast<double>(members) /
                            static_cast<double>(devices)};
  }
  /// Bandwidth each of `flows` point-to-point transfers leaving (or entering) this node at once gets over the
  /// network: the node's interfaces shared among them, at most one interface per flow (a transfer between two
  /// devices runs over one interface) unless the node has more interfaces than devices (then what a device
  /// gets when every device sends, network_share(1)). With a flow from every device it is network_share(1);
  /// with one flow out of a node of one shared interface, the whole interface.
  [[nodiscard]] constexpr bytes_per_second flow_share(int flows) const {
    const int spread = std::max(std::max(flows, 1), std::min(nics, devices));
    return bytes_per_second{nic.bandwidth.value() * static_cast<double>(nics) / static_cast<double>(spread)};
  }
};

/// The same node with `n` devices: one interface per device stays one interface per device (rails); any
/// other count of interfaces is kept.
constexpr node_spec with_devices_per_node(node_spec node, int n) {
  if (node.nics == node.devices) node.nics = n;
  node.devices = n;
  return node;
}

/// Measured links between endpoints, asymmetric allowed: between devices (`size` = the cluster's devices; an
/// entry is what one pair of devices reaches, used as is) or between nodes (`size` = the cluster's nodes;
/// an entry is what the whole node reaches towards the other node while all its devices send, as a cluster
/// file gives it: each device gets its share, the entry over the node's devices, and a ring with k members
/// in the node k shares, as node_spec::network_share; links inside a node stay the node's own). One
/// convention in C++ and in files alike.
struct link_matrix {
  enum class between : std::uint8_t { devices, nodes };
  between endpoints = between::nodes;
  int size = 0;
  std::vector<link> entries;  ///< row-major: entries[from * size + to]; the diagonal is not used

  [[nodiscard]] constexpr const link& at(int from, int to) const {
    return entries[static_cast<std::size_t>(from) * static_cast<std::size_t>(size) +
                   static_cast<std::size_t>(to)];
  }
  friend constexpr bool operator==(const link_matrix&, const link_matrix&) = default;
};

/// What a collective over a group of devices runs on: the slowest hop of its ring (lowest bandwidth, and the
/// highest latency of any hop) and the efficiency collectives reach.
struct route {
  link hop{};
  collective_efficiency efficiency{};
  friend constexpr bool operator==(const route&, const route&) = default;
};

/// The slower of two links in every respect: the lower bandwidth and the higher latency.
constexpr link slower(link a, link b) {
  return {a.bandwidth < b.bandwidth ? a.bandwidth : b.bandwidth,
          a.latency > b.latency ? a.latency : b.latency};
}

/// The route of rings of `size` members `stride` ranks apart in Megatron-LM's rank order, laid over `used`
/// devices in nodes of `node`, where it has a closed form (nullopt otherwise):
/// - every ring inside one node (one member, all devices in one node, or aligned rings that fit a node): the
///   node's own link;
/// - members at least a node apart (stride >= devices per node): every hop leaves the node with one member
///   of the ring there, so it gets network_share(1);
/// - k = devices / stride members in every node of every ring (stride divides the node, rings cover whole
///   nodes): hops inside the node and hops that leave it with k members there.
constexpr std::optional<route> ring_route(const node_spec& node, int size, int stride, int used,
                                          collective_efficiency efficiency = {}) {
  const std::int64_t g = node.devices;
  const std::int64_t block = static_cast<std::int64_t>(size) * stride;
  if (size == 1 || used <= g || (block <= g && g % block == 0)) return route{node.intra, efficiency};
  if (stride >= g) return route{{node.network_share(1), node.nic.latency}, efficiency};
  if (g % stride == 0 && block % g == 0) {
    const int k = static_cast<int>(g / stride);
    return route{slower(node.intra, {node.network_share(k), node.nic.latency}), efficiency};
  }
  return std::nullopt;
}

/// The route of the tensor-parallel groups of width `tp` on devices in nodes of `node` (aligned groups of
/// consecutive ranks; a group wider than a node spans whole nodes when the node size divides it).
constexpr route tensor_parallel_route(const node_spec& node, int tp, collective_efficiency efficiency = {}) {
  if (const auto r = ring_route(node, tp, 1, tp, efficiency)) return *r;
  // A width that neither fits nor tiles the node: its rings cross nodes with the fewest members per node.
  return route{slower(node.intra, {node.network_share(1), node.nic.latency}), efficiency};
}

namespace rules {
[[noreturn]] inline void link_bandwidth_must_be_positive() {
  throw input_error("link bandwidths must be positive and finite; give every link a bandwidth above 0");
}
[[noreturn]] inline void link_latency_must_not_be_negative() {
  throw input_error("link latencies must be at least 0 and finite");
}
[[noreturn]] inline void a_node_needs_devices_and_interfaces() {
  throw input_error("a node needs at least 1 device and at least 1 network interface");
}
[[noreturn]] inline void collective_efficiency_must_lie_in_0_1() {
  throw input_error("a collective efficiency is a share of the link's bandwidth: give a value in (0, 1]");
}
}  // namespace rules

/// Checks a link; a broken rule stops compilation (constant evaluation) or throws input_error.
constexpr void validate(const link& l) {
  if (!(l.bandwidth.value() > 0) || !(l.bandwidth.value() < 1e300)) rules::link_bandwidth_must_be_positive();
  if (!(l.latency.value() >= 0) || !(l.latency.value() < 1e300)) rules::link_latency_must_not_be_negative();
}

/// Checks a node: at least one device and interface, valid links.
constexpr void validate(const node_spec& n) {
  if (n.devices < 1 || n.nics < 1) rules::a_node_needs_devices_and_interfaces();
  validate(n.intra);
  validate(n.nic);
}

/// Checks efficiencies: each in (0, 1].
constexpr void validate(const collective_efficiency& e) {
  for (const double x : {e.all_reduce, e.all_gather, e.reduce_scatter, e.send_recv}) {
    if (!(x > 0.0 && x <= 1.0)) rules::collective_efficiency_must_lie_in_0_1();
  }
}

}  // namespace phaze::cluster
