/// @file
/// Training knobs (batch, microbatch, sequence, precision, optimizer, recomputation, sequence parallelism,
/// distributed optimizer, pipeline schedule) and parallel degrees, with the rules a runnable plan obeys.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "phaze/core/error.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"

namespace phaze::train {

/// The optimizer whose state every device keeps for its parameters.
enum class optimizer : std::uint8_t {
  adam,  ///< Adam/AdamW: two moments per parameter (Kingma and Ba 2015)
  sgd,   ///< SGD with momentum: one moment per parameter
};

/// Pipeline schedules (Narayanan et al., SC'21, section 2.2): 1F1B (PipeDream-Flush), interleaved 1F1B with
/// `virtual_stages` model chunks per device, and GPipe (all forwards, then all backwards).
enum class pipeline_schedule : std::uint8_t { one_f_one_b, interleaved, gpipe };

/// Which blocks full recomputation checkpoints, with training_knobs::recompute_layers = N:
/// - block: the first N blocks of each model chunk; the others keep all their activations (Megatron-LM's
///   --recompute-method block --recompute-num-layers N; N = 0: every block).
/// - uniform: every block, in groups of N consecutive blocks of a chunk: only each group's input is kept,
///   and the backward pass recomputes the group's N forwards, holding their activations at once
///   (Megatron-LM's --recompute-method uniform --recompute-num-layers N; N = 0 or 1: each block alone).
/// - every: every N-th block of a chunk (the first, the N+1-th, ...); the others keep all their activations
///   (torchtitan's selective layer checkpointing, --activation_checkpoint.selective_ac_option N).
enum class recompute_method : std::uint8_t { block, uniform, every };

constexpr std::string_view to_string(recompute_method m) {
  return m == recompute_method::block ? "block" : m == recompute_method::uniform ? "uniform" : "every";
}

/// When fully sharded data parallelism frees a layer's gathered weights (PyTorch FSDP2's
/// reshard_after_forward; torchtitan's --parallelism.fsdp_reshard_after_forward, whose names these are):
/// - always: after its forward pass, so the backward pass gathers them again (FSDP2's default; FSDP1's
///   FULL_SHARD);
/// - never: after its backward pass only, so one gather serves both passes and every layer of the stage is
///   gathered at once at the end of the forward pass (FSDP1's SHARD_GRAD_OP, ZeRO-2's traffic);
/// - by_pipeline: never under pipeline parallelism, always without (torchtitan's "default": its
///   parallelize functions avoid a gather per microbatch and stage).
enum class fsdp_reshard : std::uint8_t { by_pipeline, always, never };

constexpr std::string_view to_string(fsdp_reshard r) {
  return r == fsdp_reshard::by_pipeline ? "default" : r == fsdp_reshard::always ? "always" : "never";
}

/// How a mixture of experts' token copies travel between the expert-parallel ranks (Megatron-Core's
/// --moe-token-dispatcher-type):
/// - all_to_all: each rank sends each of its tokens' top_k copies to the rank of its expert, over NCCL's
///   all-to-all: a copy bound for another node crosses the network once per expert (what Megatron-Core's
///   recipes run with expert parallelism; its own default, allgather, phaze does not model);
/// - flex: DeepEP's or HybridEP's kernels (--moe-token-dispatcher-type flex with
///   --moe-flex-dispatcher-backend deepep|hybridep): a token crosses the network once per destination node,
///   which hands the copies to its ranks over NVLink, and the combine adds a node's copies before they
///   cross back (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, section 3.2.2; DeepEP's README).
enum class moe_dispatcher : std::uint8_t { all_to_all, flex };

constexpr std::string_view to_string(moe_dispatcher d) {
  return d == moe_dispatcher::all_to_all ? "alltoall" : "flex";
}

constexpr std::string_view to_string(optimizer o) {
  return o == optimizer::adam ? "adam" : "sgd";
}

/// Names as the command line spells them (docs/cli.md: `--schedule 1f1b|gpipe|interleaved`).
constexpr std::string_view to_string(pipeline_schedule s) {
  switch (s) {
    case pipeline_schedule::one_f_one_b:
      return "1f1b";
    case pipeline_schedule::interleaved:
      return "interleaved";
    case pipeline_schedule::gpipe:
      return "gpipe";
  }
  return "?";
}

namespace detail {
// Messages are built by appending only: GCC 12 at -O2 reports a false -Wrestrict on `"x" + std::string`.

/// Appends "'a', 'b' or 'c'" from a list of enum values.
template <class Enum, std::size_t N>
void append_valid_names(std::string& out, const std::array<Enum, N>& values) {
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) out.append(i + 1 == N ? " or " : ", ");
    out.push_back('\'');
    out.append(to_string(values[i]));
    out.push_back('\'');
  }
}

/// The value whose name is `name`, or an input_error that lists the valid names of `what`.
template <class Enum, std::size_t N>
Enum parse_enum(std::string_view name, std::string_view what, const std::array<Enum, N>& values) {
  for (Enum v : values)
    if (to_string(v) == name) return v;
  std::string message{"unknown "};
  message.append(what).append(" '").append(name).append("'; valid names are ");
  append_valid_names(message, values);
  throw input_error(message);
}
}  // namespace detail

/// Every optimizer, schedule, recomputation mode and training precision, in the order help texts list them.
inline constexpr std::array all_optimizers{optimizer::adam, optimizer::sgd};
inline constexpr std::array all_schedules{pipeline_schedule::one_f_one_b, pipeline_schedule::gpipe,
                                          pipeline_schedule::interleaved};
inline constexpr std::array all_recompute_modes{model::recompute::none, model::recompute::selective,
                                                model::recompute::full};
inline constexpr std::array training_precisions{hw::precision::bf16, hw::precision::fp16, hw::precision::fp32,
                                                hw::precision::fp8};

/// FSDP's resharding policies, torchtitan's default first.
inline constexpr std::array all_fsdp_reshards{fsdp_reshard::by_pipeline, fsdp_reshard::always,
                                              fsdp_reshard::never};

/// Every token dispatcher of a mixture of experts, the command line's default (the all-to-all) first.
inline constexpr std::array all_moe_dispatchers{moe_dispatcher::all_to_all, moe_dispatcher::flex};

/// Every fused attention kernel, `auto` (the device's own) first.
inline constexpr std::array all_attention_kernels{
    model::attention_kernel::standard, model::attention_kernel::cudnn,  model::attention_kernel::flash3,
    model::attention_kernel::flash2,   model::attention_kernel::triton, model::attention_kernel::flex,
    model::attention_kernel::efficient};

