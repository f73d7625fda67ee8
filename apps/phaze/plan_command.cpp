// `phaze plan MODEL (--device DEV --devices N [--devices-per-node G] | --cluster FILE) --global-batch B
// [--tp T] [--pp P] [--dp D] [--cp LIST] [--ep E]
// [--microbatch M] [--recompute none|selective|full] [--sequence-parallel|--no-sequence-parallel] [--seq S]
// [--vocab V] [--schedule ...] [--vp V] [--optimizer ...] [--distributed-optimizer] [--precision ...]
// [--top K] [--emit megatron] [--format table|json]`: the best Megatron-style plan for a model on a cluster
// (docs/cli.md); any of tp/pp/dp/microbatch/recompute/sequence parallelism given fixes that choice.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "phaze/cluster/analysis.hpp"
#include "phaze/core/error.hpp"
#include "phaze/io/device_source.hpp"
#include "phaze/io/estimate_report.hpp"
#include "phaze/io/layer_table_json.hpp"
#include "phaze/io/megatron_launch.hpp"
#include "phaze/io/model_source.hpp"
#include "phaze/io/plan_report.hpp"
#include "phaze/io/table.hpp"
#include "phaze/place/brute_force.hpp"
#include "phaze/place/chain_dp.hpp"
#include "phaze/place/downset_dp.hpp"
#include "phaze/place/plan_ranks.hpp"
#include "phaze/place/plan_search.hpp"
#include "phaze/place/uniform.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::cli {

namespace {
struct plan_options {
  std::string model;
  cluster_choice where;
  std::optional<int> tp, pp, dp, ep;
  std::vector<int> cp;  // empty: 1
  std::optional<std::int64_t> microbatch;
  std::optional<std::string> recompute;
  bool sequence_parallel = false;
  bool no_sequence_parallel = false;
  std::int64_t global_batch = 0;
  run_options run;
  int top = 1;
  std::string emit;
  std::string ranks = "auto";
  std::uint64_t rank_seed = 1;
  std::int64_t rank_iterations = 20000;
  int threads = 0;  // --threads: the group orders' worker threads (0: every core)
  std::string layer_table;
  std::string placer = "chain";
  bool placer_given = false;  // --placer was on the command line
  std::string solver = "ilp";
  std::string format = "table";
  std::string report;     // --report DIR: the best plan's report (empty: none)
  bool progress = false;  // --progress: progress lines even for short runs and when stderr is not a terminal
  step_options step;
};

/// The placer `--placer NAME` names, for tables of `Policy` (for a model, uniform is not used as a placer of
/// its tables: plan_search evaluates Megatron-LM's even split directly).
template <class Policy>
place::any_placer<place::cost_table, Policy> placer_named(const std::string& name) {
  if (name == "downset") return place::downset_placer{};
  if (name == "brute") return place::brute_force_placer{};
  if (name == "uniform") return place::uniform_placer{};
  return place::chain_placer{};
}

/// `phaze plan --layer-table FILE [--placer ...]`: a placer on a layer cost table from any source
/// (docs/layer-table.md); --devices, --tp, --pp and --dp override or fix the table's choices.
int run_on_layer_table(const plan_options& o);
}  // namespace

place::model_placer model_placer_for(const std::string& name) {
  return placer_named<place::step_policy>(name);
}

namespace {
/// The group orders' candidates timed on every core (oneTBB); they are decided in order, so the order found
/// is the serial search's (place::rank_search_settings::parallel).
void on_all_cores(std::size_t n, const std::function<void(std::size_t)>& body) {
  oneapi::tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) { body(i); });
}

int run_on_layer_table(const plan_options& o) {
  auto problem = io::read_layer_table(o.layer_table);
  if (o.where.devices > 0) problem.devices = o.where.devices;
  if (o.placer == "uniform" && (!o.tp || !o.pp || !o.dp)) {
    throw input_error("the uniform placer needs --tp, --pp and --dp");
  }
  place::placement_request request;
  request.tp = o.tp.value_or(0);
  request.pp = o.pp.value_or(0);
  request.dp = o.dp.value_or(0);
  const place::plan best =
      placer_named<place::pipeline_policy>(o.placer).place(problem, place::pipeline_policy{}, request);
  if (!best.feasible) {
    throw infeasible_error(
        fmt::format("no plan fits: the leanest needs {} per device but the table allows {}",
                    io::format_bytes(best.smallest_memory_need), io::format_bytes(best.memory_per_device)));
  }
  if (parse_format(o.format) == output_format::json) {
    auto stages = nlohmann::ordered_json::array();
    for (const auto& st : best.stages) {
      stages.push_back({{"nodes", st.nodes},
                        {"time_s", st.time.value()},
                        {"memory_bytes", st.memory.value()},
                        {"microbatches_in_flight", st.microbatches_in_flight}});
    }
    print_json(io::schemas::table_plan,
               nlohmann::ordered_json{{"placer", o.placer},
                                      {"time_per_batch_s", best.time_per_batch.value()},
                                      {"peak_memory_bytes", best.peak_memory.value()},
                                      {"fits", true},
                                      {"plan",
                                       {{"tp", best.tp},
                                        {"pp", best.pp},
                                        {"dp", best.dp},
                                        {"microbatches_per_replica", best.microbatches_per_replica},
                                        {"stages", stages}}}});
  } else {
    print_text(fmt::format("{} placer on {}:\n", o.placer, o.layer_table) + place::to_string(best));
  }
  return 0;
}

