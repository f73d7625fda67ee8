/// @file
/// What a cluster offers, in numbers a person sizing a training job asks for first: its nodes, the
/// bandwidth between every pair of them, the slowest of those links and the bisection bandwidth (the least
/// bandwidth between two halves of its devices). `phaze cluster FILE` prints them (io/describe_cluster.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/links.hpp"
#include "phaze/core/quantity.hpp"

namespace phaze::cluster {

/// One physical node: its device group, its devices (the last node of a group may be partly filled) and
/// the total bandwidth its network interfaces carry out of it.
struct node_info {
  std::size_t group = 0;
  int first_device = 0;  ///< physical device numbering: group by group, node by node
  int devices = 0;
  bytes_per_second network{0.0};  ///< nics x interface bandwidth
};

/// The physical nodes of `c`, in the cluster's numbering (the numbering a node link matrix uses).
inline std::vector<node_info> nodes_of(const cluster& c) {
  std::vector<node_info> out;
  int device = 0;
  for (std::size_t g = 0; g < c.groups().size(); ++g) {
    const device_group& group = c.groups()[g];
    for (int left = group.count; left > 0; left -= group.node.devices) {
      const int here = std::min(left, group.node.devices);
      out.push_back(
          {g, device, here,
           bytes_per_second{group.node.nic.bandwidth.value() * static_cast<double>(group.node.nics)}});
      device += here;
    }
  }
  return out;
}

/// The link from node `a` to node `b` as a whole (a != b): the bandwidth all of a's devices reach towards b
/// together and the latency of a message. From the measured node matrix when there is one (an entry is the
/// whole node's, cluster::link_matrix); otherwise through the network
/// fabric, which carries what both nodes' interfaces allow. A measured matrix between devices sums the
/// pairs' bandwidths, capped by the sending node's interfaces.
inline link node_link(const cluster& c, const std::vector<node_info>& nodes, int a, int b) {
  const node_info& from = nodes[static_cast<std::size_t>(a)];
  const node_info& to = nodes[static_cast<std::size_t>(b)];
  const node_spec& fa = c.groups()[from.group].node;
  const node_spec& fb = c.groups()[to.group].node;
  const auto& m = c.measured();
  if (m && m->endpoints == link_matrix::between::nodes) {
    return m->at(a, b);  // the whole node's (link_matrix)
  }
  if (m && m->endpoints == link_matrix::between::devices) {
    double sum = 0.0;
    seconds latency{0.0};
    for (int i = from.first_device; i < from.first_device + from.devices; ++i) {
      for (int j = to.first_device; j < to.first_device + to.devices; ++j) {
        sum += m->at(i, j).bandwidth.value();
        latency = std::max(latency, m->at(i, j).latency);
      }
    }
    return {bytes_per_second{std::min(sum, from.network.value())}, latency};
  }
  return {std::min(from.network, to.network), std::max(fa.nic.latency, fb.nic.latency)};
}

/// A link between two nodes, named by them.
struct node_pair_link {
  int from = 0;
  int to = 0;
  link hop{};
};

namespace detail {
/// The order of slow_links: lowest bandwidth first, then highest latency, then by the nodes (a total order,
/// so the k slowest are one set however they are found).
inline bool slower_first(const node_pair_link& x, const node_pair_link& y) {
  if (x.hop.bandwidth != y.hop.bandwidth) return x.hop.bandwidth < y.hop.bandwidth;
  if (x.hop.latency != y.hop.latency) return x.hop.latency > y.hop.latency;
  return x.from != y.from ? x.from < y.from : x.to < y.to;
}

/// Keeps the `k` first of `all` under slower_first once it holds many more, so a search stays in memory.
inline void keep_slowest(std::vector<node_pair_link>& all, std::size_t k, bool finish) {
  if (!finish && all.size() <= 4 * k + 4096) return;
  if (all.size() > k) {
    std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(), slower_first);
    all.resize(k);
  }
  if (finish) std::sort(all.begin(), all.end(), slower_first);
}

/// The first node of each group and its node count, in the cluster's numbering (nodes_of).
struct group_nodes {
  int first = 0;
  int count = 0;
};
inline std::vector<group_nodes> nodes_by_group(const cluster& c, const std::vector<node_info>& nodes) {
  std::vector<group_nodes> out(c.groups().size());
  for (std::size_t x = 0; x < nodes.size(); ++x) {
    group_nodes& g = out[nodes[x].group];
    if (g.count++ == 0) g.first = static_cast<int>(x);
  }
  return out;
}
}  // namespace detail

