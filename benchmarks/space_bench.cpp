// Enumerating accelerator spaces: PHAZE's default space (227,136 raw points, 38,451 within the area bounds)
// by iterator, for_each, count() and at(i), against filtering the raw grid by brute force.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "phaze/hw/space.hpp"

namespace {
using namespace phaze;
const hw::space& default_space() {
  return hw::phaze_default_space;
}

void enumerate_default_space(benchmark::State& state) {
  std::uint64_t n = 0;
  for (auto _ : state) {
    n = 0;
    for (const hw::device& d : default_space()) {
      benchmark::DoNotOptimize(d.systolic.num_tc);
      ++n;
    }
  }
  state.counters["designs"] = static_cast<double>(n);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(enumerate_default_space)->Unit(benchmark::kMillisecond);

void for_each_default_space(benchmark::State& state) {
  std::uint64_t n = 0;
  for (auto _ : state) {
    n = 0;
    default_space().for_each([&](const hw::device& d) {
      benchmark::DoNotOptimize(d.systolic.num_tc);
      ++n;
    });
  }
  state.counters["designs"] = static_cast<double>(n);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(for_each_default_space)->Unit(benchmark::kMillisecond);

void count_default_space(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(default_space().count());
}
BENCHMARK(count_default_space)->Unit(benchmark::kMicrosecond);

void random_access_default_space(benchmark::State& state) {
  const std::uint64_t n = default_space().count();
  std::uint64_t i = 0;
  for (auto _ : state) {
    i = (i * 6364136223846793005ull + 1442695040888963407ull) % n;
    benchmark::DoNotOptimize(default_space().at(i).systolic.num_tc);
  }
}
BENCHMARK(random_access_default_space)->Unit(benchmark::kMicrosecond);

/// The baseline: every raw grid point, its area computed and filtered, no pruning.
void brute_force_default_space(benchmark::State& state) {
  const hw::space& s = default_space();
  const auto& tcs = s.values(hw::axis::tensor_cores);
  const auto& widths = s.values(hw::axis::tc_width);
  const auto& depths = s.values(hw::axis::tc_depth);
  const auto& vcs = s.values(hw::axis::vector_cores);
  const auto& glbs = s.values(hw::axis::global_buffer);
  const auto& hbms = s.values(hw::axis::hbm);
  std::uint64_t n = 0;
  for (auto _ : state) {
    n = 0;
    for (double tc : tcs)
      for (double w : widths)
        for (double d : depths)
          for (double vc : vcs)
            for (double glb : glbs)
              for (double hbm : hbms) {
                hw::systolic_design sd = s.base().systolic;
                sd.num_tc = static_cast<int>(tc);
                sd.tc_width = static_cast<int>(w);
                sd.tc_depth = static_cast<int>(d);
                sd.num_vc = static_cast<int>(vc);
                sd.vc_width = static_cast<int>(w);
                sd.glb = bytes{glb};
                benchmark::DoNotOptimize(hbm);
                if (s.admits(sd)) ++n;
              }
  }
  state.counters["designs"] = static_cast<double>(n);
}
BENCHMARK(brute_force_default_space)->Unit(benchmark::kMillisecond);
}  // namespace
