// Tests of phaze/place/plan_evaluator.hpp: a plan evaluated from prefix sums equals place::evaluate on the
// same stages (the placers' oracle) and train::estimate_step on the same split, for every split of small
// models and random splits of large ones, on one device type and on two; bad plans are refused.
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/plan_evaluator.hpp>

#include <catch2/catch.hpp>

#include "../support/splits.hpp"

#include <algorithm>
#include <cstddef>
#include <random>
#include <vector>

using namespace phaze;

namespace {
/// The evaluator's answer for the stages `cuts` (first nodes of stages 1..) equals place::evaluate's and
/// estimate_step's.
void check_split(const model::model& m, const cluster::cluster& c, const train::training_knobs& k,
                 const place::model_problem& mp, const place::plan_evaluator& eval,
                 const std::vector<std::size_t>& cuts, int dp, const sched::schedule_cache& cache) {
  std::vector<std::size_t> first{0};
  first.insert(first.end(), cuts.begin(), cuts.end());
  const place::plan_evaluation fast = eval(first, dp);
  // Each stage on the table of the type that times it (on one device type, the only one).
  const place::stage_context context{eval.tp(), static_cast<int>(first.size()), dp,
                                     mp.problem.microbatches / dp};
  const auto table_of = [&](int stage) -> const place::cost_table& {
    return mp.problem.tables[place::stage_table_of(mp.policy, 0, stage, context)];
  };
  const place::plan oracle = place::evaluate_stages(mp.problem, mp.problem.tables[0], table_of, dp,
                                                    test::node_sets_of(cuts, eval.nodes()), mp.policy);
  INFO("pp " << first.size() << " dp " << dp << " first stage ends at " << (cuts.empty() ? 0 : cuts[0]));
  CHECK(fast.time_per_batch.value() == Approx(oracle.time_per_batch.value()).epsilon(1e-12));
  CHECK(fast.peak_memory.value() == Approx(oracle.peak_memory.value()).epsilon(1e-12));
  CHECK(fast.fits == oracle.feasible);
  const train::parallelism p{eval.tp(), static_cast<int>(first.size()), dp};
  const auto e = train::estimate_step(m, c, p, k, cache, test::stages_of(cuts, eval.nodes()));
  CHECK(fast.time_per_batch.value() == Approx(e.time_per_batch.value()).epsilon(1e-9));
  CHECK(fast.fits == e.fits);
}

train::training_knobs knobs_of(model::recompute mode, bool distributed) {
  train::training_knobs k;
  k.global_batch = 64;
  k.microbatch = 2;
  k.recompute = mode;
  k.distributed_optimizer = distributed;
  k.overlap_grad_reduce = distributed;
  k.overlap_param_gather = distributed;
  return k;
}
}  // namespace

TEST_CASE("plan_evaluator equals place::evaluate and estimate_step on every split of GPT-2",
          "[place][plan_evaluator]") {
  const model::model m = model::with_sequence(zoo::get("gpt2"), 512);
  const sched::schedule_cache cache;
  const cluster::cluster one = cluster::preset_cluster("a100-80gb", 16);
  const cluster::cluster two{{{*hw::find_preset("h100-sxm"), 8, cluster::node_of("h100-sxm")},
                              {*hw::find_preset("a100-40gb"), 8, cluster::node_of("a100-40gb")}}};
  int compared = 0;
  for (const cluster::cluster* c : {&one, &two}) {
    for (const auto mode : train::all_recompute_modes) {
      for (const bool distributed : {false, true}) {
        const auto k = knobs_of(mode, distributed);
        for (const int tp : {1, 2}) {
          const auto mp = place::model_tables(m, *c, k, {tp}, cache);
          const place::plan_evaluator eval{mp};
          for (const std::size_t pp : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
            const int dp = c->devices() / (tp * static_cast<int>(pp));
            test::for_each_split(eval.nodes(), pp, [&](const std::vector<std::size_t>& cuts) {
              check_split(m, *c, k, mp, eval, cuts, dp, cache);
              ++compared;
            });
          }
        }
      }
    }
  }
  CHECK(compared == 2 * 3 * 2 * 2 * (1 + 13 + 286));  // every split of the 14 nodes into 1, 2 and 4 stages
}

TEST_CASE("plan_evaluator on GPT-3 175B: random splits over 1024 GPUs", "[place][plan_evaluator]") {
  const model::model m = model::with_vocab(zoo::get("gpt3-175b"), 51200);
  const sched::schedule_cache cache;
  const cluster::cluster c = cluster::preset_cluster("h100-sxm", 1024);
  train::training_knobs k = knobs_of(model::recompute::selective, true);
  k.global_batch = 1536;
  k.microbatch = 1;
  k.sequence_parallel = true;
  const auto mp = place::model_tables(m, c, k, {8}, cache);
  const place::plan_evaluator eval{mp};
  std::mt19937_64 rng(5);
  for (const int pp : {2, 8, 16, 32}) {
    for (int trial = 0; trial < 10; ++trial) {
      // pp - 1 distinct cuts among nodes 1 .. 97, in order.
      std::vector<std::size_t> cuts;
      while (cuts.size() + 1 < static_cast<std::size_t>(pp)) {
        const std::size_t cut = 1 + rng() % (eval.nodes() - 1);
        if (std::find(cuts.begin(), cuts.end(), cut) == cuts.end()) cuts.push_back(cut);
      }
      std::sort(cuts.begin(), cuts.end());
      check_split(m, c, k, mp, eval, cuts, 1024 / (8 * pp), cache);
    }
  }
}

TEST_CASE("plan_evaluator refuses plans that do not fit the problem", "[place][plan_evaluator]") {
  const model::model m = zoo::get("gpt2");
  const auto c = cluster::preset_cluster("a100-80gb", 16);
  const auto mp = place::model_tables(m, c, knobs_of(model::recompute::none, false), {1, 2}, {});
  const place::plan_evaluator eval{mp, 1};
  CHECK(eval.tp() == 2);
  const std::vector<std::size_t> two{0, 7};
  CHECK_THROWS_WITH(eval(two, 3), Catch::Contains("does not divide the 32 microbatches"));
  CHECK_THROWS_WITH(eval(two, 8), Catch::Contains("exceeds the 16 devices"));
  CHECK_THROWS_WITH(eval(std::vector<std::size_t>{1, 7}, 4), Catch::Contains("start at node 0"));
  CHECK_THROWS_WITH(eval(std::vector<std::size_t>{0, 7, 7}, 2), Catch::Contains("must increase"));
  CHECK_THROWS_WITH(eval(std::vector<std::size_t>{0, 14}, 4), Catch::Contains("below the 14 nodes"));
  CHECK_THROWS_WITH((place::plan_evaluator{mp, 2}), Catch::Contains("no tables for width 2"));
  CHECK_NOTHROW(eval(two, 4));
}
