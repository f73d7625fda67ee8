// Tests of phaze/cost/collective.hpp: ring closed forms on hand-computed cases and the slowest-link rule.
#include "phaze/cost/collective.hpp"

#include <catch2/catch.hpp>

#include "phaze/hw/presets.hpp"

using namespace phaze;
using namespace phaze::literals;

TEST_CASE("groups fit in a node up to devices_per_node and use the slowest link they span",
          "[cost][collective]") {
  const hw::device a100 = *hw::find_preset("a100-80gb");  // 8 per node, NVLink 300 GB/s, IB 25 GB/s
  CHECK(cost::packed_group(8, a100.link) == cost::group{8, false});
  CHECK(cost::packed_group(16, a100.link) == cost::group{16, true});
  CHECK(cost::slowest_link({8, false}, a100.link).bandwidth.value() == 300e9);
  CHECK(cost::slowest_link({8, false}, a100.link).latency.value() == Approx(5e-6));
  CHECK(cost::slowest_link({2, true}, a100.link).bandwidth.value() == 25e9);
  CHECK(cost::slowest_link({2, true}, a100.link).latency.value() == Approx(10e-6));
}

TEST_CASE("ring collectives: closed forms by hand", "[cost][collective]") {
  const hw::device a100 = *hw::find_preset("a100-80gb");
  const bytes gb = 1_GB;
  // All-reduce of 1 GB over 8 GPUs in a node: 2 * 7/8 * 1e9 / 300e9 + 2 * 7 * 5 us.
  CHECK(cost::all_reduce_time(gb, {8, false}, a100.link).value() ==
        Approx(2 * 7.0 / 8 * 1e9 / 300e9 + 14 * 5e-6));
  // A data-parallel all-reduce over 64 GPUs spans nodes: the network sets the pace.
  CHECK(cost::all_reduce_time(gb, {64, true}, a100.link).value() ==
        Approx(2 * 63.0 / 64 * 1e9 / 25e9 + 2 * 63 * 10e-6));
  // Reduce-scatter and all-gather: half the all-reduce's traffic and steps.
  CHECK(cost::reduce_scatter_time(gb, {4, false}, a100.link).value() ==
        Approx(3.0 / 4 * 1e9 / 300e9 + 3 * 5e-6));
  CHECK(cost::all_gather_time(gb, {4, false}, a100.link) ==
        cost::reduce_scatter_time(gb, {4, false}, a100.link));
  CHECK(cost::all_reduce_time(gb, {4, false}, a100.link).value() ==
        Approx(2 * cost::reduce_scatter_time(gb, {4, false}, a100.link).value()));
  // Point to point: one message, one latency.
  CHECK(cost::point_to_point_time(100_MB, {2, false}, a100.link).value() == Approx(100e6 / 300e9 + 5e-6));
  CHECK(cost::point_to_point_time(100_MB, {2, true}, a100.link).value() == Approx(100e6 / 25e9 + 10e-6));
  // One device communicates with nobody.
  CHECK(cost::all_reduce_time(gb, {1, false}, a100.link).value() == 0.0);
  CHECK(cost::reduce_scatter_time(gb, {1, false}, a100.link).value() == 0.0);
  // tp_copy and non-collective kinds cost nothing here.
  CHECK(cost::collective_time(model::op_kind::tp_copy, gb, {8, false}, a100.link).value() == 0.0);
  CHECK(cost::collective_time(model::op_kind::all_reduce, gb, {8, false}, a100.link) ==
        cost::all_reduce_time(gb, {8, false}, a100.link));
}

TEST_CASE("collective time grows with the message and the group, and drops with bandwidth",
          "[cost][collective]") {
  hw::links l{8, 300_GBps, 25_GBps, 5_us, 10_us};
  for (int n = 2; n <= 1024; n *= 2) {
    const auto g = cost::packed_group(n, l);
    const auto bigger = cost::packed_group(2 * n, l);
    CHECK(cost::all_reduce_time(1_GB, bigger, l) >= cost::all_reduce_time(1_GB, g, l));
    CHECK(cost::all_reduce_time(2_GB, g, l) > cost::all_reduce_time(1_GB, g, l));
    hw::links faster = l;
    faster.intra_node = 600_GBps;
    faster.inter_node = 50_GBps;
    CHECK(cost::all_reduce_time(1_GB, g, faster) < cost::all_reduce_time(1_GB, g, l));
  }
}
