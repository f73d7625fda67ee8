// Fully sharded data parallelism (training_knobs::fsdp; ZeRO-3, PyTorch FSDP2, Megatron-FSDP), checked
// against closed forms:
// - memory: every model state sharded over the data-parallel ranks (Rajbhandari et al. 2020, section 5.1:
//   (2 + 2 + K) psi / Nd bytes for mixed-precision Adam with fp16 gradients; (2 + 4 + 12) psi / Nd with
//   Megatron's fp32 gradients, phaze's default), plus two gathered copies of the largest layer's weights and
//   one of its gradients;
// - communication: per microbatch two all-gathers of the weights and one reduce-scatter of the gradients,
//   1.5 times a data-parallel all-reduce's volume when weights and gradients have one width (ZeRO section
//   7.2.2: 3 psi against 2 psi), all of it exposed with no computation to hide under, only each pass's last
//   unit with plenty;
// - one model for the estimate and the placers: step_policy on a model's tables equals estimate_step's time
//   and memory for any split under fsdp.
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/place/model_placement.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

using namespace phaze;

namespace fsdp_test {
train::training_knobs knobs(bool fsdp, std::int64_t global_batch = 64) {
  train::training_knobs k;
  k.global_batch = global_batch;
  k.microbatch = 1;
  k.fused_attention = true;
  k.distributed_optimizer = !fsdp;
  k.fsdp = fsdp;
  k.overlap_grad_reduce = k.overlap_param_gather = true;  // ZeRO-1 overlapped as Megatron-Core runs it
  return k;
}

model::model small_llama() {
  model::transformer_config c = zoo::get("llama3-8b").config;
  c.layers = 8;
  return model::make_model(c);
}
}  // namespace fsdp_test

TEST_CASE("fsdp: every model state sharded over the data-parallel ranks, plus the gathered layers",
          "[train][fsdp]") {
  const model::model m = fsdp_test::small_llama();
  const train::parallelism p{1, 1, 8};
  const auto k = fsdp_test::knobs(true);
  const auto sharded = train::device_memory(m, p, k, 0);
  const auto zero1 = train::device_memory(m, p, fsdp_test::knobs(false), 0);
  const auto params = static_cast<double>(train::stage_parameters(m, train::uniform_stage(m, 1, 0), 1));
  // bf16 + Adam: 2-byte weights, 4-byte fp32 gradients, 12 bytes of master weights and moments.
  CHECK(sharded.weights.value() == Approx(params * 2.0 / 8.0).epsilon(1e-12));
  CHECK(sharded.gradients.value() == Approx(params * 4.0 / 8.0).epsilon(1e-12));
  CHECK(sharded.optimizer.value() == Approx(params * 12.0 / 8.0).epsilon(1e-12));
  CHECK(sharded.optimizer == zero1.optimizer);
  CHECK(zero1.weights.value() == Approx(params * 2.0).epsilon(1e-12));

  // The working set: the largest layer (here the head, its 128256 x 4096 output projection and final norm,
  // larger than a block) gathered twice, its gradients once.
  const auto built = train::detail::build_layers(m, train::layer_shape_of(m, p, k));
  std::int64_t largest = 0;
  for (std::size_t v = 0; v < m.size(); ++v)
    largest = std::max(largest, model::layer_params(built.at(m, v), true));
  CHECK(largest == 128256 * 4096 + 4096);
  const double working = static_cast<double>(largest) * (2.0 * 2.0 + 4.0);
  CHECK(train::detail::fully_sharded_working_set(m, built, k, 1).value() == Approx(working).epsilon(1e-12));
  CHECK(train::detail::fully_sharded_working_set(m, built, fsdp_test::knobs(false), 1).value() == 0.0);
  // Same activations: the difference is the states' sharding and the working set.
  CHECK(sharded.activations.value() == Approx(zero1.activations.value() + working).epsilon(1e-12));
  CHECK(sharded.total < zero1.total);

  // Under FP8 the gathered layers carry their FP8 copies (2 bytes more per parameter), the shards do not.
  auto fp8 = k;
  fp8.precision = hw::precision::fp8;
  const auto fp8_memory = train::device_memory(m, p, fp8, 0);
  CHECK(fp8_memory.weights.value() == Approx(params * 2.0 / 8.0).epsilon(1e-12));
  const auto fp8_built = train::detail::build_layers(m, train::layer_shape_of(m, p, fp8));
  CHECK(train::detail::fully_sharded_working_set(m, fp8_built, fp8, 1).value() ==
        Approx(static_cast<double>(largest) * (2.0 * 4.0 + 4.0)).epsilon(1e-12));

  // One rank: nothing to shard; fsdp holds ZeRO-1's states plus its working set.
  const train::parallelism alone{1, 1, 1};
  const auto one = train::device_memory(m, alone, fsdp_test::knobs(true, 8), 0);
  const auto one_zero1 = train::device_memory(m, alone, fsdp_test::knobs(false, 8), 0);
  CHECK(one.model_states().value() == Approx(one_zero1.model_states().value()).epsilon(1e-12));
}

