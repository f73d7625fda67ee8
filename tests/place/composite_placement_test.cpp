// Placement of a composite model (AMP's heterogeneous model: layers of different shapes and costs, cuts of
// different sizes) under the training-step model: chain_dp prices every stage's own cuts and equals the
// brute-force oracle over every split, its plan's time is train::estimate_step's for its split, and on a
// cluster of mixed device types it stays exact.
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/downset_dp.hpp>
#include <phaze/place/model_placement.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"
#include "../support/splits.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <tuple>
#include <vector>

using namespace phaze;

namespace {
using phaze::test::fp16_knobs;

/// The fastest fitting plan of table `ti`'s width with pp stages and dp replicas by exhaustion: every split
/// of the chain into pp non-empty contiguous stages, evaluated by place::evaluate_stages with each stage on
/// its own device type's table (step_policy::stage_table); infinity when nothing fits.
double exhaustive(const place::model_problem& mp, std::size_t ti, int pp, int dp) {
  const auto& t = mp.problem.tables[ti];
  const std::size_t n = t.nodes.size();
  const auto& s = static_cast<const place::placement_settings&>(mp.problem);
  const place::stage_context c{t.tp, pp, dp, s.microbatches / dp};
  std::vector<std::size_t> table_of;
  for (int k = 0; k < pp; ++k) table_of.push_back(mp.policy.stage_table(ti, k, c));
  for (const std::size_t tk : table_of)
    if (tk == place::no_stage_table) return std::numeric_limits<double>::infinity();
  double best = std::numeric_limits<double>::infinity();
  phaze::test::for_each_split(n, static_cast<std::size_t>(pp), [&](const auto& cuts) {
    const auto plan = place::evaluate_stages(
        s, t,
        [&](int k2) -> const place::cost_table& {
          return mp.problem.tables[table_of[static_cast<std::size_t>(k2)]];
        },
        dp, phaze::test::node_sets_of(cuts, n), mp.policy);
    if (plan.feasible) best = std::min(best, plan.time_per_batch.value());
  });
  return best;
}
}  // namespace

TEST_CASE("a composite model's cuts carry different sizes, and a stage pays its own", "[place][composite]") {
  const model::model gan = zoo::transgan();
  const cluster::cluster v100 = cluster::preset_cluster("v100-16gb", 16);
  const sched::schedule_cache cache;
  const auto mp = place::model_tables(gan, v100, fp16_knobs(64, 1), {1}, cache);
  REQUIRE(mp.policy.widths.size() == 1);
  CHECK_FALSE(mp.policy.widths.front().uniform_cuts);
  // The least cut is the 9 x 9 x 1024 grid in fp16.
  CHECK(mp.policy.widths.front().boundary.value() == Approx(82944.0 * 2));
  // A transformer's cuts all carry its hidden state.
  const auto gpt = place::model_tables(zoo::gpt2(), v100, fp16_knobs(64, 1), {1, 2}, cache);
  for (const auto& w : gpt.policy.widths) CHECK(w.uniform_cuts);
  // Two stages cut after the grid and after the image: the second pays for four times the bytes.
  const place::stage_context c{1, 2, 8, 8};
  const place::placement_settings& s = mp.problem;
  const double small = mp.policy.stage_time_s(s, {0.0, 82944.0 * 2, 0.0, 0.0, 0.0}, c);
  const double large = mp.policy.stage_time_s(s, {0.0, 1327104.0 * 2, 0.0, 0.0, 0.0}, c);
  CHECK(large > 4 * small);
}

