/// @file
/// Tests of phaze/hw/presets.hpp: every preset is valid and named consistently, PHAZE's reference design is
/// the one of the paper, and the GPUs' published numbers are spot-checked against their datasheets.
#include "phaze/hw/presets.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <string_view>

#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"

namespace hw = phaze::hw;
using namespace phaze::literals;

namespace {
hw::device preset(std::string_view name) {
  const auto d = hw::find_preset(name);
  REQUIRE(d.has_value());
  return *d;
}

double tflops(phaze::flops_per_second f) {
  return phaze::in_tflop_per_s(f);
}
}  // namespace

TEST_CASE("every preset validates, is named like its entry and cites a source", "[presets]") {
  std::set<std::string_view> names;
  for (const auto& p : hw::presets) {
    CAPTURE(p.name);
    CHECK_NOTHROW(hw::validate(p.spec));
    CHECK(p.spec.name.view() == p.name);
    CHECK(names.insert(p.name).second);  // unique
    CHECK(p.source.size() > 20);
    CHECK(hw::find_preset(p.name) == p.spec);
    // Peak matrix rate above the vector rate, and both positive: the cost model divides by them.
    CHECK(hw::peak_matrix_flops(p.spec) > hw::peak_vector_flops(p.spec));
    CHECK(hw::peak_vector_flops(p.spec).value() > 0);
  }
  CHECK(names.size() >= 9);
  CHECK_FALSE(hw::find_preset("h100").has_value());
}

TEST_CASE("presets validate in constant evaluation", "[presets]") {
  static_assert([] {
    for (const auto& p : hw::presets) hw::validate(p.spec);
    return true;
  }());
}

TEST_CASE("tpuv4-like is PHAZE's reference design with a 275 TFLOP/s peak", "[presets]") {
  // PHAZE (ICML 2024) section 5: 8 TCs of 128x128, 2 VCs of 128 lanes, 128 MiB GLB,
  // 1.05 GHz, 32 GiB HBM at 1.2 TB/s. Google Cloud's TPU v4 page quotes 275 TFLOP/s bf16.
  const auto d = preset("tpuv4-like");
  CHECK(d.kind == hw::device_kind::systolic);
  CHECK(d.systolic.num_tc == 8);
  CHECK(d.systolic.tc_width == 128);
  CHECK(d.systolic.tc_depth == 128);
  CHECK(d.systolic.num_vc == 2);
  CHECK(d.systolic.vc_width == 128);
  CHECK(d.systolic.glb == 128_MiB);
  CHECK(d.systolic.clock == 1050_MHz);
  CHECK(d.hbm == 32_GiB);
  CHECK(d.hbm_bandwidth == 1200_GBps);
  CHECK(d.compute == hw::precision::bf16);
  CHECK(tflops(hw::peak_matrix_flops(d)) == Approx(275.0).epsilon(0.01));
  CHECK(d == hw::tpuv4_like);
  // The datasheet TPU v4 agrees on the peak and the memory.
  const auto sheet = preset("tpuv4");
  CHECK(tflops(hw::peak_matrix_flops(sheet)) == Approx(tflops(hw::peak_matrix_flops(d))).epsilon(0.01));
  CHECK(sheet.hbm == d.hbm);
  CHECK(sheet.hbm_bandwidth == d.hbm_bandwidth);
}

TEST_CASE("A100: 312 TFLOP/s bf16, 80 GB at 2039 GB/s", "[presets]") {
  // NVIDIA A100 Tensor Core GPU datasheet (2021): BF16/FP16 Tensor Core 312 TFLOPS (dense), TF32 156,
  // FP32 19.5; A100 80GB SXM: HBM2e 2,039 GB/s; A100 40GB: 1,555 GB/s; NVLink 600 GB/s total.
  const auto a80 = preset("a100-80gb");
  CHECK(tflops(hw::peak_matrix_flops(a80)) == Approx(312.0));
  CHECK(tflops(hw::matrix_peak(a80.sheet, hw::precision::tf32)) == Approx(156.0));
  CHECK(tflops(a80.sheet.vector) == Approx(19.5));
  CHECK(phaze::in_gb(a80.hbm) == Approx(80.0));
  CHECK(phaze::in_gb_per_s(a80.hbm_bandwidth) == Approx(2039.0));
  const auto a40 = preset("a100-40gb");
  CHECK(tflops(hw::peak_matrix_flops(a40)) == Approx(312.0));
  CHECK(phaze::in_gb_per_s(a40.hbm_bandwidth) == Approx(1555.0));
}

