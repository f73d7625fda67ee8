// Tests of phaze/cluster/cluster.hpp: ranks, nodes and groups of a cluster; the route of every ring shape
// computed hop by hop equals the closed forms where they exist (the oracle), measured matrices (node-level
// and device-level, asymmetric) give the slowest hop of each ring, and bad clusters are input_errors.
#include "phaze/cluster/cluster.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "phaze/cluster/presets.hpp"
#include "phaze/hw/presets.hpp"

using namespace phaze;
using namespace phaze::literals;

namespace {
constexpr cluster::node_spec dgx{8, {300_GBps, 5_us}, 8, {25_GBps, 10_us}};
constexpr cluster::node_spec shared{4, {150_GBps, 5_us}, 1, {1.25_GBps, 10_us}};
const hw::device a100 = *hw::find_preset("a100-80gb");

/// The same devices split into two groups of the same node (at a node boundary): the route is computed hop
/// by hop.
cluster::cluster split_in_two(const cluster::node_spec& node, int devices) {
  return cluster::cluster{{{a100, devices / 2, node}, {a100, devices - devices / 2, node}}};
}

/// A node-level matrix of full nodes where every entry is what the whole node reaches while all its devices
/// send: each device the fabric's share.
cluster::link_matrix uniform_nodes(const cluster::node_spec& node, int nodes) {
  cluster::link_matrix m;
  m.endpoints = cluster::link_matrix::between::nodes;
  m.size = nodes;
  m.entries.assign(
      static_cast<std::size_t>(nodes) * static_cast<std::size_t>(nodes),
      cluster::link{node.network_share(1) * static_cast<double>(node.devices), node.nic.latency});
  return m;
}
}  // namespace

TEST_CASE("ranks are numbered group by group and node by node", "[cluster]") {
  const cluster::cluster c{{{a100, 12, dgx}, {*hw::find_preset("v100-16gb"), 8, shared}}};
  CHECK(c.devices() == 20);
  CHECK(c.nodes() == 2 + 2);  // 12 A100 in one full and one half node, 8 V100 in two nodes
  CHECK(c.group_index(11) == 0);
  CHECK(c.group_index(12) == 1);
  CHECK(c.node_at(7) == 0);
  CHECK(c.node_at(8) == 1);
  CHECK(c.node_at(11) == 1);
  CHECK(c.node_at(12) == 2);
  CHECK(c.node_at(16) == 3);
  CHECK(c.device_at(19).name.view() == "v100-16gb");
  // What each node holds: a group's last node may hold fewer than its node size.
  CHECK(c.devices_in_node(0) == 8);
  CHECK(c.devices_in_node(1) == 4);
  CHECK(c.devices_in_node(2) == 4);
  CHECK(c.devices_in_node(3) == 4);
}

TEST_CASE("the hop-by-hop route equals the closed form for every ring shape", "[cluster]") {
  for (const auto& node : {dgx, shared, cluster::reference_node, cluster::node_of("h100-sxm")}) {
    for (const int devices : {8, 16, 64, 256}) {
      // Every device in one node: the closed form alone (no second group fits a node boundary).
      if (devices <= node.devices)
        CHECK(cluster::homogeneous(a100, devices, node).ring({devices, 1}, devices).hop == node.intra);
      if (devices < 2 * node.devices) continue;
      const auto one = cluster::homogeneous(a100, devices, node);
      const auto two = split_in_two(node, devices);
      const auto measured = cluster::cluster{{{a100, devices, node}}, {}, uniform_nodes(node, one.nodes())};
      int compared = 0;
      for (int size = 1; size <= devices; size *= 2) {
        for (int stride = 1; size * stride <= devices; stride *= 2) {
          CAPTURE(node.devices, node.nics, devices, size, stride);
          const auto closed = cluster::ring_route(node, size, stride, devices);
          REQUIRE(closed.has_value());  // powers of two always have one
          CHECK(one.ring({size, stride}, devices) == *closed);
          CHECK(two.ring({size, stride}, devices) == *closed);
          CHECK(measured.ring({size, stride}, devices).hop == closed->hop);
          ++compared;
        }
      }
      CHECK(compared > 3);
    }
  }
}

TEST_CASE("pipeline pairs: the slowest boundary, hop by hop and in closed form", "[cluster]") {
  for (const int devices : {16, 64}) {
    const auto one = cluster::homogeneous(a100, devices, dgx);
    const auto two = split_in_two(dgx, devices);
    for (int distance = 1; distance < devices; distance *= 2) {
      CAPTURE(devices, distance);
      CHECK(one.pairs(distance, devices) == two.pairs(distance, devices));
    }
    // Stages of 4 devices, two per node: the boundary between nodes sets the pace.
    CHECK(one.pairs(4, devices).hop == cluster::link{25_GBps, 10_us});
    CHECK(one.pairs(8, devices).hop == cluster::link{25_GBps, 10_us});
  }
  // Everything inside one node: NVLink.
  CHECK(cluster::homogeneous(a100, 8, dgx).pairs(4, 8).hop == dgx.intra);
}

