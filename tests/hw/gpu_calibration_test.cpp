/// @file
/// The Hopper presets against GEMM times measured on the real cards (tests/data/gpu/, made by
/// tools/gpu/measure.py; docs/gpu-measurements.md): the calibrated h100-sxm and h200 presets predict the
/// measured bf16 GEMM times well, the uncalibrated values they replaced did not, and the achievable HBM
/// bandwidth the presets assume is what a device copy reached. No GPU is needed: the measurements are data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "../support/csv.hpp"
#include "../support/ops.hpp"
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

namespace {

/// One FP8 GEMM of tools/gpu/measure_hopper.py in the variant Transformer Engine runs for it: fast
/// accumulation for forward GEMMs and the sweeps, split accumulation for the dgrad and wgrad GEMMs.
struct fp8_sample {
  std::string label;
  model::gemm_dims dims;
  double fp8 = 0.0;
  double bf16 = 0.0;
};

std::vector<fp8_sample> fp8_gemms(const std::string& file) {
  std::map<std::string, fp8_sample> by;
  std::vector<std::string> order;
  for (const auto& r : read_csv(file)) {
    const std::string label = r.at("label");
    const std::string key = label + " " + r.at("m") + "x" + r.at("n") + "x" + r.at("k");
    auto [it, fresh] = by.try_emplace(key);
    if (fresh) order.push_back(key);
    auto& s = it->second;
    s.label = key;
    s.dims = {1, std::stoll(r.at("m")), std::stoll(r.at("k")), std::stoll(r.at("n"))};
    const bool backward = label.ends_with(".dx") || label.ends_with(".dw");
    const std::string& v = r.at("variant");
    if (v == "bf16") s.bf16 = std::stod(r.at("seconds"));
    if (v == (backward ? "fp8_split" : "fp8_fast")) s.fp8 = std::stod(r.at("seconds"));
  }
  std::vector<fp8_sample> out;
  for (const auto& k : order) out.push_back(by.at(k));
  return out;
}

double fp8_mean_error(const std::vector<fp8_sample>& data, const hw::device& d) {
  double sum = 0.0;
  for (const auto& g : data)
    sum += std::abs(phaze::cost::datasheet_gemm_in(g.dims, d, hw::precision::fp8).value() - g.fp8) / g.fp8;
  return sum / static_cast<double>(data.size());
}

}  // namespace

TEST_CASE("the Hopper presets predict the FP8 GEMM times measured on the cards", "[gpu_calibration]") {
  for (const auto& [name, file] :
       {std::pair{"h100-sxm", "h100-sxm-fp8-gemm.csv"}, std::pair{"h200", "h200-fp8-gemm.csv"}}) {
    const auto d = preset(name);
    const auto data = fp8_gemms(file);
    REQUIRE(data.size() >= 150);
    for (const auto& g : data) REQUIRE((g.fp8 > 0.0 && g.bf16 > 0.0));
    // The preset's fp8_max_fraction is the best one by a grid over the measured shapes (no other value of
    // the grid does better), and it beats "FP8 at bf16's fraction of its own peak" (fp8_max_fraction 0).
    const double now = fp8_mean_error(data, d);
    double best = now, best_fraction = d.sheet.gemm.fp8_max_fraction;
    for (double f = 0.60; f <= 0.80 + 1e-9; f += 0.0025) {
      auto trial = d;
      trial.sheet.gemm.fp8_max_fraction = f;
      if (const double e = fp8_mean_error(data, trial); e < best - 1e-12) best = e, best_fraction = f;
    }
    auto as_bf16 = d;
    as_bf16.sheet.gemm.fp8_max_fraction = 0.0;
    const double before = fp8_mean_error(data, as_bf16);
    CAPTURE(name, now, best, best_fraction, before);
    CHECK(std::abs(best_fraction - d.sheet.gemm.fp8_max_fraction) < 0.003);
    CHECK(now < 0.06);
    CHECK(before > now + 0.01);
    // Measured: FP8 GEMMs were 1.86-1.88 times as fast as bf16 ones of the same shape (median), not twice;
    // the model's ratio on the large block GEMMs stays within 10% of each measured ratio's median.
    std::vector<double> measured, modelled;
    for (const auto& g : data) {
      if (g.label.starts_with("ksweep") || g.label.starts_with("square")) continue;
      measured.push_back(g.bf16 / g.fp8);
      modelled.push_back(phaze::cost::datasheet_gemm(g.dims, d).value() /
                         phaze::cost::datasheet_gemm_in(g.dims, d, hw::precision::fp8).value());
    }
    std::ranges::sort(measured);
    std::ranges::sort(modelled);
    const double m_med = measured[measured.size() / 2], p_med = modelled[modelled.size() / 2];
    CAPTURE(m_med, p_med);
    CHECK(m_med > 1.6);
    CHECK(m_med < 2.1);
    CHECK(std::abs(p_med - m_med) / m_med < 0.10);
    WARN(name << " FP8 GEMMs: mean error " << 100 * now << "% (" << 100 * before
              << "% at bf16's fraction); FP8/bf16 speed ratio measured " << m_med << ", modelled " << p_med);
  }
}

