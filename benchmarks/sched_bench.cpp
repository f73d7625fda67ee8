// Intra-layer scheduling speed: the ILP and the list scheduler on every layer problem (forward and backward
// of each distinct layer of every zoo model), on the TPUv4-like reference and on a dozen PHAZE designs.
// Counters report the distribution of per-problem ILP solve times (the goal: median <= 50 ms).
#include <benchmark/benchmark.h>

#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/hw/space.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/sched/ilp.hpp>
#include <phaze/sched/layer_problem.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

namespace {
using namespace phaze;

/// The reference and a dozen designs spread over PHAZE's default space.
std::vector<hw::device> designs() {
  auto out = hw::spread_sample(hw::phaze_default_space, 12);
  out.insert(out.begin(), hw::tpuv4_like);
  return out;
}

std::vector<sched::problem> problems(const std::vector<hw::device>& devices) {
  // Tensor-parallel width 1: no collective runs, so no route is taken.
  const cluster::route tp1 = cluster::tensor_parallel_route(cluster::reference_node, 1);
  std::vector<sched::problem> out;
  for (const auto& d : devices)
    for (const auto& e : zoo::entries) {
      const auto m = model::make_model(e.config);
      for (const auto& kind : model::distinct_layers(m)) {
        const auto l = model::layer_at(m, static_cast<std::size_t>(kind.first_node), {1, 0, 1, false, 2});
        for (auto which : {sched::pass::forward, sched::pass::backward})
          out.push_back(sched::layer_problem(l, d, tp1, which));
      }
    }
  return out;
}

/// Solves every problem once per iteration; reports the median, 90th percentile and maximum solve time of
/// the last iteration, and how many problems the ILP had to solve (the rest met a lower bound).
void solve_all(benchmark::State& state, const std::vector<sched::problem>& set, bool ilp) {
  std::vector<double> times;
  std::vector<double> ilp_times;  // problems the ILP had to solve (no bound met by the list schedule)
  int solved_by_ilp = 0;
  for (auto _ : state) {
    times.clear();
    ilp_times.clear();
    solved_by_ilp = 0;
    for (const auto& p : set) {
      const auto start = std::chrono::steady_clock::now();
      sched::ilp_report report;
      const auto s = ilp ? sched::ilp_schedule(p, {}, &report) : sched::list_schedule(p);
      benchmark::DoNotOptimize(s.makespan);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (ilp && !report.skipped) ilp_times.push_back(times.back());
    }
  }
  std::sort(times.begin(), times.end());
  std::sort(ilp_times.begin(), ilp_times.end());
  solved_by_ilp = static_cast<int>(ilp_times.size());
  state.counters["problems"] = static_cast<double>(set.size());
  state.counters["ilp_solved"] = solved_by_ilp;
  if (!ilp_times.empty()) state.counters["ilp_median_ms"] = 1e3 * ilp_times[ilp_times.size() / 2];
  state.counters["median_ms"] = 1e3 * times[times.size() / 2];
  state.counters["p90_ms"] = 1e3 * times[times.size() * 9 / 10];
  state.counters["max_ms"] = 1e3 * times.back();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * set.size()));
}

const auto reference_problems = problems({hw::tpuv4_like});

void ilp_reference(benchmark::State& state) {
  solve_all(state, reference_problems, true);
}
BENCHMARK(ilp_reference)->Unit(benchmark::kMillisecond);

void list_reference(benchmark::State& state) {
  solve_all(state, reference_problems, false);
}
BENCHMARK(list_reference)->Unit(benchmark::kMillisecond);

/// Every zoo model on every design: one iteration, for the distribution (takes minutes).
void ilp_all_designs(benchmark::State& state) {
  static const auto all = problems(designs());
  solve_all(state, all, true);
}
BENCHMARK(ilp_all_designs)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
