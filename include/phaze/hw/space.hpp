/// @file
/// The accelerator search space: which tensor-core, vector-core, buffer and memory configurations of PHAZE's
/// template a search visits, under an area budget. A space is a value (per-dimension value lists), built by
/// the compile-time-checked DSL or at run time, and enumerated without materializing its grid.
/// @code
///   namespace dsl = phaze::dsl;
///   constexpr auto space = dsl::accelerator_space(
///       dsl::tensor_cores = dsl::pow2(1, 4096), dsl::tc_width = dsl::pow2(2, 256),
///       dsl::tc_depth = dsl::pow2(2, 256), dsl::vector_cores = dsl::pow2(1, 4096),
///       dsl::vc_width = dsl::same_as(dsl::tc_width), dsl::global_buffer = dsl::pow2(2_MiB, 128_MiB),
///       dsl::hbm = dsl::one_of(32_GiB, 64_GiB, 80_GiB),
///       dsl::area_budget = phaze::hw::area_of(phaze::hw::tpuv4_like));
///   for (const phaze::hw::device& d : space) { ... }   // deterministic order, area-filtered
/// @endcode
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/fixed_string.hpp"
#include "phaze/core/keywords.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/core/static_vector.hpp"
#include "phaze/hw/area.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"

namespace phaze::hw {

/// The axes (dimensions) of an accelerator space, in enumeration order (the last varies fastest).
enum class axis : std::uint8_t {
  tensor_cores,   ///< num_tc
  tc_width,       ///< rows of each systolic array
  tc_depth,       ///< columns of each systolic array
  vector_cores,   ///< num_vc
  vc_width,       ///< lanes per vector core
  global_buffer,  ///< GLB bytes
  hbm,            ///< HBM capacity in bytes
};
inline constexpr std::size_t axis_count = 7;

constexpr std::string_view to_string(axis d) {
  switch (d) {
    case axis::tensor_cores:
      return "tensor_cores";
    case axis::tc_width:
      return "tc_width";
    case axis::tc_depth:
      return "tc_depth";
    case axis::vector_cores:
      return "vector_cores";
    case axis::vc_width:
      return "vc_width";
    case axis::global_buffer:
      return "global_buffer";
    case axis::hbm:
      return "hbm";
  }
  return "?";
}

/// Whether a dimension is a size in bytes (global_buffer, hbm) rather than a count of cores, MACs or lanes.
constexpr bool is_size_in_bytes(axis d) {
  return d == axis::global_buffer || d == axis::hbm;
}

namespace rules {
[[noreturn]] inline void space_values_must_be_positive() {
  throw input_error("accelerator space: every value must be positive");
}
[[noreturn]] inline void core_counts_and_widths_must_be_whole_numbers() {
  throw input_error("accelerator space: core counts and widths must be whole numbers below 2^31");
}
[[noreturn]] inline void listed_values_must_be_distinct() {
  throw input_error("accelerator space: a value is listed twice; list each value once");
}
[[noreturn]] inline void a_dimension_needs_at_least_one_value() {
  throw input_error("accelerator space: a dimension has no values; give at least one");
}
[[noreturn]] inline void same_as_must_name_another_dimension() {
  throw input_error("accelerator space: an option cannot be same_as itself");
}
[[noreturn]] inline void same_as_must_not_chain_give_both_the_same_target() {
  throw input_error(
      "accelerator space: same_as names an option that is tied itself (or is the target of a tie); tie "
      "both options to the same untied option");
}
[[noreturn]] inline void same_as_must_tie_options_of_the_same_unit() {
  throw input_error("accelerator space: same_as ties a count or width to a size in bytes; tie like to like");
}
[[noreturn]] inline void area_bounds_must_be_positive() {
  throw input_error("accelerator space: the area budget must be positive and the minimum area not negative");
}
[[noreturn]] inline void space_base_must_be_a_systolic_design() {
  throw input_error("accelerator space: the base device must be a systolic (PHAZE template) design");
}
[[noreturn]] inline void configuration_index_out_of_range() {
  throw input_error("accelerator space: configuration index is not below count()");
}
}  // namespace rules

namespace detail {
/// Appends the decimal digits of `v` (v >= 0) to `out` at `len`.
constexpr void append_count(std::array<char, 64>& out, std::size_t& len, std::int64_t v) {
  std::array<char, 24> digits{};
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + static_cast<int>(v % 10));
    v /= 10;
  } while (v > 0 && n < digits.size());
  while (n > 0 && len < out.size()) out[len++] = digits[--n];
}
constexpr void append_char(std::array<char, 64>& out, std::size_t& len, char c) {
  if (len < out.size()) out[len++] = c;
}
/// A size in the largest binary unit that divides it: 128M, 32G, 512K, 100B.
constexpr void append_size(std::array<char, 64>& out, std::size_t& len, bytes b) {
  const auto v = static_cast<std::int64_t>(b.value());
  constexpr std::array<int, 3> shift{30, 20, 10};
  constexpr std::array<char, 3> suffix{'G', 'M', 'K'};
  for (std::size_t i = 0; i < shift.size(); ++i) {
    const std::int64_t unit = std::int64_t{1} << shift[i];
    if (v >= unit && v % unit == 0) {
      append_count(out, len, v >> shift[i]);
      append_char(out, len, suffix[i]);
      return;
    }
  }
  append_count(out, len, v);
  append_char(out, len, 'B');
}
}  // namespace detail

