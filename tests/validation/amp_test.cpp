// Validation of the training-step model against AMP's published real trials (Li et al., "AMP: Automatically
// Finding Model Parallel Strategies with Heterogeneity Awareness", NeurIPS 2022; logs from AMP's code,
// github.com/DachengLi1/AMP, src/results/). The logs are read at test time from PHAZE_SHARED_DIR and never
// copied into the project; without them the cases that need them are skipped with a warning.
//
// GPT-2 (24 blocks, hidden 1024) on 16 T4s and the TransGAN generator (a composite model: 56 layer entries
// of two kinds of block and the resizes between them) on 16 V100s: every trial is predicted with
// train::estimate_step on AMP's exact stage cuts, and phaze's order of the trials is compared with the
// measured one (Spearman's rho), next to AMP's own cost model; failed trials (out of memory) are counted
// against phaze's memory model. docs/validation-amp.md explains the set-up and what the numbers show.
#include <phaze/cluster/presets.hpp>
#include <phaze/core/statistics.hpp>
#include <phaze/hw/device.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/model.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/sched/scheduler.hpp>
#include <phaze/train/calibration.hpp>
#include <phaze/train/knobs.hpp>
#include <phaze/train/memory.hpp>
#include <phaze/train/step.hpp>

#include <catch2/catch.hpp>

#include "../support/amp_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

using namespace phaze;
namespace amp = phaze::testing::amp;

namespace {

std::string amp_log_path(const char* file) {
  return std::string{PHAZE_SHARED_DIR} + "/validation/amp/" + file;
}

// AMP's layer list for GPT-2 (src/cost_homo.py: ["embed2h", "noop", 24 x "transformer_layer", "noop",
// "noop", "embed2v", "noop"]) is the module list of the DeepSpeed pipeline model it trained
// (GPT2ModelPipe in megatron/model/gpt2_model.py of AMP's Megatron-LM copy): the tied word + position
// embedding, a transpose, the 24 blocks, a transpose, the final LayerNorm, the tied output projection
// (logits) and the fp16-to-fp32 cast before the loss. phaze's head is final norm + projection + loss.
constexpr int gpt2_entries = 30;
constexpr int embedding_entry = 0;
constexpr int first_block_entry = 2;
constexpr int gpt2_blocks = 24;
constexpr int final_norm_entry = 27;
constexpr int head_entry = 28;

/// phaze's stages for AMP's cut points: stage k holds the entries [cuts[k], cuts[k + 1]).
std::vector<train::stage_layers> stages_of_cuts(const std::vector<int>& cuts) {
  REQUIRE(cuts.size() >= 2);
  REQUIRE(cuts.front() == 0);
  REQUIRE(cuts.back() == gpt2_entries);
  std::vector<train::stage_layers> stages;
  int norm_stage = -1;
  int head_stage = -1;
  for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
    train::stage_layers s;
    for (int entry = cuts[k]; entry < cuts[k + 1]; ++entry) {
      if (entry == embedding_entry) s.embedding = true;
      if (entry >= first_block_entry && entry < first_block_entry + gpt2_blocks) ++s.blocks;
      if (entry == final_norm_entry) norm_stage = static_cast<int>(k);
      if (entry == head_entry) {
        s.head = true;
        head_stage = static_cast<int>(k);
      }
    }
    stages.push_back(s);
  }
  // phaze's head layer holds the final norm with the projection: a cut between them cannot be expressed.
  REQUIRE(norm_stage == head_stage);
  return stages;
}

/// GPT-2 as AMP ran it (examples/ds_pretrain_gpt2_pipe.sh and src/homogeneous.py of AMP's repository): 24
/// blocks, hidden 1024, 16 heads, sequence 1024, AMP's vocabulary of 52256; the zoo's GPT-2 family (learned
/// positions, GELU MLP of 4 h, pre-norm, biases, dropout, tied embeddings).
model::model amp_gpt2() {
  model::transformer_config c = zoo::gpt2().config;
  c.name = "gpt2-amp";
  c.hidden = 1024;
  c.heads = 16;
  c.ffn = 4 * 1024;
  c.layers = gpt2_blocks;
  c.vocab = 52256;
  c.sequence = 1024;
  c.max_positions = 1024;
  return model::make_model(c);
}