namespace {

/// An SDPA kernel of tests/data/gpu (the three CSV layouts): its op shape and measured time.
struct attention_sample {
  std::string label;
  model::op op;
  bool backward = false;
  double seconds = 0.0;
};

/// The kernels of one backend (`cudnn`, `flash`, `flex`, `efficient`, `math`), run as phaze's `kernel`.
std::vector<attention_sample> attention_kernels(
    const std::string& file, std::string_view backend = "cudnn",
    model::attention_kernel kernel = model::attention_kernel::standard) {
  std::vector<attention_sample> out;
  for (const auto& r : read_csv(file)) {
    if ((r.contains("backend") ? std::string_view{r.at("backend")} : std::string_view{"cudnn"}) != backend)
      continue;
    const auto b = std::stoll(r.at("b")), heads = std::stoll(r.at("heads")), d = std::stoll(r.at("d"));
    const auto sq = std::stoll(r.contains("s") ? r.at("s") : r.at("s_q"));
    const auto skv = std::stoll(r.contains("s") ? r.at("s") : r.at("s_kv"));
    attention_sample a;
    a.label = (r.contains("label") ? r.at("label") : std::string{backend}) + " d " + std::to_string(d) +
              " s " + std::to_string(sq) + "/" + std::to_string(skv) + " " + r.at("pass") +
              (r.at("causal") == "1" ? " causal" : "");
    a.op.kind = model::op_kind::fused_attention;
    a.op.kernel = kernel;
    a.op.gemm = {b * heads, sq, d, skv};
    a.op.causal = r.at("causal") == "1";
    a.op.elem_bytes = 2;
    const auto kv_heads = r.contains("kv_heads") ? std::stoll(r.at("kv_heads")) : heads;
    a.op.in_elements = b * (heads * sq + 2 * kv_heads * skv) * d;
    a.op.out_elements = b * heads * sq * d;
    a.backward = r.at("pass") == "fwd+bwd";
    a.seconds = std::stod(r.at("seconds"));
    out.push_back(a);
  }
  return out;
}

double attention_predicted(attention_sample a, const hw::device& d) {
  a.op.phase = model::op_phase::forward;
  double t = phaze::cost::cost_of(a.op, d, phaze::cluster::route{}).all_cores.value();
  if (a.backward) {
    a.op.phase = model::op_phase::backward_data;
    t += phaze::cost::cost_of(a.op, d, phaze::cluster::route{}).all_cores.value();
  }
  return t;
}

}  // namespace

