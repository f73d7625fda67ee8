// Tests of phaze/cost/collective.hpp: ring closed forms on hand-computed cases, over the routes a cluster
// gives its groups.
#include "phaze/cost/collective.hpp"

#include <catch2/catch.hpp>

#include "phaze/cluster/presets.hpp"

using namespace phaze;
using namespace phaze::literals;

namespace {
const cluster::node_spec dgx = cluster::node_of("a100-80gb");  // 8 GPUs, NVLink 300 GB/s, 8 x IB 25 GB/s
const cluster::route nvlink = cluster::tensor_parallel_route(dgx, 8);
/// A ring with one member per node: one interface of each node.
const cluster::route network = *cluster::ring_route(dgx, 64, 8, 512);
}  // namespace

TEST_CASE("ring collectives: closed forms by hand", "[cost][collective]") {
  REQUIRE(nvlink.hop == cluster::link{300_GBps, 5_us});
  REQUIRE(network.hop == cluster::link{25_GBps, 10_us});
  const bytes gb = 1_GB;
  // All-reduce of 1 GB over 8 GPUs in a node: 2 * 7/8 * 1e9 / 300e9 + 2 * 7 * 5 us.
  CHECK(cost::all_reduce_time(gb, 8, nvlink).value() == Approx(2 * 7.0 / 8 * 1e9 / 300e9 + 14 * 5e-6));
  // A data-parallel all-reduce over 64 GPUs, one per node: the network sets the pace.
  CHECK(cost::all_reduce_time(gb, 64, network).value() ==
        Approx(2 * 63.0 / 64 * 1e9 / 25e9 + 2 * 63 * 10e-6));
  // Reduce-scatter and all-gather: half the all-reduce's traffic and steps.
  CHECK(cost::reduce_scatter_time(gb, 4, nvlink).value() == Approx(3.0 / 4 * 1e9 / 300e9 + 3 * 5e-6));
  CHECK(cost::all_gather_time(gb, 4, nvlink) == cost::reduce_scatter_time(gb, 4, nvlink));
  CHECK(cost::all_reduce_time(gb, 4, nvlink).value() ==
        Approx(2 * cost::reduce_scatter_time(gb, 4, nvlink).value()));
  // Point to point: one message, one latency.
  CHECK(cost::point_to_point_time(100_MB, nvlink).value() == Approx(100e6 / 300e9 + 5e-6));
  CHECK(cost::point_to_point_time(100_MB, network).value() == Approx(100e6 / 25e9 + 10e-6));
  // One device communicates with nobody.
  CHECK(cost::all_reduce_time(gb, 1, nvlink).value() == 0.0);
  CHECK(cost::reduce_scatter_time(gb, 1, nvlink).value() == 0.0);
  // tp_copy and non-collective kinds cost nothing here.
  CHECK(cost::collective_time(model::op_kind::tp_copy, gb, 8, nvlink).value() == 0.0);
  CHECK(cost::collective_time(model::op_kind::all_reduce, gb, 8, nvlink) ==
        cost::all_reduce_time(gb, 8, nvlink));
}

TEST_CASE("a collective's efficiency divides its bandwidth term only", "[cost][collective]") {
  cluster::route slow = network;
  slow.efficiency = {0.5, 0.8, 0.25, 0.9};
  const double latency = 2 * 63 * 10e-6;
  CHECK(cost::all_reduce_time(1_GB, 64, slow).value() ==
        Approx(2 * (cost::all_reduce_time(1_GB, 64, network).value() - latency) + latency));
  CHECK(cost::all_gather_time(1_GB, 64, slow).value() ==
        Approx((cost::all_gather_time(1_GB, 64, network).value() - latency / 2) / 0.8 + latency / 2));
  CHECK(cost::reduce_scatter_time(1_GB, 64, slow).value() ==
        Approx((cost::reduce_scatter_time(1_GB, 64, network).value() - latency / 2) * 4 + latency / 2));
  CHECK(cost::point_to_point_time(1_GB, slow).value() == Approx(1e9 / (0.9 * 25e9) + 10e-6));
}

TEST_CASE("collective time grows with the message and the group, and drops with bandwidth",
          "[cost][collective]") {
  for (int n = 2; n <= 1024; n *= 2) {
    const auto r = *cluster::ring_route(dgx, n, 8, 8 * n);
    const auto bigger = *cluster::ring_route(dgx, 2 * n, 8, 16 * n);
    CHECK(cost::all_reduce_time(1_GB, 2 * n, bigger) >= cost::all_reduce_time(1_GB, n, r));
    CHECK(cost::all_reduce_time(2_GB, n, r) > cost::all_reduce_time(1_GB, n, r));
    cluster::route faster = r;
    faster.hop.bandwidth = r.hop.bandwidth * 2.0;
    CHECK(cost::all_reduce_time(1_GB, n, faster) < cost::all_reduce_time(1_GB, n, r));
  }
}
