// Published mixture-of-experts runs against phaze: Megatron-Bridge's FP8 pre-training of Qwen3-30B-A3B on
// DGX-H100 (tests/data/validation/nemo-h100-moe.csv, copied from NVIDIA-NeMo/Megatron-Bridge
// docs/performance-summary-archive.md at 067f987df0, with the recipes' settings in the file's header). Each
// row is estimated with exactly its published tp, pp, vp, ep, microbatch, sequence and batch, nothing fitted
// per row. Qwen3-235B-A22B's rows spread 32 expert ranks over tp 2 x dp 16 (expert tensor parallelism 1)
// and split 94 blocks with the embedding and the loss as pipeline layers (32 chunks of 3); GPT-OSS 120B's
// (bf16) come from its config.json; DeepSeek-V3's from its config.json with its pipeline layout string.
// Rows phaze cannot represent are left out and counted: token dropping (no published factor), Mamba layers.
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"
#include "../support/csv.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "phaze/hw/presets.hpp"
#include "phaze/model/hf_config.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

using namespace phaze;

namespace {

std::vector<std::map<std::string, std::string>> moe_rows() {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/validation/nemo-h100-moe.csv");
  REQUIRE(in.good());
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#') continue;
    const auto f = testing::csv_fields(line);
    if (header.empty()) {
      header = f;
      continue;
    }
    REQUIRE(f.size() == header.size());
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < f.size(); ++i) row[header[i]] = f[i];
    rows.push_back(row);
  }
  return rows;
}

model::model deepseek_v3() {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/hf/deepseek-v3.json");
  REQUIRE(in.good());
  return model::from_hf_config(nlohmann::json::parse(in), "deepseek-v3");
}

model::model nemotron_3_nano() {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/hf/nemotron-3-nano-30b-a3b.json");
  REQUIRE(in.good());
  return model::from_hf_config(nlohmann::json::parse(in), "nemotron-3-nano");
}

model::model gpt_oss_120b() {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/hf/gpt-oss-120b.json");
  REQUIRE(in.good());
  return model::from_hf_config(nlohmann::json::parse(in), "gpt-oss-120b");
}

int number_or(const std::string& s, int fallback) {
  return s == "n/a" ? fallback : std::stoi(s);
}

}  // namespace

