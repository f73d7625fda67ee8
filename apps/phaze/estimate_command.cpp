// `phaze estimate MODEL (--device DEV --devices N [--devices-per-node G] | --cluster FILE) --tp T --pp P
// [--dp D] [--cp C] [--vp V]
// --global-batch B --microbatch M [--seq S] [--vocab V] [--recompute none|selective|full]
// [--schedule 1f1b|gpipe|interleaved] [--sequence-parallel] [--optimizer adam|sgd] [--distributed-optimizer]
// [--recompute-layers N] [--precision bf16|fp16|fp32|fp8] [--bf16-blocks START,END] [--grad-reduce-in-bf16]
// [--attention fused|unfused] [--overlap LIST] [--solver ilp|list]
// [--stage-blocks B0,B1,... | --pipeline-model-parallel-layout LAYOUT] [--format table|json]`: the time,
// throughput, MFU and memory of one fully given training plan (docs/cli.md; docs/step-time.md).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli.hpp"
#include "estimate.hpp"
#include "phaze/core/error.hpp"
#include "phaze/io/device_source.hpp"
#include "phaze/io/estimate_report.hpp"
#include "phaze/io/model_source.hpp"
#include "phaze/io/table.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

namespace phaze::cli {

namespace {

/// The stage split a Megatron-Core pipeline layout gives (train::parse_pipeline_layout), with the virtual
/// stages and the schedule it implies set on `k`: each stage holds its chunks' blocks, the first the
/// embedding and the last the loss.
std::vector<train::stage_layers> split_of_layout(const estimate_options& o, const model::model& m,
                                                 train::training_knobs& k) {
  if (!o.stage_blocks.empty())
    throw input_error("--pipeline-model-parallel-layout and --stage-blocks both give the split; keep one");
  if (train::counts_embedding_or_loss(k)) {
    throw input_error(
        "--pipeline-model-parallel-layout places the embedding (E) and the loss (L) itself; drop "
        "--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split");
  }
  const train::pipeline_layout layout =
      train::parse_pipeline_layout(o.layout, o.pp, model::body_nodes(m), m.config.mtp_layers);
  const int vp = layout.chunks_per_stage();
  if (o.run.vp != 1 && o.run.vp != vp) {
    throw input_error(fmt::format(
        "--vp {} but --pipeline-model-parallel-layout gives {} chunks per stage ({} chunks over --pp {}); "
        "drop --vp or make them agree",
        o.run.vp, vp, vp * o.pp, o.pp));
  }
  if (vp > 1) {
    if (k.schedule == train::pipeline_schedule::gpipe)
      throw input_error(
          "--pipeline-model-parallel-layout with several chunks per stage runs interleaved; drop "
          "--schedule gpipe");
    k.schedule = train::pipeline_schedule::interleaved;
    k.virtual_stages = vp;
  }
  return train::split_of_layout(layout);
}

}  // namespace

estimate_input build_estimate(const estimate_options& o) {
  model::model m = io::load_model(o.model);
  m = shaped(std::move(m), o.run);
  const chosen_cluster chosen = resolve_cluster(o.where, "estimate");
  const cluster::cluster c = with_calibration(o.step, chosen.value);

  train::parallelism p{o.tp, o.pp, o.dp, o.cp, o.ep, o.etp};
  if (o.cp <= 0) train::rules::parallel_degrees_must_be_positive();
  if (p.dp == 0) p.dp = train::data_parallel_degree(c.devices() / std::max(o.cp, 1), o.tp, o.pp);
  train::training_knobs k;
  k.global_batch = o.global_batch;
  k.microbatch = o.microbatch;
  apply_run_options(o.run, k);
  k.recompute = train::parse_recompute(o.recompute);
  k.recompute_layers = o.recompute_layers;
  k.recompute_by = o.recompute_method == "uniform" ? train::recompute_method::uniform
                   : o.recompute_method == "every" ? train::recompute_method::every
                                                   : train::recompute_method::block;
  if (!o.recompute_modules.empty()) {
    k.recompute_modules = 0;
    for (const std::string& name : o.recompute_modules)
      k.recompute_modules =
          static_cast<std::uint8_t>(k.recompute_modules | model::recompute_module::bit_of(name));
  }
  k.sequence_parallel = o.sequence_parallel && o.tp > 1;
  apply_step_options(o.step, k, device_types(c));
  m = apply_model_options(o.step, std::move(m), k);
  if (!o.layout.empty()) {
    if (model::composite(m))
      throw input_error(
          "--pipeline-model-parallel-layout lays out a transformer's blocks; this model is composite");
    std::vector<train::stage_layers> split = split_of_layout(o, m, k);
    train::validate(m, p, k, c.devices(), false);
    return {std::move(m), c, chosen.label, p, k, std::move(split)};
  }
  train::validate(m, p, k, c.devices(), o.stage_blocks.empty());

  std::vector<train::stage_layers> split;
  if (!o.stage_blocks.empty() && train::counts_embedding_or_loss(k) &&
      k.schedule != train::pipeline_schedule::interleaved) {
    // Without model chunks the counted layers change nothing in a split given stage by stage.
    throw input_error(
        "--stage-blocks gives the blocks of every stage, and --account-for-embedding-in-pipeline-split / "
        "--account-for-loss-in-pipeline-split only shape Megatron-Core's even split (and, under the "
        "interleaved "
        "schedule, how a given stage divides into chunks); drop them or --stage-blocks");
  }
  if (!o.stage_blocks.empty()) {
    const int chunks = k.schedule == train::pipeline_schedule::interleaved ? k.virtual_stages : 1;
    split = train::split_of_blocks(m, o.stage_blocks, p.pp, chunks, k.embedding_in_pipeline_split,
                                   k.loss_in_pipeline_split);
  }
  return {std::move(m), c, chosen.label, p, k, std::move(split)};
}

namespace {
int run_estimate(const estimate_options& o) {
  const estimate_input in = build_estimate(o);
  const model::model& m = in.m;
  const cluster::cluster& c = in.c;
  const train::parallelism& p = in.p;
  const train::training_knobs& k = in.k;
  const sched::schedule_cache cache = schedule_cache_for(o.solver);
  const train::step_estimate e = train::estimate_step(m, c, p, k, cache, in.split);

  if (parse_format(o.format) == output_format::json) {
    auto j = io::estimate_json(m, c, p, k, e);
    j["scheduler"] = std::string{cache.scheduler()};
    j["schedule_gap"] = cache.worst_gap();
    print_json(io::schemas::estimate, j);
  } else {
    print_text(io::estimate_table(m, c, p, k, e));
    print_text(fmt::format("\nlayer times: {}\n", schedules_text(cache.scheduler(), cache.worst_gap())));
  }
  if (!e.fits) {
    // The first stage that does not fit its own devices (on mixed clusters not always the peak stage).
    std::size_t i = 0;
    while (i + 1 < e.stages.size() && e.stages[i].memory <= e.stages[i].capacity) ++i;
    throw infeasible_error(fmt::format(
        "the plan does not fit: stage {} needs {} per device but {} holds {}; use more pipeline or tensor "
        "parallelism, a smaller microbatch, recomputation, the distributed optimizer or --fsdp",
        i, io::format_bytes(e.stages[i].memory),
        io::stage_device_text(c, static_cast<std::int64_t>(i) * p.tp * p.cp * p.dp, e.stages[i]),
        io::format_bytes(e.stages[i].capacity)));
  }
  return 0;
}
}  // namespace

void add_estimate_options(CLI::App& parser_ref, estimate_options& options) {
  CLI::App* parser = &parser_ref;
  estimate_options* o = &options;
  parser->add_option("MODEL", o->model, "a zoo name or a path to a HuggingFace config.json")->required();
  add_cluster_options(*parser, o->where);
  parser->add_option("--tp", o->tp, "tensor-parallel width")->required()->check(device_count);
  parser->add_option("--pp", o->pp, "pipeline stages")->required()->check(device_count);
  parser->add_option("--cp", o->cp, "context-parallel size (sequence split over cp ranks, ring attention)")
      ->default_str("1")
      ->check(device_count);
  parser
      ->add_option("--ep", o->ep,
                   "expert-parallel size (mixture-of-experts models: experts spread over ep of the dp ranks)")
      ->default_str("1")
      ->check(device_count);
  parser
      ->add_option(
          "--etp", o->etp,
          "expert tensor-parallel size (a divisor of tp; Megatron-Core's --expert-tensor-parallel-size): "
          "the experts' GEMMs split over etp ranks and the expert groups carved from all tp x dp x cp "
          "ranks of a stage (default: tp)")
      ->check(device_count);
  parser->add_option("--dp", o->dp, "data-parallel replicas (default: devices / (tp * pp * cp))")
      ->check(device_count);
  parser->add_option("--global-batch", o->global_batch, "sequences per iteration")
      ->required()
      ->check(batch_size);
  parser->add_option("--microbatch", o->microbatch, "sequences per microbatch")
      ->required()
      ->check(batch_size);
  parser->add_option("--recompute", o->recompute, "activation recomputation")
      ->check(CLI::IsMember({"none", "selective", "full"}))
      ->default_str("none");
  parser
      ->add_option(
          "--recompute-layers", o->recompute_layers,
          "with --recompute full: recompute only the first N blocks of each model chunk and keep the "
          "others' activations (Megatron-LM's --recompute-method block --recompute-num-layers N); "
          "0: every block")
      ->default_str("0");
  parser
      ->add_option("--recompute-method", o->recompute_method,
                   "with --recompute full, how --recompute-layers N picks the blocks: block (the first N of "
                   "each chunk), uniform (every block, checkpointed in groups of N: Megatron-LM's uniform "
                   "method) or every (every N-th block: torchtitan's selective layer checkpointing)")
      ->check(CLI::IsMember({"block", "uniform", "every"}))
      ->default_str("block");
  parser
      ->add_option("--recompute-modules", o->recompute_modules,
                   "with --recompute selective, the submodules of each block run again, comma-separated "
                   "(Megatron-Core's --recompute-modules): core_attn (the default), mlp, moe, shared_experts "
                   "(their inputs kept, the rest recomputed), layernorm, moe_act, mla_up_proj (their outputs "
                   "dropped and recomputed); or op alone: torchtitan's per-op policy (selective_ac_option "
                   "op: each block keeps the outputs of its attention kernel, its reduce-scatters and every "
                   "second bias-free matmul, and runs the rest again)")
      ->delimiter(',')
      ->check(CLI::IsMember(
          {"core_attn", "mlp", "moe", "shared_experts", "layernorm", "moe_act", "mla_up_proj", "op"}));
  parser->add_flag("--sequence-parallel", o->sequence_parallel, "Megatron sequence parallelism");
  add_run_options(*parser, o->run);
  add_step_options(*parser, o->step);
  add_solver_option(*parser, o->solver, "ilp");
  parser
      ->add_option("--stage-blocks", o->stage_blocks,
                   "transformer blocks per pipeline stage, comma-separated (default: the uniform split)")
      ->delimiter(',');
  parser->add_option(
      "--pipeline-model-parallel-layout", o->layout,
      "the layers of every model chunk as Megatron-Core writes them, chunks in layer order "
      "separated by |: E embedding, t block, m multi-token prediction, L loss, (...)*N and X*N "
      "repeat (e.g. \"Et|(tt|)*30mL\"); sets the chunks per stage (--vp) and the interleaved "
      "schedule");
  add_format_option(*parser, o->format);
}

command add_estimate_command(CLI::App& root) {
  auto o = std::make_shared<estimate_options>();
  CLI::App* parser = root.add_subcommand(
      "estimate", "Estimate time per batch, throughput, MFU and memory of one fully given training plan");
  add_estimate_options(*parser, *o);
  return {parser, [o] { return run_estimate(*o); }};
}

}  // namespace phaze::cli
