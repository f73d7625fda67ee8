/// @file
/// What every report of phaze is made of (docs/search-report.md): numbers formatted with fixed precision and
/// no locale (so the same input always gives the same bytes), SVG chart frames and styles, the pipeline
/// timeline of one estimate (pipeline_drawing), and a report as data (sections of paragraphs, items, tables
/// and figures) rendered as Markdown or self-contained XHTML and written to a folder. The co-search's report
/// (io/search_report.hpp), the plan report (io/plan_report.hpp) and the cluster fronts
/// (io/cluster_front_svg.hpp) are built on it.
#pragma once

#include <algorithm>
#include <array>
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
#include "phaze/io/svg.hpp"
#include "phaze/io/table.hpp"
#include "phaze/io/timeline_boxes.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"
#include "phaze/train/timeline.hpp"

namespace phaze::io {

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

}  // namespace detail::report

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

/// The files of one report, written as a set: each first to a temporary name beside its own
/// (NAME.phaze-tmp), and renamed over the old files only once every one is complete. A failure while they
/// are written (a full disk, a folder made read-only) removes the temporaries and leaves the folder as it
/// was: the previous report whole. (The renames need no space; only a rename failing between two of them,
/// which a full disk does not cause, would leave old and new files side by side.)
class report_files {
 public:
  explicit report_files(std::filesystem::path dir) : dir_(std::move(dir)) {}
  report_files(const report_files&) = delete;
  report_files& operator=(const report_files&) = delete;
  ~report_files() {
    std::error_code ignored;
    for (const auto& name : written_) std::filesystem::remove(temporary(name), ignored);
  }

  /// Writes `content` as the temporary of `name` (an input_error naming the file when it cannot).
  void add(const std::string& name, const std::string& content) {
    written_.push_back(name);  // first: a file that fails half-written is removed too
    detail::report::write_file(temporary(name), content);
  }

  /// Renames every file written into place.
  void commit() {
    for (const auto& name : written_) {
      std::error_code ec;
      std::filesystem::rename(temporary(name), dir_ / name, ec);
      if (ec) {
        throw input_error("cannot write the report file '" + (dir_ / name).string() + "': " + ec.message() +
                          "; give a writable output directory");
      }
    }
    written_.clear();
  }

 private:
  [[nodiscard]] std::filesystem::path temporary(const std::string& name) const {
    return dir_ / (name + ".phaze-tmp");
  }
  std::filesystem::path dir_;
  std::vector<std::string> written_;
};

}  // namespace phaze::io
