/// @file
/// The reports of a co-search (docs/search-report.md): pareto.csv, pareto.svg (throughput vs die area),
/// timeline.svg (the best plan's pipeline), report.md and report.html (self-contained XHTML). Numbers are
/// formatted with fixed precision and no locale, so the same summary always gives the same bytes.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "phaze/core/error.hpp"
#include "phaze/hw/area.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/space.hpp"
#include "phaze/io/design_groups.hpp"
#include "phaze/io/label_layout.hpp"
#include "phaze/io/report_document.hpp"
#include "phaze/io/svg.hpp"
#include "phaze/io/table.hpp"
#include "phaze/io/timeline_boxes.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/search/result.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"
#include "phaze/train/timeline.hpp"

namespace phaze::io {

/// What the reports include besides the search's results.
struct search_report_options {
  /// Wall time, threads x processes and configurations per second in report.md / report.html. Turn off to
  /// compare reports of runs that differ only in how they ran (the other files never hold these).
  bool run_statistics = true;
};

/// Whether a design result holds a placed plan with its estimate.
inline bool placed(const search::design_result& r) {
  return r.status == search::outcome::evaluated && !r.estimate.stages.empty();
}

inline std::string recompute_text(const search::design_result& r) {
  std::string s{model::to_string(r.knobs.recompute)};
  if (r.knobs.sequence_parallel && r.parallel.tp > 1) s += "+SP";
  return s;
}

/// "tp 2, pp 4, dp 8, mb 2, selective+SP"
inline std::string plan_text(const search::design_result& r) {
  if (!placed(r)) return std::string{search::to_string(r.status)};
  return fmt::format("tp {}, pp {}, dp {}, mb {}, {}", r.parallel.tp, r.parallel.pp, r.parallel.dp,
                     r.knobs.microbatch, recompute_text(r));
}

namespace detail::report {

inline std::string area_text(hw::area a) {
  return a.value() > 0.0 ? fixed(a.value(), 1) + " mm²" : "n/a";
}

inline std::string energy_text(hw::energy e) {
  const double v = e.value();
  if (v <= 0.0) return "n/a";
  if (v >= 1.0) return fixed(v, 3) + " J";
  if (v >= 1e-3) return fixed(v * 1e3, 3) + " mJ";
  return fixed(v * 1e6, 3) + " µJ";
}

inline std::string blocks_per_stage(const search::design_result& r) {
  std::string s;
  for (std::size_t i = 0; i < r.estimate.stages.size(); ++i) {
    if (i > 0) s += ", ";
    s += fmt::format("{}", r.estimate.stages[i].blocks);
  }
  return s;
}

inline constexpr std::array<std::string_view, 4> baseline_colours{"#d62728", "#9467bd", "#8c564b", "#17becf"};

/// Half the width and height of the box around any baseline symbol (the diamond's, 1.3 x 6, and its stroke).
inline constexpr double baseline_symbol_half_size = 8.5;

/// Baseline symbols, cycled: square, triangle, diamond, inverted triangle.
inline void baseline_symbol(svg::drawing& d, std::size_t i, double x, double y, const svg::attributes& a,
                            std::string_view tooltip) {
  constexpr double r = 6.0;
  switch (i % 4) {
    case 0:
      d.rect(x - r, y - r, 2 * r, 2 * r, a, tooltip);
      break;
    case 1:
      d.polygon({{x, y - r * 1.2}, {x + r * 1.1, y + r * 0.8}, {x - r * 1.1, y + r * 0.8}}, a, tooltip);
      break;
    case 2:
      d.polygon({{x, y - r * 1.3}, {x + r * 1.3, y}, {x, y + r * 1.3}, {x - r * 1.3, y}}, a, tooltip);
      break;
    default:
      d.polygon({{x, y + r * 1.2}, {x + r * 1.1, y - r * 0.8}, {x - r * 1.1, y - r * 0.8}}, a, tooltip);
      break;
  }
}

/// The baselines' names on the Pareto chart, after every marker: each where it meets no box of `taken` (the
/// markers and dashed lines, then the names placed before it) inside `plot` (io::pick_label), next to its
/// symbol or, farther out, with a leader line; a datasheet baseline's name along its dashed line.
template <class Px, class Py>
void draw_baseline_labels(svg::drawing& d, const search::summary& s, const box& plot, Px px, Py py,
                          std::vector<box> taken) {
  for (std::size_t i = 0; i < s.baselines.size(); ++i) {
    const auto& b = s.baselines[i];
    if (!placed(b.result)) continue;
    const double y = py(b.result.samples_per_s);
    const bool on_chart = b.result.die_area.value() > 0.0;
    const std::string text = on_chart ? b.name : b.name + " (no die area)";
    const box extent = text_box(0.0, 0.0, text, label_font_size);
    std::vector<label_candidate> candidates;
    double x = 0.0;
    if (on_chart) {
      x = px(b.result.die_area.value());
      candidates = around_point(x, y, baseline_symbol_half_size, extent.width(), extent.height());
      const auto rest = anywhere(plot, x, y, extent.width(), extent.height());
      candidates.insert(candidates.end(), rest.begin(), rest.end());
    } else {
      candidates = along_line(plot.x0, plot.x1, y, extent.width(), extent.height());
    }
    const label_candidate& c = candidates[pick_label(candidates, taken, plot)];
    const std::string colour{baseline_colours[i % baseline_colours.size()]};
    if (c.leader) {
      // From the symbol's edge to the nearest point of the name.
      const double tx = std::clamp(x, c.bounds.x0, c.bounds.x1);
      const double ty = std::clamp(y, c.bounds.y0, c.bounds.y1);
      const double from = baseline_symbol_half_size / std::max(std::hypot(tx - x, ty - y), 1e-9);
      d.line(x + (tx - x) * from, y + (ty - y) * from, tx, ty,
             {{"class", "baseline-leader"}, {"stroke", colour}, {"stroke-width", "0.8"}});
    }
    d.text(c.bounds.x0, c.bounds.y0 - extent.y0, text,
           with(label_style, {{"class", "baseline-label"}, {"fill", colour}}));
    taken.push_back(c.bounds);
  }
}

}  // namespace detail::report

/// pareto.csv: a header and one row per Pareto design, by ascending die area. Columns: index, area_mm2,
/// throughput_samples_per_s, energy_per_sample_j, tensor_cores, tc_width, tc_depth, vector_cores, vc_width,
/// global_buffer_mib, hbm_gib, tp, pp, dp, microbatch, recompute (template columns empty for datasheet
/// devices).
inline std::string pareto_csv(const search::summary& s) {
  namespace r = detail::report;
  std::string out =
      "index,area_mm2,throughput_samples_per_s,energy_per_sample_j,tensor_cores,tc_width,tc_depth,"
      "vector_cores,vc_width,global_buffer_mib,hbm_gib,tp,pp,dp,microbatch,recompute\n";
  for (const search::design_result& d : s.pareto) {
    const hw::device& dev = d.device;
    const bool systolic = dev.kind == hw::device_kind::systolic;
    out += fmt::format("{},{},{},{},", d.index, r::precise(d.die_area.value()), r::precise(d.samples_per_s),
                       r::precise(d.energy_per_sample.value()));
    if (systolic) {
      out += fmt::format("{},{},{},{},{},{},", dev.systolic.num_tc, dev.systolic.tc_width,
                         dev.systolic.tc_depth, dev.systolic.num_vc, dev.systolic.vc_width,
                         r::precise(dev.systolic.glb.value() / (1024.0 * 1024.0)));
    } else {
      out += ",,,,,,";
    }
    out += fmt::format("{},{},{},{},{},{}\n", r::precise(dev.hbm.value() / (1024.0 * 1024.0 * 1024.0)),
                       d.parallel.tp, d.parallel.pp, d.parallel.dp, d.knobs.microbatch,
                       model::to_string(d.knobs.recompute));
  }
  return out;
}

/// The drawing of pareto.svg: throughput (y) against die area (x); the Pareto front as filled circles
/// (class "pareto") joined by a step line, the top designs as hollow circles (class "top"), each placed
/// baseline with its own symbol (class "baseline") and label (class "baseline-label"); a baseline without a
/// die area (a datasheet device) as a dashed horizontal line at its throughput.
inline svg::drawing pareto_drawing(const search::summary& s) {
  namespace r = detail::report;
  constexpr double width = 900.0;
  constexpr double height = 540.0;
  constexpr double left = 80.0;
  constexpr double right = 220.0;
  constexpr double top = 50.0;
  constexpr double bottom = 60.0;
  constexpr double plot_w = width - left - right;
  constexpr double plot_h = height - top - bottom;
  svg::drawing d(width, height, {{"class", "phaze-pareto"}});
  d.rect(0, 0, width, height, {{"fill", "#ffffff"}});
  d.text(width / 2 - right / 2, 28, fmt::format("{}, {} devices: throughput vs die area", s.model, s.devices),
         r::with(r::label_style, {{"text-anchor", "middle"}, {"font-size", "16"}, {"class", "title"}}));

  double x_max = 0.0;
  double y_max = 0.0;
  auto extend = [&](const search::design_result& dr) {
    if (!placed(dr)) return;
    x_max = std::max(x_max, dr.die_area.value());
    y_max = std::max(y_max, dr.samples_per_s);
  };
  for (const auto& p : s.pareto) extend(p);
  for (const auto& t : s.top) extend(t);
  for (const auto& b : s.baselines) extend(b.result);
  const r::axis_ticks xt = r::nice_ticks(x_max * 1.05);
  const r::axis_ticks yt = r::nice_ticks(y_max * 1.08);
  auto px = [&](double area) { return left + plot_w * std::clamp(area, 0.0, xt.top) / xt.top; };
  auto py = [&](double rate) { return top + plot_h - plot_h * std::clamp(rate, 0.0, yt.top) / yt.top; };

  r::draw_chart_frame(d, {left, top, plot_w, plot_h, height}, xt, yt, px, py, "die area (mm²)",
                      "throughput (samples/s)", x_max <= 0.0 || y_max <= 0.0, "no feasible design");

  // Markers first, each also an obstacle for the labels: the top designs under the front, the front as a
  // step line (the best throughput reachable within a die area) and its points, the baselines.
  const box plot{left, top, left + plot_w, top + plot_h};
  d.rect(plot.x0, plot.y0, plot.width(), plot.height(),
         {{"class", "plot-area"}, {"fill", "none"}, {"stroke", "none"}});
  std::vector<box> taken;
  auto marker = [&](double x, double y, double half) {
    taken.push_back({x - half, y - half, x + half, y + half});
  };
  for (const auto& t : s.top) {
    if (!placed(t)) continue;
    const double x = px(t.die_area.value());
    const double y = py(t.samples_per_s);
    d.circle(x, y, 4.5, {{"class", "top"}, {"fill", "none"}, {"stroke", "#f28e2b"}, {"stroke-width", "1.5"}},
             fmt::format("#{} {}: {} mm², {}", t.index, design_text(t.device),
                         r::fixed(t.die_area.value(), 1), r::throughput(t.samples_per_s)));
    marker(x, y, 5.25);
  }
  std::vector<svg::point> steps;
  for (std::size_t i = 0; i < s.pareto.size(); ++i) {
    const auto& p = s.pareto[i];
    if (i > 0) steps.push_back({px(p.die_area.value()), py(s.pareto[i - 1].samples_per_s)});
    steps.push_back({px(p.die_area.value()), py(p.samples_per_s)});
  }
  if (!steps.empty()) {
    steps.push_back({left + plot_w, steps.back().y});
    d.polyline(steps,
               {{"class", "pareto-front"}, {"fill", "none"}, {"stroke", "#4e79a7"}, {"stroke-width", "1.5"}});
  }
  for (const auto& p : s.pareto) {
    const double x = px(p.die_area.value());
    const double y = py(p.samples_per_s);
    d.circle(x, y, 4.0,
             {{"class", "pareto"}, {"fill", "#4e79a7"}, {"stroke", "#ffffff"}, {"stroke-width", "0.5"}},
             fmt::format("#{} {}: {} mm², {}", p.index, design_text(p.device),
                         r::fixed(p.die_area.value(), 1), r::throughput(p.samples_per_s)));
    marker(x, y, 4.25);
  }
  for (std::size_t i = 0; i < s.baselines.size(); ++i) {
    const auto& b = s.baselines[i];
    if (!placed(b.result)) continue;
    const double y = py(b.result.samples_per_s);
    const std::string colour{r::baseline_colours[i % r::baseline_colours.size()]};
    if (b.result.die_area.value() > 0.0) {
      const double x = px(b.result.die_area.value());
      r::baseline_symbol(d, i, x, y, {{"class", "baseline"}, {"fill", colour}, {"stroke", "#222222"}},
                         b.name + ": " + r::throughput(b.result.samples_per_s));
      marker(x, y, r::baseline_symbol_half_size);
    } else {
      d.line(
          left, y, left + plot_w, y,
          {{"class", "baseline"}, {"stroke", colour}, {"stroke-width", "1.5"}, {"stroke-dasharray", "6 4"}});
      taken.push_back({left, y - 1.0, left + plot_w, y + 1.0});
    }
  }
  r::draw_baseline_labels(d, s, plot, px, py, std::move(taken));

  // Legend.
  const double lx = left + plot_w + 20;
  double ly = top + 10;
  d.open_group({{"class", "legend"}});
  d.circle(lx + 6, ly, 4.0, {{"fill", "#4e79a7"}});
  d.text(lx + 18, ly + 4, fmt::format("Pareto front ({})", s.pareto.size()), r::label_style);
  ly += 20;
  d.circle(lx + 6, ly, 4.5, {{"fill", "none"}, {"stroke", "#f28e2b"}, {"stroke-width", "1.5"}});
  d.text(lx + 18, ly + 4, fmt::format("top designs ({})", s.top.size()), r::label_style);
  for (std::size_t i = 0; i < s.baselines.size(); ++i) {
    const auto& b = s.baselines[i];
    ly += 20;
    const std::string colour{r::baseline_colours[i % r::baseline_colours.size()]};
    r::baseline_symbol(d, i, lx + 6, ly, {{"fill", colour}, {"stroke", "#222222"}}, {});
    d.text(lx + 18, ly + 4,
           placed(b.result) ? b.name : b.name + " (" + std::string{search::to_string(b.result.status)} + ")",
           r::label_style);
  }
  d.close_group();
  return d;
}

/// pareto.svg as a standalone file.
inline std::string pareto_svg(const search::summary& s) {
  return pareto_drawing(s).document();
}

/// The drawing of timeline.svg: the search's best plan (pipeline_drawing), or a note when nothing fits.
inline svg::drawing timeline_drawing(const search::summary& s) {
  const search::design_result& best = s.best;
  if (!placed(best)) {
    namespace r = detail::report;
    constexpr double width = 1000.0;
    svg::drawing d(width, 120.0, {{"class", "phaze-timeline"}});
    d.rect(0, 0, width, 120.0, {{"fill", "#ffffff"}});
    d.text(width / 2, 60, "no feasible design: no timeline",
           r::with(r::label_style, {{"text-anchor", "middle"}, {"class", "title"}}));
    return d;
  }
  return pipeline_drawing(best.estimate, best.knobs.schedule, s.model + ": best design's iteration");
}

/// timeline.svg as a standalone file.
inline std::string timeline_svg(const search::summary& s) {
  return timeline_drawing(s).document();
}

namespace detail::report {

inline std::vector<item> design_items(const search::design_result& r) {
  const hw::device& d = r.device;
  std::vector<item> list{{"Design", design_text(d), ""}};
  if (d.kind == hw::device_kind::systolic) {
    list.push_back({"Index in the space", fmt::format("{}", r.index), ""});
    list.push_back(
        {"Tensor cores",
         fmt::format("{} of {}×{} MACs", d.systolic.num_tc, d.systolic.tc_width, d.systolic.tc_depth), ""});
    list.push_back(
        {"Vector cores", fmt::format("{} of {} lanes", d.systolic.num_vc, d.systolic.vc_width), ""});
    list.push_back({"Global buffer", format_bytes(d.systolic.glb), ""});
    list.push_back({"Clock", fixed(d.systolic.clock.value() / 1e9, 3) + " GHz", ""});
  }
  list.push_back(
      {"HBM", format_bytes(d.hbm) + " at " + fixed(d.hbm_bandwidth.value() / 1e9, 0) + " GB/s", ""});
  list.push_back({"Die area", area_text(r.die_area), "best-area"});
  return list;
}

inline std::vector<item> plan_items(const search::design_result& r) {
  const train::step_estimate& e = r.estimate;
  std::string schedule{train::to_string(r.knobs.schedule)};
  if (r.knobs.schedule == train::pipeline_schedule::interleaved) {
    schedule += fmt::format(" (v {})", r.knobs.virtual_stages);
  }
  return {
      {"Tensor / pipeline / data parallel",
       fmt::format("tp {}, pp {}, dp {}", r.parallel.tp, r.parallel.pp, r.parallel.dp), "best-plan"},
      {"Microbatch",
       fmt::format("{} sequence{}, {} microbatches per replica", r.knobs.microbatch,
                   r.knobs.microbatch == 1 ? "" : "s", e.microbatches),
       ""},
      {"Recomputation", std::string{model::to_string(r.knobs.recompute)}, ""},
      {"Sequence parallelism", r.knobs.sequence_parallel && r.parallel.tp > 1 ? "on" : "off", ""},
      {"Schedule", schedule, ""},
      {"Optimizer",
       std::string{train::to_string(r.knobs.opt)} + (r.knobs.distributed_optimizer ? ", distributed" : "") +
           ", " + std::string{hw::to_string(r.knobs.precision)},
       ""},
      {"Blocks per stage", blocks_per_stage(r), ""},
      {"Time per batch", duration(e.time_per_batch), "best-time"},
      {"Throughput", throughput(r.samples_per_s), "best-throughput"},
      {"Tokens per second", fixed(e.tokens_per_s, 0), ""},
      {"MFU", fixed(e.mfu * 100.0, 1) + "%", "best-mfu"},
      {"Peak memory",
       format_bytes(e.peak_memory) + " of " + format_bytes(r.device.hbm) + " (stage " +
           fmt::format("{}", e.peak_stage) + ")",
       "best-memory"},
      {"Energy per sample", energy_text(r.energy_per_sample), ""},
  };
}

/// Ranks (positions + 1) as "3", "1-3" when consecutive, else "1, 3, 5".
inline std::string ranks_text(const std::vector<std::size_t>& positions) {
  const bool consecutive = positions.back() - positions.front() + 1 == positions.size();
  if (positions.size() > 1 && consecutive) {
    return fmt::format("{}-{}", positions.front() + 1, positions.back() + 1);
  }
  std::string out;
  for (const std::size_t p : positions) out += (out.empty() ? "" : ", ") + fmt::format("{}", p + 1);
  return out;
}

inline std::string indices_text(const std::vector<search::design_result>& list,
                                const std::vector<std::size_t>& positions) {
  std::string out;
  for (const std::size_t p : positions) out += (out.empty() ? "" : ", ") + fmt::format("{}", list[p].index);
  return out;
}

inline std::string ratio(const search::design_result& best, const search::design_result& other) {
  if (!placed(best) || !placed(other) || !(other.samples_per_s > 0.0)) return "n/a";
  return fixed(best.samples_per_s / other.samples_per_s, 2) + "×";
}

inline document build(const search::summary& s, const search_report_options& o) {
  document doc;
  doc.title = fmt::format("phaze search: {} on {} devices", s.model, s.devices);

  section searched{"What was searched", {}};
  std::vector<item> run{
      {"Model", s.model, "model"},
      {"Devices", fmt::format("{}", s.devices), ""},
      {"Global batch", fmt::format("{} sequences of {} tokens", s.global_batch, s.sequence), ""},
      {"Sequence length", fmt::format("{} tokens", s.sequence), "sequence"},
      {"Vocabulary", s.vocab > 0 ? fmt::format("{} tokens", s.vocab) : std::string{"none"}, "vocabulary"},
      {"Precision", std::string{hw::to_string(s.precision)}, "precision"},
      {"Space", s.space, ""},
      {"Designs", fmt::format("{}", s.designs), "designs"},
      {"Evaluated", fmt::format("{}", s.evaluated), ""},
      {"Pruned by the throughput bound", fmt::format("{}", s.pruned), ""},
      {"Infeasible (nothing fits)", fmt::format("{}", s.infeasible), ""},
      {"Configurations placed", fmt::format("{}", s.configurations), "configurations"},
  };
  if (o.run_statistics) {
    run.push_back({"Wall time", fixed(s.seconds, 2) + " s", ""});
    run.push_back({"Threads × processes", fmt::format("{} × {}", s.threads, s.processes), ""});
    run.push_back({"Configurations per second",
                   s.seconds > 0.0 ? fixed(static_cast<double>(s.configurations) / s.seconds, 1) : "n/a",
                   ""});
  }
  searched.blocks.push_back(items(std::move(run)));
  doc.sections.push_back(std::move(searched));

  section best{"Best design", {}};
  if (!placed(s.best)) {
    best.blocks.push_back(paragraph("No design of the space has a plan that fits its memory."));
  } else {
    best.blocks.push_back(items(design_items(s.best)));
    best.blocks.push_back(paragraph("Its best plan:"));
    best.blocks.push_back(items(plan_items(s.best)));
  }
  doc.sections.push_back(std::move(best));

  section against{"Against the baselines", {}};
  if (s.baselines.empty()) {
    against.blocks.push_back(paragraph("No baselines."));
  } else {
    table t{{"baseline", "device", "die area", "plan", "time per batch", "throughput", "best / baseline"},
            {},
            "baselines"};
    for (const auto& b : s.baselines) {
      const auto& r = b.result;
      t.rows.push_back({b.name, design_text(r.device), area_text(r.die_area), plan_text(r),
                        placed(r) ? duration(r.estimate.time_per_batch) : "n/a",
                        placed(r) ? throughput(r.samples_per_s) : "n/a", ratio(s.best, r)});
    }
    against.blocks.push_back(grid(std::move(t)));
    std::vector<item> how;
    for (const auto& b : s.baselines) how.push_back({b.name, b.description, ""});
    against.blocks.push_back(items(std::move(how)));
  }
  doc.sections.push_back(std::move(against));

  section top{"Top designs", {}};
  table t{{"rank", "index", "design", "die area", "tp", "pp", "dp", "microbatch", "recompute",
           "time per batch", "throughput", "energy per sample"},
          {},
          "top"};
  const std::vector<design_group> groups = group_by_hbm(s.top);
  std::size_t grouped_rows = 0;
  std::size_t grouped_designs = 0;
  for (const design_group& g : groups) {
    const auto& r = s.top[g.members.front()];
    if (g.members.size() > 1) {
      ++grouped_rows;
      grouped_designs += g.members.size();
    }
    t.rows.push_back(
        {ranks_text(g.members), indices_text(s.top, g.members), group_design_text(s.top, g),
         area_text(r.die_area), fmt::format("{}", r.parallel.tp), fmt::format("{}", r.parallel.pp),
         fmt::format("{}", r.parallel.dp), fmt::format("{}", r.knobs.microbatch), recompute_text(r),
         duration(r.estimate.time_per_batch), throughput(r.samples_per_s), energy_text(r.energy_per_sample)});
  }
  top.blocks.push_back(grid(std::move(t)));
  if (grouped_rows > 0) {
    top.blocks.push_back(paragraph(fmt::format(
        "{} designs in {} rows: {} designs that differ only in HBM capacity, with the same plan, time per "
        "batch and throughput, are grouped into {} row{} (their HBM sizes, ranks and indices in the row).",
        s.top.size(), groups.size(), grouped_designs, grouped_rows, grouped_rows == 1 ? "" : "s")));
  }
  doc.sections.push_back(std::move(top));

  section front{"Pareto front", {}};
  front.blocks.push_back(paragraph(fmt::format(
      "{} designs on the throughput vs die area front, by ascending area (every one in pareto.csv).",
      s.pareto.size())));
  front.blocks.push_back(figure("pareto.svg", pareto_drawing(s).element(), "Throughput vs die area"));
  doc.sections.push_back(std::move(front));

  section timeline{"Timeline of the best plan", {}};
  timeline.blocks.push_back(figure("timeline.svg", timeline_drawing(s).element(),
                                   "One iteration of the best plan, per pipeline stage"));
  if (placed(s.best)) {
    const auto& b = s.best.estimate.breakdown;
    timeline.blocks.push_back(items({{"Compute", duration(b.compute), ""},
                                     {"Pipeline bubble", duration(b.bubble), ""},
                                     {"Recomputation", duration(b.recompute), ""},
                                     {"Tensor-parallel communication", duration(b.tp_comm), ""},
                                     {"Pipeline communication", duration(b.pp_comm), ""},
                                     {"Gradient synchronization", duration(b.dp_comm), ""},
                                     {"Optimizer step", duration(b.optimizer), ""}}));
    const train::pipeline_timeline tl = train::build_timeline(s.best.estimate, s.best.knobs.schedule);
    if (!tl.note.empty()) {
      timeline.blocks.push_back(paragraph("Note: " + tl.note +
                                          fmt::format(" (drawn {}, estimate {}).", duration(tl.makespan),
                                                      duration(s.best.estimate.time_per_batch))));
    }
  }
  doc.sections.push_back(std::move(timeline));
  return doc;
}

}  // namespace detail::report

/// report.md: what was searched, the best design and plan, the baselines with throughput ratios, the top
/// designs, and links to pareto.svg and timeline.svg.
inline std::string search_report_markdown(const search::summary& s, const search_report_options& o = {}) {
  return detail::report::markdown(detail::report::build(s, o));
}

/// report.html: the same content as self-contained XHTML (the SVGs inline, minimal inline CSS).
inline std::string search_report_html(const search::summary& s, const search_report_options& o = {}) {
  return detail::report::html(detail::report::build(s, o));
}

/// Adds pareto.csv, pareto.svg, timeline.svg, report.md and report.html to `files` (report_files: the
/// caller commits them with its own files as one set).
inline void add_search_report(report_files& files, const search::summary& s,
                              const search_report_options& o = {}) {
  files.add("pareto.csv", pareto_csv(s));
  files.add("pareto.svg", pareto_svg(s));
  files.add("timeline.svg", timeline_svg(s));
  files.add("report.md", search_report_markdown(s, o));
  files.add("report.html", search_report_html(s, o));
}

/// Writes pareto.csv, pareto.svg, timeline.svg, report.md and report.html into `dir` (created if missing)
/// as one set (report_files). A directory that cannot be created or written is an input_error naming it.
inline void write_search_report(const std::filesystem::path& dir, const search::summary& s,
                                const search_report_options& o = {}) {
  detail::report::make_directory(dir, "give a writable output directory");
  report_files files{dir};
  add_search_report(files, s, o);
  files.commit();
}

}  // namespace phaze::io