/// Blocks per stage, runs of equal counts shortened: "4, 12x6, 8".
std::string blocks_per_stage(const place::ranked_plan& r) {
  std::string out;
  for (std::size_t i = 0; i < r.split.size();) {
    std::size_t j = i;
    while (j < r.split.size() && r.split[j].blocks == r.split[i].blocks) ++j;
    if (!out.empty()) out += ", ";
    out += j - i > 1 ? fmt::format("{}x{}", r.split[i].blocks, j - i) : std::to_string(r.split[i].blocks);
    i = j;
  }
  return out;
}

/// `phaze plan --layer-table FILE`: the options that cost a model's layers are refused, then the placer runs
/// on the table.
int run_plan_on_layer_table(const plan_options& o) {
  if (!o.report.empty())
    throw input_error("--report draws a model's plan; with --layer-table there is no model: drop --report");
  if (!o.step.calibration.empty() || o.step.attention_kernel != "auto" ||
      o.step.cross_entropy != "megatron" || o.step.vector_kernels != "fused" ||
      !std::isnan(o.step.host_overhead_us)) {
    throw input_error(
        "--calibration, --attention-kernel, --cross-entropy, --vector-kernels and --host-overhead change "
        "how a model's layers are costed; a layer table holds its layers' times already: drop them with "
        "--layer-table");
  }
  if (o.step.embedding_in_pipeline_split || o.step.loss_in_pipeline_split)
    throw input_error(
        "--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split split a "
        "model's transformer blocks; a layer table is placed by its placer: drop them with --layer-table");
  return run_on_layer_table(o);
}

/// What `phaze plan` plans: the cluster, the model with the options applied, the knobs it keeps and the
/// choices it searches (plan_choices_of).
struct plan_setup {
  chosen_cluster chosen;
  cluster::cluster c;
  model::model m;
  train::training_knobs base;
  place::plan_choices fixed;
  std::string memories;  ///< each device type's memory, for the message when no plan fits
};

