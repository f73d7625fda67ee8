/// @file
/// The time of a fused attention kernel (FlashAttention, Dao et al. NeurIPS 2022; FlashAttention-2, Dao
/// 2023; cuDNN's fused scaled-dot-product attention, which Megatron-Core runs through Transformer Engine):
/// what it executes, at the rate a device reaches on it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "phaze/core/quantity.hpp"
#include "phaze/cost/gemm.hpp"
#include "phaze/cost/vector.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/op.hpp"

namespace phaze::cost {

/// The fused attention the devices without their own measurement scale from: the H100 SXM's, measured
/// (hw/presets.hpp, docs/gpu-measurements.md), beside its large-GEMM fraction and its SM count.
inline constexpr hw::attention_efficiency h100_measured_attention = hw::detail::h100_attention;
inline constexpr double h100_measured_gemm_fraction = hw::detail::h100_max_fraction;
inline constexpr int h100_compute_units = 132;

/// Whether fused attention kernels run on device `d`: FlashAttention-2 and cuDNN's fused attention need
/// NVIDIA's Ampere tensor cores or later (compute capability 8.0: the first with bf16, which the datasheet
/// presets record), so V100 and T4 train with unfused attention; PHAZE's systolic designs and other
/// bf16-capable accelerators are taken to fuse it (their cost is section 7.2a of docs/cost-model.md).
constexpr bool fused_attention_runs_on(const hw::device& d) {
  return d.kind == hw::device_kind::systolic || d.sheet.matrix_bf16.value() > 0.0;
}

/// Query rows of one work unit: FlashAttention-2 and cuDNN's Hopper kernels give each thread block 128
/// query rows of one head (Dao 2023, section 3.2).
inline constexpr std::int64_t attention_block_rows = 128;

/// The attention efficiency of a datasheet device: its own when measured; otherwise the H100's scaled by the
/// ratio of its large-GEMM fraction to the H100's (fused attention runs on the same tensor cores as GEMMs,
/// bounded by them), with work_half scaled by its compute units (half-occupancy comes at the same share of
/// the SMs).
constexpr hw::attention_efficiency attention_efficiency_of(const hw::datasheet_spec& s) {
  if (s.attention.measured()) return s.attention;
  const double scale = s.gemm.max_fraction / h100_measured_gemm_fraction;
  const auto& r = h100_measured_attention;
  const double units = static_cast<double>(std::max(s.gemm.compute_units, 1));
  return {std::min(1.0, r.forward * scale),
          std::min(1.0, r.backward * scale),
          std::min(1.0, r.causal_forward * scale),
          std::min(1.0, r.causal_backward * scale),
          r.work_half * units / static_cast<double>(h100_compute_units),
          r.key_tiles_half};
}

/// How fast a fused attention kernel implementation runs against the device's own kernel (the one its
/// attention_efficiency describes: cuDNN's on Hopper, measured; FlashAttention-2 on Ampere), as factors on
/// the forward and the backward fractions. From the kernels' published benchmarks (docs/cost-model.md,
/// section 7.2b):
/// - Hopper. FlashAttention-3 reaches up to 740 TFLOP/s forward in bf16 at head dimension 128, 75% of the
///   H100's peak (Shah et al., "FlashAttention-3", 2024, section 4.1), against the 0.8175 measured for cuDNN
///   here: 0.917; its backward is taken as cuDNN's. FlashAttention-2 reaches 35% of the H100's peak forward
///   (the same paper, abstract and section 1) and FlashAttention-3's backward is 1.5-1.75 times
///   FlashAttention-2's (section 4.1): 0.35 / 0.8175 forward, 1 / 1.625 backward.
/// - Ampere. cuDNN's fused attention (flash attention since cuDNN 8.9) is taken as fast as FlashAttention-2;
///   FlashAttention-3 does not run (train::validate refuses it).
/// - Both. The Triton FlashAttention of flash-attn 1.0.x runs 1.3-2.5 times slower than FlashAttention-2
///   (Dao 2023, section 4.1, on the A100); 1 / 1.8 (the geometric middle of the range) of FlashAttention-2 in
///   both passes, on Hopper too (neither uses Hopper's own instructions).
/// Devices of unspecified architecture run every kernel at their own efficiency.
struct kernel_speed {
  double forward = 1.0;
  double backward = 1.0;
};
inline constexpr double hopper_flash3_forward = 0.75 / 0.8175;
inline constexpr double hopper_flash2_forward = 0.35 / 0.8175;
inline constexpr double hopper_flash2_backward = 1.0 / 1.625;
inline constexpr double triton_against_flash2 = 1.0 / 1.8;

/// Whether kernel `k` runs on a device of architecture `a` (FlashAttention-3 needs Hopper).
constexpr bool attention_kernel_runs_on(model::attention_kernel k, hw::architecture a) {
  return k != model::attention_kernel::flash3 || a == hw::architecture::hopper ||
         a == hw::architecture::unspecified;
}

constexpr kernel_speed attention_kernel_speed(model::attention_kernel k, hw::architecture a) {
  using model::attention_kernel;
  if (a == hw::architecture::hopper) {
    switch (k) {
      case attention_kernel::standard:
      case attention_kernel::cudnn:
        return {};
      case attention_kernel::flash3:
        return {hopper_flash3_forward, 1.0};
      case attention_kernel::flash2:
        return {hopper_flash2_forward, hopper_flash2_backward};
      case attention_kernel::triton:
        return {hopper_flash2_forward * triton_against_flash2, hopper_flash2_backward * triton_against_flash2};
    }
  }
  if (a == hw::architecture::ampere && k == attention_kernel::triton)
    return {triton_against_flash2, triton_against_flash2};
  return {};
}

/// The share of the s x s scores a fused kernel computes: all of them; half under a causal mask (the tiles
/// above the diagonal skipped; under context parallelism, whose load balancing gives every rank the same
/// share of the causal work, half of its queries x all keys); under a causal sliding window of w < s keys
/// (s the keys' sequence), (w s - w^2 / 2) / s^2 (query q
/// sees min(q + 1, w) keys; FlashAttention-2's and cuDNN's window_size skip the tiles outside it).
constexpr double fused_attention_score_share(const model::op& o) {
  if (!o.causal) return 1.0;
  if (o.window <= 0 || o.window >= o.gemm.n) return 0.5;
  const auto s = static_cast<double>(o.gemm.n);
  const auto w = static_cast<double>(o.window);
  return (w * s - 0.5 * w * w) / (s * s);
}

/// FLOPs a fused attention kernel executes: 4 b s^2 d forward (QK^T and PV), 2.5 times that backward (QK^T
/// recomputed, dV, dP, dQ, dK: Dao et al. 2022, section 3.1 and appendix B), times the share of the scores it
/// computes (fused_attention_score_share).
constexpr double fused_attention_executed_flops(const model::op& o) {
  const double forward = 4.0 * static_cast<double>(o.gemm.batch) * static_cast<double>(o.gemm.m) *
                         static_cast<double>(o.gemm.k) * static_cast<double>(o.gemm.n);
  const double pass = o.phase == model::op_phase::forward ? 1.0 : 2.5;
  return forward * pass * fused_attention_score_share(o);
}

/// Key tiles one work unit of a fused attention kernel walks: ceil(keys / 128) times the share of the scores
/// it computes (half under a causal mask).
constexpr double fused_attention_key_tiles(const model::op& o) {
  return static_cast<double>((o.gemm.n + attention_block_rows - 1) / attention_block_rows) *
         fused_attention_score_share(o);
}

/// Fused attention on a datasheet device: executed FLOPs at the matrix peak times the efficiency for its pass
/// and mask (times the kernel implementation's speed, attention_kernel_speed), w / (w + work_half) of it for w work units (batch * ceil(s / 128), halved when causal), and
/// L / (L + key_tiles_half) of that for L key tiles per unit (fused_attention_key_tiles), times the device's
/// calibrated attention factor but never faster than the peak; never less than its
/// inputs read and output written once at the achievable HBM bandwidth.
inline constexpr auto datasheet_attention_time =
    [](const model::op& o, const hw::device& d) constexpr -> seconds {
  if (!detail::valid(o.gemm)) return seconds{0.0};
  const hw::attention_efficiency e = attention_efficiency_of(d.sheet);
  const bool forward = o.phase == model::op_phase::forward;
  const kernel_speed speed = attention_kernel_speed(o.kernel, d.sheet.arch);
  const double fraction =
      (o.causal ? (forward ? e.causal_forward : e.causal_backward) : (forward ? e.forward : e.backward)) *
      (forward ? speed.forward : speed.backward);
  const double units = static_cast<double>(o.gemm.batch) *
                       static_cast<double>((o.gemm.m + attention_block_rows - 1) / attention_block_rows) *
                       fused_attention_score_share(o);
  const double occupancy = units / (units + e.work_half);
  const double tiles = fused_attention_key_tiles(o);
  const double pipeline = tiles / (tiles + e.key_tiles_half);
  const flops executed{fused_attention_executed_flops(o)};
  const flops_per_second peak = hw::matrix_peak(d.sheet, d.compute);
  const seconds compute = std::max(executed / (peak * (fraction * occupancy * pipeline)) *
                                       d.sheet.calibrated.attention,
                                   executed / peak);
  const seconds memory =
      (model::bytes_read(o) + model::bytes_written(o)) / (d.hbm_bandwidth * d.sheet.memory_efficiency);
  return std::max(compute, memory);
};

/// Fused attention on PHAZE's systolic template, as the accelerator would run it: the kernel's GEMMs on the
/// tensor cores (forward QK^T and PV; backward the scores recomputed, dV, dP, dQ, dK), one after another, and
/// the softmax on the vector cores over every score (forward; backward its recomputation and gradient), the
/// scores held on chip (no HBM traffic for them). A causal mask halves the GEMM work and the softmax.
/// Returns {one core of each kind, all cores}.
struct systolic_attention_cost {
  seconds one_core{0.0};
  seconds all_cores{0.0};
};
inline constexpr auto systolic_attention =
    [](const model::op& o, const hw::device& d) constexpr -> systolic_attention_cost {
  systolic_attention_cost c;
  if (!detail::valid(o.gemm)) return c;
  const std::int64_t b = o.gemm.batch;
  const std::int64_t s = o.gemm.m;  // queries (all the keys' sequence but under context parallelism)
  const std::int64_t keys = o.gemm.n;
  const std::int64_t hd = o.gemm.k;
  const model::gemm_dims scores{b, s, hd, keys};
  const model::gemm_dims context{b, s, keys, hd};
  const double mask = fused_attention_score_share(o);
  auto add = [&](model::gemm_dims g) {
    const gemm_cost t = systolic_gemm(g, d);
    c.one_core += t.one_core.time * mask;
    c.all_cores += t.all_cores.time * mask;
  };
  const bool forward = o.phase == model::op_phase::forward;
  add(scores);
  add(context);
  if (!forward) {  // the forward's two, then dV (P^T dO), dP (dO V^T) and dQ / dK (dS K, dS^T Q)
    add(context);
    add(scores);
    add(context);
  }
  // Softmax over the scores on the vector cores: forward 6 + T cycles per score; backward the recomputed
  // exponentials (1 + T) and the softmax gradient (5).
  const double cycles_per_score = forward ? static_cast<double>(6 + transcendental_cycles)
                                          : static_cast<double>(6 + transcendental_cycles + 5);
  const double scores_total =
      static_cast<double>(b) * static_cast<double>(s) * static_cast<double>(keys) * mask;
  const auto& v = d.systolic;
  const double lane = static_cast<double>(std::max(v.vc_width, 1));
  const double clock = v.clock.value();
  c.one_core += seconds{scores_total * cycles_per_score / lane / clock};
  c.all_cores +=
      seconds{scores_total * cycles_per_score / (lane * static_cast<double>(std::max(v.num_vc, 1))) / clock};
  return c;
};

}  // namespace phaze::cost