TEST_CASE("fused attention on the Hopper presets follows the measured kernels from 2K to 128K keys",
          "[gpu_calibration]") {
  // The values fitted on the sequence-2048 kernels alone, without the key-tile term (the presets until the
  // long sequences were measured).
  const hw::attention_efficiency h100_2048{0.687, 0.46, 0.525, 0.35, 76.0, 0.0};
  const hw::attention_efficiency h200_2048{0.684, 0.498, 0.534, 0.389, 78.0, 0.0};
  for (const auto& [name, stem, short_fit] :
       {std::tuple{"h100-sxm", "h100-sxm", h100_2048}, std::tuple{"h200", "h200", h200_2048}}) {
    const auto d = preset(name);
    auto data = attention_kernels(std::string{stem} + "-attention.csv");
    const auto longer = attention_kernels(std::string{stem} + "-attention-long.csv");
    REQUIRE(data.size() == 48);
    REQUIRE(longer.size() == 30);
    data.insert(data.end(), longer.begin(), longer.end());
    double mean = 0.0, worst = 0.0, long_mean = 0.0;
    std::string worst_label;
    auto without_tiles = d;
    without_tiles.sheet.attention = short_fit;
    double long_without = 0.0;
    for (std::size_t i = 0; i < data.size(); ++i) {
      const double e = std::abs(attention_predicted(data[i], d) - data[i].seconds) / data[i].seconds;
      mean += e;
      if (e > worst) worst = e, worst_label = data[i].label;
      if (i >= 48) {
        long_mean += e;
        long_without +=
            std::abs(attention_predicted(data[i], without_tiles) - data[i].seconds) / data[i].seconds;
      }
    }
    mean /= static_cast<double>(data.size());
    long_mean /= 30.0;
    long_without /= 30.0;
    CAPTURE(name, mean, worst, worst_label, long_mean, long_without);
    CHECK(mean < 0.05);
    CHECK(worst < 0.25);
    CHECK(long_mean < 0.07);
    // The key-tile term earns its place: the fit on sequence 2048 alone, without it, misses the long ones.
    CHECK(long_without > 2 * long_mean);
    WARN(name << " fused attention, 78 kernels: mean " << 100 * mean << "%, max " << 100 * worst << "% ("
              << worst_label << "); sequences 2K-128K mean " << 100 * long_mean << "% (" << 100 * long_without
              << "% with the sequence-2048 fit)");
  }
}