TEST_CASE("fsdp: per microbatch two weight gathers and a gradient reduce-scatter, 1.5x an all-reduce",
          "[train][fsdp]") {
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 64);
  auto k = fsdp_test::knobs(true);
  k.grad_reduce_in_bf16 = true;  // weights and gradients both 2 bytes: ZeRO's 3 psi against 2 psi
  const train::step_model model{c, k};
  const double params = 8e10;  // large enough that the rings' latency terms hardly count
  const std::int64_t microbatches = 4;
  const train::plan_shape s{1, 1, 64, microbatches};
  const double all_reduce = model.gradient_sync(params, s).value();
  // Nothing to hide under: every byte exposed, in every microbatch.
  const double bare = model.exposed_fully_sharded(params, s, seconds{0.0}).value();
  CHECK(bare == Approx(1.5 * all_reduce * static_cast<double>(microbatches)).epsilon(1e-9));
  // Plenty to hide under: each pass exposes its last unit only (forward: one gather's; backward: a gather's
  // and a reduce-scatter's), and the rest slows the computation beside it (the H100's measured 5.8%).
  const double units = train::step_model::gradient_buckets(params, s);
  const double hidden = model.exposed_fully_sharded(params, s, seconds{1e6}).value();
  const double moved = 1.5 * all_reduce;
  CHECK(hidden == Approx((moved / units + (moved - moved / units) * model.overlap_slowdown()) *
                         static_cast<double>(microbatches))
                      .epsilon(1e-9));
  // The ZeRO-1 terms are FSDP's own here: no separate reduction or gather after the last microbatch.
  CHECK(model.exposed_gradient_reduction(params, s, seconds{0.0}).value() == 0.0);
  CHECK(model.exposed_parameter_gather(params, s, seconds{0.0}).value() == 0.0);
  CHECK(model.exposed_data_parallel(params, s, seconds{0.0}).value() == Approx(bare).epsilon(1e-12));
  // The optimizer step touches this rank's shards only.
  const train::step_model zero1{c, fsdp_test::knobs(false)};
  const auto& d = c.device_at(0);
  CHECK(model.optimizer_step(params, s, d).value() < zero1.optimizer_step(params, s, d).value() / 10.0);

  // fp32 gradients: the reduce-scatter carries twice the weights' bytes.
  const train::step_model fp32{c, fsdp_test::knobs(true)};
  const double fp32_all_reduce = fp32.gradient_sync(params, s).value();
  CHECK(fp32.exposed_fully_sharded(params, s, seconds{0.0}).value() ==
        Approx((2.0 * 0.25 + 0.5) * fp32_all_reduce * static_cast<double>(microbatches)).epsilon(1e-9));
}

