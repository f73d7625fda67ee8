// Tests of phaze/search/cluster_space.hpp: the compositions of a cluster space (budget, power cap, steps, a
// type left out, at most max_types types, cost order, the limit), the bounds (above every plan phaze
// estimates, the two-type bound above every split of the layers), and the search: its fronts equal those of
// planning every composition on seeded small spaces, pruning happens, budget and cap hold, both rank orders
// are tried.
#include "phaze/search/cluster_space.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "phaze/cluster/presets.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"

using namespace phaze;

namespace {
search::device_offer offer(const char* preset, double price, double power, int max, int step = 0,
                           int min = 0) {
  search::device_offer o;
  o.label = preset;
  o.device = *hw::find_preset(preset);
  o.node = cluster::node_of(preset);
  o.price_usd = price;
  o.power = search::watts{power};
  o.min = min;
  o.max = max;
  o.step = step;
  return o;
}

/// Cheap plan choices: two microbatch sizes, no recomputation, no sequence parallelism.
place::plan_choices cheap() {
  place::plan_choices c;
  c.placement = place::stage_placement::uneven;
  c.microbatches = {1, 2};
  c.recompute = {model::recompute::none};
  c.sequence_parallel = {false};
  return c;
}

train::training_knobs batch(std::int64_t b) {
  train::training_knobs k;
  k.global_batch = b;
  return k;
}

/// A portable seeded generator (splitmix64): the same spaces on every standard library.
struct draws {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

/// A seeded space of two or three GPU types (counts up to 16 in steps of 4 or 8, prices and powers drawn
/// around each type's rough worth), clusters of two types or of all of them, a budget that cuts some
/// compositions and sometimes a power cap.
search::cluster_space seeded_space(std::uint64_t seed) {
  draws d{seed};
  const std::vector<const char*> presets{"h100-sxm", "a100-80gb", "a100-40gb", "v100-16gb"};
  const std::vector<double> worth{30000, 15000, 10000, 5000};
  search::cluster_space s;
  const int types = 2 + d.below(2);
  std::vector<int> picked;
  while (static_cast<int>(picked.size()) < types) {
    const int p = d.below(static_cast<int>(presets.size()));
    if (std::find(picked.begin(), picked.end(), p) == picked.end()) picked.push_back(p);
  }
  double total = 0.0;
  for (const int p : picked) {
    const double price = worth[static_cast<std::size_t>(p)] * (0.5 + 0.25 * d.below(5));
    const double power = 300.0 + 100.0 * d.below(8);
    const int step = d.below(2) == 0 ? 4 : 8;
    s.devices.push_back(offer(presets[static_cast<std::size_t>(p)], price, power, 16, step));
    total += 16 * price;
  }
  s.max_types = types;  // clusters of every type the space has
  s.budget_usd = total * (0.4 + 0.1 * d.below(4));
  if (d.below(2) == 0) s.power_cap = search::watts{16.0 * 900.0};
  return s;
}

void same_front(const std::vector<search::cluster_point>& a, const std::vector<search::cluster_point>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].index == b[i].index);
    CHECK(a[i].mix == b[i].mix);
    CHECK(a[i].samples_per_s == b[i].samples_per_s);
    CHECK(a[i].group_order == b[i].group_order);
    REQUIRE(a[i].plan);
    REQUIRE(b[i].plan);
    CHECK(a[i].plan->parallel == b[i].plan->parallel);
    CHECK(a[i].plan->knobs == b[i].plan->knobs);
    CHECK(a[i].plan->split == b[i].plan->split);
  }
}
}  // namespace

