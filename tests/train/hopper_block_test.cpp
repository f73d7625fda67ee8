/// @file
/// phaze's time of one transformer block, forward and backward, against whole blocks measured on an H100
/// SXM and an H200 (tests/data/gpu/{h100-sxm,h200}-block.csv, made by tools/gpu/fp8_block.py;
/// docs/gpu-measurements.md, "Whole FP8 and bf16 blocks"): Llama 2 7B, Llama 3 8B and GPT-3 5B blocks and one
/// tensor-parallel rank's share of Llama 2 70B, Llama 3 70B and GPT-3 175B blocks at tp 4, at the shapes of
/// NeMo's published H100 runs, in FP8 (every linear layer's GEMMs) and in bf16, with cuDNN's fused attention.
/// The step model adds these blocks up, so a block that is off here is off by the same share in every
/// estimate of that model. No GPU is needed: the measurements are data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../support/block_times.hpp"
#include "../support/csv.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/zoo.hpp"

namespace hw = phaze::hw;
namespace model = phaze::model;
namespace zoo = phaze::zoo;

namespace hopper_block {

/// The measured block's architecture: the zoo's Llama blocks as they are; GPT-3 as NeMo's (biases,
/// LayerNorm, GELU MLP of 4h) without dropout, which the measured block does not run.
model::transformer_config block_config(const std::string& name) {
  if (name.rfind("llama", 0) == 0) return zoo::get(name).config;
  model::transformer_config c;
  if (name == "gpt3-5b") c = zoo::detail::gpt("gpt3-5b", 4096, 32, 24, 50257, 2048);
  if (name == "gpt3-175b") c = zoo::detail::gpt("gpt3-175b", 12288, 96, 96, 50257, 2048);
  REQUIRE(c.hidden > 0);
  c.dropout = false;
  return c;
}

struct block_time {
  double forward = 0.0;
  double backward = 0.0;
  /// What the measurement adds to each backward besides the block: tools/gpu/fp8_block.py recorded these
  /// CSVs without clearing the gradients (its --grads accumulate), so every backward after the first adds
  /// each weight's gradient and the input's to the ones before, one elementwise kernel per tensor reading
  /// two and writing one bf16 value (6 bytes per element) at the card's copy bandwidth. Megatron-Core
  /// accumulates weight gradients in the weight-gradient GEMM (gradient accumulation fusion), and phaze
  /// costs it that way, so the comparison takes this closed form off the measured time.
  double accumulation = 0.0;
  std::map<std::string, double> by_kind;  // gemm, attention, other: forward + backward
};

/// The CSV's kinds of kernels for an op: the linear layers' GEMMs (phaze adds an FP8 GEMM's input casts to
/// its time; the measurement counts casts as "other"), the fused attention core, and everything else
/// (norms, RoPE, activations, residual adds).
std::string kind_of(const model::op& o) {
  if (o.kind == model::op_kind::matmul) return "gemm";
  if (o.kind == model::op_kind::fused_attention) return "attention";
  return "other";
}

/// One tensor-parallel rank's block (tp ranks, no sequence parallelism), its collectives left out: the
/// measured block runs without them.
block_time phaze_block(const std::string& preset, const std::string& name, std::int64_t tokens, int tp,
                       bool fp8) {
  model::transformer_config c = block_config(name);
  const std::int64_t microbatch = name == "gpt3-5b" ? 4 : 1;
  c.sequence = tokens / microbatch;
  c.max_positions = std::max(c.max_positions, c.sequence);
  const model::model m = model::make_model(c);
  model::layer_shape shape;
  shape.microbatch = microbatch;
  shape.sequence = c.sequence;
  shape.tp = tp;
  shape.fused_attention = true;
  shape.fp8 = fp8;
  std::size_t block = 0;
  while (m.role_at(block) != model::layer_role::block) ++block;
  const model::layer l = model::layer_at(m, block, shape);
  const hw::device d = *hw::find_preset(preset);
  block_time out;
  const double elements =
      static_cast<double>(model::layer_params(l, false)) + static_cast<double>(tokens * c.hidden);
  out.accumulation = 6.0 * elements / hw::achievable_hbm_bandwidth(d).value();
  // On a GPU the ops run one after another: a pass takes the sum of its compute ops.
  phaze::test::for_each_compute_op(l, d, tp, [&](const model::op& o, double seconds, bool forward) {
    out.by_kind[kind_of(o)] += seconds;
    (forward ? out.forward : out.backward) += seconds;
  });
  return out;
}

/// The fused builds' errors on one card, forward + backward, and the forward pass alone.
struct block_errors {
  double mean = 0.0;
  double worst = 0.0;
  double mean_net = 0.0;  ///< against the measured time less the gradient accumulation (block_time)
  double worst_net = 0.0;
  double worst_tp1 = 0.0;
  double worst_forward = 0.0;
  int fused = 0;
};

/// Compares every row of `file` (tests/data/gpu) with phaze's blocks on `preset` and prints the table.
block_errors compare(const std::string& file, const std::string& preset) {
  const auto rows = phaze::testing::read_csv(std::string{PHAZE_TEST_DATA_DIR} + "/gpu/" + file);
  REQUIRE(rows.size() >= 36);
  std::printf("%s on %s (ms)\n", file.c_str(), preset.c_str());
  std::printf("%-10s %-8s %-8s %10s %10s %7s | %8s %8s %8s | %8s %8s %8s\n", "model", "build", "pass",
              "measured", "phaze", "error", "gemm", "attn", "other", "p.gemm", "p.attn", "p.other");
  block_errors out;
  double sum = 0.0;
  double sum_net = 0.0;
  for (const auto& r : rows) {
    const std::string build = r.at("build");
    const std::string pass = r.at("pass");
    const std::string name = r.at("model");
    const int tp = std::stoi(r.at("tp"));
    block_time p = phaze_block(preset, name, std::stoll(r.at("tokens")), tp, build != "bf16");
    const double measured = std::stod(r.at("wall_s"));
    REQUIRE(measured > 0.0);
    const bool whole = pass == "fwd+bwd";
    const double predicted = whole ? p.forward + p.backward : p.forward;
    const double error = (predicted - measured) / measured;
    std::printf("%-10s %-8s %-8s %10.3f %10.3f %+6.1f%% | %8.3f %8.3f %8.3f | %8.3f %8.3f %8.3f\n",
                name.c_str(), build.c_str(), pass.c_str(), 1e3 * measured, 1e3 * predicted, 100.0 * error,
                1e3 * std::stod(r.at("gemm_s")), 1e3 * std::stod(r.at("attention_s")),
                1e3 * std::stod(r.at("other_s")), whole ? 1e3 * p.by_kind["gemm"] : 0.0,
                whole ? 1e3 * p.by_kind["attention"] : 0.0, whole ? 1e3 * p.by_kind["other"] : 0.0);
    INFO(file << ": " << name << " " << build << " " << pass);
    if (build == "eager") {
      // One PyTorch kernel per operation: slower than the fused kernels phaze (and Transformer Engine)
      // assume.
      CHECK(predicted < measured);
      continue;
    }
    if (!whole) {
      out.worst_forward = std::max(out.worst_forward, std::abs(error));
      continue;
    }
    sum += std::abs(error);
    out.worst = std::max(out.worst, std::abs(error));
    const double net = measured - p.accumulation;
    const double net_error = (predicted - net) / net;
    std::printf("%-10s %-8s %-8s %10.3f %10.3f %+6.1f%%   (measured less %.3f ms of gradient accumulation)\n",
                "", "", "net", 1e3 * net, 1e3 * predicted, 100.0 * net_error, 1e3 * p.accumulation);
    sum_net += std::abs(net_error);
    out.worst_net = std::max(out.worst_net, std::abs(net_error));
    if (tp == 1) out.worst_tp1 = std::max(out.worst_tp1, std::abs(error));
    ++out.fused;
  }
  REQUIRE(out.fused == 12);
  out.mean = sum / out.fused;
  out.mean_net = sum_net / out.fused;
  std::printf(
      "forward + backward, fused builds (FP8 and bf16): mean %.1f%%, max %.1f%% (tp 1: %.1f%%); "
      "forward alone: max %.1f%%; less the gradient accumulation: mean %.1f%%, max %.1f%%\n",
      100.0 * out.mean, 100.0 * out.worst, 100.0 * out.worst_tp1, 100.0 * out.worst_forward,
      100.0 * out.mean_net, 100.0 * out.worst_net);
  return out;
}

}  // namespace hopper_block

