// Tests of phaze/cluster/analysis.hpp: nodes of a cluster, the links between them, the slowest links and the
// bisection bandwidth against closed forms (one node type behind a fabric: half the nodes' interfaces) and a
// split computed by hand.
#include "phaze/cluster/analysis.hpp"

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
