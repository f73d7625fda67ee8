/// @file
/// The routes of a cluster whose rank order changes by exchanges of two ranks (the rank annealing,
/// place/rank_assignment.hpp), kept up to date instead of followed again rank by rank.
///
///     cluster::cluster work = c.with_order(start);
///     cluster::route_tracker routes{work};
///     work.swap_ranks(a, b);
///     routes.exchanged(a, b);                      // follows again only the instances holding a and b
///     const cluster::route r = routes.ring({8, 1}, work.devices());  // == work.ring({8, 1}, ...)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/links.hpp"
#include "phaze/core/error.hpp"

namespace phaze::cluster {

/// Each ring and pairs route asked of one cluster, kept with the slowest hop of every one of its instances
/// (a ring of `size` members, a pair of ranks `distance` apart) in a tree whose inner entries hold the
/// `slower` of their children. An exchange of two ranks follows again only the instances that hold them:
/// O(size log instances) per route, where cluster::ring and cluster::pairs follow every rank, O(devices).
/// Every answer equals the cluster's own for its order as it stands, bit for bit: `slower` takes the least
/// bandwidth and the largest latency, so the order it combines the instances in does not matter, and each
/// instance is followed by the cluster's own code (cluster::slowest_hop).
///
/// Kept are the routes the cluster follows instance by instance: rings of a cluster with a rank order or
/// measured links, pairs of a cluster with measured links. Any other route (closed forms, and the pairs of
/// an unmeasured cluster, whose transfers share each node's interfaces) is asked of the cluster once per
/// order: until the next exchange.
/// The cluster must outlive the tracker, and its order must change by the exchanges reported only (for any
/// other change, make a new tracker). Not safe to share between threads.
class route_tracker {
 public:
  explicit route_tracker(const cluster& c) : cluster_(&c) {}

  /// cluster::ring(shape, used) of the cluster as it stands.
  [[nodiscard]] route ring(group_shape shape, int used) { return find(true, shape, used); }
  /// cluster::pairs(distance, used) of the cluster as it stands.
  [[nodiscard]] route pairs(int distance, int used) { return find(false, {distance, 1}, used); }

  /// Ranks `a` and `b` of the cluster were exchanged (cluster::swap_ranks(a, b) was called). The instances
  /// that hold them are followed again when a route of theirs is next asked for, each once however many
  /// exchanges touched it (a move of the annealing may exchange thousands of ranks).
  void exchanged(int a, int b) {
    asked_.clear();
    for (entry& e : entries_) {
      touch(e, a);
      if (b != a) touch(e, b);
    }
  }

  /// The routes kept.
  [[nodiscard]] std::size_t size() const { return entries_.size(); }

 private:
  struct entry {
    bool ring = true;
    group_shape shape{};  ///< pairs: shape.size is the distance
    int used = 0;
    std::size_t leaves = 1;  ///< a power of two at least the instances
    std::size_t instances = 0;
    std::vector<link> tree;          ///< tree[1] the slowest of all; instance i at tree[leaves + i]
    std::vector<std::size_t> stale;  ///< instances a rank of which was exchanged since they were followed
    std::vector<bool> is_stale;      ///< per instance: listed in `stale`
  };

  [[nodiscard]] bool kept(bool ring) const {
    const cluster& c = *cluster_;
    return ring ? (!c.order_.empty() || c.measured_.has_value()) : c.measured_.has_value();
  }

  route find(bool ring, group_shape shape, int used) {
    if (!kept(ring)) {
      // Asked of the cluster once per order: an estimate asks for the same route many times.
      for (const asked& a : asked_)
        if (a.ring == ring && a.shape == shape && a.used == used) return a.answer;
      const route r = ring ? cluster_->ring(shape, used) : cluster_->pairs(shape.size, used);
      asked_.push_back({ring, shape, used, r});
      return r;
    }
    for (entry& e : entries_) {
      if (e.ring == ring && e.shape == shape && e.used == used) {
        refresh(e);
        return {e.tree[1], cluster_->efficiency_};
      }
    }
    // The cluster checks the shape and gives the first answer; the instances are followed once more here.
    const route first = ring ? cluster_->ring(shape, used) : cluster_->pairs(shape.size, used);
    entry e;
    e.ring = ring;
    e.shape = shape;
    e.used = used;
    if (ring) {
      const std::int64_t block = static_cast<std::int64_t>(shape.size) * shape.stride;
      e.instances = static_cast<std::size_t>(used / block) * static_cast<std::size_t>(shape.stride);
    } else {
      e.instances = static_cast<std::size_t>(used - shape.size);
    }
    while (e.leaves < e.instances) e.leaves *= 2;
    e.tree.assign(2 * e.leaves, cluster::unreached);
    e.is_stale.assign(e.instances, false);
    for (std::size_t i = 0; i < e.instances; ++i) e.tree[e.leaves + i] = instance(e, i);
    for (std::size_t k = e.leaves - 1; k >= 1; --k) e.tree[k] = slower(e.tree[2 * k], e.tree[2 * k + 1]);
    if (!(e.tree[1] == first.hop)) {
      throw error("route_tracker: a route followed instance by instance differs from the cluster's");
    }
    entries_.push_back(std::move(e));
    return first;
  }

