/// @file
/// The cost of any op on any device (PHAZE's two costs: on one core, and across all cores of its kind), and
/// the per-layer cost table of a layer's forward and backward ops. Collectives run over the route of the
/// layer's tensor-parallel group (cluster::route).
#pragma once

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

/// How many times longer mamba_ssm's Triton kernels take than phaze's GEMM and fused memory-bound models give
/// the ops they stand for (op::mamba), in the forward and the backward pass. Measured on one H200
/// (tools/gpu/measure_mamba.py, tests/data/gpu/h200-mamba.csv; docs/gpu-measurements.md) for one rank of
/// Nemotron 3 Nano (64 heads) and of Nemotron-H 8B (128 heads) at 8192 tokens, against phaze's ops of the
/// same blocks without the factor: the chunked scan (mamba_chunk_scan_combined) 2.58 and 2.12 times in the
/// forward, 6.93 and 2.58 in the backward; the gated norm (rmsnorm_fn with z) 1.97 and 1.33, 10.3 and 7.15.
/// The means of the two; other cards take the same factors.
constexpr double mamba_kernel_factor(model::mamba_kernel k, bool forward) {
  switch (k) {
    case model::mamba_kernel::scan:
      return forward ? (2.576 + 2.119) / 2.0 : (6.932 + 2.585) / 2.0;
    case model::mamba_kernel::gated_norm:
      return forward ? (1.968 + 1.331) / 2.0 : (10.29 + 7.145) / 2.0;
    case model::mamba_kernel::none:
      break;
  }
  return 1.0;
}

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
        const seconds t = (o.fp8 && hw::runs_fp8(d) ? datasheet_fp8_gemm(o, d) : datasheet_gemm(o.gemm, d)) *
                          mamba_kernel_factor(o.mamba, o.phase == model::op_phase::forward);
        return {t, t};
      }
      const gemm_cost g = systolic_gemm(o.gemm, d);
      return {g.one_core.time, g.all_cores.time};
    }
    case model::unit::vector: {
      if (!systolic && o.mamba != model::mamba_kernel::none) {
        // mamba_ssm's own kernels whatever runs the other vector ops: the fused model times the factor.
        model::op fused = o;
        fused.eager = false;
        const seconds t = datasheet_vector_time(fused, d) *
                          mamba_kernel_factor(o.mamba, o.phase == model::op_phase::forward);
        return {t, t};
      }
      if (!systolic) {
        const seconds t = datasheet_vector_time(o, d);
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
