// Tests of phaze/place/plan_ranks.hpp: the rank order of a plan under the training-step model. On small
// mixed clusters with measured asymmetric links the exact order equals brute force over every permutation
// timed by estimate_step, annealing reaches it, and no order is ever slower than Megatron-LM's.
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/plan_ranks.hpp>

#include <catch2/catch.hpp>

#include "../support/splits.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

using namespace phaze;

namespace {
/// 2 T4s and 4 V100s (one node each, 4 per node) with a measured, asymmetric matrix between devices.
cluster::cluster measured(std::mt19937_64& rng) {
  const std::vector<cluster::device_group> groups{
      {*hw::find_preset("t4"), 2, cluster::node_of("t4")},
      {*hw::find_preset("v100-16gb"), 4, cluster::node_of("v100-16gb")}};
  cluster::link_matrix m;
  m.endpoints = cluster::link_matrix::between::devices;
  m.size = 6;
  m.entries.resize(36);
  for (auto& e : m.entries) {
    const double u = static_cast<double>(rng() >> 11U) / 9007199254740992.0;
    e = {bytes_per_second{(0.5 + 20.0 * u) * 1e9}, seconds{10e-6}};
  }
  return cluster::cluster{groups, {}, m};
}

place::ranked_plan plan_of(const model::model& m, train::parallelism p) {
  place::ranked_plan r;
  r.parallel = p;
  r.knobs.global_batch = 12;
  r.knobs.microbatch = 1;
  r.knobs.precision = hw::precision::fp16;
  for (int i = 0; i < p.pp; ++i) r.split.push_back(train::uniform_stage(m, p.pp, i));
  return r;
}
}  // namespace

TEST_CASE("the exact rank order of a plan equals brute force over every permutation", "[place][plan_ranks]") {
  const model::model m = model::with_sequence(zoo::get("gpt2"), 256);
  const sched::schedule_cache cache;
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 3; ++trial) {
    const cluster::cluster c = measured(rng);
    for (const train::parallelism p :
         {train::parallelism{1, 3, 2}, train::parallelism{2, 3, 1}, train::parallelism{1, 2, 3}}) {
      const auto plan = plan_of(m, p);
      std::vector<int> perm(6);
      std::iota(perm.begin(), perm.end(), 0);
      double best = std::numeric_limits<double>::infinity();
      do {
        best = std::min(best, place::plan_time_on(m, c.with_order(perm), plan, cache));
      } while (std::next_permutation(perm.begin(), perm.end()));
      // The split stays the plan's (replace_split off): the order alone against brute force.
      const auto exact = place::order_ranks(m, c, plan, cache, place::rank_method::exact, {}, false);
      const auto annealed =
          place::order_ranks(m, c, plan, cache, place::rank_method::anneal, {7, 6000}, false);
      INFO("trial " << trial << " tp " << p.tp << " pp " << p.pp << " dp " << p.dp);
      CHECK(exact.ordered_s == Approx(best).epsilon(1e-12));
      CHECK(exact.ordered_s <= exact.megatron_s);
      CHECK(annealed.ordered_s == Approx(best).epsilon(1e-12));
      if (std::isfinite(best)) CHECK(exact.estimate.time_per_batch.value() == Approx(best).epsilon(1e-12));
    }
  }
}

TEST_CASE("Megatron-LM's order is kept on one device type without measured links", "[place][plan_ranks]") {
  const model::model m = model::with_sequence(zoo::get("gpt2"), 256);
  const sched::schedule_cache cache;
  const auto c = cluster::preset_cluster("a100-80gb", 16);
  const auto o = place::order_ranks(m, c, plan_of(m, {2, 2, 4}), cache, place::rank_method::automatic);
  CHECK(o.method == "megatron");
  CHECK(o.order.empty());
  CHECK(o.ordered_s == o.megatron_s);
  CHECK(place::group_devices(c, {2, 2, 4}, 1, 3) == std::vector<int>{14, 15});
}

TEST_CASE("after ordering the ranks the layers are placed again: the best split for that order",
          "[place][plan_ranks]") {
  const model::model m = model::with_sequence(zoo::get("gpt2"), 256);
  const sched::schedule_cache cache;
  std::mt19937_64 rng(7);
  int replaced = 0;
  for (int trial = 0; trial < 4; ++trial) {
    const cluster::cluster c = measured(rng);
    for (const train::parallelism p : {train::parallelism{1, 3, 2}, train::parallelism{1, 2, 3}}) {
      INFO("trial " << trial << " pp " << p.pp << " dp " << p.dp);
      const auto plan = plan_of(m, p);
      const auto kept = place::order_ranks(m, c, plan, cache, place::rank_method::exact, {}, false);
      const auto again = place::order_ranks(m, c, plan, cache, place::rank_method::exact);
      CHECK(again.order == kept.order);
      CHECK(again.ordered_s <= kept.ordered_s);
      if (again.order.empty()) continue;
      // Every split of the 14 nodes into pp stages, timed by estimate_step on the chosen order.
      const cluster::cluster ordered = c.with_order(again.order);
      double best = std::numeric_limits<double>::infinity();
      phaze::test::for_each_split(m.size(), static_cast<std::size_t>(p.pp), [&](const auto& cuts) {
        place::ranked_plan candidate = plan;
        candidate.split = phaze::test::stages_of(cuts, m.size());
        best = std::min(best, place::plan_time_on(m, ordered, candidate, cache));
      });
      CHECK(again.ordered_s == Approx(best).epsilon(1e-9));
      if (!again.split.empty()) {
        ++replaced;
        CHECK(again.estimate.time_per_batch.value() == Approx(again.ordered_s).epsilon(1e-12));
      }
    }
  }
  CHECK(replaced > 0);  // the case this guards happens on these clusters
}
