// Tests of phaze/cluster/links.hpp: a node's network share, the closed-form routes of Megatron-ordered rings
// on hand-computed cases, and every rule validate() enforces.
#include "phaze/cluster/links.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "phaze/cluster/presets.hpp"

using namespace phaze;
using namespace phaze::literals;

namespace {
// A DGX-like node: 8 devices, 300 GB/s inside, 8 interfaces of 25 GB/s.
constexpr cluster::node_spec dgx_node{8, {300_GBps, 5_us}, 8, {25_GBps, 10_us}};
// A cloud node: 4 devices, one 10 Gb/s interface shared_nic by all four.
constexpr cluster::node_spec shared_nic{4, {150_GBps, 5_us}, 1, {1.25_GBps, 10_us}};

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const input_error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("a ring leaving a node with k members there gets k / devices of the node's interfaces",
          "[cluster][links]") {
  CHECK(dgx_node.network_share(1) == 25_GBps);   // rails: one interface per ring member
  CHECK(dgx_node.network_share(8) == 200_GBps);  // the whole node in one ring: all 8 interfaces
  CHECK(shared_nic.network_share(1) == bytes_per_second{1.25e9 / 4});  // four rings share one interface
  CHECK(shared_nic.network_share(4) == 1.25_GBps);
  static_assert(dgx_node.network_share(2) == bytes_per_second{50e9});
}

TEST_CASE("closed-form routes of Megatron-ordered rings, by hand", "[cluster][links]") {
  // Tensor parallelism inside a node: NVLink.
  CHECK(cluster::ring_route(dgx_node, 8, 1, 1024)->hop == dgx_node.intra);
  CHECK(cluster::ring_route(dgx_node, 4, 1, 1024)->hop == dgx_node.intra);
  // Everything in one node, whatever the shape.
  CHECK(cluster::ring_route(dgx_node, 4, 2, 8)->hop == dgx_node.intra);
  // Data parallelism across nodes with tp 8: one member per node, one interface each.
  CHECK(cluster::ring_route(dgx_node, 16, 8, 128)->hop == cluster::link{25_GBps, 10_us});
  // tp 2: four members of each data-parallel ring per node; the ring gets 4 of the 8 interfaces.
  CHECK(cluster::ring_route(dgx_node, 16, 2, 32)->hop == cluster::link{100_GBps, 10_us});
  // tp 1: the whole node in one ring; 8 interfaces = 200 GB/s, below NVLink.
  CHECK(cluster::ring_route(dgx_node, 64, 1, 64)->hop == cluster::link{200_GBps, 10_us});
  // One shared_nic interface: a data-parallel ring with one member per node gets a quarter of it.
  CHECK(cluster::ring_route(shared_nic, 4, 4, 16)->hop == cluster::link{bytes_per_second{1.25e9 / 4}, 10_us});
  // A ring that neither fits nor tiles nodes has no closed form.
  CHECK_FALSE(cluster::ring_route(dgx_node, 3, 3, 24).has_value());
  // Tensor-parallel routes.
  static_assert(cluster::tensor_parallel_route(dgx_node, 8).hop == dgx_node.intra);
  CHECK(cluster::tensor_parallel_route(dgx_node, 16).hop == cluster::link{200_GBps, 10_us});
  CHECK(cluster::tensor_parallel_route(dgx_node, 1).hop == dgx_node.intra);
}

TEST_CASE("one interface per device stays one per device when the node size changes", "[cluster][links]") {
  CHECK(cluster::with_devices_per_node(dgx_node, 4).nics == 4);
  CHECK(cluster::with_devices_per_node(dgx_node, 4).devices == 4);
  CHECK(cluster::with_devices_per_node(shared_nic, 8).nics == 1);  // a shared_nic interface stays shared_nic
  CHECK(cluster::with_devices_per_node(shared_nic, 8).network_share(8) == shared_nic.network_share(4));
}

TEST_CASE("validate names the broken rule", "[cluster][links]") {
  auto broken = dgx_node;
  broken.devices = 0;
  CHECK_THAT(error_of([&] { cluster::validate(broken); }), Catch::Contains("at least 1 device"));
  broken = dgx_node;
  broken.nics = 0;
  CHECK_THAT(error_of([&] { cluster::validate(broken); }), Catch::Contains("network interface"));
  broken = dgx_node;
  broken.nic.bandwidth = 0_GBps;
  CHECK_THAT(error_of([&] { cluster::validate(broken); }), Catch::Contains("bandwidths must be positive"));
  broken = dgx_node;
  broken.intra.latency = seconds{-1e-6};
  CHECK_THAT(error_of([&] { cluster::validate(broken); }), Catch::Contains("latencies must be at least 0"));
  broken = dgx_node;
  broken.intra.bandwidth = bytes_per_second{std::numeric_limits<double>::infinity()};
  CHECK_THAT(error_of([&] { cluster::validate(broken); }), Catch::Contains("finite"));
  CHECK_THAT(error_of([] {
               cluster::validate(cluster::collective_efficiency{1.0, 0.0, 1.0, 1.0});
             }),
             Catch::Contains("(0, 1]"));
  CHECK_THAT(error_of([] {
               cluster::validate(cluster::collective_efficiency{1.5, 1.0, 1.0, 1.0});
             }),
             Catch::Contains("(0, 1]"));
  CHECK(error_of([] { cluster::validate(dgx_node); }) == "no error");
}
