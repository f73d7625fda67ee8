// How fast phaze costs ops: op-cost evaluations per second (items_per_second) for the ops of GPT-3 layers
// (matmuls, batched matmuls, vector ops, collectives; forward and backward; tensor-parallel widths 1 and 8)
// on the TPUv4-like design, on random systolic designs, and on a datasheet A100. The goal for the systolic
// mapper is at least one million evaluations per second on one core.
#include <benchmark/benchmark.h>

#include <phaze/cluster/presets.hpp>
#include <phaze/cost/op_cost.hpp>
#include <phaze/cost/reference_mapper.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>

#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace phaze;
using namespace phaze::literals;

/// Every op of GPT-3's embedding, block and head layers, forward and backward, at tp 1 and 8.
std::vector<model::op> gpt3_ops() {
  const auto config = zoo::find("gpt3-175b")->config;
  std::vector<model::op> ops;
  for (const int tp : {1, 8}) {
    for (const auto role :
         {model::layer_role::embedding, model::layer_role::block, model::layer_role::head}) {
      const auto l = model::make_layer(config, role, {1, 0, tp, false, 2});
      for (const auto& o : l.ops) ops.push_back(o);
      for (const auto& o : model::backward(l)) ops.push_back(o);
    }
  }
  return ops;
}

std::vector<model::op> gpt3_gemms() {
  std::vector<model::op> out;
  for (const auto& o : gpt3_ops())
    if (model::unit_of(o) == model::unit::tensor) out.push_back(o);
  return out;
}

/// Random systolic designs drawn from PHAZE's search space (docs/space.md): powers of two for core
/// counts, array sides, vector widths and GLB sizes; HBM from 32 to 80 GiB-class bandwidths.
std::vector<hw::device> random_designs(int count) {
  std::mt19937_64 rng{31};
  auto pow2 = [&](int lo_log, int hi_log) {
    return 1 << std::uniform_int_distribution<int>{lo_log, hi_log}(rng);
  };
  std::vector<hw::device> out;
  for (int i = 0; i < count; ++i) {
    hw::device d = hw::tpuv4_like;
    d.systolic.num_tc = pow2(0, 12);
    d.systolic.tc_width = pow2(1, 8);
    d.systolic.tc_depth = pow2(1, 8);
    d.systolic.num_vc = pow2(0, 12);
    d.systolic.vc_width = d.systolic.tc_width;
    d.systolic.glb = bytes{static_cast<double>(pow2(21, 27))};
    d.hbm_bandwidth = bytes_per_second{std::uniform_real_distribution<double>{0.6e12, 3.3e12}(rng)};
    out.push_back(d);
  }
  return out;
}

/// The route of the GPT-3 op mix's tensor-parallel collectives (8 devices in a TPU v4 host's links).
const cluster::route tp8 = cluster::tensor_parallel_route(cluster::reference_node, 8);

/// cost_of over the GPT-3 op mix on one device.
void op_cost_gpt3_mix(benchmark::State& state, hw::device d) {
  const auto ops = gpt3_ops();
  for (auto _ : state) {
    for (const auto& o : ops) benchmark::DoNotOptimize(cost::cost_of(o, d, tp8));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ops.size()));
  state.counters["ops"] = static_cast<double>(ops.size());
}
BENCHMARK_CAPTURE(op_cost_gpt3_mix, tpuv4_like, hw::tpuv4_like);
BENCHMARK_CAPTURE(op_cost_gpt3_mix, a100_80gb, *hw::find_preset("a100-80gb"));

/// The systolic GEMM mapper alone (one-core and all-cores costs) on the GPT-3 GEMMs.
void gemm_mapper_gpt3(benchmark::State& state, hw::device d) {
  const auto gemms = gpt3_gemms();
  for (auto _ : state) {
    for (const auto& o : gemms) benchmark::DoNotOptimize(cost::systolic_gemm(o.gemm, d));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(gemms.size()));
}
BENCHMARK_CAPTURE(gemm_mapper_gpt3, tpuv4_like, hw::tpuv4_like);

/// The GPT-3 op mix and its GEMMs on 64 random designs of the search space, cycling through them.
void op_cost_gpt3_mix_random_designs(benchmark::State& state) {
  const auto ops = gpt3_ops();
  const auto designs = random_designs(64);
  std::size_t next = 0;
  for (auto _ : state) {
    const hw::device& d = designs[next++ % designs.size()];
    for (const auto& o : ops) benchmark::DoNotOptimize(cost::cost_of(o, d, tp8));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ops.size()));
}
BENCHMARK(op_cost_gpt3_mix_random_designs);

void gemm_mapper_gpt3_random_designs(benchmark::State& state) {
  const auto gemms = gpt3_gemms();
  const auto designs = random_designs(64);
  std::size_t next = 0;
  for (auto _ : state) {
    const hw::device& d = designs[next++ % designs.size()];
    for (const auto& o : gemms) benchmark::DoNotOptimize(cost::systolic_gemm(o.gemm, d));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(gemms.size()));
}
BENCHMARK(gemm_mapper_gpt3_random_designs);

/// The exhaustive reference on a small GEMM, for scale (it exists for tests, never for searches).
void reference_mapper_small(benchmark::State& state) {
  hw::device d = hw::tpuv4_like;
  d.systolic = {4, 4, 4, 2, 4, 1_KiB, 1_GHz};
  for (auto _ : state) benchmark::DoNotOptimize(cost::reference_systolic_gemm({2, 24, 20, 17}, d));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(reference_mapper_small);

void fast_mapper_small(benchmark::State& state) {
  hw::device d = hw::tpuv4_like;
  d.systolic = {4, 4, 4, 2, 4, 1_KiB, 1_GHz};
  for (auto _ : state) benchmark::DoNotOptimize(cost::systolic_gemm({2, 24, 20, 17}, d));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(fast_mapper_small);

}  // namespace