/// The formats an optimizer may keep its state in (training_knobs::optimizer_dtype).
inline constexpr std::array optimizer_dtypes{hw::precision::fp32, hw::precision::bf16, hw::precision::fp16};

/// Whether phaze trains in format `p` (one of training_precisions).
constexpr bool is_training_precision(hw::precision p) {
  for (const hw::precision q : training_precisions)
    if (p == q) return true;
  return false;
}

/// Parses `adam` / `sgd`; anything else is an input_error listing the valid names.
inline optimizer parse_optimizer(std::string_view name) {
  return detail::parse_enum(name, "optimizer", all_optimizers);
}
/// Parses `1f1b` / `gpipe` / `interleaved`.
inline pipeline_schedule parse_pipeline_schedule(std::string_view name) {
  return detail::parse_enum(name, "pipeline schedule", all_schedules);
}
/// Parses `none` / `selective` / `full`.
inline model::recompute parse_recompute(std::string_view name) {
  return detail::parse_enum(name, "recomputation mode", all_recompute_modes);
}
/// Parses `auto` / `cudnn` / `flash3` / `flash2` / `triton` / `flex` / `efficient`
/// (training_knobs::attention_kernel).
inline model::attention_kernel parse_attention_kernel(std::string_view name) {
  return detail::parse_enum(name, "attention kernel", all_attention_kernels);
}
/// Parses `default` / `always` / `never` (training_knobs::fsdp_reshard_after_forward).
inline fsdp_reshard parse_fsdp_reshard(std::string_view name) {
  return detail::parse_enum(name, "FSDP resharding policy", all_fsdp_reshards);
}
/// Parses `alltoall` / `flex` (training_knobs::dispatcher).
inline moe_dispatcher parse_moe_dispatcher(std::string_view name) {
  return detail::parse_enum(name, "token dispatcher", all_moe_dispatchers);
}
/// Parses `fp32` / `bf16` / `fp16`, the formats of an optimizer's state (training_knobs::optimizer_dtype).
inline hw::precision parse_optimizer_dtype(std::string_view name) {
  return detail::parse_enum(name, "optimizer state format", optimizer_dtypes);
}
/// Parses `bf16` / `fp16` / `fp32` / `fp8`, the formats phaze trains in (fp8: Transformer Engine's FP8
/// training, bf16 outside the linear layers' GEMMs; model::layer_shape::fp8).
inline hw::precision parse_precision(std::string_view name) {
  return detail::parse_enum(name, "training precision", training_precisions);
}

