/// @file
/// The report of `phaze plan --report DIR` (docs/cli.md): what was planned, the chosen plan with where its
/// time goes, its pipeline timeline with each stage's own times (timeline.svg), its memory per stage against
/// what the devices hold (memory.svg), and the runner-up plans; as report.md and report.html
/// (self-contained XHTML, the SVGs inline), in the formats of every report (io/report_document.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "phaze/io/estimate_report.hpp"
#include "phaze/io/report_document.hpp"
#include "phaze/io/svg.hpp"
#include "phaze/io/table.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/plan_search.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

namespace phaze::io {

/// What a plan report shows: the model, where it runs, how the plans were placed and found, and the plans
/// that fit, best first (`best` is the first one's estimate in the rank order chosen for it).
struct plan_report_input {
  const model::model* model = nullptr;
  std::string cluster;    ///< "64 x h100-sxm" or the cluster file's name
  std::string placement;  ///< "uneven (chain placer)", "uniform"
  std::size_t evaluated = 0;
  std::vector<place::ranked_plan> plans;  ///< the plans that fit, best first (at least one)
  train::step_estimate best;              ///< plans.front() in its chosen rank order
  std::size_t shown = 10;                 ///< runner-up plans listed (with the best)
  std::string layer_times;  ///< where the layer times come from ("ILP schedules, proven optimal")
};

namespace detail::plan_report {

/// "tp 2, pp 4, dp 8" with cp, ep and the virtual stages where used.
inline std::string degrees(const place::ranked_plan& r) {
  std::string out = fmt::format("tp {}, pp {}", r.parallel.tp, r.parallel.pp);
  if (r.parallel.cp > 1) out += fmt::format(", cp {}", r.parallel.cp);
  out += fmt::format(", dp {}", r.parallel.dp);
  if (r.parallel.ep > 1) out += fmt::format(", ep {}", r.parallel.ep);
  if (r.knobs.virtual_stages > 1) out += fmt::format(", vp {}", r.knobs.virtual_stages);
  return out;
}

inline std::string blocks(const train::step_estimate& e) {
  std::string out;
  for (const auto& s : e.stages) out += (out.empty() ? "" : ", ") + std::to_string(s.blocks);
  return out;
}

inline std::string share(seconds part, seconds whole) {
  return whole.value() > 0 ? report::fixed(100.0 * part.value() / whole.value(), 1) + "%" : "-";
}

}  // namespace detail::plan_report

/// The drawing of memory.svg: one bar per pipeline stage, the memory one of its devices holds (class
/// "memory"; red where it exceeds the capacity), a dark mark at the capacity a plan may fill (class
/// "capacity", the memory headroom left out), the values at the bar's end, a GiB axis and tooltips.
inline svg::drawing plan_memory_drawing(const train::step_estimate& e, std::string_view title) {
  namespace r = detail::report;
  constexpr double width = 1000.0;
  constexpr double left = 80.0;
  constexpr double right = 190.0;
  constexpr double top = 50.0;
  constexpr double row_h = 22.0;
  constexpr double row_gap = 8.0;
  constexpr double plot_w = width - left - right;
  const auto stages = static_cast<double>(e.stages.size());
  const double plot_h = std::max(stages, 1.0) * (row_h + row_gap);
  const double height = top + plot_h + 60.0;
  double most = 1.0;
  for (const auto& s : e.stages) most = std::max({most, in_gib(s.memory), in_gib(s.capacity)});
  const r::axis_ticks xt = r::nice_ticks(most * 1.02);
  const double span = std::max(xt.top, most * 1.02);
  auto px = [&](double v) { return left + plot_w * v / span; };

  svg::drawing d(width, height, {{"class", "phaze-memory"}});
  d.rect(0, 0, width, height, {{"fill", "#ffffff"}});
  d.text(width / 2, 28, title,
         r::with(r::label_style, {{"text-anchor", "middle"}, {"font-size", "16"}, {"class", "title"}}));
  for (double v = 0.0; v <= span + 1e-9; v += xt.step) {
    d.line(px(v), top - 4, px(v), top + plot_h, r::grid_style);
    d.line(px(v), top + plot_h, px(v), top + plot_h + 5, r::axis_style);
    d.text(px(v), top + plot_h + 18, r::fixed(v, xt.decimals),
           r::with(r::label_style, {{"text-anchor", "middle"}}));
  }
  d.line(left, top + plot_h, left + plot_w, top + plot_h, r::axis_style);
  d.text(left + plot_w / 2, top + plot_h + 36, "memory per device (GiB)",
         r::with(r::label_style, {{"text-anchor", "middle"}}));
  for (std::size_t i = 0; i < e.stages.size(); ++i) {
    const auto& s = e.stages[i];
    const double y = top + static_cast<double>(i) * (row_h + row_gap) + row_gap / 2;
    const bool fits = s.memory.value() <= s.capacity.value();
    const std::string tip =
        fmt::format("stage {}: {} of {} per device ({} blocks, {} devices)", i, format_bytes(s.memory),
                    format_bytes(s.capacity), s.blocks, s.devices);
    d.text(left - 8, y + row_h / 2 + 4, fmt::format("stage {}", i),
           r::with(r::label_style, {{"text-anchor", "end"}, {"class", "stage-label"}}));
    d.rect(left, y, std::max(px(in_gib(s.memory)) - left, 0.5), row_h,
           {{"class", "memory"}, {"fill", fits ? "#4e79a7" : "#d62728"}, {"data-stage", std::to_string(i)}},
           tip);
    const double cx = px(in_gib(s.capacity));
    d.line(cx, y - 3, cx, y + row_h + 3,
           {{"class", "capacity"}, {"stroke", "#222222"}, {"stroke-width", "2"}});
    d.text(left + plot_w + 8, y + row_h / 2 + 4,
           fmt::format("{} of {}", format_bytes(s.memory), format_bytes(s.capacity)),
           r::with(r::label_style, {{"class", "memory-label"}}));
  }
  return d;
}

namespace detail::plan_report {

inline report::document build(const plan_report_input& in) {
  namespace r = report;
  const model::model& m = *in.model;
  const place::ranked_plan& best = in.plans.front();
  const train::step_estimate& e = in.best;
  const auto& k = best.knobs;
  r::document doc;
  doc.title = fmt::format("phaze plan: {} on {}", m.config.name.view(), in.cluster);

  r::section planned{"What was planned", {}};
  planned.blocks.push_back(r::items({
      {"Model", std::string{m.config.name.view()}, "model"},
      {"Devices", in.cluster, "cluster"},
      {"Global batch", fmt::format("{} sequences of {} tokens", k.global_batch, train::sequence_of(m, k)),
       ""},
      {"Step", step_summary(m, k, best.parallel.tp, best.parallel.ep), "step"},
      {"Stages", in.placement, ""},
      {"Plans evaluated", std::to_string(in.evaluated), ""},
      {"Plans that fit", std::to_string(in.plans.size()), ""},
  }));
  doc.sections.push_back(std::move(planned));

  r::section chosen{"The best plan", {}};
  chosen.blocks.push_back(r::items({
      {"Parallelism", degrees(best), "best-plan"},
      {"Microbatch",
       fmt::format("{} sequence{}, {} microbatches per replica", k.microbatch, k.microbatch == 1 ? "" : "s",
                   e.microbatches),
       ""},
      {"Recomputation", recompute_text(k), ""},
      {"Sequence parallelism", k.sequence_parallel ? "on" : "off", ""},
      {"Schedule", std::string{train::to_string(k.schedule)}, ""},
      {"Blocks per stage", blocks(e), ""},
      {"Time per batch", r::duration(e.time_per_batch), "best-time"},
      {"Throughput", r::throughput(e.samples_per_s), "best-throughput"},
      {"Tokens per second", fmt::format("{:.0f}", e.tokens_per_s), ""},
      {"MFU", r::fixed(100.0 * e.mfu, 1) + "%", "best-mfu"},
      {"Peak memory",
       fmt::format("{} of {} (stage {})", format_bytes(e.peak_memory), format_bytes(e.memory_capacity),
                   e.peak_stage),
       "best-memory"},
      {"Layer times", in.layer_times, ""},
  }));
  const auto& b = e.breakdown;
  r::table parts{{"part", "seconds", "share"}, {}, "breakdown"};
  for (const auto& [name, t] :
       std::vector<std::pair<std::string, seconds>>{{"compute", b.compute},
                                                    {"bubble", b.bubble},
                                                    {"recomputation", b.recompute},
                                                    {"tensor-parallel communication", b.tp_comm},
                                                    {"pipeline sends", b.pp_comm},
                                                    {"data-parallel communication", b.dp_comm},
                                                    {"optimizer step", b.optimizer},
                                                    {"calibrated overhead", b.overhead}})
    parts.rows.push_back({name, r::duration(t), share(t, e.time_per_batch)});
  chosen.blocks.push_back(
      r::paragraph("Where the time of one batch goes (exposed time; the parts add up to it):"));
  chosen.blocks.push_back(r::grid(std::move(parts)));
  doc.sections.push_back(std::move(chosen));

  r::section timeline{"Pipeline timeline", {}};
  timeline.blocks.push_back(r::figure(
      "timeline.svg",
      pipeline_drawing(e, k.schedule, std::string{m.config.name.view()} + ": one iteration").element(),
      "One iteration of the best plan, each stage with its own times"));
  doc.sections.push_back(std::move(timeline));

  r::section memory{"Memory per stage", {}};
  memory.blocks.push_back(r::figure(
      "memory.svg",
      plan_memory_drawing(e, "Memory per device of each stage, against what a plan may fill").element(),
      "Memory per device of each stage (bars) and the capacity a plan may fill (marks)"));
  r::table stages{
      {"stage", "blocks", "devices", "forward", "backward", "recompute", "memory", "capacity"}, {}, "stages"};
  for (std::size_t i = 0; i < e.stages.size(); ++i) {
    const auto& s = e.stages[i];
    stages.rows.push_back({std::to_string(i), std::to_string(s.blocks), std::to_string(s.devices),
                           r::duration(s.forward), r::duration(s.backward), r::duration(s.recompute),
                           format_bytes(s.memory), format_bytes(s.capacity)});
  }
  memory.blocks.push_back(r::paragraph("Per microbatch times and per device memory of each stage:"));
  memory.blocks.push_back(r::grid(std::move(stages)));
  doc.sections.push_back(std::move(memory));

  r::section others{"Runner-up plans", {}};
  r::table top{{"#", "parallelism", "microbatch", "recompute", "seq. par.", "blocks/stage", "time/batch",
                "throughput", "MFU", "peak memory", "vs best"},
               {},
               "top"};
  const std::size_t shown = std::min(in.shown, in.plans.size());
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& p = in.plans[i];
    const train::step_estimate& pe = i == 0 ? e : p.estimate;
    top.rows.push_back({std::to_string(i + 1), degrees(p), std::to_string(p.knobs.microbatch),
                        std::string{model::to_string(p.knobs.recompute)},
                        p.knobs.sequence_parallel ? "yes" : "no", blocks(pe), r::duration(pe.time_per_batch),
                        r::throughput(pe.samples_per_s), r::fixed(100.0 * pe.mfu, 1) + "%",
                        format_bytes(pe.peak_memory),
                        e.time_per_batch.value() > 0
                            ? r::fixed(pe.time_per_batch.value() / e.time_per_batch.value(), 2) + "×"
                            : "-"});
  }
  others.blocks.push_back(r::paragraph(fmt::format(
      "The {} fastest of the {} plans that fit (vs best: time per batch over the best plan's):", shown,
      in.plans.size())));
  others.blocks.push_back(r::grid(std::move(top)));
  doc.sections.push_back(std::move(others));
  return doc;
}

}  // namespace detail::plan_report