/// A short label for a design: "8x128x128 2x128 128M 32G" is 8 tensor cores of 128x128, 2 vector cores of
/// 128 lanes, a 128 MiB GLB and 32 GiB of HBM.
constexpr fixed_string<32> design_label(const systolic_design& s, bytes hbm) {
  std::array<char, 64> out{};
  std::size_t len = 0;
  detail::append_count(out, len, s.num_tc);
  detail::append_char(out, len, 'x');
  detail::append_count(out, len, s.tc_width);
  detail::append_char(out, len, 'x');
  detail::append_count(out, len, s.tc_depth);
  detail::append_char(out, len, ' ');
  detail::append_count(out, len, s.num_vc);
  detail::append_char(out, len, 'x');
  detail::append_count(out, len, s.vc_width);
  detail::append_char(out, len, ' ');
  detail::append_size(out, len, s.glb);
  detail::append_char(out, len, ' ');
  detail::append_size(out, len, hbm);
  return fixed_string<32>{std::string_view{out.data(), len}};
}

/// A set of accelerator designs: for each dimension a list of values (or a tie to another dimension), a base
/// device for everything the space does not vary (clock, HBM bandwidth, precision), and area bounds.
/// The designs are the cross product of the value lists whose die area is within the bounds, in a fixed
/// order: dimensions in `axis` order, the last varying fastest, each dimension's values ascending.
/// Enumeration never materializes the grid; because area is monotone in every dimension it skips whole
/// sub-ranges that exceed the budget, with the same result as filtering the full grid.
class space {
 public:
  /// The most values one dimension may hold (enough for every power of two of a 64-bit count).
  static constexpr std::size_t max_values = 64;
  using values_type = static_vector<double, max_values>;

  /// A space holding only the reference design (tpuv4_like), with no area bounds.
  constexpr space() : space(tpuv4_like) {}
  /// A space holding only `base`, with no area bounds. Every dimension starts at the base's value.
  constexpr explicit space(const device& base) : base_(base) {
    if (base.kind != device_kind::systolic) rules::space_base_must_be_a_systolic_design();
    validate(base);
    const auto& s = base.systolic;
    dims_[index(axis::tensor_cores)].values = {static_cast<double>(s.num_tc)};
    dims_[index(axis::tc_width)].values = {static_cast<double>(s.tc_width)};
    dims_[index(axis::tc_depth)].values = {static_cast<double>(s.tc_depth)};
    dims_[index(axis::vector_cores)].values = {static_cast<double>(s.num_vc)};
    dims_[index(axis::vc_width)].values = {static_cast<double>(s.vc_width)};
    dims_[index(axis::global_buffer)].values = {s.glb.value()};
    dims_[index(axis::hbm)].values = {base.hbm.value()};
  }

  // --- building (the DSL calls these; a JSON spec can too) ----------------------------------------------