TEST_CASE("Megatron-Bridge MoE runs on DGX-H100: predicted vs published tokens per second per GPU",
          "[validation][moe]") {
  const auto rows = moe_rows();
  REQUIRE(rows.size() >= 20);
  const sched::schedule_cache cache;
  const hw::device h100 = *hw::find_preset("h100-sxm");
  double nano_sum = 0.0;
  int nano_compared = 0;
  double oss_sum = 0.0;
  double oss_signed = 0.0;
  double oss_worst = 0.0;
  int oss_compared = 0;
  double large_sum = 0.0;
  double large_worst = 0.0;
  int large_compared = 0;
  double sum = 0.0;
  double worst = 0.0;
  int compared = 0;
  int left_out = 0;
  int shown = 0;
  std::printf("%-16s %-9s %5s %3s %3s %3s %3s %3s %10s %10s %8s\n", "model", "release", "gpus", "tp", "pp",
              "vp", "ep", "mb", "phaze", "published", "error");
  for (const auto& r : rows) {
    const int gpus = std::stoi(r.at("gpus"));
    const int tp = std::stoi(r.at("tp"));
    const int pp = std::stoi(r.at("pp"));
    const int cp = std::stoi(r.at("cp"));
    const int vp = number_or(r.at("vp"), 1);
    const int ep = number_or(r.at("ep"), 1);
    const int dp = gpus / (tp * pp * cp);
    // Qwen3-30B-A3B, Qwen3-235B-A22B and GPT-OSS 120B are compared, DeepSeek-V3 shown (Nemotron 3: Mamba
    // layers); token-dropping runs are left out.
    const bool large = r.at("model") == "Qwen3_235B_a22B";
    const bool oss = r.at("model") == "GPT OSS 120B";
    const bool v3 = r.at("model") == "DeepSeekV3 (dropless)";
    const bool nano = r.at("model") == "Nemotron_3_Nano";
    if ((r.at("model") != "Qwen3_30B_a3B" && !large && !oss && !v3 && !nano) ||
        r.at("tokens_per_s_per_gpu") == "n/a") {
      ++left_out;
      continue;
    }
    // GPT-OSS 120B from its config.json (tests/data/hf/gpt-oss-120b.json: 36 blocks, 128 experts, top 4, a
    // 128-token window on every other block).
    model::transformer_config c = oss    ? gpt_oss_120b().config
                                  : v3   ? deepseek_v3().config
                                  : nano ? nemotron_3_nano().config
                                         : zoo::get("qwen3-30b-a3b").config;
    if (large) {
      // Qwen3MoEModelProvider235B_A22B (the file's header): 94 blocks, hidden 4096, 64 heads, 4 key/value
      // groups of 128, 128 experts of 1536, top 8; the 30B's vocabulary and query/key norms.
      c.name = "qwen3-235b-a22b";
      c.layers = 94;
      c.hidden = 4096;
      c.heads = 64;
      c.kv_heads = 4;
      c.ffn = 12288;
      c.expert_ffn = 1536;
    }
    c.sequence = std::stoll(r.at("seq"));
    const model::model m = model::make_model(c);
    // An ep that does not divide dp folds the expert groups over the tensor-parallel ranks (etp 1).
    const train::parallelism par{tp, pp, dp, cp, ep, dp % ep != 0 ? 1 : 0};
    train::training_knobs k;
    k.host_overhead = train::eager_host_per_op;  // the command line's default
    // 94 blocks over pp x vp = 32 chunks: the embedding and the loss counted as layers (96 = 32 x 3).
    k.embedding_in_pipeline_split = k.loss_in_pipeline_split = large;
    k.global_batch = std::stoll(r.at("gbs"));
    k.microbatch = std::stoll(r.at("mbs"));
    k.precision = r.at("precision") == "BF16" ? hw::precision::bf16 : hw::precision::fp8;
    k.fused_attention = true;
    k.sequence_parallel = tp > 1;
    k.tp_comm_overlap = tp > 1;
    k.distributed_optimizer = true;
    k.overlap_grad_reduce = k.overlap_param_gather = true;
    // Megatron-Bridge's performance overrides and FP8 recipes (tests/data/validation/nemo-h100-models.md):
    // bf16 gradients, FP8 weights, overlapped pipeline sends under interleaving.
    k.grad_reduce_in_bf16 = true;
    k.fp8_param_gather = k.precision == hw::precision::fp8;
    k.overlap_p2p = true;
    if (vp > 1) {
      k.schedule = train::pipeline_schedule::interleaved;
      k.virtual_stages = vp;
    }
    // The token dispatcher and EP overlap each release's performance scripts set (Megatron-Bridge
    // scripts/performance/configs/qwen/qwen3_workload_base_configs.py and qwen3_llm_pretrain.py at 53f4c398f,
    // 2026-04-19, and b8475660c, 2026-02-20; configs/qwen3/ at 455483003, 2025-11-20): the 30B on one stage
    // (26.04 on) runs HybridEP's flex dispatcher without EP overlap; the 30B over two stages (26.02) and the
    // 235B (26.02 on) run the all-to-all dispatcher with moe_a2a_overlap (--overlap-moe-expert-parallel-comm
    // and delayed weight gradients); 25.11 set neither. Fused permutation throughout (moe_permute_fusion).
    const bool release_25 = r.at("release").rfind("25.", 0) == 0;
    if (r.at("model") == "Qwen3_30B_a3B" && pp == 1) k.dispatcher = train::moe_dispatcher::flex;
    // Nemotron 3 Nano (the file's header: Megatron-Bridge perf_recipes/nemotronh/h100/nemotronh.py at
    // 067f987df0): HybridEP's flex dispatcher, the norms recomputed (recompute_modules [layernorm]).
    if (nano) {
      k.dispatcher = train::moe_dispatcher::flex;
      k.recompute = model::recompute::selective;
      k.recompute_modules = model::recompute_module::layernorm;
    }
    if ((large || (r.at("model") == "Qwen3_30B_a3B" && pp > 1)) && !release_25) k.overlap_expert_comm = true;
    INFO(r.at("model") << " " << r.at("release"));
    // DeepSeek-V3's recipe lays its 32 chunks out as "Et|(tt|)*30mL" (the file's header): the embedding with
    // one block, thirty chunks of two, the multi-token prediction module with the loss; it recomputes the
    // latent attention's up projections and the dense MLPs (recompute_modules [mla_up_proj, mlp]).
    std::vector<train::stage_layers> split;
    if (v3) {
      k.recompute = model::recompute::selective;
      k.recompute_modules = model::recompute_module::mla_up_proj | model::recompute_module::mlp;
      split =
          train::split_of_layout(train::parse_pipeline_layout("Et|(tt|)*30mL", pp, c.layers, c.mtp_layers));
    }
    train::validate(m, par, k, gpus, split.empty());
    const auto cluster = phaze::test::cluster_of(h100, par);
    const auto e = train::estimate_step(m, cluster, par, k, cache, split);
    const double predicted = static_cast<double>(k.global_batch * c.sequence) / e.time_per_batch.value() /
                             static_cast<double>(gpus);
    const double measured = std::stod(r.at("tokens_per_s_per_gpu"));
    const double error = (predicted - measured) / measured;
    // The 30B's runs that interleave over two stages with ep 8 are shown but kept out of the bounds: phaze
    // puts them 91-238% too fast (the three releases' published numbers for them differ by 77% among
    // themselves), an open failure of the mixture-of-experts model (docs/step-time.md). The 235B's runs
    // (eight stages, four chunks each, etp 1) have a bound of their own.
    // DeepSeek-V3's one run (its precision not published, FP8 taken) is shown
    // too: phaze has it 37% slow, exposing all of its 64-wide expert all-to-alls where the recipe overlaps
    // them (docs/validation.md).
    const bool shown_only = pp == 2 || v3 || nano;
    std::printf("%-16s %-9s %5d %3d %3d %3d %3d %3lld %10.0f %10.0f %+7.1f%%%s%s\n", r.at("model").c_str(),
                r.at("release").c_str(), gpus, tp, pp, vp, ep, static_cast<long long>(k.microbatch),
                predicted, measured, 100.0 * error, e.fits ? "" : " (no fit)",
                shown_only ? " (shown only)" : "");
    if (nano) {
      nano_sum += error;
      ++nano_compared;
    }
    if (shown_only) {
      ++shown;
      continue;
    }
    if (oss) {
      oss_sum += std::abs(error);
      oss_signed += error;
      oss_worst = std::max(oss_worst, std::abs(error));
      ++oss_compared;
      continue;
    }
    if (large) {
      large_sum += std::abs(error);
      large_worst = std::max(large_worst, std::abs(error));
      ++large_compared;
      continue;
    }
    sum += std::abs(error);
    worst = std::max(worst, std::abs(error));
    ++compared;
  }
  const double mean = sum / std::max(compared, 1);
  const double large_mean = large_sum / std::max(large_compared, 1);
  std::printf("%d runs compared, %d shown only (%d left out): mean absolute error %.1f%%, max %.1f%%\n",
              compared, shown, left_out, 100.0 * mean, 100.0 * worst);
  std::printf(
      "Qwen3-235B-A22B (etp 1, 8 stages x 4 chunks): %d runs, mean absolute error %.1f%%, max %.1f%%\n",
      large_compared, 100.0 * large_mean, 100.0 * large_worst);
  std::printf(
      "GPT-OSS 120B (bf16, 4 stages, ep 8): %d runs, mean absolute error %.1f%%, max %.1f%%, mean signed "
      "%+.1f%%\n",
      oss_compared, 100.0 * oss_sum / std::max(oss_compared, 1), 100.0 * oss_worst,
      100.0 * oss_signed / std::max(oss_compared, 1));
  std::printf("Nemotron 3 Nano (Mamba-2 hybrid, shown): %d runs, mean error %+.1f%%\n", nano_compared,
              100.0 * nano_sum / std::max(nano_compared, 1));
  // Measured when Mamba-2 blocks came in: 66.6-73.1% too fast with the scan costed at the GEMM rate,
  // 27.3-32.2% with mamba_ssm's kernels at their measured time per token (mean +29.8%). Regression guard.
  CHECK(nano_compared == 4);
  CHECK(nano_sum / nano_compared > 0.0);
  CHECK(nano_sum / nano_compared <= 0.33);
  CHECK(compared >= 3);
  CHECK(shown >= 3);
  // GPT-OSS 120B: measured when its import came in, 52.8-69.6% more tokens per second than published (mean
  // +64.2%); an open failure of the mixture-of-experts step (docs/validation.md), shown with no bound.
  CHECK(oss_compared == 5);
  // Measured when each run got its recipe's dispatcher and EP overlap: 5 runs (releases 25.11-26.04.01);
  // the four with EP overlap 24.3-32.1% too fast, 25.11's (without) 9.2% too slow; mean 24.4%, max 32.1%
  // (24.5% since the unpermutation's backward gathers its rows).
  // Before, every run was costed with its all-to-alls exposed and came out 7.1-13.6% too slow. Regression
  // guard.
  CHECK(large_compared == 5);
  CHECK(large_mean <= 0.25);
  CHECK(large_worst <= 0.33);
  // Measured when each run got its recipe's dispatcher: 3 runs (one configuration, three releases, HybridEP's
  // flex dispatcher), mean 59.4%, max 60.7%, all too fast (58.4% and 59.7% since the unpermutation's
  // backward gathers its rows). Costed with NCCL's all-to-all instead (what the
  // recipe did not run) they came out within 5.2%: the two-node all-to-all, charged whole, stood in for about
  // 11 s per step of the experts' layers that phaze does not model (docs/step-time.md). Regression guard.
  CHECK(mean <= 0.60);
  CHECK(worst <= 0.61);
}

