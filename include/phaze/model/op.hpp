/// @file
/// Operators of a layer's dataflow graph: what each computes, on which unit it runs, and what it costs in
/// FLOPs, bytes and parameters, all derived from its shapes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "phaze/core/fixed_string.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/core/static_vector.hpp"

namespace phaze::model {

/// What an operator computes.
enum class op_kind : std::uint8_t {
  matmul,          ///< activations x weights (linear layer, output projection); may carry a fused bias
  batched_matmul,  ///< activations x activations (attention scores Q K^T, context P V)
  softmax,         ///< attention softmax (scale and causal mask fused, as Megatron's fused kernel does)
  layernorm,
  rmsnorm,
  gelu,
  relu,
  silu,
  swiglu,          ///< silu(gate) * up, over a fused gate+up projection output
  geglu,           ///< gelu(gate) * up (tanh form), over a fused gate+up projection output (Gemma)
  dropout,         ///< keeps a one-byte mask per element for the backward pass
  residual_add,    ///< elementwise sum of two activations (residual connections, position embeddings)
  embedding,       ///< table lookup (word, position or token-type embedding)
  cross_entropy,   ///< softmax + negative log-likelihood over the vocabulary logits
  rotary,          ///< rotary position embedding applied to queries and keys
  tp_copy,         ///< Megatron's "f": identity forward, all-reduce of the input gradient backward
  all_reduce,      ///< tensor-parallel all-reduce ("g" forward)
  reduce_scatter,  ///< sequence-parallel reduce-scatter
  all_gather,      ///< sequence-parallel all-gather
  copy,            ///< a memory-bound copy: a resize (nearest upsampling), pixel shuffle or permutation
  view,            ///< a reshape of the same elements: no work, no memory traffic
  /// Fused attention (FlashAttention, Dao et al. 2022; cuDNN's fused SDPA): scores, softmax, dropout and
  /// context in one kernel that never writes the s x s scores to memory. Its `gemm` is the score GEMM's
  /// shape {batch * heads, s, head_dim, s}; the forward pass counts the two GEMMs QK^T and PV.
  fused_attention,
  /// Expert parallelism's token exchange (Megatron-Core's all-to-all token dispatcher): each of `group`
  /// ranks sends its routed tokens to the ranks holding their experts (dispatch) and back (combine).
  /// `out_elements` is what one rank sends. Costed on the expert-parallel route by the step model
  /// (train::detail::expert_parallel_exposed), not with the tensor-parallel collectives.
  all_to_all,
};

/// The implementation of a fused attention kernel, as training stacks choose it: each runs at its own rate
/// on each GPU generation (cost/attention.hpp, docs/cost-model.md section 7.2b). `standard` is the kernel a
/// device's own attention efficiency describes: cuDNN's fused attention on Hopper (measured),
/// FlashAttention-2 on Ampere.
enum class attention_kernel : std::uint8_t {
  standard,   ///< the device's own (what its attention efficiency was measured or published for)
  cudnn,      ///< cuDNN's fused scaled-dot-product attention (Transformer Engine's FusedAttention)
  flash3,     ///< FlashAttention-3 (Shah et al. 2024; Hopper only)
  flash2,     ///< FlashAttention-2 (Dao 2023): flash-attn 2.x, PyTorch SDPA's flash backend
  triton,     ///< FlashAttention in Triton of flash-attn 1.0.x (flash_attn_triton.py; LLM Foundry's `triton`)
  flex,       ///< PyTorch's FlexAttention (torch.compile'd flex_attention: a Triton flash-attention kernel)
  efficient,  ///< PyTorch SDPA's memory-efficient backend (the CUTLASS kernel of xFormers)
};

constexpr std::string_view to_string(attention_kernel k) {
  switch (k) {
    case attention_kernel::standard:
      return "auto";
    case attention_kernel::cudnn:
      return "cudnn";
    case attention_kernel::flash3:
      return "flash3";
    case attention_kernel::flash2:
      return "flash2";
    case attention_kernel::triton:
      return "triton";
    case attention_kernel::flex:
      return "flex";
    case attention_kernel::efficient:
      return "efficient";
  }
  return "?";
}

/// Which pass an operator belongs to.
enum class op_phase : std::uint8_t {
  forward,
  backward_data,    ///< gradient with respect to an activation input
  backward_weight,  ///< gradient with respect to the weights
};

/// The hardware unit an operator occupies.
enum class unit : std::uint8_t {
  tensor,   ///< matrix (systolic / tensor-core) units
  vector,   ///< vector / SIMD units
  network,  ///< a collective over the tensor-parallel group
  none,     ///< no work (an identity marker)
};

/// How an operator is split across a tensor-parallel group (Megatron-LM, Shoeybi et al. 2019, section 3).
enum class tp_split : std::uint8_t {
  replicated,  ///< every rank computes the whole op (layernorm without sequence parallelism)
  column,      ///< weight split by output features (QKV, MLP up projection)
  row,         ///< weight split by input features (attention output, MLP down projection)
  heads,       ///< split by attention heads (scores, softmax, context)
  vocab,       ///< split by vocabulary rows (embedding, output projection, cross-entropy)
  sequence,    ///< split along the sequence (sequence parallelism, Korthikanti et al. 2022)
};

/// C[batch][m][n] = A[batch][m][k] * B[batch][k][n].
struct gemm_dims {
  std::int64_t batch = 1;
  std::int64_t m = 0;
  std::int64_t k = 0;
  std::int64_t n = 0;
  friend constexpr bool operator==(const gemm_dims&, const gemm_dims&) = default;
};

/// Bit flags: which tensors an op keeps for its backward pass (Korthikanti et al. 2022, section 4.1).
namespace saves {
inline constexpr std::uint8_t nothing = 0;
inline constexpr std::uint8_t input0 = 1;  ///< first activation input
inline constexpr std::uint8_t input1 = 2;  ///< second activation input
inline constexpr std::uint8_t output = 4;  ///< own output (softmax)
inline constexpr std::uint8_t mask = 8;    ///< one byte per output element (dropout)
}  // namespace saves

/// Bit flags: the submodules of a transformer block an op belongs to, as Megatron-Core names them for
/// selective recomputation (--recompute-modules; TransformerConfig.recompute_modules, core_r0.14.0). The
/// first four use normal checkpointing (the module keeps its input, drops what it computes inside and runs
/// its forward again in the backward pass), the last three output-discarding checkpointing (their outputs
/// are dropped once consumed and computed again from their inputs).
namespace recompute_module {
inline constexpr std::uint8_t core_attn = 1;       ///< the attention core (the default, Korthikanti et al.)
inline constexpr std::uint8_t mlp = 2;             ///< a dense MLP
inline constexpr std::uint8_t moe = 4;             ///< a mixture-of-experts layer
inline constexpr std::uint8_t shared_experts = 8;  ///< the shared experts of a mixture of experts
inline constexpr std::uint8_t layernorm = 16;      ///< the norms before attention and before the MLP
inline constexpr std::uint8_t moe_act = 32;        ///< the experts' activation function
inline constexpr std::uint8_t mla_up_proj = 64;    ///< latent attention's up projections and rotary parts
/// Not a submodule: torchtitan's per-op policy over the whole block (its selective_ac_option "op";
/// op::op_policy_saved), alone.
inline constexpr std::uint8_t op = 128;
inline constexpr std::uint8_t checkpointed = core_attn | mlp | moe | shared_experts;
inline constexpr std::uint8_t output_discarding = layernorm | moe_act | mla_up_proj;
inline constexpr std::uint8_t all = checkpointed | output_discarding | op;
/// Each submodule by its Megatron-Core name.
struct named {
  std::string_view name;
  std::uint8_t bit;
};
inline constexpr std::array<named, 8> names{{{"core_attn", core_attn},
                                             {"mlp", mlp},
                                             {"moe", moe},
                                             {"shared_experts", shared_experts},
                                             {"layernorm", layernorm},
                                             {"moe_act", moe_act},
                                             {"mla_up_proj", mla_up_proj},
                                             {"op", op}}};
/// The bit of the submodule named `name`; 0 for a name Megatron-Core does not list.
constexpr std::uint8_t bit_of(std::string_view name) {
  for (const named& n : names)
    if (n.name == name) return n.bit;
  return 0;
}
}  // namespace recompute_module

/// How an unfused mixture-of-experts permutation moves token rows by index (Megatron-Core's permute and
/// unpermute without --moe-permute-fusion, moe_utils.py): `select` gathers them (torch.index_select; its
/// backward pass adds them back by index), `scatter_add` adds them to their tokens by index
/// (torch.scatter_add_; its backward pass gathers). The adds by index run at PyTorch's measured rate
/// (cost::index_add_share); none: a fused kernel (Transformer Engine's) at the device's copy rate.
enum class index_kernel : std::uint8_t { none, select, scatter_add };

/// Which of mamba_ssm's Triton kernels a Mamba-2 mixer's op stands for (model::detail::mamba): `scan` the
/// chunked state-space scan (its batched GEMMs, the states passed between chunks, the sum of the two outputs;
/// mamba_chunk_scan_combined), `gated_norm` the output gated by SiLU(z) and normed per group (rmsnorm_fn with
/// z). They take the time measured for those kernels per token (cost::mamba_kernel_time; op::kernel_tokens,
/// op::kernel_share); none: any other op.
enum class mamba_kernel : std::uint8_t { none, scan, gated_norm };

/// Index of the layer's input tensor among an op's inputs.
inline constexpr std::int16_t layer_input = -1;

/// Most producers one op can depend on. Forward ops read at most two tensors, but a backward op waits for
/// the gradient from every consumer of its forward output, which can be more.
inline constexpr std::size_t max_op_inputs = 8;

/// One operator. All sizes are per tensor-parallel rank.
struct op {
  op_kind kind = op_kind::matmul;
  op_phase phase = op_phase::forward;
  fixed_string<24> name;
  gemm_dims gemm{};               ///< for matmul and batched_matmul
  std::int64_t in_elements = 0;   ///< activation elements read (all activation inputs together)
  std::int64_t out_elements = 0;  ///< elements of the output tensor
  std::int64_t params = 0;        ///< parameters owned by this op on one rank (weights and biases)
  std::int64_t tied_params = 0;   ///< of `params`, those shared with the input embedding (counted once)
  int elem_bytes = 2;             ///< bytes per activation and weight element
  int group = 1;                  ///< ranks taking part (collectives)
  tp_split split = tp_split::replicated;
  static_vector<std::int16_t, max_op_inputs> inputs;  ///< producers: earlier ops of this pass, or layer_input
  std::uint8_t saved = saves::nothing;                ///< what the forward op keeps for backward
  /// The block submodules it belongs to (recompute_module bits; an attention-core op, what selective
  /// recomputation runs again by default (Korthikanti et al. 2022), carries core_attn).
  std::uint8_t modules = 0;
  bool causal = false;      ///< fused_attention: a causal mask (the kernel skips the masked half)
  std::int64_t window = 0;  ///< fused_attention: keys each query sees (sliding window); 0: all
  attention_kernel kernel = attention_kernel::standard;  ///< fused_attention: its implementation
  /// matmul: an FP8 GEMM (Transformer Engine's linear layers under FP8 training): 1-byte operands, a
  /// bf16 result, the FP8 matrix rate; its input is kept for the backward pass in FP8.
  bool fp8 = false;
  /// fp8 matmul: its input is quantized by a pass of its own (read in bf16, written in FP8 twice, as is and
  /// transposed, since Hopper's FP8 GEMMs take only the TN layout) rather than by the norm before it.
  bool fp8_cast = false;
  /// matmul: a routed expert's GEMM (mixture of experts); its parameters are the experts' (held by the
  /// expert-parallel ranks, their gradients reduced over the expert-data-parallel ranks).
  bool expert = false;
  /// cross_entropy: one fused kernel each way over the logits in their own format (layer_shape::fused_loss)
  /// instead of Megatron-LM's unfused fp32 passes.
  bool fused_loss = false;
  /// A vector op run as eager PyTorch runs it, one or more unfused kernels at their measured rate
  /// (layer_shape::eager_vector; cost::eager_kernel_of); matrix ops and collectives ignore it.
  bool eager = false;
  /// A weight-gradient op (a matmul's or the embedding's) whose gradient a kernel of its own then adds into
  /// the weight's main gradient (layer_shape::main_grad_bytes): the weights, and the bytes that kernel
  /// moves per weight (cost::gradient_accumulation_time); 0 where the GEMM accumulates it.
  std::int64_t accumulated = 0;
  int main_grad_bytes = 0;
  /// A permutation of token rows by index run unfused (index_kernel); none otherwise.
  index_kernel permutation = index_kernel::none;
  /// A Mamba-2 mixer's op run by mamba_ssm's Triton kernels (mamba_kernel); none otherwise.
  mamba_kernel mamba = mamba_kernel::none;
  /// mamba: the tokens the kernel runs over on this rank, and this op's share of the kernel's time (a
  /// forward op's; a batched GEMM's two backward ops split it).
  std::int64_t kernel_tokens = 0;
  double kernel_share = 0.0;
  /// matmul of a block under torchtitan's per-op selective checkpointing (recompute_module::op): the share
  /// of its output the policy keeps (model::keep_by_op_policy); the rest of its forward runs again.
  double op_policy_saved = 0.0;

