// How fast phaze builds and measures model graphs: a GPT-3 block at tensor-parallel width 8, its backward
// DAG, its stored activations, and whole-model totals (the work behind one cost-table row).
#include <benchmark/benchmark.h>

#include <phaze/phaze.hpp>

namespace {

const phaze::model::model gpt3 = phaze::zoo::gpt3_175b();
const phaze::model::layer_shape tp8{1, 2048, 8, true, 2};

void block_layer(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(phaze::model::block_layer(gpt3.config, tp8));
}
BENCHMARK(block_layer);

void backward_dag(benchmark::State& state) {
  const auto l = phaze::model::block_layer(gpt3.config, tp8);
  for (auto _ : state) benchmark::DoNotOptimize(phaze::model::backward(l));
}
BENCHMARK(backward_dag);

void activation_bytes(benchmark::State& state) {
  const auto l = phaze::model::block_layer(gpt3.config, tp8);
  for (auto _ : state)
    benchmark::DoNotOptimize(phaze::model::activation_bytes(l, phaze::model::recompute::selective));
}
BENCHMARK(activation_bytes);

void model_totals(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(phaze::model::totals(gpt3, tp8));
}
BENCHMARK(model_totals);

}  // namespace