TEST_CASE("fsdp: weights kept gathered from forward to backward, and under a pipeline gradients reduced once",
          "[train][fsdp][reshard]") {
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 64);
  auto k = fsdp_test::knobs(true);
  k.grad_reduce_in_bf16 = true;  // a gather carries half an all-reduce's bytes, a reduce-scatter the other
  const double params = 8e10;
  const std::int64_t microbatches = 6;
  const double m = static_cast<double>(microbatches);
  auto with = [&](train::fsdp_reshard r) {
    auto x = k;
    x.fsdp_reshard_after_forward = r;
    return train::step_model{c, x};
  };
  const auto always = with(train::fsdp_reshard::always);
  const auto never = with(train::fsdp_reshard::never);
  const auto by_pipeline = with(train::fsdp_reshard::by_pipeline);

  // No pipeline: a microbatch gathers once and reduce-scatters once when the weights stay gathered: an
  // all-reduce's volume, 2/3 of the 1.5 with a second gather; torchtitan's default is FSDP2's (always).
  const train::plan_shape flat{1, 1, 64, microbatches};
  const double all_reduce = always.gradient_sync(params, flat).value();
  CHECK(always.exposed_fully_sharded(params, flat, seconds{0.0}).value() ==
        Approx(1.5 * all_reduce * m).epsilon(1e-9));
  CHECK(never.exposed_fully_sharded(params, flat, seconds{0.0}).value() ==
        Approx(all_reduce * m).epsilon(1e-9));
  CHECK(by_pipeline.exposed_fully_sharded(params, flat, seconds{0.0}).value() ==
        always.exposed_fully_sharded(params, flat, seconds{0.0}).value());
  // With plenty to hide under, each pass leaves its last unit, the rest slows the computation beside it.
  const double units = train::step_model::gradient_buckets(params, flat);
  const double half = 0.5 * all_reduce;
  const double pass = half / units + (half - half / units) * never.overlap_slowdown();
  CHECK(never.exposed_fully_sharded(params, flat, seconds{1e6}).value() ==
        Approx(2.0 * pass * m).epsilon(1e-9));

  // Two stages: one reduce-scatter per iteration, after the last backward pass, exposed whole; the weights
  // gathered once when they stay gathered (the default under a pipeline). Freed after each forward and kept
  // after each backward, they are gathered by every pass that follows a forward: under 1F1B the first
  // stage's min(pp, m) = 2 warm-up forwards and m - 2 + 1 = 5 backward passes (F F B F B F B F B F B B B
  // over m = 6), under GPipe the 6 forwards and the first backward: 7 either way.
  const train::plan_shape piped{1, 2, 32, microbatches};
  const double ring = always.gradient_sync(params, piped).value();
  const double gather = 0.5 * ring;
  const double reduce = 0.5 * ring;
  CHECK(never.exposed_fully_sharded(params, piped, seconds{0.0}).value() ==
        Approx(gather + reduce).epsilon(1e-9));
  CHECK(by_pipeline.exposed_fully_sharded(params, piped, seconds{0.0}).value() ==
        never.exposed_fully_sharded(params, piped, seconds{0.0}).value());
  CHECK(always.exposed_fully_sharded(params, piped, seconds{0.0}).value() ==
        Approx(gather * (m + 1.0) + reduce).epsilon(1e-9));
  auto gpipe = k;
  gpipe.fsdp_reshard_after_forward = train::fsdp_reshard::always;
  gpipe.schedule = train::pipeline_schedule::gpipe;
  CHECK(train::step_model{c, gpipe}.exposed_fully_sharded(params, piped, seconds{0.0}).value() ==
        Approx(gather * (m + 1.0) + reduce).epsilon(1e-9));
  // With plenty to hide under, 1F1B's forward gathers hide under forward passes and its backward gathers
  // under backward passes, GPipe's mostly under forward passes: each leaves its last unit.
  const double piped_units_always = train::step_model::gradient_buckets(params, piped);
  const auto [fw, bw] = always.overlap_windows(seconds{1e6});
  CHECK(fw < bw);
  const double hidden_gather =
      gather / piped_units_always + (gather - gather / piped_units_always) * always.overlap_slowdown();
  CHECK(always.exposed_fully_sharded(params, piped, seconds{1e6}).value() ==
        Approx(hidden_gather * (m + 1.0) + reduce).epsilon(1e-9));
  const double piped_units = train::step_model::gradient_buckets(params, piped);
  CHECK(never.exposed_fully_sharded(params, piped, seconds{1e6}).value() ==
        Approx(gather / piped_units + (gather - gather / piped_units) * never.overlap_slowdown() + reduce)
            .epsilon(1e-9));
}

