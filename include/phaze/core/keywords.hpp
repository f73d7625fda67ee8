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
#include "phaze/detail/hana.hpp"

namespace phaze::dsl {

/// A keyword argument: an option's tag and the value given for it.
template <class Tag, class T>
struct argument {
  using tag = Tag;
  using value_type = T;
  T value;
};

template <class T>
struct pow2_values;
template <class T, std::size_t N>
struct listed_values;

namespace detail {
template <class>
inline constexpr bool always_false = false;
template <class T>
inline constexpr bool is_quantity = false;
template <dimension D>
inline constexpr bool is_quantity<quantity<D>> = true;
/// The kind of value `U` gives: itself, or the element of a pow2(...) or one_of(...).
template <class U>
struct element_of {
  using type = U;
};
template <class U>
struct element_of<pow2_values<U>> {
  using type = U;
};
template <class U, std::size_t N>
struct element_of<listed_values<U, N>> {
  using type = U;
};

/// Stops compilation with one sentence when an option of kind `T` is given a value of kind `U` it does not
/// take: a plain number where a quantity with its unit belongs (the common mistake: `hbm = 32` for
/// `hbm = 32_GiB`, `area_budget = 600` for `600_mm2`), a set (`one_of`, `pow2`) for an option that takes one
/// value, or any other kind. Returns a stand-in of kind `T` (one unit), so that compilation goes on to the
/// call's own checks, which may then add a diagnostic of their own about that stand-in.
template <class T, class U>
constexpr T refuse_value_kind() {
  using given = typename element_of<U>::type;
  constexpr bool a_set = !std::is_same_v<given, U>;  // one_of(...) or pow2(...)
  if constexpr (a_set && std::is_convertible_v<given, T>) {
    static_assert(always_false<U>,
                  "phaze::dsl: this option takes one value, not a set (one_of(...) or pow2(...)): give a "
                  "single value; a search varies only the options of an accelerator space or a training run");
  } else if constexpr (is_quantity<T> && std::is_arithmetic_v<given>) {
    static_assert(
        always_false<U>,
        "phaze::dsl: this option takes a quantity with its unit, not a plain number: write sizes as "
        "32_GiB or 16_MiB, areas as 600_mm2, times as 2_ms (using namespace phaze::literals), "
        "inside pow2(...) and one_of(...) as well");
  } else if constexpr (is_quantity<T> && is_quantity<given>) {
    static_assert(always_false<U>,
                  "phaze::dsl: this option takes a quantity of another unit (the option's tag and the "
                  "value's type are named above): sizes in bytes (32_GiB), areas in mm2 (600_mm2), times in "
                  "seconds (2_ms)");
  } else if constexpr (!is_quantity<T> && is_quantity<given>) {
    static_assert(always_false<U>,
                  "phaze::dsl: this option takes a plain count or setting, not a quantity with a unit (the "
                  "option's tag is named above): write 4, not 4_GiB");
  } else {
    static_assert(always_false<U>,
                  "phaze::dsl: this option does not take a value of this kind (the option's tag and the "
                  "value's type are named above); give one value of its kind");
  }
  if constexpr (is_quantity<T>) {
    return T{1.0};
  } else if constexpr (std::is_arithmetic_v<T>) {
    return T(1);
  } else {
    return T{};
  }
}
}  // namespace detail

/// A keyword: `keyword = value` makes an argument. A value of another kind stops compilation with one
/// sentence (detail::refuse_value_kind), not a list of operator= candidates.
template <class Tag, class T>
struct keyword {
  using tag = Tag;
  // NOLINTBEGIN(misc-unconventional-assign-operator): keyword syntax, not assignment
  constexpr argument<Tag, T> operator=(T v) const { return {v}; }
  template <class U>
  requires(!std::is_convertible_v<U, T>) constexpr argument<Tag, T> operator=(const U&) const {
    return {detail::refuse_value_kind<T, U>()};
  }
  // NOLINTEND(misc-unconventional-assign-operator)
};

/// The calls an option belongs to when it belongs to more than one: a tag's `of` is one call type, or
/// `calls<A, B>` for an option several DSL calls take (`dsl::microbatch` shapes a layer and lists the
/// microbatch sizes of a training run).
template <class... Calls>
struct calls {};

namespace detail {
namespace hana = boost::hana;

template <class A>
concept is_argument = requires {
  typename A::tag;
}
&&requires(A a) {
  a.value;
};

// Keyword sets are queried two ways. Counting options and reading their values are fold expressions: one
// line each, and no copy of the arguments into a Hana tuple (measured: Hana's count_if and find_if over the
// arguments cost 0.1-0.2 s more per translation unit and read no better). Asking which type a set holds is
// Hana's strength: a find over `hana::tuple_t` replaces a recursive template, and `hana::contains` reads
// as the membership test it is.

/// How many of `Args` carry the option `Tag`.
template <class Tag, class... Args>
inline constexpr int count_of = (0 + ... + (std::is_same_v<typename Args::tag, Tag> ? 1 : 0));

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

/// The calls a tag's `of` names, as a Hana sequence of types.
template <class Of>
inline constexpr auto calls_of = hana::tuple_t<Of>;
template <class... Calls>
inline constexpr auto calls_of<calls<Calls...>> = hana::tuple_t<Calls...>;

/// Whether an argument's option belongs to the call `Call` (each tag names its calls as `tag::of`).
template <class Call, class Arg>
inline constexpr bool belongs_to =
    decltype(hana::contains(calls_of<typename Arg::tag::of>, hana::type_c<Call>))::value;

/// Hana predicate on argument types: whether one carries the option `Tag`.
template <class Tag>
struct carries_fn {
  template <class A>
  constexpr auto operator()(hana::basic_type<A>) const {
    return hana::bool_c<std::is_same_v<typename A::tag, Tag>>;
  }
};

/// Hana transform from an argument type to the type of its value.
struct value_type_fn {
  template <class A>
  constexpr auto operator()(hana::basic_type<A>) const {
    return hana::type_c<typename A::value_type>;
  }
};

/// The type of the value given for `Tag` among `Args`, or void when the option was left out.
template <class Tag, class... Args>
using value_type_of_t = typename std::remove_cvref_t<decltype(hana::maybe(
    hana::type_c<void>, value_type_fn{}, hana::find_if(hana::tuple_t<Args...>, carries_fn<Tag>{})))>::type;
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
/// Counts and widths are carried as 64-bit integers whatever integer type the caller wrote (bool stays bool:
/// `one_of(false, true)` lists both settings of a switch).
template <class T>
using normalized_t = std::conditional_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, std::int64_t, T>;
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
inline constexpr bool is_pow2_values = false;
template <class T>
inline constexpr bool is_pow2_values<pow2_values<T>> = true;
template <class T>
inline constexpr bool is_listed_values = false;
template <class T, std::size_t N>
inline constexpr bool is_listed_values<listed_values<T, N>> = true;
}  // namespace detail

/// The keyword of an option a search varies: it takes one value, `one_of(v...)`, or for counts
/// `pow2(lo, hi)` (`dsl::microbatch = dsl::pow2(1, 8)`, `dsl::recompute = dsl::one_of(phaze::none,
/// phaze::full)`). A value of another kind fails to compile with one message.
template <class Tag, class T>
struct set_keyword {
  using tag = Tag;
  // NOLINTBEGIN(misc-unconventional-assign-operator): keyword syntax, not assignment
  constexpr argument<Tag, T> operator=(T v) const { return {v}; }
  constexpr argument<Tag, pow2_values<T>> operator=(pow2_values<T> r) const
      requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return {r};
  }
  template <std::size_t N>
  constexpr argument<Tag, listed_values<T, N>> operator=(const listed_values<T, N>& l) const {
    return {l};
  }
  template <class U>
  requires(!std::is_convertible_v<U, T>) constexpr argument<Tag, T> operator=(const U&) const {
    return {detail::refuse_value_kind<T, U>()};
  }
  // NOLINTEND(misc-unconventional-assign-operator)
};

namespace detail {
template <class T>
inline constexpr bool is_same_as_option = false;
template <class Tag>
inline constexpr bool is_same_as_option<same_as_option<Tag>> = true;
}  // namespace detail

}  // namespace phaze::dsl