TEST_CASE("compositions: within budget and cap, in steps, a type left out, cost order", "[cluster_space]") {
  search::cluster_space s;
  s.devices = {offer("h100-sxm", 30000, 1000, 16, 8), offer("a100-80gb", 15000, 600, 12, 4)};
  s.budget_usd = 400000;
  s.power_cap = search::watts{16000};
  const auto mixes = search::compositions_of(s);
  // Brute force: every pair of counts in the ranges, at least one device, within budget and cap.
  std::size_t expected = 0;
  for (int h = 0; h <= 16; h += 8) {
    for (int a = 0; a <= 12; a += 4) {
      const double cost = 30000.0 * h + 15000.0 * a;
      const double power = 1000.0 * h + 600.0 * a;
      if (h + a > 0 && cost <= 400000 && power <= 16000) ++expected;
    }
  }
  CHECK(mixes.size() == expected);
  bool h100_alone = false;
  for (std::size_t i = 0; i < mixes.size(); ++i) {
    const auto& m = mixes[i];
    CHECK(m.cost_usd <= s.budget_usd);
    CHECK(m.power <= *s.power_cap);
    CHECK(m.counts[0] % 8 == 0);
    CHECK(m.counts[1] % 4 == 0);
    CHECK(m.devices() > 0);
    CHECK(m.cost_usd == Approx(30000.0 * m.counts[0] + 15000.0 * m.counts[1]));
    CHECK(m.peak.value() == Approx(hw::peak_matrix_flops(s.devices[0].device).value() * m.counts[0] +
                                   hw::peak_matrix_flops(s.devices[1].device).value() * m.counts[1]));
    if (i > 0) CHECK(mixes[i - 1].cost_usd <= m.cost_usd);
    if (m.counts[1] == 0) h100_alone = true;
  }
  CHECK(h100_alone);

  SECTION("max_types 1 keeps single-type clusters only") {
    s.max_types = 1;
    for (const auto& m : search::compositions_of(s)) CHECK(m.types() == 1);
  }
  SECTION("a type with min above 0 is in every composition") {
    s.devices[1].min = 4;
    for (const auto& m : search::compositions_of(s)) CHECK(m.counts[1] >= 4);
  }
  SECTION("the step defaults to the node's size") {
    s.devices[0].step = 0;
    for (const auto& m : search::compositions_of(s))
      CHECK(m.counts[0] % cluster::node_of("h100-sxm").devices == 0);
  }
  SECTION("a budget below the cheapest device leaves none") {
    s.budget_usd = 1000;
    CHECK(search::compositions_of(s).empty());
  }
}

TEST_CASE("a space with too many compositions is refused with what to change", "[cluster_space]") {
  search::cluster_space s;
  s.devices = {offer("h100-sxm", 1, 1, 100000, 1), offer("a100-80gb", 1, 1, 100000, 1)};
  s.budget_usd = 1e12;
  try {
    (void)search::compositions_of(s);
    FAIL("no error");
  } catch (const input_error& e) {
    const std::string what = e.what();
    CHECK(what.find("4096") != std::string::npos);
    CHECK(what.find("max_types") != std::string::npos);
  }
  s.max_types = 5;
  CHECK_THROWS_AS(search::validate(s), input_error);
  s.max_types = 0;
  CHECK_THROWS_AS(search::validate(s), input_error);
}

TEST_CASE("the layer bound lies above every split of the layers over two types", "[cluster_space]") {
  // Three layer kinds (one, ten, one nodes) with hand-picked device-seconds per sample on two types.
  search::layer_work fast{{0.5, 2.0, 4.0}, {1, 10, 1}};
  search::layer_work slow{{3.0, 5.0, 1.0}, {1, 10, 1}};
  for (const auto& [n1, n2] : {std::pair{8, 8}, std::pair{16, 4}, std::pair{4, 16}, std::pair{8, 0}}) {
    const double bound = search::layer_throughput_bound({{n1, &fast}, {n2, &slow}});
    // Every split of the 12 nodes (blocks counted by how many go to the first type): x = min_t n_t / W_t.
    double best = 0.0;
    for (int e = 0; e < 2; ++e) {
      for (int blocks = 0; blocks <= 10; ++blocks) {
        for (int h = 0; h < 2; ++h) {
          const double w1 = (e == 0 ? 0.5 : 0.0) + 2.0 * blocks + (h == 0 ? 4.0 : 0.0);
          const double w2 = (e == 1 ? 3.0 : 0.0) + 5.0 * (10 - blocks) + (h == 1 ? 1.0 : 0.0);
          if (n2 == 0 && w2 > 0) continue;
          double x = std::numeric_limits<double>::infinity();
          if (w1 > 0) x = std::min(x, n1 / w1);
          if (w2 > 0) x = std::min(x, n2 / w2);
          best = std::max(best, x);
        }
      }
    }
    INFO(n1 << " + " << n2);
    CHECK(bound >= best);
    CHECK(bound <= best * 1.5);  // and not far above here
  }
  // One type: n / sum of the work.
  CHECK(search::layer_throughput_bound({{8, &fast}}) == Approx(8.0 / (0.5 + 20.0 + 4.0)));
}