TEST_CASE("fsdp: memory with the weights kept gathered, and under a pipeline with unsharded gradients",
          "[train][fsdp][reshard]") {
  const model::model m = fsdp_test::small_llama();
  auto k = fsdp_test::knobs(true);
  const auto built = train::detail::build_layers(m, train::layer_shape_of(m, train::parallelism{1, 1, 8}, k));
  const auto largest = static_cast<double>(train::detail::largest_layer_parameters(m, built));
  auto at = [&](train::fsdp_reshard r, const train::parallelism& p, int stage) {
    auto x = k;
    x.fsdp_reshard_after_forward = r;
    return train::device_memory(m, p, x, stage);
  };
  // One stage, weights kept (never): the shards plus every weight gathered (2 bytes each), one layer's
  // unsharded gradients in the working set instead of two gathered layers and one layer's gradients.
  const train::parallelism flat{1, 1, 8};
  const auto params = static_cast<double>(train::stage_parameters(m, train::uniform_stage(m, 1, 0), 1));
  const auto freed = at(train::fsdp_reshard::always, flat, 0);
  const auto kept = at(train::fsdp_reshard::never, flat, 0);
  CHECK(kept.weights.value() == Approx(params * 2.0 / 8.0 + params * 2.0).epsilon(1e-12));
  CHECK(kept.gradients == freed.gradients);
  CHECK(kept.optimizer == freed.optimizer);
  CHECK(kept.activations.value() ==
        Approx(freed.activations.value() - largest * 2.0 * 2.0).epsilon(1e-12));  // two gathered layers less
  CHECK(at(train::fsdp_reshard::by_pipeline, flat, 0) == freed);
  // Two stages (any policy): the stage's weights gathered and its gradients unsharded (fp32, 4 bytes), no
  // working set; the same under every policy, as PyTorch's schedules keep both until the last microbatch.
  const train::parallelism piped{1, 2, 4};
  for (int stage = 0; stage < 2; ++stage) {
    const auto stage_params =
        static_cast<double>(train::stage_parameters(m, train::uniform_stage(m, 2, stage), 1));
    const auto d = at(train::fsdp_reshard::by_pipeline, piped, stage);
    CHECK(d.weights.value() == Approx(stage_params * 2.0 / 4.0 + stage_params * 2.0).epsilon(1e-12));
    CHECK(d.gradients.value() == Approx(stage_params * 4.0 / 4.0 + stage_params * 4.0).epsilon(1e-12));
    CHECK(at(train::fsdp_reshard::always, piped, stage) == d);
    CHECK(at(train::fsdp_reshard::never, piped, stage) == d);
    auto zero1 = fsdp_test::knobs(false);
    CHECK(d.activations == train::device_memory(m, piped, zero1, stage).activations);
  }
  // The policy needs fsdp.
  auto lone = fsdp_test::knobs(false);
  lone.fsdp_reshard_after_forward = train::fsdp_reshard::never;
  CHECK_THROWS_WITH(train::validate(m, flat, lone, 8), Catch::Contains("give `fsdp` with it"));
  CHECK(train::parse_fsdp_reshard("default") == train::fsdp_reshard::by_pipeline);
  CHECK_THROWS_WITH(train::parse_fsdp_reshard("sometimes"),
                    Catch::Contains("'default', 'always' or 'never'"));
}

