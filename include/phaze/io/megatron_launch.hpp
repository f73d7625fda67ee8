/// @file
/// The launch of a plan under Megatron-LM (`phaze plan --emit megatron`): whether Megatron-LM core_r0.11.0's
/// pretrain_gpt.py can build a model and run a plan as phaze costs them, its command-line arguments for a
/// plan (flag names of core_r0.11.0's argument parser), and the torchrun lines that launch the plan's ranks
/// in a given order. An exporter: text out, nothing printed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "phaze/cluster/analysis.hpp"
#include "phaze/cluster/cluster.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/plan_search.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

namespace phaze::io {

/// Whether Megatron-LM can run a split: every stage but the first and the last holds the same number of
/// blocks (it takes the first and last stages' counts with --decoder-first/last-pipeline-num-layers), and
/// an uneven split gives every stage at least one block (Megatron-Core's TransformerConfig.__post_init__:
/// the first and last counts "must be larger than 0", and middle stages without layers are a "Mismatch").
inline bool megatron_can_split(const place::ranked_plan& r) {
  for (std::size_t i = 2; i + 1 < r.split.size(); ++i)
    if (r.split[i].blocks != r.split[1].blocks) return false;
  const bool uniform = std::all_of(r.split.begin(), r.split.end(), [&](const train::stage_layers& s) {
    return s.blocks == r.split.front().blocks;
  });
  if (!uniform &&
      std::any_of(r.split.begin(), r.split.end(), [](const train::stage_layers& s) { return s.blocks < 1; }))
    return false;
  const auto& k = r.knobs;
  if (train::counts_embedding_or_loss(k) && k.schedule != train::pipeline_schedule::interleaved) {
    // core_r0.11.0's TransformerConfig.__post_init__ without virtual stages also checks the blocks against
    // the stages between a counted embedding and a counted loss ("number of middle layers ... must be
    // divisible by middle pipeline_model_parallel_size").
    std::int64_t blocks = 0;
    for (const auto& s : r.split) blocks += s.blocks;
    const int middle =
        r.parallel.pp - (k.embedding_in_pipeline_split ? 1 : 0) - (k.loss_in_pipeline_split ? 1 : 0);
    if (middle <= 0 || blocks % middle != 0) return false;
  }
  return true;
}

/// The fastest split Megatron-LM core_r0.11.0 can give plan `r` (megatron_can_split): the first and the last
/// stage free (--decoder-first/last-pipeline-num-layers, at least one block each), every stage between them
/// the same count (at least one), each split timed by train::estimate_step on cluster `c` through `cache`.
/// Nothing when `r` runs as it is, is interleaved or counts the embedding or the loss as layers (then its
/// split is Megatron-Core's even one already), or when no such split fits. On one device type the even split
/// is among those tried; on a mixed cluster the interior stages may sit on devices of different speeds, which
/// is what the placers' uneven interior splits were for and Megatron-LM cannot express.
inline std::optional<place::ranked_plan> megatron_resplit(const model::model& m, const cluster::cluster& c,
                                                          const place::ranked_plan& r,
                                                          const sched::schedule_cache& cache) {
  const int pp = r.parallel.pp;
  if (megatron_can_split(r) || pp < 2 || r.knobs.schedule == train::pipeline_schedule::interleaved ||
      train::counts_embedding_or_loss(r.knobs))
    return std::nullopt;
  const std::int64_t blocks = model::body_nodes(m);
  std::optional<place::ranked_plan> best;
  const int interior = pp - 2;
  // Two stages have no interior: one pass over the first stage's count.
  for (std::int64_t each = 1; each * interior + 2 <= blocks && (interior > 0 || each == 1); ++each) {
    const std::int64_t ends = blocks - each * interior;  // first + last
    for (std::int64_t first = 1; first < ends; ++first) {
      std::vector<std::int64_t> counts(static_cast<std::size_t>(pp), each);
      counts.front() = first;
      counts.back() = ends - first;
      std::vector<train::stage_layers> split = train::split_of_blocks(m, counts, pp);
      const sched::schedule_cache tracked = cache.tracked();
      train::step_estimate e = train::estimate_step(m, c, r.parallel, r.knobs, tracked, split);
      if (!e.fits) continue;
      if (best && !(e.time_per_batch < best->estimate.time_per_batch)) continue;
      best = place::ranked_plan{
          r.parallel,         r.knobs, std::move(e), std::move(split), std::string{cache.scheduler()},
          tracked.worst_gap()};
    }
  }
  return best;
}

/// The fastest plan Megatron-LM can run among `plans` (a plan search's feasible plans, fastest first, each on
/// the best split of its settings): those it runs as they are, and the first `resplit` of the others each
/// given its fastest split Megatron-LM can express (megatron_resplit). Nothing when none of them can run.
inline std::optional<place::ranked_plan> fastest_megatron_plan(const model::model& m,
                                                               const cluster::cluster& c,
                                                               const std::vector<place::ranked_plan>& plans,
                                                               const sched::schedule_cache& cache,
                                                               std::size_t resplit = 4) {
  std::optional<place::ranked_plan> best;
  auto keep = [&](const place::ranked_plan& p) {
    if (!best || p.estimate.time_per_batch < best->estimate.time_per_batch) best = p;
  };
  std::size_t tried = 0;
  for (const auto& p : plans) {
    // No split of a plan beats the split the search gave it, and the plans come fastest first: once one is
    // no faster than the best runnable plan, none after it can be.
    if (best && !(p.estimate.time_per_batch < best->estimate.time_per_batch)) break;
    if (megatron_can_split(p)) {
      keep(p);
      break;  // the plans are fastest first: no later one that runs as it is can beat it
    }
    if (tried++ < resplit) {
      if (const auto again = megatron_resplit(m, c, p, cache)) keep(*again);
    }
  }
  return best;
}

/// Why Megatron-LM's pretrain_gpt.py cannot build `m` or run schedule `k` as phaze costs them, if it cannot
/// (flag names of Megatron-LM core_r0.11.0, tests/data/megatron/): layers it has no flag for, or GPipe.
inline std::optional<std::string> megatron_cannot_run(const model::model& m, const train::training_knobs& k) {
  const auto& c = m.config;
  if (k.overlap_param_gather && !k.overlap_grad_reduce && k.distributed_optimizer && !k.fsdp)
    return "it overlaps the parameter gather but not the gradient reduction, and Megatron-LM refuses "
           "--overlap-param-gather without --overlap-grad-reduce (validate_args): give --overlap grad,param";
  if (model::composite(m)) return "it is a composite model (layers of its own), not a transformer";
  if (c.hybrid())
    return "its blocks are a hybrid of Mamba-2 mixers, attention and MLPs (a layer pattern), which "
           "Megatron-LM "
           "builds with pretrain_mamba.py, not pretrain_gpt.py (core_r0.11.0 takes --hybrid-override-pattern "
           "with the mixer's sizes fixed; expert blocks, 'E', came in core_v0.16.0)";
  if (c.positions == model::position_kind::rotary && std::floor(c.rotary_base) != c.rotary_base)
    return fmt::format(
        "its rotary base ({}) is not a whole number, and Megatron-LM core_r0.11.0's --rotary-base takes an "
        "integer",
        c.rotary_base);
  if (k.schedule == train::pipeline_schedule::gpipe)
    return "Megatron-LM has no GPipe schedule (all forwards, then all backwards); use --schedule 1f1b or "
           "interleaved";
  if (k.grad_reduce_in_bf16 && !k.fsdp)
    return "--grad-reduce-in-bf16 came after Megatron-LM core_r0.11.0, which reduces bf16 gradients in fp32";
  // core_r0.11.0's FSDP2 shards the bf16 module without a mixed-precision policy: its gradients are kept and
  // reduce-scattered in bf16 (TorchFullyShardedDataParallel), so only a plan costed that way runs as costed.
  if (k.fsdp && !k.grad_reduce_in_bf16)
    return "Megatron-LM core_r0.11.0's FSDP2 keeps and reduces gradients in bf16; add "
           "--grad-reduce-in-bf16 so that phaze costs them so";
  if (c.experts > 0 && train::counts_embedding_or_loss(k))
    return "Megatron-LM core_r0.11.0 refuses --account-for-embedding/loss-in-pipeline-split beside a "
           "mixture of experts' load-balancing loss (validate_args)";
  if (k.fsdp && k.fsdp_shard > 0)
    return "its states are sharded over groups of data-parallel ranks (--fsdp-shard), and Megatron-LM "
           "core_r0.11.0's --use-torch-fsdp2 shards over all of them";
  if (c.experts > 0 && k.dispatcher == train::moe_dispatcher::flex)
    return "its tokens go through DeepEP's or HybridEP's dispatcher (--moe-dispatcher flex), which came "
           "after Megatron-LM core_r0.11.0 (later releases: --moe-token-dispatcher-type flex "
           "--moe-flex-dispatcher-backend deepep|hybridep)";
  if (c.experts > 0 && k.overlap_expert_comm)
    return "its all-to-alls run beside the other microbatch's pass (--overlap ep), which came after "
           "Megatron-LM core_r0.11.0 (later releases: --overlap-moe-expert-parallel-comm)";
  if (k.shard_gradients)
    return "its gradients are sharded (--shard-gradients, ZeRO stage 2), and Megatron-LM core_r0.11.0's "
           "distributed optimizer keeps them whole";
  // core_r0.11.0's TorchFullyShardedDataParallel calls fully_shard on each layer with FSDP2's default
  // resharding after forward, and runs without pipeline parallelism.
  if (k.fsdp && k.fsdp_reshard_after_forward == train::fsdp_reshard::never)
    return "its gathered weights stay gathered until the backward pass (--fsdp-reshard-after-forward never), "
           "and Megatron-LM core_r0.11.0's --use-torch-fsdp2 frees them after each forward";
  if (k.fsdp && k.fp8_param_gather)
    return "--fp8-param-gather needs the distributed optimizer there, which --use-torch-fsdp2 refuses";
  // core_r0.11.0's --use-torch-fsdp2 (megatron/training/arguments.py, validate_args) asserts untied
  // embeddings and no fp16; its pipeline and expert-parallel rules are kept by the search (pp = ep = 1).
  if (k.fsdp && c.tied_embeddings)
    return "--use-torch-fsdp2 needs untied embeddings (--untie-embeddings-and-output-weights) and this "
           "model ties them";
  if (k.fsdp && k.precision == hw::precision::fp16) return "--use-torch-fsdp2 does not run fp16";
  if (k.optimizer_dtype != hw::precision::fp32 && k.opt != train::optimizer::adam)
    return "Megatron-LM core_r0.11.0's precision-aware optimizer (a state below fp32) is Adam's";
  if (k.optimizer_dtype == hw::precision::fp16 && (!k.distributed_optimizer || k.fsdp))
    return "Megatron-LM core_r0.11.0's precision-aware optimizer (--optimizer-dtype fp16) runs only "
           "inside its distributed optimizer: add --distributed-optimizer, without --fsdp";
  if (k.optimizer_dtype == hw::precision::bf16)
    return "its optimizer state is bf16 without master weights, and Megatron-LM core_r0.11.0's "
           "precision-aware optimizer keeps fp32 or fp16 master weights (--optimizer-dtype fp16 runs "
           "there)";
  for (const auto& kind : m.kinds)
    if (kind.bf16)
      return "blocks kept in bf16 under FP8 (--first-last-layers-bf16) came after Megatron-LM core_r0.11.0";
  if (c.mlp == model::mlp_kind::relu) return "its MLP is ReLU, which Megatron-LM's GPT has no flag for";
  if (c.mlp == model::mlp_kind::geglu) return "its MLP is GeGLU, which Megatron-LM's GPT has no flag for";
  if (c.norm == model::norm_kind::pixelnorm) return "its norm is PixelNorm";
  if (c.parallel_residual) return "its attention and MLP run in parallel, which Megatron-LM's GPT does not";
  if (!c.pre_norm) return "its blocks normalize after the residual (post-norm)";
  if (c.attention_window > 0)
    return "its attention slides a window, which Megatron-LM core_r0.11.0 has no flag for";
  if (c.embed_dim_or_default() != c.hidden) return "its word embedding is narrower than the hidden size";
  if (c.positions == model::position_kind::alibi)
    return "its positions are ALiBi biases, which Megatron-LM core_r0.11.0 has no --position-embedding-type "
           "for";
  if (c.embedding_norm && c.arch != model::family::bert)
    return "it normalizes the word embedding (BLOOM), which Megatron-LM's GPT has no flag for";
  if (c.bert_heads || !c.causal) return "it is an encoder (BERT): use Megatron-LM's pretrain_bert.py";
  if (k.attention_kernel == model::attention_kernel::triton ||
      k.attention_kernel == model::attention_kernel::flex ||
      k.attention_kernel == model::attention_kernel::efficient)
    return fmt::format(
        "its attention runs {} (--attention-kernel {}), which Megatron-LM core_r0.11.0 has no "
        "backend for: give --attention-kernel cudnn, flash2 or flash3",
        k.attention_kernel == model::attention_kernel::triton ? "flash-attn 1.0's Triton kernel"
        : k.attention_kernel == model::attention_kernel::flex ? "PyTorch's FlexAttention"
                                                              : "PyTorch SDPA's memory-efficient kernel",
        model::to_string(k.attention_kernel));
  if (k.fused_loss)
    return "its loss runs as flash-attn's fused cross-entropy (--cross-entropy fused); Megatron-LM "
           "core_r0.11.0's --cross-entropy-loss-fusion is another kernel (fp32, the softmax kept), which "
           "phaze "
           "does not cost: give --cross-entropy megatron";
  if (k.eager_vector)
    return "its norms and activations run as eager PyTorch's kernels (--vector-kernels eager), where "
           "Megatron-LM fuses them: give --vector-kernels fused";
  if (k.foreach_optimizer)
    return "its optimizer runs as torch's multi-tensor Adam (--optimizer-kernels foreach), which Megatron-LM "
           "core_r0.11.0 runs only where neither Transformer Engine nor Apex is installed and has no flag "
           "for: give --optimizer-kernels fused";
  return std::nullopt;
}

/// The Megatron-LM command-line arguments that run a plan (pretrain_gpt.py flag names, Megatron-LM
/// core_r0.11.0): the architecture as phaze costed it, the parallel plan, the knobs and the step's overlaps.
inline std::string megatron_arguments(const model::model& m, const place::ranked_plan& r) {
  const auto& c = m.config;
  const auto& k = r.knobs;
  std::string out = fmt::format(
      "--num-layers {} --hidden-size {} --num-attention-heads {} --ffn-hidden-size {} --seq-length {} "
      "--max-position-embeddings {} --micro-batch-size {} --global-batch-size {} "
      "--tensor-model-parallel-size {} --pipeline-model-parallel-size {}",
      c.layers, c.hidden, c.heads, c.ffn, train::sequence_of(m, k), std::max(c.position_rows(), c.sequence),
      k.microbatch, k.global_batch, r.parallel.tp, r.parallel.pp);
  if (r.parallel.cp > 1) out += fmt::format(" --context-parallel-size {}", r.parallel.cp);
  if (c.kv_heads_or_default() != c.heads) {
    out += fmt::format(" --group-query-attention --num-query-groups {}", c.kv_heads_or_default());
  }
  if (c.head_dim > 0) out += fmt::format(" --kv-channels {}", c.head_dim);
  if (c.norm == model::norm_kind::rmsnorm) out += " --normalization RMSNorm";
  if (c.mlp == model::mlp_kind::swiglu) out += " --swiglu";
  if (c.mlp == model::mlp_kind::squared_relu) out += " --squared-relu";
  if (c.qk_norm) out += " --qk-layernorm";
  if (c.latent_attention()) {
    // Megatron-Core's MLASelfAttention; --qk-layernorm there is the RMSNorm over each latent.
    out += " --multi-latent-attention";
    if (c.q_lora_rank > 0) out += fmt::format(" --q-lora-rank {}", c.q_lora_rank);
    out += fmt::format(
        " --kv-lora-rank {} --qk-head-dim {} --qk-pos-emb-head-dim {} --v-head-dim {} --qk-layernorm",
        c.kv_lora_rank, c.head_dim_or_default(), c.rope_head_dim, c.value_head_dim());
  }
  if (c.positions == model::position_kind::rotary) {
    out += " --position-embedding-type rope";
    if (c.rotary_fraction < 1.0) out += fmt::format(" --rotary-percent {}", c.rotary_fraction);
    out += fmt::format(" --rotary-base {:.0f}", c.rotary_base);
    // Llama 3.1's scaling: core_r0.11.0 applies it with --use-rope-scaling, its factor by
    // --rope-scaling-factor (8 unless given).
    if (c.rope_scaling_factor > 0.0)
      out += fmt::format(" --use-rope-scaling --rope-scaling-factor {}", c.rope_scaling_factor);
  }
  if (!c.bias) out += c.qkv_bias ? " --disable-bias-linear --add-qkv-bias" : " --disable-bias-linear";
  if (!c.tied_embeddings) out += " --untie-embeddings-and-output-weights";
  if (!c.dropout) out += " --attention-dropout 0.0 --hidden-dropout 0.0";
  if (c.experts > 0) {
    // Megatron-Core's MoE as phaze costs it: the all-to-all dispatcher (megatron_cannot_run refuses the
    // others), grouped expert GEMMs, the permutation fused unless costed unfused, the experts split over tp
    // like the dense layers; the dense blocks (the first ones, or those between the expert blocks) as a
    // --moe-layer-freq pattern.
    out += fmt::format(
        " --num-experts {} --moe-router-topk {} --moe-ffn-hidden-size {} --moe-token-dispatcher-type "
        "alltoall --moe-grouped-gemm --expert-model-parallel-size {}",
        c.experts, c.top_k, c.expert_ffn_or_default(), r.parallel.ep);
    if (r.parallel.expert_tp() != r.parallel.tp)
      out += fmt::format(" --expert-tensor-parallel-size {}", r.parallel.expert_tp());
    if (c.shared_expert_ffn > 0)
      out += fmt::format(" --moe-shared-expert-intermediate-size {}", c.shared_expert_ffn);
    if (c.sigmoid_router) out += " --moe-router-score-function sigmoid";
    if (c.moe_every > 1 || c.lists_dense()) {
      // Experts every N-th block: the pattern block by block (Megatron-Core reads a list of 0 and 1).
      std::string pattern;
      for (std::int64_t i = 0; i < c.layers; ++i)
        pattern += (i > 0 ? "," : "") + std::string{c.moe_block(i) ? "1" : "0"};
      out += " --moe-layer-freq '[" + pattern + "]'";
    } else if (c.dense_layers > 0) {
      out += fmt::format(" --moe-layer-freq '([0]*{}+[1]*{})'", c.dense_layers, c.layers - c.dense_layers);
    }
    if (c.capacity_factor > 0.0)
      out += fmt::format(" --moe-expert-capacity-factor {} --moe-pad-expert-input-to-capacity",
                         c.capacity_factor);
    if (!k.unfused_permutation) out += " --moe-permute-fusion";
  }
  const auto& split = r.split;
  const bool uniform = std::all_of(split.begin(), split.end(), [&](const train::stage_layers& s) {
    return s.blocks == split.front().blocks;
  });
  if (split.size() >= 2 && !uniform && !train::counts_embedding_or_loss(k)) {
    // Megatron-core's uneven pipeline (arguments.py): the first and last stages' block counts.
    out += fmt::format(" --decoder-first-pipeline-num-layers {} --decoder-last-pipeline-num-layers {}",
                       split.front().blocks, split.back().blocks);
  }
  if (k.sequence_parallel) out += " --sequence-parallel";
  if (k.recompute == model::recompute::selective) out += " --recompute-activations";
  if (k.recompute == model::recompute::full)
    out += " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  if (k.embedding_in_pipeline_split) out += " --account-for-embedding-in-pipeline-split";
  if (k.loss_in_pipeline_split) out += " --account-for-loss-in-pipeline-split";
  if (k.schedule == train::pipeline_schedule::interleaved) {
    // With the embedding or loss counted as layers the chunks differ by a block: their number, not their
    // size.
    if (train::counts_embedding_or_loss(k)) {
      out += fmt::format(" --num-virtual-stages-per-pipeline-rank {}", k.virtual_stages);
    } else {
      out += fmt::format(" --num-layers-per-virtual-pipeline-stage {}",
                         c.layers / (static_cast<std::int64_t>(r.parallel.pp) * k.virtual_stages));
    }
  }
  out += fmt::format(" --make-vocab-size-divisible-by {}", k.vocab_padding);
  // FSDP2 under Megatron-LM core_r0.11.0: without the distributed optimizer and gradient accumulation
  // fusion, which --use-torch-fsdp2 refuses (validate_args).
  if (k.fsdp) out += " --use-torch-fsdp2 --no-gradient-accumulation-fusion";
  if (k.distributed_optimizer && !k.fsdp) out += " --use-distributed-optimizer";
  if (!k.gradient_accumulation_fusion && !k.fsdp) out += " --no-gradient-accumulation-fusion";
  // Megatron-Core's AttnBackend (core_r0.11.0): fused is Transformer Engine's cuDNN attention, flash its
  // FlashAttention backend (flash-attn 2 or 3, whichever is installed).
  const bool flash = k.attention_kernel == model::attention_kernel::flash2 ||
                     k.attention_kernel == model::attention_kernel::flash3;
  out += !k.fused_attention ? " --attention-backend unfused"
         : flash            ? " --attention-backend flash"
                            : " --attention-backend fused";
  if (k.overlap_grad_reduce) out += " --overlap-grad-reduce";
  if (k.overlap_param_gather && k.distributed_optimizer && !k.fsdp) out += " --overlap-param-gather";
  if (k.tp_comm_overlap && k.sequence_parallel) out += " --tp-comm-overlap";
  // core_r0.11.0 overlaps the interleaved schedule's sends by default; say when a plan was costed without.
  if (k.schedule == train::pipeline_schedule::interleaved && !k.overlap_p2p)
    out += " --no-overlap-p2p-communication";
  // FP8 as Transformer Engine runs it under Megatron-LM: bf16 outside the FP8 GEMMs, e4m3 forward and e5m2
  // backward ("hybrid"), delayed scaling over Megatron's documented amax history.
  if (k.precision == hw::precision::fp8)
    out +=
        " --bf16 --transformer-impl transformer_engine --fp8-format hybrid --fp8-amax-history-len 1024"
        " --fp8-amax-compute-algo max";
  if (k.fp8_param_gather) out += " --fp8-param-gather";
  if (k.precision == hw::precision::bf16) out += " --bf16";
  if (k.precision == hw::precision::fp16) out += " --fp16";
  if (k.opt == train::optimizer::sgd) out += " --optimizer sgd";
  if (k.optimizer_dtype == hw::precision::fp16)
    out +=
        " --use-precision-aware-optimizer --main-params-dtype fp16 --exp-avg-dtype fp16 --exp-avg-sq-dtype "
        "fp16";
  return out + "\n";
}

/// How to launch `ranks` ranks in the order of `ordered` with torchrun, whose global rank is the node rank's
/// offset (the local world sizes of the nodes before it) plus the local rank, the local rank indexing the
/// node's CUDA_VISIBLE_DEVICES: a hostfile in node-rank order and, per node, its device list and torchrun
/// line. Possible when every node's ranks are one block of consecutive ranks; otherwise a sentence saying so
/// and pointing at --emit rankfile. Nodes are named as `phaze cluster` numbers them.
inline std::string torchrun_launch(const cluster::cluster& ordered, int ranks) {
  const auto nodes = cluster::nodes_of(ordered);
  // Blocks of consecutive ranks on one node, in rank order.
  std::vector<std::pair<int, std::vector<int>>> blocks;  // node, its devices in local-rank order
  std::vector<bool> seen(nodes.size(), false);
  for (int r = 0; r < ranks; ++r) {
    const int d = ordered.device_of_rank(r);
    const int n = ordered.node_of_device(d);
    if (blocks.empty() || blocks.back().first != n) {
      if (seen[static_cast<std::size_t>(n)]) {
        return fmt::format(
            "# launch: this rank order gives node{} ranks that are not consecutive (rank {} comes back to "
            "it), "
            "which torchrun's node-by-node ranks cannot express; --emit rankfile gives an Open MPI rankfile "
            "that can, and --ranks megatron an order torchrun launches\n",
            n, r);
      }
      seen[static_cast<std::size_t>(n)] = true;
      blocks.push_back({n, {}});
    }
    blocks.back().second.push_back(d - nodes[static_cast<std::size_t>(n)].first_device);
  }
  std::string out = fmt::format(
      "# launch: {} ranks on {} nodes with torchrun (global rank = the ranks of the nodes before it + local "
      "rank; local rank i runs on the node's CUDA_VISIBLE_DEVICES[i])\n# hostfile, in node-rank order:\n",
      ranks, blocks.size());
  for (const auto& [node, devices] : blocks) out += fmt::format("node{} slots={}\n", node, devices.size());
  const std::string master = fmt::format("node{}", blocks.front().first);
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    const auto& [node, devices] = blocks[k];
    std::string visible;
    for (const int d : devices) visible += (visible.empty() ? "" : ",") + std::to_string(d);
    out += fmt::format(
        "# on node{}: CUDA_VISIBLE_DEVICES={} torchrun --nnodes {} --node_rank {} --nproc_per_node {} "
        "--master_addr {} --master_port 29500 pretrain_gpt.py <the arguments above>\n",
        node, visible, blocks.size(), k, devices.size(), master);
  }
  return out;
}

}  // namespace phaze::io
