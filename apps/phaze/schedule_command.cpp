// `phaze schedule MODEL --device DEV [--layer I] [--tp T] [--microbatch M] [--seq S] [--sequence-parallel]
// [--pass forward|backward|both] [--solver ilp|list] [--time-limit SEC] [--emit-lp FILE] [--format ...]`:
// the intra-layer operator schedule of one layer on one device (docs/scheduling.md).
#include <chrono>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "phaze/core/error.hpp"
#include "phaze/io/device_source.hpp"
#include "phaze/io/model_source.hpp"
#include "phaze/io/schedule_report.hpp"
#include "phaze/sched/ilp.hpp"
#include "phaze/sched/layer_problem.hpp"

namespace phaze::cli {

namespace {
struct schedule_options {
  std::string model;
  std::string device;
  std::int64_t layer = 1;  // node of the layer graph: 0 embedding, 1..L blocks, L+1 head
  int tp = 1;
  std::int64_t microbatch = 1;
  std::int64_t sequence = 0;
  bool sequence_parallel = false;
  std::string pass = "both";
  std::string solver = "ilp";
  double time_limit = 10.0;
  std::string emit_lp;
  std::string format = "table";
};

int run_schedule(const schedule_options& o) {
  model::model m = io::load_model(o.model);
  if (o.sequence > 0) m = model::with_sequence(m, o.sequence);
  const auto resolved = io::resolve_device(o.device);
  const auto layers = static_cast<std::int64_t>(m.size());
  if (o.layer < 0 || o.layer >= layers) {
    throw input_error(
        fmt::format("--layer {} is outside the model's layer graph: give 0 (embedding), 1..{} "
                    "(transformer blocks) or {} (head)",
                    o.layer, layers - 2, layers - 1));
  }
  const model::layer_shape shape{o.microbatch, 0, o.tp, o.sequence_parallel, 2};
  const model::layer l = model::layer_at(m, static_cast<std::size_t>(o.layer), shape);
  // The layer's tensor-parallel collectives run over a group of tp devices of this type, packed into nodes.
  const cluster::route tp = io::homogeneous_cluster(resolved, o.tp).ring({o.tp, 1}, o.tp);
  sched::ilp_options ilp;
  ilp.time_limit = seconds{o.time_limit};

  std::vector<io::pass_report> reports;
  bool emitted = false;
  for (auto which : {sched::pass::forward, sched::pass::backward}) {
    if (o.pass != "both" && o.pass != sched::to_string(which)) continue;
    const auto p = sched::layer_problem(l, resolved.spec, tp, which);
    if (!o.emit_lp.empty() && !emitted) {
      sched::write_ilp(p, o.emit_lp);  // the first pass scheduled
      emitted = true;
    }
    const auto started = std::chrono::steady_clock::now();
    // The list scheduler through its Scheduler form, which states its lower bound (and optimality when it
    // meets it).
    const auto s = o.solver == "list" ? sched::list_scheduler{}.solve(p) : sched::ilp_schedule(p, ilp);
    const seconds took{std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
    reports.push_back(io::report_pass(std::string{sched::to_string(which)}, o.solver, p, s, took));
  }

  const std::string role{model::to_string(m.role_at(static_cast<std::size_t>(o.layer)))};
  if (parse_format(o.format) == output_format::json) {
    nlohmann::ordered_json j{{"model", m.config.name.str()},
                             {"device", resolved.spec.name.str()},
                             {"layer", o.layer},
                             {"role", role},
                             {"tp", o.tp},
                             {"microbatch", o.microbatch},
                             {"sequence", m.config.sequence},
                             {"sequence_parallel", o.sequence_parallel},
                             {"passes", reports}};
    print_json(io::schemas::schedule, j);
    return 0;
  }
  print_text(fmt::format("{} layer {} ({}) on {}: microbatch {}, sequence {}, tp {}{}\n\n",
                         m.config.name.view(), o.layer, role, resolved.spec.name.view(), o.microbatch,
                         m.config.sequence, o.tp, o.sequence_parallel ? " with sequence parallelism" : ""));
  for (const auto& r : reports) print_text(io::to_table(r) + "\n");
  return 0;
}
}  // namespace

command add_schedule_command(CLI::App& root) {
  auto o = std::make_shared<schedule_options>();
  CLI::App* parser = root.add_subcommand(
      "schedule", "Schedule one layer's operators on one accelerator (ILP or list scheduler)");
  parser->add_option("MODEL", o->model, "a zoo name or a path to a HuggingFace config.json")->required();
  parser->add_option("--device", o->device, "a preset name or a device JSON file")->required();
  parser->add_option("--layer", o->layer, "layer node: 0 embedding, 1..L transformer blocks, L+1 head")
      ->default_str("1");
  parser->add_option("--tp", o->tp, "tensor-parallel width")->check(device_count)->default_str("1");
  parser->add_option("--microbatch", o->microbatch, "sequences per microbatch")
      ->check(batch_size)
      ->default_str("1");
  parser->add_option("--seq", o->sequence, "sequence length (default: the model's)")->check(sequence_length);
  parser->add_flag("--sequence-parallel", o->sequence_parallel, "Megatron sequence parallelism");
  parser->add_option("--pass", o->pass, "which pass to schedule")
      ->check(CLI::IsMember({"forward", "backward", "both"}))
      ->default_str("both");
  parser->add_option("--solver", o->solver, "ilp (optimal, time-limited) or list (fast heuristic)")
      ->check(CLI::IsMember({"ilp", "list"}))
      ->default_str("ilp");
  parser->add_option("--time-limit", o->time_limit, "ILP time limit per pass, seconds")
      ->check(number_up_to(86400.0, "seconds, at most a day; docs/limits.md"))
      ->default_str("10");
  parser->add_option("--emit-lp", o->emit_lp,
                     "write the first scheduled pass's ILP in CPLEX LP text to FILE");
  add_format_option(*parser, o->format);
  return {parser, [o] { return run_schedule(*o); }};
}

}  // namespace phaze::cli