TEST_CASE("H100 SXM: 989 TFLOP/s bf16 dense, 3.35 TB/s, H200: 4.8 TB/s, memory as CUDA reports it",
          "[presets]") {
  // NVIDIA H100 Tensor Core GPU datasheet: H100 SXM BF16 Tensor Core 1,979 TFLOPS with sparsity = 989.5
  // dense, FP8 3,958 sparse, 80 GB at 3.35 TB/s, NVLink 900 GB/s. H100 PCIe: 1,513 sparse bf16, 2 TB/s.
  const auto sxm = preset("h100-sxm");
  CHECK(tflops(hw::peak_matrix_flops(sxm)) == Approx(989.0).epsilon(0.001));
  CHECK(tflops(hw::matrix_peak(sxm.sheet, hw::precision::fp8)) == Approx(3958.0 / 2).epsilon(0.001));
  CHECK(phaze::in_gb_per_s(sxm.hbm_bandwidth) == Approx(3350.0));
  // Memory as CUDA reports it on the card (torch.cuda.get_device_properties().total_memory, measured:
  // tests/train/recipe_knobs_test.cpp reads it from the measurements' env files): 79.2 GiB, a little under
  // the datasheet's "80 GB" read as GiB, which the driver and ECC keep.
  CHECK(sxm.hbm.value() == 85017493504.0);
  CHECK(sxm.hbm.value() < 80.0 * 1024 * 1024 * 1024);
  const auto pcie = preset("h100-pcie");
  CHECK(tflops(hw::peak_matrix_flops(pcie)) == Approx(1513.0 / 2).epsilon(0.001));
  CHECK(phaze::in_gb_per_s(pcie.hbm_bandwidth) == Approx(2000.0));
  // NVIDIA H200 Tensor Core GPU datasheet (SXM): 141 GB HBM3e at 4.8 TB/s, the H100's compute.
  const auto h200 = preset("h200");
  // 141 GB on the datasheet; CUDA reports 139.8 GiB (the same measurement as the H100's).
  CHECK(h200.hbm.value() / (1024.0 * 1024 * 1024) == Approx(139.8).epsilon(1e-3));
  CHECK(h200.hbm.value() < 141.0 * 1024 * 1024 * 1024);
  CHECK(phaze::in_gb_per_s(h200.hbm_bandwidth) == Approx(4800.0));
  CHECK(hw::peak_matrix_flops(h200) == hw::peak_matrix_flops(sxm));
}

TEST_CASE("V100 and T4 compute in fp16: 125 and 65 TFLOP/s, T4 at 320 GB/s", "[presets]") {
  // NVIDIA V100 datasheet (SXM2): 125 TFLOPS tensor performance, 15.7 FP32, 16 GB HBM2 at 900 GB/s; no bf16.
  const auto v100 = preset("v100-16gb");
  CHECK(v100.compute == hw::precision::fp16);
  CHECK(tflops(hw::peak_matrix_flops(v100)) == Approx(125.0));
  CHECK(phaze::in_gb_per_s(v100.hbm_bandwidth) == Approx(900.0));
  // NVIDIA T4 datasheet: mixed-precision (FP16/FP32) 65 TFLOPS, FP32 8.1, 16 GB GDDR6 at 320 GB/s; no bf16.
  const auto t4 = preset("t4");
  CHECK(t4.compute == hw::precision::fp16);
  CHECK(tflops(hw::peak_matrix_flops(t4)) == Approx(65.0));
  CHECK(tflops(t4.sheet.vector) == Approx(8.1));
  CHECK(phaze::in_gb_per_s(t4.hbm_bandwidth) == Approx(320.0));
  CHECK(phaze::in_gb(t4.hbm) == Approx(16.0));
  // bf16 asked of them runs at the fp16 rate.
  CHECK(hw::matrix_peak(t4.sheet, hw::precision::bf16) == hw::matrix_peak(t4.sheet, hw::precision::fp16));
}