/// How one training iteration is run. `global_batch` and `microbatch` count sequences.
struct training_knobs {
  std::int64_t global_batch = 1;
  std::int64_t microbatch = 1;
  std::int64_t sequence = 0;  ///< 0: the model's own training sequence length
  hw::precision precision = hw::precision::bf16;
  optimizer opt = optimizer::adam;
  model::recompute recompute = model::recompute::none;
  /// Megatron's sequence parallelism (Korthikanti et al. 2022, section 4.2.2). With tp == 1 it is a no-op,
  /// as in Megatron-LM, which turns it off when the tensor-parallel size is 1.
  bool sequence_parallel = false;
  /// ZeRO-1 / Megatron's distributed optimizer: optimizer state sharded over data-parallel ranks.
  bool distributed_optimizer = false;
  /// ZeRO stage 2 (Rajbhandari et al. 2020, section 5.2; DeepSpeed's zero_optimization.stage 2), with the
  /// distributed optimizer: the gradients sharded too. Each rank keeps only its shard of the gradients, so
  /// every microbatch's backward pass reduce-scatters them (DeepSpeed refuses no_sync under gradient
  /// partitioning: engine.py, DeepSpeedEngine.no_sync), and the weights stay whole on every rank
  /// (step_model::exposed_gradient_reduction).
  bool shard_gradients = false;
  /// Fully sharded data parallelism (ZeRO-3; PyTorch FSDP2, Megatron-FSDP): weights, gradients and optimizer
  /// state all sharded over the data-parallel ranks. Each layer's weights are all-gathered before its
  /// forward pass and, unless they stay gathered (fsdp_reshard_after_forward), again before its backward
  /// pass, and its gradients reduce-scattered after it, in every microbatch (once per iteration under
  /// pipeline parallelism: fsdp_reduces_once), prefetched under the neighbouring layers' computation
  /// (step_model::exposed_fully_sharded); a device holds its shards plus the gathered weights and unsharded
  /// gradients in use (detail::fully_sharded_working_set).
  bool fsdp = false;
  /// With fsdp, the ranks each state is sharded over (hybrid sharding, HSDP: PyTorch FSDP2's fully_shard on
  /// a 2-D mesh, torchtitan's data_parallel_shard_degree, FSDP1's HYBRID_SHARD): groups of that many
  /// consecutive data-parallel ranks shard the states, and the groups hold replicas whose gradient shards
  /// are all-reduced across them (step_model::exposed_fully_sharded); 0: every data-parallel rank (one
  /// group, FULL_SHARD).
  int fsdp_shard = 0;
  /// With fsdp, when a layer's gathered weights are freed (fsdp_reshard; fsdp_keeps_weights says which
  /// applies to a plan).
  fsdp_reshard fsdp_reshard_after_forward = fsdp_reshard::by_pipeline;
  pipeline_schedule schedule = pipeline_schedule::one_f_one_b;
  int virtual_stages = 1;  ///< model chunks per device (interleaved schedule only)
  /// Attention as one fused kernel (model::layer_shape::fused_attention): no s x s scores stored, the
  /// kernel's measured rate (cost/attention.hpp). Off here, as in the 2022 Megatron-LM runs phaze was first
  /// calibrated on; the command line turns it on wherever the devices run it, as Megatron-Core does
  /// (docs/cli.md, --attention auto).
  bool fused_attention = false;
  /// The fused attention kernel's implementation (model::attention_kernel; docs/cost-model.md, section
  /// 7.2b): `standard` is the device's own kernel (cuDNN on Hopper, FlashAttention-2 on Ampere).
  model::attention_kernel attention_kernel = model::attention_kernel::standard;
  /// Megatron-Core's --overlap-grad-reduce: the data-parallel reduction of each gradient bucket runs while
  /// the backward pass of the last microbatch goes on (step_model::exposed_gradient_reduction).
  bool overlap_grad_reduce = false;
  /// Megatron-Core's --overlap-param-gather (distributed optimizer only): the all-gather of the updated
  /// weights runs bucket by bucket under the next forward pass (step_model::exposed_parameter_gather).
  bool overlap_param_gather = false;
  /// Transformer Engine's --tp-comm-overlap (sequence parallelism only): each tensor-parallel all-gather and
  /// reduce-scatter is split into chunks that run under the GEMM beside it (detail::tp_overlap_savings).
  bool tp_comm_overlap = false;
  /// Megatron-Core's --overlap-p2p-communication (on by default in core_r0.11.0, interleaved schedule only):
  /// pipeline sends and receives run under the model chunks' computation (step_model::pipeline_sends); it
  /// also lets the interleaved schedule run on two pipeline stages.
  bool overlap_p2p = false;
  /// Megatron-Core's --overlap-moe-expert-parallel-comm (expert parallelism): the forward pass of one
  /// microbatch and the backward pass of the one before run together, layer by layer, each all-to-all of
  /// one beside the computation of the other (detail::expert_overlap_saving); the first forward and the last
  /// backward of each model chunk's turn run alone.
  bool overlap_expert_comm = false;
  /// The token dispatcher of the experts' all-to-alls (moe_dispatcher).
  moe_dispatcher dispatcher = moe_dispatcher::all_to_all;
  /// A mixture of experts' token permutation and unpermutation unfused, as Megatron-Core runs them without
  /// --moe-permute-fusion (its default; model::layer_shape::unfused_permutation). Off: Transformer Engine's
  /// fused kernels, which Megatron-Bridge's recipes turn on.
  bool unfused_permutation = false;
  /// Megatron-Core's --fp8-param-gather (FP8 training): the weights the GEMMs read are kept in FP8 only (1
  /// byte, plus the transposed copy Hopper's FP8 GEMMs need) instead of bf16 plus FP8 copies, and the
  /// distributed optimizer all-gathers them in FP8 (Megatron-Bridge's FP8 recipes turn it on).
  bool fp8_param_gather = false;
  /// Host (CPU) time in seconds the framework spends per op phaze models (model::layer_shape::host_per_op):
  /// each pass of a layer takes at least its ops times this. 0 here (the GPU's time alone, as under CUDA
  /// graphs); the command line's default is eager PyTorch's, measured (eager_host_per_op).
  double host_overhead = 0.0;
  /// The loss as one fused kernel each way over the logits in the training format (model::layer_shape::
  /// fused_loss; flash-attn's CrossEntropyLoss, LLM Foundry's default) instead of Megatron-LM's
  /// vocabulary-parallel cross-entropy in fp32 (the default here and on the command line).
  bool fused_loss = false;
  /// The memory-bound ops as eager PyTorch runs them (model::layer_shape::eager_vector: Composer, Hugging
  /// Face Transformers, torchtitan without torch.compile) instead of fused kernels (Megatron-Core,
  /// Transformer Engine; the default here and on the command line).
  bool eager_vector = false;
  /// The share of each device's memory a plan leaves free for what phaze does not count (the allocator's
  /// cached blocks, the CUDA context, communication buffers): a plan fits when its memory stays within
  /// (1 - memory_headroom) of the device's. 0 here; the command line's default is 0.10
  /// (docs/memory-model.md).
  double memory_headroom = 0.0;
  /// Megatron-LM's --make-vocab-size-divisible-by: the embedding and output layer hold the vocabulary padded
  /// to a multiple of vocab_padding * tp (model::layer_shape::vocab_multiple). 1 here (a multiple of tp);
  /// the command line's default is Megatron-LM's, 128.
  int vocab_padding = 1;
  /// Gradients kept, accumulated and reduced in bf16 instead of fp32 (Megatron-Core's --grad-reduce-in-bf16,
  /// DistributedDataParallelConfig::grad_reduce_in_fp32 off, as Megatron-Bridge's performance recipes set
  /// it): 2 bytes per gradient instead of 4, in memory and on the data-parallel rings. bf16 and fp8 only.
  bool grad_reduce_in_bf16 = false;
  /// The format of the optimizer's state under mixed precision: fp32 (master weights and moments, as
  /// Megatron-LM keeps them by default), fp16 (Megatron-Core's precision-aware optimizer with
  /// --main-params-dtype, --exp-avg-dtype and --exp-avg-sq-dtype fp16: 2-byte master weights and moments),
  /// or bf16 (moments in bf16 and no master copy: the bf16 weights are updated in place, as Apex's
  /// DistributedFusedAdam does when its dtype is the model's, NeMo 1.0's `optim.dtype: bf16`).
  hw::precision optimizer_dtype = hw::precision::fp32;
  /// With full recomputation: how many blocks of each model chunk (a stage's share of one virtual stage) are
  /// recomputed, the first ones (Megatron-LM's --recompute-method block --recompute-num-layers N); the
  /// others keep all their activations. 0: every block (--recompute-method uniform --recompute-num-layers 1).
  int recompute_layers = 0;
  /// How recompute_layers picks the blocks full recomputation checkpoints (recompute_method).
  recompute_method recompute_by = recompute_method::block;
  /// With selective recomputation: the submodules of each block run again (model::recompute_module bits;
  /// Megatron-Core's --recompute-modules, default the attention core, Korthikanti et al.'s selective).
  std::uint8_t recompute_modules = model::recompute_module::core_attn;
  /// Fitted to a user's measured steps (train::calibration, `phaze calibrate`); 0 otherwise: a fixed time
  /// every pipeline stage adds to each microbatch (host and launch work the kernels' costs leave out) and a
  /// fixed time every iteration adds (the optimizer's host side, logging, synchronization).
  seconds microbatch_overhead{0.0};
  seconds step_overhead{0.0};
  /// Megatron-Core's account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split
  /// (TransformerConfig, core_r0.11.0): the input embedding, and the output layer with its loss, each count
  /// as one layer of the pipeline split, so Megatron-Core's even split (uniform_split) gives the first
  /// (last) model chunk one transformer block fewer: Llama 3.1 405B's 126 blocks run as pp 8 x vp 8.
  bool embedding_in_pipeline_split = false;
  bool loss_in_pipeline_split = false;
  /// Each weight gradient accumulated into its main gradient inside the weight-gradient GEMM (Megatron-Core's
  /// gradient_accumulation_fusion, on where Apex or Transformer Engine is installed; the default here and on
  /// the command line). Off (Megatron-LM's --no-gradient-accumulation-fusion, and what Megatron-Core does
  /// without either): after every backward pass a kernel of its own adds each weight's gradient into its
  /// main gradient (model::layer_shape::main_grad_bytes, cost::gradient_accumulation_time). A GPU software
  /// stack's setting: an accelerator design (a systolic device) costs no such kernel, and the command line
  /// refuses it there.
  bool gradient_accumulation_fusion = true;
  /// The optimizer's update as one fused kernel (torch's fused=True, Transformer Engine's and Apex's
  /// FusedAdam: the default) or as torch's multi-tensor Adam (foreach, torch.optim's default, which
  /// Megatron-Core falls back to without Transformer Engine or Apex): foreach_adam_bytes / fused_adam_bytes
  /// (three) times the fused update's time. Adam with fp32 state only.
  bool foreach_optimizer = false;
  friend constexpr bool operator==(const training_knobs&, const training_knobs&) = default;
};