/// The choices the plan search makes (what the options leave open) and those they fix, with the refusals
/// of choices that cannot run (a fixed expert- or context-parallel size, a depth the counted layers do not
/// divide, Megatron-LM's limits under --emit megatron).
place::plan_choices plan_choices_of(const plan_options& o, const model::model& m, const cluster::cluster& c,
                                    const train::training_knobs& base) {
  place::plan_choices fixed;
  fixed.placement = o.placer == "uniform" ? place::stage_placement::uniform : place::stage_placement::uneven;
  fixed.placer = placer_named<place::step_policy>(o.placer);
  if (o.tp) fixed.tensor_parallel = {*o.tp};
  if (o.ep) {
    if (m.config.experts == 0) model::rules::expert_parallelism_needs_a_mixture_of_experts_model();
    if (m.config.experts % *o.ep != 0) model::rules::expert_parallel_size_must_divide_experts();
    if (*o.ep > 1 && fixed.placement != place::stage_placement::uniform) {
      throw input_error(
          "--ep above 1 needs the uniform placer: the placers that split stages unevenly do not carry expert "
          "parallelism; give --placer uniform (or no --placer, which then uses it)");
    }
    fixed.expert_parallel = {*o.ep};
    fixed.fold_experts = true;
  } else if (m.config.experts > 1 && o.layer_table.empty() && (!o.placer_given || o.placer == "uniform") &&
             !(o.emit == "megatron" && base.fsdp)) {
    // Expert parallelism is a choice of the plan: every power of two that divides the experts and fits the
    // devices, each where it divides dp or, with expert tensor parallelism 1, tp x dp x cp (plan_search), on
    // Megatron-LM's even split (the placers that split stages unevenly do not carry it).
    fixed.placement = place::stage_placement::uniform;
    fixed.fold_experts = true;
    for (int ep = 1; ep <= m.config.experts && ep <= c.devices(); ep *= 2)
      if (m.config.experts % ep == 0) fixed.expert_parallel.push_back(ep);
    fmt::print(stderr,
               "phaze: note: expert parallelism is searched (--ep {}) with Megatron-LM's uniform split; give "
               "--ep to fix it, or --placer chain to split stages unevenly without it\n",
               fmt::join(fixed.expert_parallel, ","));
  }
  if (!o.cp.empty()) {
    for (const int cp : o.cp) {
      if (cp < 1) throw input_error("--cp: every context-parallel size must be a positive whole number");
      if (c.devices() % cp != 0) {
        throw input_error(fmt::format(
            "--cp {}: a context-parallel size must divide the {} devices (each replica spans tp x cp of "
            "them); give sizes that divide {}",
            cp, c.devices(), c.devices()));
      }
    }
    fixed.context_parallel = o.cp;
  }
  fixed.pp = o.pp;
  if (train::counts_embedding_or_loss(base) && model::composite(m))
    train::rules::pipeline_layers_need_a_transformer();
  // A fixed depth the counted layers do not divide into: Megatron-Core's rule, named (not "no plan").
  if (o.pp) train::check_pipeline_split_layers(model::body_nodes(m), *o.pp, base);
  if (o.emit == "megatron" && m.config.mtp_layers > 0) {
    // Multi-token prediction came to Megatron-Core after core_r0.11.0, whose arguments --emit writes.
    throw input_error(
        "--emit megatron: the model has a multi-token prediction module, which Megatron-LM core_r0.11.0 (the "
        "version whose arguments --emit megatron writes) has no flag for; give --mtp-layers 0 to plan and "
        "emit "
        "it without the module");
  }
  if (o.emit == "megatron" && base.fsdp) {
    // Megatron-LM core_r0.11.0 runs FSDP2 without pipeline or expert parallelism (validate_args).
    if ((o.pp && *o.pp != 1) || (o.ep && *o.ep != 1))
      throw input_error(
          "--emit megatron with --fsdp: Megatron-LM core_r0.11.0 runs --use-torch-fsdp2 without pipeline and "
          "expert parallelism; give --pp 1 and --ep 1, or drop --emit megatron");
    fixed.pp = 1;
  }
  fixed.dp = o.dp;
  if (o.microbatch) fixed.microbatches = {*o.microbatch};
  if (o.recompute) fixed.recompute = {train::parse_recompute(*o.recompute)};
  if (o.sequence_parallel) fixed.sequence_parallel = {true};
  if (o.no_sequence_parallel) fixed.sequence_parallel = {false};
  return fixed;
}

/// The model, the cluster and the knobs of a plan from the options, refusing what --emit megatron cannot
/// write before any search.
plan_setup set_up_plan(const plan_options& o) {
  for (const auto& [value, name] :
       {std::pair{o.model.empty(), "MODEL"}, std::pair{o.global_batch == 0, "--global-batch"}}) {
    if (value)
      throw input_error(
          fmt::format("phaze plan needs {} (or --layer-table FILE); run 'phaze plan --help'", name));
  }
  const chosen_cluster chosen = resolve_cluster(o.where, "plan");
  const cluster::cluster c = with_calibration(o.step, chosen.value);
  model::model m = io::load_model(o.model);
  m = shaped(std::move(m), o.run);
  std::string memories;
  for (const auto& g : c.groups()) {
    const std::string each = fmt::format("{} holds {}", g.device.name.view(), io::format_bytes(g.device.hbm));
    if (memories.find(each) == std::string::npos) memories += (memories.empty() ? "" : ", ") + each;
  }
  if (o.sequence_parallel && o.no_sequence_parallel) {
    throw input_error("give --sequence-parallel or --no-sequence-parallel, not both");
  }

  train::training_knobs base;
  base.global_batch = o.global_batch;
  base.sequence = o.run.sequence;
  apply_run_options(o.run, base);
  apply_step_options(o.step, base, device_types(c));
  m = apply_model_options(o.step, std::move(m), base);
  // Refused before the search: what Megatron-LM cannot run as phaze would cost it.
  if (o.emit == "megatron") {
    if (const auto why = io::megatron_cannot_run(m, base)) {
      throw input_error(
          "--emit megatron writes Megatron-LM's arguments, and Megatron-LM cannot run this as phaze would "
          "cost it: " +
          *why + "; drop --emit megatron");
    }
    // Megatron-LM's --bf16 needs bf16 arithmetic, which cards before Ampere lack (phaze costs bf16 there at
    // the fp16 rate).
    for (const hw::device& d : device_types(c)) {
      if (base.precision != hw::precision::bf16 || d.kind != hw::device_kind::datasheet ||
          d.sheet.matrix_bf16.value() > 0.0)
        continue;
      throw input_error(fmt::format(
          "--emit megatron: device '{}' has no bf16 arithmetic, and Megatron-LM's --bf16 fails there; give "
          "--precision fp16",
          d.name.view()));
    }
  }
  place::plan_choices fixed = plan_choices_of(o, m, c, base);
  return plan_setup{chosen, c, std::move(m), base, std::move(fixed), std::move(memories)};
}