TEST_CASE(
    "each attention implementation on the Hopper presets runs as measured, at head dimension 64 and 128",
    "[gpu_calibration]") {
  // tests/data/gpu/{h100-sxm,h200}-attention-kernels.csv (tools/gpu/measure_kernels.py): causal SDPA forced
  // onto cuDNN, FlashAttention-2, FlexAttention (Triton) and the memory-efficient kernel, 16 shapes each
  // (FlexAttention 6), head dimension 64 and 128, sequences 512-65536. The kernel factors and head-dimension
  // terms of cost::attention_kernel_speed were fitted to both cards together; the device efficiencies were
  // fitted before, on other shapes (all at head dimension 128).
  struct expectation {
    std::string_view backend;
    model::attention_kernel kernel;
    double mean;
    double max;
  };
  for (const auto* name : {"h100-sxm", "h200"}) {
    const auto d = preset(name);
    auto no_head_dim_term = d;  // every kernel at its own efficiency, no head-dimension term
    no_head_dim_term.sheet.arch = hw::architecture::unspecified;
    std::map<std::string_view, double> per_kernel;
    for (const auto& [backend, kernel, mean_bound, max_bound] :
         {expectation{"cudnn", model::attention_kernel::standard, 0.11, 0.40},
          expectation{"flash", model::attention_kernel::flash2, 0.08, 0.25},
          expectation{"flex", model::attention_kernel::flex, 0.06, 0.15},
          expectation{"efficient", model::attention_kernel::efficient, 0.14, 0.65}}) {
      const auto data = attention_kernels(std::string{name} + "-attention-kernels.csv", backend, kernel);
      REQUIRE(data.size() == (backend == "flex" ? 12U : 32U));
      double mean = 0.0, worst = 0.0, d64 = 0.0, d64_without = 0.0;
      std::string worst_label;
      for (const auto& k : data) {
        const double e = std::abs(attention_predicted(k, d) - k.seconds) / k.seconds;
        mean += e;
        if (e > worst) worst = e, worst_label = k.label;
        if (k.op.gemm.k == 64) {
          d64 += e;
          d64_without += std::abs(attention_predicted(k, no_head_dim_term) - k.seconds) / k.seconds;
        }
      }
      mean /= static_cast<double>(data.size());
      CAPTURE(name, backend, mean, worst, worst_label, d64, d64_without);
      CHECK(mean < mean_bound);
      CHECK(worst < max_bound);
      per_kernel[backend] = mean;
      // cuDNN's head-dimension term earns its place: without it the head-64 kernels are missed by more.
      if (backend == "cudnn") CHECK(d64_without > 1.5 * d64);
      WARN(name << " " << backend << ": " << data.size() << " kernels, mean " << 100 * mean << "%, max "
                << 100 * worst << "% (" << worst_label << ")");
    }
  }
  // Head dimension 256 and grouped-query attention (tests/data/gpu/h100-sxm-attention-kernels-wide.csv, the
  // H100 alone): the wide-head backward term was fitted there; the grouped-query kernels (16 query heads, 4
  // key/value heads, head dimension 128) were not fitted at all.
  const auto h100 = preset("h100-sxm");
  for (const auto& [backend, kernel, wide_bound, grouped_bound] :
       {expectation{"cudnn", model::attention_kernel::standard, 0.12, 0.09},
        expectation{"flash", model::attention_kernel::flash2, 0.08, 0.08},
        expectation{"flex", model::attention_kernel::flex, 0.12, 0.0}}) {
    double wide = 0.0, grouped = 0.0;
    int n_wide = 0, n_grouped = 0;
    for (const auto& k : attention_kernels("h100-sxm-attention-kernels-wide.csv", backend, kernel)) {
      const double e = std::abs(attention_predicted(k, h100) - k.seconds) / k.seconds;
      CAPTURE(k.label, e);
      CHECK(e < 0.26);
      (k.op.gemm.k == 256 ? wide : grouped) += e;
      ++(k.op.gemm.k == 256 ? n_wide : n_grouped);
    }
    REQUIRE(n_wide == 6);
    CHECK(wide / n_wide < wide_bound);
    if (n_grouped > 0) CHECK(grouped / n_grouped < grouped_bound);
    WARN("h100-sxm " << backend << ", head dimension 256: mean " << 100 * wide / n_wide << "%"
                     << (n_grouped > 0
                             ? "; grouped-query: mean " + std::to_string(100 * grouped / n_grouped) + "%"
                             : std::string{}));
  }
  // The order of the implementations is the measured one at every shape: cuDNN, FlexAttention,
  // FlashAttention-2, memory-efficient, fastest first.
  const auto& d = h100;
  for (const std::int64_t head_dim : {64, 128})
    for (const std::int64_t s : {512, 4096, 65536}) {
      model::op o;
      o.kind = model::op_kind::fused_attention;
      o.gemm = {2048 / head_dim * std::max<std::int64_t>(1, 16384 / s), s, head_dim, s};
      o.causal = true;
      o.elem_bytes = 2;
      o.phase = model::op_phase::backward_data;
      double previous = 0.0;
      for (const auto k : {model::attention_kernel::cudnn, model::attention_kernel::flex,
                           model::attention_kernel::flash2, model::attention_kernel::efficient}) {
        o.kernel = k;
        const double t = phaze::cost::cost_of(o, d, phaze::cluster::route{}).all_cores.value();
        CAPTURE(head_dim, s, model::to_string(k));
        CHECK(t > previous);
        previous = t;
      }
    }
}

