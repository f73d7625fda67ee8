// Tests of the knobs current Megatron-Core / Megatron-Bridge recipes turn on beside the parallel plan:
// gradients in bf16 (--grad-reduce-in-bf16), FP8 weights (--fp8-param-gather), the first and last blocks
// kept in bf16 under FP8 (--first-last-layers-bf16), full recomputation of only the first N blocks of each
// chunk (--recompute-method block --recompute-num-layers N) and the interleaved schedule's overlapped
// pipeline sends (--overlap-p2p-communication). Each is checked against a closed form built from the
// unchanged parts of the model (linearity over identical blocks, bytes per parameter), and the memory the
// H100 and H200 presets give against what CUDA reported on the cards measured.
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

using namespace phaze;

namespace {
train::training_knobs fp8_knobs(std::int64_t global_batch = 8) {
  train::training_knobs k;
  k.precision = hw::precision::fp8;
  k.fused_attention = true;
  k.microbatch = 1;
  k.global_batch = global_batch;
  k.sequence = 4096;
  k.distributed_optimizer = true;
  return k;
}

model::model small_llama() {
  model::transformer_config c = zoo::get("llama3-8b").config;
  c.layers = 8;
  return model::make_model(c);
}
}  // namespace

TEST_CASE("bf16 gradients: half the gradient bytes in memory and on the reduce-scatter", "[train][recipe]") {
  const model::model m = small_llama();
  train::training_knobs k = fp8_knobs();
  const train::parallelism p{1, 1, 8};
  const auto fp32 = train::device_memory(m, p, k, 0);
  k.grad_reduce_in_bf16 = true;
  const auto bf16 = train::device_memory(m, p, k, 0);
  CHECK(bf16.gradients.value() == Approx(fp32.gradients.value() / 2.0).epsilon(1e-12));
  CHECK(bf16.weights == fp32.weights);
  CHECK(bf16.optimizer == fp32.optimizer);
  CHECK(train::state_bytes_of(k).gradients == 2.0);

  // The reduce-scatter carries half the bytes; the parameter all-gather carries weights either way.
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 64);
  train::training_knobs plain = fp8_knobs();
  plain.overlap_grad_reduce = plain.overlap_param_gather = false;
  train::training_knobs half = plain;
  half.grad_reduce_in_bf16 = true;
  const train::plan_shape s{1, 1, 64, 8};
  const double params = 8e10;  // large enough that the rings' latency terms hardly count
  const train::step_model a{c, plain};
  const train::step_model b{c, half};
  CHECK(b.exposed_gradient_reduction(params, s, seconds{1.0}).value() ==
        Approx(a.exposed_gradient_reduction(params, s, seconds{1.0}).value() / 2.0).epsilon(1e-3));
  CHECK(b.exposed_parameter_gather(params, s, seconds{1.0}).value() ==
        Approx(a.exposed_parameter_gather(params, s, seconds{1.0}).value()).epsilon(1e-3));

  train::training_knobs fp32_training = fp8_knobs();
  fp32_training.precision = hw::precision::fp32;
  fp32_training.grad_reduce_in_bf16 = true;
  CHECK_THROWS_AS(train::validate(m, p, fp32_training, 8), input_error);
}

