// `phaze calibrate RUNS... [--plan ARGS]... --out FILE [--format table|json]`: fits a few named factors of
// the cost model to measured training steps (train::fit_calibration) and writes them as a phaze.calibration
// file that estimate, plan and search read with --calibration (docs/calibration.md).
#include <algorithm>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli.hpp"
#include "estimate.hpp"
#include "phaze/core/error.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/io/calibration_json.hpp"
#include "phaze/io/table.hpp"
#include "phaze/io/training_log.hpp"
#include "phaze/train/calibration.hpp"
#include "phaze/train/step.hpp"

namespace phaze::cli {

namespace {
struct calibrate_options {
  std::vector<std::string> inputs;
  std::vector<std::string> plans;
  std::string out;
  std::string format = "table";
};

/// The words of a command line given as one string (split on blanks; no quoting: model paths with spaces
/// go in a runs file's "args" array instead).
std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in{text};
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

/// The plan a run's estimate arguments give, parsed by estimate's own options.
estimate_input plan_of(const std::vector<std::string>& args, const std::string& where) {
  if (std::any_of(args.begin(), args.end(),
                  [](const std::string& a) { return a.rfind("--calibration", 0) == 0; })) {
    throw input_error(where +
                      ": a run's arguments must not name --calibration (calibration fits the "
                      "uncalibrated model); drop it");
  }
  CLI::App parser{"estimate"};
  estimate_options o;
  add_estimate_options(parser, o);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  try {
    parser.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw input_error(
        fmt::format("{}: its arguments are not those of a phaze estimate: {}", where, e.what()));
  }
  try {
    return build_estimate(o);
  } catch (const input_error& e) {
    throw input_error(fmt::format("{}: {}", where, e.what()));
  }
}

/// A run ready to fit: its plan and what was measured.
struct prepared_run {
  estimate_input plan;
  double measured_s = 0.0;
  std::string label;
};

/// Tokens one device processes per iteration under `in` (what torchtitan's tokens per second divide).
double tokens_per_device(const estimate_input& in) {
  const double tokens =
      static_cast<double>(in.k.global_batch) * static_cast<double>(train::sequence_of(in.m, in.k));
  return tokens / static_cast<double>(in.p.devices());
}

/// Whether the text of a file is a runs file (JSON lines, its first non-blank character '{').
bool looks_like_runs(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

std::string read_input(const std::string& path) {
  const io::bounded_text read = io::read_at_most(path, io::max_calibration_input_bytes);
  switch (read.status) {
    case io::read_status::directory:
      throw input_error("'" + path + "' is a directory; give a runs file (JSON lines) or a training log");
    case io::read_status::cannot_open:
      throw input_error("cannot open '" + path + "': check the path and its permissions");
    case io::read_status::too_large:
      throw input_error(fmt::format("'{}' is larger than {} MiB, the most phaze calibrate reads", path,
                                    io::max_calibration_input_bytes >> 20U));
    case io::read_status::ok:
      break;
  }
  return read.text;
}

std::vector<prepared_run> read_runs(const calibrate_options& o) {
  std::vector<prepared_run> runs;
  std::size_t next_plan = 0;
  auto add = [&](prepared_run r) {
    if (runs.size() >= io::max_calibration_runs) {
      throw input_error(
          fmt::format("more than {} runs; calibrate on fewer (docs/limits.md)", io::max_calibration_runs));
    }
    runs.push_back(std::move(r));
  };
  for (const std::string& path : o.inputs) {
    const std::string text = read_input(path);
    if (!looks_like_runs(text)) {
      if (next_plan >= o.plans.size()) {
        throw input_error(fmt::format(
            "'{}' is a training log; give the plan it ran with --plan \"ARGS\" (the arguments of a phaze "
            "estimate), one --plan per log in order",
            path));
      }
      const std::string where = fmt::format("log '{}' (--plan {})", path, next_plan + 1);
      estimate_input plan = plan_of(words_of(o.plans[next_plan++]), where);
      const double s = io::logged_step_seconds(text, tokens_per_device(plan), "log '" + path + "'");
      add({std::move(plan), s, path});
      continue;
    }
    std::size_t line_no = 0;
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      start = end + 1;
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = fmt::format("runs file '{}', line {}", path, line_no);
      const io::calibration_measurement r = io::calibration_measurement_from_json(
          io::parse_json_within(line, io::file_rules::calibration_run, where), where);
      estimate_input plan = plan_of(r.args, where);
      const double s = r.step_s ? *r.step_s : io::logged_step_seconds(r.log, tokens_per_device(plan), where);
      std::string label = r.label.empty()
                              ? fmt::format("{}:{}", std::filesystem::path{path}.filename().string(), line_no)
                              : r.label;
      add({std::move(plan), s, std::move(label)});
    }
  }
  if (next_plan < o.plans.size()) {
    throw input_error(fmt::format("{} --plan options but {} logs; give one --plan per training log",
                                  o.plans.size(), next_plan));
  }
  if (runs.empty()) throw input_error("no measured runs: the runs files hold no lines");
  return runs;
}

int run_calibrate(const calibrate_options& o) {
  const std::vector<prepared_run> runs = read_runs(o);
  std::vector<train::calibration_run> fit_runs;
  for (const prepared_run& r : runs) {
    const estimate_input* plan = &r.plan;
    fit_runs.push_back({r.label,
                        [plan](const train::calibration& cal) {
                          // List schedules: exact on GPUs (one kernel at a time), and each trial calibration
                          // costs its layers anew.
                          const sched::schedule_cache cache;
                          return train::estimate_step(plan->m, train::calibrated(plan->c, cal), plan->p,
                                                      train::calibrated(plan->k, cal), cache, plan->split)
                              .time_per_batch.value();
                        },
                        r.measured_s});
  }
  const train::calibration_fit fit = train::fit_calibration(fit_runs);
  std::string source;
  for (const auto& i : o.inputs) source += (source.empty() ? "" : ", ") + i;
  const nlohmann::ordered_json doc = io::calibration_json(fit, source);
  if (!o.out.empty()) write_atomically(o.out, io::dump_json(doc) + '\n');

  if (parse_format(o.format) == output_format::json) {
    nlohmann::ordered_json j = doc;
    nlohmann::ordered_json per = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < runs.size(); ++i) {
      nlohmann::ordered_json r;
      r["label"] = runs[i].label;
      r["measured_s"] = runs[i].measured_s;
      r["error_before"] = fit.before[i];
      r["error_after"] = fit.after[i];
      if (!fit.leave_one_out.empty()) r["error_left_out"] = fit.leave_one_out[i];
      per.push_back(r);
    }
    j["per_run"] = per;
    print_json(io::schemas::calibration, j);
    return 0;
  }
  io::text_table factors{{"factor", "value", "fitted", "what it scales"}};
  for (const auto& f : train::calibration_factors()) {
    const bool fitted = std::find(fit.fitted.begin(), fit.fitted.end(), f.name) != fit.fitted.end();
    factors.add_row({std::string{f.name}, fmt::format("{:.4g}", fit.factors.*(f.value)), fitted ? "yes" : "-",
                     std::string{f.covers}});
  }
  io::text_table per{{"run", "measured s", "error before", "error after", "left out"}};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    per.add_row({runs[i].label, fmt::format("{:.4g}", runs[i].measured_s),
                 fmt::format("{:+.1f}%", 100.0 * fit.before[i]),
                 fmt::format("{:+.1f}%", 100.0 * fit.after[i]),
                 fit.leave_one_out.empty() ? std::string{"-"}
                                           : fmt::format("{:+.1f}%", 100.0 * fit.leave_one_out[i])});
  }
  std::string text =
      fmt::format("calibration from {} measured run{}\n\n", runs.size(), runs.size() == 1 ? "" : "s");
  text += factors.render() + "\n" + per.render();
  text += fmt::format("\nmean absolute error: {:.1f}% before, {:.1f}% after",
                      100.0 * train::calibration_fit::mean_abs(fit.before),
                      100.0 * train::calibration_fit::mean_abs(fit.after));
  if (!fit.leave_one_out.empty())
    text += fmt::format(", {:.1f}% left out (each run predicted by the others' fit)",
                        100.0 * train::calibration_fit::mean_abs(fit.leave_one_out));
  else
    text += " (leave-one-out needs 3 runs or more)";
  text += "\n";
  if (!o.out.empty()) text += fmt::format("written to {}; use it with --calibration {}\n", o.out, o.out);
  print_text(text);
  return 0;
}
}  // namespace

command add_calibrate_command(CLI::App& root) {
  auto o = std::make_shared<calibrate_options>();
  CLI::App* parser = root.add_subcommand(
      "calibrate", "Fit the cost model to measured training steps and write a calibration file");
  parser
      ->add_option("RUNS", o->inputs,
                   "runs files (JSON lines: {\"args\": [the arguments of a phaze estimate], \"step_s\": "
                   "seconds}) or training logs (Megatron-LM, NeMo, torchtitan), each log with a --plan")
      ->required();
  parser->add_option(
      "--plan", o->plans,
      "the arguments of a phaze estimate for the plan a training log ran (one per log, in order)");
  parser->add_option("--out", o->out, "write the calibration file here (schema phaze.calibration)")
      ->check(non_empty_path);
  add_format_option(*parser, o->format);
  return {parser, [o] { return run_calibrate(*o); }};
}

}  // namespace phaze::cli