/// slowest_node_links by every ordered pair of nodes (quadratic in the nodes): for measured matrices, whose
/// entries may differ pair by pair (at most 4096 endpoints), and as the oracle of the grouped form.
inline std::vector<node_pair_link> slowest_node_links_pairwise(const cluster& c, std::size_t k) {
  const auto nodes = nodes_of(c);
  std::vector<node_pair_link> all;
  const int n = static_cast<int>(nodes.size());
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a != b) all.push_back({a, b, node_link(c, nodes, a, b)});
    }
    detail::keep_slowest(all, k, false);
  }
  detail::keep_slowest(all, k, true);
  return all;
}

/// The `k` slowest links between distinct nodes (lowest bandwidth first, then highest latency, then by the
/// nodes; each direction counts on its own). Empty for a one-node cluster. Without a measured matrix a
/// node link depends on the two nodes' groups alone (node_link), so only the first k pairs of each ordered
/// pair of groups can be among the slowest: O(groups^2 x k), whatever the number of nodes (2^20 devices in
/// 131,072 nodes are described in well under a second).
inline std::vector<node_pair_link> slowest_node_links(const cluster& c, std::size_t k) {
  if (c.measured()) return slowest_node_links_pairwise(c, k);
  const auto nodes = nodes_of(c);
  const auto groups = detail::nodes_by_group(c, nodes);
  std::vector<node_pair_link> all;
  for (const detail::group_nodes& ga : groups) {
    for (const detail::group_nodes& gb : groups) {
      std::size_t taken = 0;
      for (int a = ga.first; a < ga.first + ga.count && taken < k; ++a) {
        for (int b = gb.first; b < gb.first + gb.count && taken < k; ++b) {
          if (a == b) continue;
          all.push_back({a, b, node_link(c, nodes, a, b)});
          ++taken;
        }
      }
      detail::keep_slowest(all, k, false);
    }
  }
  detail::keep_slowest(all, k, true);
  return all;
}

/// The bisection bandwidth: over every split of the nodes into two sides holding as equal a number of
/// devices as whole nodes allow, the least bandwidth one side can send to the other at once. A side sends
/// from each of its nodes the least of that node's interfaces and its links towards the other side
/// (node_link), and the slower direction counts. `exact` is false when the cluster has more than
/// `exact_up_to` nodes: the split is then the one that puts the nodes with the least network bandwidth on
/// one side (exact for one node type behind a non-blocking fabric), an estimate otherwise.
struct bisection {
  bytes_per_second bandwidth{0.0};
  std::vector<int> side;  ///< the nodes of one side of the split that reaches it
  bool exact = true;
};

namespace detail {
/// What the side `in_a` marks (from_a) or the other side sends across a split: each of its nodes the least
/// of its interfaces and the sum of its links towards the other side.
inline double side_sends(const std::vector<node_info>& nodes, const std::vector<std::vector<double>>& links,
                         const std::vector<char>& in_a, bool from_a) {
  const std::size_t n = nodes.size();
  double total = 0.0;
  for (std::size_t x = 0; x < n; ++x) {
    if ((in_a[x] != 0) != from_a) continue;
    double out_of_x = 0.0;
    for (std::size_t y = 0; y < n; ++y)
      if ((in_a[y] != 0) != from_a) out_of_x += links[x][y];
    total += std::min(out_of_x, nodes[x].network.value());
  }
  return total;
}

/// side_sends without a measured matrix, by groups: a node link is the lesser of the two nodes'
/// interfaces (node_link), so every node of a group on one side sends the same. O(groups^2).
inline double side_sends_by_group(const cluster& c, const std::vector<node_info>& nodes,
                                  const std::vector<char>& in_a, bool from_a) {
  const std::size_t groups = c.groups().size();
  std::vector<double> sending(groups, 0.0);
  std::vector<double> receiving(groups, 0.0);
  std::vector<double> network(groups, 0.0);
  for (std::size_t x = 0; x < nodes.size(); ++x) {
    ((in_a[x] != 0) == from_a ? sending : receiving)[nodes[x].group] += 1.0;
    network[nodes[x].group] = nodes[x].network.value();
  }
  double total = 0.0;
  for (std::size_t g = 0; g < groups; ++g) {
    if (sending[g] == 0.0) continue;
    double out_of_node = 0.0;
    for (std::size_t h = 0; h < groups; ++h) out_of_node += receiving[h] * std::min(network[g], network[h]);
    total += sending[g] * std::min(out_of_node, network[g]);
  }
  return total;
}
}  // namespace detail

