/// @file
/// `phaze estimate`'s output: a step estimate as the JSON object docs/cli.md lists and as a table.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "phaze/cluster/cluster.hpp"
#include "phaze/io/table.hpp"
#include "phaze/model/model.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

namespace phaze::io {

/// The blocks of `m` kept in bf16 under FP8 training (model::with_bf16_blocks).
inline std::int64_t bf16_block_count(const model::model& m) {
  std::int64_t n = 0;
  for (std::size_t v = 0; v < m.size(); ++v) n += m.kind_at(v).bf16 ? 1 : 0;
  return n;
}

/// The communication a plan of expert-parallel size `ep` overlaps with computation, as `--overlap` names it
/// (empty: none).
inline std::vector<std::string> overlap_names(const train::training_knobs& k, int ep) {
  std::vector<std::string> out;
  // Under fsdp the data-parallel collectives are always prefetched (step_model::exposed_fully_sharded).
  if (k.overlap_grad_reduce && !k.fsdp) out.emplace_back("grad");
  if (k.overlap_param_gather && k.distributed_optimizer && !k.fsdp) out.emplace_back("param");
  if (k.tp_comm_overlap && k.sequence_parallel) out.emplace_back("tp");
  if (k.overlap_p2p && k.schedule == train::pipeline_schedule::interleaved) out.emplace_back("pp");
  if (k.overlap_expert_comm && ep > 1) out.emplace_back("ep");
  return out;
}

/// The device types of a cluster as the reports name them: "a100-80gb", or "a100-80gb+v100-16gb".
inline std::string device_names(const cluster::cluster& c) {
  std::vector<std::string> names;
  for (const auto& g : c.groups()) {
    if (std::find(names.begin(), names.end(), g.device.name.str()) == names.end())
      names.push_back(g.device.name.str());
  }
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out.push_back('+');
    out.append(n);
  }
  return out;
}

/// The estimate as one JSON object: time_per_batch_s, throughput_samples_per_s, tokens_per_s,
/// model_flops_per_device_per_s, mfu, peak_memory_bytes, fits, plan{...}, breakdown{...}.
/// What full recomputation's layers and method add to its name: " (first 2 blocks of each chunk)",
/// " (checkpoints in groups of 4 blocks)", " (one block in 2)"; empty otherwise.
inline std::string recompute_pattern_text(const train::training_knobs& k) {
  if (k.recompute != model::recompute::full || k.recompute_layers <= 0) return {};
  switch (k.recompute_by) {
    case train::recompute_method::block:
      return fmt::format(" (first {} blocks of each chunk)", k.recompute_layers);
    case train::recompute_method::uniform:
      return fmt::format(" (checkpoints in groups of {} blocks)", k.recompute_layers);
    case train::recompute_method::every:
      return fmt::format(" (one block in {})", k.recompute_layers);
  }
  return {};
}

/// The recomputation as a report names it: the mode with its pattern.
/// The names of the submodules selective recomputation runs again (model::recompute_module).
inline std::vector<std::string> recompute_module_names(std::uint8_t bits) {
  std::vector<std::string> out;
  for (const auto& n : model::recompute_module::names)
    if ((bits & n.bit) != 0) out.emplace_back(n.name);
  return out;
}

inline std::string recompute_text(const train::training_knobs& k) {
  if (k.recompute == model::recompute::selective && k.recompute_modules != model::recompute_module::core_attn)
    return fmt::format("selective ({})", fmt::join(recompute_module_names(k.recompute_modules), ", "));
  return std::string{model::to_string(k.recompute)} + recompute_pattern_text(k);
}

/// The device types of a stage's ranks (`first` to `first + s.devices - 1`), each once in rank order.
inline std::vector<std::string> stage_type_names(const cluster::cluster& c, std::int64_t first,
                                                 const train::stage_estimate& s) {
  std::vector<std::string> out;
  for (std::int64_t r = first; r < first + s.devices; ++r) {
    std::string name = c.device_at(static_cast<int>(r)).name.str();
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
    if (!s.mixed) break;
  }
  return out;
}

