/// @file
/// Whole training iterations of Megatron-Core's own GPT model on one H200
/// (tests/data/gpu/h200-megatron-step*.csv, made by tools/gpu/megatron_step.py; docs/gpu-measurements.md,
/// "Megatron-Core's own step on one H200") against train::estimate_step with the h200 preset, the knobs set
/// as the runs ran: Megatron-Core's local layer spec (no Transformer Engine, no Apex), so eager PyTorch's
/// memory-bound kernels and host time, unfused attention with its fp32 softmax or PyTorch's fused SDPA
/// (cuDNN), the unfused token permutation of Megatron-Core's MoE layer, each weight gradient added into its
/// fp32 main gradient by a kernel of its own (no gradient-accumulation fusion), torch's multi-tensor AdamW,
/// bf16 with the distributed optimizer. The forward-backward part of each iteration and the whole iteration
/// are compared. No GPU is needed: the measurements are data.
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/csv.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/hf_config.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

using namespace phaze;

namespace {

const std::string mc_data_dir = std::string{PHAZE_TEST_DATA_DIR} + "/gpu/";

/// The models as tools/gpu/megatron_step.py builds them, as HuggingFace configs: Llama 2 7B's blocks (8 of
/// them) and Qwen3-30B-A3B's (4, with 16 experts of top 8: one rank's local experts at expert-parallel size
/// 8).
const char* const mc_llama_config =
    R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
  "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 8, "vocab_size": 32000,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "rope_theta": 10000,
  "hidden_act": "silu", "attention_dropout": 0.0})";
const char* const mc_qwen3_moe_config = R"({"model_type": "qwen3_moe", "hidden_size": 2048,
  "intermediate_size": 6144, "moe_intermediate_size": 768, "num_attention_heads": 32, "num_key_value_heads": 4,
  "head_dim": 128, "num_hidden_layers": 4, "num_experts": 16, "num_experts_per_tok": 8, "norm_topk_prob": true,
  "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936, "max_position_embeddings": 40960,
  "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "rope_theta": 1000000, "hidden_act": "silu",
  "attention_dropout": 0.0, "router_aux_loss_coef": 0.001})";

struct mc_measured {
  std::string name;
  std::int64_t seq = 0, microbatch = 0, microbatches = 0;
  double forward_backward_s = 0.0, optimizer_s = 0.0, busy_s = 0.0, profiled_wall_s = 0.0;
  double peak_bytes = 0.0;  ///< 0: not this case's own (an earlier case's memory was still allocated)
};

/// Run 3 (every case's memory its own), then the cases only run 1 has (whose memory counts earlier cases').
std::vector<mc_measured> mc_read_runs() {
  std::vector<mc_measured> rows;
  std::map<std::string, bool> seen;
  for (const char* file : {"h200-megatron-step.csv", "h200-megatron-step-run1.csv"}) {
    const bool own_memory = std::string{file} == "h200-megatron-step.csv";
    for (const auto& r : phaze::testing::read_csv(mc_data_dir + file)) {
      if (seen[r.at("case")]) continue;
      seen[r.at("case")] = true;
      // Run 1's first case ran alone on the card, so its memory is its own too.
      const bool first = rows.empty() || own_memory;
      rows.push_back({r.at("case"), std::stoll(r.at("seq")), std::stoll(r.at("microbatch")),
                      std::stoll(r.at("microbatches")), std::stod(r.at("forward_backward_s")),
                      std::stod(r.at("optimizer_s")), std::stod(r.at("profiled_gpu_busy_s")),
                      std::stod(r.at("profiled_wall_s")),
                      first ? std::stod(r.at("peak_allocated_bytes")) : 0.0});
    }
  }
  return rows;
}

struct mc_compared {
  mc_measured run;
  double forward_backward_s = 0.0, optimizer_s = 0.0, peak_bytes = 0.0;
  [[nodiscard]] double error() const {
    return (forward_backward_s - run.forward_backward_s) / run.forward_backward_s;
  }
  /// The GPU was busy for at least 95% of the profiled iteration: the host did not set the pace.
  [[nodiscard]] bool gpu_bound() const { return run.busy_s >= 0.95 * run.profiled_wall_s; }
};

mc_compared mc_estimate(const mc_measured& r, sched::schedule_cache& cache) {
  const bool llama = r.name.rfind("llama", 0) == 0;
  const bool qwen = r.name.rfind("qwen", 0) == 0;
  const model::model m =
      llama  ? model::with_sequence(model::from_hf_config(nlohmann::json::parse(mc_llama_config), "llama"),
                                    r.seq)
      : qwen ? model::with_sequence(
                   model::from_hf_config(nlohmann::json::parse(mc_qwen3_moe_config), "qwen3-moe"), r.seq)
             : model::with_sequence(zoo::get("gpt2-xl"), r.seq);
  const train::parallelism par{1, 1, 1};
  train::training_knobs k;
  k.global_batch = r.microbatch * r.microbatches;
  k.microbatch = r.microbatch;
  k.precision = hw::precision::bf16;
  k.opt = train::optimizer::adam;
  k.distributed_optimizer = true;
  k.recompute = r.name.find("-full") != std::string::npos ? model::recompute::full : model::recompute::none;
  k.fused_attention = r.name.find("-sdpa") != std::string::npos;
  k.attention_kernel = model::attention_kernel::cudnn;  // the SDPA backend the profile shows
  k.eager_vector = true;
  k.host_overhead = train::eager_host_per_op;
  k.unfused_permutation = true;
  k.vocab_padding = 128;
  // Neither Apex nor Transformer Engine: each weight gradient added into its fp32 main gradient by a kernel
  // of its own, and torch's multi-tensor AdamW.
  k.gradient_accumulation_fusion = false;
  k.foreach_optimizer = true;
  train::validate(m, par, k, 1);
  const auto device = *hw::find_preset("h200");
  const auto e = train::estimate_step(m, phaze::test::cluster_of(device, par), par, k, cache);
  return {r, (e.time_per_batch - e.breakdown.optimizer).value(), e.breakdown.optimizer.value(),
          e.peak_memory.value()};
}

}  // namespace

