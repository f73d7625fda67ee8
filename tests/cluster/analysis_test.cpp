// Tests of phaze/cluster/analysis.hpp: nodes of a cluster, the links between them, the slowest links and the
// bisection bandwidth against closed forms (one node type behind a fabric: half the nodes' interfaces) and a
// split computed by hand.
#include "phaze/cluster/analysis.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "phaze/cluster/presets.hpp"
#include "phaze/hw/presets.hpp"

using namespace phaze;

TEST_CASE("nodes of a cluster, a partly filled last node included", "[cluster_analysis]") {
  const cluster::cluster c{{{*hw::find_preset("a100-80gb"), 12, cluster::node_of("a100-80gb")},
                            {*hw::find_preset("t4"), 5, cluster::node_of("t4")}}};
  const auto nodes = cluster::nodes_of(c);
  REQUIRE(nodes.size() == 4);
  CHECK(nodes[1].devices == 4);
  CHECK(nodes[1].first_device == 8);
  CHECK(nodes[2].group == 1);
  CHECK(nodes[3].devices == 1);
  CHECK(nodes[3].first_device == 16);
  CHECK(static_cast<int>(nodes.size()) == c.nodes());
}

TEST_CASE("bisection of one node type behind a fabric is half the nodes' interfaces", "[cluster_analysis]") {
  for (const int nodes : {2, 4, 6, 16, 24, 64}) {
    const auto c = cluster::preset_cluster("h100-sxm", 8 * nodes);
    const auto b = cluster::bisection_of(c);
    INFO(nodes);
    CHECK(b.bandwidth.value() == Approx(nodes / 2 * 8 * 50e9));
    CHECK(b.exact == (nodes <= 20));
    CHECK(static_cast<int>(b.side.size()) == nodes / 2);
  }
  CHECK(cluster::bisection_of(cluster::preset_cluster("a100-80gb", 8)).bandwidth.value() == 0.0);
}

TEST_CASE("bisection of two node types puts one of each on a side", "[cluster_analysis]") {
  // 2 DGX A100 (8 x 25 GB/s each) and 2 nodes of 4 V100 with one 3.125 GB/s interface: a balanced split
  // holds one of each; each side sends 200 GB/s from its A100 node (capped by the interfaces) and
  // 3.125 GB/s from its V100 node.
  cluster::node_spec v100 = cluster::node_of("v100-16gb");
  v100.nic.bandwidth = bytes_per_second{25e9 / 8.0};
  const cluster::cluster c{{{*hw::find_preset("a100-80gb"), 16, cluster::node_of("a100-80gb")},
                            {*hw::find_preset("v100-16gb"), 8, v100}}};
  const auto b = cluster::bisection_of(c);
  CHECK(b.bandwidth.value() == Approx(200e9 + 25e9 / 8.0));
  REQUIRE(b.side.size() == 2);
  CHECK(c.groups()[cluster::nodes_of(c)[static_cast<std::size_t>(b.side[0])].group].device !=
        c.groups()[cluster::nodes_of(c)[static_cast<std::size_t>(b.side[1])].group].device);
  const auto slow = cluster::slowest_node_links(c, 3);
  REQUIRE(slow.size() == 3);
  CHECK(slow[0].hop.bandwidth.value() == Approx(25e9 / 8.0));
  CHECK(slow[0].hop.bandwidth <= slow[2].hop.bandwidth);
}

TEST_CASE("a measured node matrix bounds the links between nodes", "[cluster_analysis]") {
  cluster::link_matrix m;
  m.size = 2;
  // Whole-node entries (cluster::link_matrix): 4 GB/s from node 0 to node 1, 8 GB/s back.
  m.entries = {{}, {bytes_per_second{4e9}, seconds{2e-5}}, {bytes_per_second{8e9}, seconds{1e-5}}, {}};
  const cluster::cluster c{{{*hw::find_preset("t4"), 8, cluster::node_of("t4")}}, {}, m};
  const auto nodes = cluster::nodes_of(c);
  CHECK(cluster::node_link(c, nodes, 0, 1).bandwidth.value() == Approx(4e9));
  CHECK(cluster::node_link(c, nodes, 1, 0).latency.value() == Approx(1e-5));
  // Each node sends at most its one 6.25 GB/s interface: 4 GB/s one way and 6.25 (of 8) the other.
  CHECK(cluster::bisection_of(c).bandwidth.value() == Approx(4e9));
}

