// Published training runs from sources phaze was not built against, each expressed as a phaze plan:
// MosaicML LLM Foundry's PyTorch-FSDP benchmark tables on A100 and the MLPerf Training LLM submissions on
// H100/H200. The tables are read at test time from PHAZE_SHARED_DIR/validation (llmfoundry_a100.tsv,
// mlperf_training_h100_h200.tsv); each file's header names its sources. How each column becomes a knob is
// written next to it below and in docs/validation.md; nothing is fitted per row.
#pragma once

#include <phaze/cluster/cluster.hpp>
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/model.hpp>
#include <phaze/model/transformer.hpp>
#include <phaze/train/calibration.hpp>
#include <phaze/train/knobs.hpp>
#include <phaze/train/step.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace phaze::testing {

/// One published run as phaze costs it.
struct published_run {
  std::string source;  ///< "llmfoundry" or "mlperf"
  std::string model;   ///< the published model name (the Spearman groups)
  std::string label;
  model::model m;
  cluster::cluster c;
  train::parallelism p;
  train::training_knobs k;
  double measured_s = 0.0;  ///< seconds per iteration
  double tokens_per_iteration = 0.0;
  [[nodiscard]] double predict(const train::calibration& cal = {}) const {
    const sched::schedule_cache cache;
    return train::estimate_step(m, train::calibrated(c, cal), p, train::calibrated(k, cal), cache)
        .time_per_batch.value();
  }
};

/// The rows of a tab-separated table whose '#' lines are comments and whose first other line is the header;
/// empty when the file is absent.
inline std::vector<std::map<std::string, std::string>> read_tsv(const std::string& path) {
  std::vector<std::map<std::string, std::string>> rows;
  std::ifstream in(path);
  if (!in.good()) return rows;
  std::vector<std::string> header;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, '\t');) cells.push_back(cell);
    if (header.empty()) {
      header = cells;
      continue;
    }
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

inline std::string validation_file(const std::string& name) {
  return std::string{PHAZE_SHARED_DIR} + "/validation/" + name;
}

inline cluster::cluster preset_cluster(std::string_view device, int devices) {
  const hw::device d = *hw::find_preset(device);
  return cluster::homogeneous(d, devices, *cluster::find_node_preset(device));
}

/// LLM Foundry's A100 rows. MPT (the header of the table): multi-head attention, 4h GELU MLP, LayerNorm with
/// biases, biases on, learned positions over the row's sequence, tied embeddings, vocabulary 50,368, no
/// dropout (MPT's defaults). Composer + PyTorch FSDP over all GPUs (tp = pp = 1; FULL_SHARD: --fsdp),
/// activation checkpointing of every block (act_ckpt: full recomputation), FSDP mixed precision PURE
/// (gradients reduced in bf16) or DEFAULT (in fp32), bf16 compute, attention by flash-attn 1.0's Triton
/// kernel (submit_benchmarks.py's default attn_impl triton), the loss by flash-attn's fused cross-entropy
/// (the models' default loss_fn fused_crossentropy). The node: DGX-like, 8 GPUs, 8 x 200 Gb/s (the table's
/// 1600 Gb/s RoCE), the a100-40gb / a100-80gb presets.
inline std::vector<published_run> llmfoundry_runs() {
  std::vector<published_run> runs;
  for (auto& r : read_tsv(validation_file("llmfoundry_a100.tsv"))) {
    const std::int64_t seq = std::stoll(r["seq"]);
    model::transformer_config mc{.name = "mpt",
                                 .arch = model::family::gpt,
                                 .hidden = std::stoll(r["d_model"]),
                                 .heads = std::stoll(r["heads"]),
                                 .ffn = std::stoll(r["ffn"]),
                                 .layers = std::stoll(r["layers"]),
                                 .vocab = std::stoll(r["vocab"]),
                                 .sequence = seq,
                                 .max_positions = seq};
    mc.dropout = false;
    const int gpus = std::stoi(r["gpus"]);
    const bool big = r["gpu"].rfind("A100-80", 0) == 0;
    published_run run{"llmfoundry",
                      r["model"],
                      "",
                      model::make_model(mc),
                      preset_cluster(big ? "a100-80gb" : "a100-40gb", gpus),
                      {1, 1, gpus},
                      {},
                      0.0,
                      0.0};
    auto& k = run.k;
    k.global_batch = std::stoll(r["global_bs"]);
    k.microbatch = std::stoll(r["micro_bs"]);
    k.precision = hw::precision::bf16;
    k.fsdp = true;
    k.fused_attention = true;
    k.attention_kernel = model::attention_kernel::triton;
    k.recompute = r["act_ckpt"] == "True" ? model::recompute::full : model::recompute::none;
    k.grad_reduce_in_bf16 = r["mp_mode"] == "PURE";
    k.host_overhead = train::eager_host_per_op;  // the command line's default: Composer runs eager PyTorch
    k.fused_loss = true;  // llm-foundry's default loss_fn fused_crossentropy (flash-attn's CrossEntropyLoss)
    k.eager_vector = true;  // Composer runs MPT's LayerNorm, GELU and residual adds as eager PyTorch ops
    run.tokens_per_iteration = std::stod(r["global_bs_tokens"]);
    run.measured_s = run.tokens_per_iteration / std::stod(r["tokens_per_s"]);
    run.label = r["model"] + " " + (big ? "80GB" : "40GB") + " x" + r["gpus"] + " s" + r["seq"] + " mb" +
                r["micro_bs"] + (r["act_ckpt"] == "True" ? " ckpt" : "") + " " + r["mp_mode"];
    runs.push_back(std::move(run));
  }
  return runs;
}