TEST_CASE("the grouped expert GEMMs of Qwen3-30B-A3B and Mixtral 8x7B are costed as measured on an H100",
          "[gpu_calibration][moe]") {
  // tests/data/gpu/h100-sxm-moe-gemm.csv (tools/gpu/measure_moe.py): each rank's experts at ep 4-16 as one
  // grouped GEMM (torch._grouped_mm, what Transformer Engine's and Megatron-Core's grouped GEMMs run) and as
  // a batched GEMM. phaze costs a rank's experts as one batched GEMM (cost::datasheet_gemm with the experts
  // as the batch); nothing was fitted to these shapes.
  const auto d = preset("h100-sxm");
  double grouped_sum = 0.0, grouped_worst = 0.0;
  int grouped = 0;
  for (const auto& r : read_csv("h100-sxm-moe-gemm.csv")) {
    const model::gemm_dims g{std::stoll(r.at("experts")), std::stoll(r.at("m")), std::stoll(r.at("k")),
                             std::stoll(r.at("n"))};
    const double measured = std::stod(r.at("seconds"));
    const double e = std::abs(phaze::cost::datasheet_gemm(g, d).value() - measured) / measured;
    CAPTURE(r.at("label"), r.at("variant"), e);
    CHECK(e < 0.25);
    if (r.at("variant") != "grouped_mm") continue;
    grouped_sum += e;
    grouped_worst = std::max(grouped_worst, e);
    ++grouped;
  }
  REQUIRE(grouped == 16);
  // Measured at this commit: mean 5.9%, max 14.4% against the grouped GEMMs.
  CHECK(grouped_sum / grouped < 0.08);
  CHECK(grouped_worst < 0.16);
  WARN("MoE grouped GEMMs on h100-sxm: mean " << 100 * grouped_sum / grouped << "%, max "
                                              << 100 * grouped_worst << "%");
}

TEST_CASE("the FP8 quantization pass runs at the share of HBM bandwidth the fused cast kernels reached",
          "[gpu_calibration]") {
  for (const auto& [name, file] :
       {std::pair{"h100-sxm", "h100-sxm-fused.csv"}, std::pair{"h200", "h200-fused.csv"}}) {
    INFO(name);
    const hw::device d = *hw::find_preset(name);
    // The median over the cast + transpose kernels of 2^25 elements or more (smaller ones wait on launch).
    std::vector<double> rates;
    double others_min = 1.0;
    for (const auto& r : read_csv(file)) {
      const std::string& op = r.at("op");
      if (std::stod(r.at("elements")) < 33554432.0) continue;
      const double share = std::stod(r.at("gbps")) * 1e9 / d.hbm_bandwidth.value();
      if (op.rfind("cast_transpose.", 0) == 0) rates.push_back(share);
      // The other fused kernels (norm, SwiGLU, RoPE, residual) reached 0.48 of the peak or more, all
      // faster than the casts.
      if (op.rfind("rmsnorm", 0) == 0 || op.rfind("swiglu", 0) == 0 || op.rfind("rope", 0) == 0 ||
          op.rfind("residual", 0) == 0)
        others_min = std::min(others_min, share);
    }
    REQUIRE(rates.size() == 5);
    std::sort(rates.begin(), rates.end());
    CHECK(d.sheet.gemm.fp8_quantize_fraction == Approx(rates[2]).margin(0.001));
    CHECK(others_min > 0.45);
    CHECK(others_min > rates.back());
    CHECK(hw::fp8_quantize_bandwidth(d).value() == Approx(rates[2] * d.hbm_bandwidth.value()).epsilon(0.01));
    CHECK(hw::fp8_quantize_bandwidth(d) < hw::achievable_hbm_bandwidth(d));
  }
  // Without a measurement, the quantization runs at the device's achievable bandwidth.
  const hw::device a100 = *hw::find_preset("a100-80gb");
  CHECK(hw::fp8_quantize_bandwidth(a100) == hw::achievable_hbm_bandwidth(a100));
}

