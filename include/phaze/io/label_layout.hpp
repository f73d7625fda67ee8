/// @file
/// Where a chart's labels go (docs/search-report.md): each label takes the first of its candidate positions
/// (next to its point, then farther out in eight directions with a leader line, or along its line) that lies
/// inside the plot and overlaps neither the markers nor the labels placed before it. Text extents are
/// estimated from the font size and the number of characters (io::text_box), generously for sans-serif.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

namespace phaze::io {

/// An axis-aligned rectangle in drawing units, y downwards.
struct box {
  double x0 = 0.0;
  double y0 = 0.0;
  double x1 = 0.0;
  double y1 = 0.0;
  [[nodiscard]] double width() const { return x1 - x0; }
  [[nodiscard]] double height() const { return y1 - y0; }
  /// Whether the interiors meet (touching edges do not).
  [[nodiscard]] bool intersects(const box& o) const {
    return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1;
  }
  [[nodiscard]] bool inside(const box& o) const {
    return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1;
  }
  [[nodiscard]] double overlap(const box& o) const {
    const double w = std::min(x1, o.x1) - std::max(x0, o.x0);
    const double h = std::min(y1, o.y1) - std::max(y0, o.y0);
    return w > 0.0 && h > 0.0 ? w * h : 0.0;
  }
};

/// Text extents as a share of the font size: a character's advance, and the ascent and descent above and
/// below the baseline. A rule of thumb, not a font's metrics: lower-case sans-serif letters are mostly
/// narrower than 0.6 em, so a run of wide capitals ("MW") can run over.
inline constexpr double text_advance_em = 0.6;
inline constexpr double text_ascent_em = 0.8;
inline constexpr double text_descent_em = 0.25;

/// Characters of UTF-8 text (code points).
inline std::size_t characters(std::string_view utf8) {
  return static_cast<std::size_t>(std::count_if(
      utf8.begin(), utf8.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

/// The estimated box of one line of text starting at x (text-anchor start) with its baseline at y.
inline box text_box(double x, double y, std::string_view utf8, double font_size) {
  return {x, y - text_ascent_em * font_size,
          x + text_advance_em * font_size * static_cast<double>(characters(utf8)),
          y + text_descent_em * font_size};
}

/// A position a label may take: its box, and whether it sits away from its point (drawn with a leader line).
struct label_candidate {
  box bounds;
  bool leader = false;
};

/// Positions for a label of w x h around a marker of half-size r at (x, y): next to it in eight directions
/// (right first, then above right, below right, left, ..., above, below), then the same directions ever
/// farther out, up to 400 units, with a leader line.
inline std::vector<label_candidate> around_point(double x, double y, double r, double w, double h) {
  constexpr double gap = 3.0;
  constexpr std::array<double, 13> rings{0, 8, 16, 26, 38, 52, 70, 95, 125, 160, 210, 280, 400};
  constexpr std::array<std::array<int, 2>, 8> directions{
      {{1, 0}, {1, -1}, {1, 1}, {-1, 0}, {-1, -1}, {-1, 1}, {0, -1}, {0, 1}}};
  std::vector<label_candidate> out;
  for (const double ring : rings) {
    const double reach = r + gap + ring;
    for (const auto& [dx, dy] : directions) {
      // The box's nearest edge (or corner) at `reach` from the point along the direction.
      const double ex = x + dx * reach;
      const double ey = y + dy * reach;
      const double left = dx > 0 ? ex : dx < 0 ? ex - w : ex - w / 2;
      const double top = dy > 0 ? ey : dy < 0 ? ey - h : ey - h / 2;
      out.push_back({{left, top, left + w, top + h}, ring > 0.0});
    }
  }
  return out;
}

/// Positions for a label of w x h of a horizontal line at y from x_left to x_right: above it at its right
/// end, below it there, then both stepping left along the line.
inline std::vector<label_candidate> along_line(double x_left, double x_right, double y, double w, double h) {
  constexpr double gap = 3.0;
  constexpr double margin = 4.0;
  constexpr double step = 24.0;
  std::vector<label_candidate> out;
  for (double right = x_right - margin; right - w >= x_left + margin || out.empty(); right -= step) {
    out.push_back({{right - w, y - gap - h, right, y - gap}, false});
    out.push_back({{right - w, y + gap, right, y + gap + h}, false});
  }
  return out;
}

/// Positions for a label of w x h anywhere in `area` on a grid of `step` units, nearest to (x, y) first (ties
/// in grid order), all with a leader line: the last resort when nothing near its point is free.
inline std::vector<label_candidate> anywhere(const box& area, double x, double y, double w, double h,
                                             double step = 8.0) {
  std::vector<std::pair<double, label_candidate>> grid;
  for (double top = area.y0; top + h <= area.y1; top += step) {
    for (double left = area.x0; left + w <= area.x1; left += step) {
      const double cx = std::clamp(x, left, left + w) - x;
      const double cy = std::clamp(y, top, top + h) - y;
      grid.push_back({cx * cx + cy * cy, {{left, top, left + w, top + h}, true}});
    }
  }
  std::stable_sort(grid.begin(), grid.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<label_candidate> out;
  out.reserve(grid.size());
  for (const auto& g : grid) out.push_back(g.second);
  return out;
}

/// The first candidate inside `area` that meets no box of `taken`; when every one does, the one inside
/// `area` (else any) that overlaps `taken` least. `candidates` must not be empty.
inline std::size_t pick_label(const std::vector<label_candidate>& candidates, const std::vector<box>& taken,
                              const box& area) {
  std::size_t best = 0;
  double least = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const box& b = candidates[i].bounds;
    const bool inside = b.inside(area);
    const bool free = std::none_of(taken.begin(), taken.end(), [&](const box& t) { return b.intersects(t); });
    if (inside && free) return i;
    double overlap = inside ? 0.0 : 1e12;  // inside first
    for (const box& t : taken) overlap += b.overlap(t);
    if (overlap < least) {
      least = overlap;
      best = i;
    }
  }
  return best;
}

}  // namespace phaze::io