inline bisection bisection_of(const cluster& c, int exact_up_to = 20) {
  const auto nodes = nodes_of(c);
  const int n = static_cast<int>(nodes.size());
  bisection out;
  if (n < 2) return out;
  // The node links as a matrix where a split is searched exhaustively or links are measured (at most 4096
  // endpoints); otherwise a split's traffic is summed by groups (side_sends_by_group).
  const bool by_group = n > exact_up_to && !c.measured();
  std::vector<std::vector<double>> links;
  if (!by_group) {
    links.assign(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(n), 0.0));
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b)
          links[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] =
              node_link(c, nodes, a, b).bandwidth.value();
  }
  auto sends = [&](const std::vector<char>& in_a, bool from_a) {
    return by_group ? detail::side_sends_by_group(c, nodes, in_a, from_a)
                    : detail::side_sends(nodes, links, in_a, from_a);
  };
  auto cut = [&](const std::vector<char>& in_a) { return std::min(sends(in_a, true), sends(in_a, false)); };
  const int devices = c.devices();
  auto imbalance = [&](const std::vector<char>& in_a) {
    int a = 0;
    for (int x = 0; x < n; ++x)
      if (in_a[static_cast<std::size_t>(x)] != 0) a += nodes[static_cast<std::size_t>(x)].devices;
    return std::abs(devices - 2 * a);
  };
  std::vector<char> best_split;
  double best = std::numeric_limits<double>::infinity();
  if (n <= exact_up_to) {
    // Node 0 stays on side B (a split and its mirror are the same split); the most balanced splits only.
    int least = std::numeric_limits<int>::max();
    std::vector<char> in_a(static_cast<std::size_t>(n), 0);
    const std::uint64_t count = std::uint64_t{1} << (n - 1);
    for (std::uint64_t mask = 1; mask < count; ++mask) {
      for (int x = 1; x < n; ++x)
        in_a[static_cast<std::size_t>(x)] = static_cast<char>((mask >> (x - 1)) & 1U);
      least = std::min(least, imbalance(in_a));
    }
    for (std::uint64_t mask = 1; mask < count; ++mask) {
      for (int x = 1; x < n; ++x)
        in_a[static_cast<std::size_t>(x)] = static_cast<char>((mask >> (x - 1)) & 1U);
      if (imbalance(in_a) != least) continue;
      const double v = cut(in_a);
      if (v < best) {
        best = v;
        best_split = in_a;
      }
    }
  } else {
    out.exact = false;
    std::vector<int> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      return nodes[static_cast<std::size_t>(x)].network < nodes[static_cast<std::size_t>(y)].network;
    });
    best_split.assign(static_cast<std::size_t>(n), 0);
    int held = 0;
    for (const int x : order) {
      if (2 * held >= devices) break;
      best_split[static_cast<std::size_t>(x)] = 1;
      held += nodes[static_cast<std::size_t>(x)].devices;
    }
    best = cut(best_split);
  }
  out.bandwidth = bytes_per_second{best};
  for (int x = 0; x < n; ++x)
    if (best_split[static_cast<std::size_t>(x)] != 0) out.side.push_back(x);
  return out;
}

}  // namespace phaze::cluster