TEST_CASE("optimizer state in fp16 or bf16: 6 or 4 bytes per parameter instead of 12", "[train][recipe]") {
  const model::model m = small_llama();
  const train::parallelism p{1, 1, 8};
  train::training_knobs k = fp8_knobs();
  const auto fp32 = train::device_memory(m, p, k, 0);
  CHECK(train::state_bytes_of(k).optimizer == 12.0);
  k.optimizer_dtype = hw::precision::fp16;  // 2-byte master weights and two 2-byte moments
  const auto fp16 = train::device_memory(m, p, k, 0);
  CHECK(train::state_bytes_of(k).optimizer == 6.0);
  CHECK(fp16.optimizer.value() == Approx(fp32.optimizer.value() * 6.0 / 12.0).epsilon(1e-12));
  k.optimizer_dtype = hw::precision::bf16;  // two bf16 moments, the bf16 weights their own master copy
  const auto bf16 = train::device_memory(m, p, k, 0);
  CHECK(train::state_bytes_of(k).optimizer == 4.0);
  CHECK(bf16.optimizer.value() == Approx(fp32.optimizer.value() * 4.0 / 12.0).epsilon(1e-12));
  CHECK(bf16.weights == fp32.weights);
  CHECK(bf16.gradients == fp32.gradients);
  CHECK(bf16.activations == fp32.activations);
  k.opt = train::optimizer::sgd;  // one moment
  CHECK(train::state_bytes_of(k).optimizer == 2.0);
  k.optimizer_dtype = hw::precision::fp16;
  CHECK(train::state_bytes_of(k).optimizer == 4.0);

  // The optimizer step reads and writes less.
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 8);
  const train::plan_shape s{1, 1, 8, 8};
  const train::step_model wide{c, fp8_knobs()};
  auto narrow_knobs = fp8_knobs();
  narrow_knobs.optimizer_dtype = hw::precision::bf16;
  const train::step_model narrow{c, narrow_knobs};
  const auto& d = c.device_at(0);
  // 2 x (weights 2 + gradients 4 + state / 8) bytes per parameter at the same bandwidth.
  CHECK(narrow.optimizer_step(1e9, s, d).value() / wide.optimizer_step(1e9, s, d).value() ==
        Approx((6.0 + 4.0 / 8.0) / (6.0 + 12.0 / 8.0)).epsilon(1e-12));

  // Mixed precision only, and bf16 state only over bf16 weights.
  auto fp32_training = fp8_knobs();
  fp32_training.precision = hw::precision::fp32;
  fp32_training.optimizer_dtype = hw::precision::fp16;
  CHECK_THROWS_AS(train::validate(m, p, fp32_training, 8), input_error);
  auto fp16_training = fp8_knobs();
  fp16_training.precision = hw::precision::fp16;
  fp16_training.optimizer_dtype = hw::precision::bf16;
  CHECK_THROWS_AS(train::validate(m, p, fp16_training, 8), input_error);
  fp16_training.optimizer_dtype = hw::precision::fp16;
  CHECK_NOTHROW(train::validate(m, p, fp16_training, 8));
  CHECK(train::parse_optimizer_dtype("bf16") == hw::precision::bf16);
  CHECK_THROWS_AS(train::parse_optimizer_dtype("fp8"), input_error);
}

TEST_CASE("FP8 weights: 2 bytes per parameter instead of 4, gathered as FP8", "[train][recipe]") {
  const model::model m = small_llama();
  train::training_knobs k = fp8_knobs();
  const train::parallelism p{1, 1, 8};
  const auto copies = train::device_memory(m, p, k, 0);
  k.fp8_param_gather = true;
  const auto fp8 = train::device_memory(m, p, k, 0);
  // bf16 weight + FP8 copy and transpose (2 + 2) against FP8 weight and transpose (1 + 1).
  CHECK(fp8.weights.value() == Approx(copies.weights.value() / 2.0).epsilon(1e-12));
  CHECK(fp8.gradients == copies.gradients);
  CHECK(fp8.activations == copies.activations);

  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 64);
  train::training_knobs plain = fp8_knobs();
  plain.overlap_param_gather = false;
  train::training_knobs gathered = plain;
  gathered.fp8_param_gather = true;
  const train::plan_shape s{1, 1, 64, 8};
  const double params = 8e10;
  CHECK(train::step_model{c, gathered}.exposed_parameter_gather(params, s, seconds{1.0}).value() ==
        Approx(train::step_model{c, plain}.exposed_parameter_gather(params, s, seconds{1.0}).value() / 2.0)
            .epsilon(1e-3));

  train::training_knobs no_optimizer = k;
  no_optimizer.distributed_optimizer = false;
  CHECK_THROWS_AS(train::validate(m, p, no_optimizer, 8), input_error);
  train::training_knobs bf16 = k;
  bf16.precision = hw::precision::bf16;
  CHECK_THROWS_AS(train::validate(m, p, bf16, 8), input_error);
}

