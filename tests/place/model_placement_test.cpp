// One timing and memory model for estimate_step and the placers: step_policy on a model's tables gives,
// for any split, exactly estimate_step's time and place/memory.hpp's memory; chain_dp under it equals the
// brute-force oracle on a small model, and its uneven plans are never slower than the best uniform plan.
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/brute_force.hpp>
#include <phaze/place/downset_dp.hpp>
#include <phaze/place/model_placement.hpp>
#include <phaze/place/plan_search.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <random>
#include <vector>

using namespace phaze;

namespace {
/// GPT-2 with `blocks` blocks: small enough for brute force.
model::model gpt2_of(int blocks) {
  model::model m = zoo::get("gpt2");
  m.config.layers = blocks;
  return model::make_model(m.config);
}

train::training_knobs placement_knobs(std::int64_t global_batch, std::int64_t microbatch,
                                      model::recompute mode, bool sp) {
  train::training_knobs k;
  k.global_batch = global_batch;
  k.microbatch = microbatch;
  k.recompute = mode;
  k.sequence_parallel = sp;
  return k;
}

/// Node sets of a split given as blocks per stage (embedding on the first stage, head on the last).
std::vector<std::vector<std::size_t>> node_sets(const std::vector<train::stage_layers>& split) {
  std::vector<std::vector<std::size_t>> out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    std::vector<std::size_t> nodes;
    const std::size_t count =
        static_cast<std::size_t>(split[i].blocks) + (split[i].embedding ? 1 : 0) + (split[i].head ? 1 : 0);
    for (std::size_t j = 0; j < count; ++j) nodes.push_back(next++);
    out.push_back(nodes);
  }
  return out;
}

/// A random split of `blocks` blocks into `stages` stages, each with at least one block.
std::vector<train::stage_layers> random_split(std::mt19937& rng, std::int64_t blocks, int stages) {
  std::vector<train::stage_layers> split(static_cast<std::size_t>(stages),
                                         train::stage_layers{1, false, false});
  for (std::int64_t b = stages; b < blocks; ++b) {
    ++split[std::uniform_int_distribution<std::size_t>(0, split.size() - 1)(rng)].blocks;
  }
  split.front().embedding = true;
  split.back().head = true;
  return split;
}

/// The uniform split of `pp` stages (trial 0), else a random one.
std::vector<train::stage_layers> split_for(int trial, std::mt19937& rng, const model::model& m, int pp) {
  if (trial != 0) return random_split(rng, m.config.layers, pp);
  std::vector<train::stage_layers> split;
  for (int i = 0; i < pp; ++i) split.push_back(train::uniform_stage(m, pp, i));
  return split;
}

/// step_policy on `mp`'s first table against estimate_step on cluster `c` for plan `p` and `split`: the
/// time per batch, every stage's memory and the peak.
void check_policy_against_estimate(const model::model& m, const cluster::cluster& c,
                                   const place::model_problem& mp, const train::parallelism& p,
                                   const train::training_knobs& k, const sched::schedule_cache& cache,
                                   const std::vector<train::stage_layers>& split) {
  const auto e = train::estimate_step(m, c, p, k, cache, split);
  const auto planned =
      place::evaluate(mp.problem, mp.problem.tables.front(), p.dp, node_sets(split), mp.policy);
  CHECK(planned.time_per_batch.value() == Approx(e.time_per_batch.value()).epsilon(1e-9));
  REQUIRE(planned.stages.size() == e.stages.size());
  for (std::size_t i = 0; i < e.stages.size(); ++i) {
    CHECK(planned.stages[i].memory.value() == Approx(e.stages[i].memory.value()).epsilon(1e-9));
  }
  CHECK(planned.peak_memory.value() == Approx(e.peak_memory.value()).epsilon(1e-9));
}