TEST_CASE("ZeRO-2: gradients sharded like the optimizer state, reduce-scattered in every microbatch",
          "[train][fsdp][zero2]") {
  const model::model m = fsdp_test::small_llama();
  const train::parallelism p{1, 1, 8};
  const auto zero1 = fsdp_test::knobs(false);
  auto zero2 = zero1;
  zero2.shard_gradients = true;
  const auto one = train::device_memory(m, p, zero1, 0);
  const auto two = train::device_memory(m, p, zero2, 0);
  const auto params = static_cast<double>(train::stage_parameters(m, train::uniform_stage(m, 1, 0), 1));
  // bf16 weights whole, fp32 gradients and the optimizer state over 8 ranks (Rajbhandari et al. 2020,
  // section 5.2: 2 psi + (2 + K) psi / Nd), and one layer's unsharded gradients before their reduce-scatter.
  CHECK(two.weights == one.weights);
  CHECK(two.gradients.value() == Approx(params * 4.0 / 8.0).epsilon(1e-12));
  CHECK(two.optimizer == one.optimizer);
  const auto built = train::detail::build_layers(m, train::layer_shape_of(m, p, zero2));
  const auto largest = static_cast<double>(train::detail::largest_layer_parameters(m, built));
  CHECK(two.activations.value() == Approx(one.activations.value() + largest * 4.0).epsilon(1e-12));

  // Communication: ZeRO-1's reduce-scatter once per iteration becomes one per microbatch; the gather of the
  // updated weights stays once per iteration.
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 64);
  const double big = 8e10;
  const std::int64_t microbatches = 4;
  const train::plan_shape s{1, 1, 64, microbatches};
  const train::step_model first{c, zero1};
  const train::step_model second{c, zero2};
  const double reduce = 0.5 * first.gradient_sync(big, s).value();
  CHECK(second.exposed_gradient_reduction(big, s, seconds{0.0}).value() ==
        Approx(reduce * static_cast<double>(microbatches)).epsilon(1e-9));
  CHECK(first.exposed_gradient_reduction(big, s, seconds{0.0}).value() == Approx(reduce).epsilon(1e-9));
  CHECK(second.exposed_parameter_gather(big, s, seconds{0.0}) ==
        first.exposed_parameter_gather(big, s, seconds{0.0}));
  // Overlapped with every backward pass, each leaves its last unit.
  const double units = train::step_model::gradient_buckets(big, s);
  CHECK(second.exposed_gradient_reduction(big, s, seconds{1e6}).value() ==
        Approx((reduce / units + (reduce - reduce / units) * second.overlap_slowdown()) *
               static_cast<double>(microbatches))
            .epsilon(1e-9));
  // The optimizer step reads and writes this rank's gradient shard only.
  CHECK(second.optimizer_step(big, s, c.device_at(0)) < first.optimizer_step(big, s, c.device_at(0)));

  // The rules: with the distributed optimizer, without fsdp, without a pipeline.
  auto alone = zero2;
  alone.distributed_optimizer = false;
  CHECK_THROWS_WITH(train::validate(m, p, alone, 8), Catch::Contains("give `distributed_optimizer`"));
  CHECK_THROWS_WITH(train::validate(m, train::parallelism{1, 2, 4}, zero2, 8), Catch::Contains("`pp` 1"));
}