TEST_CASE("blocks kept in bf16 under FP8: kinds of their own, costed as bf16 blocks", "[train][recipe]") {
  const model::model m = small_llama();
  const model::model edges = model::with_bf16_blocks(m, 1, 2);
  REQUIRE(edges.size() == m.size());
  REQUIRE(edges.kinds.size() == m.kinds.size() + 1);
  const model::layer_spec& twin = edges.kinds.back();
  CHECK(twin.bf16);
  CHECK(twin.name.view() == "block_bf16");
  for (std::size_t v = 0; v < m.size(); ++v) {
    INFO(v);
    const bool edge = v == 1 || v + 2 == m.size() || v + 3 == m.size();
    CHECK(edges.kind_at(v).bf16 == edge);
  }
  CHECK(model::parameter_count(edges) == model::parameter_count(m));
  // Applied twice, the twin is reused.
  CHECK(model::with_bf16_blocks(edges, 2, 2).kinds.size() == edges.kinds.size());

  // The bf16 block's GEMMs are not FP8; the other blocks' are.
  const auto shape = train::layer_shape_of(m, train::parallelism{1, 1, 1}, fp8_knobs());
  const model::layer kept = model::build_kind(edges, twin, shape);
  const model::layer fp8 = model::build_kind(edges, edges.kinds[1], shape);
  for (const model::op& o : kept.ops) CHECK_FALSE(o.fp8);
  bool any = false;
  for (const model::op& o : fp8.ops) any = any || o.fp8;
  CHECK(any);

  // One stage, one replica: the iteration is linear in the blocks' times, so keeping 3 of 8 blocks in bf16
  // adds 3/8 of what keeping all 8 adds.
  const sched::schedule_cache cache{sched::list_scheduler{}};
  const auto k = fp8_knobs();
  const train::parallelism p{1, 1, 1};
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 1);
  const double t_fp8 = train::estimate_step(m, c, p, k, cache).time_per_batch.value();
  const double t_all =
      train::estimate_step(model::with_bf16_blocks(m, 8, 0), c, p, k, cache).time_per_batch.value();
  const double t_edges = train::estimate_step(edges, c, p, k, cache).time_per_batch.value();
  CHECK(t_all > t_fp8 * 1.2);
  CHECK(t_edges == Approx(t_fp8 + (t_all - t_fp8) * 3.0 / 8.0).epsilon(1e-9));

  CHECK_THROWS_AS(model::with_bf16_blocks(m, 5, 4), input_error);
  CHECK_THROWS_AS(model::with_bf16_blocks(m, -1, 0), input_error);
}

TEST_CASE("full recomputation of the first N blocks of each chunk", "[train][recipe]") {
  const model::model m = small_llama();
  const sched::schedule_cache cache{sched::list_scheduler{}};
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 1);
  const train::parallelism p{1, 1, 1};
  train::training_knobs k = fp8_knobs();
  k.distributed_optimizer = false;
  k.recompute = model::recompute::none;
  const auto none = train::estimate_step(m, c, p, k, cache);
  k.recompute = model::recompute::full;
  const auto all = train::estimate_step(m, c, p, k, cache);
  const auto mem_none = train::device_memory(
      m, p,
      [&] {
        auto n = k;
        n.recompute = model::recompute::none;
        return n;
      }(),
      0);
  const auto mem_all = train::device_memory(m, p, k, 0);
  for (int n : {1, 3, 8, 12}) {
    CAPTURE(n);
    k.recompute_layers = n;
    const auto some = train::estimate_step(m, c, p, k, cache);
    const double share = std::min(n, 8) / 8.0;
    CHECK(some.breakdown.recompute.value() == Approx(all.breakdown.recompute.value() * share).epsilon(1e-9));
    CHECK(some.time_per_batch.value() ==
          Approx(none.time_per_batch.value() +
                 (all.time_per_batch.value() - none.time_per_batch.value()) * share)
              .epsilon(1e-9));
    // Memory: the recomputed blocks keep their inputs, the others everything; the working set of one
    // recomputed block either way.
    const auto mem = train::device_memory(m, p, k, 0);
    const bytes working = train::detail::recompute_working_set(
        m, train::detail::build_layers(m, train::layer_shape_of(m, p, k)), {0, m.size()}, k.recompute);
    const double kept_all = mem_all.activations.value() - working.value();
    const double kept_none = mem_none.activations.value();
    CHECK(mem.activations.value() - working.value() ==
          Approx(kept_all + (kept_none - kept_all) * (1.0 - share)).epsilon(1e-9));
  }
  // Over 2 stages of 2 chunks (interleaved): 2 blocks per chunk, the first of each recomputed: half.
  const train::parallelism p2{1, 2, 1};
  const auto c2 = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 2);
  train::training_knobs kv = fp8_knobs(8);
  kv.distributed_optimizer = false;
  kv.schedule = train::pipeline_schedule::interleaved;
  kv.virtual_stages = 2;
  kv.overlap_p2p = true;
  kv.recompute = model::recompute::full;
  const auto every = train::estimate_step(m, c2, p2, kv, cache);
  kv.recompute_layers = 1;
  const auto first = train::estimate_step(m, c2, p2, kv, cache);
  CHECK(first.breakdown.recompute.value() == Approx(every.breakdown.recompute.value() / 2.0).epsilon(1e-9));

  train::training_knobs bad = fp8_knobs();
  bad.recompute_layers = 2;
  CHECK_THROWS_AS(train::validate(m, p, bad, 1), input_error);
  bad.recompute = model::recompute::full;
  bad.recompute_layers = -1;
  CHECK_THROWS_AS(train::validate(m, p, bad, 1), input_error);
}

