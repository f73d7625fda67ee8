/// @file
/// phaze's Mamba-2 mixer against mamba_ssm's kernels and cuBLAS measured on an H200
/// (tests/data/gpu/h200-mamba.csv, made by tools/gpu/measure_mamba.py; docs/gpu-measurements.md, "Mamba-2
/// mixers"): one rank (tp 1) of Nemotron 3 Nano and of Nemotron-H 8B at 8192 tokens, bf16: the chunked scan,
/// the gated norm and the two projections, forward and forward + backward. No GPU is needed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/block_times.hpp"
#include "../support/csv.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/hf_config.hpp"

namespace mamba_block {

namespace model = phaze::model;

/// The measured part an op of phaze's mixer belongs to (tools/gpu/measure_mamba.py's parts); "" for the
/// block's other ops (its pre-norm, the convolution, the residual).
std::string part_of(const std::string& op) {
  if (op.rfind("ssd_", 0) == 0) return "scan";
  if (op.rfind("mixer_gate", 0) == 0) return "gated_norm";  // mixer_gate and mixer_gated_norm
  if (op.rfind("mixer_in_proj", 0) == 0) return "in_proj";
  if (op.rfind("mixer_out_proj", 0) == 0) return "out_proj";
  return "";
}

/// phaze's seconds per part and pass ("fwd", "bwd") of the model's first Mamba-2 block on an H200, one rank
/// of tp ranks.
std::map<std::string, double> phaze_parts(const std::string& config, std::int64_t tokens, int tp) {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/hf/" + config);
  REQUIRE(in.good());
  const model::model m = model::from_hf_config(nlohmann::json::parse(in));
  std::size_t node = 1;
  while (m.kind_at(node).hybrid != 'M') ++node;
  model::layer_shape shape;
  shape.sequence = tokens;
  shape.tp = tp;
  shape.sequence_parallel = tp > 1;
  const model::layer l = model::layer_at(m, node, shape);
  std::map<std::string, double> out;
  phaze::test::for_each_compute_op(l, *phaze::hw::find_preset("h200"), tp,
                                   [&](const model::op& o, double seconds, bool forward) {
                                     const std::string part = part_of(o.name.str());
                                     if (!part.empty()) out[part + (forward ? " fwd" : " bwd")] += seconds;
                                   });
  return out;
}

}  // namespace mamba_block

TEST_CASE("phaze's Mamba-2 mixer against mamba_ssm's kernels measured on an H200",
          "[gpu_calibration][hybrid]") {
  struct measurement {
    std::string run, name, key;
    double seconds;
  };
  std::vector<measurement> rows;
  for (const char* file : {"h200-mamba.csv", "h200-mamba-run2.csv"}) {
    for (const auto& r : phaze::testing::read_csv(std::string{PHAZE_TEST_DATA_DIR} + "/gpu/" + file))
      rows.push_back({file, r.at("case"), r.at("part") + " " + r.at("pass"), std::stod(r.at("seconds"))});
  }
  REQUIRE(rows.size() == 36);
  // The forward alone, and the backward as forward + backward less the forward, of the same run.
  std::map<std::string, double> by;  // run / case / key
  for (const auto& r : rows) by[r.run + "/" + r.name + "/" + r.key] = r.seconds;
  std::printf("%-20s %-20s %-11s %-8s %9s %9s %8s\n", "run", "case", "part", "pass", "measured", "phaze",
              "error");
  std::map<std::string, std::vector<double>> errors;  // part -> errors of every measurement
  for (const auto& r : rows) {
    if (r.key.ends_with("fwd+bwd")) continue;
    const std::string part = r.key.substr(0, r.key.find(' '));
    if (part == "conv1d") continue;  // PyTorch's convolution, not the kernel Megatron-Core runs
    const bool tp2 = r.name.ends_with(".tp2");
    const std::string model = r.name.substr(0, r.name.find('.'));
    const auto p = mamba_block::phaze_parts(
        model == "nemotron-3-nano" ? "nemotron-3-nano-30b-a3b.json" : "nemotron-h-8b-base-8k.json", 8192,
        tp2 ? 2 : 1);
    const double fwd = r.seconds;
    const double both = by.at(r.run + "/" + r.name + "/" + part + " fwd+bwd");
    for (const bool whole : {false, true}) {
      const double measured = whole ? both : fwd;
      const double phaze = p.at(part + " fwd") + (whole ? p.at(part + " bwd") : 0.0);
      const double e = (phaze - measured) / measured;
      std::printf("%-20s %-20s %-11s %-8s %9.3f %9.3f %+7.1f%%\n", r.run.c_str(), r.name.c_str(),
                  part.c_str(), whole ? "fwd+bwd" : "fwd", 1e3 * measured, 1e3 * phaze, 100.0 * e);
      errors[part + (whole ? " fwd+bwd" : " fwd")].push_back(e);
    }
  }
  for (auto& [what, e] : errors) {
    INFO(what);
    std::ranges::sort(e);
    const double median = e[e.size() / 2];
    const double worst = std::max(-e.front(), e.back());
    std::printf("%-22s %zu measurements: median error %+.1f%%, worst %.1f%%\n", what.c_str(), e.size(),
                100.0 * median, 100.0 * worst);
    if (what.starts_with("in_proj") || what.starts_with("out_proj")) {
      // cuBLAS GEMMs: the calibrated GEMM model, nothing fitted here (at this commit within 15.4%).
      CHECK(worst < 0.20);
      continue;
    }
    // mamba_ssm's kernels at their medians per token (cost::mamba_kernel_seconds_per_token): the errors
    // straddle zero; the same kernel moved by up to 53% between two runs (the scan's forward at Nano's shape,
    // 0.711 and 1.089 ms; Triton's autotuning picks its configuration anew each run), so single measurements
    // are up to 55% off at this commit.
    CHECK(e.size() == 6);
    CHECK(std::abs(median) < 0.12);
    CHECK(worst < 0.60);
  }
  CHECK(errors.size() == 8);
}
