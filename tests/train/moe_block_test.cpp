/// @file
/// phaze's time of one expert-parallel rank's mixture-of-experts block, forward and backward, against the
/// same blocks measured on an H200 (tests/data/gpu/h200-moe-block*.csv, made by
/// tools/gpu/measure_moe_block.py; docs/gpu-measurements.md, "Whole mixture-of-experts blocks"):
/// Qwen3-30B-A3B at ep 16 and ep 8 and GPT-OSS 120B at ep 8, one microbatch of 4096 tokens, bf16, the
/// collectives left out (one GPU). The measured blocks run eager PyTorch kernels for norms and activations
/// and index kernels for the permutation, so phaze's block is built the same way (layer_shape::eager_vector
/// and unfused_permutation). Compared: the whole block, its GEMM and attention kernels (the profile of every
/// kernel), and the host's time per block. No GPU is needed: the measurements are data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "../support/block_times.hpp"
#include "../support/csv.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/train/knobs.hpp"

namespace hw = phaze::hw;
namespace model = phaze::model;
namespace zoo = phaze::zoo;

namespace moe_block {

/// The measured case's block: the zoo's Qwen3-30B-A3B; GPT-OSS 120B's shapes (hidden 2880, 64 query heads
/// and 8 key/value heads of 64, 128 experts of 2880, top 4) as the measured block has them: every block
/// attending to all earlier keys, no biases, no attention sinks, Qwen3's norms.
model::transformer_config case_config(const std::string& name) {
  model::transformer_config c = zoo::get("qwen3-30b-a3b").config;
  if (name.rfind("gpt-oss", 0) == 0) {
    c.name = "gpt-oss-120b-block";
    c.hidden = 2880;
    c.heads = 64;
    c.kv_heads = 8;
    c.head_dim = 64;
    c.qk_norm = false;
    c.top_k = 4;
    c.expert_ffn = 2880;
  }
  c.dropout = false;
  return c;
}

/// The kernel class of an op of phaze's, as the profile's kernels are classed (kernel_class).
std::string class_of(const model::op& o) {
  if (o.kind == model::op_kind::fused_attention) return "attention";
  if (o.kind == model::op_kind::matmul) return o.expert ? "grouped_gemm" : "gemm";
  return "other";
}

/// The class of a kernel of the profile: cuDNN's fused attention, CUTLASS's grouped GEMM (torch._grouped_mm),
/// cuBLAS's GEMMs (nvjet), everything else (elementwise, norms, index kernels, sorts, fills).
std::string kernel_class(const std::string& k) {
  if (k.find("sdpa") != std::string::npos || k.find("cudnn") != std::string::npos) return "attention";
  if (k.find("GroupProblem") != std::string::npos) return "grouped_gemm";
  if (k.rfind("nvjet", 0) == 0) return "gemm";
  return "other";
}

struct block_time {
  double forward = 0.0;
  double backward = 0.0;
  std::size_t ops = 0;                     // forward + backward, collectives left out
  std::map<std::string, double> by_class;  // forward + backward
};

/// One rank's block of `c` at ep (its experts / ep local experts fed tokens x top_k rows), or its dense
/// counterpart (no experts: a SwiGLU MLP of expert_ffn x top_k).
block_time phaze_block(model::transformer_config c, int ep, std::int64_t tokens, bool dense = false) {
  c.sequence = tokens;
  c.max_positions = std::max(c.max_positions, c.sequence);
  if (dense) {
    c.ffn = c.expert_ffn_or_default() * c.top_k;
    c.experts = c.top_k = c.expert_ffn = 0;
    ep = 1;
  }
  const model::model m = model::make_model(c);
  model::layer_shape shape;
  shape.microbatch = 1;
  shape.sequence = tokens;
  shape.ep = ep;
  shape.fused_attention = true;
  shape.eager_vector = true;
  shape.unfused_permutation = true;
  std::size_t block = 0;
  while (m.role_at(block) != model::layer_role::block) ++block;
  const model::layer l = model::layer_at(m, block, shape);
  block_time out;
  phaze::test::for_each_compute_op(l, *hw::find_preset("h200"), 1,
                                   [&](const model::op& o, double seconds, bool forward) {
                                     out.by_class[class_of(o)] += seconds;
                                     (forward ? out.forward : out.backward) += seconds;
                                     ++out.ops;
                                   });
  return out;
}

double relative(double predicted, double measured) {
  return (predicted - measured) / measured;
}

}  // namespace moe_block