TEST_CASE("eager memory-bound ops on the Hopper presets follow the kernels measured across sizes",
          "[gpu_calibration]") {
  // tests/data/gpu/*-membound-sizes.csv (tools/gpu/measure_membound.py): eager PyTorch kernels at 1M to 256M
  // elements. phaze's eager op (cost::eager_kernel_of: the two cards' shares of the peak and fixed times,
  // averaged) against each measured call, an op moving the row's bytes.
  const std::map<std::string, model::op_kind> kinds{
      {"add", model::op_kind::residual_add},    {"gelu", model::op_kind::gelu},
      {"layernorm", model::op_kind::layernorm}, {"rmsnorm", model::op_kind::rmsnorm},
      {"swiglu", model::op_kind::swiglu},       {"rope", model::op_kind::rotary}};
  for (const auto& [name, file] :
       {std::pair{"h100-sxm", "h100-sxm-membound-sizes.csv"}, std::pair{"h200", "h200-membound-sizes.csv"}}) {
    const auto d = preset(name);
    double sum = 0.0, fused_sum = 0.0, worst = 0.0;
    int n = 0;
    for (const auto& r : read_csv(file)) {
      if (r.at("mode") != "eager" || !kinds.contains(r.at("kind"))) continue;
      const std::int64_t out = std::stoll(r.at("elements"));
      // An op moving the row's bytes in bf16.
      model::op o = phaze::testing::vector_op(kinds.at(r.at("kind")), model::op_phase::forward,
                                              std::stoll(r.at("bytes")) / 2 - out, out);
      const double measured = std::stod(r.at("seconds"));
      o.eager = true;
      const double eager = phaze::cost::datasheet_vector_time(o, d).value();
      o.eager = false;
      const double fused = phaze::cost::datasheet_vector_time(o, d).value();
      const double error = std::abs(eager - measured) / measured;
      CAPTURE(name, r.at("kind"), r.at("elements"), measured, eager, fused);
      CHECK(error < 0.35);  // measured: at most 27.4% (H100), 27.0% (H200)
      sum += error;
      fused_sum += std::abs(fused - measured) / measured;
      worst = std::max(worst, error);
      ++n;
    }
    REQUIRE(n == 54);
    WARN(name << ": eager kernels, mean error " << 100.0 * sum / n << "%, max " << 100.0 * worst << "% over "
              << n << " calls (at the copy rate with no fixed time: mean " << 100.0 * fused_sum / n << "%)");
    CHECK(sum / n < 0.13);  // measured: mean 10.5% (H100), 8.9% (H200); fused: 43.9%, 52.2%
    CHECK(sum < fused_sum / 2.0);
  }
}

TEST_CASE(
    "eager backward, dropout and softmax kernels on the Hopper presets follow the single calls measured",
    "[gpu_calibration]") {
  // tests/data/gpu/*-membound.csv (tools/gpu/measure.py): one call each at 4 x 2048 x 12288 elements. The
  // LayerNorm forward and backward together, GELU's backward, dropout and softmax, each as phaze's eager op
  // of that many elements (a backward op as model::backward builds it: the gradient in, the gradient out).
  for (const auto& [name, file] :
       {std::pair{"h100-sxm", "h100-sxm-membound.csv"}, std::pair{"h200", "h200-membound.csv"}}) {
    const auto d = preset(name);
    std::map<std::string, double> measured;
    for (const auto& r : read_csv(file)) measured[r.at("op")] = std::stod(r.at("seconds"));
    const std::int64_t e = 4 * 2048 * 12288;
    auto eager = [&](model::op_kind k, model::op_phase p) {
      model::op o = phaze::testing::vector_op(k, p, e, e);
      o.eager = true;
      return phaze::cost::datasheet_vector_time(o, d).value();
    };
    const std::vector<std::tuple<std::string, double, double>> cases{
        {"layernorm_fwd_bwd.b4.h12288",
         eager(model::op_kind::layernorm, model::op_phase::forward) +
             eager(model::op_kind::layernorm, model::op_phase::backward_data),
         0.10},
        {"gelu_bwd.b4.h12288", eager(model::op_kind::gelu, model::op_phase::backward_data), 0.10},
        {"dropout.b4.h12288", eager(model::op_kind::dropout, model::op_phase::forward), 0.12},
        // The cards differ most here (0.563 and 0.408 of their peaks): their mean is 16% off each.
        {"softmax.b4.h12288", eager(model::op_kind::softmax, model::op_phase::forward), 0.20}};
    for (const auto& [op, phaze_s, bound] : cases) {
      const double error = (phaze_s - measured.at(op)) / measured.at(op);
      CAPTURE(name, op, measured.at(op), phaze_s, error);
      CHECK(std::abs(error) < bound);
    }
  }
}

