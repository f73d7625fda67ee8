/// @file
/// Full plan evaluations per second: train::estimate_step of one fully specified plan (degrees, microbatch,
/// recomputation, sequence parallelism, stage split) with memory per stage, the step time and its breakdown,
/// from layer schedules already in the cache (the case of a sweep over plans). Calculon, the analytic peer
/// most users pick for this, evaluates about 160 plans per second on machines like these (its authors'
/// figure); phaze's `phaze plan` and the co-search evaluate each plan this way.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "phaze/cluster/presets.hpp"
#include "phaze/model/zoo.hpp"
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

}  // namespace
