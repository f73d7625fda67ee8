/// @file
/// Aligned plain-text tables and the human-readable number formats phaze prints (counts in K/M/B/T,
/// FLOPs in KFLOP..PFLOP, bytes in KiB/MiB/GiB/TiB).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "phaze/core/quantity.hpp"

namespace phaze::io {

/// How a column's cells line up: text to the left, numbers to the right.
enum class align : std::uint8_t { left, right };

/// A plain-text table: optional header, rows of cells, optional section titles between rows. Columns are
/// as wide as their widest cell and separated by two spaces; a rule of dashes follows the header.
/// @code
///   io::text_table t{{"name", "params"}, {io::align::left, io::align::right}};
///   t.add_row({"gpt2", "124M"});
///   std::fputs(t.render().c_str(), stdout);
/// @endcode
class text_table {
 public:
  /// A table with a header line (may be empty: no header) and per-column alignment (missing columns align
  /// left).
  explicit text_table(std::vector<std::string> header = {}, std::vector<align> alignment = {})
      : header_(std::move(header)), alignment_(std::move(alignment)) {}

  /// Appends a row; rows may have fewer cells than the widest row (the rest are blank).
  text_table& add_row(std::vector<std::string> cells) {
    rows_.push_back({std::move(cells), false});
    return *this;
  }

  /// Appends a section title: a line of its own, not aligned with the columns, preceded by a blank line.
  text_table& add_section(std::string title) {
    rows_.push_back({{std::move(title)}, true});
    return *this;
  }

  [[nodiscard]] std::size_t rows() const { return rows_.size(); }

  /// The table as text, one line per row, each ending in a newline; no trailing spaces.
  [[nodiscard]] std::string render() const {
    std::vector<std::size_t> widths(header_.size(), 0);
    auto widen = [&widths](const std::vector<std::string>& cells) {
      if (widths.size() < cells.size()) widths.resize(cells.size(), 0);
      for (std::size_t i = 0; i < cells.size(); ++i) widths[i] = std::max(widths[i], cells[i].size());
    };
    widen(header_);
    for (const auto& r : rows_)
      if (!r.section) widen(r.cells);

    std::string out;
    if (!header_.empty()) {
      out += line(header_, widths);
      std::size_t total = 0;
      for (std::size_t i = 0; i < widths.size(); ++i) total += widths[i] + (i == 0 ? 0 : gap);
      out += std::string(total, '-') + '\n';
    }
    for (const auto& r : rows_) {
      if (r.section) {
        if (!out.empty()) out += '\n';
        out += r.cells.front() + '\n';
      } else {
        out += line(r.cells, widths);
      }
    }
    return out;
  }

 private:
  static constexpr std::size_t gap = 2;

  struct row {
    std::vector<std::string> cells;
    bool section = false;
  };

  [[nodiscard]] align alignment_of(std::size_t column) const {
    return column < alignment_.size() ? alignment_[column] : align::left;
  }

  [[nodiscard]] std::string line(const std::vector<std::string>& cells,
                                 const std::vector<std::size_t>& widths) const {
    std::string out;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string_view cell = i < cells.size() ? std::string_view{cells[i]} : std::string_view{};
      if (i > 0) out.append(gap, ' ');
      if (alignment_of(i) == align::right) {
        out += fmt::format("{:>{}}", cell, widths[i]);
      } else {
        out += fmt::format("{:<{}}", cell, widths[i]);
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + '\n';
  }

  std::vector<std::string> header_;
  std::vector<align> alignment_;
  std::vector<row> rows_;
};

namespace detail {
/// `value` scaled by the largest step of 1000 not above it, with three significant digits and a suffix.
template <std::size_t N>
std::string scaled_decimal(double value, const std::array<std::string_view, N>& suffixes) {
  std::size_t step = 0;
  double scaled = value;
  while (step + 1 < suffixes.size() && std::fabs(scaled) >= 999.5) {
    scaled /= 1000.0;
    ++step;
  }
  if (step == 0) return fmt::format("{:.0f}{}", value, suffixes[0]);
  const int decimals = std::fabs(scaled) >= 99.95 ? 0 : std::fabs(scaled) >= 9.995 ? 1 : 2;
  return fmt::format("{:.{}f}{}", scaled, decimals, suffixes[step]);
}
}  // namespace detail

/// A count of things (parameters, tokens) with a decimal suffix: 6738415616 -> "6.74B", 50257 -> "50.3K".
inline constexpr auto format_count = [](double count) -> std::string {
  constexpr std::array<std::string_view, 5> suffixes{"", "K", "M", "B", "T"};
  return detail::scaled_decimal(count, suffixes);
};

/// A FLOP count with a decimal prefix (up to EFLOP): 1.2e10 -> "12.0 GFLOP".
inline constexpr auto format_flops = [](flops f) -> std::string {
  constexpr std::array<std::string_view, 7> prefixes{" FLOP",  " KFLOP", " MFLOP", " GFLOP",
                                                     " TFLOP", " PFLOP", " EFLOP"};
  return detail::scaled_decimal(f.value(), prefixes);
};

/// A byte count with a binary prefix: 3 * 2^30 -> "3.00 GiB", 512 -> "512 B".
inline constexpr auto format_bytes = [](bytes b) -> std::string {
  constexpr std::array<std::string_view, 5> units{"B", "KiB", "MiB", "GiB", "TiB"};
  double scaled = b.value();
  std::size_t step = 0;
  while (step + 1 < units.size() && std::fabs(scaled) >= 1023.5) {
    scaled /= 1024.0;
    ++step;
  }
  if (step == 0) return fmt::format("{:.0f} {}", scaled, units[0]);
  const int decimals = std::fabs(scaled) >= 99.95 ? 0 : std::fabs(scaled) >= 9.995 ? 1 : 2;
  return fmt::format("{:.{}f} {}", scaled, decimals, units[step]);
};

/// An integer with thousands separators: 6738415616 -> "6,738,415,616".
inline constexpr auto format_grouped = [](std::int64_t value) -> std::string {
  const std::string digits = fmt::format("{}", value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
};

}  // namespace phaze::io