/// What runs a stage: its device type, or on a stage of several types the one that paces it and all of
/// them ("t4, slowest of v100 + t4").
inline std::string stage_device_text(const cluster::cluster& c, std::int64_t first,
                                     const train::stage_estimate& s) {
  const std::string pacing = c.device_at(static_cast<int>(s.pacing_rank)).name.str();
  if (!s.mixed) return pacing;
  return fmt::format("{}, slowest of {}", pacing, fmt::join(stage_type_names(c, first, s), " + "));
}

inline nlohmann::ordered_json estimate_json(const model::model& m, const cluster::cluster& c,
                                            const train::parallelism& p, const train::training_knobs& k,
                                            const train::step_estimate& e) {
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < e.stages.size(); ++i) {
    const auto& s = e.stages[i];
    const auto first = static_cast<std::int64_t>(i) * s.devices;
    stages.push_back({{"layers", s.layers},
                      {"blocks", s.blocks},
                      {"devices", s.devices},
                      {"device", c.device_at(static_cast<int>(s.pacing_rank)).name.str()},
                      {"device_types", stage_type_names(c, first, s)},
                      {"first_rank", first},
                      {"capacity_bytes", s.capacity.value()},
                      {"fwd_s", s.forward.value()},
                      {"bwd_s", s.backward.value()},
                      {"recompute_s", s.recompute.value()},
                      {"memory_bytes", s.memory.value()}});
  }
  const auto& b = e.breakdown;
  return {{"model", m.config.name.str()},
          {"device", device_names(c)},
          {"devices", p.devices()},
          {"global_batch", k.global_batch},
          {"sequence", train::sequence_of(m, k)},
          {"time_per_batch_s", e.time_per_batch.value()},
          {"throughput_samples_per_s", e.samples_per_s},
          {"tokens_per_s", e.tokens_per_s},
          {"model_flops_per_device_per_s", e.model_flops_per_device.value()},
          {"mfu", e.mfu},
          {"peak_memory_bytes", e.peak_memory.value()},
          {"memory_capacity_bytes", e.memory_capacity.value()},
          {"fits", e.fits},
          {"plan",
           {{"tp", p.tp},
            {"pp", p.pp},
            {"dp", p.dp},
            {"cp", p.cp},
            {"ep", p.ep},
            {"etp", p.expert_tp()},
            {"vp", k.virtual_stages},
            {"microbatch", k.microbatch},
            {"microbatches", e.microbatches},
            {"recompute", std::string{model::to_string(k.recompute)}},
            {"recompute_layers", k.recompute_layers},
            {"recompute_method", std::string{train::to_string(k.recompute_by)}},
            {"recompute_modules", recompute_module_names(k.recompute_modules)},
            {"schedule", std::string{train::to_string(k.schedule)}},
            {"sequence_parallel", k.sequence_parallel},
            {"optimizer", std::string{train::to_string(k.opt)}},
            {"distributed_optimizer", k.distributed_optimizer},
            {"fsdp", k.fsdp},
            {"shard_gradients", k.shard_gradients},
            {"fsdp_shard", k.fsdp ? train::shard_ranks(k, p.dp * p.cp) : 0},
            {"fsdp_reshard_after_forward", std::string{train::to_string(k.fsdp_reshard_after_forward)}},
            {"fsdp_keeps_weights", train::fsdp_keeps_weights(k, p.pp)},
            {"optimizer_dtype", std::string{hw::to_string(k.optimizer_dtype)}},
            {"precision", std::string{hw::to_string(k.precision)}},
            {"bf16_blocks", bf16_block_count(m)},
            {"grad_reduce_in_bf16", k.grad_reduce_in_bf16},
            {"gradient_accumulation_fusion", k.gradient_accumulation_fusion},
            {"optimizer_kernels", k.foreach_optimizer ? "foreach" : "fused"},
            {"fp8_param_gather", k.fp8_param_gather},
            {"embedding_in_pipeline_split", k.embedding_in_pipeline_split},
            {"loss_in_pipeline_split", k.loss_in_pipeline_split},
            {"attention", k.fused_attention ? "fused" : "unfused"},
            {"attention_kernel", std::string{model::to_string(k.attention_kernel)}},
            {"cross_entropy", k.fused_loss ? "fused" : "megatron"},
            {"vector_kernels", k.eager_vector ? "eager" : "fused"},
            {"host_overhead_us", std::round(k.host_overhead * 1e9) / 1e3},  // to the nanosecond
            {"overlap", overlap_names(k, p.ep)},
            {"moe_dispatcher", std::string{train::to_string(k.dispatcher)}},
            {"moe_permutation", k.unfused_permutation ? "unfused" : "fused"},
            {"stages", stages}}},
          {"breakdown",
           {{"compute_s", b.compute.value()},
            {"bubble_s", b.bubble.value()},
            {"recompute_s", b.recompute.value()},
            {"tp_comm_s", b.tp_comm.value()},
            {"pp_comm_s", b.pp_comm.value()},
            {"dp_comm_s", b.dp_comm.value()},
            {"optimizer_s", b.optimizer.value()},
            {"overhead_s", b.overhead.value()}}}};
}