  /// The values of a dimension (sizes in bytes for global_buffer and hbm), in any order; they are sorted.
  /// Unties the dimension if it was same_as another.
  constexpr space& set_values(axis d, values_type list) {
    if (list.empty()) rules::a_dimension_needs_at_least_one_value();
    for (double v : list) {
      if (!(v > 0.0)) rules::space_values_must_be_positive();
      if (!is_size_in_bytes(d) &&
          (v > 2147483647.0 || v != static_cast<double>(static_cast<std::int64_t>(v)))) {
        rules::core_counts_and_widths_must_be_whole_numbers();
      }
    }
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i)
      if (list[i] == list[i - 1]) rules::listed_values_must_be_distinct();
    dims_[index(d)] = {list, std::nullopt};
    return *this;
  }

  /// Every power of two from `lo` to `hi`.
  constexpr space& set_pow2(axis d, double lo, double hi) {
    dsl::check_pow2_bounds(lo, hi);
    values_type list;
    for (double v = lo; v <= hi; v *= 2.0) list.push_back(v);
    return set_values(d, list);
  }

  /// `d` takes the value of `target` in every design (d adds no dimension of its own).
  constexpr space& set_same_as(axis d, axis target) {
    if (d == target) rules::same_as_must_name_another_dimension();
    if (is_size_in_bytes(d) != is_size_in_bytes(target)) rules::same_as_must_tie_options_of_the_same_unit();
    if (dims_[index(target)].tied_to) rules::same_as_must_not_chain_give_both_the_same_target();
    for (const auto& other : dims_)
      if (other.tied_to == d) rules::same_as_must_not_chain_give_both_the_same_target();
    dims_[index(d)] = {values_type{}, target};
    return *this;
  }

  /// Designs above this area are left out (by default none are).
  constexpr space& set_area_budget(area budget) {
    if (!(budget.value() > 0.0)) rules::area_bounds_must_be_positive();
    budget_ = budget;
    return *this;
  }
  /// Designs below this area are left out, except single-core designs when `set_exempt_single_core(true)`.
  constexpr space& set_min_area(area minimum) {
    if (!(minimum.value() >= 0.0)) rules::area_bounds_must_be_positive();
    min_area_ = minimum;
    return *this;
  }
  /// Whether designs with one tensor core and one vector core escape the minimum area.
  constexpr space& set_exempt_single_core(bool exempt) {
    exempt_single_core_ = exempt;
    return *this;
  }
  /// The technology areas are computed with (tsmc_n7 by default).
  constexpr space& set_technology(const technology& t) {
    tech_ = t;
    return *this;
  }

  // --- reading --------------------------------------------------------------------------------------------

  [[nodiscard]] constexpr const device& base() const { return base_; }
  /// The values of a dimension, ascending; empty when the dimension is same_as another.
  [[nodiscard]] constexpr const values_type& values(axis d) const { return dims_[index(d)].values; }
  /// The dimension `d` follows, if it is same_as one.
  [[nodiscard]] constexpr std::optional<axis> same_as(axis d) const { return dims_[index(d)].tied_to; }
  [[nodiscard]] constexpr area area_budget() const { return budget_; }
  [[nodiscard]] constexpr area min_area() const { return min_area_; }
  [[nodiscard]] constexpr bool exempts_single_core() const { return exempt_single_core_; }
  [[nodiscard]] constexpr const technology& tech() const { return tech_; }

  /// Whether a design's area is within this space's bounds.
  [[nodiscard]] constexpr bool admits(const systolic_design& s) const {
    const area a = area_of(s, tech_);
    if (a > budget_) return false;
    return a >= min_area_ || (exempt_single_core_ && s.num_tc == 1 && s.num_vc == 1);
  }

  // --- enumeration ----------------------------------------------------------------------------------------

  /// The number of designs before the area filter: the product of the untied dimensions' sizes.
  [[nodiscard]] constexpr std::uint64_t raw_size() const {
    const layout l = free_dimensions();
    std::uint64_t n = 1;
    for (std::size_t p = 0; p < l.n; ++p) n *= l.size[p];
    return n;
  }

  /// The number of designs (after the area filter). Counts whole sub-ranges at once where they all fit.
  [[nodiscard]] constexpr std::uint64_t count() const {
    const layout l = free_dimensions();
    digits g{};
    return count_below(l, g, 0);
  }

  /// The `i`-th design in enumeration order (i < count()); for splitting work into index ranges.
  [[nodiscard]] constexpr device at(std::uint64_t i) const {
    const layout l = free_dimensions();
    digits g{};
    for (std::size_t level = 0; level < l.n; ++level) {
      bool found = false;
      for (g[level] = 0; g[level] < l.size[level]; ++g[level]) {
        const std::uint64_t below = count_below(l, g, level + 1);
        if (i < below) {
          found = true;
          break;
        }
        i -= below;
      }
      if (!found) rules::configuration_index_out_of_range();
    }
    return make_device(point_at(l, g, l.n, fill::low));
  }

  class iterator;
  [[nodiscard]] constexpr iterator begin() const;
  [[nodiscard]] constexpr iterator end() const;

  /// Calls `f(const device&)` on every design, in enumeration order.
  template <class F>
  constexpr void for_each(F&& f) const {
    const layout l = free_dimensions();
    digits g{};
    for (bool more = seek(l, g, 0); more; more = advance(l, g))
      f(make_device(point_at(l, g, l.n, fill::low)));
  }

  friend constexpr bool operator==(const space&, const space&) = default;

  class design_table;
  /// Every design in enumeration order with O(1) random access (at() counts sub-ranges on every call): one
  /// pass over the space, keeping each design's digits (a few bytes each).
  [[nodiscard]] design_table designs() const;

 private:
  struct axis_spec {
    values_type values;
    std::optional<axis> tied_to;
    friend constexpr bool operator==(const axis_spec&, const axis_spec&) = default;
  };
  /// The untied dimensions in enumeration order and their sizes: the digits of the mixed-radix counter.
  struct layout {
    std::array<axis, axis_count> free{};
    std::array<std::size_t, axis_count> size{};
    std::size_t n = 0;
  };
  using digits = std::array<std::uint8_t, axis_count>;
  using point = std::array<double, axis_count>;
  /// What the digits not yet fixed take: their smallest values (a lower bound on area) or largest.
  enum class fill : std::uint8_t { low, high };

  static constexpr std::size_t index(axis d) { return static_cast<std::size_t>(d); }

  [[nodiscard]] constexpr layout free_dimensions() const {
    layout l;
    for (std::size_t i = 0; i < axis_count; ++i) {
      if (dims_[i].tied_to) continue;
      l.free[l.n] = static_cast<axis>(i);
      l.size[l.n] = dims_[i].values.size();
      ++l.n;
    }
    return l;
  }

  /// The values of a design whose first `fixed` digits are `g` and whose other digits are at `rest`.
  [[nodiscard]] constexpr point point_at(const layout& l, const digits& g, std::size_t fixed,
                                         fill rest) const {
    point v{};
    for (std::size_t p = 0; p < l.n; ++p) {
      const auto& list = dims_[index(l.free[p])].values;
      const std::size_t i = p < fixed ? g[p] : (rest == fill::low ? 0 : list.size() - 1);
      v[index(l.free[p])] = list[i];
    }
    for (std::size_t i = 0; i < axis_count; ++i)
      if (dims_[i].tied_to) v[i] = v[index(*dims_[i].tied_to)];
    return v;
  }

  [[nodiscard]] constexpr systolic_design design_of(const point& v) const {
    systolic_design s = base_.systolic;
    s.num_tc = static_cast<int>(v[index(axis::tensor_cores)]);
    s.tc_width = static_cast<int>(v[index(axis::tc_width)]);
    s.tc_depth = static_cast<int>(v[index(axis::tc_depth)]);
    s.num_vc = static_cast<int>(v[index(axis::vector_cores)]);
    s.vc_width = static_cast<int>(v[index(axis::vc_width)]);
    s.glb = bytes{v[index(axis::global_buffer)]};
    return s;
  }

  [[nodiscard]] constexpr device make_device(const point& v) const {
    device d = base_;
    d.systolic = design_of(v);
    d.hbm = bytes{v[index(axis::hbm)]};
    d.name = design_label(d.systolic, d.hbm);
    return d;
  }

  [[nodiscard]] constexpr area area_at(const layout& l, const digits& g, std::size_t fixed, fill rest) const {
    return area_of(design_of(point_at(l, g, fixed, rest)), tech_);
  }

  /// The number of designs whose first `level` digits are `g`'s. A sub-range whose smallest design is over
  /// budget is empty; one whose largest fits and whose smallest meets the minimum is counted whole; one
  /// wholly under the minimum holds only its single-core designs (if they are exempt).
  [[nodiscard]] constexpr std::uint64_t count_below(const layout& l, digits& g, std::size_t level) const {
    if (level == l.n) return admits(design_of(point_at(l, g, l.n, fill::low))) ? 1 : 0;
    const area low = area_at(l, g, level, fill::low);
    if (low > budget_) return 0;
    const area high = area_at(l, g, level, fill::high);
    if (low >= min_area_ && high <= budget_) {
      std::uint64_t whole = 1;
      for (std::size_t p = level; p < l.n; ++p) whole *= l.size[p];
      return whole;
    }
    if (high < min_area_ && high <= budget_)
      return exempt_single_core_ ? single_core_designs(l, g, level) : 0;
    std::uint64_t total = 0;
    for (g[level] = 0; g[level] < l.size[level]; ++g[level]) {
      if (area_at(l, g, level + 1, fill::low) > budget_) break;  // and every larger value of this digit
      total += count_below(l, g, level + 1);
    }
    g[level] = 0;
    return total;
  }

  /// Whether a free dimension decides a core count: it is one, or a core count is same_as it.
  [[nodiscard]] constexpr bool decides_core_count(axis d) const {
    if (d == axis::tensor_cores || d == axis::vector_cores) return true;
    return dims_[index(axis::tensor_cores)].tied_to == d || dims_[index(axis::vector_cores)].tied_to == d;
  }

  /// The number of designs of one tensor core and one vector core whose first `level` digits are `g`'s.
  [[nodiscard]] constexpr std::uint64_t single_core_designs(const layout& l, const digits& g,
                                                            std::size_t level) const {
    std::uint64_t n = 1;
    for (std::size_t p = 0; p < l.n; ++p) {
      if (!decides_core_count(l.free[p])) {
        if (p >= level) n *= l.size[p];
        continue;
      }
      // Values ascend, so a count of one can only be the first value of an open digit.
      const auto& list = dims_[index(l.free[p])].values;
      if (list[p < level ? g[p] : 0] != 1.0) return 0;
    }
    return n;
  }

  /// Steps the counter at `level` (zeroing the digits after it), carrying upwards. Returns the level that
  /// changed, or -1 past the last design.
  static constexpr int bump(const layout& l, digits& g, int level) {
    for (std::size_t p = static_cast<std::size_t>(level) + 1; p < l.n; ++p) g[p] = 0;
    while (true) {
      const auto p = static_cast<std::size_t>(level);
      if (++g[p] < l.size[p]) return level;
      g[p] = 0;
      if (level == 0) return -1;
      --level;
    }
  }

  /// Moves `g` to the first admitted design at or after it, given that digits before `level` already passed
  /// the budget check. When a digit's smallest completion is over budget, so is every larger value of that
  /// digit (area is monotone), so the counter moves to the next value one level up.
  [[nodiscard]] constexpr bool seek(const layout& l, digits& g, int level) const {
    const int n = static_cast<int>(l.n);
    while (true) {
      if (level == n) {
        if (admits(design_of(point_at(l, g, l.n, fill::low)))) return true;
        level = bump(l, g, n - 1);
      } else if (area_at(l, g, static_cast<std::size_t>(level) + 1, fill::low) <= budget_) {
        ++level;
        continue;
      } else {
        if (level == 0) return false;
        level = bump(l, g, level - 1);
      }
      if (level < 0) return false;
    }
  }

  [[nodiscard]] constexpr bool advance(const layout& l, digits& g) const {
    const int level = bump(l, g, static_cast<int>(l.n) - 1);
    return level >= 0 && seek(l, g, level);
  }

  device base_;
  std::array<axis_spec, axis_count> dims_{};
  area budget_{std::numeric_limits<double>::infinity()};
  area min_area_{0.0};
  bool exempt_single_core_ = false;
  technology tech_ = tsmc_n7;
};