/// The knobs AMP's real trials ran with: fp16 (--fp16 and DeepSpeed's fp16 section), Adam (Megatron's
/// FusedAdam), no activation checkpointing (no --checkpoint-activations), DeepSpeed's 1F1B TrainSchedule,
/// no sequence parallelism, no sharded optimizer (no ZeRO section).
train::training_knobs amp_knobs(std::int64_t global_batch, std::int64_t microbatch) {
  train::training_knobs k;
  k.global_batch = global_batch;
  k.microbatch = microbatch;
  k.precision = hw::precision::fp16;
  k.opt = train::optimizer::adam;
  k.recompute = model::recompute::none;
  k.schedule = train::pipeline_schedule::one_f_one_b;
  k.sequence_parallel = false;
  k.distributed_optimizer = false;
  k.host_overhead = train::eager_host_per_op;  // the command line's default: DeepSpeed runs eager PyTorch
  return k;
}

struct predicted_trial {
  amp::trial trial;
  train::step_estimate estimate;
  /// Diagnostic only, not phaze's model: the same stage times with the fill and drain of uneven stages
  /// summed stage by stage, (m - 1) t_max + sum_i t_i (what AMP's own cost model does, src/pipe.py
  /// pipe_cost), instead of phaze's (p - 1) t_max.
  double uneven_fill_s = 0.0;
};

double uneven_fill_time(const train::step_estimate& e) {
  double t_max = 0.0;
  double sum = 0.0;
  for (const auto& s : e.stages) {
    t_max = std::max(t_max, s.per_microbatch().value());
    sum += s.per_microbatch().value();
  }
  const auto& b = e.breakdown;
  return static_cast<double>(e.microbatches - 1) * t_max + sum + b.dp_comm.value() + b.optimizer.value();
}

/// The measured seconds per iteration as the log gives them, or "inf" for a run that failed.
std::string measured_text(const amp::trial& t) {
  if (!t.ran()) return "inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", *t.measured_s);
  return text;
}

std::string cuts_text(const std::vector<int>& cuts) {
  std::ostringstream out;
  for (std::size_t i = 0; i < cuts.size(); ++i) out << (i ? "," : "") << cuts[i];
  return out.str();
}

}  // namespace

TEST_CASE("AMP's trial logs: a trial line parses, a malformed one is an error", "[amp]") {
  std::istringstream good{
      "{'hidden_size': tensor([1024.]), 'type': 'gpt2'}\n"
      "gbs:32\n"
      "rank 0: ((1, {'mp_deg': tensor([1.])}, [0, 30]), tensor([1.2443]))\n"
      "running real trials till iter 1 takes 660.9Simulating result: None, [0, 15, 30], 2, {'mp_deg': "
      "tensor([1.]), 'dp_deg': tensor([8.]), 'pp_deg': tensor([2.])}, with p_cost: tensor([1.4714]), r_cost: "
      "1.38 \n"
      "Simulating result: None, [0, 30], 2, {'mp_deg': tensor([4.]), 'dp_deg': tensor([4.]), 'pp_deg': "
      "tensor([1.])}, with p_cost: tensor([3.3700]), r_cost: inf \n"};
  const amp::trial_log log = amp::parse_log(good, "good");
  CHECK(log.global_batch == 32);
  REQUIRE(log.trials.size() == 2);
  const amp::trial& t = log.trials[0];
  CHECK(t.line == 4);
  CHECK(t.cuts == std::vector<int>{0, 15, 30});
  CHECK(t.microbatch == 2);
  CHECK(t.tp == 1);
  CHECK(t.dp == 8);
  CHECK(t.pp == 2);
  CHECK(t.amp_predicted_s == Approx(1.4714));
  REQUIRE(t.ran());
  CHECK(*t.measured_s == Approx(1.38));
  CHECK_FALSE(log.trials[1].ran());
  CHECK(log.trials[1].tp == 4);

  const auto error_of = [](const std::string& text) {
    std::istringstream in{"gbs:32\n" + text + "\n"};
    try {
      amp::parse_log(in, "bad");
    } catch (const amp::parse_error& e) {
      return std::string{e.what()};
    }
    FAIL("no parse_error for: " << text);
    return std::string{};
  };
  const std::string trial_head = "Simulating result: None, [0, 15, 30], 2, {'mp_deg': tensor([1.]), ";
  CHECK_THAT(error_of(trial_head + "'dp_deg': tensor([8.]), 'pp_deg': tensor([2.])}, with p_cost: "
                                   "tensor([1.4714]), r_cost: fast"),
             Catch::Contains("bad:2: expected a number"));
  CHECK_THAT(error_of(trial_head + "'dp_deg': tensor([8.]), 'pp_deg': tensor([4.])}, with p_cost: "
                                   "tensor([1.4714]), r_cost: 1.38"),
             Catch::Contains("expected pp + 1 = 5 cut points, found 3"));
  CHECK_THAT(error_of(trial_head + "'dp_deg': tensor([8.5]), 'pp_deg': tensor([2.])}, with p_cost: "
                                   "tensor([1.4714]), r_cost: 1.38"),
             Catch::Contains("whole degree"));
  CHECK_THAT(error_of("Simulating result: {0: [0, 1]}, [0, 30], 1"),
             Catch::Contains("expected \" None, [\""));
  CHECK_THAT(error_of(trial_head + "'dp_deg': tensor([8.]), 'pp_deg': tensor([2.])}, with p_cost: "
                                   "tensor([1.4714]), r_cost: 1.38 extra"),
             Catch::Contains("unexpected text"));
  std::istringstream no_trials{"gbs:32\n"};
  CHECK_THROWS_AS(amp::parse_log(no_trials, "empty"), amp::parse_error);
}

