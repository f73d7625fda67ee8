/// @file
/// Full plan evaluations per second: train::estimate_step of one fully specified plan (degrees, microbatch,
/// recomputation, sequence parallelism, stage split) with memory per stage, the step time and its breakdown,
/// from layer schedules already in the cache (the case of a sweep over plans). Calculon, the analytic peer
/// most users pick for this, evaluates about 160 plans per second on machines like these (its authors'
/// figure); phaze's `phaze plan` and the co-search evaluate each plan this way.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "phaze/cluster/presets.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/place/plan_evaluator.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

namespace {

using namespace phaze;

struct plan_case {
  train::parallelism parallel;
  train::training_knobs knobs;
};

/// GPT-3 175B on 1024 A100-80GB, global batch 1536: every admissible (tp, pp, dp) with tp in 1..8, pp
/// dividing the 96 blocks, microbatch 1 or 2, each recomputation mode, sequence parallelism when tp > 1.
std::vector<plan_case> gpt3_plans(const model::model& m) {
  std::vector<plan_case> out;
  for (const int tp : {1, 2, 4, 8}) {
    for (const int pp : {1, 2, 4, 8, 16, 32}) {
      const int dp = 1024 / (tp * pp);
      for (const std::int64_t mb : {1, 2}) {
        for (const auto mode : train::all_recompute_modes) {
          train::training_knobs k;
          k.global_batch = 1536;
          k.microbatch = mb;
          k.recompute = mode;
          k.sequence_parallel = tp > 1;
          const train::parallelism p{tp, pp, dp};
          try {
            train::validate(m, p, k, 1024);
          } catch (const input_error&) {
            continue;
          }
          out.push_back({p, k});
        }
      }
    }
  }
  return out;
}

void estimate_step_gpt3_175b(benchmark::State& state) {
  const auto m = model::with_vocab(zoo::get("gpt3-175b"), 51200);
  const auto cluster = cluster::preset_cluster("a100-80gb", 1024);
  const auto plans = gpt3_plans(m);
  const sched::schedule_cache cache;
  for (const auto& p : plans) (void)train::estimate_step(m, cluster, p.parallel, p.knobs, cache);  // warm
  std::size_t next = 0;
  double fits = 0.0;
  for (auto _ : state) {
    const auto& p = plans[next++ % plans.size()];
    const auto e = train::estimate_step(m, cluster, p.parallel, p.knobs, cache);
    fits += e.fits ? 1.0 : 0.0;
    benchmark::DoNotOptimize(e);
  }
  state.counters["plans/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["distinct_plans"] = static_cast<double>(plans.size());
  state.counters["fit_share"] = fits / static_cast<double>(state.iterations());
}
BENCHMARK(estimate_step_gpt3_175b)->Unit(benchmark::kMicrosecond);

/// The same plans evaluated as a sweep evaluates many plans of one model: place::plan_evaluator, one per
/// (tp, knob setting) built once outside the loop from the model's tables, each plan's stages (Megatron-LM's
/// uniform split: the embedding with the first stage, the head with the last) given as stage starts. Each
/// evaluation is the time per batch, the peak memory and whether it fits, equal to estimate_step's
/// (tests/place/plan_evaluator_test.cpp), without its breakdown and per-stage report.
void plan_evaluator_gpt3_175b(benchmark::State& state) {
  const auto m = model::with_vocab(zoo::get("gpt3-175b"), 51200);
  const auto cluster = cluster::preset_cluster("a100-80gb", 1024);
  const auto plans = gpt3_plans(m);
  const sched::schedule_cache cache;
  struct prepared {
    place::plan_evaluator eval;
    std::vector<std::size_t> first;
    int dp;
  };
  std::vector<prepared> ready;
  for (const auto& p : plans) {
    std::vector<std::size_t> first{0};
    const std::int64_t blocks = model::body_nodes(m);
    for (int i = 1; i < p.parallel.pp; ++i)
      first.push_back(static_cast<std::size_t>(1 + i * blocks / p.parallel.pp));
    ready.push_back({place::plan_evaluator{place::model_tables(m, cluster, p.knobs, {p.parallel.tp}, cache)},
                     std::move(first), p.parallel.dp});
  }
  std::size_t next = 0;
  double fits = 0.0;
  for (auto _ : state) {
    const prepared& p = ready[next++ % ready.size()];
    const place::plan_evaluation e = p.eval(p.first, p.dp);
    fits += e.fits ? 1.0 : 0.0;
    benchmark::DoNotOptimize(e);
  }
  state.counters["plans/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["distinct_plans"] = static_cast<double>(ready.size());
  state.counters["fit_share"] = fits / static_cast<double>(state.iterations());
}
BENCHMARK(plan_evaluator_gpt3_175b)->Unit(benchmark::kMicrosecond);

}  // namespace
