/// @file
/// Placers on a GPT-3-175B-shaped layer cost table (embedding, 96 blocks, head; TP widths 1, 2, 4, 8;
/// 1024 devices, 4096 microbatches, 32 GiB per device): chain_dp for all four TP widths together in at most
/// 50 ms on one core; downset_dp finds the same optimum. Then placer variants side by side (chain_dp,
/// downset_dp and a user's greedy placer, examples/greedy_placer.hpp) on GPT-3 175B's real tables under the
/// step model, as users benchmark placers of their own. Last, what `phaze plan gpt3-175b --cluster FILE`
/// spends planning on 1024 devices of four device types: the plan search (place::search_plans) and the rank
/// order of the plan it finds (place::order_ranks).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../examples/greedy_placer.hpp"
#include "phaze/cluster/presets.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/place/any_placer.hpp"
#include "phaze/place/chain_dp.hpp"
#include "phaze/place/constant_tables.hpp"
#include "phaze/place/downset_dp.hpp"
#include "phaze/place/model_placement.hpp"
#include "phaze/place/plan_ranks.hpp"
#include "phaze/place/plan_search.hpp"
#include "phaze/place/uniform.hpp"
#include "phaze/sched/ilp.hpp"

namespace {

using namespace phaze;
using namespace phaze::literals;
using namespace phaze::place;

/// GPT-3 175B (Brown et al. 2020, Table 2.1): h 12288, 96 heads, 96 layers, sequence 2048, vocabulary 51200
/// (padded as in Megatron-LM); microbatch 1, bf16 weights, full recomputation.
cost_table gpt3_table(int tp) {
  constexpr double h = 12288.0;
  constexpr double s = 2048.0;
  constexpr double vocab = 51200.0;
  constexpr double b = 1.0;
  const double t = static_cast<double>(tp);
  // A block's forward is ~7.8 TFLOP per microbatch (24 s b h^2 + 4 b s^2 h); at ~650 TFLOP/s effective
  // that is ~12 ms on one device, split over tp with ~3% lost per TP doubling to its all-reduces.
  const double tp_overhead = 1.0 + 0.03 * std::log2(t);
  const seconds block_forward = seconds{12e-3 / t * tp_overhead};
  const bytes block_params{12.0 * h * h * 2.0 / t};  // 12 h^2 parameters at 2 bytes, split over tp
  // Full recomputation keeps each block's input, 2 s b h bytes (Korthikanti et al. 2022, section 4.1); the
  // recomputed forward is paid again in backward.
  const bytes block_activations{2.0 * s * b * h};
  // The head's logits GEMM is 2 s b h V FLOPs (~2.6 TFLOP): about a third of a block.
  const seconds head_forward = seconds{4e-3 / t * tp_overhead};
  const bytes embedding_params{vocab * h * 2.0 / t + s * h * 2.0};  // word embeddings split, positions not
  cost_table table;
  table.tp = tp;
  table.nodes.push_back({"embedding", seconds{0.5e-3 / t}, seconds{1e-3 / t}, seconds{0.5e-3 / t},
                         embedding_params, bytes{2.0 * s * b * h}, true});
  for (int i = 0; i < 96; ++i) {
    table.nodes.push_back(
        {"block", block_forward, 2.0 * block_forward, block_forward, block_params, block_activations, true});
  }
  // The head keeps its input and the fp32 logits it needs in backward: 4 s b V / tp.
  table.nodes.push_back({"head", head_forward, 2.0 * head_forward, head_forward, bytes{vocab * h * 2.0 / t},
                         bytes{2.0 * s * b * h + 4.0 * s * b * vocab / t}, true});
  for (std::size_t v = 0; v + 1 < table.nodes.size(); ++v) {
    table.edges.push_back({v, v + 1, bytes{2.0 * s * b * h}});  // bf16 activations to the next stage
  }
  return table;
}

placement_problem<> gpt3_problem() {
  placement_problem<> p;
  for (const int tp : {1, 2, 4, 8}) p.tables.push_back(gpt3_table(tp));
  p.devices = 1024;
  p.microbatches = 4096;
  p.memory_per_device = 32_GiB;
  p.weight_bytes_per_parameter = 2.0;
  p.state_bytes_per_parameter = 16.0;  // bf16 weights and gradients, fp32 master weights and Adam moments
  p.p2p_bandwidth = 25_GBps;           // one 200 Gb/s InfiniBand link per GPU
  p.dp_bandwidth = 25_GBps;
  p.schedule = train::pipeline_schedule::one_f_one_b;
  p.recompute = true;
  return p;
}

void report(benchmark::State& state, const plan& best) {
  state.counters["time_per_batch_s"] = best.time_per_batch.value();
  state.counters["tp"] = best.tp;
  state.counters["pp"] = best.pp;
  state.counters["dp"] = best.dp;
  state.counters["peak_GiB"] = in_gib(best.peak_memory);
}

/// state.range(0): memory per device in GiB (32: the instance; 80: an A100/H100-sized one with more
/// feasible plans, so less pruning).
void chain_dp_gpt3_175b(benchmark::State& state) {
  auto problem = gpt3_problem();
  problem.memory_per_device = bytes{static_cast<double>(state.range(0)) * 1073741824.0};
  plan best;
  for (auto _ : state) {
    best = chain_dp(problem).run();
    benchmark::DoNotOptimize(best);
  }
  report(state, best);
}
BENCHMARK(chain_dp_gpt3_175b)->Arg(32)->Arg(80)->Unit(benchmark::kMillisecond);

void downset_dp_gpt3_175b(benchmark::State& state) {
  auto problem = gpt3_problem();
  problem.memory_per_device = bytes{static_cast<double>(state.range(0)) * 1073741824.0};
  plan best;
  for (auto _ : state) {
    best = downset_dp(problem).run();
    benchmark::DoNotOptimize(best);
  }
  report(state, best);
  const plan chain = chain_dp(problem).run();
  const double gap = std::abs(best.time_per_batch.value() - chain.time_per_batch.value());
  state.counters["same_optimum_as_chain_dp"] = gap <= 1e-9 * chain.time_per_batch.value() ? 1.0 : 0.0;
  if (gap > 1e-9 * chain.time_per_batch.value()) state.SkipWithError("downset_dp and chain_dp disagree");
}
BENCHMARK(downset_dp_gpt3_175b)->Arg(32)->Arg(80)->Unit(benchmark::kMillisecond);

/// Megatron-LM's published GPT-3 plan shape (tp 8, pp 16, dp 8): the uniform baseline on the same table.
void uniform_gpt3_175b_tp8_pp16_dp8(benchmark::State& state) {
  const auto problem = gpt3_problem();
  plan best;
  for (auto _ : state) {
    best = uniform(problem).tp(8).pp(16).dp(8).run();
    benchmark::DoNotOptimize(best);
  }
  report(state, best);
  state.counters["feasible"] = best.feasible ? 1.0 : 0.0;
}
BENCHMARK(uniform_gpt3_175b_tp8_pp16_dp8)->Unit(benchmark::kMillisecond);

/// Global batch 1536, microbatch 1, selective recomputation with sequence parallelism: the knobs of the GPT-3
/// 175B placements below.
constexpr train::training_knobs gpt3_knobs = [] {
  train::training_knobs k;
  k.global_batch = 1536;
  k.recompute = model::recompute::selective;
  k.sequence_parallel = true;
  return k;
}();

/// `phaze plan`'s uneven placement on a real model: GPT-3 175B's tables for TP 1..8 on 1024 A100-80GB from
/// layer_times, then chain_dp under step_policy (the step-time model) over every pp and dp = 1024 / (tp pp),
/// global batch 1536, microbatch 1, selective recomputation with SP. Tables are built once (outside the
/// loop).
void chain_dp_step_policy_gpt3_175b(benchmark::State& state) {
  const train::training_knobs k = gpt3_knobs;
  const auto m = model::with_vocab(zoo::get("gpt3-175b"), 51200);
  sched::schedule_cache cache;
  const auto mp = model_tables(m, cluster::preset_cluster("a100-80gb", 1024), k, {1, 2, 4, 8}, cache);
  plan best;
  for (auto _ : state) {
    best = chain_dp(mp.problem, mp.policy).max_pp(96).use_all_devices(true).run();
    benchmark::DoNotOptimize(best);
  }
  report(state, best);
}
BENCHMARK(chain_dp_step_policy_gpt3_175b)->Unit(benchmark::kMillisecond);

/// Uneven stages under context parallelism: Llama 3 8B at a 128K-token sequence in FP8 on 256 H100s, the
/// tables of one rank of a context-parallel group of 8 (its 16K-token share, ring attention on the cp links)
/// for TP 1..8, then chain_dp over every pp and dp = 256 / (tp cp pp), global batch 64, microbatch 1, full
/// recomputation: what `phaze plan --cp 8` runs per knob setting. Tables are built once (outside the loop).
void chain_dp_step_policy_llama3_8b_cp8(benchmark::State& state) {
  train::training_knobs k;
  k.global_batch = 64;
  k.precision = hw::precision::fp8;
  k.fused_attention = true;
  k.distributed_optimizer = true;
  k.recompute = model::recompute::full;
  k.sequence_parallel = true;
  const auto m = model::with_sequence(zoo::get("llama3-8b"), 131072);
  sched::schedule_cache cache;
  const auto mp = model_tables(m, cluster::preset_cluster("h100-sxm", 256), k, {1, 2, 4, 8}, cache, 8);
  plan best;
  for (auto _ : state) {
    best = chain_dp(mp.problem, mp.policy).max_pp(32).use_all_devices(true).run();
    benchmark::DoNotOptimize(best);
  }
  report(state, best);
}
BENCHMARK(chain_dp_step_policy_llama3_8b_cp8)->Unit(benchmark::kMillisecond);

/// The same placement on a cluster of two device types: 512 H100-SXM followed by 512 A100-80GB (DGX nodes of
/// each). The tables come in one per width and type, every stage is costed on its own type's table and
/// checked against its own memory, and a (tp, pp, dp) whose stage would span both types is skipped: what
/// heterogeneity costs the chain DP.
void chain_dp_step_policy_gpt3_175b_mixed(benchmark::State& state) {
  const train::training_knobs k = gpt3_knobs;
  const auto m = model::with_vocab(zoo::get("gpt3-175b"), 51200);
  sched::schedule_cache cache;
  const cluster::cluster c{{{*hw::find_preset("h100-sxm"), 512, cluster::node_of("h100-sxm")},
                            {*hw::find_preset("a100-80gb"), 512, cluster::node_of("a100-80gb")}}};
  const auto mp = model_tables(m, c, k, {1, 2, 4, 8}, cache);
  plan best;
  for (auto _ : state) {
    best = chain_dp(mp.problem, mp.policy).max_pp(96).use_all_devices(true).run();
    benchmark::DoNotOptimize(best);
  }
  report(state, best);
}
BENCHMARK(chain_dp_step_policy_gpt3_175b_mixed)->Unit(benchmark::kMillisecond);

/// 1024 devices of four device types, 256 of each in its preset's nodes (cluster/presets.hpp): DGX H100, DGX
/// A100 80 GB, DGX A100 40 GB (nodes of 8) and AWS p3.8xlarge V100 (nodes of 4, one 10 Gb/s interface), over
/// the groups' fabric: the cluster file {"groups": [{"device": "h100-sxm", "count": 256}, {"device":
/// "a100-80gb", "count": 256}, {"device": "a100-40gb", "count": 256}, {"device": "v100-16gb", "count":
/// 256}]}.
cluster::cluster four_type_cluster() {
  std::vector<cluster::device_group> groups;
  for (const char* name : {"h100-sxm", "a100-80gb", "a100-40gb", "v100-16gb"})
    groups.push_back({*hw::find_preset(name), 256, cluster::node_of(name)});
  return cluster::cluster{groups};
}

/// The ILP `phaze plan` refines its best plan with (`--solver ilp`, the default): the library's
/// ilp_scheduler{}, a budget of sched::search_node_budget branch-and-bound nodes per solve, 60 s as a safety
/// net.
sched::ilp_scheduler cli_ilp() {
  return sched::ilp_scheduler{};
}

/// `phaze plan gpt3-175b --cluster FILE --global-batch 1536` (the cluster above) as
/// apps/phaze/plan_command.cpp calls place::search_plans, but with the library's default knobs (no memory
/// headroom, where the program leaves 10%): bf16, Adam, 1F1B, uneven stages by the chain
/// placer, and the whole knob space searched (every admissible tp; pp and dp; microbatch 1 to 16; three
/// recomputation modes; sequence parallelism off and on), found on list schedules with a fresh cache per
/// iteration, as every run of the program starts with one, then the best plan refined on ILP schedules.
/// Counters: the best plan, the plans evaluated, those that fit and those refined on the ILP.
void plan_search_gpt3_175b_four_types(benchmark::State& state) {
  const auto m = zoo::get("gpt3-175b");
  const cluster::cluster c = four_type_cluster();
  train::training_knobs base;
  base.global_batch = 1536;
  place::plan_choices fixed;
  fixed.placement = place::stage_placement::uneven;
  fixed.refine = cli_ilp();
  fixed.refine_top = 1;
  place::plan_search_result found;
  for (auto _ : state) {
    const sched::schedule_cache cache;
    found = place::search_plans(m, c, base, fixed, cache);
    benchmark::DoNotOptimize(found);
  }
  if (found.feasible.empty()) {
    state.SkipWithError("no plan fits");
    return;
  }
  const auto& best = found.feasible.front();
  state.counters["time_per_batch_s"] = best.estimate.time_per_batch.value();
  state.counters["tp"] = best.parallel.tp;
  state.counters["pp"] = best.parallel.pp;
  state.counters["dp"] = best.parallel.dp;
  state.counters["microbatch"] = static_cast<double>(best.knobs.microbatch);
  state.counters["plans_evaluated"] = static_cast<double>(found.evaluated);
  state.counters["plans_feasible"] = static_cast<double>(found.feasible.size());
  state.counters["plans_refined"] = static_cast<double>(found.refined);
}
BENCHMARK(plan_search_gpt3_175b_four_types)->Unit(benchmark::kMillisecond);

/// The rest of that `phaze plan` run: the rank order of the best plan (`--ranks auto`: the group orders on a
/// cluster of several device groups without measured links), every candidate timed by train::estimate_step
/// on ILP schedules from a fresh cache, as the program does. The plan is found once, outside the loop, on
/// list schedules. Counters: the plan's time per batch in Megatron-LM's order and in the order found, and
/// the orders timed.
void plan_ranks_gpt3_175b_four_types(benchmark::State& state) {
  const auto m = zoo::get("gpt3-175b");
  const cluster::cluster c = four_type_cluster();
  train::training_knobs base;
  base.global_batch = 1536;
  place::plan_choices fixed;
  fixed.placement = place::stage_placement::uneven;
  const sched::schedule_cache list_cache;
  const auto found = place::search_plans(m, c, base, fixed, list_cache);
  if (found.feasible.empty()) {
    state.SkipWithError("no plan fits");
    return;
  }
  place::plan_order order;
  for (auto _ : state) {
    const sched::schedule_cache cache{cli_ilp()};
    order = place::order_ranks(m, c, found.feasible.front(), cache, place::rank_method::automatic);
    benchmark::DoNotOptimize(order);
  }
  state.counters["megatron_s"] = order.megatron_s;
  state.counters["ordered_s"] = order.ordered_s;
  state.counters["orders_evaluated"] = static_cast<double>(order.evaluated);
}
BENCHMARK(plan_ranks_gpt3_175b_four_types)->Unit(benchmark::kMillisecond);

/// A mixed cluster of the sizes teams train on, planned as `phaze plan gpt3-175b --cluster FILE` plans it,
/// rank order included: `state.range(0)` devices, split evenly over `state.range(1)` device types in their
/// presets' nodes (2: H100 SXM and A100 80GB; 4: those, A100 40GB and V100), global batch devices / 16 (8192
/// on 131,072 devices: at least one sequence per replica of the plans that fit). The whole knob space on list
/// schedules from a fresh cache, the best plan refined on the program's ILP, then the rank order (`--ranks
/// auto`: the group orders) on ILP schedules. The 131,072- and 1,048,576-device cases (the latter the most
/// devices phaze accepts) take seconds per iteration: the smoke run skips them. Counters: the plan, the plans
/// evaluated, the orders timed.
void plan_mixed_cluster_gpt3_175b(benchmark::State& state) {
  const auto m = zoo::get("gpt3-175b");
  const auto devices = static_cast<int>(state.range(0));
  const auto types = static_cast<std::size_t>(state.range(1));
  std::vector<cluster::device_group> groups;
  for (const char* name : {"h100-sxm", "a100-80gb", "a100-40gb", "v100-16gb"}) {
    if (groups.size() == types) break;
    groups.push_back({*hw::find_preset(name), devices / static_cast<int>(types), cluster::node_of(name)});
  }
  const cluster::cluster c{groups};
  train::training_knobs base;
  base.global_batch = devices / 16;
  place::plan_choices fixed;
  fixed.placement = place::stage_placement::uneven;
  fixed.refine = cli_ilp();
  fixed.refine_top = 1;
  place::plan_search_result found;
  place::plan_order order;
  for (auto _ : state) {
    const sched::schedule_cache cache;
    found = place::search_plans(m, c, base, fixed, cache);
    if (found.feasible.empty()) break;
    const sched::schedule_cache ranks{cli_ilp()};
    order = place::order_ranks(m, c, found.feasible.front(), ranks, place::rank_method::automatic);
    benchmark::DoNotOptimize(order);
  }
  if (found.feasible.empty()) {
    state.SkipWithError("no plan fits");
    return;
  }
  const auto& best = found.feasible.front();
  state.counters["tp"] = best.parallel.tp;
  state.counters["pp"] = best.parallel.pp;
  state.counters["dp"] = best.parallel.dp;
  state.counters["plans_evaluated"] = static_cast<double>(found.evaluated);
  state.counters["megatron_s"] = order.megatron_s;
  state.counters["ordered_s"] = order.ordered_s;
  state.counters["orders_timed"] = static_cast<double>(order.evaluated);
}
BENCHMARK(plan_mixed_cluster_gpt3_175b)
    ->Args({16384, 2})
    ->Args({131072, 4})
    ->Args({1048576, 2})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

/// GPT-3 175B's tables under the step model (as above), placed by one placer variant through the Placer
/// interface (the way search::options runs it). The counter `vs_chain` is the plan's time over the exact
/// chain DP's (1 for exact placers).
void placer_variant_gpt3_175b(benchmark::State& state, const model_placer& placer) {
  const train::training_knobs k = gpt3_knobs;
  const auto m = model::with_vocab(zoo::get("gpt3-175b"), 51200);
  sched::schedule_cache cache;
  const auto mp = model_tables(m, cluster::preset_cluster("a100-80gb", 1024), k, {1, 2, 4, 8}, cache);
  placement_request request;
  request.max_pp = 96;
  request.use_all_devices = true;
  const plan exact = chain_placer{}.place(mp.problem, mp.policy, request);
  plan best;
  for (auto _ : state) {
    best = placer.place(mp.problem, mp.policy, request);
    benchmark::DoNotOptimize(best);
  }
  report(state, best);
  state.counters["vs_chain"] = best.time_per_batch / exact.time_per_batch;
}
BENCHMARK_CAPTURE(placer_variant_gpt3_175b, chain, model_placer{chain_placer{}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(placer_variant_gpt3_175b, downset, model_placer{downset_placer{}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(placer_variant_gpt3_175b, greedy, model_placer{user::greedy_placer{}})
    ->Unit(benchmark::kMillisecond);

/// GPT-3 175B's layer cost tables on A100-80GB for TP 1, 2, 4 and 8 (the knobs above), built by the compiler
/// (place::constant_table): what a user who benchmarks placers on a fixed model and device compiles once.
constexpr hw::device a100 = *hw::find_preset("a100-80gb");
constexpr cluster::node_spec dgx = cluster::node_of("a100-80gb");
constexpr auto gpt3 = model::with_vocab(zoo::gpt3_175b(), 51200);
constexpr std::array compiled_gpt3_tables{place::constant_table<98>(gpt3, a100, dgx, gpt3_knobs, 1),
                                          place::constant_table<98>(gpt3, a100, dgx, gpt3_knobs, 2),
                                          place::constant_table<98>(gpt3, a100, dgx, gpt3_knobs, 4),
                                          place::constant_table<98>(gpt3, a100, dgx, gpt3_knobs, 8)};

/// The placer variants on the compile-time tables under the default objective, 1024 devices.
void placer_variant_compiled_gpt3_175b(benchmark::State& state,
                                       const any_placer<fixed_cost_table<98>, pipeline_policy>& placer) {
  placement_problem<fixed_cost_table<98>> problem;
  static_cast<placement_settings&>(problem) = model_settings(a100, dgx, 1024, gpt3_knobs);
  problem.tables.assign(compiled_gpt3_tables.begin(), compiled_gpt3_tables.end());
  placement_request request;
  request.max_pp = 96;
  request.use_all_devices = true;
  const plan exact = chain_placer{}.place(problem, pipeline_policy{}, request);
  plan best;
  for (auto _ : state) {
    best = placer.place(problem, pipeline_policy{}, request);
    benchmark::DoNotOptimize(best);
  }
  report(state, best);
  state.counters["vs_chain"] = best.time_per_batch / exact.time_per_batch;
}
using compiled_placer = any_placer<fixed_cost_table<98>, pipeline_policy>;
BENCHMARK_CAPTURE(placer_variant_compiled_gpt3_175b, chain, compiled_placer{chain_placer{}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(placer_variant_compiled_gpt3_175b, downset, compiled_placer{downset_placer{}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(placer_variant_compiled_gpt3_175b, greedy, compiled_placer{user::greedy_placer{}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