/// Places `mp` with chain_dp, downset_dp and brute force at each memory capacity and checks that both DPs
/// find the oracle's time (every device used: `devices` of the placers' own count), or when nothing fits,
/// its smallest memory need. Returns how many capacities had a feasible plan.
int check_against_brute_force(place::model_problem mp, std::initializer_list<double> capacities_gib,
                              int devices) {
  int feasible = 0;
  for (const double capacity_gib : capacities_gib) {
    INFO("capacity " << capacity_gib << " GiB");
    mp.problem.memory_per_device = bytes{capacity_gib * 1024.0 * 1024.0 * 1024.0};
    const auto chain = place::chain_dp(mp.problem, mp.policy).use_all_devices(true).run();
    const auto downset = place::downset_dp(mp.problem, mp.policy).use_all_devices(true).run();
    const auto oracle = place::brute_force(mp.problem, mp.policy).use_all_devices(true).run();
    REQUIRE(chain.feasible == oracle.feasible);
    REQUIRE(downset.feasible == oracle.feasible);
    if (oracle.feasible) {
      CHECK(chain.time_per_batch.value() == Approx(oracle.time_per_batch.value()).epsilon(1e-12));
      CHECK(downset.time_per_batch.value() == Approx(oracle.time_per_batch.value()).epsilon(1e-12));
      CHECK(chain.devices_used() == devices);
      ++feasible;
    } else {
      CHECK(chain.smallest_memory_need.value() == Approx(oracle.smallest_memory_need.value()).epsilon(1e-12));
    }
  }
  return feasible;
}
}  // namespace

TEST_CASE("step_policy on a model's tables equals estimate_step and memory.hpp for any split",
          "[place][model_placement]") {
  const auto m = zoo::get("gpt3-175b");
  std::mt19937 rng(5);
  sched::schedule_cache cache;
  int compared = 0;
  for (const char* device : {"a100-80gb", "h100-sxm", "tpuv4-like"}) {
    const auto d = *hw::find_preset(device);
    for (const auto mode : {model::recompute::none, model::recompute::selective, model::recompute::full}) {
      for (const bool sp : {false, true}) {
        for (const bool distributed : {false, true}) {
          auto k = placement_knobs(512, 1, mode, sp);
          k.distributed_optimizer = distributed;
          k.opt = distributed ? train::optimizer::adam : train::optimizer::sgd;
          const int tp = 8;
          const auto mp = place::model_tables(m, phaze::test::cluster_of(d, 1024), k, {tp}, cache);
          REQUIRE(mp.problem.tables.front().nodes.size() == 98);
          for (const int pp : {1, 2, 8, 16}) {
            const int dp = 1024 / (tp * pp) > 16 ? 16 : 1024 / (tp * pp);
            const train::parallelism p{tp, pp, dp};
            for (int trial = 0; trial < 2; ++trial) {
              check_policy_against_estimate(m, phaze::test::cluster_of(d, p), mp, p, k, cache,
                                            split_for(trial, rng, m, pp));
              ++compared;
            }
          }
        }
      }
    }
  }
  CHECK(compared == 3 * 3 * 2 * 2 * 4 * 2);
}

