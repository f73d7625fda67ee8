/// @file
/// The cost of any op on any device (PHAZE's two costs: on one core, and across all cores of its kind), and
/// the per-layer cost table of a layer's forward and backward ops. Collectives run over the route of the
/// layer's tensor-parallel group (cluster::route).
#pragma once

#include <algorithm>

#include "phaze/cluster/links.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/core/static_vector.hpp"
#include "phaze/cost/attention.hpp"
#include "phaze/cost/collective.hpp"
#include "phaze/cost/gemm.hpp"
#include "phaze/cost/vector.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/op.hpp"

namespace phaze::cost {

/// What an op costs. On a systolic device: alone on one tensor (or vector) core, and divided across all
/// of them (intra-op parallelism; never slower than one core). On a datasheet device both are the same:
/// the device runs one kernel at a time over all its units.
struct op_cost {
  seconds one_core{0.0};
  seconds all_cores{0.0};
  friend constexpr bool operator==(const op_cost&, const op_cost&) = default;
};

/// An FP8 linear layer's GEMM on a datasheet device (Transformer Engine under FP8 training): the GEMM at the
/// FP8 rate (datasheet_gemm_in), plus the quantization of what it reads that arrives in bf16, one
/// memory-bound pass that reads it (elem_bytes) and writes it in FP8 twice, as is and transposed (Hopper's
/// FP8 GEMMs take only the TN layout, so the backward GEMMs need the transposed copies; cuBLASLt's FP8
/// requirements): the forward input unless a norm wrote it in FP8 already (op::fp8_cast), and the output
/// gradient before the input-gradient GEMM (the weight-gradient GEMM reuses both), at the device's
/// quantization bandwidth (hw::fp8_quantize_bandwidth: measured on the Hopper presets). The weights are cast
/// once per iteration and cached over the microbatches (not charged here).
inline constexpr auto datasheet_fp8_gemm = [](const model::op& o, const hw::device& d) constexpr -> seconds {
  const seconds gemm = datasheet_gemm_in(o.gemm, d, hw::precision::fp8);
  const bool casts =
      o.phase == model::op_phase::backward_data || (o.phase == model::op_phase::forward && o.fp8_cast);
  if (!casts) return gemm;
  const bytes pass{static_cast<double>(o.in_elements) * (static_cast<double>(o.elem_bytes) + 2.0)};
  return gemm +
         std::max(pass / hw::fp8_quantize_bandwidth(d) * d.sheet.calibrated.memory, pass / d.hbm_bandwidth);
};

/// mamba_ssm's Triton kernels of a Mamba-2 mixer (op::mamba), seconds per token of one rank, forward and
/// backward, on an H200: the medians of six measurements each (tools/gpu/measure_mamba.py,
/// tests/data/gpu/h200-mamba*.csv; docs/gpu-measurements.md), one rank of Nemotron 3 Nano and of Nemotron-H
/// 8B at tp 1 in two runs and at tp 2 in one, 8192 tokens: the chunked scan (mamba_chunk_scan_combined) 1.105
/// ms forward and 3.714 ms backward, the gated norm (rmsnorm_fn with z) 0.176 and 0.669 ms. Neither fell with
/// the heads (32 to 128 per rank): the kernels are bound by their launches and passes over the chunks, not by
/// their FLOPs or bytes, so the time is per token.
constexpr double mamba_kernel_seconds_per_token(model::mamba_kernel k, bool forward) {
  constexpr double tokens = 8192.0;
  switch (k) {
    case model::mamba_kernel::scan:
      return (forward ? 1.105e-3 : 3.714e-3) / tokens;
    case model::mamba_kernel::gated_norm:
      return (forward ? 0.176e-3 : 0.6685e-3) / tokens;
    case model::mamba_kernel::none:
      break;
  }
  return 0.0;
}

/// The bf16 dense peak of the card mamba_kernel_seconds_per_token was measured on (NVIDIA H200 datasheet:
/// 989 TFLOP/s): other cards take the measured time scaled by the ratio of their peak to it.
inline constexpr double mamba_kernels_measured_peak = 989e12;

/// The time of op `o`, part of one of mamba_ssm's kernels (op::mamba), on `d`: its share of the kernel's
/// measured time per token over its tokens, a batched GEMM's backward share split between its two ops
/// (cost_of takes at least the GEMM or memory-bound model's time).
inline constexpr auto mamba_kernel_time = [](const model::op& o, const hw::device& d) constexpr -> seconds {
  const bool forward = o.phase == model::op_phase::forward;
  const double halves = !forward && o.kind == model::op_kind::batched_matmul ? 0.5 : 1.0;
  const double scale = mamba_kernels_measured_peak / hw::matrix_peak(d.sheet, hw::precision::bf16).value();
  return seconds{static_cast<double>(o.kernel_tokens) * mamba_kernel_seconds_per_token(o.mamba, forward) *
                 o.kernel_share * halves * scale};
};

/// The cost of an op on a device, for every op kind and pass: (batched) matmuls through the GEMM mapper
/// (systolic) or the efficiency model (datasheet), backward GEMMs the same way with the transposed shapes
/// the op carries; vector ops by cycles per element; collectives over the op's group on route `tp` (the
/// route of the layer's tensor-parallel group); tp_copy costs nothing.
inline constexpr auto cost_of =
    [](const model::op& o, const hw::device& d, const cluster::route& tp) constexpr -> op_cost {
  const bool systolic = d.kind == hw::device_kind::systolic;
  switch (model::unit_of(o)) {
    case model::unit::tensor: {
      if (o.kind == model::op_kind::fused_attention) {
        if (!systolic) {
          const seconds t = datasheet_attention_time(o, d);
          return {t, t};
        }
        const systolic_attention_cost a = systolic_attention(o, d);
        return {a.one_core, a.all_cores};
      }
      if (!systolic) {
        const seconds gemm = o.fp8 && hw::runs_fp8(d) ? datasheet_fp8_gemm(o, d) : datasheet_gemm(o.gemm, d);
        // mamba_ssm's kernels: their measured time per token, never below the GEMM model's. A weight
        // gradient added into its main gradient by a kernel of its own takes that kernel's time too.
        const seconds t =
            (o.mamba != model::mamba_kernel::none ? std::max(gemm, mamba_kernel_time(o, d)) : gemm) +
            gradient_accumulation_time(o, d);
        return {t, t};
      }
      const gemm_cost g = systolic_gemm(o.gemm, d);
      return {g.one_core.time, g.all_cores.time};
    }
    case model::unit::vector: {
      if (!systolic && o.mamba != model::mamba_kernel::none) {
        // mamba_ssm's own kernels whatever runs the others, never below the fused model's time.
        model::op fused = o;
        fused.eager = false;
        const seconds t = std::max(datasheet_vector_time(fused, d), mamba_kernel_time(o, d));
        return {t, t};
      }
      if (!systolic) {
        const seconds t = datasheet_vector_time(o, d) + gradient_accumulation_time(o, d);
        return {t, t};
      }
      return {systolic_vector_time(o, d, 1), systolic_vector_time(o, d, d.systolic.num_vc)};
    }
    case model::unit::network: {
      const seconds t = collective_time(o.kind, model::collective_bytes(o), o.group, tp);
      return {t, t};
    }
    case model::unit::none:
      return {};
  }
  return {};
};

/// The costs of a layer's ops: forward ops in layer order, backward ops in the order model::backward lists
/// them, and the totals of the all-cores costs (a serial bound: the ops one after another, each on every
/// core; a schedule that overlaps ops on different cores can only be faster).
struct layer_cost_table {
  static_vector<op_cost, model::max_layer_ops> forward;
  static_vector<op_cost, model::max_backward_ops> backward;
  seconds forward_total{0.0};
  seconds backward_total{0.0};
  [[nodiscard]] constexpr seconds total() const { return forward_total + backward_total; }
  friend constexpr bool operator==(const layer_cost_table&, const layer_cost_table&) = default;
};

/// A pass of `ops` ops whose kernels take `gpu` on the device, launched by a host that spends `host_per_op`
/// on each: the GPU cannot run ahead of the launches, so the pass takes the longer of the two.
constexpr seconds host_bound(seconds gpu, std::size_t ops, double host_per_op) {
  return std::max(gpu, seconds{static_cast<double>(ops) * host_per_op});
}

/// The cost table of a layer on a device whose tensor-parallel group takes route `tp`.
inline constexpr auto layer_costs =
    [](const model::layer& l, const hw::device& d, const cluster::route& tp) constexpr -> layer_cost_table {
  layer_cost_table t;
  for (const model::op& o : l.ops) {
    t.forward.push_back(cost_of(o, d, tp));
    t.forward_total += t.forward.back().all_cores;
  }
  for (const model::op& o : model::backward(l)) {
    t.backward.push_back(cost_of(o, d, tp));
    t.backward_total += t.backward.back().all_cores;
  }
  return t;
};

}  // namespace phaze::cost
