/// @file
/// The Hopper presets against GEMM times measured on the real cards (tests/data/gpu/, made by
/// tools/gpu/measure.py; docs/gpu-measurements.md): the calibrated h100-sxm and h200 presets predict the
/// measured bf16 GEMM times well, the uncalibrated values they replaced did not, and the achievable HBM
/// bandwidth the presets assume is what a device copy reached. No GPU is needed: the measurements are data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../support/csv.hpp"
#include "phaze/cost/gemm.hpp"
#include "phaze/cost/op_cost.hpp"
#include "phaze/hw/presets.hpp"

namespace hw = phaze::hw;
namespace model = phaze::model;

namespace {

const std::string data_dir = std::string{PHAZE_TEST_DATA_DIR} + "/gpu/";

/// Rows of a measurement CSV of tests/data/gpu by column name.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& file) {
  return phaze::testing::read_csv(data_dir + file);
}

struct measured_gemm {
  std::string label;
  model::gemm_dims dims;
  double seconds = 0.0;
};

std::vector<measured_gemm> gemms(const std::string& file) {
  std::vector<measured_gemm> out;
  for (const auto& r : read_csv(file)) {
    measured_gemm g;
    g.label = r.at("label");
    g.dims = {std::stoll(r.at("batch")), std::stoll(r.at("m")), std::stoll(r.at("k")), std::stoll(r.at("n"))};
    g.seconds = std::stod(r.at("seconds"));
    REQUIRE(g.seconds > 0.0);
    out.push_back(g);
  }
  return out;
}

struct fit_error {
  double mean = 0.0;
  double max = 0.0;
  std::string worst;
};

/// Relative error |predicted - measured| / measured of phaze's GEMM time on `d`, over all shapes.
fit_error error_of(const std::vector<measured_gemm>& data, const hw::device& d) {
  fit_error e;
  for (const auto& g : data) {
    const double r = std::abs(phaze::cost::datasheet_gemm(g.dims, d).value() - g.seconds) / g.seconds;
    e.mean += r;
    if (r > e.max) {
      e.max = r;
      e.worst = g.label + " " + std::to_string(g.dims.m) + "x" + std::to_string(g.dims.n) + "x" +
                std::to_string(g.dims.k);
    }
  }
  e.mean /= static_cast<double>(data.size());
  return e;
}

hw::device preset(std::string_view name) {
  const auto d = hw::find_preset(name);
  REQUIRE(d.has_value());
  return *d;
}

/// The GEMM-efficiency values both Hopper presets carried before measurement: 75% of peak, 256x128 tiles,
/// a 64-element reduction half-point.
hw::device uncalibrated(hw::device d) {
  d.sheet.gemm.max_fraction = 0.75;
  d.sheet.gemm.tile_m = 256;
  d.sheet.gemm.tile_n = 128;
  d.sheet.gemm.k_half = 64.0;
  return d;
}

// The bound on the mean relative error over the 449 measured shapes. The fit leaves 5.5% (H100) and 5.2%
// (H200): the model has no per-launch overhead, one tile for every shape where cuBLAS picks per shape, and
// the m/n sweeps show kernel-choice jumps of +-10% between neighbouring sizes that no smooth model follows.
// A second run of the same script on the same H100 moved single GEMMs by a few percent; 7% leaves that
// run-to-run room above the fit's residual while staying below every uncalibrated mean (8.96% or more).
constexpr double mean_bound = 0.07;
// The worst single shape: small GEMMs (1024^3 at 10 us, m = 256 rows) where launch and prologue costs the
// model does not itemize dominate. The uncalibrated values erred by 82% or more (narrow TP-sliced GEMMs).
constexpr double max_bound = 0.40;

}  // namespace

