#include "phaze/place/downset_dp.hpp"

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

/// A random problem on a random DAG (or a chain) with integer-valued times and sizes, so sums are exact.
placement_problem<> random_problem(std::mt19937& rng, std::size_t max_nodes, bool chain) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  placement_problem<> p;
  const auto n = static_cast<std::size_t>(pick(1, static_cast<int>(max_nodes)));
  const int tps[] = {1, 2, 4};
  const int widths = pick(1, 3);
  const int density = pick(25, 70);  // percent chance of an edge between two nodes
  for (int w = 0; w < widths; ++w) {
    cost_table t;
    t.tp = tps[w];
    for (std::size_t v = 0; v < n; ++v) {
      cost_node node;
      node.forward = seconds{static_cast<double>(pick(1, 20))};
      node.backward = seconds{static_cast<double>(pick(1, 40))};
      node.recompute = seconds{static_cast<double>(pick(0, 10))};
      node.parameters = bytes{static_cast<double>(pick(0, 12))};
      node.activations = bytes{static_cast<double>(pick(0, 6))};
      t.nodes.push_back(node);
    }
    for (std::size_t to = 1; to < n; ++to) {
      for (std::size_t from = 0; from < to; ++from) {
        const bool edge = chain ? from + 1 == to : pick(1, 100) <= density;
        if (edge) t.edges.push_back({from, to, bytes{static_cast<double>(pick(0, 8))}});
      }
    }
    p.tables.push_back(t);
  }
  p.devices = pick(1, 16);
  const std::int64_t batches[] = {1, 2, 3, 4, 6, 8, 12, 16};
  p.microbatches = batches[pick(0, 7)];
  p.memory_per_device = bytes{static_cast<double>(pick(10, 250))};
  p.weight_bytes_per_parameter = 2.0;
  p.state_bytes_per_parameter = 8.0;
  p.p2p_bandwidth = bytes_per_second{pick(0, 1) == 0 ? 1.0 : 0.5};
  p.dp_bandwidth = bytes_per_second{pick(0, 1) == 0 ? 2.0 : 0.25};
  p.schedule = pick(0, 1) == 0 ? train::pipeline_schedule::one_f_one_b : train::pipeline_schedule::gpipe;
  p.recompute = pick(0, 1) == 0;
  return p;
}

void check_same(const placement_problem<>& p, const plan& got, const plan& expected) {
  REQUIRE(got.feasible == expected.feasible);
  if (!expected.feasible) {
    CHECK(got.smallest_memory_need.value() == Approx(expected.smallest_memory_need.value()).epsilon(1e-12));
    return;
  }
  CHECK(got.time_per_batch.value() == Approx(expected.time_per_batch.value()).epsilon(1e-12));
  // The reported time is the objective recomputed from the plan's own stages.
  for (const auto& t : p.tables) {
    if (t.tp != got.tp) continue;
    std::vector<std::vector<std::size_t>> stages;
    for (const auto& st : got.stages) stages.push_back(st.nodes);
    const plan again = evaluate(p, t, got.dp, stages);
    CHECK(again.feasible);
    CHECK(again.time_per_batch.value() == Approx(got.time_per_batch.value()).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("downset_dp equals the brute-force oracle on random small DAGs", "[place]") {
  std::mt19937 rng(5);
  int feasible = 0;
  int infeasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto p = random_problem(rng, 7, false);
    INFO("trial " << trial);
    const plan oracle = brute_force(p).run();
    check_same(p, downset_dp(p).run(), oracle);
    (oracle.feasible ? feasible : infeasible) += 1;
  }
  CHECK(feasible > 100);
  CHECK(infeasible > 20);
}

TEST_CASE("downset_dp equals brute force on small chains and chain_dp on chains up to 40 nodes", "[place]") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const auto p = random_problem(rng, 8, true);
    INFO("small chain " << trial);
    check_same(p, downset_dp(p).run(), brute_force(p).run());
  }
  for (int trial = 0; trial < 150; ++trial) {
    auto p = random_problem(rng, 40, true);
    p.devices = std::uniform_int_distribution<int>(1, 64)(rng);
    p.memory_per_device = bytes{static_cast<double>(std::uniform_int_distribution<int>(20, 600)(rng))};
    INFO("chain " << trial);
    check_same(p, downset_dp(p).run(), chain_dp(p).run());
  }
}

TEST_CASE("downset_dp places a diamond by hand", "[place]") {
  // 0 -> {1, 2} -> 3, unit work except node 3. Two stages: {0, 1, 2} | {3} or {0} | {1, 2, 3} or
  // {0, 1} | {2, 3} ...; every stage must be a difference of downsets, never {1} before {0}.
  placement_problem<> p;
  cost_table t;
  for (int v = 0; v < 4; ++v)
    t.nodes.push_back({"n", seconds{1.0}, seconds{1.0}, seconds{0.0}, bytes{0.0}, bytes{0.0}, true});
  t.nodes[3].backward = seconds{5.0};
  t.edges = {{0, 1, bytes{0.0}}, {0, 2, bytes{0.0}}, {1, 3, bytes{0.0}}, {2, 3, bytes{0.0}}};
  p.tables.push_back(t);
  p.devices = 2;
  p.microbatches = 1;
  p.memory_per_device = bytes{1.0};
  const plan got = downset_dp(p).pp(2).run();
  REQUIRE(got.feasible);
  // Loads 2 2 2 6: only {0, 1, 2} | {3} reaches max(6, 6) = 6; pipeline (1 + 2 - 1) * 6 = 12 s.
  CHECK(got.time_per_batch.value() == Approx(12.0));
  REQUIRE(got.stages.size() == 2);
  CHECK(got.stages[0].nodes == std::vector<std::size_t>{0, 1, 2});
  CHECK(got.stages[1].nodes == std::vector<std::size_t>{3});
}

TEST_CASE("downset_dp refuses DAGs with too many downsets", "[place]") {
  placement_problem<> p;
  cost_table t;
  t.nodes.resize(20);  // no edges: every subset is a downset
  p.tables.push_back(t);
  p.memory_per_device = bytes{1.0};
  CHECK_THROWS_WITH(downset_dp(p).run(), Catch::Contains("downsets"));
}

TEST_CASE("downset_dp with the bottleneck policy equals the oracle on random DAGs", "[place]") {
  std::mt19937 rng(77);
  for (int trial = 0; trial < 150; ++trial) {
    const auto p = random_problem(rng, 6, false);
    INFO("trial " << trial);
    const plan a = downset_dp<cost_table, bottleneck_policy>(p).run();
    const plan b = brute_force<cost_table, bottleneck_policy>(p).run();
    REQUIRE(a.feasible == b.feasible);
    if (a.feasible) CHECK(a.time_per_batch.value() == Approx(b.time_per_batch.value()).epsilon(1e-12));
  }
}
