/// @file
/// Keyword arguments for phaze's DSLs (`dsl::hidden = 4096`, `dsl::tc_width = dsl::pow2(2, 256)`): the
/// keyword and argument templates, the compile-time helpers every DSL call uses to check its options, and
/// the value sets a keyword may take besides a single value (`pow2`, `one_of`, `same_as`).
/// The model DSL (model/dsl.hpp) and the accelerator-space DSL (hw/space.hpp) both build on this header.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"

namespace phaze::dsl {

/// A keyword argument: an option's tag and the value given for it.
template <class Tag, class T>
struct argument {
  using tag = Tag;
  using value_type = T;
  T value;
};

/// A keyword: `keyword = value` makes an argument.
template <class Tag, class T>
struct keyword {
  using tag = Tag;
  // NOLINTNEXTLINE(misc-unconventional-assign-operator): keyword syntax, not assignment
  constexpr argument<Tag, T> operator=(T v) const { return {v}; }
};

namespace detail {
template <class A>
concept is_argument = requires {
  typename A::tag;
}
&&requires(A a) {
  a.value;
};

/// How many of `Args` carry the option `Tag`.
template <class Tag, class... Args>
inline constexpr int count_of = (0 + ... + (std::is_same_v<typename Args::tag, Tag> ? 1 : 0));

/// Whether an argument's option belongs to the call `Call` (each tag names its call as `tag::of`).
template <class Call, class Arg>
inline constexpr bool belongs_to = std::is_same_v<typename Arg::tag::of, Call>;

/// The value given for `Tag`, converted to `T`, or `fallback` when the option was left out.
template <class Tag, class T, class... Args>
constexpr T value_or(T fallback, Args... args) {
  T out = fallback;
  (
      [&] {
        if constexpr (std::is_same_v<typename Args::tag, Tag>) out = static_cast<T>(args.value);
      }(),
      ...);
  return out;
}

/// The type of the value given for `Tag` among `Args`, or void when the option was left out.
template <class Tag, class... Args>
struct value_type_of {
  using type = void;
};
template <class Tag, class A, class... Rest>
struct value_type_of<Tag, A, Rest...> {
  using type = std::conditional_t<std::is_same_v<typename A::tag, Tag>, typename A::value_type,
                                  typename value_type_of<Tag, Rest...>::type>;
};
template <class Tag, class... Args>
using value_type_of_t = typename value_type_of<Tag, Args...>::type;
}  // namespace detail

// --- value sets ------------------------------------------------------------------------------------------

/// Every power of two from `lo` to `hi` (both powers of two). Made by `pow2(lo, hi)`.
template <class T>
struct pow2_values {
  T lo;
  T hi;
};

/// An explicit list of values. Made by `one_of(v...)`.
template <class T, std::size_t N>
struct listed_values {
  std::array<T, N> values;
};

/// "The same value as option `Tag`": the option follows another one instead of adding a dimension.
/// Made by `same_as(keyword)`.
template <class Tag>
struct same_as_option {
  using tag = Tag;
};

namespace rules {
[[noreturn]] inline void pow2_bounds_must_be_powers_of_two() {
  throw input_error("pow2(lo, hi): both bounds must be powers of two (1, 2, 4, ... or 2_MiB, 4_MiB, ...)");
}
[[noreturn]] inline void pow2_lower_bound_must_not_exceed_upper_bound() {
  throw input_error("pow2(lo, hi): lo is larger than hi; write the smaller bound first");
}
}  // namespace rules

namespace detail {
/// Whether `x` is 2^k for a whole k >= 0. Halving a double is exact, so anything else ends off 1.
constexpr bool is_power_of_two(double x) {
  if (!(x >= 1.0)) return false;
  while (x > 1.0) x /= 2.0;
  return x == 1.0;
}
template <class T>
constexpr double raw_value(T v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<double>(v);
  } else {
    return v.value();
  }
}
/// Counts and widths are carried as 64-bit integers whatever integer type the caller wrote.
template <class T>
using normalized_t = std::conditional_t<std::is_integral_v<T>, std::int64_t, T>;
}  // namespace detail

/// Checks pow2 bounds; a broken rule stops compilation (constant evaluation) or throws input_error.
constexpr void check_pow2_bounds(double lo, double hi) {
  if (!detail::is_power_of_two(lo) || !detail::is_power_of_two(hi))
    rules::pow2_bounds_must_be_powers_of_two();
  if (lo > hi) rules::pow2_lower_bound_must_not_exceed_upper_bound();
}

/// Every power of two from `lo` to `hi`: `pow2(1, 4096)`, `pow2(2_MiB, 128_MiB)`.
template <class T>
requires(std::is_integral_v<T> ||
         std::is_same_v<T, bytes>) constexpr pow2_values<detail::normalized_t<T>> pow2(T lo, T hi) {
  check_pow2_bounds(detail::raw_value(lo), detail::raw_value(hi));
  return {detail::normalized_t<T>(lo), detail::normalized_t<T>(hi)};
}

/// An explicit list of values: `one_of(32_GiB, 64_GiB, 80_GiB)`.
template <class... T>
constexpr auto one_of(T... v) {
  static_assert(
      sizeof...(T) > 0,
      "phaze::dsl::one_of: the list is empty; give at least one value, e.g. one_of(32_GiB, 64_GiB), "
      "or leave the option out to keep the base design's value");
  if constexpr (sizeof...(T) == 0) {
    return listed_values<std::int64_t, 0>{};
  } else {
    using first = std::tuple_element_t<0, std::tuple<T...>>;
    static_assert((std::is_same_v<detail::normalized_t<first>, detail::normalized_t<T>> && ...),
                  "phaze::dsl::one_of: the values are of different kinds; give all counts or all sizes "
                  "(e.g. one_of(1, 2, 4) or one_of(32_GiB, 64_GiB))");
    using value = detail::normalized_t<first>;
    return listed_values<value, sizeof...(T)>{{static_cast<value>(v)...}};
  }
}

/// Ties an option to another: `dsl::vc_width = dsl::same_as(dsl::tc_width)`.
template <class Keyword>
requires requires {
  typename Keyword::tag;
}
constexpr same_as_option<typename Keyword::tag> same_as(const Keyword&) {
  return {};
}

namespace detail {
template <class T>
inline constexpr bool is_same_as_option = false;
template <class Tag>
inline constexpr bool is_same_as_option<same_as_option<Tag>> = true;
}  // namespace detail

}  // namespace phaze::dsl