TEST_CASE("h100-sxm predicts the GEMM times measured on an H100 SXM", "[gpu_calibration]") {
  const auto sxm = preset("h100-sxm");
  for (const char* file : {"h100-sxm-gemm.csv", "h100-sxm-run2-gemm.csv"}) {
    const auto data = gemms(file);
    CHECK(data.size() >= 400);
    const auto now = error_of(data, sxm);
    const auto before = error_of(data, uncalibrated(sxm));
    INFO(file << ": calibrated mean " << 100 * now.mean << "%, max " << 100 * now.max << "% (" << now.worst
              << "); uncalibrated mean " << 100 * before.mean << "%, max " << 100 * before.max << "% ("
              << before.worst << ")");
    CHECK(now.mean < mean_bound);
    CHECK(now.max < max_bound);
    // The calibration earned its place: the values it replaced were worse on the same data, past the bound.
    CHECK(before.mean > now.mean + 0.02);
    CHECK(before.mean > mean_bound);
    CHECK(before.max > now.max);
    WARN(file << ": h100-sxm mean " << 100 * now.mean << "%, max " << 100 * now.max << "% (" << now.worst
              << "); before calibration mean " << 100 * before.mean << "%, max " << 100 * before.max << "%");
  }
}

TEST_CASE("h200 predicts the GEMM times measured on an H200", "[gpu_calibration]") {
  const auto h200 = preset("h200");
  const auto data = gemms("h200-gemm.csv");
  const auto now = error_of(data, h200);
  const auto before = error_of(data, uncalibrated(h200));
  INFO("calibrated mean " << 100 * now.mean << "%, max " << 100 * now.max << "% (" << now.worst
                          << "); uncalibrated mean " << 100 * before.mean << "%, max " << 100 * before.max
                          << "%");
  CHECK(now.mean < mean_bound);
  CHECK(now.max < max_bound);
  CHECK(before.mean > now.mean + 0.02);
  CHECK(before.mean > mean_bound);
  WARN("h200 mean " << 100 * now.mean << "%, max " << 100 * now.max << "% (" << now.worst << ")");
}

TEST_CASE("the GEMM time the checks use is the one the layer cost tables use", "[gpu_calibration]") {
  // cost_of a matmul op on a datasheet device is datasheet_gemm of its shape: what the calibration fits is
  // what `phaze estimate` and `phaze plan` charge.
  const auto sxm = preset("h100-sxm");
  for (const auto& g : gemms("h100-sxm-gemm.csv")) {
    model::op o;
    o.kind = g.dims.batch == 1 ? model::op_kind::matmul : model::op_kind::batched_matmul;
    o.gemm = g.dims;
    o.elem_bytes = 2;
    o.in_elements = g.dims.batch * g.dims.m * g.dims.k;
    o.out_elements = g.dims.batch * g.dims.m * g.dims.n;
    // A GEMM takes no route (only collectives do).
    CHECK(phaze::cost::cost_of(o, sxm, phaze::cluster::route{}).all_cores ==
          phaze::cost::datasheet_gemm(g.dims, sxm));
  }
}

TEST_CASE("large GEMMs on the calibrated Hopper presets run at the measured share of peak",
          "[gpu_calibration]") {
  // GPT-3's MLP up-projection at microbatch 4, TP 1 (8192 x 49152 x 12288): measured 709 TFLOP/s on the
  // H100 and 676 on the H200; the presets predict within 5%.
  for (const auto& [name, file] :
       {std::pair{"h100-sxm", "h100-sxm-gemm.csv"}, std::pair{"h200", "h200-gemm.csv"}}) {
    const auto d = preset(name);
    for (const auto& g : gemms(file)) {
      if (g.label != "gpt3.b4.t1.mlp_up.fwd") continue;
      const double predicted = phaze::cost::datasheet_gemm(g.dims, d).value();
      CAPTURE(name, predicted, g.seconds);
      CHECK(std::abs(predicted - g.seconds) / g.seconds < 0.05);
    }
  }
}

TEST_CASE("the presets' achievable HBM bandwidth is what a device copy reached", "[gpu_calibration]") {
  // hbm_bandwidth * memory_efficiency against the largest bf16 device-to-device copy (bytes read + written).
  for (const auto& [name, file] :
       {std::pair{"h100-sxm", "h100-sxm-membound.csv"}, std::pair{"h200", "h200-membound.csv"}}) {
    const auto d = preset(name);
    double best = 0.0;
    for (const auto& r : read_csv(file))
      if (r.at("op") == "copy") best = std::max(best, std::stod(r.at("gbps")) * 1e9);
    const double assumed = d.hbm_bandwidth.value() * d.sheet.memory_efficiency;
    CAPTURE(name, best, assumed);
    CHECK(std::abs(best - assumed) / assumed < 0.03);
  }
}