/// Parallel degrees: tensor (inside a layer), pipeline (stages), data (replicas). The interleaving degree
/// lives in training_knobs::virtual_stages.
struct parallelism {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  /// Context parallelism (Megatron-Core's --context-parallel-size): the sequence of each microbatch split
  /// over cp ranks that exchange keys and values around a ring in attention (model::layer_shape::cp). Ranks
  /// in Megatron's order tp, cp, dp, pp; gradients are reduced over dp * cp ranks.
  int cp = 1;
  /// Expert parallelism (Megatron-Core's --expert-model-parallel-size, mixture-of-experts models): the
  /// routed experts of every block spread over ep ranks carved from the data-parallel ones (ep divides dp;
  /// it adds no devices). Expert gradients are reduced over dp * cp / ep ranks.
  int ep = 1;
  /// Expert tensor parallelism (Megatron-Core's --expert-tensor-parallel-size, MoE parallel folding): the
  /// routed experts' GEMMs split over etp ranks, a divisor of tp, and the expert-parallel groups carved from
  /// all tp * dp * cp ranks of a stage (ep * etp divides them); 0: tp (ep then divides dp).
  int etp = 0;
  [[nodiscard]] constexpr int expert_tp() const { return etp > 0 ? etp : tp; }
  [[nodiscard]] constexpr std::int64_t devices() const {
    return static_cast<std::int64_t>(tp) * static_cast<std::int64_t>(pp) * static_cast<std::int64_t>(dp) *
           static_cast<std::int64_t>(cp);
  }
  friend constexpr bool operator==(const parallelism&, const parallelism&) = default;
};

/// Bytes of an activation and of a weight (the working copy the GEMMs read) when training in `p`: FP8
/// training keeps both in bf16 and quantizes them for its GEMMs (Transformer Engine; model::op::fp8).
constexpr int activation_element_bytes(hw::precision p) {
  return p == hw::precision::fp8 ? hw::element_bytes(hw::precision::bf16) : hw::element_bytes(p);
}

/// The sequence length a run trains at: the knob, or the model's own when the knob is 0.
constexpr std::int64_t sequence_of(const model::model& m, const training_knobs& k) {
  return k.sequence > 0 ? k.sequence : m.config.sequence;
}

/// Microbatches each data-parallel replica runs per iteration: global_batch / (microbatch * dp).
constexpr std::int64_t microbatches_per_replica(const parallelism& p, const training_knobs& k) {
  return k.global_batch / (k.microbatch * p.dp);
}

/// Host (CPU) time eager PyTorch spends per op phaze models, measured: 60.7 us, the median of the three
/// host-bound iterations (microbatch 1, no recomputation) of GPT-2, GPT-2 XL and Megatron's 2.5B GPT on one
/// H100 SXM (tools/gpu/train_step.py, tests/data/gpu/h100-sxm-train-step*.csv: (iteration - optimizer step) /
/// 4 microbatches / the model's ops forward and backward with fused attention, as the runs' SDPA ran
/// it: 54.5, 60.7 and 67.1 us); some three to six kernels per op (autocast's casts, bias and dropout kernels,
/// gradient accumulation) at the 9-20 us of host time per eager launch measured by
/// tools/gpu/measure_kernels.py (docs/gpu-measurements.md). The command line's default for
/// training_knobs::host_overhead.
inline constexpr double eager_host_per_op = 60.7e-6;

/// Bytes per weight the separate gradient-accumulation kernel moves when gradient accumulation is not fused
/// into the weight-gradient GEMM (training_knobs::gradient_accumulation_fusion off): the main gradient read
/// and written (fp32, or bf16 with grad_reduce_in_bf16) and the GEMM's gradient read (in the training
/// format, bf16 under fp8); 0 when fused, and under fsdp, which keeps no main gradient (each microbatch's
/// gradients are reduce-scattered and added into the rank's shard; Megatron-LM's FSDP2 needs the flag off).
constexpr int main_grad_bytes_of(const training_knobs& k) {
  if (k.gradient_accumulation_fusion || k.fsdp) return 0;
  const int main = k.grad_reduce_in_bf16 ? 2 : 4;
  const int grad = k.precision == hw::precision::fp32 || k.precision == hw::precision::tf32 ? 4 : 2;
  return 2 * main + grad;
}

/// The shape every layer of the run is built for.
constexpr model::layer_shape layer_shape_of(const model::model& m, const parallelism& p,
                                            const training_knobs& k) {
  return model::layer_shape{k.microbatch,
                            sequence_of(m, k),
                            p.tp,
                            k.sequence_parallel,
                            activation_element_bytes(k.precision),
                            k.fused_attention,
                            k.precision == hw::precision::fp8,
                            p.cp,
                            k.vocab_padding,
                            p.ep,
                            k.attention_kernel,
                            p.etp,
                            k.recompute_modules,
                            k.host_overhead,
                            k.fused_loss,
                            k.eager_vector,
                            k.unfused_permutation,
                            k.dispatcher == moe_dispatcher::flex,
                            main_grad_bytes_of(k)};
}

