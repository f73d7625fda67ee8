// Tests of the rank order of phaze/cluster/cluster.hpp: an explicit identity order answers exactly as no
// order (the closed forms against the hop-by-hop path); a permuted cluster answers as the same cluster listed
// physically in that order (a second oracle: groups and matrices re-listed); rank queries follow the order;
// equality includes it; bad orders are input_errors that say what is wrong.
// Route trackers (phaze/cluster/route_tracker.hpp) answer as the cluster after every exchange of two ranks,
// and the rank annealing told of its exchanges finds the same order at the same cost as without.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/presets.hpp"
#include "phaze/cluster/route_tracker.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/place/plan_ranks.hpp"
#include "phaze/place/rank_assignment.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/train/step.hpp"

#include "../support/rank_costs.hpp"

using namespace phaze;
using namespace phaze::literals;

namespace {
constexpr cluster::node_spec dgx8{8, {300_GBps, 5_us}, 8, {25_GBps, 10_us}};
constexpr cluster::node_spec fast_shared_nic{4, {150_GBps, 5_us}, 1, {12.5_GBps, 10_us}};
constexpr cluster::node_spec pairs_node{2, {100_GBps, 2_us}, 2, {10_GBps, 8_us}};
const hw::device a100_80 = *hw::find_preset("a100-80gb");
const hw::device v100 = *hw::find_preset("v100-16gb");
const hw::device h100 = *hw::find_preset("h100-sxm");

using test::draws;

cluster::link_matrix random_matrix(draws& d, cluster::link_matrix::between endpoints, int size) {
  cluster::link_matrix m;
  m.endpoints = endpoints;
  m.size = size;
  for (int i = 0; i < size * size; ++i) m.entries.push_back(d.link());
  return m;
}

/// Every ring shape and pair distance over every prefix of used ranks, with what each answered (or that it
/// threw): two clusters that answer alike give equal lists.
struct answers {
  std::vector<cluster::route> routes;
  std::vector<int> nodes;
  std::vector<std::size_t> groups;
  friend bool operator==(const answers&, const answers&) = default;
};

answers ask_everything(const cluster::cluster& c, bool with_nodes = true) {
  answers out;
  const int n = c.devices();
  for (int used = 2; used <= n; ++used) {
    for (int size = 1; size <= used; ++size)
      for (int stride = 1; size * stride <= used; ++stride)
        out.routes.push_back(c.ring({size, stride}, used));
    for (int distance = 1; distance < used; ++distance) out.routes.push_back(c.pairs(distance, used));
  }
  for (int r = 0; r < n; ++r) {
    if (with_nodes) out.nodes.push_back(c.node_at(r));
    out.groups.push_back(c.group_index(r));
  }
  return out;
}

/// A heterogeneous cluster: two or three groups of random sizes in nodes of 1 to 4 devices (a group's last
/// node may be partly filled), links drawn at random.
cluster::cluster random_cluster(draws& d, int devices) {
  const hw::device types[] = {a100_80, v100, h100};
  const int groups = 2 + d.below(2);
  std::vector<cluster::device_group> out;
  int left = devices;
  for (int g = 0; g < groups && left > 0; ++g) {
    const int count = g + 1 == groups ? left : 1 + d.below(std::max(1, left - (groups - g - 1)));
    cluster::node_spec node{1 + d.below(4), d.link(), 1 + d.below(2), d.link()};
    out.push_back({types[g], std::min(count, left), node});
    left -= std::min(count, left);
  }
  return cluster::cluster{out};
}

/// Every (size, stride) ring and every pairs distance over `used` ranks of `c` that the cluster accepts.
void check_every_route(cluster::route_tracker& tracker, const cluster::cluster& c, int used) {
  for (const int size : {1, 2, 3, 4, 5, 6, 8, 12, 16}) {
    for (const int stride : {1, 2, 3, 5, 8}) {
      if (size * stride > used) continue;
      INFO("ring of " << size << ", stride " << stride << ", over " << used);
      REQUIRE(tracker.ring({size, stride}, used) == c.ring({size, stride}, used));
    }
  }
  for (const int distance : {1, 3, 7, 8, 16}) {
    if (distance >= used) continue;
    INFO("pairs " << distance << " apart over " << used);
    REQUIRE(tracker.pairs(distance, used) == c.pairs(distance, used));
  }
}
}  // namespace

