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

/// At most this many segment rectangles in timeline.svg, whatever the microbatches (or seven per stage, with
/// more than 142 stages).
inline constexpr std::size_t timeline_rectangles = 1000;

namespace detail::report {

/// `v` with `decimals` decimals, never "-0".
inline std::string fixed(double v, int decimals) {
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find_first_not_of("-0.") == std::string::npos && s.front() == '-') s.erase(0, 1);
  return s;
}

/// A value for a CSV cell: ten significant digits (enough to read back to 1e-9 relative).
inline std::string precise(double v) {
  std::string s = fmt::format("{:.10g}", v);
  if (s == "-0") s = "0";
  return s;
}

/// Samples per second: two decimals from 1 up, four significant digits below.
inline std::string throughput(double samples_per_s) {
  const double a = std::fabs(samples_per_s);
  const int decimals =
      a >= 1.0 || a == 0.0 ? 2 : std::min(12, 3 - static_cast<int>(std::floor(std::log10(a))));
  return fixed(samples_per_s, decimals) + " samples/s";
}

/// A duration with about four significant digits in s, ms or µs.
inline std::string duration(seconds t) {
  const double v = t.value();
  const double a = std::fabs(v);
  if (a >= 100.0) return fixed(v, 1) + " s";
  if (a >= 1.0) return fixed(v, 3) + " s";
  if (a >= 1e-3) return fixed(v * 1e3, 3) + " ms";
  return fixed(v * 1e6, 3) + " µs";
}

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

/// Ticks 0, step, ..., top covering [0, max] with a 1-2-5 step and about five intervals.
struct axis_ticks {
  double step = 1.0;
  double top = 1.0;
  int decimals = 0;
};

inline axis_ticks nice_ticks(double max) {
  axis_ticks t;
  if (!(max > 0.0) || !std::isfinite(max)) return t;
  const double raw = max / 5.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  t.step = (norm <= 1.0 ? 1.0 : norm <= 2.0 ? 2.0 : norm <= 5.0 ? 5.0 : 10.0) * magnitude;
  t.top = std::ceil(max / t.step - 1e-9) * t.step;
  t.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(t.step) + 1e-9)));
  return t;
}

// --- colours (Tableau 10) ------------------------------------------------------------------------------

inline std::string_view colour_of(train::segment_kind k) {
  switch (k) {
    case train::segment_kind::forward:
      return "#4e79a7";
    case train::segment_kind::backward:
      return "#f28e2b";
    case train::segment_kind::recompute:
      return "#e15759";
    case train::segment_kind::communication:
      return "#76b7b2";
    case train::segment_kind::bubble:
      return "#e6e6e6";
    case train::segment_kind::gradient_sync:
      return "#59a14f";
    case train::segment_kind::optimizer:
      return "#b07aa1";
  }
  return "#000000";
}

/// A mixed box's band is drawn when its kind takes at least a unit of the row's height.
constexpr double timeline_band_share(double row_height) {
  return 1.0 / row_height;
}

/// The boxes of every row of a timeline, and the minimum width they were made with.
struct timeline_layout {
  std::vector<std::vector<timeline_box>> rows;
  double min_width = 1.0;
  std::size_t rectangles = 0;
};

/// The rows' boxes (io::timeline_boxes) at x = origin + scale * t, at least `min_width` units wide: 1,
/// doubled until the rectangles drawn (one per pure box, one per band of a mixed box) number at most
/// timeline_rectangles, or until a box spans the plot's whole width (then each row is one box: at most
/// seven rectangles a row).
inline timeline_layout lay_out_timeline(const train::pipeline_timeline& t, double origin, double scale,
                                        double plot_width, double row_height) {
  timeline_layout out;
  for (;; out.min_width *= 2.0) {
    out.rows.clear();
    out.rectangles = 0;
    for (const auto& row : t.stages) {
      out.rows.push_back(phaze::io::timeline_boxes(row, origin, scale, out.min_width));
      for (const timeline_box& b : out.rows.back()) {
        out.rectangles += timeline_bands(b, timeline_band_share(row_height)).size();
      }
    }
    if (out.rectangles <= timeline_rectangles || out.min_width >= plot_width) return out;
  }
}

