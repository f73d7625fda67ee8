/// @file
/// What a training job runs on: device groups (a device type, how many, the node they come in) and the links
/// between them (each group's nodes, or a measured matrix), which physical device plays each logical rank
/// (the rank order), and the routes its collectives take when ranks are laid out in Megatron-LM's order
/// (tensor-parallel fastest, then data-parallel, then pipeline stages). Devices are numbered group by group,
/// node by node; without an order rank r is device r.
///
///     const auto c = cluster::preset_cluster("a100-80gb", 1024);       // cluster/presets.hpp
///     const cluster::route dp = c.ring({.size = 128, .stride = 8}, 1024);  // data-parallel rings at tp 8
///     const auto placed = c.with_order(order);  // rank r on device order[r] (place/rank_assignment.hpp)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "phaze/cluster/links.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/limits.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"

namespace phaze::cluster {

/// Devices of one type and the node they come in.
struct device_group {
  hw::device device{};
  int count = 1;
  node_spec node{};
  friend constexpr bool operator==(const device_group&, const device_group&) = default;
};

/// A kind of communicating group in Megatron-LM's rank order: `size` members `stride` ranks apart (tensor
/// parallel: {tp, 1}; data parallel: {dp, tp}; a pipeline: {pp, tp * dp}). Its instances start at every rank
/// b * size * stride + j with j < stride. Ranks are logical: the cluster's order says which device plays
/// each.
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
  throw input_error("a cluster may hold at most 2^20 = 1,048,576 devices (docs/limits.md)");
}
[[noreturn]] inline void link_matrix_must_match_the_cluster() {
  throw input_error(
      "a measured link matrix must have one row and one column per device (or per node) of the cluster, and "
      "size * size entries");
}
[[noreturn]] inline void group_must_fit_the_devices_used() {
  throw input_error("a communicating group must have at least one member and fit the devices used");
}
[[noreturn]] inline void rank_order_must_list_every_device(std::size_t entries, int devices) {
  throw input_error("a rank order must list every device of the cluster once: it has " +
                    std::to_string(entries) + " entries for " + std::to_string(devices) + " devices");
}
[[noreturn]] inline void rank_order_entry_must_be_a_device(int rank, int device, int devices) {
  throw input_error("rank order entry " + std::to_string(rank) + " is " + std::to_string(device) +
                    ", not a device of the cluster (0 to " + std::to_string(devices - 1) + ")");
}
[[noreturn]] inline void rank_order_must_be_a_permutation(int device, int first_rank, int second_rank) {
  throw input_error("device " + std::to_string(device) + " plays two ranks of the rank order (" +
                    std::to_string(first_rank) + " and " + std::to_string(second_rank) +
                    "); give each device exactly one rank, a permutation of 0 to devices - 1");
}
[[noreturn]] inline void rank_must_be_in_the_cluster(int rank, int devices) {
  throw input_error("rank " + std::to_string(rank) + " is not a rank of the cluster (0 to " +
                    std::to_string(devices - 1) + ")");
}
}  // namespace rules

class route_tracker;

/// A cluster: device groups, the links between their devices, and the rank order: which physical device
/// (the numbering above) plays each logical rank. Everything indexed by rank (group_index, group_at,
/// device_at, node_at, ring, pairs) follows the order; measured matrices stay indexed by physical device or
/// node, so a ring's hops run between the devices of consecutive ranks whatever the order.
class cluster {
 public:
  /// The most devices a cluster may hold (ranks are ints; products of degrees stay below 2^62).
  static constexpr std::int64_t max_devices = limits::max_devices;

