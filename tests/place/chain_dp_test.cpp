#include "phaze/place/chain_dp.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/place/brute_force.hpp"
#include "phaze/place/objective.hpp"

using namespace phaze;
using namespace phaze::literals;
using namespace phaze::place;

namespace {

/// A random chain problem with integer-valued times and sizes (so sums are exact in doubles and the
/// memory limit is met or missed the same way by every placer).
placement_problem<> random_chain(std::mt19937& rng, std::size_t max_nodes) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  placement_problem<> p;
  const auto n = static_cast<std::size_t>(pick(1, static_cast<int>(max_nodes)));
  const int tps[] = {1, 2, 4};
  const int widths = pick(1, 3);
  for (int w = 0; w < widths; ++w) {
    cost_table t;
    t.tp = tps[w];
    for (std::size_t v = 0; v < n; ++v) {
      cost_node node;
      node.forward = seconds{static_cast<double>(pick(1, 20) * 4 / t.tp)};
      node.backward = seconds{static_cast<double>(pick(1, 40))};
      node.recompute = seconds{static_cast<double>(pick(0, 10))};
      node.parameters = bytes{static_cast<double>(pick(0, 12))};
      node.activations = bytes{static_cast<double>(pick(0, 6))};
      t.nodes.push_back(node);
      if (v > 0) t.edges.push_back({v - 1, v, bytes{static_cast<double>(pick(0, 8))}});
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

/// The plan's reported time is the objective recomputed from its stages.
void check_consistent(const placement_problem<>& p, const plan& got) {
  if (!got.feasible) return;
  const cost_table* table = nullptr;
  for (const auto& t : p.tables) {
    if (t.tp == got.tp) table = &t;
  }
  REQUIRE(table != nullptr);
  std::vector<std::vector<std::size_t>> stages;
  for (const auto& st : got.stages) stages.push_back(st.nodes);
  const plan again = evaluate(p, *table, got.dp, stages);
  CHECK(again.feasible);
  CHECK(again.time_per_batch.value() == Approx(got.time_per_batch.value()).epsilon(1e-12));
  CHECK(got.devices_used() <= p.devices);
}

}  // namespace

TEST_CASE("chain_dp equals the brute-force oracle on random small chains", "[place]") {
  std::mt19937 rng(20261122);
  int feasible = 0;
  int infeasible = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    const auto p = random_chain(rng, 8);
    const plan oracle = brute_force(p).run();
    const plan got = chain_dp(p).run();
    INFO("trial " << trial);
    REQUIRE(got.feasible == oracle.feasible);
    if (oracle.feasible) {
      ++feasible;
      CHECK(got.time_per_batch.value() == Approx(oracle.time_per_batch.value()).epsilon(1e-12));
      check_consistent(p, got);
    } else {
      ++infeasible;
      CHECK(got.smallest_memory_need.value() == Approx(oracle.smallest_memory_need.value()).epsilon(1e-12));
      CHECK(got.smallest_memory_need > p.memory_per_device);
    }
  }
  CHECK(feasible > 300);
  CHECK(infeasible > 50);
}

TEST_CASE("chain_dp honours fixed choices like the oracle", "[place]") {
  std::mt19937 rng(7);
  int compared = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const auto p = random_chain(rng, 7);
    const int pp = std::uniform_int_distribution<int>(1, 3)(rng);
    try {
      const plan oracle = brute_force(p).tp(1).pp(pp).run();
      const plan got = chain_dp(p).tp(1).pp(pp).run();
      REQUIRE(got.feasible == oracle.feasible);
      if (got.feasible) {
        ++compared;
        CHECK(got.pp == pp);
        CHECK(got.tp == 1);
        CHECK(got.time_per_batch.value() == Approx(oracle.time_per_batch.value()).epsilon(1e-12));
      }
    } catch (const input_error&) {
      CHECK_THROWS_AS(chain_dp(p).tp(1).pp(pp).run(), input_error);  // both reject it
    }
  }
  CHECK(compared > 40);
}