/// How the step runs, for a report's headline: sequence, vocabulary (and the rows Megatron-LM pads it to at
/// tensor-parallel width `tp`; `ep` the expert-parallel size, whose exchange EP overlap hides), precision,
/// attention, distributed optimizer and the overlapped communication
/// ("sequence 2048, vocabulary 50257 (padded to 50304), bf16, fused attention, distributed optimizer, overlap
/// grad+param"). A model without a vocabulary (a composite one) says so.
inline std::string step_summary(const model::model& m, const train::training_knobs& k, int tp = 1,
                                int ep = 1) {
  const std::int64_t vocab = m.config.vocab;
  const std::int64_t multiple = static_cast<std::int64_t>(std::max(k.vocab_padding, 1)) * std::max(tp, 1);
  const std::int64_t padded = vocab > 0 ? (vocab + multiple - 1) / multiple * multiple : 0;
  const std::string vocabulary = vocab <= 0 ? "no vocabulary"
                                 : padded == vocab
                                     ? fmt::format("vocabulary {}", vocab)
                                     : fmt::format("vocabulary {} (padded to {})", vocab, padded);
  std::string out = fmt::format("sequence {}, {}, {}, {} attention", train::sequence_of(m, k), vocabulary,
                                hw::to_string(k.precision), k.fused_attention ? "fused" : "unfused");
  if (const std::int64_t n = bf16_block_count(m); n > 0) out += fmt::format(" ({} blocks in bf16)", n);
  if (k.fp8_param_gather) out += ", FP8 weights";
  if (k.fused_loss) out += ", fused cross-entropy";
  if (k.eager_vector) out += ", eager vector kernels";
  if (k.grad_reduce_in_bf16) out += ", bf16 gradients";
  if (!k.gradient_accumulation_fusion) out += ", gradients accumulated by a kernel of their own";
  if (k.foreach_optimizer) out += ", multi-tensor Adam";
  if (k.optimizer_dtype != hw::precision::fp32)
    out += fmt::format(", {} optimizer state", hw::to_string(k.optimizer_dtype));
  if (k.fsdp && k.fsdp_shard > 0) {
    out += fmt::format(", hybrid sharded (HSDP over groups of {}, gathers prefetched)", k.fsdp_shard);
  } else if (k.fsdp) {
    out += ", fully sharded (FSDP, gathers prefetched)";
  } else if (k.distributed_optimizer && k.shard_gradients) {
    out += ", distributed optimizer and sharded gradients (ZeRO-2)";
  } else if (k.distributed_optimizer) {
    out += ", distributed optimizer";
  }
  if (k.fsdp && k.fsdp_reshard_after_forward != train::fsdp_reshard::by_pipeline)
    out += fmt::format(", reshard after forward {}", train::to_string(k.fsdp_reshard_after_forward));
  if (k.dispatcher != train::moe_dispatcher::all_to_all)
    out += fmt::format(", {} token dispatcher", train::to_string(k.dispatcher));
  if (k.unfused_permutation) out += ", unfused permutation";
  const auto overlap = overlap_names(k, ep);
  out += overlap.empty() ? ", nothing overlapped" : ", overlap " + fmt::format("{}", fmt::join(overlap, "+"));
  return out;
}