/// The plans found, fastest first, and the best plan's rank order.
struct plans_found {
  place::plan_search_result found;
  bool uneven = false;                 ///< stages placed unevenly (an interleaved schedule never is)
  std::string placement;               ///< how the stages were placed, as the reports say it
  std::size_t shown = 0;               ///< the plans listed (--top)
  sched::schedule_cache rank_cache;    ///< the layer schedules the order was timed on
  place::plan_order order;             ///< the best plan's rank order
  cluster::cluster ordered;            ///< the cluster in that order
  train::step_estimate best_estimate;  ///< the best plan in that order
  [[nodiscard]] const place::ranked_plan& best() const { return found.feasible.front(); }
};

/// Searches the plans (on list schedules, refined with the ILP under --solver ilp) and orders the best
/// plan's ranks; exit 3 when no plan fits.
plans_found find_plans(const plan_options& o, plan_setup& s, const sched::schedule_cache& cache) {
  const auto& c = s.c;
  const auto& m = s.m;
  const auto& base = s.base;
  const auto& memories = s.memories;
  // Plans are found on list schedules; with the ILP (the default) the best --top plans are then exact under
  // ILP schedules (place::search_plans refines every plan whose lower bound could reach them).
  if (o.solver == "ilp") s.fixed.refine = scheduler_for("ilp");
  s.fixed.refine_top = static_cast<std::size_t>(std::max(o.top, 1));
  progress_line line(o.progress);
  s.fixed.progress = line.hook();
  auto found = place::search_plans(m, c, base, s.fixed, cache);
  s.fixed.progress = nullptr;
  if (found.feasible.empty()) {
    throw infeasible_error(
        fmt::format("no plan fits: of {} plans evaluated, the leanest needs {} per device but {}; "
                    "use more devices, "
                    "a device with more memory, or allow recomputation and smaller microbatches",
                    found.evaluated, io::format_bytes(found.smallest_infeasible_need), memories));
  }
  const auto& best = found.feasible.front();
  // How the stages were placed, as the reports say it: the interleaved schedule is always placed uniformly.
  const bool uneven = s.fixed.placement == place::stage_placement::uneven &&
                      base.schedule != train::pipeline_schedule::interleaved;
  const std::string placement = uneven ? fmt::format("uneven ({} placer)", o.placer) : std::string{"uniform"};
  const std::size_t shown = std::min<std::size_t>(static_cast<std::size_t>(o.top), found.feasible.size());
  // Which devices run the best plan: its rank order, timed on the layer schedules it was chosen on.
  const sched::schedule_cache rank_cache = schedule_cache_for(o.solver);
  const place::plan_order order =
      place::order_ranks(m, c, best, rank_cache, place::parse_rank_method(o.ranks),
                         {o.rank_seed, o.rank_iterations, false, line.hook(), on_all_cores}, uneven);
  line.finish();
  const cluster::cluster ordered = order.order.empty() ? c : c.with_order(order.order);
  train::step_estimate best_estimate = order.order.empty() ? best.estimate : order.estimate;
  return plans_found{std::move(found), uneven, placement, shown,
                     rank_cache,       order,  ordered,   std::move(best_estimate)};
}

/// `--emit rankfile`: an Open MPI rankfile that realises the best plan's order.
int emit_rankfile(const plan_setup& s, const plans_found& p) {
  const auto& chosen = s.chosen;
  const auto& c = s.c;
  const auto& m = s.m;
  const auto& ordered = p.ordered;
  const place::ranked_plan& best = p.best();
  // An Open MPI rankfile that realises the order: rank r on the node and slot of its device.
  const auto nodes = cluster::nodes_of(c);
  std::string text = fmt::format("# {} ranks of {} on {}; nodes numbered as `phaze cluster` numbers them\n",
                                 best.parallel.devices(), m.config.name.view(), chosen.label);
  for (int r = 0; r < static_cast<int>(best.parallel.devices()); ++r) {
    const int d = ordered.device_of_rank(r);
    const int n = c.node_of_device(d);
    text +=
        fmt::format("rank {}=node{} slot={}\n", r, n, d - nodes[static_cast<std::size_t>(n)].first_device);
  }
  print_text(text);
  return 0;
}