TEST_CASE("pipeline pairs share a node's one interface only with the pairs that leave it", "[cluster]") {
  // `shared`: AWS-style nodes, 4 devices behind one 1.25 GB/s interface.
  for (const int devices : {8, 16}) {
    const auto one = cluster::homogeneous(a100, devices, shared);
    const auto two = split_in_two(shared, devices);
    for (int used = 5; used <= devices; ++used) {
      for (int distance = 1; distance < used; ++distance) {
        CAPTURE(devices, used, distance);
        // The closed form equals the pair-by-pair count of the transfers leaving and entering each node.
        CHECK(one.pairs(distance, used) == two.pairs(distance, used));
      }
    }
  }
  const auto c = cluster::homogeneous(a100, 16, shared);
  // One stage per device: one transfer leaves each node, over the whole interface.
  CHECK(c.pairs(1, 16).hop.bandwidth == 1.25_GBps);
  // Stages of two devices: two transfers share it.
  CHECK(c.pairs(2, 16).hop.bandwidth == 0.625_GBps);
  // Stages of a node or more: every device sends, a quarter each (what a ring of one member per node gets).
  CHECK(c.pairs(4, 16).hop.bandwidth == shared.network_share(1));
  CHECK(c.pairs(8, 16).hop.bandwidth == shared.network_share(1));
  // Rails (one interface per device): a transfer never shares an interface.
  CHECK(cluster::homogeneous(a100, 16, dgx).pairs(1, 16).hop ==
        cluster::homogeneous(a100, 16, dgx).pairs(8, 16).hop);
}

TEST_CASE("a measured device matrix: each ring runs at its slowest hop, in its own direction", "[cluster]") {
  const int n = 8;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> gbps(5.0, 50.0), us(1.0, 20.0);
  cluster::link_matrix m;
  m.endpoints = cluster::link_matrix::between::devices;
  m.size = n;
  for (int i = 0; i < n * n; ++i)
    m.entries.push_back({bytes_per_second{gbps(rng) * 1e9}, seconds{us(rng) * 1e-6}});
  const cluster::cluster c{{{a100, n, {2, {100_GBps, 1_us}, 2, {10_GBps, 5_us}}}}, {}, m};
  for (int size = 2; size <= n; size *= 2) {
    for (int stride = 1; size * stride <= n; stride *= 2) {
      // Brute force: every instance, every hop of its ring in ring order (and back to the first).
      double bandwidth = std::numeric_limits<double>::infinity();
      double latency = 0.0;
      for (int b = 0; b + size * stride <= n; b += size * stride) {
        for (int j = 0; j < stride; ++j) {
          for (int i = 0; i < size; ++i) {
            const int from = b + j + i * stride;
            const int to = b + j + ((i + 1) % size) * stride;
            bandwidth = std::min(bandwidth, m.at(from, to).bandwidth.value());
            latency = std::max(latency, m.at(from, to).latency.value());
          }
        }
      }
      CAPTURE(size, stride);
      CHECK(c.ring({size, stride}, n).hop.bandwidth.value() == bandwidth);
      CHECK(c.ring({size, stride}, n).hop.latency.value() == latency);
    }
  }
  // Asymmetric: a slow link in one direction slows the rings that use that direction only.
  cluster::link_matrix one_way = m;
  for (auto& e : one_way.entries) e = {100_GBps, 1_us};
  one_way.entries[static_cast<std::size_t>(3 * n + 2)] = {1_GBps, 1_us};  // 3 -> 2 only
  const cluster::cluster slow{{{a100, n, dgx}}, {}, one_way};
  CHECK(slow.ring({2, 1}, n).hop.bandwidth == 1_GBps);    // the pair (2, 3) goes both ways
  CHECK(slow.ring({4, 1}, n).hop.bandwidth == 100_GBps);  // 0 -> 1 -> 2 -> 3 -> 0 never goes 3 -> 2
}

TEST_CASE("a measured node matrix scales with the ring's members in each node", "[cluster]") {
  // Two nodes of 8; between them the whole node reaches 80 GB/s, each device 10 GB/s while all send.
  cluster::link_matrix m;
  m.size = 2;
  m.entries = {{}, {80_GBps, 8_us}, {80_GBps, 8_us}, {}};
  const cluster::cluster c{{{a100, 16, dgx}}, {}, m};
  CHECK(c.ring({16, 1}, 16).hop == cluster::link{80_GBps, 8_us});  // 8 members per node
  CHECK(c.ring({2, 8}, 16).hop == cluster::link{10_GBps, 8_us});   // 1 member per node
  CHECK(c.ring({8, 1}, 16).hop == dgx.intra);                      // inside a node: the node's link
}

TEST_CASE("bad clusters are input_errors that say what to fix", "[cluster]") {
  CHECK_THROWS_WITH(cluster::cluster{{}}, Catch::Contains("at least one device group"));
  CHECK_THROWS_WITH((cluster::cluster{{{a100, 0, dgx}}}), Catch::Contains("at least 1 device"));
  auto bad_node = dgx;
  bad_node.nics = 0;
  CHECK_THROWS_WITH((cluster::cluster{{{a100, 8, bad_node}}}), Catch::Contains("network interface"));
  cluster::link_matrix wrong;
  wrong.size = 3;
  wrong.entries.assign(9, {10_GBps, 1_us});
  CHECK_THROWS_WITH((cluster::cluster{{{a100, 16, dgx}}, {}, wrong}),
                    Catch::Contains("one row and one column"));
  cluster::link_matrix zero;
  zero.size = 2;
  zero.entries = {{}, {0_GBps, 1_us}, {10_GBps, 1_us}, {}};
  CHECK_THROWS_WITH((cluster::cluster{{{a100, 16, dgx}}, {}, zero}),
                    Catch::Contains("bandwidths must be positive"));
  CHECK_THROWS_WITH((cluster::cluster{{{a100, 16, dgx}}, {0.0, 1.0, 1.0, 1.0}}), Catch::Contains("(0, 1]"));
  const auto c = cluster::homogeneous(a100, 16, dgx);
  CHECK_THROWS_AS(c.ring({32, 1}, 16), input_error);
  CHECK_THROWS_AS(c.ring({4, 1}, 32), input_error);
  CHECK_THROWS_AS(c.pairs(16, 16), input_error);
}