/// MLPerf Training's H100/H200 rows whose layout is published (one is not: left out). FP8 Transformer
/// Engine training (bf16 elsewhere), the distributed optimizer with overlapped gradient reduction and
/// parameter gather, sequence parallelism and TE's tensor-parallel overlap where tp > 1, overlapped
/// interleaved pipeline sends, FP8 weights where the notes say "fp8 params" (and on every Llama run).
/// GPT-3 175B as NeMo builds it (96 layers, hidden 12288, 96 heads, 4h GELU MLP, LayerNorm, biases, learned
/// positions, tied embeddings, sequence 2048) with GPT-3's vocabulary of 50,257 (Brown et al. 2020; the C4
/// SentencePiece model's size is not in the repository: 0.3% of the FLOPs) and no dropout. Llama 3.1 405B
/// and 8B: RMSNorm, SwiGLU, rotary positions, grouped-query attention, no biases, untied embeddings,
/// sequence 8192; the 405B with the Mixtral-8x22B tokenizer's 32,768 entries (the benchmark's README), its
/// 126 blocks split as Megatron-Core splits them with the embedding and the loss counted as one layer each
/// (ASYM_PP_EMBED/LOSS: 128 layers over pp 8 x vp 8; training_knobs::embedding_in_pipeline_split,
/// loss_in_pipeline_split); the 8B with Llama 3's 128,256.
/// DGX-like nodes: 8 GPUs, 8 x 400 Gb/s.
inline std::vector<published_run> mlperf_runs() {
  std::vector<published_run> runs;
  for (auto& r : read_tsv(validation_file("mlperf_training_h100_h200.tsv"))) {
    if (r["tp"] == "n/a") continue;
    const bool gpt = r["model"].rfind("gpt3", 0) == 0;
    model::transformer_config mc;
    if (gpt) {
      mc = {.name = "gpt3-mlperf",
            .arch = model::family::gpt,
            .hidden = 12288,
            .heads = 96,
            .ffn = 49152,
            .layers = 96,
            .vocab = 50257,
            .sequence = 2048,
            .max_positions = 2048};
    } else {
      const bool big = r["model"].find("405") != std::string::npos;
      mc = {.name = big ? "llama3.1-405b-mlperf" : "llama3.1-8b-mlperf",
            .arch = model::family::llama,
            .hidden = std::stoll(r["hidden"]),
            .heads = std::stoll(r["heads"]),
            .kv_heads = std::stoll(r["kv_heads"]),
            .ffn = std::stoll(r["ffn"]),
            .layers = std::stoll(r["layers"]),
            .vocab = big ? 32768 : 128256,
            .sequence = 8192};
      mc.norm = model::norm_kind::rmsnorm;
      mc.mlp = model::mlp_kind::swiglu;
      mc.positions = model::position_kind::rotary;
      mc.bias = false;
      mc.tied_embeddings = false;
    }
    mc.dropout = false;
    const int tp = std::stoi(r["tp"]);
    const int pp = std::stoi(r["pp"]);
    const int cp = std::stoi(r["cp"]);
    const int dp = std::stoi(r["dp"]);
    const int vp = r["vp"] == "n/a" ? 1 : std::stoi(r["vp"]);
    const int gpus = std::stoi(r["gpus"]);
    const bool h200 = r["gpu"].find("H200") != std::string::npos;
    published_run run{"mlperf",
                      gpt ? "gpt3-175b" : mc.name.str(),
                      "",
                      model::make_model(mc),
                      preset_cluster(h200 ? "h200" : "h100-sxm", gpus),
                      {tp, pp, dp, cp},
                      {},
                      0.0,
                      0.0};
    auto& k = run.k;
    k.global_batch = std::stoll(r["gbs"]);
    k.microbatch = std::stoll(r["mbs"]);
    k.precision = hw::precision::fp8;
    k.fused_attention = true;
    k.sequence_parallel = tp > 1;
    k.distributed_optimizer = true;
    k.overlap_grad_reduce = k.overlap_param_gather = true;
    k.tp_comm_overlap = tp > 1;
    k.overlap_p2p = true;
    k.fp8_param_gather = !gpt || r["notes"].find("fp8 params") != std::string::npos;
    k.vocab_padding = 128;
    k.host_overhead = train::eager_host_per_op;  // the command line's default
    k.embedding_in_pipeline_split = k.loss_in_pipeline_split = !gpt && pp > 1;
    if (vp > 1) {
      k.schedule = train::pipeline_schedule::interleaved;
      k.virtual_stages = vp;
    }
    run.measured_s = std::stod(r["step_time_s_median"]);
    run.tokens_per_iteration = static_cast<double>(k.global_batch) * static_cast<double>(mc.sequence);
    run.label = r["round"] + " " + r["submitter"] + " " + run.model + " x" + r["gpus"];
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace phaze::testing