/// `--emit megatron`: the fastest plan Megatron-LM can run, as its arguments and torchrun launch (or a
/// phaze.megatron-launch document).
int emit_megatron(const plan_options& o, const plan_setup& s, const plans_found& p,
                  const sched::schedule_cache& cache) {
  const auto& c = s.c;
  const auto& m = s.m;
  const auto& base = s.base;
  const auto& found = p.found;
  const auto& uneven = p.uneven;
  const auto& rank_cache = p.rank_cache;
  const auto& order = p.order;
  const auto& ordered = p.ordered;
  const auto& best_estimate = p.best_estimate;
  const place::ranked_plan& best = p.best();
  place::plan_choices fixed = s.fixed;  // the uniform search below changes the placement
  // The fastest plan Megatron-LM can run (its splits have equal interior stages), with the launch that
  // realises its own rank order (the split kept: it is the one Megatron-LM's arguments give).
  const auto emit = [&](const place::ranked_plan& r) {
    // The order torchrun launches: the best plan's when its nodes' ranks are consecutive, else the best
    // such order, searched the same way.
    const int ranks = static_cast<int>(r.parallel.devices());
    const bool is_best = r.parallel == best.parallel && r.knobs == best.knobs && r.split == best.split;
    std::vector<int> own = is_best ? order.order : std::vector<int>{};
    const bool reuse = is_best && (own.empty() || place::detail::ranks::node_blocks(ordered, ranks));
    if (!reuse) {
      own = place::order_ranks(m, c, r, rank_cache, place::parse_rank_method(o.ranks),
                               {o.rank_seed, o.rank_iterations, true, {}, on_all_cores}, false)
                .order;
    }
    const cluster::cluster on = own.empty() ? c : c.with_order(own);
    // The emitted plan timed as it launches (its split, its rank order), beside the fastest plan found.
    // On the rank order's layer schedules (the ILP under --solver ilp), tracked for this plan's own gap.
    const sched::schedule_cache timing = rank_cache.tracked();
    const train::step_estimate timed = train::estimate_step(m, on, r.parallel, r.knobs, timing, r.split);
    const std::string arguments = io::megatron_arguments(m, r);
    const std::string launch = io::torchrun_launch(on, ranks);
    const double fastest = best_estimate.time_per_batch.value();
    if (parse_format(o.format) == output_format::json) {
      auto j = io::estimate_json(m, on, r.parallel, r.knobs, timed);
      j["scheduler"] = std::string{timing.scheduler()};
      j["schedule_gap"] = timing.worst_gap();
      j["best_time_per_batch_s"] = fastest;
      j["arguments"] = arguments;
      auto lines = nlohmann::ordered_json::array();
      std::istringstream in(launch);
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      j["launch"] = lines;
      print_json(io::schemas::megatron_launch, j);
      return;
    }
    const double emitted = timed.time_per_batch.value();
    const std::string note =
        emitted <= fastest * (1.0 + 1e-9)
            ? fmt::format("# phaze: {:.4g} s per batch, the fastest plan found\n", emitted)
            : fmt::format(
                  "# phaze: {:.4g} s per batch; the fastest plan found takes {:.4g} s ({:+.1f}%), in a split "
                  "or "
                  "rank order Megatron-LM cannot give it (drop --emit megatron to see it)\n",
                  emitted, fastest, 100.0 * (emitted / fastest - 1.0));
    print_text(arguments + note + launch);
  };
  // The fastest plan Megatron-LM runs: of the search's plans as found or re-split as Megatron-LM can
  // (first and last stages free, the others alike), and of Megatron-LM's even splits (the uniform search),
  // so the launch line is never slower than the even split.
  auto runnable = io::fastest_megatron_plan(m, c, found.feasible, cache);
  if (uneven) {  // else the search was Megatron-LM's even split already (uniform or interleaved)
    fixed.placement = place::stage_placement::uniform;
    std::optional<place::ranked_plan> even_runnable;
    try {
      even_runnable =
          io::fastest_megatron_plan(m, c, place::search_plans(m, c, base, fixed, cache).feasible, cache);
    } catch (const input_error&) {
      // no uniform plan is admissible with these choices: the search's own plans stand
    }
    if (even_runnable &&
        (!runnable || even_runnable->estimate.time_per_batch < runnable->estimate.time_per_batch))
      runnable = even_runnable;
  }
  if (!runnable) {
    throw infeasible_error(
        "no plan Megatron-LM can run fits (its interior pipeline stages must hold equal block counts; with "
        "the embedding or loss counted as layers and no interleaving, core_r0.11.0 also needs the blocks "
        "to divide over the stages between them); drop --emit megatron to see the other plans");
  }
  emit(*runnable);
  return 0;
}

/// `--report DIR`: the plan report's files; returns the line that says where they are (empty without
/// --report).
std::string write_report(const plan_options& o, const plan_setup& s, const plans_found& p) {
  const auto& chosen = s.chosen;
  const auto& m = s.m;
  const auto& found = p.found;
  const auto& placement = p.placement;
  const auto& shown = p.shown;
  const auto& best_estimate = p.best_estimate;
  const place::ranked_plan& best = p.best();
  std::string report_note;
  if (!o.report.empty()) {
    io::plan_report_input in;
    in.model = &m;
    in.cluster = chosen.label;
    in.placement = placement;
    in.evaluated = found.evaluated;
    in.plans = found.feasible;
    in.best = best_estimate;
    in.shown = std::max<std::size_t>(shown, 10);
    in.layer_times = schedules_text(best.scheduler, best.schedule_gap);
    io::write_plan_report(o.report, in);
    report_note =
        fmt::format("\nreport in {}/ (report.html, report.md, timeline.svg, memory.svg)\n", o.report);
  }
  return report_note;
}

