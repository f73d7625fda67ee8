/// @file
/// Vector-op latency: lane-cycles per element for each op kind and pass, on PHAZE's vector cores or a
/// datasheet device's vector rate, never faster than the bytes the op moves over HBM.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/op.hpp"

namespace phaze::cost {

/// Lane-cycles of a transcendental function (exp, tanh, reciprocal, rsqrt) relative to an add or multiply.
/// NVIDIA's special-function units issue 16 results per clock per SM against 64 fp32 adds/multiplies/FMAs on
/// compute capability 8.0 (CUDA C++ Programming Guide, "Arithmetic Instructions", throughput table): 4.
inline constexpr int transcendental_cycles = 4;

namespace detail {

/// Lane-cycles per element, counted from each op's formula with one cycle per add, multiply, compare,
/// select or fused multiply-add and `transcendental_cycles` (T) per exp/tanh/reciprocal. Row reductions
/// (max, sum) cost one cycle per element (a running accumulator per lane); per-row scalars (1/sum, rsqrt of
/// the variance) are amortized over the row and not counted.
///   forward                                                   backward (per element of the gradient made)
///   softmax 6 + T: scale, mask, max, subtract, exp, sum,     softmax 5: dy*y, row sum, subtract, multiply,
///                  normalize                                            scale
///   layernorm 8: mean, centre, square-sum, normalize,        layernorm 12: recompute x-hat (2), dy*gamma,
///                scale, shift (+2 for the two reductions'             two row sums (2), combine (3), dgamma
///                second pass)                                           and dbeta sums (3), scale (1)
///   rmsnorm 4: square-sum, normalize, weight, store          rmsnorm 9: recompute (2), dy*w, row sum,
///                                                                       combine (3), dw sum (2)
///   gelu (tanh form) 7 + T: x^3 (2), FMA 0.044715, scale     gelu 13 + T: recompute the inner argument
///        sqrt(2/pi), tanh, 1 +, 0.5 x *                                and tanh (5 + T), derivative (7), *dy
///   relu 1: max(0, x)                                        relu 2: compare, select
///   silu 2 + 2T: exp(-x), 1 +, reciprocal, x *               silu 5 + 2T: recompute sigmoid (2 + 2T),
///                                                                       s (1 + x (1 - s)) (3)
///   swiglu 3 + 2T: silu(gate) * up                           swiglu 3 + T: per gradient element made
///                                                                       (gate and up both): half of
///                                                                       recompute (2 + 2T) + 3 products
///   geglu 8 + T: gelu(gate) * up                            geglu 11 + T: per gradient element made
///                                                                       (gate and up): the mean of the
///                                                                       gate's (gelu' recomputed and
///                                                                       applied, 13 + T, * up) and the
///                                                                       up's (gelu recomputed, 7 + T, * dy)
///   dropout 9: random bits 6 (Philox4x32-10, Salmon et al.   dropout 2: mask select, scale
///              SC'11: 10 rounds of ~10 integer ops make
///              16 bytes of randomness, one byte per
///              element), compare, select, scale
///   residual / bias add 1                                    residual add 1: pass the gradient on
///   rotary 3: x cos + rotate(x) sin (tables precomputed)     rotary 3: the transposed rotation
///   copy 1: move the element (resize, pixel shuffle,         copy 1: move (or add, for a resize) the
///           permutation)                                            gradient element
///   cross-entropy 3 + T per logit: max, subtract, exp, sum   cross-entropy 4 + T per logit: recompute the
///                                                                       exp (1 + T), normalize, subtract the
///                                                                       one-hot target, * dloss
///   embedding 1: the gathered row passes through the lanes   embedding 1: scatter-add into the table
/// A lane does at most one FLOP per cycle (hw::peak_vector_flops counts one per lane per cycle), so the
/// count is raised to the op's FLOPs per element (model::flops_of) where that is larger: rmsnorm forward and
/// the backward ops of softmax, layernorm, rmsnorm, swiglu, dropout, residual add, rotary and cross-entropy,
/// which op.hpp counts as twice their forward FLOPs. The cost never claims a rate above peak.
constexpr int counted_cycles_per_element(model::op_kind k, model::op_phase phase) {
  using model::op_kind;
  constexpr int t = transcendental_cycles;
  const bool fwd = phase == model::op_phase::forward;
  switch (k) {
    case op_kind::softmax:
      return fwd ? 6 + t : 5;
    case op_kind::layernorm:
      return fwd ? 8 : 12;
    case op_kind::rmsnorm:
      return fwd ? 4 : 9;
    case op_kind::gelu:
      return fwd ? 7 + t : 13 + t;
    case op_kind::relu:
      return fwd ? 1 : 2;
    case op_kind::silu:
      return fwd ? 2 + 2 * t : 5 + 2 * t;
    case op_kind::swiglu:
      return fwd ? 3 + 2 * t : 3 + t;
    case op_kind::geglu:
      return fwd ? 8 + t : 11 + t;
    case op_kind::dropout:
      return fwd ? 9 : 2;
    case op_kind::residual_add:
      return 1;
    case op_kind::rotary:
      return 3;
    case op_kind::cross_entropy:
      return fwd ? 3 + t : 4 + t;
    case op_kind::embedding:
    case op_kind::copy:
      return 1;
    default:
      return 0;  // not a vector op
  }
}

}  // namespace detail

/// Lane-cycles per element of a vector op: the counted cycles, raised to the op's FLOPs per element.
inline constexpr auto cycles_per_element = [](model::op_kind k, model::op_phase phase) constexpr -> int {
  const double flop_floor =
      model::detail::vector_flops_per_element(k) * (phase == model::op_phase::forward ? 1.0 : 2.0);
  return std::max(detail::counted_cycles_per_element(k, phase), static_cast<int>(flop_floor + 0.5));
};

/// Elements a vector op processes: its output, except the cross-entropy forward, which works over every
/// logit (its input) and writes one loss per token.
inline constexpr auto vector_elements = [](const model::op& o) constexpr -> std::int64_t {
  if (o.kind == model::op_kind::cross_entropy && o.phase == model::op_phase::forward) {
    return std::max(o.in_elements, o.out_elements);
  }
  return o.out_elements;
};

/// Bytes a vector op moves over HBM: its inputs and parameters read, its output (and dropout mask) written
/// (model::bytes_read + model::bytes_written).
inline constexpr auto vector_bytes = [](const model::op& o) constexpr -> bytes {
  return model::bytes_read(o) + model::bytes_written(o);
};

/// Time of a vector op on `cores` vector cores of a systolic device: each of the cores * vc_width lanes
/// takes ceil(elements / lanes) elements at cycles_per_element each, at the device clock; never less than
/// vector_bytes / HBM bandwidth (the op streams its operands; nothing stays in the GLB between ops).
inline constexpr auto systolic_vector_time =
    [](const model::op& o, const hw::device& d, int cores) constexpr -> seconds {
  const auto& s = d.systolic;
  const std::int64_t lanes = static_cast<std::int64_t>(std::max(cores, 1)) * std::max(s.vc_width, 1);
  const std::int64_t per_lane = (vector_elements(o) + lanes - 1) / lanes;
  const double cycles = static_cast<double>(per_lane) * cycles_per_element(o.kind, o.phase);
  const seconds compute{cycles / s.clock.value()};
  return std::max(compute, vector_bytes(o) / d.hbm_bandwidth);
};

/// Bytes per logit that Megatron-LM's vocabulary-parallel cross-entropy moves on a GPU, in fp32 whatever the
/// training format (megatron/core/tensor_parallel/cross_entropy.py, core_r0.8.0): forward, the cast to fp32
/// (read 2, write 4), the row max (read 4), the in-place subtraction (read 4, write 4), the exponential
/// (read 4, write 4), the row sum (read 4) and the in-place division into the softmax it keeps (read 4,
/// write 4): 38; backward, the in-place product with the loss gradient (read 4, write 4) and the cast back
/// to the logits' format (read 4, write 2): 14. Six and two PyTorch kernels, none fused.
inline constexpr double gpu_cross_entropy_forward_bytes = 38.0;
inline constexpr double gpu_cross_entropy_backward_bytes = 14.0;

/// A fused cross-entropy (model::op::fused_loss): flash-attn 1.0's CrossEntropyLoss over apex's xentropy
/// CUDA kernel (apex/contrib/csrc/xentropy/xentropy_kernel.cu), LLM Foundry's default loss_fn
/// `fused_crossentropy`. Its forward kernel reads each row of logits in their own format and writes one loss
/// and one fp32 log-sum-exp per token (the row's second pass, a few hundred kB, is counted as served by L2);
/// its backward kernel reads the logits and the log-sum-exp and writes the logits' gradient in their format:
/// 1 and 2 elements moved per logit.
inline constexpr double fused_cross_entropy_forward_elements = 1.0;
inline constexpr double fused_cross_entropy_backward_elements = 2.0;

/// Bytes a vector op moves on a datasheet device (a GPU): vector_bytes, except the cross-entropy, which
/// moves gpu_cross_entropy_forward_bytes / _backward_bytes per logit, or fused_cross_entropy_forward_elements
/// / _backward_elements elements of the logits' format when fused.
inline constexpr auto datasheet_vector_bytes = [](const model::op& o) constexpr -> bytes {
  if (o.kind == model::op_kind::cross_entropy) {
    const bool forward = o.phase == model::op_phase::forward;
    const auto logits = static_cast<double>(forward ? o.in_elements : o.out_elements);
    if (o.fused_loss) {
      return bytes{logits * static_cast<double>(o.elem_bytes) *
                   (forward ? fused_cross_entropy_forward_elements : fused_cross_entropy_backward_elements)};
    }
    return bytes{logits * (forward ? gpu_cross_entropy_forward_bytes : gpu_cross_entropy_backward_bytes)};
  }
  return vector_bytes(o);
};

/// How eager PyTorch runs a memory-bound op: the share of the HBM peak its kernels reach on the op's bytes
/// (datasheet_vector_bytes: inputs read once, output and dropout mask written once), forward and backward,
/// and the fixed time each op takes whatever its size (launch, tail wave, and the extra kernels of an op
/// PyTorch runs as several). Measured on one H100 SXM (3.35 TB/s) and one H200 (4.8 TB/s), PyTorch 2.11; the
/// two cards' values averaged (docs/gpu-measurements.md). H100 / H200:
/// - tools/gpu/measure_membound.py (tests/data/gpu/*-membound-sizes.csv): each kind at 1M to 256M bf16
///   elements in CUDA graphs of back-to-back calls, fitted as seconds = bytes / rate + fixed by
///   tools/gpu/fit_membound.py: residual add 0.918 / 0.893 of the peak, 1.32 / 1.75 us; GELU 0.901 / 0.748,
///   1.52 / 1.68 us; LayerNorm 0.697 / 0.583, 6.17 / 6.61 us; RMSNorm 0.715 / 0.756, 3.54 / 4.78 us; SwiGLU
///   (SiLU, then a product) 0.318 / 0.235, 3.42 / 3.84 us; rotary (slices, products, a concatenation)
///   0.136 / 0.107, 9.61 / 11.35 us.
/// - tools/gpu/measure.py (tests/data/gpu/*-membound.csv: one call after an L2 flush, 4 x 2048 x 12288
///   elements): dropout 0.735 / 0.620 on its 5 bytes per element (input, output, mask), softmax 0.563 /
///   0.408; the backward kernels of LayerNorm (forward and backward less the forward) and GELU 0.168 / 0.157
///   and 0.595 / 0.553 on the 4 bytes per element phaze counts for a backward op (the gradient read, the
///   result written: model::bytes_read, bytes_written), the measurement's 0.252 / 0.236 and 0.892 / 0.829 on
///   its 6 (the saved input read too) times 4 / 6.
/// Kinds not measured run at the device's copy rate (memory_efficiency) with the add's fixed time, one
/// elementwise kernel; SiLU alone takes GELU's, ReLU and the dropout's backward (a masked scale) the add's,
/// GeGLU SwiGLU's, RMSNorm's backward LayerNorm's; other backward kernels take their forward's. The
/// cross-entropy and the embedding keep their own byte counts (datasheet_vector_bytes), which already follow
/// the kernels Megatron-LM's and flash-attn's losses run.
struct eager_kernel {
  double share = 0.0;           ///< of the HBM peak; 0: the device's memory_efficiency
  double backward_share = 0.0;  ///< the backward op's; 0: `share`
  double fixed_s = 0.0;         ///< seconds per op
};
inline constexpr eager_kernel eager_add{(0.918 + 0.893) / 2.0, 0.0, (1.32e-6 + 1.75e-6) / 2.0};
inline constexpr eager_kernel eager_gelu{(0.901 + 0.748) / 2.0, (0.892 + 0.829) / 2.0 * 4.0 / 6.0,
                                         (1.52e-6 + 1.68e-6) / 2.0};
inline constexpr double eager_norm_backward = (0.252 + 0.236) / 2.0 * 4.0 / 6.0;
inline constexpr eager_kernel eager_layernorm{(0.697 + 0.583) / 2.0, eager_norm_backward,
                                              (6.17e-6 + 6.61e-6) / 2.0};
inline constexpr eager_kernel eager_rmsnorm{(0.715 + 0.756) / 2.0, eager_norm_backward,
                                            (3.54e-6 + 4.78e-6) / 2.0};
inline constexpr eager_kernel eager_swiglu{(0.318 + 0.235) / 2.0, 0.0, (3.42e-6 + 3.84e-6) / 2.0};
inline constexpr eager_kernel eager_rotary{(0.136 + 0.107) / 2.0, 0.0, (9.61e-6 + 11.35e-6) / 2.0};
inline constexpr eager_kernel eager_dropout{(0.735 + 0.620) / 2.0, eager_add.share, eager_add.fixed_s};
inline constexpr eager_kernel eager_softmax{(0.563 + 0.408) / 2.0, 0.0, eager_add.fixed_s};

/// One kernel PyTorch runs over the attention scores of unfused attention: the bytes it moves per score
/// element and the share of the HBM peak it reaches on them.
struct score_pass {
  double bytes = 0.0;
  double share = 1.0;
};

namespace detail {
/// The share of the H200's 4.8 TB/s peak a kernel reached that moved `bytes_per_element` over the
/// 32 x 4096 x 4096 scores (Llama 2 7B's heads at sequence 4096) in `seconds`.
constexpr score_pass h200_score_pass(double bytes_per_element, double seconds) {
  return {bytes_per_element, bytes_per_element * 32.0 * 4096.0 * 4096.0 / seconds / 4.8e12};
}
}  // namespace detail

/// The softmax of unfused attention as eager PyTorch runs it in fp32 (model::op::eager): Megatron-Core's
/// FusedScaleMaskSoftmax without its CUDA kernels (megatron/core/fusions/fused_softmax.py,
/// forward_torch_softmax, at commit d98e8a6; attention_softmax_in_fp32 is its default): the bf16 scores cast
/// to fp32 (read 2, write 4), the causal mask filled in place (read 4, write 4), the softmax (read 4, write
/// 4), the probabilities cast back (read 4, write 2). Its backward: the gradient cast to fp32 (6), the
/// softmax's backward (the gradient and the kept output read, the result written: 12), the mask filled into
/// the gradient (8; out of place, so a copy of the fp32 gradient comes first: 8 more), the cast back (6),
/// and a product of two fp32 score-sized tensors (12) that the profile shows and the forward code does not
/// call, so it belongs to the backward; which line makes it was not found. Each kernel's share of the peak
/// was measured on one H200 (PyTorch 2.11; tools/gpu/megatron_step.py
/// --cases attention-ops, tests/data/gpu/h200-megatron-attention-ops.csv: one forward and backward of the
/// local DotProductAttention alone, the seconds below are per call); a whole Megatron-Core step gave the
/// same rates within 1% (h200-megatron-step-top.csv). Other cards take the same shares of their peak.
inline constexpr std::array<score_pass, 4> eager_score_softmax_forward{
    detail::h200_score_pass(6.0, 1.524e-3),    // bf16 -> fp32 copy
    detail::h200_score_pass(8.0, 1.706e-3),    // masked_fill_
    detail::h200_score_pass(8.0, 1.9606e-3),   // softmax
    detail::h200_score_pass(6.0, 0.7346e-3)};  // fp32 -> bf16 copy
inline constexpr std::array<score_pass, 6> eager_score_softmax_backward{
    detail::h200_score_pass(6.0, 1.524e-3),    // the gradient to fp32
    detail::h200_score_pass(12.0, 1.4956e-3),  // softmax backward
    detail::h200_score_pass(8.0, 1.706e-3),    // masked_fill
    detail::h200_score_pass(6.0, 0.7346e-3),   // the gradient back to bf16
    detail::h200_score_pass(12.0, 1.4763e-3),  // fp32 product of two score-sized tensors
    detail::h200_score_pass(8.0, 1.0034e-3)};  // the copy masked_fill makes of the gradient

/// Time of an eager fp32 score softmax (model::eager_fp32_softmax) on a datasheet device: each kernel's bytes
/// at its share of the peak, times the device's calibrated memory factor (never faster than the peak), and
/// each kernel's fixed time.
constexpr seconds eager_score_softmax_time(const model::op& o, const hw::device& d) {
  const bool forward = o.phase == model::op_phase::forward;
  // Per score element: the bytes moved, and the bytes the peak would move in the kernels' time.
  const auto passes = [](const auto& list) {
    double moved = 0.0;
    double at_peak = 0.0;
    for (const score_pass& p : list) {
      moved += p.bytes;
      at_peak += p.bytes / p.share;
    }
    return std::array{moved, at_peak, static_cast<double>(list.size())};
  };
  const auto [moved, at_peak, kernels] =
      forward ? passes(eager_score_softmax_forward) : passes(eager_score_softmax_backward);
  const auto elements = static_cast<double>(o.out_elements);
  const seconds memory = std::max(bytes{elements * at_peak} / d.hbm_bandwidth * d.sheet.calibrated.memory,
                                  bytes{elements * moved} / d.hbm_bandwidth);
  return memory + seconds{kernels * eager_add.fixed_s};
}

/// The share of the HBM peak the gradient-accumulation kernel reaches: PyTorch's in-place add of a weight's
/// bf16 gradient into its fp32 main gradient (Megatron-Core's DistributedDataParallel hook, param.main_grad.
/// add_(param.grad), when gradient_accumulation_fusion is off; an unrolled_elementwise_kernel over mixed
/// types). Measured in Megatron-Core's own iterations on one H200 (tools/gpu/megatron_step.py,
/// tests/data/gpu/h200-megatron-step-top.csv): 204 calls per iteration, every weight of the 1.881 B-parameter
/// model once per microbatch of 4, took 27.50 ms in one case and 29.45 ms in the other; at 10 bytes per
/// weight (4 read, 2 read, 4 written) their mean is 0.55 of the 4.8 TB/s peak. Other cards take the same
/// share.
inline constexpr double gradient_accumulation_share =
    10.0 * 1881214976.0 * 4.0 / ((27.50367e-3 + 29.45404e-3) / 2.0) / 4.8e12;

/// Time of the separate kernel that adds a weight-gradient op's gradients into their main gradients
/// (model::op::accumulated weights, main_grad_bytes each) on a datasheet device, at
/// gradient_accumulation_share of the peak (times the calibrated memory factor, never faster than the peak)
/// plus a kernel's fixed time; none where the GEMM accumulates them.
constexpr seconds gradient_accumulation_time(const model::op& o, const hw::device& d) {
  if (o.accumulated <= 0 || o.main_grad_bytes <= 0) return seconds{0.0};
  const bytes moved{static_cast<double>(o.accumulated) * static_cast<double>(o.main_grad_bytes)};
  return std::max(moved / (d.hbm_bandwidth * gradient_accumulation_share) * d.sheet.calibrated.memory,
                  moved / d.hbm_bandwidth) +
         seconds{eager_add.fixed_s};
}

/// The share of the HBM peak PyTorch's add by index (index_add_, the atomic scatter-add an unfused mixture-
/// of-experts permutation runs: model::index_kernel) reaches on the bytes phaze counts for it (the rows it
/// reads, the rows or tokens it writes: model::bytes_read, bytes_written), the mean of two cards
/// (docs/gpu-measurements.md):
/// - one H200, the kernel alone (tools/gpu/measure_moe_block.py's profile, tests/data/gpu/h200-moe-block-
///   profile.csv): three adds per block, two of top_k rows onto tokens and one of rows onto rows, 570.4 MB in
///   1.629 ms at Qwen3-30B-A3B's shapes and 424.7 MB in 1.152 ms at GPT-OSS 120B's: 0.073 and 0.077 of 4.8
///   TB/s;
/// - one H100 SXM (tools/gpu/measure_moe.py, tests/data/gpu/h100-sxm-moe-permute.csv), timed together with
///   the gate product before it (2 x rows bytes at the copy rate, 0.9 of 3.35 TB/s, taken off): 151.0 MB in
///   0.641 ms (Qwen3-30B-A3B) and 100.7 MB in 0.344 ms (Mixtral 8x7B), 0.070 and 0.087.
/// Cards not measured take the same share of their peak.
inline constexpr double index_add_share = ((570.4 / 1.629 / 4800.0 + 424.7 / 1.152 / 4800.0) / 2.0 +
                                           (151.0 / 0.641 / 3350.0 + 100.7 / 0.344 / 3350.0) / 2.0) /
                                          2.0;

/// Whether op `o` is the add by index of an unfused permutation: an unpermutation's forward pass, or the
/// backward pass of a permutation's gather.
constexpr bool adds_by_index(const model::op& o) {
  const bool forward = o.phase == model::op_phase::forward;
  return (o.permutation == model::index_kernel::scatter_add && forward) ||
         (o.permutation == model::index_kernel::select && !forward);
}

/// The eager kernel of an op kind (eager_kernel); none for the cross-entropy and the embedding.
constexpr eager_kernel eager_kernel_of(model::op_kind k) {
  using model::op_kind;
  switch (k) {
    case op_kind::residual_add:
    case op_kind::relu:
      return eager_add;
    case op_kind::gelu:
    case op_kind::silu:
      return eager_gelu;
    case op_kind::layernorm:
      return eager_layernorm;
    case op_kind::rmsnorm:
      return eager_rmsnorm;
    case op_kind::swiglu:
    case op_kind::geglu:
      return eager_swiglu;
    case op_kind::rotary:
      return eager_rotary;
    case op_kind::dropout:
      return eager_dropout;
    case op_kind::softmax:
      return eager_softmax;
    case op_kind::cross_entropy:
    case op_kind::embedding:
      return {};
    default:
      return {0.0, 0.0, eager_add.fixed_s};
  }
}

/// Time of a vector op on a datasheet device: elements * cycles_per_element operations at the vector
/// (CUDA-core / VPU) rate, never less than datasheet_vector_bytes over the achievable HBM bandwidth
/// (hbm_bandwidth * memory_efficiency; times the device's calibrated memory factor, never above the peak).
/// Vector ops on GPUs are almost always memory-bound. An eager op (model::op::eager) moves its bytes at its
/// kernel's share of the peak instead (its backward share in a backward pass; the device's memory_efficiency
/// where the kind has none) and takes its fixed time on top (eager_kernel_of); the eager softmax of unfused
/// attention runs its fp32 kernels instead (eager_score_softmax_time).
inline constexpr auto datasheet_vector_time =
    [](const model::op& o, const hw::device& d) constexpr -> seconds {
  const flops work{static_cast<double>(vector_elements(o)) * cycles_per_element(o.kind, o.phase)};
  const seconds compute = work / d.sheet.vector;
  if (model::eager_fp32_softmax(o)) return std::max(compute, eager_score_softmax_time(o, d));
  const bytes moved = datasheet_vector_bytes(o);
  const eager_kernel e = o.eager ? eager_kernel_of(o.kind) : eager_kernel{};
  const double kernel_share =
      o.phase != model::op_phase::forward && e.backward_share > 0.0 ? e.backward_share : e.share;
  const double share = adds_by_index(o)     ? index_add_share
                       : kernel_share > 0.0 ? kernel_share
                                            : d.sheet.memory_efficiency;
  const seconds memory =
      std::max(moved / (d.hbm_bandwidth * share) * d.sheet.calibrated.memory, moved / d.hbm_bandwidth);
  return std::max(compute, memory) + seconds{e.fixed_s};
};

}  // namespace phaze::cost
