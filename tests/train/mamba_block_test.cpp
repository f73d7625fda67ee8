/// @file
/// phaze's Mamba-2 mixer against mamba_ssm's kernels and cuBLAS measured on an H200
/// (tests/data/gpu/h200-mamba.csv, made by tools/gpu/measure_mamba.py; docs/gpu-measurements.md, "Mamba-2
/// mixers"): one rank (tp 1) of Nemotron 3 Nano and of Nemotron-H 8B at 8192 tokens, bf16: the chunked scan,
/// the gated norm and the two projections, forward and forward + backward. No GPU is needed.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

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

/// phaze's seconds per part and pass ("fwd", "bwd") of the model's first Mamba-2 block on an H200.
std::map<std::string, double> phaze_parts(const std::string& config, std::int64_t tokens) {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/hf/" + config);
  REQUIRE(in.good());
  const model::model m = model::from_hf_config(nlohmann::json::parse(in));
  std::size_t node = 1;
  while (m.kind_at(node).hybrid != 'M') ++node;
  model::layer_shape shape;
  shape.sequence = tokens;
  const model::layer l = model::layer_at(m, node, shape);
  std::map<std::string, double> out;
  phaze::test::for_each_compute_op(l, *phaze::hw::find_preset("h200"), 1,
                                   [&](const model::op& o, double seconds, bool forward) {
                                     const std::string part = part_of(o.name.str());
                                     if (!part.empty()) out[part + (forward ? " fwd" : " bwd")] += seconds;
                                   });
  return out;
}

}  // namespace mamba_block

TEST_CASE("phaze's Mamba-2 mixer against mamba_ssm's kernels measured on an H200",
          "[gpu_calibration][hybrid]") {
  const auto rows = phaze::testing::read_csv(std::string{PHAZE_TEST_DATA_DIR} + "/gpu/h200-mamba.csv");
  std::map<std::string, std::map<std::string, double>> measured;  // case -> "part pass" -> seconds
  for (const auto& r : rows)
    measured[r.at("case")][r.at("part") + " " + r.at("pass")] = std::stod(r.at("seconds"));
  const std::map<std::string, std::string> configs{{"nemotron-3-nano", "nemotron-3-nano-30b-a3b.json"},
                                                   {"nemotron-h-8b", "nemotron-h-8b-base-8k.json"}};
  REQUIRE(measured.size() == 2);
  std::printf("%-16s %-11s %-8s %9s %9s %8s\n", "case", "part", "pass", "measured", "phaze", "error");
  double scan_forward_log = 0.0;
  for (const auto& [name, file] : configs) {
    INFO(name);
    auto p = mamba_block::phaze_parts(file, 8192);
    for (const char* part : {"scan", "gated_norm", "in_proj", "out_proj"}) {
      const std::string key = part;
      const double fwd = measured[name].at(key + " fwd");
      const double both = measured[name].at(key + " fwd+bwd");
      const double phaze_fwd = p.at(key + " fwd");
      const double phaze_both = phaze_fwd + p.at(key + " bwd");
      const double e_fwd = (phaze_fwd - fwd) / fwd;
      const double e_both = (phaze_both - both) / both;
      std::printf("%-16s %-11s %-8s %9.3f %9.3f %+7.1f%%\n", name.c_str(), part, "fwd", 1e3 * fwd,
                  1e3 * phaze_fwd, 100.0 * e_fwd);
      std::printf("%-16s %-11s %-8s %9.3f %9.3f %+7.1f%%\n", name.c_str(), part, "fwd+bwd", 1e3 * both,
                  1e3 * phaze_both, 100.0 * e_both);
      CAPTURE(part, e_fwd, e_both);
      if (key == "in_proj" || key == "out_proj") {
        // cuBLAS GEMMs: the calibrated GEMM model, nothing fitted here (measured at this commit:
        // within 15.4%).
        CHECK(std::abs(e_fwd) < 0.20);
        CHECK(std::abs(e_both) < 0.20);
      } else {
        // mamba_ssm's kernels at the factors measured on these two shapes (cost::mamba_kernel_factor, the
        // mean of the two): measured at this commit, the scan's forward within 10.8%, forward + backward
        // -27.2% (Nano) and +59.8% (Nemotron-H 8B, whose backward ran faster than Nano's with twice the
        // heads); the gated norm within 24.4%.
        CHECK(std::abs(e_fwd) < 0.30);
        CHECK(std::abs(e_both) < (key == "scan" ? 0.65 : 0.30));
      }
      if (key == "scan") scan_forward_log += std::log(phaze_fwd / fwd);
    }
  }
  // The factors are means of the two shapes: the scan's forward errors straddle zero.
  CHECK(std::abs(scan_forward_log / 2.0) < 0.02);
}
