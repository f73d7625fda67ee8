/// @file
/// The co-search: designs of PHAZE's default space evaluated per second (every knob setting placed by
/// chain_dp under the step-time model), one thread. Goal: the whole space for GPT-3 175B with all
/// knobs in under 10 minutes on 2 cores. The full sweep, with pruning, is `phaze search` (docs/search.md);
/// `search_all_designs` runs it here (excluded from the smoke run).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "phaze/hw/space.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/search/engine.hpp"

namespace {

using namespace phaze;

search::spec phaze_setting(const char* model) {
  search::spec s;
  s.model = zoo::get(model);
  return s;
}

/// One design at a time, spread over the whole space: the cost of an unpruned design.
void evaluate_design(benchmark::State& state, const char* model) {
  const auto s = phaze_setting(model);
  const auto designs = hw::spread_sample(s.space, 64);
  std::size_t next = 0;
  std::uint64_t configurations = 0;
  for (auto _ : state) {
    const auto r = search::evaluate_design(s, designs[next++ % designs.size()], 0);
    configurations += r.configurations;
    benchmark::DoNotOptimize(r.samples_per_s);
  }
  state.counters["designs/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["configurations/s"] =
      benchmark::Counter(static_cast<double>(configurations), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(evaluate_design, gpt3_175b, "gpt3-175b")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(evaluate_design, llama2_7b, "llama2-7b")->Unit(benchmark::kMillisecond);

/// The sound bound and the design order over the whole space.
void design_order(benchmark::State& state) {
  const auto s = phaze_setting("gpt3-175b");
  for (auto _ : state) benchmark::DoNotOptimize(search::design_order(s).size());
}
BENCHMARK(design_order)->Unit(benchmark::kMillisecond);

/// The whole search of PHAZE's setting on one thread, pruned by the sound bound or exhaustive (every design
/// of the space placed), on list schedules without the baselines (long: excluded from the smoke run). The
/// program's `phaze search [--exhaustive]` adds the ILP refinement, the baselines and the threads.
void search_all_designs(benchmark::State& state, bool exhaustive) {
  const auto s = phaze_setting("gpt3-175b");
  std::uint64_t evaluated = 0;
  for (auto _ : state) {
    search::options o;
    o.baselines = false;  // the search alone, as this benchmark has always measured it
    o.exhaustive = exhaustive;
    const auto sum = search::run(s, o);
    evaluated = sum.evaluated;
    benchmark::DoNotOptimize(sum.best.samples_per_s);
  }
  state.counters["evaluated"] = static_cast<double>(evaluated);
  state.counters["designs/s"] = benchmark::Counter(
      static_cast<double>(evaluated) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(search_all_designs, pruned, false)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(search_all_designs, exhaustive, true)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