TEST_CASE("AMP's GPT-2 cut points map onto phaze's stages", "[amp]") {
  using s = train::stage_layers;
  CHECK(stages_of_cuts({0, 30}) == std::vector<s>{{24, true, true}});
  CHECK(stages_of_cuts({0, 9, 15, 21, 30}) ==
        std::vector<s>{{7, true, false}, {6, false, false}, {6, false, false}, {5, false, true}});
  // Entry 1 (a transpose) alone makes a stage without layers; entries 26-29 go with the last block.
  const auto pp16 = stages_of_cuts({0, 1, 2, 3, 4, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 30});
  REQUIRE(pp16.size() == 16);
  CHECK(pp16[0] == s{0, true, false});
  CHECK(pp16[1] == s{0, false, false});
  CHECK(pp16[15] == s{1, false, true});
  std::int64_t blocks = 0;
  for (const auto& stage : pp16) blocks += stage.blocks;
  CHECK(blocks == gpt2_blocks);
}

TEST_CASE("AMP's homogeneous trials: GPT-2 on 16 T4s, phaze's order vs measured", "[amp]") {
  const std::string path = amp_log_path("homogeneous_results.txt");
  if (!std::filesystem::exists(path)) {
    WARN("skipped: AMP's trial log " << path << " is absent (PHAZE_SHARED_DIR/validation/amp)");
    return;
  }
  const amp::trial_log log = amp::read_log(path);
  // The published log holds 52 real trials, 5 of which failed; a count that differs means a parse problem.
  REQUIRE(log.trials.size() == 52);
  REQUIRE(log.global_batch == 32);

  const model::model gpt2 = amp_gpt2();
  // 4 AWS g4dn.12xlarge of 4 T4 each, the links of AMP's paper (cluster/presets.hpp).
  const cluster::cluster t4 = cluster::preset_cluster("t4", 16);
  const sched::schedule_cache cache;  // list schedules: on GPUs they equal the ILP's (docs/architecture.md)

  std::vector<predicted_trial> trials;
  for (const amp::trial& t : log.trials) {
    INFO("line " << t.line << ": cuts " << cuts_text(t.cuts) << ", microbatch " << t.microbatch);
    REQUIRE(t.tp * t.dp * t.pp == 16);
    const train::parallelism p{t.tp, t.pp, t.dp};
    const train::training_knobs k = amp_knobs(log.global_batch, t.microbatch);
    train::validate(gpt2, p, k, 16);
    const train::step_estimate e = train::estimate_step(gpt2, t4, p, k, cache, stages_of_cuts(t.cuts));
    CHECK(e.time_per_batch.value() == Approx(e.breakdown.total().value()).epsilon(1e-12));
    trials.push_back({t, e, uneven_fill_time(e)});
  }

  std::printf("\nAMP homogeneous trials: GPT-2 (24 x 1024, seq 1024, vocab 52256), batch 32, fp16, 16 T4\n");
  std::printf("%4s %2s %2s %2s %3s %3s %8s %8s %8s | %7s %7s %7s %7s %7s %7s | %6s %4s  %s\n", "line", "tp",
              "dp", "pp", "mbs", "m", "measured", "amp", "phaze", "compute", "bubble", "tp_comm", "pp_comm",
              "dp_comm", "optim", "mem_GB", "fits", "cuts");
  std::vector<double> measured;
  std::vector<double> amp_predicted;
  std::vector<double> phaze_predicted;
  std::vector<double> uneven_fill;
  int failed = 0;
  int failed_predicted_not_fitting = 0;
  int ran_predicted_not_fitting = 0;
  for (const auto& [t, e, uneven] : trials) {
    const auto& b = e.breakdown;
    std::printf(
        "%4zu %2d %2d %2d %3lld %3lld %8s %8.2f %8.3f | %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f | %6.2f %4s  "
        "%s\n",
        t.line, t.tp, t.dp, t.pp, static_cast<long long>(t.microbatch),
        static_cast<long long>(e.microbatches), measured_text(t).c_str(), t.amp_predicted_s,
        e.time_per_batch.value(), b.compute.value(), b.bubble.value(), b.tp_comm.value(), b.pp_comm.value(),
        b.dp_comm.value(), b.optimizer.value(), e.peak_memory.value() / 1e9, e.fits ? "yes" : "no",
        cuts_text(t.cuts).c_str());
    if (t.ran()) {
      measured.push_back(*t.measured_s);
      amp_predicted.push_back(t.amp_predicted_s);
      phaze_predicted.push_back(e.time_per_batch.value());
      uneven_fill.push_back(uneven);
      if (!e.fits) ++ran_predicted_not_fitting;
    } else {
      ++failed;
      if (!e.fits) ++failed_predicted_not_fitting;
    }
  }
  const double rho_phaze = spearman(phaze_predicted, measured);
  const double rho_amp = spearman(amp_predicted, measured);
  const double r_phaze = pearson(phaze_predicted, measured);
  const double rho_uneven = spearman(uneven_fill, measured);
  std::printf(
      "trials that ran: %zu; Spearman vs measured: phaze %.4f, AMP's cost model %.4f; Pearson: phaze %.4f\n",
      measured.size(), rho_phaze, rho_amp, r_phaze);
  std::printf(
      "diagnostic (not phaze's model): uneven-stage fill and drain (m - 1) t_max + sum t_i: Spearman %.4f\n",
      rho_uneven);
  std::printf(
      "failed trials (r_cost inf): %d, of which phaze predicts %d as not fitting; trials that ran "
      "predicted as not fitting: %d\n\n",
      failed, failed_predicted_not_fitting, ran_predicted_not_fitting);

  CHECK(measured.size() == 47);
  CHECK(failed == 5);
  // A plan that really ran must never be rejected for memory: phaze's memory model may only be optimistic.
  CHECK(ran_predicted_not_fitting == 0);
  // AMP's own cost model on its own trials: the README of the logs says about 0.93.
  CHECK(rho_amp == Approx(0.935).margin(0.005));
  // The goal is Spearman >= 0.95 on this set. phaze reaches 0.92 (0.9242 when written) without any constant
  // fitted to these trials; this floor guards against regressions. What blocks the goal
  // (docs/validation-amp.md): the fill and drain of uneven stages is charged as (p - 1) t_max of the slowest
  // stage, while DeepSpeed's 1F1B pays the sum of the stage times once (0.93 with that change alone); a
  // per-microbatch cost at microbatch 1 that phaze does not model (DeepSpeed's pipeline engine, kernel
  // launches, PCIe collective latency on T4s) makes the tp >= 2 trials with 16-32 microbatches slower than
  // their rank in phaze's order.
  CHECK(rho_phaze >= 0.90);
}