TEST_CASE("chain_dp on a hand-computed chain", "[place]") {
  // Four equal nodes, two devices, four microbatches, no communication cost worth counting:
  // pp 2 dp 1: (4 + 1) * 2 nodes * 3 s = 30 s; pp 1 dp 2: m = 2, (2 + 0) * 12 s + all-reduce 4 B / 1 B/s
  // * 2 * 1/2 = 24 + 4 = 28 s; so dp 2 wins unless memory forbids it.
  placement_problem<> p;
  cost_table t;
  for (std::size_t v = 0; v < 4; ++v) {
    t.nodes.push_back({"block", 1_s, 2_s, 0_s, bytes{1.0}, bytes{1.0}, true});
    if (v > 0) t.edges.push_back({v - 1, v, bytes{0.0}});
  }
  p.tables.push_back(t);
  p.devices = 2;
  p.microbatches = 4;
  p.memory_per_device = bytes{100.0};
  p.weight_bytes_per_parameter = 1.0;
  p.state_bytes_per_parameter = 1.0;
  p.p2p_bandwidth = bytes_per_second{1.0};
  p.dp_bandwidth = bytes_per_second{1.0};
  const plan a = chain_dp(p).run();
  REQUIRE(a.feasible);
  CHECK(a.dp == 2);
  CHECK(a.pp == 1);
  CHECK(a.time_per_batch.value() == Approx(28.0));
  // 1F1B, pp 1, m 2: memory = 4 params + 4 activations * 1 in flight = 8 B. Below that only pp 2 helps:
  // stage 0 holds 2 in flight: 2 + 2 * 2 = 6 B; stage 1: 2 + 2 * 1 = 4 B.
  const plan b = chain_dp(p).memory(bytes{7.0}).run();
  REQUIRE(b.feasible);
  CHECK(b.pp == 2);
  CHECK(b.time_per_batch.value() == Approx(30.0));
  CHECK(b.peak_memory.value() == Approx(6.0));
  const plan c = chain_dp(p).memory(bytes{5.0}).run();
  CHECK_FALSE(c.feasible);
  CHECK(c.smallest_memory_need.value() == Approx(6.0));
}

TEST_CASE("chain_dp rejects what it cannot place", "[place]") {
  placement_problem<> p;
  cost_table t;
  t.nodes.resize(3);
  t.edges = {{0, 1, bytes{1.0}}, {0, 2, bytes{1.0}}};
  p.tables.push_back(t);
  p.memory_per_device = bytes{1.0};
  CHECK_THROWS_WITH(chain_dp(p).run(), Catch::Contains("not a chain"));
  p.tables[0].edges = {{0, 1, bytes{1.0}}, {1, 2, bytes{1.0}}};
  CHECK_THROWS_WITH(chain_dp(p).tp(2).run(), Catch::Contains("no (tp, pp, dp)"));
  CHECK_THROWS_WITH(chain_dp(p).devices(0).run(), Catch::Contains("devices"));
}

namespace {
/// A policy variant: data-parallel all-reduce fully overlapped with backward (costs nothing).
struct overlapped_allreduce_policy : pipeline_policy {
  static constexpr bool allreduce_of_largest_stage = false;
  static double batch_time_s(const placement_settings&, double largest_stage_cost, double,
                             const stage_context&) {
    return largest_stage_cost;
  }
};

/// A table type of the caller's own, with extra fields: placers read only what CostTable names.
struct profiled_node {
  seconds forward, backward, recompute;
  bytes parameters, activations;
  int profiler_id = 0;
};
struct profiled_table {
  int tp = 1;
  std::vector<profiled_node> nodes;
  std::vector<cost_edge> edges;
};
static_assert(CostTable<profiled_table>);
static_assert(!CostTable<int>);
}  // namespace

TEST_CASE("placers are templates over the table type and the policy", "[place]") {
  std::mt19937 rng(99);
  int compared = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const auto p = random_chain(rng, 7);
    placement_problem<profiled_table> q;
    static_cast<placement_settings&>(q) = p;
    for (const auto& t : p.tables) {
      profiled_table u;
      u.tp = t.tp;
      for (const auto& n : t.nodes)
        u.nodes.push_back({n.forward, n.backward, n.recompute, n.parameters, n.activations, 7});
      u.edges = t.edges;
      q.tables.push_back(u);
    }
    INFO("trial " << trial);
    const plan a = chain_dp<profiled_table, overlapped_allreduce_policy>(q).run();
    const plan b = brute_force<profiled_table, overlapped_allreduce_policy>(q).run();
    REQUIRE(a.feasible == b.feasible);
    if (!a.feasible) continue;
    ++compared;
    CHECK(a.time_per_batch.value() == Approx(b.time_per_batch.value()).epsilon(1e-12));
    // Without the all-reduce term a plan is never slower than with it.
    const plan with_allreduce = chain_dp(p).run();
    if (with_allreduce.feasible) CHECK(a.time_per_batch <= with_allreduce.time_per_batch * (1 + 1e-12));
  }
  CHECK(compared > 50);
}

TEST_CASE("chain_dp with the bottleneck policy equals the oracle and is never above the default", "[place]") {
  std::mt19937 rng(2024);
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto p = random_chain(rng, 8);
    INFO("trial " << trial);
    const plan a = chain_dp<cost_table, bottleneck_policy>(p).run();
    const plan b = brute_force<cost_table, bottleneck_policy>(p).run();
    REQUIRE(a.feasible == b.feasible);
    if (!a.feasible) continue;
    ++compared;
    CHECK(a.time_per_batch.value() == Approx(b.time_per_batch.value()).epsilon(1e-12));
    CHECK(a.time_per_batch <= chain_dp(p).run().time_per_batch * (1 + 1e-12));
  }
  CHECK(compared > 100);
}
