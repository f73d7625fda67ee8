/// @file
/// What an accelerator is: PHAZE's parametric tensor-core/vector-core template, or a real device described by
/// its datasheet; compute and memory only (how devices are connected is the cluster's, cluster/).
#pragma once

#include <cstdint>
#include <string_view>

#include "phaze/core/error.hpp"
#include "phaze/core/fixed_string.hpp"
#include "phaze/core/quantity.hpp"

namespace phaze::hw {

/// Numeric formats a device may compute in.
enum class precision : std::uint8_t { fp32, tf32, bf16, fp16, fp8 };

constexpr std::string_view to_string(precision p) {
  switch (p) {
    case precision::fp32:
      return "fp32";
    case precision::tf32:
      return "tf32";
    case precision::bf16:
      return "bf16";
    case precision::fp16:
      return "fp16";
    case precision::fp8:
      return "fp8";
  }
  return "?";
}

/// Bytes per element of a format as stored in memory (tf32 is stored as fp32).
constexpr int element_bytes(precision p) {
  switch (p) {
    case precision::fp32:
    case precision::tf32:
      return 4;
    case precision::bf16:
    case precision::fp16:
      return 2;
    case precision::fp8:
      return 1;
  }
  return 2;
}

/// How a device is described.
enum class device_kind : std::uint8_t {
  systolic,   ///< PHAZE's template: tensor cores (systolic arrays), vector cores, one global buffer
  datasheet,  ///< a real device (GPU, TPU) by its published peak rates and a GEMM-efficiency model
};

constexpr std::string_view to_string(device_kind k) {
  return k == device_kind::systolic ? "systolic" : "datasheet";
}

/// PHAZE's parametric accelerator (Wang et al., ICML 2024, section 3): `num_tc` tensor cores, each a
/// `tc_width x tc_depth` systolic array of MACs; `num_vc` vector cores of `vc_width` lanes; one global buffer
/// (GLB) shared by all cores; everything clocked at `clock`.
struct systolic_design {
  int num_tc = 0;
  int tc_width = 0;  ///< rows of each systolic array (the reduction dimension K maps onto them)
  int tc_depth = 0;  ///< columns of each systolic array (output features N map onto them)
  int num_vc = 0;
  int vc_width = 0;  ///< lanes per vector core
  bytes glb{0.0};    ///< on-chip global buffer shared by all cores
  hertz clock{0.0};
  friend constexpr bool operator==(const systolic_design&, const systolic_design&) = default;
};

/// Achieved GEMM throughput of a datasheet device as a fraction of its peak, by shape.
/// fraction(m, n, k) = max_fraction * wave_efficiency(m, n) * k / (k + k_half), where wave_efficiency is the
/// useful share of the last wave of `tile_m x tile_n` output tiles over `compute_units` (NVIDIA, "Matrix
/// Multiplication Background User's Guide": tile and wave quantization), and k / (k + k_half) models the
/// fixed prologue/epilogue cost of each tile that a short reduction cannot hide.
struct gemm_efficiency {
  double max_fraction = 1.0;  ///< fraction of peak reached by large, well-shaped GEMMs
  int tile_m = 128;
  int tile_n = 128;
  int compute_units = 1;  ///< streaming multiprocessors (GPUs) or matrix units that take tiles in parallel
  double k_half = 0.0;    ///< reduction length at which the per-tile overhead halves throughput
  /// max_fraction of FP8 GEMMs (Transformer Engine's linear layers under --precision fp8); 0: max_fraction.
  double fp8_max_fraction = 0.0;
  /// Share of the HBM bandwidth the FP8 quantization passes reach (the scaled cast of a GEMM input and its
  /// transposed copy, hw::fp8_quantize_bandwidth); 0: the device's memory_efficiency.
  double fp8_quantize_fraction = 0.0;
  friend constexpr bool operator==(const gemm_efficiency&, const gemm_efficiency&) = default;
};

/// The efficiency of FP8 GEMMs on a device whose bf16 GEMMs reach `e`: fp8_max_fraction (max_fraction when
/// not given) and twice the reduction half-point. A tile's fixed prologue/epilogue takes the same time in
/// both formats while the tensor cores run the reduction twice as fast in FP8, so the reduction at which the
/// overhead halves the throughput doubles.
constexpr gemm_efficiency fp8_gemm_efficiency(gemm_efficiency e) {
  if (e.fp8_max_fraction > 0.0) e.max_fraction = e.fp8_max_fraction;
  e.k_half *= 2.0;
  return e;
}

/// Achieved throughput of fused attention (FlashAttention-style kernels: cuDNN's fused SDPA, which
/// Megatron-Core runs through Transformer Engine) as fractions of the peak matrix rate, for the work the
/// kernel executes: the forward pass's QK^T and PV GEMMs, the backward pass's five (the scores recomputed,
/// dV, dP, dQ, dK: 2.5 times the forward), causal kernels skipping the masked half. A kernel of w work units
/// (one unit: 128 query rows of one head against all keys; a causal one counts half) reaches
/// fraction * w / (w + work_half): few heads per rank or short sequences leave SMs idle. Each work unit walks
/// L key tiles of 128 (L = ceil(keys / 128), half of that under a causal mask) after a fixed start and drain
/// worth key_tiles_half tiles, reaching L / (L + key_tiles_half) of the fraction: short sequences run
/// slower per FLOP than long ones. Fractions of 0: not measured, derived from the GEMM efficiency
/// (cost/attention.hpp).
struct attention_efficiency {
  double forward = 0.0;
  double backward = 0.0;
  double causal_forward = 0.0;
  double causal_backward = 0.0;
  double work_half = 0.0;
  double key_tiles_half = 0.0;
  [[nodiscard]] constexpr bool measured() const {
    return forward > 0.0 && backward > 0.0 && causal_forward > 0.0 && causal_backward > 0.0;
  }
  friend constexpr bool operator==(const attention_efficiency&, const attention_efficiency&) = default;
};

/// The GPU generation of a datasheet device, where it decides which kernels run and how fast
/// (cost/attention.hpp: FlashAttention-3 and the Hopper-specific instructions of cuDNN's kernels need
/// Hopper; FlashAttention-2 and Triton kernels run on Ampere and later without them). `unspecified` for
/// devices of no known generation (TPUs, device files without the field): every fused kernel then runs at
/// the device's own attention efficiency.
enum class architecture : std::uint8_t { unspecified, volta, turing, ampere, hopper, blackwell };

constexpr std::string_view to_string(architecture a) {
  switch (a) {
    case architecture::unspecified:
      return "unspecified";
    case architecture::volta:
      return "volta";
    case architecture::turing:
      return "turing";
    case architecture::ampere:
      return "ampere";
    case architecture::hopper:
      return "hopper";
    case architecture::blackwell:
      return "blackwell";
  }
  return "?";
}

/// Time multipliers fitted to a user's measured training steps (train::calibration, `phaze calibrate`),
/// applied where each kind of kernel is costed (cost/): GEMMs, fused attention, memory-bound kernels (vector
/// ops, FP8 quantization passes). 1: the model as published. A calibrated kernel is never faster than its
/// roofline (peak matrix rate, peak HBM bandwidth), whatever the factor.
struct calibration_factors {
  double gemm = 1.0;
  double attention = 1.0;
  double memory = 1.0;
  friend constexpr bool operator==(const calibration_factors&, const calibration_factors&) = default;
};

/// A real device by its datasheet: dense (non-sparse) peak matrix rates per format, vector rate, and the
/// achieved-efficiency model.
struct datasheet_spec {
  flops_per_second matrix_fp32{0.0};  ///< 0 when the device has no fp32 matrix path (vector rate is used)
  flops_per_second matrix_tf32{0.0};
  flops_per_second matrix_bf16{0.0};  ///< 0 when the device lacks bf16 (V100, T4): fp16 is used instead
  flops_per_second matrix_fp16{0.0};
  flops_per_second matrix_fp8{0.0};
  flops_per_second vector{0.0};  ///< non-matrix (CUDA-core / VPU) fp32 rate
  gemm_efficiency gemm{};
  double memory_efficiency = 1.0;    ///< achievable share of HBM bandwidth (STREAM-like copy)
  attention_efficiency attention{};  ///< fused attention (zeros: derived from `gemm`)
  architecture arch = architecture::unspecified;
  /// The share by which computation slows while a collective it overlaps (data-parallel gradient buckets,
  /// FSDP gathers) runs beside it on the same GPU: the collective's kernels take SMs and memory bandwidth
  /// (measured on the Hopper presets, docs/gpu-measurements.md); 0: not modelled.
  double overlap_slowdown = 0.0;
  calibration_factors calibrated{};  ///< fitted to measured steps (train::apply_calibration); 1s otherwise
  friend constexpr bool operator==(const datasheet_spec&, const datasheet_spec&) = default;
};

/// One accelerator. Common fields first; `systolic` is used when kind == systolic, `sheet` otherwise.
struct device {
  fixed_string<32> name;
  device_kind kind = device_kind::systolic;
  bytes hbm{0.0};  ///< device memory capacity
  bytes_per_second hbm_bandwidth{0.0};
  precision compute = precision::bf16;  ///< the format training runs in
  systolic_design systolic{};
  datasheet_spec sheet{};
  friend constexpr bool operator==(const device&, const device&) = default;
};

namespace rules {
[[noreturn]] inline void tensor_cores_must_be_positive() {
  throw input_error("num_tc must be at least 1");
}
[[noreturn]] inline void systolic_array_dimensions_must_be_positive() {
  throw input_error("tc_width and tc_depth must be at least 1");
}
[[noreturn]] inline void vector_cores_must_be_positive() {
  throw input_error("num_vc and vc_width must be at least 1");
}
[[noreturn]] inline void global_buffer_must_be_positive() {
  throw input_error("glb (global buffer) must be positive");
}
[[noreturn]] inline void clock_must_be_positive() {
  throw input_error("clock must be positive");
}
[[noreturn]] inline void memory_capacity_must_be_positive() {
  throw input_error("hbm capacity must be positive");
}
[[noreturn]] inline void memory_bandwidth_must_be_positive() {
  throw input_error("hbm bandwidth must be positive");
}
[[noreturn]] inline void peak_matrix_rate_must_be_positive() {
  throw input_error("a datasheet device needs a positive peak matrix rate for its compute format");
}
[[noreturn]] inline void gemm_efficiency_must_lie_in_0_1() {
  throw input_error(
      "gemm max_fraction and memory_efficiency must lie in (0, 1], fp8_max_fraction in [0, 1] (0: as "
      "max_fraction) and fp8_quantize_fraction in [0, 1] (0: as memory_efficiency)");
}
[[noreturn]] inline void vector_rate_must_be_positive() {
  throw input_error("a datasheet device needs a positive vector rate");
}
[[noreturn]] inline void gemm_tiles_and_units_must_be_positive() {
  throw input_error("gemm tile_m, tile_n and compute_units must be at least 1, and k_half at least 0");
}
}  // namespace rules

/// Peak dense matrix rate of a datasheet device in a format (bf16 falls back to fp16 on devices without it).
constexpr flops_per_second matrix_peak(const datasheet_spec& s, precision p) {
  switch (p) {
    case precision::fp32:
      return s.matrix_fp32.value() > 0 ? s.matrix_fp32 : s.vector;
    case precision::tf32:
      return s.matrix_tf32.value() > 0 ? s.matrix_tf32 : s.matrix_fp32;
    case precision::bf16:
      return s.matrix_bf16.value() > 0 ? s.matrix_bf16 : s.matrix_fp16;
    case precision::fp16:
      return s.matrix_fp16;
    case precision::fp8:
      return s.matrix_fp8.value() > 0 ? s.matrix_fp8 : s.matrix_fp16;
  }
  return s.matrix_fp16;
}

/// The HBM bandwidth a device reaches: a datasheet device's memory_efficiency share of its peak (a
/// STREAM-like copy), the systolic template's peak.
constexpr bytes_per_second achievable_hbm_bandwidth(const device& d) {
  return d.kind == device_kind::datasheet ? d.hbm_bandwidth * d.sheet.memory_efficiency : d.hbm_bandwidth;
}

/// The bandwidth of an FP8 quantization pass (cast and transposed copy of a GEMM input): the datasheet's
/// gemm.fp8_quantize_fraction share of the peak where it is measured, else achievable_hbm_bandwidth.
constexpr bytes_per_second fp8_quantize_bandwidth(const device& d) {
  if (d.kind == device_kind::datasheet && d.sheet.gemm.fp8_quantize_fraction > 0.0)
    return d.hbm_bandwidth * d.sheet.gemm.fp8_quantize_fraction;
  return achievable_hbm_bandwidth(d);
}

/// Peak dense matrix rate of a device in its compute format: for the systolic template,
/// 2 FLOPs per MAC per cycle over num_tc * tc_width * tc_depth MACs.
constexpr flops_per_second peak_matrix_flops(const device& d) {
  if (d.kind == device_kind::systolic) {
    const auto& s = d.systolic;
    return flops_per_second{2.0 * static_cast<double>(s.num_tc) * static_cast<double>(s.tc_width) *
                            static_cast<double>(s.tc_depth) * s.clock.value()};
  }
  return matrix_peak(d.sheet, d.compute);
}

/// Peak vector rate: one operation per lane per cycle for the systolic template.
constexpr flops_per_second peak_vector_flops(const device& d) {
  if (d.kind == device_kind::systolic) {
    const auto& s = d.systolic;
    return flops_per_second{static_cast<double>(s.num_vc) * static_cast<double>(s.vc_width) *
                            s.clock.value()};
  }
  return d.sheet.vector;
}

/// Whether a device runs FP8 GEMMs at their own rate: a datasheet device with an FP8 matrix peak (Hopper,
/// Ada and later). PHAZE's systolic template computes in one format.
constexpr bool runs_fp8(const device& d) {
  return d.kind == device_kind::datasheet && d.sheet.matrix_fp8.value() > 0;
}

/// Checks a device; a broken rule stops compilation (constant evaluation) or throws input_error.
constexpr void validate(const device& d) {
  if (!(d.hbm.value() > 0)) rules::memory_capacity_must_be_positive();
  if (!(d.hbm_bandwidth.value() > 0)) rules::memory_bandwidth_must_be_positive();
  if (d.kind == device_kind::systolic) {
    const auto& s = d.systolic;
    if (s.num_tc < 1) rules::tensor_cores_must_be_positive();
    if (s.tc_width < 1 || s.tc_depth < 1) rules::systolic_array_dimensions_must_be_positive();
    if (s.num_vc < 1 || s.vc_width < 1) rules::vector_cores_must_be_positive();
    if (!(s.glb.value() > 0)) rules::global_buffer_must_be_positive();
    if (!(s.clock.value() > 0)) rules::clock_must_be_positive();
  } else {
    if (!(matrix_peak(d.sheet, d.compute).value() > 0)) rules::peak_matrix_rate_must_be_positive();
    if (!(d.sheet.vector.value() > 0)) rules::vector_rate_must_be_positive();
    const auto& g = d.sheet.gemm;
    if (g.tile_m < 1 || g.tile_n < 1 || g.compute_units < 1 || !(g.k_half >= 0)) {
      rules::gemm_tiles_and_units_must_be_positive();
    }
    if (!(g.max_fraction > 0 && g.max_fraction <= 1) ||
        !(g.fp8_max_fraction >= 0 && g.fp8_max_fraction <= 1) ||
        !(g.fp8_quantize_fraction >= 0 && g.fp8_quantize_fraction <= 1) ||
        !(d.sheet.memory_efficiency > 0 && d.sheet.memory_efficiency <= 1)) {
      rules::gemm_efficiency_must_lie_in_0_1();
    }
  }
}

}  // namespace phaze::hw