TEST_CASE("AMP's heterogeneous cluster: GPT-2 on 12 V100s and 4 T4s, every configuration expressed",
          "[amp]") {
  // AMP's third experiment (src/het_cluster.py of AMP's repository) searches the same GPT-2, batch 32, over
  // 3 AWS p3.8xlarge and 1 g4dn.12xlarge, ranks laid node by node (V100s first). Its result log is held out
  // of this project; the configurations it draws from are those of the homogeneous log (tp 1, 2 or 4 inside
  // a node, dp x pp the rest, microbatch 1 to 8, cuts from the same DP), so each of those is expressed on
  // the mixed cluster here: pp 1 and pp 2 put V100s and T4s in one stage, which runs at the T4s' pace.
  const std::string path = amp_log_path("homogeneous_results.txt");
  if (!std::filesystem::exists(path)) {
    WARN("skipped: AMP's trial log " << path << " is absent (PHAZE_SHARED_DIR/validation/amp)");
    return;
  }
  const amp::trial_log log = amp::read_log(path);
  const model::model gpt2 = amp_gpt2();
  const cluster::cluster het{{{*hw::find_preset("v100-16gb"), 12, cluster::node_of("v100-16gb")},
                              {*hw::find_preset("t4"), 4, cluster::node_of("t4")}}};
  const cluster::cluster v100 = cluster::preset_cluster("v100-16gb", 16);
  const sched::schedule_cache cache;
  int mixed_plans = 0;
  std::printf(
      "\nAMP's configurations on the heterogeneous cluster (12 V100 + 4 T4), GPT-2, batch 32, fp16\n");
  std::printf("%4s %2s %2s %2s %3s %8s %8s %8s  %s\n", "line", "tp", "dp", "pp", "mbs", "het_s", "v100_s",
              "mixed", "cuts");
  for (const amp::trial& t : log.trials) {
    INFO("line " << t.line << ": cuts " << cuts_text(t.cuts) << ", microbatch " << t.microbatch);
    const train::parallelism p{t.tp, t.pp, t.dp};
    const train::training_knobs k = amp_knobs(log.global_batch, t.microbatch);
    train::validate(gpt2, p, k, 16);
    const auto split = stages_of_cuts(t.cuts);
    const train::step_estimate e = train::estimate_step(gpt2, het, p, k, cache, split);
    const train::step_estimate all_v100 = train::estimate_step(gpt2, v100, p, k, cache, split);
    int mixed = 0;
    for (std::size_t i = 0; i < e.stages.size(); ++i) {
      const auto& st = e.stages[i];
      const auto first = static_cast<int>(i) * t.tp * t.dp;
      // A stage holds T4s exactly when its ranks reach device 12; then the T4s pace it.
      const bool has_t4 = first + t.tp * t.dp > 12;
      CHECK(st.mixed == (has_t4 && first < 12));
      CHECK(het.device_at(static_cast<int>(st.pacing_rank)).name.view() == (has_t4 ? "t4" : "v100-16gb"));
      // Every stage is at least as slow as on V100s alone (the T4s are slower in every layer, and every
      // link the T4 node adds is a PCIe link or meets a V100 node's 10 Gb/s interface).
      CHECK(st.per_microbatch().value() >= all_v100.stages[i].per_microbatch().value() * (1 - 1e-12));
      mixed += st.mixed ? 1 : 0;
    }
    CHECK(e.time_per_batch.value() >= all_v100.time_per_batch.value() * (1 - 1e-12));
    CHECK(e.time_per_batch.value() == Approx(e.breakdown.total().value()).epsilon(1e-12));
    if (mixed > 0) ++mixed_plans;
    std::printf("%4zu %2d %2d %2d %3lld %8.3f %8.3f %8d  %s\n", t.line, t.tp, t.dp, t.pp,
                static_cast<long long>(t.microbatch), e.time_per_batch.value(),
                all_v100.time_per_batch.value(), mixed, cuts_text(t.cuts).c_str());
  }
  // The pp 1 and pp 2 configurations (each stage over 16 or 8 devices) hold both types in a stage.
  CHECK(mixed_plans >= 10);
}