TEST_CASE("cluster search: the fronts equal those of planning every composition (seeded)",
          "[cluster_space]") {
  const model::model m = zoo::get("gpt2");
  std::size_t pruned = 0;
  std::size_t three_types = 0;  // planned compositions of three types (every order of them tried)
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const search::cluster_space s = seeded_space(seed);
    const auto k = batch(seed % 2 == 0 ? 32 : 64);
    const auto fast = search::cluster_search(s, m, k).choices(cheap()).run();
    const auto all = search::cluster_search(s, m, k).choices(cheap()).exhaustive().run();
    INFO("seed " << seed << ": " << s.devices.size() << " types, " << fast.compositions.size()
                 << " compositions, " << fast.pruned << " pruned");
    CHECK(all.pruned == 0);
    CHECK(all.evaluated == all.compositions.size());
    CHECK(fast.evaluated + fast.pruned == fast.compositions.size());
    same_front(fast.cost_front, all.cost_front);
    same_front(fast.power_front, all.power_front);
    pruned += fast.pruned;
    for (const auto& p : all.compositions)
      if (p.mix.types() == 3 && p.status == search::outcome::evaluated) ++three_types;
    // Every front is a front: increasing key and increasing throughput.
    for (std::size_t i = 1; i < fast.cost_front.size(); ++i) {
      CHECK(fast.cost_front[i - 1].mix.cost_usd <= fast.cost_front[i].mix.cost_usd);
      CHECK(fast.cost_front[i - 1].samples_per_s < fast.cost_front[i].samples_per_s);
    }
    for (std::size_t i = 1; i < fast.power_front.size(); ++i) {
      CHECK(fast.power_front[i - 1].mix.power <= fast.power_front[i].mix.power);
      CHECK(fast.power_front[i - 1].samples_per_s < fast.power_front[i].samples_per_s);
    }
    // A pruned composition's bound is reached by a planned one no dearer, and one drawing no more power.
    for (const auto& p : fast.compositions) {
      if (p.status != search::outcome::pruned) continue;
      const auto reaches = [&](bool by_cost) {
        return std::any_of(fast.compositions.begin(), fast.compositions.end(), [&](const auto& q) {
          return q.status == search::outcome::evaluated && q.samples_per_s >= p.upper_bound_samples_per_s &&
                 (by_cost ? q.mix.cost_usd <= p.mix.cost_usd : q.mix.power <= p.mix.power);
        });
      };
      CHECK(reaches(true));
      CHECK(reaches(false));
    }
  }
  CHECK(pruned > 0);       // the bound prunes on these spaces: the test compares something
  CHECK(three_types > 0);  // and clusters of three types are among them
}

