/// @file
/// What a training job runs on: device groups (a device type, how many, the node they come in) and the links
/// between them (each group's nodes, or a measured matrix), and the routes its collectives take when ranks
/// are laid out in Megatron-LM's order (tensor-parallel fastest, then data-parallel, then pipeline stages;
/// devices numbered group by group, node by node).
///
///     const auto c = cluster::preset_cluster("a100-80gb", 1024);       // cluster/presets.hpp
///     const cluster::route dp = c.ring({.size = 128, .stride = 8}, 1024);  // data-parallel rings at tp 8
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "phaze/cluster/links.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"

namespace phaze::cluster {

/// Devices of one type and the node they come in.
struct device_group {
  hw::device device{};
  int count = 1;
  node_spec node{};
  friend bool operator==(const device_group&, const device_group&) = default;
};

/// A kind of communicating group in Megatron-LM's rank order: `size` members `stride` ranks apart (tensor
/// parallel: {tp, 1}; data parallel: {dp, tp}; a pipeline: {pp, tp * dp}). Its instances start at every rank
/// b * size * stride + j with j < stride.
struct group_shape {
  int size = 1;
  int stride = 1;
  friend constexpr bool operator==(const group_shape&, const group_shape&) = default;
};

namespace rules {
[[noreturn]] inline void a_cluster_needs_a_device_group() {
  throw input_error("a cluster needs at least one device group");
}
[[noreturn]] inline void a_device_group_needs_devices() {
  throw input_error("every device group needs at least 1 device (count)");
}
[[noreturn]] inline void cluster_too_large() {
  throw input_error("a cluster may hold at most 2^30 devices");
}
[[noreturn]] inline void link_matrix_must_match_the_cluster() {
  throw input_error(
      "a measured link matrix must have one row and one column per device (or per node) of the cluster, and "
      "size * size entries");
}
[[noreturn]] inline void group_must_fit_the_devices_used() {
  throw input_error("a communicating group must have at least one member and fit the devices used");
}
}  // namespace rules

/// A cluster: device groups and the links between their devices.
class cluster {
 public:
  /// The most devices a cluster may hold (ranks are ints; products of degrees stay below 2^62).
  static constexpr std::int64_t max_devices = std::int64_t{1} << 30;

  cluster() = default;
  /// Checks the groups, the efficiencies and the matrix; throws input_error saying what to fix.
  explicit cluster(std::vector<device_group> groups, collective_efficiency efficiency = {},
                   std::optional<link_matrix> measured = std::nullopt)
      : groups_(std::move(groups)), efficiency_(efficiency), measured_(std::move(measured)) {
    if (groups_.empty()) rules::a_cluster_needs_a_device_group();
    std::int64_t devices = 0;
    std::int64_t nodes = 0;
    for (const auto& g : groups_) {
      if (g.count < 1) rules::a_device_group_needs_devices();
      hw::validate(g.device);
      validate(g.node);
      first_rank_.push_back(static_cast<int>(devices));
      first_node_.push_back(static_cast<int>(nodes));
      devices += g.count;
      nodes += (g.count + g.node.devices - 1) / g.node.devices;
      if (devices > max_devices) rules::cluster_too_large();
    }
    devices_ = static_cast<int>(devices);
    nodes_ = static_cast<int>(nodes);
    validate(efficiency_);
    if (measured_) {
      const int expected = measured_->endpoints == link_matrix::between::devices ? devices_ : nodes_;
      if (measured_->size != expected || measured_->entries.size() != static_cast<std::size_t>(expected) *
                                                                          static_cast<std::size_t>(expected))
        rules::link_matrix_must_match_the_cluster();
      for (int a = 0; a < expected; ++a)
        for (int b = 0; b < expected; ++b)
          if (a != b) validate(measured_->at(a, b));
    }
  }

  [[nodiscard]] const std::vector<device_group>& groups() const { return groups_; }
  [[nodiscard]] const collective_efficiency& efficiency() const { return efficiency_; }
  [[nodiscard]] const std::optional<link_matrix>& measured() const { return measured_; }
  [[nodiscard]] int devices() const { return devices_; }
  [[nodiscard]] int nodes() const { return nodes_; }

  /// The group rank `r` belongs to (0 <= r < devices()).
  [[nodiscard]] std::size_t group_index(int rank) const {
    const auto it = std::upper_bound(first_rank_.begin(), first_rank_.end(), rank);
    return static_cast<std::size_t>(it - first_rank_.begin()) - 1;
  }
  [[nodiscard]] const device_group& group_at(int rank) const { return groups_[group_index(rank)]; }
  [[nodiscard]] const hw::device& device_at(int rank) const { return group_at(rank).device; }
  /// The node rank `r` sits in (nodes numbered across groups).
  [[nodiscard]] int node_at(int rank) const {
    const std::size_t g = group_index(rank);
    return first_node_[g] + (rank - first_rank_[g]) / groups_[g].node.devices;
  }