namespace rules {
// Each rule is a function named after the mistake ({fmt}'s technique for compile-time format checks): in a
// constant expression calling it stops compilation with its name; at run time it throws input_error saying
// how to fix.
[[noreturn]] inline void bf16_gradients_need_bf16_or_fp8_training() {
  throw input_error(
      "`grad_reduce_in_bf16` keeps gradients in bf16, which mixed-precision bf16 or fp8 training does; give "
      "`precision` bf16 or fp8, or drop `grad_reduce_in_bf16`");
}
[[noreturn]] inline void fp8_param_gather_needs_fp8_training() {
  throw input_error(
      "`fp8_param_gather` keeps the weights in FP8, which needs FP8 training; give `precision` fp8, or drop "
      "`fp8_param_gather`");
}
[[noreturn]] inline void fp8_param_gather_needs_the_distributed_optimizer() {
  throw input_error(
      "`fp8_param_gather` all-gathers the FP8 weights through a sharded data-parallel scheme "
      "(Megatron-Core's distributed optimizer, or Megatron-FSDP's sharded buffers); add "
      "`distributed_optimizer` or `fsdp`, or drop `fp8_param_gather`");
}
[[noreturn]] inline void optimizer_dtype_must_be_fp32_bf16_or_fp16() {
  throw input_error(
      "the optimizer state is kept in fp32, bf16 or fp16; give `optimizer_dtype` fp32, bf16 or fp16");
}
[[noreturn]] inline void low_precision_optimizer_state_needs_mixed_precision() {
  throw input_error(
      "`optimizer_dtype` bf16 or fp16 keeps the optimizer state below fp32, which needs mixed-precision "
      "training (fp32 training keeps its fp32 weights as the master copy); give `precision` bf16, fp16 "
      "or fp8, or `optimizer_dtype` fp32");
}
[[noreturn]] inline void bf16_optimizer_state_needs_bf16_weights() {
  throw input_error(
      "`optimizer_dtype` bf16 updates the bf16 weights in place, so the weights must be bf16: give "
      "`precision` bf16 or fp8 without `fp8_param_gather`, or `optimizer_dtype` fp16");
}
[[noreturn]] inline void recompute_layers_must_not_be_negative() {
  throw input_error("`recompute_layers` counts blocks per model chunk: give N >= 1 (or 0 for every block)");
}
[[noreturn]] inline void recompute_layers_need_full_recomputation() {
  throw input_error(
      "`recompute_layers` says how many blocks full recomputation recomputes; give `recompute` full with it, "
      "or drop `recompute_layers`");
}
[[noreturn]] inline void recompute_modules_need_selective_recomputation() {
  throw input_error(
      "`recompute_modules` names the submodules selective recomputation runs again (core_attn, mlp, moe, "
      "shared_experts, layernorm, moe_act, mla_up_proj) or torchtitan's per-op policy (op); give "
      "`recompute` selective with one or more of them, or drop `recompute_modules`");
}
[[noreturn]] inline void op_policy_stands_alone() {
  throw input_error(
      "`recompute_modules` op is torchtitan's per-op policy over the whole block and takes no Megatron-Core "
      "submodule beside it; give op alone, or drop it");
}
[[noreturn]] inline void op_policy_needs(std::string_view what) {
  std::string message{"`recompute_modules` op (torchtitan's per-op selective checkpointing) is modelled "};
  message.append(what).append("; drop `recompute_modules` op, or use Megatron-Core's submodules");
  throw input_error(message);
}
[[noreturn]] inline void recompute_method_needs_full_recomputation() {
  throw input_error(
      "`recompute_by` uniform or every says which blocks full recomputation checkpoints; give "
      "`recompute` "
      "full with it, or drop `recompute_by`");
}
[[noreturn]] inline void folded_expert_parallelism_must_divide_the_stage() {
  throw input_error(
      "with an expert tensor-parallel size (`etp`) other than tp, ep x etp must divide tp x dp x cp "
      "(Megatron-Core "
      "carves the expert groups from all of a stage's ranks); choose an `ep` that does");
}
[[noreturn]] inline void device_count_must_be_positive() {
  throw input_error("the number of devices must be at least 1; give `devices` N with N >= 1");
}
[[noreturn]] inline void expert_parallel_size_must_divide_dp() {
  throw input_error(
      "the expert-parallel size must divide the data-parallel size (Megatron-Core carves the expert-parallel "
      "ranks from the data-parallel ones); choose an `ep` that divides dp, or give an expert tensor-parallel "
      "size below tp (`etp` 1) to carve the expert groups from the tensor-parallel ranks too");
}
[[noreturn]] inline void parallel_degrees_must_be_positive() {
  throw input_error(
      "tp, pp, dp and cp must each be at least 1; give `tp`, `pp`, `dp` (and `cp`) as positive integers");
}
[[noreturn]] inline void tp_times_pp_must_divide_devices() {
  throw input_error(
      "tp * pp does not divide the number of devices, so no whole data-parallel degree uses them all; choose "
      "tp and pp whose product divides `devices`");
}
[[noreturn]] inline void tp_times_pp_times_dp_must_equal_devices() {
  throw input_error(
      "tp * pp * dp (* cp) must equal the number of devices (every device is used); choose degrees whose "
      "product is `devices`, or leave out `dp` to get dp = devices / (tp * pp * cp)");
}
[[noreturn]] inline void global_batch_must_be_positive() {
  throw input_error("the global batch must be at least 1 sequence; give `global_batch` B with B >= 1");
}
[[noreturn]] inline void microbatch_must_be_positive() {
  throw input_error("the microbatch must be at least 1 sequence; give `microbatch` M with M >= 1");
}
[[noreturn]] inline void sequence_must_not_be_negative() {
  throw input_error(
      "the sequence length must be positive (or 0 for the model's own); give `sequence` S with S >= 1");
}
[[noreturn]] inline void global_batch_must_be_divisible_by_microbatch_times_dp() {
  throw input_error(
      "the global batch must be divisible by microbatch * dp, so every data-parallel replica runs a whole "
      "number of microbatches; choose `global_batch` a multiple of microbatch * dp");
}
[[noreturn]] inline void pipeline_stages_must_not_exceed_transformer_blocks() {
  throw input_error(
      "pp is larger than the number of transformer blocks, so some stage would hold no block; choose `pp` at "
      "most the model's layer count");
}
[[noreturn]] inline void virtual_stages_must_be_positive() {
  throw input_error(
      "the number of virtual stages (model chunks per device) must be at least 1; give `virtual_stages` >= "
      "1");
}
[[noreturn]] inline void virtual_stages_need_the_interleaved_schedule() {
  throw input_error(
      "more than one virtual stage per device needs the interleaved schedule; give `schedule` interleaved or "
      "`virtual_stages` 1");
}
[[noreturn]] inline void interleaved_schedule_needs_at_least_two_virtual_stages() {
  throw input_error(
      "the interleaved schedule needs at least two model chunks per device; give `virtual_stages` 2 or more, "
      "or use "
      "`schedule` 1f1b");
}
[[noreturn]] inline void interleaved_schedule_needs_more_than_two_pipeline_stages() {
  throw input_error(
      "the interleaved schedule needs pp > 2, or pp = 2 with the pipeline sends overlapped (Megatron-LM's "
      "rule; `overlap_p2p`, Megatron-Core's default); give `pp` 3 or more, set `overlap_p2p`, or use "
      "`schedule` 1f1b");
}
[[noreturn]] inline void interleaved_schedule_needs_blocks_divisible_by_pp_times_v() {
  throw input_error(
      "with the interleaved schedule the transformer blocks must split evenly into pp * vp model chunks; "
      "choose `pp` and `virtual_stages` whose product divides the layer count, count the embedding and loss "
      "as layers "
      "as Megatron-Core can (`embedding_in_pipeline_split`, "
      "`loss_in_pipeline_split`), "
      "or give the blocks per stage (`stage_blocks`)");
}
[[noreturn]] inline void interleaved_schedule_needs_microbatches_divisible_by_pp() {
  throw input_error(
      "with the interleaved schedule the microbatches per replica (global batch / (microbatch * dp)) must be "
      "a multiple of pp (Megatron-LM's rule); change `global_batch`, `microbatch` or `pp`");
}
[[noreturn]] inline void fsdp_shard_must_not_be_negative() {
  throw input_error(
      "`fsdp_shard` is the ranks each state is sharded over: give N >= 1 (or leave it out: all)");
}
[[noreturn]] inline void fsdp_shard_needs_fsdp() {
  throw input_error(
      "`fsdp_shard` sets the groups fully sharded data parallelism shards over; give `fsdp` with it, or drop "
      "`fsdp_shard`");
}
[[noreturn]] inline void fsdp_shard_must_divide_dp_times_cp() {
  throw input_error(
      "`fsdp_shard` must divide the data-parallel ranks (dp x cp): each group of that many ranks shards the "
      "states and the groups replicate them; choose a divisor of dp x cp");
}
[[noreturn]] inline void gradient_sharding_needs_the_distributed_optimizer() {
  throw input_error(
      "`shard_gradients` is ZeRO stage 2: the optimizer state sharded and the gradients with it; give "
      "`distributed_optimizer` with it (and not `fsdp`, which shards the weights as well), or drop "
      "`shard_gradients`");
}
[[noreturn]] inline void foreach_optimizer_is_adam() {
  throw input_error(
      "`foreach_optimizer` is torch's multi-tensor Adam (its passes are counted for Adam's update); train "
      "with the adam optimizer, or drop `foreach_optimizer`");
}
[[noreturn]] inline void foreach_optimizer_keeps_fp32_state() {
  throw input_error(
      "`foreach_optimizer` is torch's multi-tensor Adam over fp32 master weights and moments; a 2-byte "
      "`optimizer_dtype` is Transformer Engine's or Apex's fused Adam: drop one of the two");
}
[[noreturn]] inline void gradient_sharding_without_pipeline() {
  throw input_error(
      "`shard_gradients` (ZeRO stage 2) runs without pipeline parallelism: DeepSpeed's pipeline engine "
      "takes ZeRO stage 1 at most; give `pp` 1, or drop `shard_gradients`");
}
[[noreturn]] inline void expert_overlap_needs(std::string_view what) {
  std::string message{"`overlap_expert_comm` (Megatron-Core's --overlap-moe-expert-parallel-comm) runs "};
  message.append(what).append("; drop `overlap_expert_comm`, or change the plan");
  throw input_error(message);
}
[[noreturn]] inline void expert_overlap_needs_interleaving() {
  expert_overlap_needs("under pipeline parallelism with the interleaved schedule only (`virtual_stages`)");
}
[[noreturn]] inline void expert_overlap_without_full_recomputation() {
  expert_overlap_needs("without full recomputation");
}
[[noreturn]] inline void flex_dispatcher_needs(std::string_view what) {
  std::string message{"`dispatcher` flex (DeepEP's or HybridEP's dispatch) runs "};
  message.append(what).append("; or give `dispatcher` alltoall");
  throw input_error(message);
}
[[noreturn]] inline void fsdp_reshard_needs_fsdp() {
  throw input_error(
      "`fsdp_reshard_after_forward` says when fully sharded data parallelism frees gathered weights; give "
      "`fsdp` with it, or drop `fsdp_reshard_after_forward`");
}
[[noreturn]] inline void hybrid_sharding_with_experts() {
  throw input_error(
      "hybrid sharding (`fsdp_shard` below dp x cp) with expert parallelism is not modelled; give `ep` 1, or "
      "shard over every data-parallel rank");
}
[[noreturn]] inline void pipeline_layers_must_divide_into_stages(std::int64_t layers, int pp,
                                                                 std::int64_t chunks) {
  throw input_error(
      "with the embedding or the loss counted as a pipeline layer "
      "(`embedding_in_pipeline_split`, "
      "`loss_in_pipeline_split`) the " +
      std::to_string(layers) + " layers must divide into the " + std::to_string(pp * chunks) +
      " model chunks (pp x vp), as Megatron-Core requires; choose a pp (and vp) that divides them, or drop "
      "the flags");
}
[[noreturn]] inline void pipeline_layers_need_a_transformer() {
  throw input_error(
      "`embedding_in_pipeline_split` and `loss_in_pipeline_split` split a "
      "transformer's blocks; for a composite model drop them and give its layers per stage with "
      "`stage_blocks`");
}
[[noreturn]] inline void interleaved_schedule_needs_identical_blocks() {
  throw input_error(
      "the interleaved schedule gives every device chunks of identical blocks; this model's layers differ (a "
      "composite model): use `schedule` 1f1b or gpipe");
}
[[noreturn]] inline void host_overhead_must_lie_in_0_1ms() {
  throw input_error(
      "the host overhead per op must lie in [0, 1000] microseconds (eager PyTorch measured about 61; 0 for "
      "CUDA "
      "graphs); fix `host_overhead`");
}
[[noreturn]] inline void memory_headroom_must_lie_in_0_1() {
  throw input_error(
      "the memory headroom is the share of each device's memory left free: give `memory_headroom` in [0, 1), "
      "e.g. 0.1");
}
[[noreturn]] inline void precision_must_be_bf16_fp16_fp32_or_fp8() {
  throw input_error(
      "training precision must be bf16, fp16, fp32 or fp8; give `precision` bf16|fp16|fp32|fp8");
}
}  // namespace rules