/// What runs stage `stage` of the best plan under its order: its device type, or the slowest of several
/// (with all of them in `text`).
std::string stage_device(const plans_found& p, int stage, bool text) {
  const place::ranked_plan& best = p.best();
  const std::int64_t first = static_cast<std::int64_t>(stage) * best.parallel.tp * best.parallel.dp;
  const train::stage_estimate& st = p.best_estimate.stages.at(static_cast<std::size_t>(stage));
  return text ? io::stage_device_text(p.ordered, first, st)
              : p.ordered.device_at(static_cast<int>(st.pacing_rank)).name.str();
}

/// The devices of every stage, replica and tensor-parallel group of the best plan under its order.
nlohmann::ordered_json devices_json(const plans_found& p) {
  const place::ranked_plan& best = p.best();
  auto stages = nlohmann::ordered_json::array();
  for (int stage = 0; stage < best.parallel.pp; ++stage) {
    auto replicas = nlohmann::ordered_json::array();
    for (int d = 0; d < best.parallel.dp; ++d)
      replicas.push_back(place::group_devices(p.ordered, best.parallel, stage, d));
    stages.push_back({{"device", stage_device(p, stage, false)}, {"replicas", replicas}});
  }
  return stages;
}

/// `--format json`: the phaze.plan document.
int print_plan_json(const plan_setup& s, const plans_found& p) {
  const auto& c = s.c;
  const auto& m = s.m;
  const auto& found = p.found;
  const auto& uneven = p.uneven;
  const auto& shown = p.shown;
  const auto& order = p.order;
  const auto& ordered = p.ordered;
  const auto& best_estimate = p.best_estimate;
  const place::ranked_plan& best = p.best();
  auto j = io::estimate_json(m, ordered, best.parallel, best.knobs, best_estimate);
  j["scheduler"] = best.scheduler;
  j["schedule_gap"] = best.schedule_gap;
  j["placement"] = uneven ? "uneven" : "uniform";
  j["plans_evaluated"] = found.evaluated;
  j["plans_feasible"] = found.feasible.size();
  j["ranks"] = {{"method", order.method},
                {"order", order.order},
                {"megatron_time_per_batch_s", order.megatron_s},
                {"time_per_batch_s", order.ordered_s},
                {"orders_evaluated", order.evaluated},
                {"exact", order.exact},
                {"stages", devices_json(p)}};
  auto top = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& r = found.feasible[i];
    auto entry = io::estimate_json(m, c, r.parallel, r.knobs, r.estimate);
    entry["scheduler"] = r.scheduler;
    entry["schedule_gap"] = r.schedule_gap;
    top.push_back(entry);
  }
  j["top"] = top;
  print_json(io::schemas::plan, j);
  return 0;
}