  /// The route of the rings of `shape` over the first `used` ranks: the slowest hop of any of its instances
  /// (every instance runs at the same time, and the step waits for the slowest).
  [[nodiscard]] route ring(group_shape shape, int used) const {
    check(shape, used);
    if (const auto r = closed_form(shape, used)) return *r;
    link slowest = unreached;
    std::vector<int> members(static_cast<std::size_t>(shape.size));
    const std::int64_t block = static_cast<std::int64_t>(shape.size) * shape.stride;
    for (std::int64_t b = 0; b + block <= used; b += block) {
      for (int j = 0; j < shape.stride; ++j) {
        for (int i = 0; i < shape.size; ++i)
          members[static_cast<std::size_t>(i)] =
              static_cast<int>(b + j + static_cast<std::int64_t>(i) * shape.stride);
        slowest = slower(slowest, slowest_hop(members));
      }
    }
    return {slowest, efficiency_};
  }

  /// The route of the point-to-point transfers between every rank r and r + `distance` below `used`, in
  /// both directions (pipeline stage boundaries: distance tp * dp): the slowest such pair.
  [[nodiscard]] route pairs(int distance, int used) const {
    if (distance < 1 || distance >= used || used > devices_) rules::group_must_fit_the_devices_used();
    if (groups_.size() == 1 && !measured_) {
      const node_spec& node = groups_.front().node;
      if (used <= node.devices) return {node.intra, efficiency_};
      const link across{node.network_share(1), node.nic.latency};
      return {distance >= node.devices ? across : slower(node.intra, across), efficiency_};
    }
    link slowest = unreached;
    std::vector<int> members(2);
    for (int r = 0; r + distance < used; ++r) {
      members = {r, r + distance};
      slowest = slower(slowest, slowest_hop(members));
    }
    return {slowest, efficiency_};
  }

  /// The route inside one node of the first group: what a group that fits a node talks over.
  [[nodiscard]] route inside_node() const { return {groups_.front().node.intra, efficiency_}; }

  friend bool operator==(const cluster&, const cluster&) = default;

 private:
  std::vector<device_group> groups_;
  collective_efficiency efficiency_{};
  std::optional<link_matrix> measured_;
  std::vector<int> first_rank_;
  std::vector<int> first_node_;
  int devices_ = 0;
  int nodes_ = 0;

  /// The neutral element of `slower`.
  static constexpr link unreached{bytes_per_second{std::numeric_limits<double>::infinity()}, seconds{0.0}};

  void check(group_shape shape, int used) const {
    if (shape.size < 1 || shape.stride < 1 || used > devices_ ||
        static_cast<std::int64_t>(shape.size) * shape.stride > used)
      rules::group_must_fit_the_devices_used();
  }

  /// The route of every instance when the cluster is one group without measurements, where it has a
  /// closed form (cluster::ring_route).
  [[nodiscard]] std::optional<route> closed_form(group_shape shape, int used) const {
    if (groups_.size() != 1 || measured_) return std::nullopt;
    return ring_route(groups_.front().node, shape.size, shape.stride, used, efficiency_);
  }

  /// The slowest hop of one ring through `members` in order (and back to the first).
  [[nodiscard]] link slowest_hop(const std::vector<int>& members) const {
    // Members of the ring in each node it touches (few nodes: a short list beats a map).
    std::vector<std::pair<int, int>> per_node;
    for (const int r : members) {
      const int n = node_at(r);
      const auto it =
          std::find_if(per_node.begin(), per_node.end(), [&](const auto& e) { return e.first == n; });
      if (it == per_node.end()) {
        per_node.emplace_back(n, 1);
      } else {
        ++it->second;
      }
    }
    auto members_in = [&](int node) {
      return std::find_if(per_node.begin(), per_node.end(), [&](const auto& e) { return e.first == node; })
          ->second;
    };
    link slowest = unreached;
    const std::size_t n = members.size();
    for (std::size_t i = 0; i < n; ++i) {
      const int a = members[i];
      const int b = members[(i + 1) % n];
      const int na = node_at(a);
      const int nb = node_at(b);
      link h;
      if (measured_ && measured_->endpoints == link_matrix::between::devices) {
        h = measured_->at(a, b);
      } else if (na == nb) {
        h = group_at(a).node.intra;
      } else if (measured_) {
        const link& m = measured_->at(na, nb);
        h = {m.bandwidth * static_cast<double>(std::min(members_in(na), members_in(nb))), m.latency};
      } else {
        const node_spec& from = group_at(a).node;
        const node_spec& to = group_at(b).node;
        h = {std::min(from.network_share(members_in(na)), to.network_share(members_in(nb))),
             std::max(from.nic.latency, to.nic.latency)};
      }
      slowest = slower(slowest, h);
    }
    return slowest;
  }
};

/// `count` devices of one type in nodes of `node`: what `--device`, `--devices` and `--devices-per-node`
/// build.
inline cluster homogeneous(const hw::device& d, int count, const node_spec& node,
                           collective_efficiency efficiency = {}) {
  return cluster{{device_group{d, count, node}}, efficiency};
}

}  // namespace phaze::cluster
