#include "phaze/place/brute_force.hpp"

#include <catch2/catch.hpp>

#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"

using namespace phaze;
using namespace phaze::place;

TEST_CASE("brute_force finds the best split of a small chain by hand", "[place]") {
  // Loads 1 2 3 4 (forward only), one microbatch, two devices, two stages: the best split is
  // {0, 1, 2} | {3}: max(6, 4) = 6; (1 + 2 - 1) * 6 = 12 s. One stage: 10 s, which is better.
  placement_problem<> p;
  cost_table t;
  for (std::size_t v = 0; v < 4; ++v) {
    t.nodes.push_back(
        {"n", seconds{static_cast<double>(v + 1)}, seconds{0.0}, seconds{0.0}, bytes{0.0}, bytes{0.0}, true});
    if (v > 0) t.edges.push_back({v - 1, v, bytes{0.0}});
  }
  p.tables.push_back(t);
  p.devices = 2;
  p.microbatches = 1;
  p.memory_per_device = bytes{1.0};
  const plan two = brute_force(p).pp(2).run();
  REQUIRE(two.feasible);
  CHECK(two.time_per_batch.value() == Approx(12.0));
  CHECK(two.stages[1].nodes == std::vector<std::size_t>{3});
  CHECK(brute_force(p).run().time_per_batch.value() == Approx(10.0));
}

TEST_CASE("brute_force reports the smallest memory need when nothing fits", "[place]") {
  placement_problem<> p;
  cost_table t;
  t.nodes = {{"a", seconds{1.0}, seconds{1.0}, seconds{0.0}, bytes{4.0}, bytes{0.0}, true},
             {"b", seconds{1.0}, seconds{1.0}, seconds{0.0}, bytes{6.0}, bytes{0.0}, true}};
  t.edges = {{0, 1, bytes{0.0}}};
  p.tables.push_back(t);
  p.devices = 2;
  p.weight_bytes_per_parameter = 1.0;
  p.state_bytes_per_parameter = 1.0;
  p.memory_per_device = bytes{5.0};
  const plan got = brute_force(p).run();
  CHECK_FALSE(got.feasible);
  CHECK(got.smallest_memory_need.value() == Approx(6.0));  // {a} | {b}
  CHECK(got.memory_per_device.value() == Approx(5.0));
}

TEST_CASE("brute_force refuses large instances", "[place]") {
  placement_problem<> p;
  cost_table t;
  t.nodes.resize(brute_force_max_nodes + 1);
  p.tables.push_back(t);
  p.memory_per_device = bytes{1.0};
  CHECK_THROWS_WITH(brute_force(p).run(), Catch::Contains("at most"));
}