/// The text report: the best plans' table, the best plan's estimate, its rank order and its devices.
int print_plan_text(const plan_options& o, const plan_setup& s, const plans_found& p,
                    const std::string& report_note) {
  const auto& chosen = s.chosen;
  const auto& m = s.m;
  const auto& found = p.found;
  const auto& placement = p.placement;
  const auto& shown = p.shown;
  const auto& order = p.order;
  const auto& ordered = p.ordered;
  const auto& best_estimate = p.best_estimate;
  const place::ranked_plan& best = p.best();
  // cp and ep columns only when a shown plan splits the sequence or spreads experts.
  bool with_cp = false;
  bool with_ep = false;
  for (std::size_t i = 0; i < shown; ++i) {
    with_cp = with_cp || found.feasible[i].parallel.cp > 1;
    with_ep = with_ep || found.feasible[i].parallel.ep > 1;
  }
  std::vector<std::string> head{"#", "tp", "pp"};
  std::vector<io::align> aligns(3, io::align::right);
  if (with_cp) head.emplace_back("cp");
  head.emplace_back("dp");
  if (with_ep) head.emplace_back("ep");
  aligns.resize(head.size(), io::align::right);
  for (const char* name : {"microbatch", "recompute", "seq. par.", "blocks/stage", "time/batch", "samples/s",
                           "MFU", "peak memory"})
    head.emplace_back(name);
  for (const io::align a : {io::align::right, io::align::left, io::align::left, io::align::left,
                            io::align::right, io::align::right, io::align::right, io::align::right})
    aligns.push_back(a);
  io::text_table t{head, aligns};
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& r = found.feasible[i];
    std::vector<std::string> row{std::to_string(i + 1), std::to_string(r.parallel.tp),
                                 std::to_string(r.parallel.pp)};
    if (with_cp) row.push_back(std::to_string(r.parallel.cp));
    row.push_back(std::to_string(r.parallel.dp));
    if (with_ep) {
      row.push_back(std::to_string(r.parallel.ep) + (r.parallel.expert_tp() != r.parallel.tp
                                                         ? fmt::format(" (etp {})", r.parallel.expert_tp())
                                                         : std::string{}));
    }
    for (std::string cell :
         {std::to_string(r.knobs.microbatch), std::string{model::to_string(r.knobs.recompute)},
          std::string{r.knobs.sequence_parallel ? "yes" : "no"}, blocks_per_stage(r),
          fmt::format("{:.4g} s", r.estimate.time_per_batch.value()),
          fmt::format("{:.4g}", r.estimate.samples_per_s), fmt::format("{:.1f}%", 100.0 * r.estimate.mfu),
          io::format_bytes(r.estimate.peak_memory)})
      row.push_back(std::move(cell));
    t.add_row(row);
  }
  print_text(fmt::format("{} on {}, {} stages: {} plans evaluated, {} fit; best {}:\n", m.config.name.view(),
                         chosen.label, placement, found.evaluated, found.feasible.size(),
                         shown == 1 ? "plan" : "plans"));
  print_text(t.render() + "\n");
  print_text(io::estimate_table(m, ordered, best.parallel, best.knobs, best_estimate));
  print_text(fmt::format("\nlayer times: {}\n", schedules_text(best.scheduler, best.schedule_gap)));
  print_text(report_note);
  if (order.method != "megatron") {
    print_text(fmt::format(
        "\nrank order ({}{}): {:.4g} s per batch in Megatron-LM's order, {:.4g} s in this order{}\n",
        order.method,
        order.method == "anneal"   ? fmt::format(", {} steps, seed {}", o.rank_iterations, o.rank_seed)
        : order.method == "groups" ? fmt::format(", {} orders of whole device groups timed", order.evaluated)
                                   : std::string{", proven optimal for this plan"},
        order.megatron_s, order.ordered_s, order.order.empty() ? " (Megatron-LM's order is kept)" : ""));
  }
  if (best.parallel.devices() <= 64) {
    print_text("devices of each stage (data-parallel replicas, each a tensor-parallel group):\n");
    for (int stage = 0; stage < best.parallel.pp; ++stage) {
      std::string line = fmt::format("  stage {} ({}):", stage, stage_device(p, stage, true));
      for (int d = 0; d < best.parallel.dp; ++d)
        line += fmt::format(" [{}]", fmt::join(place::group_devices(ordered, best.parallel, stage, d), " "));
      print_text(line + "\n");
    }
  } else {
    print_text(fmt::format("{} devices: --format json lists the devices of every stage and group\n",
                           best.parallel.devices()));
  }
  return 0;
}

int run_plan(const plan_options& o) {
  if (!o.layer_table.empty()) return run_plan_on_layer_table(o);
  std::optional<oneapi::tbb::global_control> limit;
  if (o.threads > 0) limit.emplace(oneapi::tbb::global_control::max_allowed_parallelism, o.threads);
  plan_setup s = set_up_plan(o);
  // The report's folder is made and locked once the inputs are read, before the planning that fills it: one
  // that cannot be made, or that another phaze is writing, exits 2 before the search (the files then go in
  // as one set).
  std::optional<folder_lock> lock;
  if (!o.report.empty()) lock.emplace(made_and_locked(o.report, "--report"));
  // Layer times on list schedules; the ILP refines what is reported (find_plans).
  const sched::schedule_cache cache;
  const plans_found p = find_plans(o, s, cache);
  if (o.emit == "rankfile") return emit_rankfile(s, p);
  if (o.emit == "megatron") return emit_megatron(o, s, p, cache);
  const std::string report_note = write_report(o, s, p);
  if (parse_format(o.format) == output_format::json) return print_plan_json(s, p);
  return print_plan_text(o, s, p, report_note);
}
}  // namespace

/// The placer a plan runs with, settled from what was given: Megatron-Core's split with the embedding or
/// loss counted as a layer, and expert parallelism above 1, run on the uniform split.
void settle_placer(plan_options& o, const CLI::App& parser) {
  // Megatron-Core's split with the embedding or loss counted as a layer is its even split: searched
  // with the uniform placer, and a placer that splits unevenly is refused (Megatron-Core does not take
  // --decoder-first/last-pipeline-num-layers with those flags).
  if (o.layer_table.empty() && (o.step.embedding_in_pipeline_split || o.step.loss_in_pipeline_split)) {
    if (parser.get_option("--placer")->count() > 0 && o.placer != "uniform")
      throw input_error(
          "--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split set "
          "Megatron-Core's even split; give --placer uniform (or no --placer), or drop them to search "
          "uneven splits");
    o.placer = "uniform";
  }
  o.placer_given = parser.get_option("--placer")->count() > 0;
  // Expert parallelism runs on Megatron-LM's even split (the placers that split stages unevenly do
  // not carry it): when no placer was asked for, that split is the one searched, as the
  // interleaved schedule's is, and stderr says so; a placer asked for by name is refused.
  if (parser.get_option("--placer")->count() == 0 && o.layer_table.empty() && o.ep && *o.ep > 1) {
    o.placer = "uniform";
    fmt::print(stderr,
               "phaze: note: --ep {} is searched with Megatron-LM's uniform split (--placer uniform); "
               "the placers that split stages unevenly do not carry expert parallelism\n",
               *o.ep);
  }
}