/// report.md of a plan report.
inline std::string plan_report_markdown(const plan_report_input& in) {
  return detail::report::markdown(detail::plan_report::build(in));
}

/// report.html of a plan report: self-contained XHTML.
inline std::string plan_report_html(const plan_report_input& in) {
  return detail::report::html(detail::plan_report::build(in));
}

/// Writes report.md, report.html, timeline.svg and memory.svg into `dir` (created if missing) as one set
/// (report_files: a failure leaves the folder as it was); a directory that cannot be created or written is
/// an input_error naming it.
inline void write_plan_report(const std::filesystem::path& dir, const plan_report_input& in) {
  if (in.model == nullptr || in.plans.empty()) throw error("plan report without a plan (a bug in phaze)");
  namespace r = detail::report;
  r::make_directory(dir, "give a writable folder to --report");
  const place::ranked_plan& best = in.plans.front();
  report_files files{dir};
  files.add("timeline.svg", pipeline_drawing(in.best, best.knobs.schedule,
                                             std::string{in.model->config.name.view()} + ": one iteration")
                                .document());
  files.add("memory.svg",
            plan_memory_drawing(in.best, "Memory per device of each stage, against what a plan may fill")
                .document());
  files.add("report.md", plan_report_markdown(in));
  files.add("report.html", plan_report_html(in));
  files.commit();
}

}  // namespace phaze::io