/// A timeline rectangle's tooltip: the segment with its microbatch and times, or, for a box of several, their
/// count, times and each kind's share of the time with its microbatches.
inline std::string box_tooltip(const std::vector<train::timeline_segment>& row, const timeline_box& b) {
  const train::timeline_segment& first = row[b.first];
  const train::timeline_segment& last = row[b.last - 1];
  if (b.segments() == 1) {
    return fmt::format("{}{}: {:.6f}-{:.6f} s", train::to_string(first.kind),
                       first.microbatch >= 0 ? fmt::format(" microbatch {}", first.microbatch) : "",
                       first.start.value(), first.end.value());
  }
  const double total = (last.end - first.start).value();
  std::string tip =
      fmt::format("{} segments, {:.6f}-{:.6f} s:", b.segments(), first.start.value(), last.end.value());
  const char* separator = " ";
  for (std::size_t k = 0; k < b.shares.size(); ++k) {
    const timeline_share& share = b.shares[k];
    if (!(share.seconds > 0.0)) continue;
    const double percent = total > 0.0 ? 100.0 * share.seconds / total : 0.0;
    tip += separator;
    tip += std::string{train::to_string(train::all_segment_kinds[k])} + " " +
           (percent < 0.5 ? std::string{"<1%"} : fmt::format("{:.0f}%", percent));
    if (share.first_microbatch >= 0) {
      tip += share.first_microbatch == share.last_microbatch
                 ? fmt::format(" (microbatch {})", share.first_microbatch)
                 : fmt::format(" (microbatches {}-{})", share.first_microbatch, share.last_microbatch);
    }
    separator = ", ";
  }
  return tip;
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

inline const svg::attributes axis_style{{"stroke", "#333333"}, {"stroke-width", "1"}};
inline const svg::attributes grid_style{{"stroke", "#dddddd"}, {"stroke-width", "1"}};
inline constexpr double label_font_size = 12.0;
inline const svg::attributes label_style{
    {"font-family", "sans-serif"}, {"font-size", "12"}, {"fill", "#222222"}};

/// `a` with `more` added; an attribute `a` already has takes the value from `more` (XML forbids duplicates).
inline svg::attributes with(svg::attributes a, const svg::attributes& more) {
  for (const svg::attribute& m : more) {
    auto same = std::find_if(a.begin(), a.end(), [&](const svg::attribute& x) { return x.name == m.name; });
    if (same != a.end()) {
      same->value = m.value;
    } else {
      a.push_back(m);
    }
  }
  return a;
}

/// Where a scatter chart's plot area lies in its drawing.
struct plot_area {
  double left = 0.0;
  double top = 0.0;
  double width = 0.0;
  double height = 0.0;
  double drawing_height = 0.0;  ///< the x axis title sits 15 units above the drawing's bottom
};

/// The frame of a scatter chart from 0 to the ticks' tops: grid lines and ticks, both axes, their titles,
/// and `empty` in the middle when nothing is plotted (`nothing_plotted`). px and py map values to the plot.
template <class Px, class Py>
void draw_chart_frame(svg::drawing& d, const plot_area& a, const axis_ticks& xt, const axis_ticks& yt, Px px,
                      Py py, std::string_view x_title, std::string_view y_title, bool nothing_plotted,
                      std::string_view empty) {
  for (double v = 0.0; v <= xt.top * (1 + 1e-9); v += xt.step) {
    d.line(px(v), a.top, px(v), a.top + a.height, grid_style);
    d.line(px(v), a.top + a.height, px(v), a.top + a.height + 5, axis_style);
    d.text(px(v), a.top + a.height + 18, fixed(v, xt.decimals),
           with(label_style, {{"text-anchor", "middle"}}));
  }
  for (double v = 0.0; v <= yt.top * (1 + 1e-9); v += yt.step) {
    d.line(a.left, py(v), a.left + a.width, py(v), grid_style);
    d.line(a.left - 5, py(v), a.left, py(v), axis_style);
    d.text(a.left - 8, py(v) + 4, fixed(v, yt.decimals), with(label_style, {{"text-anchor", "end"}}));
  }
  d.line(a.left, a.top + a.height, a.left + a.width, a.top + a.height, axis_style);
  d.line(a.left, a.top, a.left, a.top + a.height, axis_style);
  d.text(a.left + a.width / 2, a.drawing_height - 15, std::string{x_title},
         with(label_style, {{"text-anchor", "middle"}}));
  d.text(20, a.top + a.height / 2, std::string{y_title},
         with(label_style, {{"text-anchor", "middle"},
                            {"transform", "rotate(-90 20 " + svg::number(a.top + a.height / 2) + ")"}}));
  if (nothing_plotted) {
    d.text(a.left + a.width / 2, a.top + a.height / 2, std::string{empty},
           with(label_style, {{"text-anchor", "middle"}}));
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

/// The pipeline timeline of one estimate under `schedule` (train::build_timeline), titled "TITLE (schedule,
/// p stages, m microbatches per replica)": one row per stage (a group of class "stage" with data-stage and
/// data-end-s, the end of its last segment), a colour per segment kind with a legend, a time axis in seconds
/// and a dashed line (class "estimate") at the estimate's time per batch. Segments are drawn as
/// io::timeline_boxes (mixed ones as bands) of at least `data-min-width` units (on the root): 1, doubled
/// until at most timeline_rectangles rectangles remain; each has a tooltip.
inline svg::drawing pipeline_drawing(const train::step_estimate& estimate_of_plan,
                                     train::pipeline_schedule schedule, std::string_view title) {
  namespace r = detail::report;
  constexpr double width = 1000.0;
  constexpr double left = 80.0;
  constexpr double right = 30.0;
  constexpr double top = 50.0;
  constexpr double row_h = 24.0;
  constexpr double row_gap = 6.0;
  constexpr double plot_w = width - left - right;
  const train::pipeline_timeline t = train::build_timeline(estimate_of_plan, schedule);
  const auto stages = static_cast<double>(t.stages.size());
  const double plot_h = stages * (row_h + row_gap);
  const double height = top + plot_h + 100.0;
  const double estimate = estimate_of_plan.time_per_batch.value();
  // The axis spans the iteration plus 2%, with 1-2-5 ticks inside it.
  const double span = std::max(t.makespan.value(), estimate) * 1.02;
  const r::axis_ticks xt = r::nice_ticks(span);
  auto px = [&](double time) { return left + plot_w * time / span; };
  const r::timeline_layout boxes = r::lay_out_timeline(t, left, plot_w / span, plot_w, row_h);

  svg::drawing d(width, height,
                 {{"class", "phaze-timeline"}, {"data-min-width", svg::number(boxes.min_width)}});
  d.rect(0, 0, width, height, {{"fill", "#ffffff"}});
  d.text(width / 2, 28,
         fmt::format("{} ({}, {} stages, {} microbatches per replica)", title, train::to_string(t.schedule),
                     t.stages.size(), t.microbatches),
         r::with(r::label_style, {{"text-anchor", "middle"}, {"font-size", "16"}, {"class", "title"}}));
  for (double v = 0.0; v <= span; v += xt.step) {
    d.line(px(v), top - 4, px(v), top + plot_h, r::grid_style);
    d.line(px(v), top + plot_h, px(v), top + plot_h + 5, r::axis_style);
    d.text(px(v), top + plot_h + 18, r::fixed(v, xt.decimals),
           r::with(r::label_style, {{"text-anchor", "middle"}}));
  }
  d.line(left, top + plot_h, left + plot_w, top + plot_h, r::axis_style);
  d.text(left + plot_w / 2, top + plot_h + 36, "time (s)",
         r::with(r::label_style, {{"text-anchor", "middle"}}));

  std::array<bool, train::all_segment_kinds.size()> used{};
  for (std::size_t si = 0; si < t.stages.size(); ++si) {
    const auto& row = t.stages[si];
    const double y = top + static_cast<double>(si) * (row_h + row_gap) + row_gap / 2;
    d.text(left - 8, y + row_h / 2 + 4, fmt::format("stage {}", si),
           r::with(r::label_style, {{"text-anchor", "end"}, {"class", "stage-label"}}));
    d.open_group({{"class", "stage"},
                  {"data-stage", fmt::format("{}", si)},
                  {"data-end-s", fmt::format("{:.12e}", row.empty() ? 0.0 : row.back().end.value())}});
    for (const timeline_box& b : boxes.rows[si]) {
      const std::string tip = r::box_tooltip(row, b);
      double band_y = y;
      for (const timeline_band& band : timeline_bands(b, r::timeline_band_share(row_h))) {
        used[static_cast<std::size_t>(band.kind)] = true;
        svg::attributes a{{"class", std::string{train::to_string(band.kind)}},
                          {"fill", std::string{r::colour_of(band.kind)}}};
        if (b.mixed) a.push_back({"data-mixed", "true"});
        d.rect(b.x0, band_y, b.width(), row_h * band.height_share, a, tip);
        band_y += row_h * band.height_share;
      }
    }
    d.close_group();
  }
  d.line(px(estimate), top - 6, px(estimate), top + plot_h,
         {{"class", "estimate"},
          {"data-time-s", fmt::format("{:.12e}", estimate)},
          {"stroke", "#222222"},
          {"stroke-width", "1.5"},
          {"stroke-dasharray", "5 3"}});
  d.text(px(estimate), top - 10, "estimate " + r::duration(estimate_of_plan.time_per_batch),
         r::with(r::label_style, {{"text-anchor", "end"}, {"font-size", "11"}}));

  // Legend.
  double lx = left;
  const double ly = top + plot_h + 58;
  d.open_group({{"class", "legend"}});
  for (std::size_t k = 0; k < train::all_segment_kinds.size(); ++k) {
    if (!used[k]) continue;
    const auto kind = train::all_segment_kinds[k];
    d.rect(lx, ly - 10, 12, 12, {{"fill", std::string{r::colour_of(kind)}}, {"stroke", "#999999"}});
    const std::string name{train::to_string(kind)};
    d.text(lx + 16, ly, name, r::label_style);
    lx += 30.0 + 7.0 * static_cast<double>(name.size());
  }
  d.close_group();
  if (!t.note.empty()) {
    d.text(left, ly + 24, "note: " + t.note,
           r::with(r::label_style, {{"font-size", "11"}, {"class", "note"}}));
  }
  return d;
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

/// A report as data, rendered as Markdown or XHTML.
struct item {
  std::string label;
  std::string value;
  std::string id;  ///< XHTML id of the value's cell ("" for none)
};
struct table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string id;
};
struct block {
  enum class kind : std::uint8_t { paragraph, items, table, figure } type = kind::paragraph;
  std::string text;  ///< paragraph; figure: its caption
  std::vector<item> items;
  report::table grid;
  std::string file;  ///< figure: the SVG file next to the report
  std::string svg;   ///< figure: the `<svg>` element
};
struct section {
  std::string heading;
  std::vector<block> blocks;
};
struct document {
  std::string title;
  std::vector<section> sections;
};

inline block paragraph(std::string text) {
  block b;
  b.text = std::move(text);
  return b;
}
inline block items(std::vector<item> list) {
  block b;
  b.type = block::kind::items;
  b.items = std::move(list);
  return b;
}
inline block grid(report::table t) {
  block b;
  b.type = block::kind::table;
  b.grid = std::move(t);
  return b;
}
inline block figure(std::string file, std::string svg_element, std::string caption) {
  block b;
  b.type = block::kind::figure;
  b.file = std::move(file);
  b.svg = std::move(svg_element);
  b.text = std::move(caption);
  return b;
}

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

inline std::string markdown_cell(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '|') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

inline std::string markdown(const document& doc) {
  std::string out = "# " + doc.title + "\n";
  for (const section& sec : doc.sections) {
    out += "\n## " + sec.heading + "\n";
    for (const block& b : sec.blocks) {
      out += "\n";
      switch (b.type) {
        case block::kind::paragraph:
          out += b.text + "\n";
          break;
        case block::kind::items:
          for (const item& i : b.items) out += "- **" + i.label + "**: " + i.value + "\n";
          break;
        case block::kind::table: {
          auto line = [&](const std::vector<std::string>& cells) {
            out += "|";
            for (const auto& c : cells) out += " " + markdown_cell(c) + " |";
            out += "\n";
          };
          line(b.grid.header);
          out += "|";
          for (std::size_t i = 0; i < b.grid.header.size(); ++i) out += "---|";
          out += "\n";
          for (const auto& row : b.grid.rows) line(row);
          break;
        }
        case block::kind::figure:
          out += "![" + b.text + "](" + b.file + ")\n\n[" + b.file + "](" + b.file + ")\n";
          break;
      }
    }
  }
  return out;
}

inline constexpr std::string_view html_style =
    "body{font-family:sans-serif;max-width:1040px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse;margin:0.5em 0}"
    "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "th{background:#f2f2f2}"
    "table.items th{font-weight:normal;background:#fafafa}"
    "figure{margin:1em 0}svg{max-width:100%;height:auto}";

inline std::string html(const document& doc) {
  using svg::escape;
  std::string out =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE html>\n"
      "<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\" xml:lang=\"en\">\n<head>\n"
      "<meta charset=\"UTF-8\"/>\n<title>" +
      escape(doc.title) + "</title>\n<style>" + std::string{html_style} + "</style>\n</head>\n<body>\n<h1>" +
      escape(doc.title) + "</h1>\n";
  auto id_attr = [](const std::string& id) {
    return id.empty() ? std::string{} : " id=\"" + escape(id) + "\"";
  };
  for (const section& sec : doc.sections) {
    out += "<h2>" + escape(sec.heading) + "</h2>\n";
    for (const block& b : sec.blocks) {
      switch (b.type) {
        case block::kind::paragraph:
          out += "<p>" + escape(b.text) + "</p>\n";
          break;
        case block::kind::items:
          out += "<table class=\"items\">\n";
          for (const item& i : b.items) {
            out += "<tr><th>" + escape(i.label) + "</th><td" + id_attr(i.id) + ">" + escape(i.value) +
                   "</td></tr>\n";
          }
          out += "</table>\n";
          break;
        case block::kind::table:
          out += "<table" + id_attr(b.grid.id) + ">\n<tr>";
          for (const auto& h : b.grid.header) out += "<th>" + escape(h) + "</th>";
          out += "</tr>\n";
          for (const auto& row : b.grid.rows) {
            out += "<tr>";
            for (const auto& c : row) out += "<td>" + escape(c) + "</td>";
            out += "</tr>\n";
          }
          out += "</table>\n";
          break;
        case block::kind::figure:
          out += "<figure>\n" + b.svg + "<figcaption>" + escape(b.text) + " (<a href=\"" + escape(b.file) +
                 "\">" + escape(b.file) + "</a>)</figcaption>\n</figure>\n";
          break;
      }
    }
  }
  out += "</body>\n</html>\n";
  return out;
}

/// Creates the report folder `dir` if missing; one that cannot be created is an input_error naming it and
/// ending with `fix`.
inline void make_directory(const std::filesystem::path& dir, std::string_view fix) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::error_code kind;  // a path the file system cannot look up (too long) is no directory: never a throw
  if (ec || !std::filesystem::is_directory(dir, kind)) {
    throw input_error("cannot create the report directory '" + dir.string() +
                      "': " + (ec ? ec.message() : std::string{"not a directory"}) + "; " + std::string{fix});
  }
}

inline void write_file(const std::filesystem::path& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) {
    throw input_error("cannot write the report file '" + path.string() + "': " + std::strerror(errno) +
                      "; give a writable output directory");
  }
  f.write(content.data(), static_cast<std::streamsize>(content.size()));
  f.close();
  if (!f) throw input_error("cannot write the report file '" + path.string() + "' (disk full?)");
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

/// Writes pareto.csv, pareto.svg, timeline.svg, report.md and report.html into `dir` (created if missing).
/// A directory that cannot be created or written is an input_error naming it.
inline void write_search_report(const std::filesystem::path& dir, const search::summary& s,
                                const search_report_options& o = {}) {
  namespace r = detail::report;
  r::make_directory(dir, "give a writable output directory");
  r::write_file(dir / "pareto.csv", pareto_csv(s));
  r::write_file(dir / "pareto.svg", pareto_svg(s));
  r::write_file(dir / "timeline.svg", timeline_svg(s));
  r::write_file(dir / "report.md", search_report_markdown(s, o));
  r::write_file(dir / "report.html", search_report_html(s, o));
}

}  // namespace phaze::io