/// phaze's stages for AMP's cut points on the TransGAN generator: zoo::transgan() has exactly AMP's 56 layer
/// entries as its nodes, so stage k holds nodes [cuts[k], cuts[k + 1]).
std::vector<train::stage_layers> transgan_stages_of_cuts(const std::vector<int>& cuts) {
  REQUIRE(cuts.size() >= 2);
  REQUIRE(cuts.front() == 0);
  REQUIRE(cuts.back() == 56);
  std::vector<train::stage_layers> stages;
  for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
    train::stage_layers s;
    s.embedding = k == 0;
    s.head = k + 2 == cuts.size();
    s.blocks = cuts[k + 1] - cuts[k] - (s.embedding ? 1 : 0) - (s.head ? 1 : 0);
    REQUIRE(s.blocks >= 0);
    stages.push_back(s);
  }
  return stages;
}

TEST_CASE("AMP's heterogeneous-model trials: TransGAN generator on 16 V100s", "[amp]") {
  const std::string path = amp_log_path("het_model_results.txt");
  if (!std::filesystem::exists(path)) {
    WARN("skipped: AMP's trial log " << path << " is absent (PHAZE_SHARED_DIR/validation/amp)");
    return;
  }
  const amp::trial_log log = amp::read_log(path);
  REQUIRE(log.trials.size() == 65);
  REQUIRE(log.global_batch == 64);

  const model::model gan = zoo::transgan();
  REQUIRE(gan.size() == 56);  // AMP's 56-entry TransGAN layer list (docs/validation-amp.md)
  // 4 AWS p3.8xlarge of 4 V100 16 GB each: NVLink inside a node, one 10 Gb/s interface per node.
  const cluster::cluster v100 = cluster::preset_cluster("v100-16gb", 16);
  const sched::schedule_cache cache;

  std::printf("\nAMP heterogeneous-model trials: TransGAN generator (56 entries), batch 64, fp16, 16 V100\n");
  std::printf("%4s %2s %2s %2s %3s %3s %8s %8s %8s | %7s %7s %7s %7s %7s | %6s %4s  %s\n", "line", "tp", "dp",
              "pp", "mbs", "m", "measured", "amp", "phaze", "compute", "bubble", "tp_comm", "pp_comm",
              "dp_comm", "mem_GB", "fits", "cuts");
  std::vector<double> measured;
  std::vector<double> amp_predicted;
  std::vector<double> phaze_predicted;
  int failed = 0;
  int failed_predicted_not_fitting = 0;
  int ran_predicted_not_fitting = 0;
  for (const amp::trial& t : log.trials) {
    INFO("line " << t.line << ": cuts " << cuts_text(t.cuts) << ", microbatch " << t.microbatch);
    REQUIRE(t.tp * t.dp * t.pp == 16);
    const train::parallelism p{t.tp, t.pp, t.dp};
    const train::training_knobs k = amp_knobs(log.global_batch, t.microbatch);
    train::validate(gan, p, k, 16);
    const train::step_estimate e =
        train::estimate_step(gan, v100, p, k, cache, transgan_stages_of_cuts(t.cuts));
    CHECK(e.time_per_batch.value() == Approx(e.breakdown.total().value()).epsilon(1e-12));
    const auto& b = e.breakdown;
    std::printf(
        "%4zu %2d %2d %2d %3lld %3lld %8s %8.2f %8.3f | %7.3f %7.3f %7.3f %7.3f %7.3f | %6.2f %4s  %s\n",
        t.line, t.tp, t.dp, t.pp, static_cast<long long>(t.microbatch),
        static_cast<long long>(e.microbatches), measured_text(t).c_str(), t.amp_predicted_s,
        e.time_per_batch.value(), b.compute.value(), b.bubble.value(), b.tp_comm.value(), b.pp_comm.value(),
        b.dp_comm.value(), e.peak_memory.value() / 1e9, e.fits ? "yes" : "no", cuts_text(t.cuts).c_str());
    if (t.ran()) {
      measured.push_back(*t.measured_s);
      amp_predicted.push_back(t.amp_predicted_s);
      phaze_predicted.push_back(e.time_per_batch.value());
      if (!e.fits) ++ran_predicted_not_fitting;
    } else {
      ++failed;
      if (!e.fits) ++failed_predicted_not_fitting;
    }
  }
  const double rho_amp = spearman(amp_predicted, measured);
  const double rho_phaze = spearman(phaze_predicted, measured);
  std::printf(
      "trials that ran: %zu; Spearman vs measured: phaze %.4f, AMP's cost model %.4f; Pearson: phaze %.4f\n",
      measured.size(), rho_phaze, rho_amp, pearson(phaze_predicted, measured));
  std::printf(
      "failed trials (r_cost inf): %d, of which phaze predicts %d as not fitting; trials that ran "
      "predicted as not fitting: %d\n\n",
      failed, failed_predicted_not_fitting, ran_predicted_not_fitting);
  CHECK(failed == 46);
  CHECK(rho_amp == Approx(0.853).margin(0.005));  // the README of the logs: about 0.85
  // A plan that really ran must never be rejected for memory.
  CHECK(ran_predicted_not_fitting == 0);
  // The goal: Spearman >= 0.90 on this set. phaze reaches 0.9158 (when written; AMP's own model 0.853) with
  // no constant fitted to these trials (docs/validation-amp.md).
  CHECK(rho_phaze >= 0.90);
  // AMP has no memory model; phaze rejects 20 of the 46 failed trials (all at microbatch 4 or more).
  CHECK(failed_predicted_not_fitting >= 20);
}