TEST_CASE("full recomputation in uniform groups of N blocks and of every N-th block", "[train][recipe]") {
  const model::model m = small_llama();  // 8 blocks
  const sched::schedule_cache cache{sched::list_scheduler{}};
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 1);
  const train::parallelism p{1, 1, 1};
  train::training_knobs k = fp8_knobs();
  k.distributed_optimizer = false;
  k.recompute = model::recompute::none;
  const auto mem_none = train::device_memory(m, p, k, 0);
  k.recompute = model::recompute::full;
  const auto all = train::estimate_step(m, c, p, k, cache);
  const auto mem_all = train::device_memory(m, p, k, 0);
  const auto built = train::detail::build_layers(m, train::layer_shape_of(m, p, k));
  const bytes working = train::detail::recompute_working_set(m, built, {0, m.size()}, k.recompute);
  // A recomputed block keeps its input: the block's activations under full recomputation.
  const double input = model::activation_bytes(built.at(m, 1), model::recompute::full).value();
  const double kept_all = mem_all.activations.value() - working.value();
  const double kept_none = mem_none.activations.value();

  k.recompute_by = train::recompute_method::uniform;
  for (const int n : {2, 4, 8}) {
    CAPTURE(n);
    k.recompute_layers = n;
    train::validate(m, p, k, 1);
    // Every block is recomputed, as under full recomputation: the same time.
    const auto e = train::estimate_step(m, c, p, k, cache);
    CHECK(e.time_per_batch.value() == Approx(all.time_per_batch.value()).epsilon(1e-12));
    CHECK(e.breakdown.recompute.value() == Approx(all.breakdown.recompute.value()).epsilon(1e-12));
    // Memory: 8 / n checkpoints instead of 8, and n blocks' activations held while a group is recomputed.
    const auto mem = train::device_memory(m, p, k, 0);
    CHECK(mem.activations.value() ==
          Approx(kept_all - (8 - 8 / n) * input + n * working.value()).epsilon(1e-9));
  }
  k.recompute_by = train::recompute_method::every;
  for (const int n : {2, 4}) {
    CAPTURE(n);
    k.recompute_layers = n;
    // Blocks 0, n, 2n, ... are recomputed (keeping their inputs); the others keep everything.
    const double share = 1.0 / n;
    const auto e = train::estimate_step(m, c, p, k, cache);
    CHECK(e.breakdown.recompute.value() == Approx(all.breakdown.recompute.value() * share).epsilon(1e-9));
    const auto mem = train::device_memory(m, p, k, 0);
    CHECK(mem.activations.value() - working.value() ==
          Approx(kept_all + (kept_none - kept_all) * (1.0 - share)).epsilon(1e-9));
  }
  // Without full recomputation the method has nothing to pick from.
  train::training_knobs bad = fp8_knobs();
  bad.recompute_by = train::recompute_method::uniform;
  CHECK_THROWS_AS(train::validate(m, p, bad, 1), input_error);
}