/// A forward iterator over a space's designs (a proxy: it holds the current device).
/// The designs of a space in enumeration order, each made on access from its digits (space::designs()).
class space::design_table {
 public:
  [[nodiscard]] std::size_t size() const { return digits_.size(); }
  /// The i-th design (i < size()): space::at(i), in O(1).
  [[nodiscard]] device operator[](std::size_t i) const {
    return space_.make_device(space_.point_at(layout_, digits_.at(i), layout_.n, fill::low));
  }

 private:
  friend class space;
  space space_;
  layout layout_;
  std::vector<digits> digits_;
};

inline space::design_table space::designs() const {
  design_table t;
  t.space_ = *this;
  t.layout_ = free_dimensions();
  digits g{};
  for (bool more = seek(t.layout_, g, 0); more; more = advance(t.layout_, g)) t.digits_.push_back(g);
  return t;
}

class space::iterator {
 public:
  using value_type = device;
  using difference_type = std::ptrdiff_t;
  using reference = const device&;
  using pointer = const device*;
  using iterator_category = std::forward_iterator_tag;

  constexpr iterator() = default;

  constexpr reference operator*() const { return current_; }
  constexpr pointer operator->() const { return &current_; }
  constexpr iterator& operator++() {
    if (space_->advance(layout_, digits_)) {
      current_ = space_->make_device(space_->point_at(layout_, digits_, layout_.n, fill::low));
    } else {
      space_ = nullptr;
    }
    return *this;
  }
  constexpr iterator operator++(int) {
    iterator before = *this;
    ++*this;
    return before;
  }
  friend constexpr bool operator==(const iterator& a, const iterator& b) {
    if (a.space_ == nullptr || b.space_ == nullptr) return a.space_ == b.space_;
    return a.space_ == b.space_ && a.digits_ == b.digits_;
  }