/// The data-parallel degree that uses every device: devices / (tp * pp) (docs/cli.md: `--dp` may be
/// left out). Throws input_error when the degrees are not positive or tp * pp does not divide devices.
inline constexpr auto data_parallel_degree = [](int devices, int tp, int pp) constexpr -> int {
  if (devices <= 0) rules::device_count_must_be_positive();
  if (tp <= 0 || pp <= 0) rules::parallel_degrees_must_be_positive();
  if (devices % (tp * pp) != 0) rules::tp_times_pp_must_divide_devices();
  return devices / (tp * pp);
};

/// The ranks a rank's model states are sharded over among `gradient_ranks` data-parallel ranks: all of them
/// under fsdp (FULL_SHARD), or its hybrid-sharding group (training_knobs::fsdp_shard); 1 without fsdp (the
/// weights and gradients whole; the distributed optimizer shards its state over all of them itself).
constexpr int shard_ranks(const training_knobs& k, int gradient_ranks) {
  if (!k.fsdp) return 1;
  return k.fsdp_shard > 0 ? k.fsdp_shard : gradient_ranks;
}

/// Whether fully sharded data parallelism keeps each layer's gathered weights from its forward pass to its
/// backward pass (training_knobs::fsdp_reshard_after_forward resolved for `pp` pipeline stages): false
/// without fsdp.
constexpr bool fsdp_keeps_weights(const training_knobs& k, int pp) {
  if (!k.fsdp) return false;
  return k.fsdp_reshard_after_forward == fsdp_reshard::never ||
         (k.fsdp_reshard_after_forward == fsdp_reshard::by_pipeline && pp > 1);
}

