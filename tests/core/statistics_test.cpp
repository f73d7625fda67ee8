// Tests of phaze/core/statistics.hpp: ranks with ties averaged, Pearson's r and Spearman's rho against values
// computed by hand, against the textbook no-ties formula, and against a brute-force rank count on random
// samples with many ties.
#include "phaze/core/statistics.hpp"

#include <catch2/catch.hpp>

#include "../support/input_error_of.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

using phaze::average_ranks;
using phaze::pearson;
using phaze::spearman;
using phaze::testing::input_error_of;

namespace {

// Rank of x[i] by counting: 1 + the values below it + half of the other values equal to it.
std::vector<double> brute_force_ranks(const std::vector<double>& x) {
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    double below = 0.0;
    double equal = 0.0;
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (x[j] < x[i]) below += 1.0;
      if (j != i && x[j] == x[i]) equal += 1.0;
    }
    r[i] = 1.0 + below + equal / 2.0;
  }
  return r;
}

// Pearson's r by the one-pass sums formula (n sum xy - sum x sum y) / sqrt(...), another route than the
// header's centred two-pass one.
double sums_pearson(const std::vector<double>& x, const std::vector<double>& y) {
  double sx = 0.0;
  double sy = 0.0;
  double sxy = 0.0;
  double sxx = 0.0;
  double syy = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxy += x[i] * y[i];
    sxx += x[i] * x[i];
    syy += y[i] * y[i];
  }
  const auto n = static_cast<double>(x.size());
  return (n * sxy - sx * sy) / std::sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
}

}  // namespace

TEST_CASE("average ranks give tied values the mean of the ranks they span", "[statistics]") {
  CHECK(average_ranks(std::vector<double>{10, 20, 20, 30}) == std::vector<double>{1, 2.5, 2.5, 4});
  CHECK(average_ranks(std::vector<double>{3, 1, 3, 3, 2}) == std::vector<double>{4, 1, 4, 4, 2});
  CHECK(average_ranks(std::vector<double>{5, 5, 5}) == std::vector<double>{2, 2, 2});
  CHECK(average_ranks(std::vector<double>{-1.5, 7, 0}) == std::vector<double>{1, 3, 2});
  CHECK(average_ranks(std::vector<double>{}).empty());
}

TEST_CASE("pearson and spearman match values computed by hand", "[statistics]") {
  const std::vector<double> x{1, 2, 3, 4, 5};

  SECTION("a monotone but curved relation: rho is 1, r is below it") {
    const std::vector<double> y{1, 4, 9, 16, 25};
    // Centred sums: sxy = 60, sxx = 10, syy = 374, so r = 60 / sqrt(3740).
    CHECK(pearson(x, y) == Approx(60.0 / std::sqrt(3740.0)).epsilon(1e-12));
    CHECK(spearman(x, y) == Approx(1.0).epsilon(1e-12));
  }
  SECTION("a reversed order: both are -1") {
    const std::vector<double> y{50, 40, 30, 20, 10};
    CHECK(pearson(x, y) == Approx(-1.0).epsilon(1e-12));
    CHECK(spearman(x, y) == Approx(-1.0).epsilon(1e-12));
  }
  SECTION("two swapped pairs without ties: 1 - 6 * 4 / (5 * 24) = 0.8") {
    const std::vector<double> y{2, 1, 4, 3, 5};
    CHECK(spearman(x, y) == Approx(0.8).epsilon(1e-12));
  }
  SECTION("a tie: ranks {1, 2.5, 2.5, 4} against {1, 2, 3, 4} give 4.5 / sqrt(4.5 * 5) = 3 / sqrt(10)") {
    const std::vector<double> a{1, 2, 2, 3};
    const std::vector<double> b{1, 2, 3, 4};
    CHECK(spearman(a, b) == Approx(3.0 / std::sqrt(10.0)).epsilon(1e-12));
    CHECK(spearman(b, a) == Approx(3.0 / std::sqrt(10.0)).epsilon(1e-12));
  }
  SECTION("two points: the sign of the slope") {
    CHECK(spearman(std::vector<double>{1, 2}, std::vector<double>{3, 7}) == Approx(1.0));
    CHECK(pearson(std::vector<double>{1, 2}, std::vector<double>{7, 3}) == Approx(-1.0));
  }
}