 private:
  friend class space;
  constexpr explicit iterator(const space& s) : space_(&s), layout_(s.free_dimensions()) {
    if (s.seek(layout_, digits_, 0)) {
      current_ = s.make_device(s.point_at(layout_, digits_, layout_.n, fill::low));
    } else {
      space_ = nullptr;
    }
  }

  const space* space_ = nullptr;  ///< null at the end
  layout layout_{};
  digits digits_{};
  device current_{};
};

constexpr space::iterator space::begin() const {
  return iterator{*this};
}
constexpr space::iterator space::end() const {
  return iterator{};
}

}  // namespace phaze::hw

namespace phaze::dsl {

/// Accelerator-space option tags. Dimension tags carry their dimension and unit.
namespace tags {
// clang-format off
struct tensor_cores { using of = struct accelerator_space_call; static constexpr hw::axis axis = hw::axis::tensor_cores; using unit = std::int64_t; };
struct tc_width { using of = accelerator_space_call; static constexpr hw::axis axis = hw::axis::tc_width; using unit = std::int64_t; };
struct tc_depth { using of = accelerator_space_call; static constexpr hw::axis axis = hw::axis::tc_depth; using unit = std::int64_t; };
struct vector_cores { using of = accelerator_space_call; static constexpr hw::axis axis = hw::axis::vector_cores; using unit = std::int64_t; };
struct vc_width { using of = accelerator_space_call; static constexpr hw::axis axis = hw::axis::vc_width; using unit = std::int64_t; };
struct global_buffer { using of = accelerator_space_call; static constexpr hw::axis axis = hw::axis::global_buffer; using unit = bytes; };
struct hbm { using of = accelerator_space_call; static constexpr hw::axis axis = hw::axis::hbm; using unit = bytes; };
struct area_budget { using of = accelerator_space_call; };
struct min_area { using of = accelerator_space_call; };
struct exempt_single_core { using of = accelerator_space_call; };
struct base { using of = accelerator_space_call; };
// clang-format on
}  // namespace tags

/// A dimension's keyword: takes one value, `pow2(lo, hi)`, `one_of(v...)` or `same_as(other)`.
template <class Tag>
struct dimension_keyword {
  using tag = Tag;
  using unit = typename Tag::unit;
  // NOLINTBEGIN(misc-unconventional-assign-operator): keyword syntax, not assignment
  constexpr argument<Tag, unit> operator=(unit v) const { return {v}; }
  constexpr argument<Tag, pow2_values<unit>> operator=(pow2_values<unit> r) const { return {r}; }
  template <std::size_t N>
  constexpr argument<Tag, listed_values<unit, N>> operator=(const listed_values<unit, N>& l) const {
    return {l};
  }
  template <class Other>
  constexpr argument<Tag, same_as_option<Other>> operator=(same_as_option<Other> t) const {
    return {t};
  }
  /// Anything else (a plain number for a size, sizes in a count's list) stops compilation with one sentence.
  template <class V>
  requires(!std::is_convertible_v<V, unit>) constexpr argument<Tag, unit> operator=(const V&) const {
    return {detail::refuse_value_kind<unit, V>()};
  }
  // NOLINTEND(misc-unconventional-assign-operator)
};

inline constexpr dimension_keyword<tags::tensor_cores> tensor_cores{};
inline constexpr dimension_keyword<tags::tc_width> tc_width{};
inline constexpr dimension_keyword<tags::tc_depth> tc_depth{};
inline constexpr dimension_keyword<tags::vector_cores> vector_cores{};
inline constexpr dimension_keyword<tags::vc_width> vc_width{};
inline constexpr dimension_keyword<tags::global_buffer> global_buffer{};
inline constexpr dimension_keyword<tags::hbm> hbm{};
/// Designs larger than this are left out.
inline constexpr keyword<tags::area_budget, hw::area> area_budget{};
/// Designs smaller than this are left out (see exempt_single_core).
inline constexpr keyword<tags::min_area, hw::area> min_area{};
/// Whether designs of one tensor core and one vector core escape min_area.
inline constexpr keyword<tags::exempt_single_core, bool> exempt_single_core{};
/// The device whose clock, HBM bandwidth and precision every design keeps (default: tpuv4_like).
inline constexpr keyword<tags::base, hw::device> base{};

namespace detail {
template <class Tag>
concept space_dimension_tag = requires {
  Tag::axis;
  typename Tag::unit;
};

/// One check per argument, so the diagnostic's instantiation context names the offending option's tag.
template <class Arg>
constexpr void check_space_option() {
  static_assert(belongs_to<tags::accelerator_space_call, Arg>,
                "phaze::dsl::accelerator_space: this option does not belong to an accelerator space (the tag "
                "above names it); give tensor_cores, tc_width, tc_depth, vector_cores, vc_width, "
                "global_buffer, hbm, area_budget, min_area, exempt_single_core or base");
}

/// The option a same_as names (void when `Opt` is not given as same_as(...)).
template <class V>
struct same_as_target {
  using type = void;
};
template <class Tag>
struct same_as_target<same_as_option<Tag>> {
  using type = Tag;
};
template <class Opt, class... Args>
using same_as_target_t = typename same_as_target<value_type_of_t<Opt, Args...>>::type;

template <class Opt, class... Args>
constexpr bool same_as_names_a_dimension() {
  using target = same_as_target_t<Opt, Args...>;
  if constexpr (std::is_void_v<target>) {
    return true;
  } else {
    return space_dimension_tag<target>;
  }
}
template <class Opt, class... Args>
constexpr bool same_as_names_an_option_in_the_call() {
  using target = same_as_target_t<Opt, Args...>;
  if constexpr (std::is_void_v<target>) {
    return true;
  } else {
    return !space_dimension_tag<target> || count_of<target, Args...> >= 1;
  }
}
template <class Opt, class... Args>
constexpr bool same_as_names_another_option() {
  return !std::is_same_v<same_as_target_t<Opt, Args...>, Opt>;
}
template <class Opt, class... Args>
constexpr bool same_as_names_an_untied_option() {
  using target = same_as_target_t<Opt, Args...>;
  if constexpr (std::is_void_v<target> || std::is_same_v<target, Opt>) {
    return true;
  } else {
    return !is_same_as_option<value_type_of_t<target, Args...>>;
  }
}
template <class Opt, class... Args>
constexpr bool same_as_names_an_option_of_the_same_unit() {
  using target = same_as_target_t<Opt, Args...>;
  if constexpr (std::is_void_v<target>) {
    return true;
  } else if constexpr (!space_dimension_tag<target>) {
    return true;
  } else {
    return std::is_same_v<typename target::unit, typename Opt::unit>;
  }
}
template <class Opt, class... Args>
constexpr bool dimension_option_is_valid() {
  return count_of<Opt, Args...> <= 1 && same_as_names_a_dimension<Opt, Args...>() &&
         same_as_names_an_option_in_the_call<Opt, Args...>() &&
         same_as_names_another_option<Opt, Args...>() && same_as_names_an_untied_option<Opt, Args...>() &&
         same_as_names_an_option_of_the_same_unit<Opt, Args...>();
}
template <class... Args>
constexpr bool space_call_is_valid() {
  return (belongs_to<tags::accelerator_space_call, Args> && ...) &&
         dimension_option_is_valid<tags::tensor_cores, Args...>() &&
         dimension_option_is_valid<tags::tc_width, Args...>() &&
         dimension_option_is_valid<tags::tc_depth, Args...>() &&
         dimension_option_is_valid<tags::vector_cores, Args...>() &&
         dimension_option_is_valid<tags::vc_width, Args...>() &&
         dimension_option_is_valid<tags::global_buffer, Args...>() &&
         dimension_option_is_valid<tags::hbm, Args...>() && count_of<tags::area_budget, Args...> <= 1 &&
         count_of<tags::min_area, Args...> <= 1 && count_of<tags::exempt_single_core, Args...> <= 1 &&
         count_of<tags::base, Args...> <= 1;
}

template <class Tag, class T>
constexpr void apply_space_option(hw::space& s, const argument<Tag, T>& a) {
  if constexpr (space_dimension_tag<Tag>) {
    if constexpr (is_same_as_option<T>) {
      s.set_same_as(Tag::axis, T::tag::axis);
    } else if constexpr (is_pow2_values<T>) {
      s.set_pow2(Tag::axis, raw_value(a.value.lo), raw_value(a.value.hi));
    } else if constexpr (is_listed_values<T>) {
      hw::space::values_type list;
      for (const auto& v : a.value.values) list.push_back(raw_value(v));
      s.set_values(Tag::axis, list);
    } else {
      s.set_values(Tag::axis, {raw_value(a.value)});
    }
  } else if constexpr (std::is_same_v<Tag, tags::area_budget>) {
    s.set_area_budget(a.value);
  } else if constexpr (std::is_same_v<Tag, tags::min_area>) {
    s.set_min_area(a.value);
  } else if constexpr (std::is_same_v<Tag, tags::exempt_single_core>) {
    s.set_exempt_single_core(a.value);
  }  // tags::base is read before the others
}
}  // namespace detail

// Per-option checks, written as macros because a static_assert message must be a literal naming the option.
// clang-format off
#define PHAZE_DSL_SPACE_GIVEN_ONCE(opt)                                                                  \
  static_assert(detail::count_of<tags::opt, Args...> <= 1,                                               \
                "phaze::dsl::accelerator_space: '" #opt "' was given twice; give each option once")
#define PHAZE_DSL_SPACE_DIMENSION(opt)                                                                   \
  PHAZE_DSL_SPACE_GIVEN_ONCE(opt);                                                                       \
  static_assert(detail::same_as_names_a_dimension<tags::opt, Args...>(),                                 \
                "phaze::dsl::accelerator_space: '" #opt "' = same_as(...) names an option that is not "  \
                "a dimension of the space; same_as takes tensor_cores, tc_width, tc_depth, "              \
                "vector_cores, vc_width, global_buffer or hbm");                                         \
  static_assert(detail::same_as_names_an_option_in_the_call<tags::opt, Args...>(),                       \
                "phaze::dsl::accelerator_space: '" #opt "' = same_as(...) names an option that is not "  \
                "in this space; give that option its values in this call, or give '" #opt "' values "    \
                "of its own");                                                                           \
  static_assert(detail::same_as_names_another_option<tags::opt, Args...>(),                              \
                "phaze::dsl::accelerator_space: '" #opt "' = same_as(" #opt ") names itself; give '"     \
                #opt "' values, or tie it to another option");                                           \
  static_assert(detail::same_as_names_an_untied_option<tags::opt, Args...>(),                            \
                "phaze::dsl::accelerator_space: '" #opt "' = same_as(...) names an option that is "      \
                "itself same_as another; tie both to the same option");                                  \
  static_assert(detail::same_as_names_an_option_of_the_same_unit<tags::opt, Args...>(),                  \
                "phaze::dsl::accelerator_space: '" #opt "' = same_as(...) ties a count or width to a "   \
                "size in bytes (or the reverse); tie like to like")
// clang-format on

/// An accelerator search space from keyword options. Dimensions left out keep the base device's value;
/// the base is tpuv4_like unless `dsl::base` names another. Options: tensor_cores, tc_width, tc_depth,
/// vector_cores, vc_width (counts: a number, pow2(lo, hi), one_of(...) or same_as(option)), global_buffer,
/// hbm (sizes: 64_MiB, pow2(2_MiB, 128_MiB), one_of(32_GiB, 80_GiB) or same_as(option)), area_budget,
/// min_area, exempt_single_core, base. Mistakes in the options fail to compile with a message naming them.
template <class... Args>
requires(detail::is_argument<Args>&&...) constexpr hw::space accelerator_space(Args... args) {
  (detail::check_space_option<Args>(), ...);
  PHAZE_DSL_SPACE_DIMENSION(tensor_cores);
  PHAZE_DSL_SPACE_DIMENSION(tc_width);
  PHAZE_DSL_SPACE_DIMENSION(tc_depth);
  PHAZE_DSL_SPACE_DIMENSION(vector_cores);
  PHAZE_DSL_SPACE_DIMENSION(vc_width);
  PHAZE_DSL_SPACE_DIMENSION(global_buffer);
  PHAZE_DSL_SPACE_DIMENSION(hbm);
  PHAZE_DSL_SPACE_GIVEN_ONCE(area_budget);
  PHAZE_DSL_SPACE_GIVEN_ONCE(min_area);
  PHAZE_DSL_SPACE_GIVEN_ONCE(exempt_single_core);
  PHAZE_DSL_SPACE_GIVEN_ONCE(base);
  if constexpr (detail::space_call_is_valid<Args...>()) {
    hw::space s{detail::value_or<tags::base, hw::device>(hw::tpuv4_like, args...)};
    (detail::apply_space_option(s, args), ...);
    return s;
  } else {
    return hw::space{};  // the static_asserts above have reported the mistake
  }
}

#undef PHAZE_DSL_SPACE_DIMENSION
#undef PHAZE_DSL_SPACE_GIVEN_ONCE

}  // namespace phaze::dsl

namespace phaze::hw {

/// PHAZE's published search space (Wang et al., ICML 2024): 1-4096 tensor and vector cores, systolic arrays
/// 2-256 wide and deep, vector width tied to tensor width, a 2-128 MiB GLB and 32/64/80 GiB of HBM, on the
/// TPUv4-like base; area at most the reference's and at least 0.3x it, single-core designs exempt from the
/// lower bound.
inline constexpr space phaze_default_space = [] {
  using namespace phaze::literals;
  namespace dsl = phaze::dsl;
  constexpr area reference = area_of(tpuv4_like);
  return dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(1, 4096), dsl::tc_width = dsl::pow2(2, 256),
                                dsl::tc_depth = dsl::pow2(2, 256), dsl::vector_cores = dsl::pow2(1, 4096),
                                dsl::vc_width = dsl::same_as(dsl::tc_width),
                                dsl::global_buffer = dsl::pow2(2_MiB, 128_MiB),
                                dsl::hbm = dsl::one_of(32_GiB, 64_GiB, 80_GiB), dsl::area_budget = reference,
                                dsl::min_area = 0.3 * reference, dsl::exempt_single_core = true);
}();

/// `k` designs spread evenly over a space's enumeration order (the i-th at index count * (2i + 1) / (2k)): a
/// deterministic, representative handful for tests, benchmarks and smoke runs.
inline std::vector<device> spread_sample(const space& s, std::uint64_t k) {
  std::vector<device> out;
  const std::uint64_t n = s.count();
  for (std::uint64_t i = 0; i < k && n > 0; ++i) out.push_back(s.at(n * (2 * i + 1) / (2 * k)));
  return out;
}

}  // namespace phaze::hw