namespace {
/// The trials of `log` that ran, calibrated on three of them (the least, the median and the greatest measured
/// time: the fixed rule of the published-run sets), and the mean absolute error of the others in absolute
/// time.
double amp_calibrated_error(const amp::trial_log& log, const model::model& m, const cluster::cluster& c,
                            std::vector<train::stage_layers> (*stages)(const std::vector<int>&),
                            const char* title) {
  std::vector<const amp::trial*> ran;
  for (const auto& t : log.trials)
    if (t.ran()) ran.push_back(&t);
  std::stable_sort(ran.begin(), ran.end(),
                   [](const amp::trial* a, const amp::trial* b) { return *a->measured_s < *b->measured_s; });
  const std::vector<std::size_t> picks{0, ran.size() / 2, ran.size() - 1};
  auto predict = [&](const amp::trial& t, const train::calibration& cal) {
    const sched::schedule_cache cache;
    return train::estimate_step(m, train::calibrated(c, cal), {t.tp, t.pp, t.dp},
                                train::calibrated(amp_knobs(log.global_batch, t.microbatch), cal), cache,
                                stages(t.cuts))
        .time_per_batch.value();
  };
  std::vector<train::calibration_run> fit_runs;
  for (const std::size_t i : picks) {
    const amp::trial* t = ran[i];
    fit_runs.push_back({"line " + std::to_string(t->line),
                        [&, t](const train::calibration& cal) { return predict(*t, cal); }, *t->measured_s});
  }
  const train::calibration_fit fit = train::fit_calibration(fit_runs);
  double before = 0.0;
  double after = 0.0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < ran.size(); ++i) {
    if (std::find(picks.begin(), picks.end(), i) != picks.end()) continue;
    const double measured = *ran[i]->measured_s;
    before += std::abs(predict(*ran[i], {}) - measured) / measured;
    after += std::abs(predict(*ran[i], fit.factors) - measured) / measured;
    ++n;
  }
  std::printf("%s, calibrated on lines %zu, %zu, %zu:", title, ran[picks[0]]->line, ran[picks[1]]->line,
              ran[picks[2]]->line);
  for (const auto& f : fit.fitted)
    std::printf(" %s %.4g", f.c_str(), fit.factors.*(train::find_calibration_factor(f)->value));
  std::printf("\n  the other %zu trials: mean absolute error %.1f%% a priori, %.1f%% calibrated\n", n,
              100.0 * before / static_cast<double>(n), 100.0 * after / static_cast<double>(n));
  return after / static_cast<double>(n);
}
}  // namespace