TEST_CASE("chain_dp under step_policy equals an exhaustive search on a composite model",
          "[place][composite]") {
  const model::model gan = zoo::transgan();
  const sched::schedule_cache cache;
  for (const int devices : {4, 8}) {
    const cluster::cluster v100 = cluster::preset_cluster("v100-16gb", devices);
    for (const std::int64_t microbatch : {1, 2}) {
      const auto mp = place::model_tables(gan, v100, fp16_knobs(16, microbatch), {1, 2}, cache);
      for (std::size_t ti = 0; ti < mp.problem.tables.size(); ++ti) {
        const int tp = mp.problem.tables[ti].tp;
        for (const int pp : {1, 2, 3}) {
          if (devices % (tp * pp) != 0) continue;
          const int dp = devices / (tp * pp);
          INFO(devices << " devices, microbatch " << microbatch << ", tp " << tp << ", pp " << pp);
          const auto fast = place::chain_dp(mp.problem, mp.policy).tp(tp).pp(pp).dp(dp).run();
          const double oracle = exhaustive(mp, ti, pp, dp);
          REQUIRE(fast.feasible == (oracle < std::numeric_limits<double>::infinity()));
          if (!fast.feasible) continue;
          CHECK(fast.time_per_batch.value() == Approx(oracle).epsilon(1e-9));
          // The plan's time is estimate_step's for its split.
          const auto split = place::stage_split(fast, gan.size());
          const auto e = train::estimate_step(gan, v100, {fast.tp, fast.pp, fast.dp},
                                              fp16_knobs(16, microbatch), cache, split);
          CHECK(e.time_per_batch.value() == Approx(fast.time_per_batch.value()).epsilon(1e-9));
        }
      }
    }
  }
}

TEST_CASE("place_model on a composite model: uneven layers follow their costs", "[place][composite]") {
  const model::model gan = zoo::transgan();
  const cluster::cluster v100 = cluster::preset_cluster("v100-16gb", 16);
  const sched::schedule_cache cache;
  const auto k = fp16_knobs(64, 1);
  const auto placed = place::place_model(gan, v100, k, place::admissible_widths(gan, v100), cache);
  REQUIRE(placed.placed.feasible);
  CHECK(placed.estimate.time_per_batch.value() == Approx(placed.placed.time_per_batch.value()).epsilon(1e-9));
  // Every stage fits, and the split holds the whole model in order.
  CHECK(placed.estimate.fits);
  CHECK(train::node_ranges(gan, placed.split).back().last == gan.size());
  // The downset DP assumes every cut costs the same: refused with the placers that price cuts named.
  CHECK_THROWS_WITH(place::place_model(gan, v100, k, {1}, cache, {}, place::downset_placer{}),
                    Catch::Contains("chain"));
}

TEST_CASE("on a mixed cluster a composite model's plan equals an exhaustive search", "[place][composite]") {
  const model::model gan = zoo::transgan();
  const sched::schedule_cache cache;
  const cluster::cluster mixed{{{*hw::find_preset("v100-16gb"), 4, cluster::node_of("v100-16gb")},
                                {*hw::find_preset("t4"), 4, cluster::node_of("t4")}}};
  const auto mp = place::model_tables(gan, mixed, fp16_knobs(16, 1), {1}, cache);
  for (const int pp : {2, 4}) {
    INFO("pp " << pp);
    const int dp = 8 / pp;
    const auto fast = place::chain_dp(mp.problem, mp.policy).tp(1).pp(pp).dp(dp).run();
    const double oracle = exhaustive(mp, 0, pp, dp);
    REQUIRE(fast.feasible == (oracle < std::numeric_limits<double>::infinity()));
    if (fast.feasible) CHECK(fast.time_per_batch.value() == Approx(oracle).epsilon(1e-9));
  }
}

TEST_CASE("the oracles' splits: every way to cut a chain into non-empty stages, once", "[place][composite]") {
  // C(n - 1, p - 1) splits, each a partition of the nodes into p non-empty consecutive stages.
  for (const auto& [n, p, count] : {std::tuple{56, 3, 1485}, std::tuple{14, 4, 286}, std::tuple{5, 5, 1}}) {
    int seen = 0;
    phaze::test::for_each_split(
        static_cast<std::size_t>(n), static_cast<std::size_t>(p), [&](const auto& cuts) {
          ++seen;
          const auto stages = phaze::test::node_sets_of(cuts, static_cast<std::size_t>(n));
          REQUIRE(stages.size() == static_cast<std::size_t>(p));
          std::size_t next = 0;
          for (const auto& s : stages) {
            REQUIRE_FALSE(s.empty());
            CHECK(s.front() == next);
            next = s.back() + 1;
          }
          CHECK(next == static_cast<std::size_t>(n));
        });
    CHECK(seen == count);
  }
}