TEST_CASE("Megatron-Bridge's Qwen3-30B-A3B tuning runs on 16 H100: dispatcher, EP overlap, permutation",
          "[validation][moe]") {
  // Step times Megatron-Bridge's documentation reports for Qwen3-30B-A3B pre-training in bf16 on two DGX-H100
  // nodes, tp 1, pp 1, ep 16, global batch 1,024 of 4,096 tokens, microbatch 1 (docs at 067f987df0):
  // - docs/training/communication-overlap.md: the all-to-all dispatcher, CUDA graphs off, the permutation
  //   unfused (moe_permute_fusion=false), 41.25 s; with EP overlap 31.31 s (31.20 s with delayed weight
  //   gradients). docs/training/cuda-graphs.md reports the same configuration's eager step at 41.36 s.
  // - docs/training/moe-optimization.md: the canonical recipe (perf_recipes/qwen/h100/qwen3_moe.py: HybridEP,
  //   its permutation fused into the dispatch, EP overlap, CUDA graphs over the router and its
  //   preprocessing), 20.147 s.
  struct run {
    const char* what;
    train::moe_dispatcher dispatcher;
    bool overlap;
    bool unfused;
    double seconds;
  };
  const std::vector<run> runs{
      {"all-to-all, unfused permutation", train::moe_dispatcher::all_to_all, false, true, 41.25},
      {"all-to-all, unfused permutation, EP overlap", train::moe_dispatcher::all_to_all, true, true, 31.31},
      {"HybridEP, EP overlap (the recipe)", train::moe_dispatcher::flex, true, false, 20.147},
  };
  const model::model m = zoo::get("qwen3-30b-a3b");
  const train::parallelism p{1, 1, 16, 1, 16};
  const auto cluster = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), p);
  const sched::schedule_cache cache;
  std::vector<double> errors;
  std::vector<double> times;
  for (const run& r : runs) {
    train::training_knobs k;
    k.global_batch = 1024;
    k.microbatch = 1;
    k.sequence = 4096;
    k.host_overhead = train::eager_host_per_op;
    k.fused_attention = true;
    k.distributed_optimizer = true;
    k.overlap_grad_reduce = k.overlap_param_gather = true;
    k.grad_reduce_in_bf16 = true;
    k.dispatcher = r.dispatcher;
    k.overlap_expert_comm = r.overlap;
    k.unfused_permutation = r.unfused;
    train::validate(m, p, k, 16);
    const double predicted = train::estimate_step(m, cluster, p, k, cache).time_per_batch.value();
    const double error =
        (r.seconds - predicted) / predicted;  // of tokens per second: measured time / phaze's
    std::printf("%-46s published %6.2f s, phaze %6.2f s, tokens per second %+6.1f%%\n", r.what, r.seconds,
                predicted, 100.0 * error);
    errors.push_back(error);
    times.push_back(predicted);
  }
  // Measured when the dispatcher, EP overlap and the unfused permutation came in: phaze is too fast on all
  // three, by 17.2%, 45.2% and 50.7% in tokens per second (12.5%, 40.0% and 49.4% since the adds by index
  // take their measured rate, tests/hw/gpu_calibration_test.cpp, and the unpermutation's backward gathers
  // its rows): the experts' layers miss about 6-7 s per step of
  // what these runs spend (docs/step-time.md), and EP overlap hides 13.6 s of phaze's exchanges where the
  // runs hid 9.9 s. The ordering holds (each change makes the step faster, as measured). Regression guard.
  CHECK(times[1] < times[0]);
  CHECK(times[2] < times[1]);
  for (const double e : errors) {
    CHECK(e > 0.0);
    CHECK(e <= 0.52);
  }
  CHECK(errors[0] <= 0.18);
}