/// The estimate for people: a summary, the time breakdown and the per-stage table.
inline std::string estimate_table(const model::model& m, const cluster::cluster& c,
                                  const train::parallelism& p, const train::training_knobs& k,
                                  const train::step_estimate& e) {
  std::string out = fmt::format(
      "{} on {} x {}: tp {}, pp {}, dp {}{}, vp {}, microbatch {} ({} per replica), recompute {}, schedule "
      "{}{}\n{}\n\n",
      m.config.name.view(), p.devices(), device_names(c), p.tp, p.pp, p.dp,
      (p.cp > 1 ? fmt::format(", cp {}", p.cp) : std::string{}) +
          (p.ep > 1 ? fmt::format(", ep {}", p.ep) : std::string{}) +
          (p.expert_tp() != p.tp ? fmt::format(", etp {}", p.expert_tp()) : std::string{}),
      k.virtual_stages, k.microbatch, e.microbatches, recompute_text(k), train::to_string(k.schedule),
      k.sequence_parallel ? ", sequence parallel" : "", step_summary(m, k, p.tp, p.ep));
  text_table summary{{}, {align::left, align::right}};
  summary.add_row({"time per batch", fmt::format("{:.4g} s", e.time_per_batch.value())});
  summary.add_row({"throughput", fmt::format("{:.4g} samples/s", e.samples_per_s)});
  summary.add_row({"tokens", fmt::format("{:.4g} tokens/s", e.tokens_per_s)});
  summary.add_row({"model FLOP/s per device", format_flops(flops{e.model_flops_per_device.value()}) + "/s"});
  summary.add_row({"MFU", fmt::format("{:.1f}%", 100.0 * e.mfu)});
  summary.add_row({"peak memory per device", fmt::format("{} of {} (stage {})", format_bytes(e.peak_memory),
                                                         format_bytes(e.memory_capacity), e.peak_stage)});
  summary.add_row({"fits", e.fits ? "yes" : "no"});
  out += summary.render() + "\n";

  const auto& b = e.breakdown;
  const double t = e.time_per_batch.value();
  text_table parts{{"part", "seconds", "share"}, {align::left, align::right, align::right}};
  auto part = [&](const char* name, seconds s) {
    parts.add_row({name, fmt::format("{:.4g}", s.value()), fmt::format("{:.1f}%", 100.0 * s.value() / t)});
  };
  part("compute", b.compute);
  part("bubble", b.bubble);
  part("recompute", b.recompute);
  part("tp comm", b.tp_comm);
  part("pp comm", b.pp_comm);
  part("dp comm", b.dp_comm);
  part("optimizer", b.optimizer);
  if (b.overhead.value() > 0.0) part("overhead", b.overhead);
  out += parts.render() + "\n";

  text_table stages{
      {"stage", "layers", "devices", "ranks", "device", "fwd s", "bwd s", "recompute s", "memory", "of"},
      {align::right, align::right, align::right, align::left, align::left, align::right, align::right,
       align::right, align::right, align::right}};
  for (std::size_t i = 0; i < e.stages.size(); ++i) {
    const auto& s = e.stages[i];
    const auto first = static_cast<std::int64_t>(i) * s.devices;
    stages.add_row({std::to_string(i), std::to_string(s.layers), std::to_string(s.devices),
                    fmt::format("{}-{}", first, first + s.devices - 1), stage_device_text(c, first, s),
                    fmt::format("{:.4g}", s.forward.value()), fmt::format("{:.4g}", s.backward.value()),
                    fmt::format("{:.4g}", s.recompute.value()), format_bytes(s.memory),
                    format_bytes(s.capacity)});
  }
  out += stages.render();
  return out;
}

}  // namespace phaze::io