TEST_CASE("spearman equals the brute-force rank correlation on random samples with ties", "[statistics]") {
  std::mt19937 random{20221018};
  std::uniform_int_distribution<int> size(2, 40);
  std::uniform_int_distribution<int> few_values(0, 6);  // many ties
  std::normal_distribution<double> noise(0.0, 1.0);
  int compared = 0;
  for (int round = 0; round < 300; ++round) {
    const auto n = static_cast<std::size_t>(size(random));
    std::vector<double> x(n);
    std::vector<double> y(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = few_values(random);
      y[i] = round % 2 == 0 ? static_cast<double>(few_values(random)) : x[i] + noise(random);
    }
    const std::vector<double> rx = brute_force_ranks(x);
    const std::vector<double> ry = brute_force_ranks(y);
    REQUIRE(average_ranks(x) == rx);
    REQUIRE(average_ranks(y) == ry);
    const auto constant = [](const std::vector<double>& v) {
      for (double e : v)
        if (e != v.front()) return false;
      return true;
    };
    if (constant(x) || constant(y)) {
      CHECK_THROWS_AS(spearman(x, y), phaze::input_error);
      continue;
    }
    CHECK(spearman(x, y) == Approx(sums_pearson(rx, ry)).margin(1e-9));
    CHECK(pearson(x, y) == Approx(sums_pearson(x, y)).margin(1e-9));
    ++compared;
  }
  CHECK(compared > 250);
}

TEST_CASE("without ties spearman equals 1 - 6 sum d^2 / (n (n^2 - 1)) and ignores monotone rescaling",
          "[statistics]") {
  std::mt19937 random{7};
  std::uniform_real_distribution<double> value(-5.0, 5.0);  // continuous: ties have probability 0
  for (int round = 0; round < 100; ++round) {
    const std::size_t n = 3 + static_cast<std::size_t>(round % 30);
    std::vector<double> x(n);
    std::vector<double> y(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = value(random);
      y[i] = 0.5 * x[i] + value(random);
    }
    const std::vector<double> rx = average_ranks(x);
    const std::vector<double> ry = average_ranks(y);
    double d2 = 0.0;
    for (std::size_t i = 0; i < n; ++i) d2 += (rx[i] - ry[i]) * (rx[i] - ry[i]);
    const auto m = static_cast<double>(n);
    CHECK(spearman(x, y) == Approx(1.0 - 6.0 * d2 / (m * (m * m - 1.0))).margin(1e-12));
    std::vector<double> exp_y(n);
    for (std::size_t i = 0; i < n; ++i) exp_y[i] = std::exp(y[i]);
    CHECK(spearman(x, exp_y) == Approx(spearman(x, y)).margin(1e-12));
  }
}

TEST_CASE("correlations reject samples they are undefined for", "[statistics]") {
  const std::vector<double> three{1, 2, 3};
  const std::vector<double> two{1, 2};
  const std::vector<double> one{1};
  CHECK_THAT(input_error_of([&] { spearman(three, two); }), Catch::Contains("3 and 2 values"));
  CHECK_THAT(input_error_of([&] { pearson(two, three); }), Catch::Contains("pearson"));
  CHECK_THAT(input_error_of([&] { spearman(one, one); }), Catch::Contains("at least 2"));
  CHECK_THAT(input_error_of([&] { pearson(std::vector<double>{}, std::vector<double>{}); }),
             Catch::Contains("at least 2"));
  const std::vector<double> with_inf{1, std::numeric_limits<double>::infinity(), 3};
  const std::vector<double> with_nan{1, std::numeric_limits<double>::quiet_NaN(), 3};
  CHECK_THAT(input_error_of([&] { spearman(three, with_inf); }), Catch::Contains("infinite or NaN"));
  CHECK_THAT(input_error_of([&] { pearson(with_nan, three); }), Catch::Contains("infinite or NaN"));
  const std::vector<double> constant{4, 4, 4};
  CHECK_THAT(input_error_of([&] { spearman(three, constant); }), Catch::Contains("constant"));
  CHECK_THAT(input_error_of([&] { pearson(constant, three); }), Catch::Contains("constant"));
}