TEST_CASE("fsdp: more exposed communication than ZeRO-1, a smaller optimizer step, equal on one rank",
          "[train][fsdp]") {
  const model::model m = fsdp_test::small_llama();
  const sched::schedule_cache cache;
  const auto d = *hw::find_preset("h100-sxm");
  for (const int dp : {1, 8}) {
    const train::parallelism p{1, 1, dp};
    const auto c = phaze::test::cluster_of(d, p);
    const auto a = train::estimate_step(m, c, p, fsdp_test::knobs(true), cache);
    const auto b = train::estimate_step(m, c, p, fsdp_test::knobs(false), cache);
    INFO("dp " << dp);
    if (dp == 1) {
      CHECK(a.time_per_batch.value() == Approx(b.time_per_batch.value()).epsilon(1e-12));
    } else {
      // Gathers and reduce-scatters in every microbatch against one overlapped reduction per iteration; an
      // optimizer step over shards only; the same computation.
      CHECK(a.breakdown.dp_comm > b.breakdown.dp_comm);
      CHECK(a.breakdown.optimizer < b.breakdown.optimizer);
      CHECK(a.breakdown.compute == b.breakdown.compute);
      CHECK(a.time_per_batch.value() ==
            Approx(b.time_per_batch.value() + (a.breakdown.dp_comm - b.breakdown.dp_comm).value() +
                   (a.breakdown.optimizer - b.breakdown.optimizer).value())
                .epsilon(1e-12));
      CHECK(a.peak_memory < b.peak_memory);
    }
  }
  // --fp8-param-gather needs a sharded weight gather: the distributed optimizer's, or fsdp's.
  auto k = fsdp_test::knobs(true);
  k.precision = hw::precision::fp8;
  k.fp8_param_gather = true;
  CHECK_NOTHROW(train::validate(m, train::parallelism{1, 1, 8}, k, 8));
  k.fsdp = false;
  k.distributed_optimizer = false;
  CHECK_THROWS_AS(train::validate(m, train::parallelism{1, 1, 8}, k, 8), input_error);
}

TEST_CASE("fsdp: step_policy on a model's tables equals estimate_step for any split",
          "[train][fsdp][place]") {
  const model::model m = zoo::get("llama3-8b");
  std::mt19937 rng(11);
  const sched::schedule_cache cache;
  const auto d = *hw::find_preset("h100-sxm");
  int compared = 0;
  for (const auto& [mode, reshard] : {std::pair{model::recompute::none, train::fsdp_reshard::by_pipeline},
                                      std::pair{model::recompute::full, train::fsdp_reshard::by_pipeline},
                                      std::pair{model::recompute::none, train::fsdp_reshard::always},
                                      std::pair{model::recompute::full, train::fsdp_reshard::never}}) {
    auto k = fsdp_test::knobs(true, 256);
    k.recompute = mode;
    k.fsdp_reshard_after_forward = reshard;
    const int tp = 2;
    const auto mp = place::model_tables(m, phaze::test::cluster_of(d, 64), k, {tp}, cache);
    const auto& table = mp.problem.tables.front();
    for (const int pp : {1, 2, 4}) {
      const int dp = 64 / (tp * pp);
      const train::parallelism p{tp, pp, dp};
      for (int trial = 0; trial < (pp > 1 ? 2 : 1); ++trial) {
        std::vector<train::stage_layers> split;
        for (int i = 0; i < pp; ++i) split.push_back(train::uniform_stage(m, pp, i));
        if (trial == 1) {
          // Move blocks from the first stage to the last: an uneven split.
          split.front().blocks -= 2;
          split.back().blocks += 2;
        }
        std::vector<std::vector<std::size_t>> nodes;
        std::size_t next = 0;
        for (const auto& st : split) {
          std::vector<std::size_t> own;
          const auto count =
              static_cast<std::size_t>(st.blocks) + (st.embedding ? 1U : 0U) + (st.head ? 1U : 0U);
          for (std::size_t j = 0; j < count; ++j) own.push_back(next++);
          nodes.push_back(own);
        }
        const auto e = train::estimate_step(m, phaze::test::cluster_of(d, p), p, k, cache, split);
        const auto planned = place::evaluate(mp.problem, table, dp, nodes, mp.policy);
        CHECK(planned.time_per_batch.value() == Approx(e.time_per_batch.value()).epsilon(1e-9));
        CHECK(planned.peak_memory.value() == Approx(e.peak_memory.value()).epsilon(1e-9));
        ++compared;
      }
    }
  }
  CHECK(compared == 20);
}