TEST_CASE("a rank's expert GEMMs on an H200, bf16 and FP8, are costed as measured",
          "[gpu_calibration][moe]") {
  // The experts' GEMMs of one rank of Qwen3-30B-A3B (ep 16 and 8) and GPT-OSS 120B (ep 8) at 4096 tokens
  // (tools/gpu/measure_moe_block.py), CUDA graphs; phaze costs a rank's experts as one batched GEMM in either
  // format (cost::datasheet_gemm_in), nothing fitted to these shapes:
  // - h200-moe-fp8.csv: the forward GEMMs in bf16 as one grouped GEMM (torch._grouped_mm);
  // - h200-moe-fp8-passes.csv: the forward, data-gradient and weight-gradient GEMMs one per expert, as
  //   Transformer Engine's GroupedLinear runs them: in FP8 on four streams, fast accumulation in the forward
  //   and split accumulation in the backward (TE's defaults), and in bf16 one after another.
  // The FP8 casts are costed apart (hw::fp8_quantize_bandwidth) and not compared here.
  const auto d = preset("h200");
  struct tally {
    double sum = 0.0, signed_sum = 0.0, worst = 0.0;
    int n = 0;
    void add(double e) { sum += std::abs(e), signed_sum += e, worst = std::max(worst, std::abs(e)), ++n; }
  };
  auto check = [&](const std::string& file, const std::string& variant, hw::precision p, tally& t) {
    for (const auto& r : read_csv(file)) {
      if (r.at("variant") != variant) continue;
      const model::gemm_dims g{std::stoll(r.at("experts")), std::stoll(r.at("m")), std::stoll(r.at("k")),
                               std::stoll(r.at("n"))};
      const double measured = std::stod(r.at("seconds"));
      const double modelled = phaze::cost::datasheet_gemm_in(g, d, p).value();
      const double e = (modelled - measured) / measured;
      CAPTURE(file, r.at("case"), r.at("gemm"), variant, measured, modelled, e);
      std::printf("%-20s %-10s %-13s measured %7.3f ms  phaze %7.3f ms  %+6.1f%%\n", r.at("case").c_str(),
                  r.at("gemm").c_str(), variant.c_str(), 1e3 * measured, 1e3 * modelled, 100.0 * e);
      t.add(e);
    }
  };
  tally grouped, fp8, bf16;
  check("h200-moe-fp8.csv", "bf16_grouped", hw::precision::bf16, grouped);
  check("h200-moe-fp8-passes.csv", "fp8_streams", hw::precision::fp8, fp8);
  check("h200-moe-fp8-passes.csv", "bf16", hw::precision::bf16, bf16);
  REQUIRE(grouped.n == 6);
  REQUIRE(fp8.n == 18);
  REQUIRE(bf16.n == 18);
  // Measured at this commit: the grouped bf16 GEMMs within 7.7% (mean 4.7%); bf16 one per expert mean 7.3%,
  // max 17.2%; FP8 as Transformer Engine runs it mean 10.8%, max 25.8%, phaze fast on average (-9.4%): most
  // on the 768-wide GEMMs of Qwen3's experts at ep 8 (2,048 rows each), where FP8 was 1.6 times as fast as
  // bf16 and phaze's FP8 rate is 1.7-1.8 times its bf16 one. The same FP8 GEMMs on one stream and without
  // fast accumulation in the forward (h200-moe-fp8.csv) took 15-43% longer than phaze.
  CHECK(grouped.worst < 0.10);
  CHECK(bf16.sum / bf16.n < 0.10);
  CHECK(bf16.worst < 0.20);
  CHECK(fp8.sum / fp8.n < 0.13);
  CHECK(fp8.worst < 0.30);
  CHECK(fp8.signed_sum / fp8.n < 0.0);
  WARN("expert GEMMs on h200: bf16 grouped max " << 100 * grouped.worst << "%; FP8 mean "
                                                 << 100 * fp8.sum / fp8.n << "%, max " << 100 * fp8.worst
                                                 << "%, signed " << 100 * fp8.signed_sum / fp8.n << "%");
}

