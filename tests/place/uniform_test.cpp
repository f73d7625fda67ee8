#include "phaze/place/uniform.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/place/brute_force.hpp"
#include "phaze/place/chain_dp.hpp"
#include "phaze/place/objective.hpp"

using namespace phaze;
using namespace phaze::place;

namespace {

placement_problem<> random_chain(std::mt19937& rng, std::size_t max_nodes) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  placement_problem<> p;
  const auto n = static_cast<std::size_t>(pick(1, static_cast<int>(max_nodes)));
  const int widths = pick(1, 2);
  for (int w = 0; w < widths; ++w) {
    cost_table t;
    t.tp = 1 << w;
    for (std::size_t v = 0; v < n; ++v) {
      t.nodes.push_back({"n", seconds{static_cast<double>(pick(1, 20))},
                         seconds{static_cast<double>(pick(1, 40))}, seconds{0.0},
                         bytes{static_cast<double>(pick(0, 12))}, bytes{static_cast<double>(pick(0, 6))},
                         true});
      if (v > 0) t.edges.push_back({v - 1, v, bytes{static_cast<double>(pick(0, 8))}});
    }
    p.tables.push_back(t);
  }
  p.devices = pick(1, 16);
  p.microbatches = std::int64_t{1} << pick(0, 4);
  p.memory_per_device = bytes{static_cast<double>(pick(10, 250))};
  p.weight_bytes_per_parameter = 2.0;
  p.state_bytes_per_parameter = 8.0;
  p.p2p_bandwidth = bytes_per_second{1.0};
  p.dp_bandwidth = bytes_per_second{2.0};
  return p;
}

}  // namespace

TEST_CASE("uniform is never better than the oracle, and equals it where it has no choice", "[place]") {
  std::mt19937 rng(3);
  int compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const auto p = random_chain(rng, 8);
    INFO("trial " << trial);
    const plan oracle = brute_force(p).run();
    const plan baseline = uniform(p).run();
    if (baseline.feasible) {
      REQUIRE(oracle.feasible);
      CHECK(baseline.time_per_batch >= oracle.time_per_batch * (1 - 1e-12));
    } else {
      CHECK(baseline.smallest_memory_need >= oracle.smallest_memory_need * (1 - 1e-12));
    }
    // With one stage there is one partition: uniform is the oracle.
    const plan one = uniform(p).pp(1).run();
    const plan oracle_one = brute_force(p).pp(1).run();
    REQUIRE(one.feasible == oracle_one.feasible);
    if (one.feasible) {
      ++compared;
      CHECK(one.time_per_batch.value() == Approx(oracle_one.time_per_batch.value()).epsilon(1e-12));
    } else {
      CHECK(one.smallest_memory_need.value() ==
            Approx(oracle_one.smallest_memory_need.value()).epsilon(1e-12));
    }
  }
  CHECK(compared > 50);
}

TEST_CASE("uniform splits blocks evenly, embedding first and head last", "[place]") {
  placement_problem<> p;
  cost_table t;
  for (std::size_t v = 0; v < 8; ++v) {  // embedding, 6 blocks, head
    t.nodes.push_back({"n", seconds{1.0}, seconds{2.0}, seconds{0.0}, bytes{1.0}, bytes{1.0}, true});
    if (v > 0) t.edges.push_back({v - 1, v, bytes{1.0}});
  }
  p.tables.push_back(t);
  p.devices = 6;
  p.microbatches = 6;
  p.memory_per_device = bytes{1000.0};
  const plan got = uniform(p).tp(1).pp(3).dp(2).run();
  REQUIRE(got.feasible);
  REQUIRE(got.stages.size() == 3);
  CHECK(got.stages[0].nodes == std::vector<std::size_t>{0, 1, 2});
  CHECK(got.stages[1].nodes == std::vector<std::size_t>{3, 4});
  CHECK(got.stages[2].nodes == std::vector<std::size_t>{5, 6, 7});
  // The chain DP can only do as well or better.
  CHECK(chain_dp(p).tp(1).pp(3).dp(2).run().time_per_batch <= got.time_per_batch);
  CHECK_THROWS_WITH(uniform(p).pp(4).run(), Catch::Contains("evenly"));
  CHECK(uniform(p).pinned(0, 0).pp(4).dp(1).run().stages.size() == 4);  // 8 nodes, no pinned ends
}