TEST_CASE("hybrid sharding: states over a group, gathers inside it, shards all-reduced across the groups",
          "[train][fsdp][hsdp]") {
  const model::model m = fsdp_test::small_llama();
  const auto d = *hw::find_preset("h100-sxm");
  const train::parallelism p{1, 1, 64};
  const auto c = phaze::test::cluster_of(d, p);
  auto full = fsdp_test::knobs(true);
  full.grad_reduce_in_bf16 = true;
  // A group of every data-parallel rank is FULL_SHARD exactly: memory, communication and the whole step.
  auto all = full;
  all.fsdp_shard = 64;
  sched::schedule_cache cache;
  CHECK(train::device_memory(m, p, all, 0) == train::device_memory(m, p, full, 0));
  CHECK(train::estimate_step(m, c, p, all, cache).time_per_batch.value() ==
        train::estimate_step(m, c, p, full, cache).time_per_batch.value());
  // Groups of 8 (one DGX node each): every state divided by 8 instead of 64, the working set unchanged.
  auto node = full;
  node.fsdp_shard = 8;
  const auto params = static_cast<double>(train::stage_parameters(m, train::uniform_stage(m, 1, 0), 1));
  const auto hybrid = train::device_memory(m, p, node, 0);
  const auto sharded = train::device_memory(m, p, full, 0);
  CHECK(hybrid.weights.value() == Approx(params * 2.0 / 8.0).epsilon(1e-12));
  CHECK(hybrid.gradients.value() == Approx(params * 2.0 / 8.0).epsilon(1e-12));
  CHECK(hybrid.optimizer.value() == Approx(params * 12.0 / 8.0).epsilon(1e-12));
  CHECK(hybrid.activations == sharded.activations);
  // Communication with nothing to hide under, per microbatch: two gathers and a reduce-scatter inside the
  // group (halves of its all-reduce rings) and the all-reduce of a 1/8 shard across the 8 groups.
  const std::int64_t microbatches = 4;
  const train::plan_shape s{1, 1, 64, microbatches};
  const train::step_model hsdp{c, node};
  const double big = 8e10;
  const double inside = hsdp.ring_sync(big, 8, 1, s).value();
  const double across = hsdp.ring_sync(big / 8.0, 8, 8, s).value();
  CHECK(hsdp.exposed_fully_sharded(big, s, seconds{0.0}).value() ==
        Approx((1.5 * inside + across) * static_cast<double>(microbatches)).epsilon(1e-9));
  // Many ranks, small layers: the rings' steps (latency) dominate, and a group's rings of 8 and 128 ranks
  // take far fewer than one ring over all 1,024 (a flat ring over NCCL's channels otherwise gets the nodes'
  // whole network bandwidth, so on DGX nodes hybrid sharding pays off in steps, not in bytes).
  const auto big_cluster = phaze::test::cluster_of(d, 1024);
  const train::plan_shape wide{1, 1, 1024, microbatches};
  auto groups = full;
  groups.fsdp_shard = 8;
  const double small = 1e8;
  CHECK(train::step_model{big_cluster, groups}.exposed_fully_sharded(small, wide, seconds{0.0}).value() <
        train::step_model{big_cluster, full}.exposed_fully_sharded(small, wide, seconds{0.0}).value());
  // The rules: a group that does not divide dp x cp, a group without fsdp, and experts are refused.
  auto odd = node;
  odd.fsdp_shard = 3;
  CHECK_THROWS_WITH(train::validate(m, p, odd, 64), Catch::Contains("`fsdp_shard` must divide"));
  auto bare = fsdp_test::knobs(false);
  bare.fsdp_shard = 8;
  CHECK_THROWS_WITH(train::validate(m, p, bare, 64), Catch::Contains("give `fsdp`"));
  CHECK_NOTHROW(train::validate(m, p, node, 64));
}