TEST_CASE("AMP's trials, calibrated on three of each set: absolute time", "[amp][calibrated]") {
  const std::string homogeneous = amp_log_path("homogeneous_results.txt");
  const std::string het = amp_log_path("het_model_results.txt");
  if (!std::filesystem::exists(homogeneous) || !std::filesystem::exists(het)) {
    WARN("skipped: AMP's trial logs are absent (PHAZE_SHARED_DIR/validation/amp)");
    return;
  }
  const double gpt2 =
      amp_calibrated_error(amp::read_log(homogeneous), amp_gpt2(), cluster::preset_cluster("t4", 16),
                           stages_of_cuts, "GPT-2 on 16 T4s");
  const double gan =
      amp_calibrated_error(amp::read_log(het), zoo::transgan(), cluster::preset_cluster("v100-16gb", 16),
                           transgan_stages_of_cuts, "TransGAN on 16 V100s");
  // The goal is 10% on both (48% and 21% a priori); at this commit 19.8% and 21.2%. Three trials picked by
  // measured time are pipelines of similar shape: they cannot tell the GEMM factor from the network's (fitted
  // on every GPT-2 trial, gemm 2.4 and collective 2.1 give 7%), and TransGAN's error is one no factor scales
  // (its best fit on every trial leaves 17%: docs/validation-amp.md).
  CHECK(gpt2 <= 0.25);
  CHECK(gan <= 0.25);
}