  cluster() = default;
  /// Checks the groups, the efficiencies and the matrix; throws input_error saying what to fix.
  constexpr explicit cluster(std::vector<device_group> groups, collective_efficiency efficiency = {},
                             std::optional<link_matrix> measured = std::nullopt)
      : groups_(std::move(groups)), efficiency_(efficiency), measured_(std::move(measured)) {
    if (groups_.empty()) rules::a_cluster_needs_a_device_group();
    std::int64_t devices = 0;
    std::int64_t nodes = 0;
    for (const auto& g : groups_) {
      if (g.count < 1) rules::a_device_group_needs_devices();
      hw::validate(g.device);
      validate(g.node);
      first_device_.push_back(static_cast<int>(devices));
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

  [[nodiscard]] constexpr const std::vector<device_group>& groups() const { return groups_; }
  [[nodiscard]] constexpr const collective_efficiency& efficiency() const { return efficiency_; }
  [[nodiscard]] constexpr const std::optional<link_matrix>& measured() const { return measured_; }
  [[nodiscard]] constexpr int devices() const { return devices_; }
  [[nodiscard]] constexpr int nodes() const { return nodes_; }

  /// The cluster with rank r played by device `order[r]` (a permutation of 0 .. devices() - 1; it replaces
  /// any order given before). Throws input_error saying which entry is wrong.
  [[nodiscard]] constexpr cluster with_order(std::vector<int> order) const {
    if (order.size() != static_cast<std::size_t>(devices_))
      rules::rank_order_must_list_every_device(order.size(), devices_);
    std::vector<int> rank_of(static_cast<std::size_t>(devices_), -1);
    for (int r = 0; r < devices_; ++r) {
      const int d = order[static_cast<std::size_t>(r)];
      if (d < 0 || d >= devices_) rules::rank_order_entry_must_be_a_device(r, d, devices_);
      int& seen = rank_of[static_cast<std::size_t>(d)];
      if (seen >= 0) rules::rank_order_must_be_a_permutation(d, seen, r);
      seen = r;
    }
    cluster out = *this;
    out.order_ = std::move(order);
    return out;
  }
  /// The rank order as given (order()[r] is the device of rank r); empty when none was given (rank r is
  /// device r). An explicit identity order is equal to none, but takes the hop-by-hop path in ring and pairs.
  [[nodiscard]] constexpr const std::vector<int>& order() const { return order_; }
  /// The physical device that plays rank `rank` (0 <= rank < devices()).
  [[nodiscard]] constexpr int device_of_rank(int rank) const {
    return order_.empty() ? rank : order_[static_cast<std::size_t>(rank)];
  }
  /// Exchanges the devices of ranks `a` and `b` in place (the order stays a permutation): what a search over
  /// orders does between two evaluations without copying the cluster (place/rank_assignment.hpp). A
  /// cluster without an order gets the identity first.
  constexpr void swap_ranks(int a, int b) {
    if (a < 0 || a >= devices_) rules::rank_must_be_in_the_cluster(a, devices_);
    if (b < 0 || b >= devices_) rules::rank_must_be_in_the_cluster(b, devices_);
    if (order_.empty()) {
      order_.resize(static_cast<std::size_t>(devices_));
      for (int r = 0; r < devices_; ++r) order_[static_cast<std::size_t>(r)] = r;
    }
    std::swap(order_[static_cast<std::size_t>(a)], order_[static_cast<std::size_t>(b)]);
  }

  /// The group physical device `d` belongs to (0 <= d < devices()).
  [[nodiscard]] constexpr std::size_t group_of_device(int d) const {
    const auto it = std::upper_bound(first_device_.begin(), first_device_.end(), d);
    return static_cast<std::size_t>(it - first_device_.begin()) - 1;
  }
  /// The node physical device `d` sits in (nodes numbered across groups, as a node link matrix).
  [[nodiscard]] constexpr int node_of_device(int d) const {
    const std::size_t g = group_of_device(d);
    return first_node_[g] + (d - first_device_[g]) / groups_[g].node.devices;
  }
  /// The devices node `node` holds: its group's node size, fewer in a group's last node when the group's
  /// count is not a multiple of it.
  [[nodiscard]] constexpr int devices_in_node(int node) const {
    const auto g = static_cast<std::size_t>(std::upper_bound(first_node_.begin(), first_node_.end(), node) -
                                            first_node_.begin() - 1);
    const int before = (node - first_node_[g]) * groups_[g].node.devices;
    return std::min(groups_[g].node.devices, groups_[g].count - before);
  }

  /// The group rank `r` belongs to (0 <= r < devices()): that of the device playing it.
  [[nodiscard]] constexpr std::size_t group_index(int rank) const {
    return group_of_device(device_of_rank(rank));
  }
  [[nodiscard]] constexpr const device_group& group_at(int rank) const { return groups_[group_index(rank)]; }
  [[nodiscard]] constexpr const hw::device& device_at(int rank) const { return group_at(rank).device; }
  /// The node rank `r` sits in (nodes numbered across groups): that of the device playing it.
  [[nodiscard]] constexpr int node_at(int rank) const { return node_of_device(device_of_rank(rank)); }

  /// Calls `fn(group, first_rank, ranks)` for each maximal run of consecutive ranks in [first, end) whose
  /// devices belong to one group, in rank order: O(groups) without an order (rank r is device r), O(end -
  /// first) with one.
  template <class Fn>
  constexpr void for_each_group_run(int first, int end, Fn&& fn) const {
    if (first < 0 || end > devices_ || first > end) rules::group_must_fit_the_devices_used();
    if (order_.empty()) {
      for (std::size_t g = first < end ? group_of_device(first) : groups_.size(); g < groups_.size(); ++g) {
        const int from = std::max(first, first_device_[g]);
        const int to = std::min(end, first_device_[g] + groups_[g].count);
        if (from >= to) break;
        fn(g, from, to - from);
      }
      return;
    }
    int r = first;
    while (r < end) {
      const std::size_t g = group_index(r);
      int next = r + 1;
      while (next < end && group_index(next) == g) ++next;
      fn(g, r, next - r);
      r = next;
    }
  }

  /// The route of the rings of `shape` over the first `used` ranks: the slowest hop of any of its instances
  /// (every instance runs at the same time, and the step waits for the slowest). A hop runs between the
  /// devices of two consecutive ranks of an instance (and from the last back to the first).
  [[nodiscard]] constexpr route ring(group_shape shape, int used) const {
    check(shape, used);
    if (order_.empty()) {
      if (const auto r = closed_form(shape, used)) return *r;
      if (!measured_) return {grouped_ring(shape, used), efficiency_};
    }
    return {rings_hop_by_hop(shape, 0, used), efficiency_};
  }

  /// The route of the point-to-point transfers between every rank r and r + `distance` below `used`, in
  /// both directions (pipeline stage boundaries: distance tp * dp), all at once: the slowest such pair of
  /// devices. A pair inside a node takes the node's link; a pair across nodes shares each node's interfaces
  /// with the other pairs leaving or entering it (node_spec::flow_share: with tp * dp below the devices of a
  /// node, only the last stage of the node sends out of it), or takes its measured link.
  [[nodiscard]] constexpr route pairs(int distance, int used) const {
    if (distance < 1 || distance >= used || used > devices_) rules::group_must_fit_the_devices_used();
    if (groups_.size() > 1 && !measured_ && order_.empty())
      return {grouped_pairs(distance, used), efficiency_};
    if (groups_.size() == 1 && !measured_ && order_.empty()) {
      const node_spec& node = groups_.front().node;
      if (used <= node.devices) return {node.intra, efficiency_};
      // The first node has the most transfers leaving it: its ranks r with r + distance in a later node
      // and below `used`.
      const int flows = std::min(node.devices, used - distance) - std::max(0, node.devices - distance);
      const link across{node.flow_share(flows), node.nic.latency};
      return {distance >= node.devices ? across : slower(node.intra, across), efficiency_};
    }
    link slowest = unreached;
    if (measured_) {
      std::vector<int> members(2);
      std::vector<int> per_node;
      for (int r = 0; r + distance < used; ++r) {
        members[0] = device_of_rank(r);
        members[1] = device_of_rank(r + distance);
        slowest = slower(slowest, slowest_hop(members, per_node));
      }
      return {slowest, efficiency_};
    }
    // The transfers leaving and entering every node (one direction; the other mirrors it).
    std::vector<int> leaving(static_cast<std::size_t>(nodes_), 0);
    std::vector<int> entering(static_cast<std::size_t>(nodes_), 0);
    for (int r = 0; r + distance < used; ++r) {
      const int na = node_at(r);
      const int nb = node_at(r + distance);
      if (na == nb) continue;
      ++leaving[static_cast<std::size_t>(na)];
      ++entering[static_cast<std::size_t>(nb)];
    }
    for (int r = 0; r + distance < used; ++r) {
      const int a = device_of_rank(r);
      const int b = device_of_rank(r + distance);
      const int na = node_of_device(a);
      const int nb = node_of_device(b);
      if (na == nb) {
        slowest = slower(slowest, groups_[group_of_device(a)].node.intra);
        continue;
      }
      const node_spec& from = groups_[group_of_device(a)].node;
      const node_spec& to = groups_[group_of_device(b)].node;
      slowest = slower(slowest, {std::min(from.flow_share(leaving[static_cast<std::size_t>(na)]),
                                          to.flow_share(entering[static_cast<std::size_t>(nb)])),
                                 std::max(from.nic.latency, to.nic.latency)});
    }
    return {slowest, efficiency_};
  }

  /// The route inside one node of the first group: what a group that fits a node talks over.
  [[nodiscard]] constexpr route inside_node() const { return {groups_.front().node.intra, efficiency_}; }

  /// Equal groups, efficiencies, measurements and devices of every rank (no order equals the identity).
  friend constexpr bool operator==(const cluster& a, const cluster& b) {
    if (!(a.groups_ == b.groups_ && a.efficiency_ == b.efficiency_ && a.measured_ == b.measured_))
      return false;
    for (int r = 0; r < a.devices_; ++r)
      if (a.device_of_rank(r) != b.device_of_rank(r)) return false;
    return true;
  }

 private:
  friend class route_tracker;  // follows single instances of ring and pairs (cluster/route_tracker.hpp)

  std::vector<device_group> groups_;
  collective_efficiency efficiency_{};
  std::optional<link_matrix> measured_;
  std::vector<int> order_;  ///< order_[rank] = physical device; empty: the identity
  std::vector<int> first_device_;
  std::vector<int> first_node_;
  int devices_ = 0;
  int nodes_ = 0;

  /// The neutral element of `slower`.
  static constexpr link unreached{bytes_per_second{std::numeric_limits<double>::infinity()}, seconds{0.0}};

  constexpr void check(group_shape shape, int used) const {
    if (shape.size < 1 || shape.stride < 1 || used > devices_ ||
        static_cast<std::int64_t>(shape.size) * shape.stride > used)
      rules::group_must_fit_the_devices_used();
  }

  /// The route of every instance when the cluster is one group without measurements or order, where it has
  /// a closed form (cluster::ring_route).
  [[nodiscard]] constexpr std::optional<route> closed_form(group_shape shape, int used) const {
    if (groups_.size() != 1 || measured_) return std::nullopt;
    return ring_route(groups_.front().node, shape.size, shape.stride, used, efficiency_);
  }

  /// The slowest hop of the rings of `shape` whose blocks (size * stride ranks each, from rank 0) start at or
  /// after `from` and end at or before `to`, each ring followed hop by hop (the definition every faster path
  /// must equal).
  [[nodiscard]] constexpr link rings_hop_by_hop(group_shape shape, std::int64_t from, std::int64_t to) const {
    link slowest = unreached;
    std::vector<int> members(static_cast<std::size_t>(shape.size));
    std::vector<int> per_node;
    const std::int64_t block = static_cast<std::int64_t>(shape.size) * shape.stride;
    for (std::int64_t b = from; b + block <= to; b += block) {
      for (int j = 0; j < shape.stride; ++j) {
        for (int i = 0; i < shape.size; ++i)
          members[static_cast<std::size_t>(i)] =
              device_of_rank(static_cast<int>(b + j + static_cast<std::int64_t>(i) * shape.stride));
        slowest = slower(slowest, slowest_hop(members, per_node));
      }
    }
    return slowest;
  }

  /// ring() on several groups without a measured matrix or an order (rank r is device r): the blocks inside
  /// one group are the rings of a cluster of that group's nodes alone, shifted by whole blocks, so where a
  /// run of them starts on one of the group's node boundaries ring_route gives their slowest hop in closed
  /// form; only the blocks that straddle two groups (at most one per group boundary), and one period of the
  /// runs the closed form does not cover, are followed hop by hop: per group O(block + lcm(block, node size))
  /// ranks at most (block = size x stride), where the hop-by-hop path is O(used).
  [[nodiscard]] constexpr link grouped_ring(group_shape shape, int used) const {
    const std::int64_t block = static_cast<std::int64_t>(shape.size) * shape.stride;
    link slowest = unreached;
    std::int64_t b = 0;
    while (b + block <= used) {
      const std::size_t g = group_of_device(static_cast<int>(b));
      const std::int64_t start = first_device_[g];
      const std::int64_t end = std::min<std::int64_t>(start + groups_[g].count, used);
      const std::int64_t span = (end - b) / block * block;  // whole blocks of group g from b
      if (span == 0) {                                      // this block straddles groups g and g + 1
        slowest = slower(slowest, rings_hop_by_hop(shape, b, b + block));
        b += block;
        continue;
      }
      const node_spec& node = groups_[g].node;
      std::optional<route> closed;
      if ((b - start) % node.devices == 0)
        closed = ring_route(node, shape.size, shape.stride, static_cast<int>(span), efficiency_);
      if (closed) {
        slowest = slower(slowest, closed->hop);
      } else {
        // Blocks whose offsets from the group's node grid are equal have the same hops (the members' places
        // in their nodes, and the node spec, are all a hop reads): the offsets repeat every
        // devices / gcd(block, devices) blocks, so one period of them stands for the run.
        const std::int64_t period = node.devices / std::gcd(block, static_cast<std::int64_t>(node.devices));
        slowest = slower(slowest, rings_hop_by_hop(shape, b, b + std::min(span / block, period) * block));
      }
      b += span;
    }
    return slowest;
  }

  /// pairs() on several groups without a measured matrix or an order (rank r is device r), in O(groups).
  /// With nodes numbered in device order, node n's devices [s, e) send `leaving` = |[max(s, e - d), min(e,
  /// u - d))| transfers out of it, receive `entering` = |[max(s, d), min(e, s + d, u))| and hold a pair
  /// inside it when [s, min(e - d, u - d)) is not empty (d the distance, u the used ranks), exactly what the
  /// hop-by-hop count finds. A cross-node pair's link is the slower of its ends' shares, so the slowest pair
  /// is the slowest of every node's leaving and entering shares and intra links. Within a group those three
  /// change only at the nodes holding positions d, u - d and u and at the group's ends (its last node may be
  /// partly filled), so the nodes at and beside those positions take every value some node takes.
  [[nodiscard]] constexpr link grouped_pairs(int distance, int used) const {
    const std::int64_t d = distance;
    const std::int64_t u = used;
    const auto count = [](std::int64_t from, std::int64_t to) {
      return std::max<std::int64_t>(0, to - from);
    };
    link slowest = unreached;
    const auto visit = [&](int n) {
      const auto g = static_cast<std::size_t>(std::upper_bound(first_node_.begin(), first_node_.end(), n) -
                                              first_node_.begin() - 1);
      const node_spec& spec = groups_[g].node;
      const std::int64_t s = first_device_[g] + static_cast<std::int64_t>(n - first_node_[g]) * spec.devices;
      const std::int64_t e = std::min<std::int64_t>(s + spec.devices, first_device_[g] + groups_[g].count);
      if (count(s, std::min(e - d, u - d)) > 0) slowest = slower(slowest, spec.intra);
      const std::int64_t leaving = count(std::max(s, e - d), std::min(e, u - d));
      const std::int64_t entering = count(std::max(s, d), std::min(std::min(e, s + d), u));
      if (leaving > 0)
        slowest = slower(slowest, {spec.flow_share(static_cast<int>(leaving)), spec.nic.latency});
      if (entering > 0)
        slowest = slower(slowest, {spec.flow_share(static_cast<int>(entering)), spec.nic.latency});
    };
    const auto around = [&](std::int64_t position) {
      const int n = node_of_device(static_cast<int>(std::clamp<std::int64_t>(position, 0, devices_ - 1)));
      for (int m = std::max(n - 1, 0); m <= std::min(n + 1, nodes_ - 1); ++m) visit(m);
    };
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      around(first_device_[g]);
      around(static_cast<std::int64_t>(first_device_[g]) + groups_[g].count - 1);
    }
    around(d);
    around(u - d);
    around(u);
    return slowest;
  }

  /// The slowest hop of one ring through the physical devices `members` in order (and back to the first).
  /// `per_node` is scratch space the caller keeps across instances (one allocation per ring, not per
  /// instance).
  [[nodiscard]] constexpr link slowest_hop(const std::vector<int>& members,
                                           std::vector<int>& per_node) const {
    link slowest = unreached;
    const std::size_t n = members.size();
    if (measured_ && measured_->endpoints == link_matrix::between::devices) {
      // Every hop as measured: nodes and the ring's members in them play no part.
      for (std::size_t i = 0; i < n; ++i)
        slowest = slower(slowest, measured_->at(members[i], members[(i + 1) % n]));
      return slowest;
    }
    // The nodes of the ring's members in ring order, then sorted: the members a node holds are the length
    // of its run, found in O(log n) (a data-parallel ring touches hundreds of nodes, where a list searched
    // hop by hop was quadratic), and 1 without a search where no node holds two.
    per_node.resize(2 * n);
    for (std::size_t i = 0; i < n; ++i) per_node[i] = node_of_device(members[i]);
    const auto sorted = per_node.begin() + static_cast<std::ptrdiff_t>(n);
    std::copy(per_node.begin(), sorted, sorted);
    std::sort(sorted, per_node.end());
    const bool one_each = std::adjacent_find(sorted, per_node.end()) == per_node.end();
    auto members_in = [&](int node) {
      if (one_each) return 1;
      const auto [first, last] = std::equal_range(sorted, per_node.end(), node);
      return static_cast<int>(last - first);
    };
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t next = i + 1 < n ? i + 1 : 0;
      const int a = members[i];
      const int b = members[next];
      const int na = per_node[i];
      const int nb = per_node[next];
      link h;
      if (na == nb) {
        h = groups_[group_of_device(a)].node.intra;
      } else if (measured_) {
        // The sending node's entry is the whole node's: each device gets its share (link_matrix).
        const link& m = measured_->at(na, nb);
        h = {m.bandwidth / static_cast<double>(devices_in_node(na)) *
                 static_cast<double>(std::min(members_in(na), members_in(nb))),
             m.latency};
      } else {
        const node_spec& from = groups_[group_of_device(a)].node;
        const node_spec& to = groups_[group_of_device(b)].node;
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
constexpr cluster homogeneous(const hw::device& d, int count, const node_spec& node,
                              collective_efficiency efficiency = {}) {
  return cluster{{device_group{d, count, node}}, efficiency};
}

}  // namespace phaze::cluster