TEST_CASE("cluster search in rounds through a map, part planned elsewhere: the same fronts after complete()",
          "[cluster_space]") {
  // The map of `phaze search --cluster-space` under mpirun: each round's compositions dealt to two
  // "processes"; the points of the second come back as another process sends them (status, throughput,
  // plans timed, memory need; no plan or cluster), and complete() plans the fronts' such points again.
  const model::model m = zoo::get("gpt2");
  std::size_t rounds_with_two = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const search::cluster_space s = seeded_space(seed);
    const auto k = batch(seed % 2 == 0 ? 32 : 64);
    const auto one_at_a_time = search::cluster_search(s, m, k).choices(cheap()).run();
    const search::cluster_map two_processes =
        [&](const std::vector<std::size_t>& todo,
            const std::function<search::cluster_point(std::size_t)>& plan) {
          std::vector<search::cluster_point> out;
          if (todo.size() > 1) ++rounds_with_two;
          for (std::size_t j = 0; j < todo.size(); ++j) {
            search::cluster_point p = plan(todo[j]);
            if (j % 2 == 1) {  // from the other process: what it sends
              search::cluster_point sent;
              sent.status = p.status;
              sent.samples_per_s = p.samples_per_s;
              sent.plans_evaluated = p.plans_evaluated;
              sent.smallest_memory_need = p.smallest_memory_need;
              p = sent;
            }
            out.push_back(std::move(p));
          }
          return out;
        };
    const search::cluster_search search =
        search::cluster_search(s, m, k).choices(cheap()).map(two_processes, 3);
    search::cluster_search_result rounds = search.run();
    INFO("seed " << seed << ": " << rounds.compositions.size() << " compositions, " << rounds.pruned
                 << " and " << one_at_a_time.pruned << " pruned");
    CHECK(rounds.compositions.size() == one_at_a_time.compositions.size());
    CHECK(rounds.evaluated + rounds.pruned == rounds.compositions.size());
    CHECK(rounds.pruned <= one_at_a_time.pruned);  // no composition of a round prunes another of it
    search.complete(rounds);
    same_front(rounds.cost_front, one_at_a_time.cost_front);
    same_front(rounds.power_front, one_at_a_time.power_front);
    for (const auto* front : {&rounds.cost_front, &rounds.power_front})
      for (const auto& p : *front) CHECK(p.plan.has_value());
  }
  CHECK(rounds_with_two > 0);
}

TEST_CASE("the bounds lie above every plan's throughput (tp, recomputation, two types)", "[cluster_space]") {
  const model::model m = zoo::get("gpt2");
  search::cluster_space s;
  s.devices = {offer("h100-sxm", 30000, 1000, 16, 4), offer("v100-16gb", 5000, 400, 8, 4)};
  s.budget_usd = 1e7;
  std::vector<place::plan_choices> settings;
  settings.push_back(cheap());
  settings.push_back(cheap());
  settings.back().tensor_parallel = {2};
  settings.push_back(cheap());
  settings.back().recompute = {model::recompute::full};
  settings.back().sequence_parallel = {true};
  settings.back().tensor_parallel = {4};
  for (const auto& choices : settings) {
    const auto all = search::cluster_search(s, m, batch(32)).choices(choices).exhaustive().run();
    std::size_t planned = 0;
    for (const auto& p : all.compositions) {
      if (p.status != search::outcome::evaluated) continue;
      ++planned;
      CHECK(p.samples_per_s < p.upper_bound_samples_per_s);
      CHECK(p.samples_per_s < search::peak_throughput_bound(p.mix.peak, all.per_sample));
      CHECK(p.plan->estimate.samples_per_s == p.samples_per_s);
    }
    CHECK(planned > 0);
  }
}