TEST_CASE("phaze's block times against whole blocks measured on an H100 SXM and an H200",
          "[gpu_calibration][block]") {
  // Measured at this commit, H100: mean 5.8%, max 14.4% (GPT-3 175B's tp-4 share, phaze fast), tp 1 at most
  // 5.8%, the forward pass alone up to 15.2% off (phaze slow in the forward, fast in the backward). H200:
  // mean 6.1%, max 9.0%, tp 1 at most 6.7%, forward alone up to 19.7%; phaze fast on every block of both
  // cards. Less the measurement's own gradient accumulation (block_time::accumulation, 0.44-0.95 ms on the
  // H100): H100 mean 2.4%, max 5.7%; H200 mean 2.5%, max 6.0%, phaze on both sides. Bounds with a small
  // margin, to catch a cost-model change that moves a whole block.
  struct card {
    const char* file;
    const char* preset;
    double worst_tp1;      // bound on the tp-1 blocks' largest error
    double worst_forward;  // bound on the forward pass alone
  };
  for (const card& c :
       {card{"h100-sxm-block.csv", "h100-sxm", 0.07, 0.18}, card{"h200-block.csv", "h200", 0.08, 0.22}}) {
    INFO(c.preset);
    const auto e = hopper_block::compare(c.file, c.preset);
    CHECK(e.mean <= 0.07);
    CHECK(e.worst <= 0.16);
    CHECK(e.worst_tp1 <= c.worst_tp1);
    CHECK(e.worst_forward <= c.worst_forward);
    CHECK(e.mean_net <= 0.035);
    CHECK(e.worst_net <= 0.07);
  }
}