/// Whether fully sharded data parallelism reduces the gradients once per iteration rather than in every
/// microbatch's backward pass: under pipeline parallelism, where PyTorch's pipeline schedules turn FSDP2's
/// gradient sync and its resharding after backward off for every microbatch but the last and run the
/// reduce-scatter once after it (torch.distributed.pipelining, _PipelineStageBase.
/// backward_maybe_with_nosync, PyTorch 2.6), so the unsharded gradients accumulate over the microbatches.
/// Without pipeline parallelism FSDP2 reduces in every backward pass (its default, which torchtitan and
/// Composer keep under gradient accumulation).
constexpr bool fsdp_reduces_once(const training_knobs& k, int pp) {
  return k.fsdp && pp > 1;
}

/// Whether Megatron-Core's pipeline split counts the embedding or the loss as a layer (training_knobs::
/// embedding_in_pipeline_split, loss_in_pipeline_split).
constexpr bool counts_embedding_or_loss(const training_knobs& k) {
  return k.embedding_in_pipeline_split || k.loss_in_pipeline_split;
}

/// The layers Megatron-Core's pipeline split divides: the blocks, plus one for the embedding and one for the
/// loss where they count (TransformerBlock's layer offsets, core_r0.11.0: num_layers += 1 for each).
constexpr std::int64_t pipeline_split_layers(std::int64_t blocks, const training_knobs& k) {
  return blocks + (k.embedding_in_pipeline_split ? 1 : 0) + (k.loss_in_pipeline_split ? 1 : 0);
}

/// Megatron-Core's rule for the counted layers (pipeline_split_layers) of a model of `blocks` blocks: they
/// divide into pp x vp model chunks (pp x 1 without the interleaved schedule); throws input_error otherwise.
/// Nothing to check where neither layer counts.
constexpr void check_pipeline_split_layers(std::int64_t blocks, int pp, const training_knobs& k) {
  if (!counts_embedding_or_loss(k)) return;
  const std::int64_t chunks =
      k.schedule == pipeline_schedule::interleaved ? std::max<std::int64_t>(k.virtual_stages, 1) : 1;
  const std::int64_t layers = pipeline_split_layers(blocks, k);
  if (layers % (static_cast<std::int64_t>(pp) * chunks) != 0)
    rules::pipeline_layers_must_divide_into_stages(layers, pp, chunks);
}

struct knob_space;      // train/knob_space.hpp
struct training_space;  // train/knob_space.hpp

