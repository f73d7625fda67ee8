// Tests of phaze/place/rank_assignment.hpp on seeded random heterogeneous clusters with asymmetric measured
// device matrices: exact_ranks equals brute force over every permutation (the oracle), anneal_ranks reaches
// the exact optimum, is reproducible, is never worse than the identity and keeps to its iteration bound on a
// 64-device cluster; bad calls are input_errors.
#include "phaze/place/rank_assignment.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/presets.hpp"
#include "phaze/hw/presets.hpp"

#include "../support/rank_costs.hpp"

using namespace phaze;
using namespace phaze::literals;

namespace {
const hw::device a100 = *hw::find_preset("a100-80gb");
const hw::device v100 = *hw::find_preset("v100-16gb");
const hw::device h100 = *hw::find_preset("h100-sxm");

using test::draws;
using test::route_cost;
using test::speed_cost;

/// `n` devices of two or three types (each type a group in nodes of 1, 2 or 4), with an asymmetric
/// measured matrix between every pair of devices.
cluster::cluster random_cluster(draws& d, int n) {
  const hw::device types[] = {a100, v100, h100};
  const int kinds = 2 + d.below(2);
  std::vector<cluster::device_group> groups;
  int left = n;
  for (int g = 0; g < kinds && left > 0; ++g) {
    const int count = g + 1 == kinds ? left : 1 + d.below(left - (kinds - g - 1));
    const int per_node = 1 << d.below(3);
    groups.push_back({types[g], count, {per_node, d.link(), 1, d.link()}});
    left -= count;
  }
  cluster::link_matrix m;
  m.endpoints = cluster::link_matrix::between::devices;
  m.size = n;
  for (int i = 0; i < n * n; ++i) m.entries.push_back(d.link());
  return cluster::cluster{groups, {}, m};
}

/// A shape {tp, pp, dp} with 2 to n ranks.
train::parallelism random_shape(draws& d, int n) {
  std::vector<train::parallelism> shapes;
  for (int tp = 1; tp <= n; ++tp)
    for (int pp = 1; tp * pp <= n; ++pp)
      for (int dp = 1; tp * pp * dp <= n; ++dp)
        if (tp * pp * dp >= 2) shapes.push_back({tp, pp, dp});
  return shapes[static_cast<std::size_t>(d.below(static_cast<int>(shapes.size())))];
}

/// The oracle: every permutation of the devices, the first cheapest.
template <class Cost>
place::rank_assignment brute_force_ranks(const cluster::cluster& c, const Cost& cost) {
  std::vector<int> order(static_cast<std::size_t>(c.devices()));
  std::iota(order.begin(), order.end(), 0);
  place::rank_assignment best;
  do {
    const double x = cost(c.with_order(order));
    ++best.evaluated;
    if (x < best.cost) {
      best.cost = x;
      best.order = order;
    }
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

/// The 50 small clusters: 4 to 7 devices, and every fifth one 8 (40320 permutations for the oracle).
struct instance {
  cluster::cluster c;
  train::parallelism shape;
  bool with_speed;
};
std::vector<instance> small_instances() {
  draws d(2024);
  std::vector<instance> out;
  for (int i = 0; i < 50; ++i) {
    const int n = i % 5 == 4 ? 8 : 4 + d.below(4);
    cluster::cluster c = random_cluster(d, n);
    const train::parallelism shape = random_shape(d, n);
    out.push_back({std::move(c), shape, i % 2 == 1});
  }
  return out;
}

/// Anneal iterations on the small clusters: enough for every one of the 50 to reach the optimum.
constexpr std::int64_t small_iterations = 6000;

template <class F>
auto with_cost(const instance& x, F&& f) {
  return x.with_speed ? f(speed_cost{x.shape}) : f(route_cost{x.shape});
}
}  // namespace

TEST_CASE("exact_ranks equals brute force over every permutation", "[rank_assignment]") {
  std::int64_t reduced = 0;
  std::int64_t all = 0;
  for (const auto& x : small_instances()) {
    with_cost(x, [&](auto cost) {
      const auto exact = place::exact_ranks(x.c, x.shape, cost).run();
      const auto oracle = brute_force_ranks(x.c, cost);
      CAPTURE(x.c.devices(), x.shape.tp, x.shape.pp, x.shape.dp, x.with_speed);
      CHECK(exact.exact);
      CHECK(exact.cost == oracle.cost);
      CHECK(cost(x.c.with_order(exact.order)) == exact.cost);
      // The rotations of the tensor-parallel groups and the replicas: one order in tp * dp.
      CHECK(exact.evaluated * x.shape.tp * x.shape.dp == oracle.evaluated);
      reduced += exact.evaluated;
      all += oracle.evaluated;
      return 0;
    });
  }
  CHECK(reduced < all);
}

TEST_CASE("exact_ranks orders nodes, not devices, without a device matrix", "[rank_assignment]") {
  // Four nodes of two devices (A100, A100, V100, V100) and an asymmetric node matrix: 8! / 2^4 = 2520
  // sequences of nodes instead of 40320 orders of devices, fewer again after the rotations.
  draws d(8);
  cluster::link_matrix m;
  m.size = 4;
  for (int i = 0; i < 16; ++i) m.entries.push_back(d.link());
  const cluster::node_spec two{2, {200_GBps, 2_us}, 2, {25_GBps, 5_us}};
  const cluster::cluster c{{{a100, 4, two}, {v100, 4, two}}, {}, m};
  for (const train::parallelism shape :
       {train::parallelism{2, 2, 2}, train::parallelism{1, 4, 2}, train::parallelism{2, 3, 1}}) {
    CAPTURE(shape.tp, shape.pp, shape.dp);
    const speed_cost cost{shape};
    const auto exact = place::exact_ranks(c, shape, cost).run();
    const auto oracle = brute_force_ranks(c, cost);
    CHECK(exact.cost == oracle.cost);
    CHECK(exact.evaluated <= 2520);
    CHECK(exact.evaluated * shape.tp * shape.dp >= 2520);
  }
  // The same devices with a device matrix: 12 of them are beyond the default limit (12! orders).
  cluster::link_matrix devices;
  devices.endpoints = cluster::link_matrix::between::devices;
  devices.size = 12;
  devices.entries.assign(144, {20_GBps, 5_us});
  const cluster::cluster measured{{{a100, 8, two}, {v100, 4, two}}, {}, devices};
  CHECK_THROWS_WITH(place::exact_ranks(measured, {4, 3, 1}, speed_cost{{4, 3, 1}}).run(),
                    Catch::Contains("more than 3628800 orders") && Catch::Contains("anneal_ranks"));
  // Without a matrix, 12 devices in 6 nodes of 2 are 12! / 2^6 = 7484400 sequences: also beyond it, unless
  // the limit is raised.
  const cluster::cluster plain{{{a100, 8, two}, {v100, 4, two}}};
  CHECK_THROWS_AS(place::exact_ranks(plain, {4, 3, 1}, speed_cost{{4, 3, 1}}).run(), input_error);
  const cluster::cluster nodes_of_four{{{a100, 8, {4, {200_GBps, 2_us}, 4, {25_GBps, 5_us}}},
                                        {v100, 4, {4, {200_GBps, 2_us}, 4, {25_GBps, 5_us}}}}};
  const auto fours =
      place::exact_ranks(nodes_of_four, {4, 3, 1}, speed_cost{{4, 3, 1}}).max_arrangements(34650).run();
  CHECK(fours.evaluated < 34650);  // 12! / (4!)^3 sequences of nodes, then the rotations
  CHECK(fours.cost <= speed_cost{{4, 3, 1}}(nodes_of_four));
}

TEST_CASE("anneal_ranks reaches the exact optimum on every small cluster", "[rank_assignment]") {
  int reached = 0;
  int instances = 0;
  for (const auto& x : small_instances()) {
    with_cost(x, [&](auto cost) {
      const auto exact = place::exact_ranks(x.c, x.shape, cost).run();
      const auto annealed = place::anneal_ranks(x.c, x.shape, cost)
                                .seed(static_cast<std::uint64_t>(instances))
                                .iterations(small_iterations)
                                .run();
      CAPTURE(instances, x.c.devices(), x.shape.tp, x.shape.pp, x.shape.dp, x.with_speed);
      CHECK(annealed.cost == exact.cost);
      CHECK(!annealed.exact);
      CHECK(!annealed.stopped_by_time_limit);
      CHECK(annealed.evaluated <= small_iterations + 2);
      CHECK(cost(x.c.with_order(annealed.order)) == annealed.cost);
      reached += annealed.cost == exact.cost ? 1 : 0;
      ++instances;
      return 0;
    });
  }
  CHECK(reached == 50);
}

TEST_CASE("anneal_ranks is reproducible and never worse than the identity", "[rank_assignment]") {
  const auto instances = small_instances();
  for (std::size_t i = 0; i < 10; ++i) {
    const auto& x = instances[i];
    with_cost(x, [&](auto cost) {
      const auto first = place::anneal_ranks(x.c, x.shape, cost).seed(7).iterations(500).run();
      const auto again = place::anneal_ranks(x.c, x.shape, cost).seed(7).iterations(500).run();
      CHECK(first.order == again.order);
      CHECK(first.cost == again.cost);
      CHECK(first.evaluated == again.evaluated);
      CHECK(first.cost <= cost(x.c));
      // No iterations: the better of the identity and the greedy start.
      const auto none = place::anneal_ranks(x.c, x.shape, cost).iterations(0).run();
      CHECK(none.evaluated <= 2);
      CHECK(none.cost <= cost(x.c));
      return 0;
    });
  }
}

TEST_CASE("anneal_ranks on 64 devices keeps to its iterations and beats the identity", "[rank_assignment]") {
  draws d(64);
  std::vector<cluster::device_group> groups;
  for (int i = 0; i < 4; ++i) {
    groups.push_back({a100, 8, {8, {300_GBps, 3_us}, 8, {25_GBps, 5_us}}});
    groups.push_back({h100, 8, {8, {450_GBps, 2_us}, 8, {50_GBps, 5_us}}});
  }
  cluster::link_matrix m;
  m.endpoints = cluster::link_matrix::between::devices;
  m.size = 64;
  for (int i = 0; i < 64 * 64; ++i) m.entries.push_back(d.link());
  const cluster::cluster c{groups, {}, m};
  const train::parallelism shape{4, 4, 4};
  const speed_cost cost{shape};
  const auto r = place::anneal_ranks(c, shape, cost).seed(3).iterations(2000).run();
  CHECK(r.evaluated <= 2002);
  CHECK(!r.stopped_by_time_limit);
  CHECK(r.cost < cost(c));
  CHECK(cost(c.with_order(r.order)) == r.cost);
  // A time limit of 0 stops at the first check and says so; the result is still no worse than the identity.
  const auto stopped = place::anneal_ranks(c, shape, cost).iterations(100000).time_limit(seconds{0.0}).run();
  CHECK(stopped.stopped_by_time_limit);
  CHECK(stopped.evaluated < 200);
  CHECK(stopped.cost <= cost(c));
}

TEST_CASE("rank searches refuse shapes that do not fit and bad settings", "[rank_assignment]") {
  draws d(1);
  const auto c = random_cluster(d, 4);
  const route_cost cost{{2, 2, 1}};
  CHECK_THROWS_WITH(place::exact_ranks(c, {2, 2, 2}, cost).run(),
                    Catch::Contains("8 ranks but the cluster has 4 devices"));
  CHECK_THROWS_WITH(place::anneal_ranks(c, {0, 2, 1}, cost).run(), Catch::Contains("at least 1"));
  CHECK_THROWS_WITH(place::anneal_ranks(c, {2, 2, 1}, cost).cooling(1.5).run(), Catch::Contains("cooling"));
  CHECK_THROWS_WITH(place::anneal_ranks(c, {2, 2, 1}, cost).iterations(-1).run(),
                    Catch::Contains("iterations"));
}

TEST_CASE("annealing restricted to node blocks: launchable orders, the best of them on small clusters",
          "[place][rank_assignment]") {
  // Nodes of 4 and 2 devices with a measured matrix between devices: 4! x 2! x 2 = 96 launchable orders.
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 5; ++trial) {
    const std::vector<cluster::device_group> groups{
        {*hw::find_preset("v100-16gb"), 4, cluster::node_of("v100-16gb")},
        {*hw::find_preset("t4"), 2,
         cluster::node_spec{
             2, {bytes_per_second{6.25e9}, seconds{5e-6}}, 1, {bytes_per_second{6.25e9}, seconds{1e-5}}}}};
    cluster::link_matrix m;
    m.endpoints = cluster::link_matrix::between::devices;
    m.size = 6;
    for (int i = 0; i < 36; ++i) {
      const double u = static_cast<double>(rng() >> 11U) / 9007199254740992.0;
      m.entries.push_back({bytes_per_second{(0.5 + 20.0 * u) * 1e9}, seconds{1e-5}});
    }
    const cluster::cluster c{groups, {}, m};
    const train::parallelism shape{1, 3, 2};
    const test::route_cost cost{shape};
    // Brute force over every order whose nodes' ranks are consecutive.
    std::vector<int> perm(6);
    std::iota(perm.begin(), perm.end(), 0);
    double best = std::numeric_limits<double>::infinity();
    int launchable = 0;
    do {
      const cluster::cluster o = c.with_order(perm);
      if (!place::detail::ranks::node_blocks(o, 6)) continue;
      ++launchable;
      best = std::min(best, cost(o));
    } while (std::next_permutation(perm.begin(), perm.end()));
    CHECK(launchable == 96);
    const auto found = place::anneal_ranks(c, shape, cost).seed(3).iterations(4000).node_blocks(true).run();
    INFO("trial " << trial);
    CHECK(place::detail::ranks::node_blocks(c.with_order(found.order), 6));
    CHECK(found.cost <= cost(c));
    CHECK(found.cost == Approx(best).epsilon(1e-12));
  }
}