TEST_CASE("on one device type every split's stage times add up to the same", "[place][model_placement]") {
  // What keeps the placers exact under the pipeline (m - 1) t_max + sum_i t_i: for a fixed (tp, pp, dp) the
  // sum is the table's work plus pp equal sends (every stage sends a block's output, whatever it holds), so
  // the split with the least slowest stage is the fastest. Checked on random splits against estimate_step.
  const auto m = zoo::get("gpt3-175b");
  const auto d = *hw::find_preset("a100-80gb");
  std::mt19937 rng(11);
  sched::schedule_cache cache;
  const auto k = placement_knobs(512, 1, model::recompute::selective, true);
  const auto mp = place::model_tables(m, phaze::test::cluster_of(d, 1024), k, {8}, cache);
  const auto& table = mp.problem.tables.front();
  for (const int pp : {2, 8, 16}) {
    const train::parallelism p{8, pp, 8};
    const auto c = phaze::test::cluster_of(d, p);
    double first = 0.0;
    for (int trial = 0; trial < 6; ++trial) {
      const auto split = random_split(rng, m.config.layers, pp);
      const auto planned = place::evaluate(mp.problem, table, p.dp, node_sets(split), mp.policy);
      const auto e = train::estimate_step(m, c, p, k, cache, split);
      double sum = 0.0;
      double estimated = 0.0;
      double slowest = 0.0;
      for (std::size_t i = 0; i < planned.stages.size(); ++i) {
        sum += planned.stages[i].time.value();
        estimated += e.stages[i].per_microbatch().value();
        slowest = std::max(slowest, planned.stages[i].time.value());
      }
      if (trial == 0) first = sum;
      INFO("pp " << pp << " trial " << trial);
      CHECK(sum == Approx(first).epsilon(1e-12));
      CHECK(estimated == Approx(sum).epsilon(1e-12));
      // The largest stage cost is the pipeline: (m - 1) t_max + sum, the slowest stage's cost.
      double largest = 0.0;
      for (const auto& st : planned.stages) largest = std::max(largest, st.cost.value());
      CHECK(largest ==
            Approx(static_cast<double>(planned.microbatches_per_replica - 1) * slowest + sum).epsilon(1e-12));
      CHECK(e.breakdown.bubble.value() == Approx(sum - slowest).epsilon(1e-12));
    }
  }
}

TEST_CASE("chain_dp and downset_dp under step_policy equal brute force on a small model",
          "[place][model_placement]") {
  // A six-block GPT: eight nodes, small enough for brute force over every split.
  const model::model m = gpt2_of(6);
  const auto d = *hw::find_preset("a100-40gb");
  sched::schedule_cache cache;
  int compared = 0;
  for (const auto mode : {model::recompute::none, model::recompute::full}) {
    for (const std::int64_t batch : {8, 64}) {
      const auto k = placement_knobs(batch, 2, mode, false);
      check_against_brute_force(place::model_tables(m, phaze::test::cluster_of(d, 16), k, {1, 2, 4}, cache),
                                {40.0, 1.2, 0.9}, 16);
      ++compared;
    }
  }
  CHECK(compared == 4);
}

TEST_CASE("Uneven placement is never slower than the best uniform plan and its time is estimate_step's",
          "[place][model_placement]") {
  const auto m = model::with_vocab(zoo::get("gpt3-175b"), 51200);
  const auto d = *hw::find_preset("a100-80gb");
  sched::schedule_cache cache;
  train::training_knobs base;
  base.global_batch = 64;
  place::plan_choices choices;
  choices.placement = place::stage_placement::uniform;
  choices.max_microbatch = 2;
  const auto uniform = place::search_plans(m, phaze::test::cluster_of(d, 64), base, choices, cache);
  choices.placement = place::stage_placement::uneven;
  const auto uneven = place::search_plans(m, phaze::test::cluster_of(d, 64), base, choices, cache);
  REQUIRE_FALSE(uniform.feasible.empty());
  REQUIRE_FALSE(uneven.feasible.empty());
  const auto& best = uneven.feasible.front();
  CHECK(best.estimate.time_per_batch <= uniform.feasible.front().estimate.time_per_batch);
  // Every uneven plan is at least as fast as every uniform plan with the same tp and knobs.
  for (const auto& u : uneven.feasible) {
    for (const auto& f : uniform.feasible) {
      if (f.parallel.tp == u.parallel.tp && f.knobs == u.knobs) {
        CHECK(u.estimate.time_per_batch.value() <= f.estimate.time_per_batch.value() * (1 + 1e-12));
      }
    }
  }
  // The reported split is a partition of the model, and estimate_step of it gives the reported time.
  std::int64_t blocks = 0;
  for (const auto& s : best.split) blocks += s.blocks;
  CHECK(blocks == m.config.layers);
  CHECK(best.split.front().embedding);
  CHECK(best.split.back().head);
  const auto again = train::estimate_step(m, phaze::test::cluster_of(d, best.parallel), best.parallel,
                                          best.knobs, cache, best.split);
  CHECK(again.time_per_batch.value() == Approx(best.estimate.time_per_batch.value()).epsilon(1e-12));
  CHECK(best.parallel.devices() == 64);
}