TEST_CASE("slowest links and the bisection by groups equal the pairwise ones on random clusters",
          "[cluster_analysis]") {
  // Oracle: without measured links the grouped forms (slowest_node_links, side_sends_by_group) must give
  // what comparing every pair of nodes gives (slowest_node_links_pairwise, side_sends over the link matrix).
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&](int below) {
    state ^= state << 13U;
    state ^= state >> 7U;
    state ^= state << 17U;
    return static_cast<int>(state % static_cast<std::uint64_t>(below));
  };
  const char* devices[] = {"a100-80gb", "h100-sxm", "v100-16gb", "t4"};
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<cluster::device_group> groups;
    const int count = 1 + next(4);
    for (int g = 0; g < count; ++g) {
      const char* name = devices[next(4)];
      cluster::node_spec node = cluster::node_of(name);
      node.devices = 1 + next(8);
      node.nics = 1 + next(4);
      node.nic.bandwidth = bytes_per_second{1e9 * (1 + next(5))};
      node.nic.latency = seconds{1e-6 * (1 + next(3))};
      groups.push_back({*hw::find_preset(name), 1 + next(40), node});
    }
    const cluster::cluster c{groups};
    INFO("trial " << trial << ", " << c.nodes() << " nodes");
    for (const std::size_t k : {std::size_t{1}, std::size_t{5}, std::size_t{40}}) {
      const auto grouped = cluster::slowest_node_links(c, k);
      const auto pairwise = cluster::slowest_node_links_pairwise(c, k);
      REQUIRE(grouped.size() == pairwise.size());
      for (std::size_t i = 0; i < grouped.size(); ++i) {
        CHECK(grouped[i].from == pairwise[i].from);
        CHECK(grouped[i].to == pairwise[i].to);
        CHECK(grouped[i].hop.bandwidth.value() == pairwise[i].hop.bandwidth.value());
      }
    }
    const auto nodes = cluster::nodes_of(c);
    const auto n = nodes.size();
    std::vector<std::vector<double>> links(n, std::vector<double>(n, 0.0));
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = 0; b < n; ++b)
        if (a != b)
          links[a][b] =
              cluster::node_link(c, nodes, static_cast<int>(a), static_cast<int>(b)).bandwidth.value();
    for (int split = 0; split < 5; ++split) {
      std::vector<char> in_a(n, 0);
      for (auto& x : in_a) x = static_cast<char>(next(2));
      for (const bool from_a : {true, false}) {
        CHECK(cluster::detail::side_sends_by_group(c, nodes, in_a, from_a) ==
              Approx(cluster::detail::side_sends(nodes, links, in_a, from_a)).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("the largest cluster accepted is described without a matrix of its nodes", "[cluster_analysis]") {
  // 2^20 devices, half H100 and half A100, nodes of eight: 131,072 nodes, whose node-by-node matrix would
  // hold 1.7e10 entries. Grouped, the bisection puts the A100 nodes (the same interfaces here, so the
  // first half in order) on one side and the slowest links are the first node pairs.
  const cluster::cluster c{{{*hw::find_preset("h100-sxm"), 1 << 19, cluster::node_of("h100-sxm")},
                            {*hw::find_preset("a100-80gb"), 1 << 19, cluster::node_of("a100-80gb")}}};
  REQUIRE(c.nodes() == 131072);
  const auto b = cluster::bisection_of(c);
  CHECK_FALSE(b.exact);
  CHECK(b.side.size() == 65536);
  const auto nodes = cluster::nodes_of(c);
  const double least = std::min(nodes.front().network.value(), nodes.back().network.value());
  CHECK(b.bandwidth.value() == Approx(65536 * least));
  const auto slow = cluster::slowest_node_links(c, 5);
  REQUIRE(slow.size() == 5);
  CHECK(slow.front().hop.bandwidth.value() == Approx(least));
}
