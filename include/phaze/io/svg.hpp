/// @file
/// A tiny SVG writer for phaze's reports: rectangles, lines, polylines, polygons, circles and text in a
/// viewBox, with escaped text and attributes and locale-independent, fixed-precision numbers, so the same
/// drawing always gives the same bytes.
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "phaze/core/error.hpp"

namespace phaze::io::svg {

/// `s` with the five XML special characters replaced by entities: safe in text and in quoted attributes.
inline std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// A coordinate or length with two decimals ("-0.00" prints as "0.00"); a non-finite value is a bug.
inline std::string number(double v) {
  if (!std::isfinite(v)) throw error("svg: a coordinate is not a finite number (a bug in phaze)");
  std::string s = fmt::format("{:.2f}", v);
  if (s == "-0.00") s = "0.00";
  return s;
}

/// One attribute; its value is escaped when written.
struct attribute {
  std::string name;
  std::string value;
};
using attributes = std::vector<attribute>;

/// A point of a polyline or polygon.
struct point {
  double x = 0.0;
  double y = 0.0;
};

/// An SVG drawing of `width` x `height` user units (viewBox "0 0 width height"). Elements are written in
/// the order they are added; `open_group` / `close_group` nest them. A `tooltip` becomes a `<title>` child.
class drawing {
 public:
  drawing(double width, double height, attributes root = {})
      : width_(width), height_(height), root_(std::move(root)) {}

  [[nodiscard]] double width() const { return width_; }
  [[nodiscard]] double height() const { return height_; }

  drawing& rect(double x, double y, double w, double h, const attributes& a = {},
                std::string_view tooltip = {}) {
    return element("rect", {{"x", number(x)}, {"y", number(y)}, {"width", number(w)}, {"height", number(h)}},
                   a, tooltip);
  }
  drawing& line(double x1, double y1, double x2, double y2, const attributes& a = {}) {
    return element("line", {{"x1", number(x1)}, {"y1", number(y1)}, {"x2", number(x2)}, {"y2", number(y2)}},
                   a, {});
  }
  drawing& circle(double cx, double cy, double r, const attributes& a = {}, std::string_view tooltip = {}) {
    return element("circle", {{"cx", number(cx)}, {"cy", number(cy)}, {"r", number(r)}}, a, tooltip);
  }
  drawing& polyline(const std::vector<point>& points, const attributes& a = {}) {
    return element("polyline", {{"points", points_of(points)}}, a, {});
  }
  drawing& polygon(const std::vector<point>& points, const attributes& a = {},
                   std::string_view tooltip = {}) {
    return element("polygon", {{"points", points_of(points)}}, a, tooltip);
  }
  /// Text whose baseline starts at (x, y); the content is escaped.
  drawing& text(double x, double y, std::string_view content, const attributes& a = {}) {
    indent();
    body_ += "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\"";
    append_attributes(a);
    body_ += ">" + escape(content) + "</text>\n";
    return *this;
  }
  drawing& open_group(const attributes& a = {}) {
    indent();
    body_ += "<g";
    append_attributes(a);
    body_ += ">\n";
    ++depth_;
    return *this;
  }
  drawing& close_group() {
    if (depth_ == 0) throw error("svg: close_group without open_group (a bug in phaze)");
    --depth_;
    indent();
    body_ += "</g>\n";
    return *this;
  }

  /// The `<svg>` element, to embed in an XHTML page.
  [[nodiscard]] std::string element() const {
    if (depth_ != 0) throw error("svg: a group was left open (a bug in phaze)");
    std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(width_) + "\" height=\"" +
                      number(height_) + "\" viewBox=\"0 0 " + number(width_) + " " + number(height_) + "\"";
    for (const attribute& a : root_) out += " " + a.name + "=\"" + escape(a.value) + "\"";
    out += ">\n" + body_ + "</svg>\n";
    return out;
  }
  /// A standalone SVG file: the XML declaration and the element.
  [[nodiscard]] std::string document() const {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + element();
  }

 private:
  static std::string points_of(const std::vector<point>& points) {
    std::string s;
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (i > 0) s += ' ';
      s += number(points[i].x) + "," + number(points[i].y);
    }
    return s;
  }
  void indent() { body_.append(2 * (depth_ + 1), ' '); }
  void append_attributes(const attributes& a) {
    for (const attribute& at : a) body_ += " " + at.name + "=\"" + escape(at.value) + "\"";
  }
  drawing& element(std::string_view name, const attributes& geometry, const attributes& a,
                   std::string_view tooltip) {
    indent();
    body_ += "<";
    body_ += name;
    append_attributes(geometry);
    append_attributes(a);
    if (tooltip.empty()) {
      body_ += "/>\n";
    } else {
      body_ += "><title>" + escape(tooltip) + "</title></";
      body_ += name;
      body_ += ">\n";
    }
    return *this;
  }

  double width_;
  double height_;
  attributes root_;
  std::string body_;
  std::size_t depth_ = 0;
};

}  // namespace phaze::io::svg
