/// @file
/// Tests of phaze/hw/device.hpp: peak rates of the systolic template and of datasheet devices (with the
/// format fallbacks), and every rule validate() enforces, at run time and in constant evaluation.
#include "phaze/hw/device.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "phaze/core/quantity.hpp"
#include "phaze/hw/presets.hpp"

namespace hw = phaze::hw;
using namespace phaze::literals;
using phaze::flops_per_second;

namespace {

/// The what() of the input_error validate() throws for `d`; fails the test when it throws nothing.
std::string validate_error(const hw::device& d) {
  try {
    hw::validate(d);
  } catch (const phaze::input_error& e) {
    return e.what();
  }
  FAIL("validate() accepted a broken device");
  return {};
}

/// A small datasheet device that validates: 100 TFLOP/s fp16 only, 10 TFLOP/s vector.
hw::device small_gpu() {
  hw::device d;
  d.name = "small";
  d.kind = hw::device_kind::datasheet;
  d.hbm = 16_GB;
  d.hbm_bandwidth = 900_GBps;
  d.compute = hw::precision::fp16;
  d.sheet.matrix_fp16 = 100_TFLOPs;
  d.sheet.vector = flops_per_second{10e12};
  return d;
}

}  // namespace

TEST_CASE("the systolic template's peak is 2 FLOPs per MAC per cycle", "[device]") {
  // PHAZE (ICML 2024) section 5: the TPUv4-like design, 8 x 128 x 128 MACs at 1.05 GHz.
  static_assert(hw::peak_matrix_flops(hw::tpuv4_like).value() == 2.0 * 8 * 128 * 128 * 1.05e9);
  static_assert(hw::peak_vector_flops(hw::tpuv4_like).value() == 2.0 * 128 * 1.05e9);
  auto d = hw::tpuv4_like;
  d.systolic.num_tc = 16;
  CHECK(hw::peak_matrix_flops(d).value() == Approx(2.0 * hw::peak_matrix_flops(hw::tpuv4_like).value()));
  d.systolic.tc_width = 64;
  d.systolic.tc_depth = 256;  // the same MACs in another shape: the same peak
  CHECK(hw::peak_matrix_flops(d).value() == Approx(2.0 * hw::peak_matrix_flops(hw::tpuv4_like).value()));
}

TEST_CASE("matrix_peak falls back to the format a device computes a missing one in", "[device]") {
  hw::datasheet_spec s;
  s.matrix_fp16 = 125_TFLOPs;
  s.vector = flops_per_second{15.7e12};
  CHECK(hw::matrix_peak(s, hw::precision::fp16) == 125_TFLOPs);
  CHECK(hw::matrix_peak(s, hw::precision::bf16) == 125_TFLOPs);  // V100, T4: no bf16
  CHECK(hw::matrix_peak(s, hw::precision::fp8) == 125_TFLOPs);
  CHECK(hw::matrix_peak(s, hw::precision::fp32) == s.vector);  // no fp32 matrix path: CUDA cores
  CHECK(hw::matrix_peak(s, hw::precision::tf32).value() == 0.0);
  s.matrix_bf16 = 312_TFLOPs;
  s.matrix_tf32 = 156_TFLOPs;
  CHECK(hw::matrix_peak(s, hw::precision::bf16) == 312_TFLOPs);
  CHECK(hw::matrix_peak(s, hw::precision::tf32) == 156_TFLOPs);

  auto d = small_gpu();
  CHECK(hw::peak_matrix_flops(d) == 100_TFLOPs);
  CHECK(hw::peak_vector_flops(d) == d.sheet.vector);
}

TEST_CASE("formats: names and element sizes", "[device]") {
  CHECK(hw::to_string(hw::precision::bf16) == "bf16");
  CHECK(hw::to_string(hw::precision::tf32) == "tf32");
  CHECK(hw::element_bytes(hw::precision::fp32) == 4);
  CHECK(hw::element_bytes(hw::precision::tf32) == 4);  // stored as fp32
  CHECK(hw::element_bytes(hw::precision::bf16) == 2);
  CHECK(hw::element_bytes(hw::precision::fp8) == 1);
  CHECK(hw::to_string(hw::device_kind::systolic) == "systolic");
  CHECK(hw::to_string(hw::device_kind::datasheet) == "datasheet");
}

TEST_CASE("validate accepts good devices, also in constant evaluation", "[device]") {
  static_assert((hw::validate(hw::tpuv4_like), true));
  CHECK_NOTHROW(hw::validate(small_gpu()));
}

TEST_CASE("validate rejects each broken field of a systolic device", "[device]") {
  using mutation = std::function<void(hw::device&)>;
  const std::pair<mutation, const char*> cases[] = {
      {[](hw::device& d) { d.systolic.num_tc = 0; }, "num_tc"},
      {[](hw::device& d) { d.systolic.tc_width = 0; }, "tc_width"},
      {[](hw::device& d) { d.systolic.tc_depth = -1; }, "tc_depth"},
      {[](hw::device& d) { d.systolic.num_vc = 0; }, "num_vc"},
      {[](hw::device& d) { d.systolic.vc_width = 0; }, "vc_width"},
      {[](hw::device& d) { d.systolic.glb = 0_B; }, "glb"},
      {[](hw::device& d) { d.systolic.clock = phaze::hertz{0.0}; }, "clock"},
      {[](hw::device& d) { d.hbm = 0_B; }, "hbm capacity"},
      {[](hw::device& d) { d.hbm_bandwidth = phaze::bytes_per_second{-1.0}; }, "hbm bandwidth"},
  };
  for (const auto& [mutate, expected] : cases) {
    auto d = hw::tpuv4_like;
    mutate(d);
    CAPTURE(expected);
    CHECK_THAT(validate_error(d), Catch::Contains(expected));
  }
}

TEST_CASE("validate rejects each broken field of a datasheet device", "[device]") {
  using mutation = std::function<void(hw::device&)>;
  const std::pair<mutation, const char*> cases[] = {
      {[](hw::device& d) { d.compute = hw::precision::tf32; }, "peak matrix rate"},
      {[](hw::device& d) { d.sheet.matrix_fp16 = flops_per_second{0.0}; }, "peak matrix rate"},
      {[](hw::device& d) { d.sheet.vector = flops_per_second{0.0}; }, "vector rate"},
      {[](hw::device& d) { d.sheet.gemm.max_fraction = 0.0; }, "max_fraction"},
      {[](hw::device& d) { d.sheet.gemm.max_fraction = 1.2; }, "max_fraction"},
      {[](hw::device& d) { d.sheet.memory_efficiency = 0.0; }, "memory_efficiency"},
      {[](hw::device& d) { d.sheet.gemm.compute_units = 0; }, "compute_units"},
      {[](hw::device& d) { d.sheet.gemm.tile_m = 0; }, "tile_m"},
      {[](hw::device& d) { d.sheet.gemm.k_half = -1.0; }, "k_half"},
  };
  for (const auto& [mutate, expected] : cases) {
    auto d = small_gpu();
    mutate(d);
    CAPTURE(expected);
    CHECK_THAT(validate_error(d), Catch::Contains(expected));
  }
}

TEST_CASE("a systolic device ignores its datasheet part and the other way round", "[device]") {
  auto systolic = hw::tpuv4_like;
  systolic.sheet.vector = flops_per_second{-1.0};  // not looked at
  CHECK_NOTHROW(hw::validate(systolic));
  auto sheet = small_gpu();
  sheet.systolic.num_tc = 0;  // not looked at
  CHECK_NOTHROW(hw::validate(sheet));
}