TEST_CASE("phaze's mixture-of-experts blocks against whole blocks measured on an H200",
          "[gpu_calibration][block][moe]") {
  const auto rows = phaze::testing::read_csv(std::string{PHAZE_TEST_DATA_DIR} + "/gpu/h200-moe-block.csv");
  const auto profile =
      phaze::testing::read_csv(std::string{PHAZE_TEST_DATA_DIR} + "/gpu/h200-moe-block-profile.csv");
  std::map<std::string, std::map<std::string, double>> kernels;  // case -> class -> seconds per block
  for (const auto& r : profile)
    kernels[r.at("case")][moe_block::kernel_class(r.at("kernel"))] += std::stod(r.at("seconds_per_block"));
  REQUIRE(kernels.size() == 3);
  std::printf("%-20s %-8s %9s %9s %7s | %22s | %22s | %22s   (ms)\n", "case", "pass", "measured", "phaze",
              "error", "grouped GEMMs", "other GEMMs", "attention");
  int compared = 0;
  for (const auto& r : rows) {
    if (r.at("mode") != "graph_grouped") continue;
    const std::string name = r.at("case");
    INFO(name << " " << r.at("pass"));
    const int ep = std::stoi(name.substr(name.find(".ep") + 3));
    const auto p = moe_block::phaze_block(moe_block::case_config(name), ep, std::stoll(r.at("tokens")));
    const bool whole = r.at("pass") == "fwd+bwd";
    const double measured = std::stod(r.at("seconds_per_block"));
    const double predicted = whole ? p.forward + p.backward : p.forward;
    const double error = moe_block::relative(predicted, measured);
    auto& k = kernels[name];
    std::printf("%-20s %-8s %9.3f %9.3f %+6.1f%%", name.c_str(), r.at("pass").c_str(), 1e3 * measured,
                1e3 * predicted, 100.0 * error);
    if (whole) {
      for (const char* c : {"grouped_gemm", "gemm", "attention"}) {
        std::printf(" | %6.3f %6.3f %+6.1f%%", 1e3 * k[c], 1e3 * p.by_class.at(c),
                    100.0 * moe_block::relative(p.by_class.at(c), k[c]));
      }
    }
    std::printf("\n");
    if (!whole) continue;
    ++compared;
    // The kernels phaze's cost model was built on, forward + backward: measured at this commit, the grouped
    // expert GEMMs within 0.9-6.7%, the other GEMMs 18.8-19.2% slow (small: 4,096 rows of 2,048-4,096 wide
    // projections), fused attention 10.3-12.9% slow.
    CHECK(std::abs(moe_block::relative(p.by_class.at("grouped_gemm"), k["grouped_gemm"])) < 0.12);
    CHECK(std::abs(moe_block::relative(p.by_class.at("gemm"), k["gemm"])) < 0.25);
    CHECK(std::abs(moe_block::relative(p.by_class.at("attention"), k["attention"])) < 0.17);
    // The whole block: phaze 17.9-27.0% fast, all of it in the memory-bound and index kernels: the measured
    // block runs a third add by index and an index_copy where Megatron-Core's all-to-all dispatcher copies
    // rows (sort_chunks_by_idxs: split and cat), its rotary embedding and SwiGLU on strided views (1.7 ms of
    // elementwise kernels per Qwen3 block, where phaze's eager model charges about 1.1 ms), and a router of a
    // dozen small kernels (0.16 ms; phaze 0.05). Bound with a margin: a change that moves the block shows.
    CHECK(error < 0.0);
    CHECK(error > -0.30);
  }
  CHECK(compared == 3);
}

TEST_CASE("the host's time per mixture-of-experts block against eager blocks measured on an H200",
          "[gpu_calibration][block][moe]") {
  // tests/data/gpu/h200-moe-block-host.csv: the same blocks at 128 tokens, where the host paces every kernel
  // (eager time 3.5-8.5 times the CUDA graph's), beside a dense block of the same attention and a SwiGLU MLP
  // of expert_ffn x top_k. phaze charges a pass at least its ops times the host's time per op
  // (train::eager_host_per_op, measured on whole iterations of dense models).
  const auto rows =
      phaze::testing::read_csv(std::string{PHAZE_TEST_DATA_DIR} + "/gpu/h200-moe-block-host.csv");
  std::map<std::string, std::map<std::string, std::pair<double, double>>>
      host;  // case -> mode -> (s, kernels)
  for (const auto& r : rows)
    host[r.at("case")][r.at("mode")] = {std::stod(r.at("eager_seconds_per_block")),
                                        std::stod(r.at("kernels_per_block"))};
  REQUIRE(host.size() == 3);
  std::printf("%-20s %-10s %9s %8s %9s %5s\n", "case", "block", "measured", "kernels", "phaze", "ops");
  for (auto& [name, modes] : host) {
    INFO(name);
    const int ep = std::stoi(name.substr(name.find(".ep") + 3));
    const auto moe = moe_block::phaze_block(moe_block::case_config(name), ep, 128);
    const auto dense = moe_block::phaze_block(moe_block::case_config(name), ep, 128, true);
    const double phaze_moe = static_cast<double>(moe.ops) * phaze::train::eager_host_per_op;
    const double phaze_dense = static_cast<double>(dense.ops) * phaze::train::eager_host_per_op;
    const auto [moe_s, moe_kernels] = modes.at("eager_grouped_sync");
    const auto [dense_s, dense_kernels] = modes.at("eager_dense");
    std::printf("%-20s %-10s %9.3f %8.1f %9.3f %5zu\n", name.c_str(), "moe", 1e3 * moe_s, moe_kernels,
                1e3 * phaze_moe, moe.ops);
    std::printf("%-20s %-10s %9.3f %8.1f %9.3f %5zu\n", name.c_str(), "dense", 1e3 * dense_s, dense_kernels,
                1e3 * phaze_dense, dense.ops);
    // Measured at this commit: the mixture-of-experts block launches 1.9-2.0 times the dense block's kernels
    // and takes 1.4-2.6 times its host time (the dense block's own time moved from 1.96 to 3.34 ms between
    // two identical blocks: the host's noise); phaze's op count grows by 1.6 times, so its host time per
    // MoE block (2.7 ms) stays below the measured 4.3-5.3 ms. An open gap (docs/gpu-measurements.md).
    CHECK(moe_kernels > 1.8 * dense_kernels);
    CHECK(phaze_moe > phaze_dense);
    CHECK(phaze_moe < moe_s);
  }
}