TEST_CASE("the unfused unpermutation's add by index takes the measured time on both Hopper cards",
          "[gpu_calibration][moe]") {
  // The add by index (index_add_) of an unfused mixture-of-experts unpermutation, top_k rows of h bf16
  // values onto each token, with the gate product before it, as measured on an H100 SXM
  // (h100-sxm-moe-permute.csv: Qwen3-30B-A3B, 4096 tokens x 8 rows of 2048; Mixtral 8x7B, 4096 x 2 of 4096)
  // and, kernel alone, on an H200 (h200-moe-block-profile.csv: three adds per block of Qwen3-30B-A3B and
  // GPT-OSS 120B at 4096 tokens). cost::index_add_share is the mean of the four shares; each card's own
  // times stay within 15% of it, the gate product costed as phaze costs it (residual_add).
  using model::op_kind, model::op_phase;
  auto unpermute = [](std::int64_t tokens, std::int64_t rows, std::int64_t h) {
    model::op o = phaze::testing::vector_op(op_kind::residual_add, op_phase::forward, rows * h, tokens * h);
    o.permutation = model::index_kernel::scatter_add;
    return o;
  };
  auto scale = [](std::int64_t rows, std::int64_t h) {
    return phaze::testing::vector_op(op_kind::residual_add, op_phase::forward, rows * h, rows * h);
  };
  const auto h100 = preset("h100-sxm");
  for (const auto& r : read_csv("h100-sxm-moe-permute.csv")) {
    if (r.at("label").find("unpermute") == std::string::npos) continue;
    const std::int64_t rows = std::stoll(r.at("rows")), h = std::stoll(r.at("width"));
    const std::int64_t tokens = rows / std::stoll(r.at("top_k"));
    const double modelled = phaze::cost::datasheet_vector_time(unpermute(tokens, rows, h), h100).value() +
                            phaze::cost::datasheet_vector_time(scale(rows, h), h100).value();
    const double measured = std::stod(r.at("seconds"));
    CAPTURE(r.at("label"), measured, modelled);
    CHECK(std::abs(modelled - measured) / measured < 0.15);
  }
  const auto h200 = preset("h200");
  std::map<std::string, double> adds;
  for (const auto& r : read_csv("h200-moe-block-profile.csv"))
    if (r.at("kernel").find("indexFuncLargeIndex") != std::string::npos)
      adds[r.at("case")] += std::stod(r.at("seconds_per_block"));
  struct shape {
    const char* name;
    std::int64_t rows, h;
  };
  for (const shape s :
       {shape{"qwen3-30b-a3b.ep8", 4096 * 8, 2048}, shape{"gpt-oss-120b.ep8", 4096 * 4, 2880}}) {
    REQUIRE(adds.count(s.name) == 1);
    // two adds of the rows onto the tokens (the unpermutation, the permutation's backward) and one of the
    // rows onto rows (the backward of the measured block's second gather)
    const double modelled =
        2.0 * phaze::cost::datasheet_vector_time(unpermute(4096, s.rows, s.h), h200).value() +
        phaze::cost::datasheet_vector_time(unpermute(s.rows, s.rows, s.h), h200).value();
    CAPTURE(s.name, adds[s.name], modelled);
    CHECK(std::abs(modelled - adds[s.name]) / adds[s.name] < 0.15);
  }
}