TEST_CASE("interleaved pipeline sends overlapped with the chunks' computation", "[train][recipe]") {
  // Nodes of one device, so every pipeline send crosses a slow network and can be seen.
  using namespace phaze::literals;
  const cluster::node_spec lonely{1, {450_GBps, 1_us}, 1, {1_GBps, 10_us}};
  const cluster::cluster c = cluster::homogeneous(*hw::find_preset("h100-sxm"), 4, lonely);
  train::training_knobs k = fp8_knobs(16);
  k.schedule = train::pipeline_schedule::interleaved;
  k.virtual_stages = 2;
  const train::plan_shape s{1, 4, 1, 16};
  const bytes cut{64e6};
  const train::step_model blocking{c, k};
  k.overlap_p2p = true;
  const train::step_model overlapped{c, k};
  const seconds sends = blocking.pipeline_sends(cut, cut, seconds{0.0}, s);
  CHECK(sends.value() == Approx(2.0 * blocking.pipeline_cut(cut, s).value()).epsilon(1e-12));
  CHECK(overlapped.pipeline_sends(cut, cut, seconds{0.0}, s) == sends);
  // Forward sends (half of them) hide under a third of the work, backward ones under two thirds.
  const double half = sends.value() / 2.0;
  for (double work : {0.0, 0.3 * half, 1.0 * half, 2.0 * half, 3.0 * half, 10.0 * half}) {
    CAPTURE(work);
    const double expected = std::max(0.0, half - work / 3.0) + std::max(0.0, half - 2.0 * work / 3.0);
    CHECK(overlapped.pipeline_sends(cut, cut, seconds{work}, s).value() ==
          Approx(expected).epsilon(1e-12).margin(1e-15));
    CHECK(blocking.pipeline_sends(cut, cut, seconds{work}, s) == sends);
    // A stage's time never falls as its work grows (the placers' bounds rely on it).
    CHECK(overlapped.stage_time(seconds{work * 1.01}, cut, cut, s) >=
          overlapped.stage_time(seconds{work}, cut, cut, s));
  }
  // The fill and drain stay blocking: stage r's 2 (p - r - 1) + (v - 1) p warm-up chunks (and as many
  // cool-down ones) wait for their transfers; stage 0's 2 * 3 + 1 * 4 = 10 chunks are 10 / v = 5
  // microbatches' sends.
  const std::vector<seconds> blocking_sends(4, sends);
  CHECK(overlapped.fill_drain_sends(blocking_sends, 16, s).value() ==
        Approx(5.0 * sends.value()).epsilon(1e-12));
  CHECK(blocking.fill_drain_sends(blocking_sends, 16, s).value() == 0.0);
  // Never more warm-up chunks than the iteration has: 2 microbatches x 2 chunks.
  CHECK(overlapped.fill_drain_sends(blocking_sends, 2, {1, 4, 1, 2}).value() ==
        Approx(2.0 * sends.value()).epsilon(1e-12));

  // Whole iterations: overlapping never makes one slower, and here (1 GB/s between devices) it hides most of
  // the sends.
  {
    const model::model m = small_llama();
    const sched::schedule_cache cache{sched::list_scheduler{}};
    train::training_knobs a = fp8_knobs(32);
    a.schedule = train::pipeline_schedule::interleaved;
    a.virtual_stages = 2;
    train::training_knobs b = a;
    b.overlap_p2p = true;
    const train::parallelism p{1, 4, 1};
    const auto slow = train::estimate_step(m, c, p, a, cache);
    const auto fast = train::estimate_step(m, c, p, b, cache);
    CHECK(fast.time_per_batch < slow.time_per_batch);
    CHECK(fast.breakdown.pp_comm < slow.breakdown.pp_comm);
    CHECK(fast.time_per_batch.value() == Approx(fast.breakdown.total().value()).epsilon(1e-12));
  }

  // Two stages may interleave only with the sends overlapped (Megatron-LM core_r0.11.0's rule).
  const model::model m = small_llama();
  train::training_knobs two = fp8_knobs(8);
  two.schedule = train::pipeline_schedule::interleaved;
  two.virtual_stages = 2;
  CHECK_THROWS_AS(train::validate(m, train::parallelism{1, 2, 1}, two, 2), input_error);
  two.overlap_p2p = true;
  CHECK_NOTHROW(train::validate(m, train::parallelism{1, 2, 1}, two, 2));
}

TEST_CASE("H100 and H200 memory as CUDA reports it on the measured cards", "[train][recipe]") {
  // The bytes CUDA reported (cudaDeviceProp::totalGlobalMem), read from the measurements' env files.
  const std::string dir = std::string{PHAZE_TEST_DATA_DIR} + "/gpu/";
  auto field_after = [&](const std::string& file, const std::string& key) {
    std::ifstream in(dir + file);
    REQUIRE(in.good());
    std::string line;
    while (std::getline(in, line)) {
      const auto at = line.find(key);
      if (at != std::string::npos) return std::stod(line.substr(at + key.size()));
    }
    FAIL("no '" << key << "' in " << file);
    return 0.0;
  };
  CHECK(hw::find_preset("h100-sxm")->hbm.value() == field_after("h100-sxm-train-step-env.txt", " mem "));
  // h200-env.txt gives GiB to one decimal ("132 SMs, 139.8 GiB").
  CHECK(hw::find_preset("h200")->hbm.value() / 1073741824.0 ==
        Approx(field_after("h200-env.txt", "132 SMs, ")).margin(0.05));
}