/// `validate(...)`: checks that a plan, a knob space or a training space obeys the rules. Every broken rule
/// throws input_error (or stops compilation in a constant expression, naming the rule) with a message that
/// says how to fix it.
struct validate_fn {
  /// Checks that a model can be trained on `devices` devices with the given degrees and knobs. tp * pp * dp
  /// must equal `devices` exactly: a plan leaves no device idle. `uniform_split` false: the stages' blocks
  /// are given (split_of_blocks checks them), so the interleaved schedule does not need pp * vp to divide the
  /// block count, only each stage's count to divide into its vp chunks.
  constexpr void operator()(const model::model& m, const parallelism& p, const training_knobs& k, int devices,
                            bool uniform_split = true) const {
    if (devices <= 0) rules::device_count_must_be_positive();
    if (p.tp <= 0 || p.pp <= 0 || p.dp <= 0 || p.cp <= 0) rules::parallel_degrees_must_be_positive();
    if (p.devices() != devices) rules::tp_times_pp_times_dp_must_equal_devices();
    if (p.ep <= 0) model::rules::expert_parallel_size_must_be_positive();
    if (p.etp < 0 || (p.etp > 0 && p.tp % p.etp != 0))
      model::rules::expert_tensor_parallel_size_must_divide_tp();
    if (p.expert_tp() != p.tp && m.config.experts == 0)
      model::rules::expert_parallelism_needs_a_mixture_of_experts_model();
    if (p.expert_tp() == p.tp) {
      if (p.dp % p.ep != 0) rules::expert_parallel_size_must_divide_dp();
    } else if ((p.tp * p.dp * p.cp) % (p.ep * p.expert_tp()) != 0) {
      rules::folded_expert_parallelism_must_divide_the_stage();
    }
    if (k.global_batch <= 0) rules::global_batch_must_be_positive();
    if (k.microbatch <= 0) rules::microbatch_must_be_positive();
    if (k.sequence < 0) rules::sequence_must_not_be_negative();
    if (k.global_batch % (k.microbatch * p.dp) != 0)
      rules::global_batch_must_be_divisible_by_microbatch_times_dp();
    if (!is_training_precision(k.precision)) rules::precision_must_be_bf16_fp16_fp32_or_fp8();
    if (!(k.memory_headroom >= 0.0 && k.memory_headroom < 1.0)) rules::memory_headroom_must_lie_in_0_1();
    if (!(k.host_overhead >= 0.0 && k.host_overhead <= 1e-3)) rules::host_overhead_must_lie_in_0_1ms();
    if (k.grad_reduce_in_bf16 && k.precision != hw::precision::bf16 && k.precision != hw::precision::fp8)
      rules::bf16_gradients_need_bf16_or_fp8_training();
    if (k.recompute_layers < 0) rules::recompute_layers_must_not_be_negative();
    if (k.optimizer_dtype != hw::precision::fp32 && k.optimizer_dtype != hw::precision::bf16 &&
        k.optimizer_dtype != hw::precision::fp16)
      rules::optimizer_dtype_must_be_fp32_bf16_or_fp16();
    if (k.optimizer_dtype != hw::precision::fp32 &&
        (k.precision == hw::precision::fp32 || k.precision == hw::precision::tf32))
      rules::low_precision_optimizer_state_needs_mixed_precision();
    if (k.optimizer_dtype == hw::precision::bf16 &&
        (k.precision == hw::precision::fp16 || k.fp8_param_gather))
      rules::bf16_optimizer_state_needs_bf16_weights();
    if (k.fsdp_shard < 0) rules::fsdp_shard_must_not_be_negative();
    if (k.fsdp_shard > 0 && !k.fsdp) rules::fsdp_shard_needs_fsdp();
    if (k.fsdp_shard > 0 && p.dp * p.cp % k.fsdp_shard != 0) rules::fsdp_shard_must_divide_dp_times_cp();
    if (k.fsdp_shard > 0 && k.fsdp_shard != p.dp * p.cp && p.ep > 1) rules::hybrid_sharding_with_experts();
    if (k.fsdp_reshard_after_forward != fsdp_reshard::by_pipeline && !k.fsdp)
      rules::fsdp_reshard_needs_fsdp();
    if (k.shard_gradients && (!k.distributed_optimizer || k.fsdp))
      rules::gradient_sharding_needs_the_distributed_optimizer();
    if (k.shard_gradients && p.pp > 1) rules::gradient_sharding_without_pipeline();
    if (k.foreach_optimizer && k.opt != optimizer::adam) rules::foreach_optimizer_is_adam();
    if (k.foreach_optimizer && k.optimizer_dtype != hw::precision::fp32)
      rules::foreach_optimizer_keeps_fp32_state();
    // Megatron-Core's flex dispatcher refuses padding to a capacity (MoEFlexTokenDispatcher); phaze models
    // its exchange over the expert-parallel ranks of expert tensor parallelism 1.
    if (k.dispatcher == moe_dispatcher::flex && m.config.experts > 0) {
      if (m.config.capacity_factor > 0.0)
        rules::flex_dispatcher_needs(
            "dropless only (Megatron-Core refuses it with padding to a capacity): "
            "drop `capacity_factor`");
      if (p.ep > 1 && p.expert_tp() > 1)
        rules::flex_dispatcher_needs(
            "here with expert tensor parallelism 1 only (phaze models its exchange over the expert-parallel "
            "ranks): give `etp` 1 or `tp` 1");
    }
    // Megatron-Core's TransformerConfig checks of --overlap-moe-expert-parallel-comm, for a plan with
    // expert parallelism (without it there is no all-to-all to overlap, and the knob does nothing).
    if (k.overlap_expert_comm && p.ep > 1) {
      if (p.pp > 1 && k.schedule != pipeline_schedule::interleaved)
        rules::expert_overlap_needs_interleaving();
      if (k.recompute == model::recompute::full) rules::expert_overlap_without_full_recomputation();
      if (k.recompute == model::recompute::selective &&
          (k.recompute_modules & model::recompute_module::moe) != 0)
        rules::expert_overlap_needs("without moe among the recomputed modules");
      if (k.precision == hw::precision::fp32) rules::expert_overlap_needs("with bf16 or fp16 weights only");
    }
    if (k.fp8_param_gather && k.precision != hw::precision::fp8) rules::fp8_param_gather_needs_fp8_training();
    if (k.fp8_param_gather && !k.distributed_optimizer && !k.fsdp)
      rules::fp8_param_gather_needs_the_distributed_optimizer();
    if (k.recompute_layers > 0 && k.recompute != model::recompute::full)
      rules::recompute_layers_need_full_recomputation();
    if (k.recompute_by != recompute_method::block && k.recompute != model::recompute::full)
      rules::recompute_method_needs_full_recomputation();
    if (k.recompute_modules == 0 || (k.recompute_modules & ~model::recompute_module::all) != 0 ||
        (k.recompute_modules != model::recompute_module::core_attn &&
         k.recompute != model::recompute::selective))
      rules::recompute_modules_need_selective_recomputation();
    if ((k.recompute_modules & model::recompute_module::op) != 0) {
      if (k.recompute_modules != model::recompute_module::op) rules::op_policy_stands_alone();
      if (m.config.experts > 0 || m.config.latent_attention() || m.config.hybrid())
        rules::op_policy_needs(
            "for dense blocks with standard attention only (no experts, no latent attention, no Mamba-2 "
            "mixers)");
      if (!k.fused_attention || m.config.score_bias > 0 || model::composite(m))
        rules::op_policy_needs(
            "with fused attention only (give `fused_attention`; a transformer without "
            "score biases)");
      if (k.precision == hw::precision::fp8)
        rules::op_policy_needs("without FP8 training (torchtitan's float8 GEMMs are not aten.mm)");
    }
    const std::int64_t blocks = model::body_nodes(m);
    if (p.pp > blocks) rules::pipeline_stages_must_not_exceed_transformer_blocks();
    if (k.virtual_stages <= 0) rules::virtual_stages_must_be_positive();
    if (k.schedule != pipeline_schedule::interleaved && k.virtual_stages > 1)
      rules::virtual_stages_need_the_interleaved_schedule();
    if (k.schedule == pipeline_schedule::interleaved) {
      if (model::composite(m)) rules::interleaved_schedule_needs_identical_blocks();
      if (k.virtual_stages < 2) rules::interleaved_schedule_needs_at_least_two_virtual_stages();
      if (p.pp < 2 || (p.pp == 2 && !k.overlap_p2p))
        rules::interleaved_schedule_needs_more_than_two_pipeline_stages();
      if (uniform_split && !counts_embedding_or_loss(k) &&
          blocks % (static_cast<std::int64_t>(p.pp) * k.virtual_stages) != 0)
        rules::interleaved_schedule_needs_blocks_divisible_by_pp_times_v();
      if (microbatches_per_replica(p, k) % p.pp != 0)
        rules::interleaved_schedule_needs_microbatches_divisible_by_pp();
    }
    if (uniform_split && counts_embedding_or_loss(k)) {
      if (model::composite(m)) rules::pipeline_layers_need_a_transformer();
      check_pipeline_split_layers(blocks, p.pp, k);
    }
    // Megatron-Core runs a mixture of experts under tensor parallelism with sequence parallelism only.
    for (const auto& kind : m.kinds) {
      if (kind.recipe == model::layer_recipe::transformer && model::architecture_of(m, kind).experts > 0 &&
          p.tp > 1 && !k.sequence_parallel)
        model::rules::mixture_of_experts_with_tp_needs_sequence_parallelism();
    }
    // Heads, key/value heads and the MLP width must split over tp; the sequence over tp with sequence
    // parallelism (the model's own rules, each named after its mistake).
    model::validate_model_shape(m, layer_shape_of(m, p, k));
  }
  /// Checks the knob lists on their own (defined in train/knob_space.hpp).
  constexpr void operator()(const knob_space& k) const;
  /// Checks a training space on its own: its knobs, and that its batch, devices and widths can run each
  /// listed value (defined in train/knob_space.hpp).
  constexpr void operator()(const training_space& t) const;
  /// Checks a training space against the model it trains (defined in train/knob_space.hpp).
  constexpr void operator()(const model::model& m, const training_space& t) const;
};
inline constexpr validate_fn validate{};

}  // namespace phaze::train
