// Tests of phaze/core/static_vector.hpp against std::vector as the oracle.
#include "phaze/core/static_vector.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

using phaze::static_vector;

namespace {
template <std::size_t N>
bool same_as_oracle(const static_vector<int, N>& v, const std::vector<int>& oracle) {
  if (v.size() != oracle.size() || v.empty() != oracle.empty()) return false;
  std::size_t i = 0;
  for (int x : v) {
    if (x != oracle[i] || v[i] != oracle[i] || v.at(i) != oracle[i]) return false;
    ++i;
  }
  return i == oracle.size() && (oracle.empty() || v.back() == oracle.back());
}

constexpr static_vector<int, 8> squares(int n) {
  static_vector<int, 8> v;
  for (int i = 0; i < n; ++i) v.push_back(i * i);
  return v;
}
}  // namespace

TEST_CASE("static_vector behaves like std::vector under random pushes, pops and clears", "[static_vector]") {
  std::mt19937 rng(12345);  // fixed seed: the run is reproducible
  std::uniform_int_distribution<int> action(0, 9);
  std::uniform_int_distribution<int> value(-1000, 1000);
  static_vector<int, 16> v;
  std::vector<int> oracle;
  for (int step = 0; step < 5000; ++step) {
    const int a = action(rng);
    if (a < 6) {
      const int x = value(rng);
      if (oracle.size() < v.capacity()) {
        v.push_back(x);
        oracle.push_back(x);
      } else {
        CHECK_THROWS_AS(v.push_back(x), std::length_error);
      }
    } else if (a < 9) {
      if (oracle.empty()) {
        CHECK_THROWS_AS(v.pop_back(), std::out_of_range);
      } else {
        v.pop_back();
        oracle.pop_back();
      }
    } else if (step % 7 == 0) {
      v.clear();
      oracle.clear();
    }
    REQUIRE(same_as_oracle(v, oracle));
  }
}

TEST_CASE("static_vector checks capacity and bounds", "[static_vector]") {
  static_vector<int, 3> v{1, 2, 3};
  CHECK(v.size() == 3);
  CHECK(decltype(v)::capacity() == 3);
  CHECK_THROWS_AS(v.push_back(4), std::length_error);
  CHECK(v.size() == 3);  // a failed push leaves the vector as it was
  CHECK_THROWS_AS(v.at(3), std::out_of_range);
  const auto& cv = v;
  CHECK_THROWS_AS(cv.at(7), std::out_of_range);
  CHECK(cv.at(2) == 3);
  v.at(0) = 10;
  CHECK(v[0] == 10);
  v.back() = 30;
  CHECK(cv.back() == 30);
  static_vector<int, 2> empty;
  CHECK(empty.empty());
  CHECK(empty.begin() == empty.end());
  CHECK_THROWS_AS(empty.pop_back(), std::out_of_range);
  CHECK_THROWS_AS((static_vector<int, 2>{1, 2, 3}), std::length_error);
}

TEST_CASE("static_vector equality compares only the live elements", "[static_vector]") {
  static_vector<int, 4> a{1, 2, 3};
  static_vector<int, 4> b{1, 2, 3, 4};
  CHECK_FALSE(a == b);
  b.pop_back();  // the stale 4 stays in storage but is no longer an element
  CHECK(a == b);
  b.pop_back();
  b.push_back(7);
  CHECK_FALSE(a == b);
  a.clear();
  b.clear();
  CHECK(a == b);
}

TEST_CASE("static_vector works in constant expressions", "[static_vector]") {
  constexpr auto v = squares(5);
  STATIC_REQUIRE(v.size() == 5);
  STATIC_REQUIRE(v[4] == 16);
  STATIC_REQUIRE(v.back() == 16);
  STATIC_REQUIRE(squares(3) == static_vector<int, 8>{0, 1, 4});
  STATIC_REQUIRE_FALSE(squares(3) == squares(4));
  constexpr auto sum = [] {
    int s = 0;
    for (int x : squares(8)) s += x;
    return s;
  }();
  STATIC_REQUIRE(sum == 0 + 1 + 4 + 9 + 16 + 25 + 36 + 49);
}

TEST_CASE("static_vector converts from and to std::vector", "[static_vector]") {
  const std::vector<long> from_cli{4, 1, 2};
  static_vector<long, 4> v = from_cli;
  CHECK(v == static_vector<long, 4>{4, 1, 2});
  CHECK(v.front() == 4);
  const std::vector<long> back = v;
  CHECK(back == from_cli);
  CHECK(static_vector<bool, 2>{true} == std::vector<bool>{true});
  CHECK_THROWS_AS((static_vector<long, 2>{from_cli}), std::length_error);
}
