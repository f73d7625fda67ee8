/// @file
/// Correlation of paired samples, to judge a cost model against measurements: Pearson's r of the values
/// and Spearman's rho, Pearson's r of their ranks with tied values given the average of the ranks they span
/// (Spearman 1904; the tie rule of Kendall, "Rank Correlation Methods", 1948, chapter 3). A model that orders
/// plans as the measurements do has rho = 1, whatever its absolute error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "phaze/core/error.hpp"

namespace phaze {

namespace detail {
/// Throws input_error unless `x` and `y` are paired samples of at least two finite values.
inline void check_paired_samples(std::span<const double> x, std::span<const double> y,
                                 const char* correlation) {
  if (x.size() != y.size()) {
    throw input_error(std::string{correlation} + ": the samples have " + std::to_string(x.size()) + " and " +
                      std::to_string(y.size()) + " values; give one value of each per pair");
  }
  if (x.size() < 2) {
    throw input_error(std::string{correlation} + ": " + std::to_string(x.size()) +
                      " pairs given; a correlation needs at least 2");
  }
  const auto finite = [](double v) { return std::isfinite(v); };
  if (!std::all_of(x.begin(), x.end(), finite) || !std::all_of(y.begin(), y.end(), finite)) {
    throw input_error(std::string{correlation} +
                      ": a value is infinite or NaN; leave out the pairs without a finite measurement");
  }
}
}  // namespace detail

/// The ranks of `x`, 1 for the smallest: values that tie share the average of the ranks they span
/// ({10, 20, 20, 30} ranks {1, 2.5, 2.5, 4}). O(n log n).
inline constexpr auto average_ranks = [](std::span<const double> x) -> std::vector<double> {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (std::size_t first = 0; first < order.size();) {
    std::size_t last = first;
    while (last + 1 < order.size() && x[order[last + 1]] == x[order[first]]) ++last;
    // Positions first..last (0-based) hold ranks first + 1 .. last + 1; each gets their mean.
    const double shared = (static_cast<double>(first + last) / 2.0) + 1.0;
    for (std::size_t i = first; i <= last; ++i) rank[order[i]] = shared;
    first = last + 1;
  }
  return rank;
};

namespace detail {
/// Pearson's r of checked samples; `correlation` names the caller in the error for a constant sample.
inline double linear_correlation(std::span<const double> x, std::span<const double> y,
                                 const char* correlation) {
  const auto n = static_cast<double>(x.size());
  const double mean_x = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double mean_y = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0.0;
  double sxx = 0.0;
  double syy = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double dx = x[i] - mean_x;
    const double dy = y[i] - mean_y;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx == 0.0 || syy == 0.0) {
    throw input_error(std::string{correlation} +
                      ": a sample is constant, so the correlation is undefined; give varying values");
  }
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}
}  // namespace detail

/// Pearson's correlation coefficient of paired samples: cov(x, y) / (sd(x) sd(y)), in [-1, 1]. Throws
/// input_error when the sizes differ, fewer than two pairs are given, a value is not finite, or a sample is
/// constant (its standard deviation is 0 and r is undefined).
inline constexpr auto pearson = [](std::span<const double> x, std::span<const double> y) -> double {
  detail::check_paired_samples(x, y, "pearson");
  return detail::linear_correlation(x, y, "pearson");
};

/// Spearman's rank correlation of paired samples: Pearson's r of their average ranks (average_ranks), so
/// ties are handled exactly rather than by the 1 - 6 sum d^2 / (n (n^2 - 1)) shortcut, which holds only
/// without ties. Throws input_error as pearson does (a sample whose values all tie is constant).
inline constexpr auto spearman = [](std::span<const double> x, std::span<const double> y) -> double {
  detail::check_paired_samples(x, y, "spearman");
  return detail::linear_correlation(average_ranks(x), average_ranks(y), "spearman");
};

}  // namespace phaze
