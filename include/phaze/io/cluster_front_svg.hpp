/// @file
/// front.svg of a cluster search (docs/cluster-search.md): throughput against cost, every planned
/// composition as a hollow circle, the Pareto front of throughput vs cost as filled circles joined by a
/// step line, each front point labelled with its mix. A label is put on the first side of its point where it
/// overlaps no other label, no point and stays inside the plot; a label that fits nowhere is left out (its
/// point's tooltip still names it) and the legend says how many were. Same result, same bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "phaze/io/cluster_space_json.hpp"
#include "phaze/io/report_document.hpp"
#include "phaze/io/svg.hpp"
#include "phaze/search/cluster_space.hpp"

namespace phaze::io {

namespace detail::cluster_chart {
/// An axis-aligned rectangle in drawing units.
struct box {
  double x0 = 0.0;
  double y0 = 0.0;
  double x1 = 0.0;
  double y1 = 0.0;
  [[nodiscard]] bool overlaps(const box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  [[nodiscard]] bool inside(const box& o) const {
    return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1;
  }
};

/// The width of `text` at `font_size`: 0.62 em per character, above the mean advance of a sans-serif font's
/// digits and lower-case letters (about 0.55 em), so the boxes err on the wide side. Counts code points.
inline double text_width(std::string_view text, double font_size) {
  std::size_t chars = 0;
  for (const char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0U) != 0x80U) ++chars;
  return 0.62 * font_size * static_cast<double>(chars);
}

/// A label put next to its point: where its text starts (baseline), its anchor and the box it covers.
struct placed_label {
  std::size_t point = 0;  ///< index into the anchors given
  double x = 0.0;
  double y = 0.0;
  bool end_anchored = false;  ///< text-anchor "end": the text ends at x
  box bounds;
};

/// Puts each label beside its anchor, in the order given (put the most important first): the first of eight
/// positions around the point (right above, right below, left above, left below, further out the same way)
/// whose box stays inside `plot` and overlaps no label already put, no marker (a circle of `radius` around
/// each of `markers`) and none of `obstacles` (the front's line). A label that fits nowhere is left out.
inline std::vector<placed_label> place_labels(const std::vector<svg::point>& anchors,
                                              const std::vector<std::string>& texts,
                                              const std::vector<svg::point>& markers, const box& plot,
                                              double font_size, double radius,
                                              std::vector<box> obstacles = {}) {
  std::vector<placed_label> out;
  std::vector<box> taken = std::move(obstacles);
  for (const svg::point& m : markers)
    taken.push_back({m.x - radius, m.y - radius, m.x + radius, m.y + radius});
  const double h = font_size * 1.2;
  for (std::size_t i = 0; i < anchors.size(); ++i) {
    const double w = text_width(texts[i], font_size);
    const svg::point a = anchors[i];
    for (int candidate = 0; candidate < 8; ++candidate) {
      const double gap = radius + 3.0 + (candidate >= 4 ? 1.5 * h : 0.0);
      const bool right = candidate % 4 < 2;
      const bool above = candidate % 2 == 0;
      placed_label l;
      l.point = i;
      l.end_anchored = !right;
      l.x = right ? a.x + gap : a.x - gap;
      l.y = above ? a.y - gap : a.y + gap + h * 0.8;
      const double x0 = right ? l.x : l.x - w;
      l.bounds = {x0, l.y - h * 0.8, x0 + w, l.y + h * 0.2};
      if (!l.bounds.inside(plot)) continue;
      if (std::any_of(taken.begin(), taken.end(), [&](const box& b) { return b.overlaps(l.bounds); }))
        continue;
      taken.push_back(l.bounds);
      out.push_back(l);
      break;
    }
  }
  return out;
}

/// "16 h100-sxm + 8 a100-80gb": a mix as a chart label, first stages first.
inline std::string short_mix(const search::cluster_space& s, const search::cluster_point& p) {
  std::string out;
  for (const std::size_t t : detail::cluster_front::rank_order(p)) {
    if (!out.empty()) out += " + ";
    out += fmt::format("{} {}", p.mix.counts[t], s.devices[t].label);
  }
  return out;
}
}  // namespace detail::cluster_chart

/// The drawing of front.svg: throughput (y) against cost in thousands of USD (x); planned compositions as
/// hollow circles (class "planned"), the front of throughput vs cost as filled circles (class "front")
/// joined by a step line (class "front-line"), labels (class "front-label") placed without overlaps.
inline svg::drawing cluster_front_drawing(const search::cluster_space& s,
                                          const search::cluster_search_result& r, std::string_view title) {
  namespace rp = detail::report;
  namespace ch = detail::cluster_chart;
  constexpr double width = 960.0;
  constexpr double height = 560.0;
  constexpr double left = 80.0;
  constexpr double right = 230.0;
  constexpr double top = 50.0;
  constexpr double bottom = 60.0;
  constexpr double plot_w = width - left - right;
  constexpr double plot_h = height - top - bottom;
  constexpr double font = 11.0;
  constexpr double radius = 4.5;
  svg::drawing d(width, height, {{"class", "phaze-cluster-front"}});
  d.rect(0, 0, width, height, {{"fill", "#ffffff"}});
  d.text(left + plot_w / 2, 28, std::string{title},
         rp::with(rp::label_style, {{"text-anchor", "middle"}, {"font-size", "16"}, {"class", "title"}}));

  double x_max = 0.0;
  double y_max = 0.0;
  for (const auto& p : r.compositions) {
    if (p.status != search::outcome::evaluated) continue;
    x_max = std::max(x_max, p.mix.cost_usd / 1000.0);
    y_max = std::max(y_max, p.samples_per_s);
  }
  const rp::axis_ticks xt = rp::nice_ticks(x_max * 1.05);
  const rp::axis_ticks yt = rp::nice_ticks(y_max * 1.12);
  auto px = [&](double kusd) { return left + plot_w * std::clamp(kusd, 0.0, xt.top) / xt.top; };
  auto py = [&](double rate) { return top + plot_h - plot_h * std::clamp(rate, 0.0, yt.top) / yt.top; };

  rp::draw_chart_frame(d, {left, top, plot_w, plot_h, height}, xt, yt, px, py, "cluster cost (thousand USD)",
                       "throughput (samples/s)", x_max <= 0.0 || y_max <= 0.0,
                       "no composition within the budget has a plan that fits");

  auto tip = [&](const search::cluster_point& p) {
    return fmt::format("#{} {}: {:.0f} USD, {:.1f} kW, {}, {}", p.index, mix_text(s, p), p.mix.cost_usd,
                       p.mix.power.value() / 1000.0, rp::throughput(p.samples_per_s), cluster_plan_text(p));
  };
  std::vector<svg::point> markers;
  d.open_group({{"class", "planned-points"}});
  for (const auto& p : r.compositions) {
    if (p.status != search::outcome::evaluated) continue;
    markers.push_back({px(p.mix.cost_usd / 1000.0), py(p.samples_per_s)});
    d.circle(markers.back().x, markers.back().y, radius,
             {{"class", "planned"}, {"fill", "none"}, {"stroke", "#9c9c9c"}, {"stroke-width", "1.2"}},
             tip(p));
  }
  d.close_group();

  std::vector<svg::point> steps;
  std::vector<svg::point> anchors;
  std::vector<std::string> texts;
  for (std::size_t i = 0; i < r.cost_front.size(); ++i) {
    const auto& p = r.cost_front[i];
    const svg::point at{px(p.mix.cost_usd / 1000.0), py(p.samples_per_s)};
    if (i > 0) steps.push_back({at.x, steps.back().y});
    steps.push_back(at);
    anchors.push_back(at);
    texts.push_back(ch::short_mix(s, p));
  }
  if (!steps.empty()) {
    steps.push_back({left + plot_w, steps.back().y});
    d.polyline(steps,
               {{"class", "front-line"}, {"fill", "none"}, {"stroke", "#4e79a7"}, {"stroke-width", "1.5"}});
  }
  d.open_group({{"class", "front-points"}});
  for (std::size_t i = 0; i < r.cost_front.size(); ++i) {
    d.circle(anchors[i].x, anchors[i].y, radius,
             {{"class", "front"}, {"fill", "#4e79a7"}, {"stroke", "#ffffff"}, {"stroke-width", "0.5"}},
             tip(r.cost_front[i]));
  }
  d.close_group();
  // Labels: the fastest point first (the one readers look for), then down the front.
  std::vector<std::size_t> order(anchors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;
  std::vector<svg::point> ordered_anchors;
  std::vector<std::string> ordered_texts;
  for (const std::size_t i : order) {
    ordered_anchors.push_back(anchors[i]);
    ordered_texts.push_back(texts[i]);
  }
  // The step line's segments, as thin boxes a label must not cross.
  std::vector<ch::box> line;
  for (std::size_t i = 1; i < steps.size(); ++i) {
    line.push_back({std::min(steps[i - 1].x, steps[i].x) - 1.0, std::min(steps[i - 1].y, steps[i].y) - 1.0,
                    std::max(steps[i - 1].x, steps[i].x) + 1.0, std::max(steps[i - 1].y, steps[i].y) + 1.0});
  }
  const auto labels = ch::place_labels(ordered_anchors, ordered_texts, markers,
                                       {left + 2, top + 2, left + plot_w - 2, top + plot_h - 2}, font, radius,
                                       std::move(line));
  d.open_group({{"class", "front-labels"}});
  for (const auto& l : labels) {
    d.text(l.x, l.y, ordered_texts[l.point],
           rp::with(rp::label_style, {{"class", "front-label"},
                                      {"font-size", svg::number(font)},
                                      {"text-anchor", l.end_anchored ? "end" : "start"}}));
  }
  d.close_group();

  const double lx = left + plot_w + 20;
  double ly = top + 10;
  d.open_group({{"class", "legend"}});
  d.circle(lx + 6, ly, radius, {{"fill", "#4e79a7"}});
  d.text(lx + 18, ly + 4, fmt::format("Pareto front ({})", r.cost_front.size()), rp::label_style);
  ly += 20;
  d.circle(lx + 6, ly, radius, {{"fill", "none"}, {"stroke", "#9c9c9c"}, {"stroke-width", "1.2"}});
  d.text(lx + 18, ly + 4, fmt::format("planned ({})", r.evaluated - r.infeasible), rp::label_style);
  ly += 20;
  d.text(lx, ly + 4, fmt::format("pruned by the bound: {}", r.pruned), rp::label_style);
  ly += 20;
  d.text(lx, ly + 4, fmt::format("no plan fits: {}", r.infeasible), rp::label_style);
  if (labels.size() < anchors.size()) {
    ly += 20;
    d.text(lx, ly + 4, fmt::format("{} labels left out (overlap)", anchors.size() - labels.size()),
           rp::with(rp::label_style, {{"class", "note"}}));
  }
  d.close_group();
  return d;
}

/// front.svg as a standalone file.
inline std::string cluster_front_svg(const search::cluster_space& s, const search::cluster_search_result& r,
                                     std::string_view title) {
  return cluster_front_drawing(s, r, title).document();
}

}  // namespace phaze::io