TEST_CASE("cluster search: budget and power cap hold, a type may be left out, both orders tried",
          "[cluster_space]") {
  const model::model m = zoo::get("gpt2");
  search::cluster_space s;
  s.devices = {offer("h100-sxm", 30000, 1000, 8, 4), offer("a100-80gb", 15000, 600, 8, 4)};
  s.budget_usd = 300000;
  s.power_cap = search::watts{9000};
  const auto r = search::cluster_search(s, m, batch(32)).choices(cheap()).exhaustive().run();
  REQUIRE_FALSE(r.cost_front.empty());
  bool alone = false;
  for (const auto& p : r.compositions) {
    CHECK(p.mix.cost_usd <= s.budget_usd);
    CHECK(p.mix.power <= *s.power_cap);
    if (p.status != search::outcome::evaluated) continue;
    REQUIRE(p.cluster);
    CHECK(p.cluster->devices() == p.mix.devices());
    CHECK(p.cluster->groups().size() == p.group_order.size());
    if (p.mix.types() == 1) {
      alone = true;
      CHECK(p.group_order.size() == 1);
    }
  }
  CHECK(alone);
  // Both orders are never slower than the faster type first.
  const auto one = search::cluster_search(s, m, batch(32))
                       .choices(cheap())
                       .exhaustive()
                       .orders(search::group_orders::faster_first)
                       .run();
  REQUIRE(one.compositions.size() == r.compositions.size());
  for (std::size_t i = 0; i < r.compositions.size(); ++i) {
    CHECK(r.compositions[i].samples_per_s >= one.compositions[i].samples_per_s);
    if (one.compositions[i].mix.types() == 2 && one.compositions[i].status == search::outcome::evaluated)
      CHECK(one.compositions[i].group_order.front() == 0);  // h100-sxm: the higher peak first
  }
  // Deterministic: the same search twice gives the same fronts.
  const auto again = search::cluster_search(s, m, batch(32)).choices(cheap()).exhaustive().run();
  same_front(r.cost_front, again.cost_front);
}

TEST_CASE("a composition whose devices admit no plan is infeasible, not an error", "[cluster_space]") {
  // gpt2 has 12 blocks: at batch 1 (no data parallelism) and tp 1, 16 devices would need 16 stages.
  search::cluster_space s;
  s.devices = {offer("h100-sxm", 30000, 1000, 16, 16)};
  s.budget_usd = 1e6;
  auto choices = cheap();
  choices.tensor_parallel = {1};
  choices.microbatches = {1};
  const auto r = search::cluster_search(s, zoo::get("gpt2"), batch(1)).choices(choices).run();
  REQUIRE(r.compositions.size() == 1);
  CHECK(r.compositions.front().status == search::outcome::infeasible);
  CHECK(r.infeasible == 1);
  CHECK(r.cost_front.empty());
}

TEST_CASE("the layer bound lies above every split of the layers over three and four types",
          "[cluster_space]") {
  // Three layer kinds (one, six, one nodes) with hand-picked device-seconds per sample on four types.
  const std::vector<search::layer_work> work{{{0.5, 2.0, 4.0}, {1, 6, 1}},
                                             {{3.0, 5.0, 1.0}, {1, 6, 1}},
                                             {{1.0, 3.0, 2.0}, {1, 6, 1}},
                                             {{2.0, 1.5, 6.0}, {1, 6, 1}}};
  for (const std::size_t types : {std::size_t{3}, std::size_t{4}}) {
    for (const std::vector<int>& n : {std::vector<int>{8, 8, 8, 8}, std::vector<int>{16, 4, 8, 2}}) {
      std::vector<std::pair<int, const search::layer_work*>> given;
      for (std::size_t t = 0; t < types; ++t) given.emplace_back(n[t], &work[t]);
      const double bound = search::layer_throughput_bound(given);
      // Every assignment of the 8 nodes to the types (4^8 at most): x = min over used types of n_t / W_t.
      const std::vector<std::size_t> kind_of{0, 1, 1, 1, 1, 1, 1, 2};
      double best = 0.0;
      std::vector<std::size_t> on(8, 0);
      auto visit = [&](auto&& self, std::size_t v) -> void {
        if (v == on.size()) {
          std::vector<double> w(types, 0.0);
          for (std::size_t u = 0; u < on.size(); ++u) w[on[u]] += work[on[u]].device_seconds[kind_of[u]];
          double x = std::numeric_limits<double>::infinity();
          for (std::size_t t = 0; t < types; ++t)
            if (w[t] > 0) x = std::min(x, n[t] / w[t]);
          best = std::max(best, x);
          return;
        }
        for (std::size_t t = 0; t < types; ++t) {
          on[v] = t;
          self(self, v + 1);
        }
      };
      visit(visit, 0);
      INFO(types << " types");
      CHECK(bound >= best);
      CHECK(bound <= best * 1.5);  // and not far above here
    }
  }
}