TEST_CASE("an explicit identity order answers exactly as no order", "[rank_order]") {
  draws d(11);
  std::vector<cluster::cluster> clusters{
      cluster::homogeneous(a100_80, 32, dgx8),
      cluster::homogeneous(a100_80, 12, fast_shared_nic),
      cluster::cluster{{{a100_80, 12, dgx8}, {v100, 8, fast_shared_nic}}},
      cluster::cluster{{{a100_80, 16, dgx8}}, {}, random_matrix(d, cluster::link_matrix::between::nodes, 2)},
      cluster::cluster{{{a100_80, 6, pairs_node}, {h100, 4, dgx8}},
                       {},
                       random_matrix(d, cluster::link_matrix::between::devices, 10)},
  };
  for (int i = 0; i < 5; ++i) clusters.push_back(random_cluster(d, 4 + d.below(12)));
  for (const auto& c : clusters) {
    CAPTURE(c.devices(), c.groups().size());
    std::vector<int> identity(static_cast<std::size_t>(c.devices()));
    std::iota(identity.begin(), identity.end(), 0);
    const cluster::cluster ordered = c.with_order(identity);
    CHECK(ordered.order() == identity);
    CHECK(c.order().empty());
    CHECK(ordered == c);
    CHECK(ask_everything(ordered) == ask_everything(c));
  }
}

TEST_CASE("several groups: the per-group closed forms equal the hop-by-hop path", "[rank_order]") {
  // ring() and pairs() on several groups without an order or a matrix take closed forms per group and
  // per node (cluster::grouped_ring, grouped_pairs); an explicit identity order takes the hop-by-hop path.
  // Up to four groups of up to 24 devices in nodes of 1 to 8 (last nodes partly filled), 1 to 4 interfaces
  // per node, every shape, distance and prefix of used ranks.
  draws d(29);
  const hw::device types[] = {a100_80, v100, h100, *hw::find_preset("t4")};
  int clusters = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<cluster::device_group> groups;
    const int count = 2 + d.below(3);
    for (int g = 0; g < count; ++g) {
      const int per_node = 1 + d.below(8);
      // Node sizes the presets have: whole nodes most of the time, a partial last node otherwise.
      const int devices = d.below(3) == 0 ? 1 + d.below(3 * per_node) : per_node * (1 + d.below(3));
      groups.push_back({types[d.below(4)], devices, {per_node, d.link(), 1 + d.below(4), d.link()}});
    }
    const cluster::cluster c{groups};
    if (c.devices() > 40) continue;
    std::vector<int> identity(static_cast<std::size_t>(c.devices()));
    std::iota(identity.begin(), identity.end(), 0);
    CAPTURE(trial, c.devices(), c.groups().size());
    CHECK(ask_everything(c.with_order(identity)) == ask_everything(c));
    ++clusters;
  }
  CHECK(clusters >= 20);
  // Larger groups, where a group has interior nodes far from every position the closed forms look at:
  // every pair distance and prefix, and every ring shape over three prefixes.
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<cluster::device_group> groups;
    const int count = 2 + d.below(3);
    for (int g = 0; g < count; ++g) {
      const int per_node = 1 + d.below(8);
      groups.push_back({types[d.below(4)],
                        per_node * (2 + d.below(12)) - d.below(2) * d.below(per_node),
                        {per_node, d.link(), 1 + d.below(4), d.link()}});
    }
    const cluster::cluster c{groups};
    std::vector<int> identity(static_cast<std::size_t>(c.devices()));
    std::iota(identity.begin(), identity.end(), 0);
    const cluster::cluster hop_by_hop = c.with_order(identity);
    CAPTURE(trial, c.devices(), c.groups().size());
    const int n = c.devices();
    for (int used = 2; used <= n; ++used)
      for (int distance = 1; distance < used; ++distance)
        REQUIRE(c.pairs(distance, used) == hop_by_hop.pairs(distance, used));
    for (const int used : {n, n - 1, 2 + d.below(n - 1)}) {
      for (int size = 1; size <= used; ++size)
        for (int stride = 1; size * stride <= used; ++stride)
          REQUIRE(c.ring({size, stride}, used) == hop_by_hop.ring({size, stride}, used));
    }
  }
}