  friend constexpr bool operator==(const op&, const op&) = default;
};

/// Whether op `o` is the softmax of unfused attention run eagerly in fp32: an eager softmax inside the
/// attention core (the router's top-k softmax is not one) over scores held in fewer than 4 bytes. PyTorch
/// then casts the scores to fp32, masks and normalizes them there and casts the probabilities back
/// (Megatron-Core's FusedScaleMaskSoftmax without its CUDA kernels, attention_softmax_in_fp32), keeping the
/// fp32 softmax for its backward pass (cost::eager_score_softmax_forward, activation_bytes).
constexpr bool eager_fp32_softmax(const op& o) {
  return o.eager && o.kind == op_kind::softmax && (o.modules & recompute_module::core_attn) != 0 &&
         o.elem_bytes < 4;
}

/// The unit an op runs on.
inline constexpr auto unit_of = [](const op& o) constexpr -> unit {
  switch (o.kind) {
    case op_kind::matmul:
    case op_kind::batched_matmul:
    case op_kind::fused_attention:
      return unit::tensor;
    case op_kind::all_reduce:
    case op_kind::reduce_scatter:
    case op_kind::all_gather:
    case op_kind::all_to_all:
      return unit::network;
    case op_kind::tp_copy:
    case op_kind::view:
      return unit::none;
    default:
      return unit::vector;
  }
};

namespace detail {
/// Floating-point operations per output element of a vector op, counted from its formula (forward).
/// softmax: max, subtract, exp, sum, divide; layernorm: mean, variance (2), normalize (2), scale, shift
/// (counted as 8 with the bias); rmsnorm: square, mean, rsqrt-scale, weight (5); gelu (tanh form):
/// 8; silu: negate-exp-add-divide (4) and one more multiply for swiglu; gelu (8) and one more multiply for
/// geglu; dropout: compare + scale;
/// rotary: two multiplies and an add per element; cross-entropy: softmax (5) + log-likelihood.
/// These counts are reported as vector FLOPs only; model FLOPs (MFU) count matrix work alone.
constexpr double vector_flops_per_element(op_kind k) {
  switch (k) {
    case op_kind::softmax:
      return 5;
    case op_kind::layernorm:
      return 8;
    case op_kind::rmsnorm:
      return 5;
    case op_kind::gelu:
      return 8;
    case op_kind::relu:
      return 1;
    case op_kind::silu:
      return 4;
    case op_kind::swiglu:
      return 5;
    case op_kind::geglu:
      return 9;
    case op_kind::dropout:
      return 2;
    case op_kind::residual_add:
      return 1;
    case op_kind::rotary:
      return 3;
    case op_kind::cross_entropy:
      return 6;
    default:
      return 0;
  }
}
}  // namespace detail

/// Model FLOPs of a fused attention op as Megatron-LM counts them (`num_floating_point_operations` in
/// megatron/training/training.py: the QK^T and PV GEMMs over the whole s x s scores, causal or not, and the
/// backward pass twice the forward): 4 * batch * s^2 * head_dim forward, twice that backward. What the kernel
/// executes differs (a causal kernel skips half the tiles; FlashAttention's backward recomputes the scores,
/// 2.5 times the forward): cost/attention.hpp times that.
constexpr double fused_attention_model_flops(const op& o) {
  const double forward = 4.0 * static_cast<double>(o.gemm.batch) * static_cast<double>(o.gemm.m) *
                         static_cast<double>(o.gemm.k) * static_cast<double>(o.gemm.n);
  return o.phase == op_phase::forward ? forward : 2.0 * forward;
}

/// FLOPs of an op: 2*batch*m*k*n for (batched) matmuls, per-element counts for vector ops (backward vector
/// ops count twice their forward), zero for embeddings lookups and collectives. Vector ops count per output
/// element, except the cross-entropy forward, which works over every logit (its input) and writes one loss
/// per token. Fused attention: fused_attention_model_flops.
inline constexpr auto flops_of = [](const op& o) constexpr -> flops {
  if (o.kind == op_kind::fused_attention) return flops{fused_attention_model_flops(o)};
  if (unit_of(o) == unit::tensor) {
    return flops{2.0 * static_cast<double>(o.gemm.batch) * static_cast<double>(o.gemm.m) *
                 static_cast<double>(o.gemm.k) * static_cast<double>(o.gemm.n)};
  }
  if (unit_of(o) != unit::vector) return flops{0.0};
  const double per_element =
      detail::vector_flops_per_element(o.kind) * (o.phase == op_phase::forward ? 1.0 : 2.0);
  const bool over_logits = o.kind == op_kind::cross_entropy && o.phase == op_phase::forward;
  const std::int64_t elements =
      over_logits && o.in_elements > o.out_elements ? o.in_elements : o.out_elements;
  return flops{per_element * static_cast<double>(elements)};
};

/// Bytes an op reads from memory: both GEMM operands, or the activation inputs plus parameters (fused
/// attention reads its queries, keys and values, and writes its context, never the scores).
inline constexpr auto bytes_read = [](const op& o) constexpr -> bytes {
  const auto eb = static_cast<double>(o.elem_bytes);
  if (unit_of(o) == unit::tensor && o.kind != op_kind::fused_attention) {
    const auto b = static_cast<double>(o.gemm.batch);
    return bytes{b * static_cast<double>(o.gemm.m * o.gemm.k + o.gemm.k * o.gemm.n) * (o.fp8 ? 1.0 : eb)};
  }
  if (o.kind == op_kind::embedding) return bytes{static_cast<double>(o.out_elements) * eb};  // gathered rows
  return bytes{static_cast<double>(o.in_elements + o.params) * eb};
};

/// Bytes an op writes: its output (plus the one-byte dropout mask).
inline constexpr auto bytes_written = [](const op& o) constexpr -> bytes {
  const auto eb = static_cast<double>(o.elem_bytes);
  if (unit_of(o) == unit::tensor && o.kind != op_kind::fused_attention) {
    return bytes{static_cast<double>(o.gemm.batch * o.gemm.m * o.gemm.n) * eb};
  }
  const double mask = (o.kind == op_kind::dropout && o.phase == op_phase::forward) ? 1.0 : 0.0;
  return bytes{static_cast<double>(o.out_elements) * (eb + mask)};
};

/// Bytes of the op's parameters on one rank.
inline constexpr auto param_bytes = [](const op& o) constexpr -> bytes {
  return bytes{static_cast<double>(o.params) * static_cast<double>(o.elem_bytes)};
};

/// Bytes of the op's output tensor.
inline constexpr auto output_bytes = [](const op& o) constexpr -> bytes {
  return bytes{static_cast<double>(o.out_elements) * static_cast<double>(o.elem_bytes)};
};

/// Bytes a collective carries: the whole (unsharded) tensor, from which the algorithm's factor is taken
/// (ring all-reduce moves 2(n-1)/n of it, reduce-scatter and all-gather (n-1)/n).
inline constexpr auto collective_bytes = [](const op& o) constexpr -> bytes {
  if (unit_of(o) != unit::network) return bytes{0.0};
  const auto larger = o.in_elements > o.out_elements ? o.in_elements : o.out_elements;
  return bytes{static_cast<double>(larger) * static_cast<double>(o.elem_bytes)};
};

/// A short lowercase name for an op kind ("matmul", "softmax", ...), as printed and written to JSON.
constexpr std::string_view to_string(op_kind k) {
  switch (k) {
    case op_kind::matmul:
      return "matmul";
    case op_kind::batched_matmul:
      return "batched_matmul";
    case op_kind::softmax:
      return "softmax";
    case op_kind::layernorm:
      return "layernorm";
    case op_kind::rmsnorm:
      return "rmsnorm";
    case op_kind::gelu:
      return "gelu";
    case op_kind::relu:
      return "relu";
    case op_kind::silu:
      return "silu";
    case op_kind::swiglu:
      return "swiglu";
    case op_kind::geglu:
      return "geglu";
    case op_kind::dropout:
      return "dropout";
    case op_kind::residual_add:
      return "residual_add";
    case op_kind::embedding:
      return "embedding";
    case op_kind::cross_entropy:
      return "cross_entropy";
    case op_kind::rotary:
      return "rotary";
    case op_kind::tp_copy:
      return "tp_copy";
    case op_kind::all_reduce:
      return "all_reduce";
    case op_kind::reduce_scatter:
      return "reduce_scatter";
    case op_kind::all_gather:
      return "all_gather";
    case op_kind::copy:
      return "copy";
    case op_kind::view:
      return "view";
    case op_kind::fused_attention:
      return "fused_attention";
    case op_kind::all_to_all:
      return "all_to_all";
  }
  return "?";
}

constexpr std::string_view to_string(op_phase p) {
  switch (p) {
    case op_phase::forward:
      return "forward";
    case op_phase::backward_data:
      return "backward_data";
    case op_phase::backward_weight:
      return "backward_weight";
  }
  return "?";
}

constexpr std::string_view to_string(unit u) {
  switch (u) {
    case unit::tensor:
      return "tensor";
    case unit::vector:
      return "vector";
    case unit::network:
      return "network";
    case unit::none:
      return "none";
  }
  return "?";
}

}  // namespace phaze::model