TEST_CASE("h200: Megatron-Core's own iterations (local spec, 1 GPU) against train::estimate_step",
          "[megatron_step][gpu_calibration]") {
  const auto runs = mc_read_runs();
  REQUIRE(runs.size() == 9);
  sched::schedule_cache cache;
  std::vector<mc_compared> rows;
  for (const auto& r : runs) rows.push_back(mc_estimate(r, cache));
  static bool printed = false;  // print the table once
  if (!printed) {
    printed = true;
    std::printf(
        "h200: Megatron-Core d98e8a6, local spec (tools/gpu/megatron_step.py) vs train::estimate_step\n");
    std::printf("%-18s %4s %3s %10s %10s %8s %8s %8s %9s %9s %6s\n", "case", "mb", "n", "fwd-bwd s",
                "phaze s", "error", "opt s", "phaze", "meas GiB", "est GiB", "busy");
    for (const auto& c : rows) {
      std::printf("%-18s %4lld %3lld %10.4f %10.4f %+7.1f%% %8.4f %8.4f %9.2f %9.2f %5.0f%%\n",
                  c.run.name.c_str(), static_cast<long long>(c.run.microbatch),
                  static_cast<long long>(c.run.microbatches), c.run.forward_backward_s, c.forward_backward_s,
                  100.0 * c.error(), c.run.optimizer_s, c.optimizer_s, c.run.peak_bytes / 1073741824.0,
                  c.peak_bytes / 1073741824.0, 100.0 * c.run.busy_s / c.run.profiled_wall_s);
    }
  }

  SECTION("where the GPU sets the pace: the forward-backward part and the whole iteration") {
    // Where the host sets the pace (the GPU busy for 29-64% of the iteration: Qwen3's MoE blocks, GPT-2 XL at
    // microbatch 1) phaze is 32-73% fast: Megatron-Core's modules spend more host time per op than eager
    // PyTorch's 60.7 us (docs/gpu-measurements.md). Not bounded here.
    int n = 0;
    double sum = 0.0;
    for (const auto& c : rows) {
      if (!c.gpu_bound()) continue;
      const double iteration = c.run.forward_backward_s + c.run.optimizer_s;
      const double phaze_iteration = c.forward_backward_s + c.optimizer_s;
      CAPTURE(c.run.name, c.error(), phaze_iteration / iteration - 1.0);
      // phaze is fast on each, by 0.2-3.8% (the SDPA build, whose softmax cuDNN runs); 0.8-4.1% on the whole
      // iteration, whose optimizer step (torch's multi-tensor AdamW) phaze puts 2.9-4.3% under the measured
      // one on the Llama blocks (28% on GPT-2 XL's 580 tensors).
      CHECK(c.error() <= 0.0);
      CHECK(c.error() >= -0.05);
      CHECK(std::abs(phaze_iteration / iteration - 1.0) <= 0.05);
      sum += std::abs(c.error());
      ++n;
    }
    REQUIRE(n == 6);
    CHECK(sum / n <= 0.02);  // measured 1.2%
  }

  SECTION("unfused attention's fp32 softmax is priced as PyTorch runs it") {
    // The same Llama blocks with the core attention as Megatron-Core's local DotProductAttention and as one
    // fused SDPA call: the difference is the attention's own time.
    const auto find = [&](const std::string& name) {
      return *std::find_if(rows.begin(), rows.end(),
                           [&](const mc_compared& c) { return c.run.name == name; });
    };
    const auto unfused = find("llama2-7b-8l");
    const auto fused = find("llama2-7b-8l-sdpa");
    const double measured_s = unfused.run.forward_backward_s - fused.run.forward_backward_s;
    const double phaze_s = unfused.forward_backward_s - fused.forward_backward_s;
    CAPTURE(measured_s, phaze_s);
    // Measured 0.458 s, phaze 0.465 s (+1.5%); one bf16 softmax kernel, as phaze charged it before, gave a
    // seventh of it.
    CHECK(std::abs(phaze_s - measured_s) <= 0.05 * measured_s);
  }

  SECTION("memory: the cases whose peak is their own") {
    for (const auto& c : rows) {
      if (c.run.peak_bytes <= 0.0) continue;
      CAPTURE(c.run.name, c.peak_bytes / c.run.peak_bytes);
      // 0.90-0.99 of torch.cuda.max_memory_allocated: phaze counts no allocator rounding or workspaces.
      CHECK(c.peak_bytes / c.run.peak_bytes >= 0.85);
      CHECK(c.peak_bytes / c.run.peak_bytes <= 1.0);
    }
  }
}