command add_plan_command(CLI::App& root) {
  auto o = std::make_shared<plan_options>();
  CLI::App* parser = root.add_subcommand(
      "plan",
      "Find the best Megatron-style training plan for a model on a cluster (one device type or several)");
  parser->add_option("MODEL", o->model, "a zoo name or a path to a HuggingFace config.json");
  add_cluster_options(*parser, o->where);
  parser->add_option("--global-batch", o->global_batch, "sequences per iteration")->check(batch_size);
  parser
      ->add_option("--layer-table", o->layer_table,
                   "place a layer cost table from any source instead of a model (docs/layer-table.md)")
      ->check(non_empty_path);
  parser
      ->add_option(
          "--placer", o->placer,
          "placer: chain (uneven stages by the chain DP; chains), downset (the downset DP; any DAG), "
          "brute (every partition; tables of at most 16 nodes) or uniform (Megatron-style even split; "
          "on a table it needs --tp --pp --dp)")
      ->check(CLI::IsMember({"chain", "downset", "uniform", "brute"}))
      ->default_str("chain");
  add_solver_option(*parser, o->solver, "ilp");
  parser->add_option("--tp", o->tp, "fix the tensor-parallel width")->check(device_count);
  parser->add_option("--pp", o->pp, "fix the pipeline depth")->check(device_count);
  parser->add_option("--dp", o->dp, "fix the data-parallel degree")->check(device_count);
  parser
      ->add_option(
          "--ep", o->ep,
          "expert-parallel size (mixture-of-experts models; above 1 searched with the uniform split)")
      ->check(device_count);
  parser
      ->add_option("--cp", o->cp,
                   "context-parallel sizes to try, comma-separated (long sequences: each split over cp ranks "
                   "with ring attention); default 1")
      ->delimiter(',')
      ->check(device_count);
  parser->add_option("--microbatch", o->microbatch, "fix the microbatch size")->check(batch_size);
  parser->add_option("--recompute", o->recompute, "fix the recomputation mode")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  parser->add_flag("--sequence-parallel", o->sequence_parallel, "fix sequence parallelism on");
  parser->add_flag("--no-sequence-parallel", o->no_sequence_parallel, "fix sequence parallelism off");
  add_run_options(*parser, o->run);
  add_step_options(*parser, o->step);
  parser->add_option("--top", o->top, "list the K best plans")->check(positive_integer)->default_str("1");
  parser
      ->add_option(
          "--report", o->report,
          "write the best plan's report into DIR: report.html (self-contained) and report.md with its "
          "pipeline timeline, memory per stage and the runner-up plans, timeline.svg, memory.svg")
      ->check(non_empty_path);
  parser
      ->add_option(
          "--emit", o->emit,
          "print the best plan Megatron-LM can run as its arguments and the torchrun launch of its rank "
          "order (megatron), or the best plan's rank order as an Open MPI rankfile (rankfile)")
      ->check(CLI::IsMember({"megatron", "rankfile"}));
  parser
      ->add_option(
          "--ranks", o->ranks,
          "which devices run each rank: auto (Megatron-LM's order on one device type without measured "
          "links, else exact up to 8 devices, else groups without measured links and anneal with them), "
          "megatron, exact, groups (every sequence of the device groups, in every rank layout) or anneal")
      ->check(CLI::IsMember({"auto", "megatron", "exact", "groups", "anneal"}))
      ->default_str("auto");
  parser->add_option("--rank-seed", o->rank_seed, "seed of the rank annealing")->default_str("1");
  parser->add_option("--rank-iterations", o->rank_iterations, "steps of the rank annealing")
      ->check(
          whole_number_up_to(100'000'000, "10^8 steps, over an hour of annealing; docs/limits.md", "STEPS"))
      ->default_str("20000");
  parser
      ->add_option("--threads", o->threads,
                   "worker threads of the group orders (`--ranks groups`), each timing whole group sequences "
                   "(default: all cores; the order found is the same)")
      ->check(positive_integer);
  add_progress_option(*parser, o->progress);
  add_format_option(*parser, o->format);
  return {parser, [o, parser] {
            settle_placer(*o, *parser);
            return run_plan(*o);
          }};
}

}  // namespace phaze::cli