TEST_CASE("a permuted cluster answers as the cluster listed physically in that order", "[rank_order]") {
  draws d(5);
  SECTION("a device matrix: any order, re-listed as one group per device and the matrix re-indexed") {
    for (int trial = 0; trial < 20; ++trial) {
      const int n = 3 + d.below(8);
      cluster::cluster plain = random_cluster(d, n);
      const auto m = random_matrix(d, cluster::link_matrix::between::devices, n);
      const cluster::cluster measured{plain.groups(), {}, m};
      const std::vector<int> order = d.permutation(n);
      std::vector<cluster::device_group> listed;
      cluster::link_matrix relisted = m;
      for (int i = 0; i < n; ++i) {
        const auto& g = measured.groups()[measured.group_of_device(order[static_cast<std::size_t>(i)])];
        listed.push_back({g.device, 1, cluster::with_devices_per_node(g.node, 1)});
        for (int j = 0; j < n; ++j)
          relisted.entries[static_cast<std::size_t>(i * n + j)] =
              m.at(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
      }
      const cluster::cluster permuted = measured.with_order(order);
      const cluster::cluster oracle{listed, {}, relisted};
      CAPTURE(trial, n, order);
      // Nodes differ (one per device in the oracle); with a device matrix no route reads them.
      CHECK(ask_everything(permuted, false).routes == ask_everything(oracle, false).routes);
      for (int r = 0; r < n; ++r) CHECK(permuted.device_at(r) == oracle.device_at(r));
    }
  }
  SECTION(
      "nodes kept whole: nodes in any order, devices in any order inside them, node matrices re-indexed") {
    for (int trial = 0; trial < 20; ++trial) {
      const int n = 4 + d.below(13);
      const cluster::cluster plain = random_cluster(d, n);
      const bool with_matrix = trial % 2 == 1;
      const auto m = random_matrix(d, cluster::link_matrix::between::nodes, plain.nodes());
      const cluster::cluster c = with_matrix ? cluster::cluster{plain.groups(), {}, m} : plain;
      // The nodes' devices, then a node order, then each node's devices shuffled.
      std::vector<std::vector<int>> node_devices(static_cast<std::size_t>(c.nodes()));
      for (int dev = 0; dev < n; ++dev)
        node_devices[static_cast<std::size_t>(c.node_of_device(dev))].push_back(dev);
      const std::vector<int> node_order = d.permutation(c.nodes());
      std::vector<int> order;
      std::vector<cluster::device_group> listed;
      for (const int node : node_order) {
        auto devs = node_devices[static_cast<std::size_t>(node)];
        const auto shuffle = d.permutation(static_cast<int>(devs.size()));
        for (const int k : shuffle) order.push_back(devs[static_cast<std::size_t>(k)]);
        const auto& g = c.groups()[c.group_of_device(devs.front())];
        listed.push_back({g.device, static_cast<int>(devs.size()), g.node});
      }
      cluster::link_matrix relisted = m;
      const int nodes = c.nodes();
      for (int i = 0; i < nodes; ++i)
        for (int j = 0; j < nodes; ++j)
          relisted.entries[static_cast<std::size_t>(i * nodes + j)] =
              m.at(node_order[static_cast<std::size_t>(i)], node_order[static_cast<std::size_t>(j)]);
      const cluster::cluster permuted = c.with_order(order);
      const cluster::cluster oracle =
          with_matrix ? cluster::cluster{listed, {}, relisted} : cluster::cluster{listed};
      CAPTURE(trial, n, with_matrix, order);
      const answers got = ask_everything(permuted);
      const answers want = ask_everything(oracle);
      CHECK(got.routes == want.routes);
      for (int r = 0; r < n; ++r) {
        CHECK(permuted.device_at(r) == oracle.device_at(r));
        CHECK(node_order[static_cast<std::size_t>(want.nodes[static_cast<std::size_t>(r)])] ==
              got.nodes[static_cast<std::size_t>(r)]);
      }
    }
  }
  SECTION("whole nodes of a homogeneous cluster swapped: the closed forms still hold") {
    const auto c = cluster::homogeneous(a100_80, 64, dgx8);
    std::vector<int> order;
    for (int node = 7; node >= 0; --node)
      for (int i = 0; i < 8; ++i) order.push_back(node * 8 + (i + node) % 8);
    const auto reversed = c.with_order(order);
    for (int size = 1; size <= 64; size *= 2) {
      for (int stride = 1; size * stride <= 64; stride *= 2) {
        CAPTURE(size, stride);
        CHECK(reversed.ring({size, stride}, 64) == c.ring({size, stride}, 64));
      }
    }
    for (int distance = 1; distance < 64; distance *= 2)
      CHECK(reversed.pairs(distance, 64) == c.pairs(distance, 64));
  }
}

TEST_CASE("rank queries and ring hops follow the order", "[rank_order]") {
  const cluster::cluster c{{{a100_80, 4, pairs_node}, {v100, 4, fast_shared_nic}}};
  const auto reversed = c.with_order({7, 6, 5, 4, 3, 2, 1, 0});
  CHECK(reversed.device_of_rank(0) == 7);
  CHECK(reversed.device_at(0) == v100);
  CHECK(reversed.device_at(7) == a100_80);
  CHECK(reversed.group_index(0) == 1);
  CHECK(&reversed.group_at(5) == &reversed.groups()[0]);
  CHECK(reversed.node_at(0) == 2);  // device 7: the V100 node
  CHECK(reversed.node_at(7) == 0);  // device 0: the first A100 node
  CHECK(reversed.node_at(5) == 1);  // device 2: the second A100 node
  CHECK(reversed.node_of_device(5) == 2);

  // A measured device matrix with one slow direction, 3 -> 2: rings run between the devices of
  // consecutive ranks, in their own direction.
  cluster::link_matrix one_way;
  one_way.endpoints = cluster::link_matrix::between::devices;
  one_way.size = 4;
  one_way.entries.assign(16, {100_GBps, 1_us});
  one_way.entries[3 * 4 + 2] = {1_GBps, 1_us};
  const cluster::cluster m{{{a100_80, 4, dgx8}}, {}, one_way};
  CHECK(m.ring({4, 1}, 4).hop.bandwidth == 100_GBps);                           // 0 1 2 3: never 3 -> 2
  CHECK(m.with_order({3, 2, 0, 1}).ring({4, 1}, 4).hop.bandwidth == 1_GBps);    // 3 -> 2 first
  CHECK(m.with_order({2, 3, 0, 1}).ring({4, 1}, 4).hop.bandwidth == 100_GBps);  // 2 3 0 1: never 3 -> 2
  CHECK(m.with_order({0, 2, 1, 3}).ring({2, 1}, 4).hop.bandwidth == 100_GBps);  // rings {0, 2}, {1, 3}
  CHECK(m.with_order({0, 1, 3, 2}).ring({2, 1}, 4).hop.bandwidth == 1_GBps);    // ring {3, 2}
  CHECK(m.with_order({0, 2, 3, 1}).ring({2, 2}, 4).hop.bandwidth == 100_GBps);  // devices {0, 3}, {2, 1}
  CHECK(m.with_order({2, 0, 3, 1}).pairs(2, 4).hop.bandwidth == 1_GBps);        // ranks 0, 2 = devices 2, 3
  CHECK(m.with_order({2, 3, 0, 1}).pairs(2, 4).hop.bandwidth == 100_GBps);      // devices {2, 0}, {3, 1}
}

TEST_CASE("swap_ranks exchanges two ranks in place, equality includes the order", "[rank_order]") {
  const auto c = cluster::homogeneous(a100_80, 8, pairs_node);
  auto swapped = c;
  swapped.swap_ranks(1, 6);
  CHECK(swapped.order() == std::vector<int>{0, 6, 2, 3, 4, 5, 1, 7});
  CHECK(swapped == c.with_order({0, 6, 2, 3, 4, 5, 1, 7}));
  CHECK(swapped != c);
  CHECK(swapped.node_at(1) == 3);
  swapped.swap_ranks(6, 1);
  CHECK(swapped == c);  // back to the identity, now explicit
  CHECK(swapped.order().size() == 8);
  CHECK(c.with_order({1, 0, 2, 3, 4, 5, 6, 7}) != c.with_order({0, 1, 2, 3, 4, 5, 7, 6}));
}

TEST_CASE("bad rank orders are input_errors that say what is wrong", "[rank_order]") {
  const auto c = cluster::homogeneous(a100_80, 4, dgx8);
  CHECK_THROWS_WITH(c.with_order({0, 1, 2}), Catch::Contains("3 entries for 4 devices"));
  CHECK_THROWS_WITH(c.with_order({0, 1, 2, 4}), Catch::Contains("entry 3 is 4") && Catch::Contains("0 to 3"));
  CHECK_THROWS_WITH(c.with_order({0, -1, 2, 3}), Catch::Contains("entry 1 is -1"));
  CHECK_THROWS_WITH(c.with_order({0, 2, 2, 3}),
                    Catch::Contains("device 2 plays two ranks") && Catch::Contains("1 and 2"));
  auto s = c;
  CHECK_THROWS_WITH(s.swap_ranks(0, 4), Catch::Contains("rank 4 is not a rank"));
  CHECK_THROWS_AS(s.swap_ranks(-1, 0), input_error);
  CHECK(s.order().empty());  // a refused swap changes nothing
}

TEST_CASE("a route tracker answers as the cluster after every exchange of two ranks",
          "[rank_order][route_tracker]") {
  test::draws d{29};
  const cluster::node_spec dgx = cluster::node_of("a100-80gb");
  const cluster::cluster by_nodes{
      {{a100_80, 48, dgx}}, {}, random_matrix(d, cluster::link_matrix::between::nodes, 6)};
  const cluster::cluster by_devices{
      {{a100_80, 32, dgx}}, {}, random_matrix(d, cluster::link_matrix::between::devices, 32)};
  // 12 A100s (a node and a half) and 20 H100s: rings and pairs straddle the groups and the partial nodes.
  const cluster::cluster two_types{{{a100_80, 12, dgx}, {h100, 20, cluster::node_of("h100-sxm")}}};
  const cluster::cluster two_measured{{{a100_80, 16, dgx}, {h100, 16, cluster::node_of("h100-sxm")}},
                                      {},
                                      random_matrix(d, cluster::link_matrix::between::nodes, 4)};
  for (const cluster::cluster& base : {by_nodes, by_devices, two_types, two_measured}) {
    cluster::cluster work = base.with_order(d.permutation(base.devices()));
    cluster::route_tracker tracker{work};
    const int devices = work.devices();
    check_every_route(tracker, work, devices);
    check_every_route(tracker, work, devices - 8);
    check_every_route(tracker, work, devices - 5);
    CHECK(tracker.size() > 0);
    for (int step = 0; step < 60; ++step) {
      // One exchange, or (every third step) five before the routes are asked for again.
      const int exchanges = step % 3 == 2 ? 5 : 1;
      for (int k = 0; k < exchanges; ++k) {
        const int a = d.below(devices);
        const int b = d.below(devices);
        work.swap_ranks(a, b);
        tracker.exchanged(a, b);
      }
      INFO("after step " << step);
      check_every_route(tracker, work, devices);
      check_every_route(tracker, work, devices - 8);
      check_every_route(tracker, work, devices - 5);
    }
  }
}

TEST_CASE("a route tracker keeps nothing where the cluster has closed forms, and says so",
          "[rank_order][route_tracker]") {
  // One group, no order, no measurement: rings and pairs have closed forms, asked of the cluster each time.
  const cluster::cluster plain = cluster::homogeneous(a100_80, 32, cluster::node_of("a100-80gb"));
  cluster::route_tracker tracker{plain};
  CHECK(tracker.ring({8, 1}, 32) == plain.ring({8, 1}, 32));
  CHECK(tracker.pairs(8, 32) == plain.pairs(8, 32));
  CHECK(tracker.size() == 0);
  // A shape the cluster refuses is refused alike.
  CHECK_THROWS_AS(tracker.ring({64, 1}, 32), input_error);
}

TEST_CASE("the rank annealing told of its exchanges finds the same order at the same cost",
          "[rank_order][route_tracker][anneal]") {
  // GPT-2 on 32 A100s in four nodes with measured links, tp 2, pp 4, dp 4: every order the annealing
  // times is timed by the step model, once with routes followed afresh and once from a tracker.
  test::draws d{7};
  const cluster::cluster c{{{a100_80, 32, cluster::node_of("a100-80gb")}},
                           {},
                           random_matrix(d, cluster::link_matrix::between::nodes, 4)};
  const model::model m = zoo::get("gpt2");
  place::ranked_plan p;
  p.parallel = {2, 4, 4};
  p.knobs.global_batch = 64;
  p.knobs.microbatch = 2;
  const sched::schedule_cache cache;
  const auto afresh = [&](const cluster::cluster& ordered) {
    return place::plan_time_on(m, ordered, p, cache);
  };
  std::optional<cluster::route_tracker> tracker;
  const cluster::cluster* watched = nullptr;
  std::int64_t tracked = 0;
  const auto kept = [&](const cluster::cluster& ordered) {
    if (&ordered == watched) ++tracked;
    return place::plan_time_on(m, ordered, p, cache, &ordered == watched ? &*tracker : nullptr);
  };
  const place::rank_assignment plain =
      place::anneal_ranks(c, p.parallel, afresh).seed(3).iterations(600).run();
  const place::order_watch watch{[&](const cluster::cluster& work) {
                                   tracker.emplace(work);
                                   watched = &work;
                                 },
                                 [&](int a, int b) { tracker->exchanged(a, b); }, [&] { watched = nullptr; }};
  // Twice with the same cost and watch: the second run's first clusters (temporaries, perhaps where the
  // first run's chains were) are timed afresh, since the watch heard the chains' clusters go.
  for (int run = 0; run < 2; ++run) {
    tracked = 0;
    const place::rank_assignment watching =
        place::anneal_ranks(c, p.parallel, kept).seed(3).iterations(600).watch(watch).run();
    CHECK(watched == nullptr);
    CHECK(tracked >= 600);  // every step's order came from the tracker
    CHECK(watching.order == plain.order);
    CHECK(watching.cost == plain.cost);
    CHECK(watching.evaluated == plain.evaluated);
  }
}