  /// The slowest hop of instance `i` of `e` in the cluster's current order (cluster::rings_hop_by_hop's and
  /// cluster::pairs's instances, in their order).
  link instance(const entry& e, std::size_t i) {
    const cluster& c = *cluster_;
    if (e.ring) {
      const auto stride = static_cast<std::size_t>(e.shape.stride);
      const std::int64_t block = static_cast<std::int64_t>(e.shape.size) * e.shape.stride;
      const std::int64_t first =
          static_cast<std::int64_t>(i / stride) * block + static_cast<std::int64_t>(i % stride);
      members_.resize(static_cast<std::size_t>(e.shape.size));
      for (int m = 0; m < e.shape.size; ++m)
        members_[static_cast<std::size_t>(m)] =
            c.device_of_rank(static_cast<int>(first + static_cast<std::int64_t>(m) * e.shape.stride));
    } else {
      members_.resize(2);
      members_[0] = c.device_of_rank(static_cast<int>(i));
      members_[1] = c.device_of_rank(static_cast<int>(i) + e.shape.size);
    }
    return c.slowest_hop(members_, scratch_);
  }

  /// Marks the instances of `e` that hold rank `r` stale.
  static void touch(entry& e, int r) {
    if (r >= e.used) return;
    auto mark = [&](std::size_t i) {
      if (e.is_stale[i]) return;
      e.is_stale[i] = true;
      e.stale.push_back(i);
    };
    if (e.ring) {
      const std::int64_t block = static_cast<std::int64_t>(e.shape.size) * e.shape.stride;
      const std::int64_t b = r / block;
      if (static_cast<std::size_t>(b) * static_cast<std::size_t>(e.shape.stride) >= e.instances) return;
      mark(static_cast<std::size_t>(b) * static_cast<std::size_t>(e.shape.stride) +
           static_cast<std::size_t>((r - b * block) % e.shape.stride));
    } else {
      const int d = e.shape.size;
      if (r + d < e.used) mark(static_cast<std::size_t>(r));  // the pair (r, r + d)
      if (r - d >= 0) mark(static_cast<std::size_t>(r - d));  // the pair (r - d, r)
    }
  }

  /// Follows the stale instances of `e` again and brings the tree up to date: leaf by leaf up to the root
  /// when few are stale, else the whole tree from its leaves.
  void refresh(entry& e) {
    if (e.stale.empty()) return;
    for (const std::size_t i : e.stale) {
      e.tree[e.leaves + i] = instance(e, i);
      e.is_stale[i] = false;
    }
    if (e.stale.size() * 8 < e.instances) {
      for (const std::size_t i : e.stale)
        for (std::size_t k = (e.leaves + i) / 2; k >= 1; k /= 2)
          e.tree[k] = slower(e.tree[2 * k], e.tree[2 * k + 1]);
    } else {
      for (std::size_t k = e.leaves - 1; k >= 1; --k) e.tree[k] = slower(e.tree[2 * k], e.tree[2 * k + 1]);
    }
    e.stale.clear();
  }

  const cluster* cluster_;
  std::vector<entry> entries_;
  /// A route not kept, as the cluster gave it since the last exchange.
  struct asked {
    bool ring = true;
    group_shape shape{};
    int used = 0;
    route answer{};
  };
  std::vector<asked> asked_;
  std::vector<int> members_;
  std::vector<int> scratch_;
};

}  // namespace phaze::cluster
