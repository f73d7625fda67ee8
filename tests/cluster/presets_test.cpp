// Tests of phaze/cluster/presets.hpp: every device preset has its node, with the figures of the system
// datasheets they cite.
#include "phaze/cluster/presets.hpp"

#include <catch2/catch.hpp>

#include "phaze/hw/presets.hpp"

using namespace phaze;
using namespace phaze::literals;

TEST_CASE("every device preset comes in a node, every node preset is a device preset's",
          "[cluster][presets]") {
  for (const auto& p : hw::presets) {
    CAPTURE(p.name);
    REQUIRE(cluster::find_node_preset(p.name).has_value());
    const auto n = cluster::node_of(p.name);
    CHECK_NOTHROW(cluster::validate(n));
    // A fast domain inside the node, at least as fast as any one device's share of the network.
    CHECK(n.intra.bandwidth >= n.network_share(1));
    CHECK(n.intra.latency <= n.nic.latency);
  }
  for (const auto& n : cluster::node_presets) CHECK(hw::find_preset(n.device).has_value());
  CHECK_THROWS_WITH(cluster::node_of("a100"), Catch::Contains("not a device preset"));
}

TEST_CASE("node presets: DGX rails, AWS instances with one network interface", "[cluster][presets]") {
  // DGX A100: NVLink3 600 GB/s total (300 per direction), 8 x 200 Gb/s HDR InfiniBand per 8 GPUs.
  const auto dgx_a100 = cluster::node_of("a100-80gb");
  CHECK(dgx_a100.devices == 8);
  CHECK(in_gb_per_s(dgx_a100.intra.bandwidth) == Approx(300.0));
  CHECK(dgx_a100.nics == 8);
  CHECK(in_gb_per_s(dgx_a100.nic.bandwidth) == Approx(200.0 / 8));
  // DGX H100: NVLink4 900 GB/s total, 8 x 400 Gb/s NDR.
  const auto dgx_h100 = cluster::node_of("h100-sxm");
  CHECK(in_gb_per_s(dgx_h100.intra.bandwidth) == Approx(450.0));
  CHECK(in_gb_per_s(dgx_h100.nic.bandwidth) == Approx(400.0 / 8));
  // AMP's p3.8xlarge: 4 V100 and one 10 Gb/s interface; g4dn.12xlarge: 4 T4 and one 50 Gb/s interface.
  const auto p3 = cluster::node_of("v100-16gb");
  CHECK(p3.devices == 4);
  CHECK(p3.nics == 1);
  CHECK(in_gb_per_s(p3.nic.bandwidth) == Approx(10.0 / 8));
  const auto g4 = cluster::node_of("t4");
  CHECK(g4.nics == 1);
  CHECK(in_gb_per_s(g4.nic.bandwidth) == Approx(50.0 / 8));
  // The TPU v4 host: 4 chips, the pod's ICI between hosts too (1.1 PB/s all-reduce over 4096 chips).
  CHECK(cluster::reference_node.devices == 4);
  CHECK(cluster::reference_node.intra.bandwidth == cluster::reference_node.network_share(1));
  CHECK(in_gb_per_s(cluster::reference_node.intra.bandwidth) == Approx(1.1e15 / 4096 / 1e9));
}

TEST_CASE("preset_cluster: count devices of a preset in its nodes", "[cluster][presets]") {
  const auto c = cluster::preset_cluster("h100-sxm", 64);
  CHECK(c.devices() == 64);
  CHECK(c.nodes() == 8);
  CHECK(c.groups().front().device == *hw::find_preset("h100-sxm"));
  CHECK(c.groups().front().node == cluster::node_of("h100-sxm"));
  CHECK_THROWS_AS(cluster::preset_cluster("h100", 64), input_error);
}