TEST_CASE("Under context parallelism step_policy on a model's tables equals estimate_step for any split",
          "[place][model_placement][cp]") {
  // Llama 3 8B at 32K tokens in FP8 on 64 H100s: the tables of one rank of a context-parallel group
  // (each sequence split over cp ranks, ring attention on their links) placed on 64 / cp groups.
  const model::model m = model::with_sequence(zoo::get("llama3-8b"), 32768);
  const auto d = *hw::find_preset("h100-sxm");
  const auto c = phaze::test::cluster_of(d, 64);
  std::mt19937 rng(23);
  sched::schedule_cache cache;
  int compared = 0;
  for (const int cp : {2, 4, 8}) {
    for (const int tp : {1, 2}) {
      for (const bool distributed : {false, true}) {
        auto k =
            placement_knobs(64, 1, distributed ? model::recompute::full : model::recompute::none, tp > 1);
        k.precision = hw::precision::fp8;
        k.fused_attention = true;
        k.distributed_optimizer = distributed;
        const auto mp = place::model_tables(m, c, k, {tp}, cache, cp);
        CHECK(mp.problem.devices == 64 / cp);
        for (const int pp : {1, 2, 4}) {
          const train::parallelism p{tp, pp, 64 / (tp * pp * cp), cp};
          train::validate(m, p, k, 64);
          for (int trial = 0; trial < 2; ++trial) {
            INFO("cp " << cp << " tp " << tp << " pp " << pp << " trial " << trial);
            check_policy_against_estimate(m, c, mp, p, k, cache, split_for(trial, rng, m, pp));
            ++compared;
          }
        }
      }
    }
  }
  CHECK(compared == 3 * 2 * 2 * 3 * 2);
}

TEST_CASE("Under context parallelism chain_dp and downset_dp equal brute force on a small model",
          "[place][model_placement][cp]") {
  // A six-block GPT-2 with fused attention on 16 A100s, its sequence split over 2 and 4 ranks: the placers
  // place 16 / cp groups of cp ranks.
  const model::model m = gpt2_of(6);
  const auto d = *hw::find_preset("a100-40gb");
  sched::schedule_cache cache;
  int feasible = 0;
  for (const int cp : {2, 4}) {
    for (const auto mode : {model::recompute::none, model::recompute::full}) {
      auto k = placement_knobs(32, 2, mode, false);
      k.fused_attention = true;
      INFO("cp " << cp);
      feasible += check_against_brute_force(
          place::model_tables(m, phaze::test::cluster_of(d, 16), k, {1, 2}, cache, cp), {40.0, 0.8, 0.5},
          16 / cp);
    }
  }
  CHECK(feasible >= 4);
}

