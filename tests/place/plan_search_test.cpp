// The plan search: its best plan is at least as fast as every plan it was allowed to consider (checked by
// evaluating fixed plans one by one), fixed choices are honoured, and when nothing fits it says how much
// memory the leanest plan needs.
#include <phaze/hw/presets.hpp>
#include <phaze/hw/space.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/plan_search.hpp>
#include <phaze/sched/ilp.hpp>

#include <catch2/catch.hpp>

#include <vector>

#include "../support/clusters.hpp"

using namespace phaze;

namespace {
train::training_knobs batch(std::int64_t global_batch) {
  train::training_knobs k;
  k.global_batch = global_batch;
  return k;
}
}  // namespace

namespace {
/// Megatron-LM's even split: the plan search these tests check (the placers' uneven splits have their own).
place::plan_choices even_split() {
  place::plan_choices choices;
  choices.placement = place::stage_placement::uniform;
  return choices;
}
}  // namespace

TEST_CASE("The best plan beats every admissible plan evaluated on its own", "[place][plan_search]") {
  const auto m = zoo::get("llama2-7b");
  const auto d = *hw::find_preset("a100-80gb");
  sched::schedule_cache cache;
  const auto found = place::search_plans(m, phaze::test::cluster_of(d, 16), batch(32), even_split(), cache);
  REQUIRE_FALSE(found.feasible.empty());
  const double best = found.feasible.front().estimate.time_per_batch.value();
  int checked = 0;
  for (int tp : {1, 2, 4, 8}) {
    for (int pp : {1, 2, 4}) {
      for (std::int64_t mb : {1, 2, 4}) {
        for (auto mode : {model::recompute::none, model::recompute::selective, model::recompute::full}) {
          train::parallelism p{tp, pp, 16 / (tp * pp)};
          auto k = batch(32);
          k.microbatch = mb;
          k.recompute = mode;
          k.sequence_parallel = tp > 1;
          try {
            train::validate(m, p, k, 16);
          } catch (const input_error&) {
            continue;
          }
          const auto e = train::estimate_step(m, phaze::test::cluster_of(d, p), p, k, cache);
          if (!e.fits) continue;
          CHECK(best <= e.time_per_batch.value() * (1 + 1e-12));
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 10);
  // Ranked best first.
  for (std::size_t i = 1; i < found.feasible.size(); ++i)
    CHECK(found.feasible[i - 1].estimate.time_per_batch <= found.feasible[i].estimate.time_per_batch);
}

TEST_CASE(
    "The plan search reports its progress: every plan once, in order, then the bounds and the refinement",
    "[place][plan_search]") {
  const auto m = zoo::get("gpt2-xl");
  const auto d = *hw::find_preset("a100-80gb");
  sched::schedule_cache cache;
  place::plan_choices choices;
  choices.refine = sched::any_scheduler{sched::list_scheduler{}};
  choices.refine_top = 3;
  std::vector<work_progress> seen;
  choices.progress = [&](const work_progress& p) { seen.push_back(p); };
  const auto found = place::search_plans(m, phaze::test::cluster_of(d, 16), batch(64), choices, cache);
  REQUIRE_FALSE(seen.empty());
  std::size_t plans = 0;
  std::size_t bounded = 0;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    INFO(i << ": " << seen[i].what << " " << seen[i].done << "/" << seen[i].total);
    const bool last = i + 1 == seen.size();
    if (seen[i].what == "plans") {
      CHECK(seen[i].done < seen[i].total);
      CHECK(seen[i].done == plans);  // one report before each plan, counting from 0
      ++plans;
    } else if (seen[i].what == "bounding plans") {
      CHECK(seen[i].done == bounded);  // then one before each plan's lower bound
      ++bounded;
      CHECK(plans == seen.front().total);
    } else {
      CHECK(seen[i].what == "refining plans");
      CHECK(plans == seen.front().total);  // the refinement follows every plan and every bound
      CHECK(bounded == found.feasible.size());
      // Each refinement counts from 0; the last report says the refinement is done.
      CHECK((last ? seen[i].done == seen[i].total : seen[i].done < seen[i].total));
    }
    if (i > 0) CHECK(seen[i].seconds >= seen[i - 1].seconds);
  }
  CHECK(seen.back().what == "refining plans");
  CHECK(plans == seen.front().total);
  CHECK(plans >= found.evaluated);  // items without a (pp, dp) are reported but not plans
}

TEST_CASE("One tensor-parallel width that admits no setting is refused with the rule it breaks",
          "[place][plan_search]") {
  const auto m = zoo::get("gpt2");
  const auto d = *hw::find_preset("a100-80gb");
  place::plan_choices choices;
  choices.tensor_parallel = {5};  // gpt2's 12 heads do not split over 5 ranks
  const sched::schedule_cache cache;
  try {
    (void)place::search_plans(m, phaze::test::cluster_of(d, 10), batch(10), choices, cache);
    FAIL("no plan can run at tp 5");
  } catch (const place::no_admissible_configuration& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains(
                         "no admissible plan at the one tensor-parallel width given (`tensor_parallel` 5)"));
    CHECK_THAT(what, Catch::Contains("head"));
  }
}

TEST_CASE("Fixed choices are honoured, an impossible cluster reports the leanest need",
          "[place][plan_search]") {
  const auto m = zoo::get("gpt3-175b");
  const auto d = *hw::find_preset("a100-80gb");
  sched::schedule_cache cache;
  place::plan_choices fixed = even_split();
  fixed.tensor_parallel = {8};
  fixed.recompute = {model::recompute::full};
  const auto found = place::search_plans(m, phaze::test::cluster_of(d, 64), batch(64), fixed, cache);
  REQUIRE_FALSE(found.feasible.empty());
  for (const auto& r : found.feasible) {
    CHECK(r.parallel.tp == 8);
    CHECK(r.knobs.recompute == model::recompute::full);
  }
  // Eight V100s cannot hold GPT-3's weights: nothing fits, and the leanest plan needs more than 16 GB.
  const auto v100 = *hw::find_preset("v100-16gb");
  const auto none = place::search_plans(m, phaze::test::cluster_of(v100, 8), batch(8), even_split(), cache);
  CHECK(none.feasible.empty());
  CHECK(none.evaluated > 0);
  CHECK(none.smallest_infeasible_need > v100.hbm);
  // No admissible plan at all is bad input.
  place::plan_choices impossible;
  impossible.tensor_parallel = {3};
  CHECK_THROWS_AS(place::search_plans(m, phaze::test::cluster_of(d, 64), batch(64), impossible, cache),
                  input_error);
}

TEST_CASE("Refined on ILP schedules, the best plans are those of a search on ILP schedules throughout",
          "[place][plan_search]") {
  // A design of PHAZE's space where the ILP shortens layers the list scheduler leaves long.
  const auto designs = hw::spread_sample(hw::phaze_default_space, 8);
  const auto m = zoo::get("gpt2-xl");
  sched::ilp_options ilp;
  ilp.max_nodes = 100;
  const sched::any_scheduler exact = sched::ilp_scheduler{ilp};
  int improved = 0;
  for (const auto placement : {place::stage_placement::uneven, place::stage_placement::uniform}) {
    for (const std::size_t k : {std::size_t{2}, std::size_t{4}}) {
      const auto& d = designs[k];
      const auto c = phaze::test::cluster_of(d, 32);
      place::plan_choices choices;
      choices.placement = placement;
      choices.microbatches = {1, 2};
      choices.refine = exact;
      choices.refine_top = 3;
      const auto fast = place::search_plans(m, c, batch(64), choices, sched::schedule_cache{});
      choices.refine.reset();
      const auto oracle = place::search_plans(m, c, batch(64), choices, sched::schedule_cache{exact});
      const auto listed = place::search_plans(m, c, batch(64), choices, sched::schedule_cache{});
      REQUIRE(fast.feasible.size() >= 3);
      REQUIRE(oracle.feasible.size() == fast.feasible.size());
      CHECK(fast.refined < fast.feasible.size());  // the bounds spared some plans the ILP
      for (std::size_t i = 0; i < 3; ++i) {
        INFO(d.name.view() << " plan " << i);
        CHECK(fast.feasible[i].estimate.time_per_batch == oracle.feasible[i].estimate.time_per_batch);
        CHECK(fast.feasible[i].parallel == oracle.feasible[i].parallel);
        CHECK(fast.feasible[i].scheduler == "ilp");
      }
      if (oracle.feasible.front().estimate.time_per_batch < listed.feasible.front().estimate.time_per_batch)
        ++improved;
    }
  }
  CHECK(improved > 0);  // the ILP changes the answer somewhere, so the comparison is not trivial
}

TEST_CASE("Context parallelism in the search: the best over the sizes tried, checked plan by plan",
          "[place][plan_search]") {
  // Llama 3 8B at 32K tokens on 16 H100s in FP8: the sizes tried are 1, 2 and 4.
  model::model m = model::with_sequence(zoo::get("llama3-8b"), 32768);
  const auto d = *hw::find_preset("h100-sxm");
  const auto c = phaze::test::cluster_of(d, 16);
  sched::schedule_cache cache;
  train::training_knobs base = batch(16);
  base.precision = hw::precision::fp8;
  base.fused_attention = true;
  base.distributed_optimizer = true;
  place::plan_choices fixed = even_split();
  fixed.context_parallel = {1, 2, 4};
  fixed.microbatches = {1};
  fixed.recompute = {model::recompute::none, model::recompute::full};
  const auto found = place::search_plans(m, c, base, fixed, cache);
  REQUIRE_FALSE(found.feasible.empty());
  const double best = found.feasible.front().estimate.time_per_batch.value();
  bool some_cp = false;
  for (const auto& r : found.feasible) {
    CHECK(r.parallel.devices() == 16);
    some_cp = some_cp || r.parallel.cp > 1;
  }
  CHECK(some_cp);
  // Every admissible plan with those sizes, evaluated on its own, is no faster than the best.
  int checked = 0;
  for (int cp : {1, 2, 4}) {
    for (int tp : {1, 2, 4, 8}) {
      for (int pp : {1, 2, 4}) {
        if (16 % (tp * pp * cp) != 0) continue;
        for (auto mode : {model::recompute::none, model::recompute::full}) {
          for (bool sp : {false, true}) {
            const train::parallelism p{tp, pp, 16 / (tp * pp * cp), cp};
            auto k = base;
            k.recompute = mode;
            k.sequence_parallel = sp;
            try {
              train::validate(m, p, k, 16);
            } catch (const input_error&) {
              continue;
            }
            const auto e = train::estimate_step(m, c, p, k, cache);
            if (!e.fits) continue;
            CHECK(best <= e.time_per_batch.value() * (1 + 1e-12));
            ++checked;
          }
        }
      }
    }
  }
  CHECK(checked > 10);
}