TEST_CASE("Uneven placement with context parallelism: never slower than uniform, estimate_step's time",
          "[place][model_placement][cp]") {
  const model::model m = model::with_sequence(zoo::get("llama3-8b"), 32768);
  const auto d = *hw::find_preset("h100-sxm");
  const auto c = phaze::test::cluster_of(d, 32);
  sched::schedule_cache cache;
  train::training_knobs base;
  base.global_batch = 32;
  base.precision = hw::precision::fp8;
  base.fused_attention = true;
  base.distributed_optimizer = true;
  place::plan_choices choices;
  choices.placement = place::stage_placement::uniform;
  choices.context_parallel = {1, 2, 4};
  choices.microbatches = {1};
  choices.recompute = {model::recompute::none, model::recompute::full};
  const auto uniform = place::search_plans(m, c, base, choices, cache);
  choices.placement = place::stage_placement::uneven;
  const auto uneven = place::search_plans(m, c, base, choices, cache);
  REQUIRE_FALSE(uniform.feasible.empty());
  REQUIRE_FALSE(uneven.feasible.empty());
  CHECK(uneven.feasible.front().estimate.time_per_batch <= uniform.feasible.front().estimate.time_per_batch);
  bool some_cp = false;
  int compared = 0;
  for (const auto& u : uneven.feasible) {
    CHECK(u.parallel.devices() == 32);
    some_cp = some_cp || u.parallel.cp > 1;
    // Its time is estimate_step's for its split.
    const auto again = train::estimate_step(m, c, u.parallel, u.knobs, cache, u.split);
    CHECK(again.time_per_batch.value() == Approx(u.estimate.time_per_batch.value()).epsilon(1e-12));
    for (const auto& f : uniform.feasible) {
      if (f.parallel.tp == u.parallel.tp && f.parallel.cp == u.parallel.cp && f.knobs == u.knobs) {
        CHECK(u.estimate.time_per_batch.value() <= f.estimate.time_per_batch.value() * (1 + 1e-12));
        ++compared;
      }
    }
  }
  CHECK(some_cp);
  CHECK(compared > 5);
  // Expert parallelism stays with the uniform placement, said so.
  choices.expert_parallel = {2};
  CHECK_THROWS_WITH(place::search_plans(m, c, base, choices, cache),
                    Catch::Contains("expert parallelism above 1 needs the uniform placement"));
}

TEST_CASE("chain_dp cut off just above the oracle's time finds that time, and just below it nothing",
          "[place][model_placement][cutoff]") {
  // A cutoff makes chain_dp skip every stage end no partition below it can use (chain_dp::stage_ends):
  // tight cutoffs, tight memory (each stage's own in-flight microbatches) and context parallelism exercise
  // it against brute force, which tries every split.
  const model::model m = gpt2_of(7);
  const auto d = *hw::find_preset("a100-40gb");
  sched::schedule_cache cache;
  int found = 0;
  for (const int cp : {1, 2}) {
    for (const auto mode : {model::recompute::none, model::recompute::selective, model::recompute::full}) {
      for (const std::int64_t microbatch : {1, 4}) {
        auto k = placement_knobs(64, microbatch, mode, false);
        k.fused_attention = true;
        auto mp = place::model_tables(m, phaze::test::cluster_of(d, 16), k, {1, 2, 4}, cache, cp);
        for (const double capacity_gib : {40.0, 2.0, 1.0, 0.7, 0.5}) {
          INFO("cp " << cp << ", microbatch " << microbatch << ", capacity " << capacity_gib << " GiB");
          mp.problem.memory_per_device = bytes{capacity_gib * 1024.0 * 1024.0 * 1024.0};
          const auto oracle = place::brute_force(mp.problem, mp.policy).use_all_devices(true).run();
          if (!oracle.feasible) continue;
          const double best = oracle.time_per_batch.value();
          const auto above = place::chain_dp(mp.problem, mp.policy)
                                 .use_all_devices(true)
                                 .cutoff(seconds{best * (1.0 + 1e-9)})
                                 .run();
          REQUIRE(above.feasible);
          CHECK(above.time_per_batch.value() == Approx(best).epsilon(1e-12));
          const auto free = place::chain_dp(mp.problem, mp.policy).use_all_devices(true).run();
          CHECK(free.stages.size() == above.stages.size());
          for (std::size_t i = 0; i < free.stages.size() && i < above.stages.size(); ++i)
            CHECK(free.stages[i].nodes == above.stages[i].nodes);  // the same split, ties included
          const auto at = place::chain_dp(mp.problem, mp.policy)
                              .use_all_devices(true)
                              .cutoff(seconds{best * (1.0 - 1e-9)})
                              .run();
          CHECK(!at.feasible);
          CHECK(at.above_cutoff);
          ++found;
        }
      }
    }
  }
  CHECK(found >= 30);
}
