// Tests of phaze/core/quantity.hpp: dimensional arithmetic, literals, comparisons and named conversions.
#include "phaze/core/quantity.hpp"

#include <catch2/catch.hpp>

#include <compare>
#include <concepts>
#include <type_traits>

using namespace phaze;
using namespace phaze::literals;

namespace {
template <class A, class B>
concept addable = requires(A a, B b) {
  a + b;
};
template <class A, class B>
concept subtractable = requires(A a, B b) {
  a - b;
};
template <class A, class B>
concept comparable = requires(A a, B b) {
  a < b;
};
template <class A, class B>
concept assignable = requires(A& a, B b) {
  a = b;
};
}  // namespace

TEST_CASE("binary and decimal byte literals relate by their prefixes (IEC 80000-13)", "[quantity]") {
  CHECK(1_KiB == 1024_B);
  CHECK(1_MiB == 1024_KiB);
  CHECK(1_GiB == 1024_MiB);
  CHECK(1_TiB == 1024_GiB);
  CHECK(1_KB == 1000_B);
  CHECK(1_MB == 1000_KB);
  CHECK(1_GB == 1000_MB);
  CHECK(1_TB == 1000_GB);
  CHECK(0.5_GiB == 512_MiB);
  CHECK(1.5_MiB == 1536_KiB);
  CHECK(2.5_GB == 2500_MB);
  CHECK(1_GiB != 1_GB);
  CHECK((1_GiB).value() == 1073741824.0);
  CHECK((1_TiB).value() == 1099511627776.0);
}

TEST_CASE("time, FLOP, rate and frequency literals have their SI values", "[quantity]") {
  CHECK(1_s == 1000_ms);
  CHECK((1_ms).value() == Approx(1e-3).epsilon(1e-15));
  CHECK((1_us).value() == Approx(1e-6).epsilon(1e-15));
  CHECK((1_ns).value() == Approx(1e-9).epsilon(1e-15));
  CHECK(0.25_s == 250_ms);
  CHECK(1_PFLOP == 1000_TFLOP);
  CHECK(1_TFLOP == 1000_GFLOP);
  CHECK(1_GFLOP == flops{1e9});
  CHECK(1_PFLOPs == 1000_TFLOPs);
  CHECK(1_TFLOPs == 1000_GFLOPs);
  CHECK(1_TBps == 1000_GBps);
  // Network links are quoted in bits: 200 Gb/s HDR InfiniBand carries 25 GB/s.
  CHECK(200_Gbps == 25_GBps);
  CHECK(1_GHz == 1000_MHz);
}

TEST_CASE("multiplying and dividing quantities combines their dimensions", "[quantity]") {
  STATIC_REQUIRE(std::is_same_v<decltype(2_GB / 1_TBps), seconds>);
  STATIC_REQUIRE(std::is_same_v<decltype(1_TFLOP / 1_TFLOPs), seconds>);
  STATIC_REQUIRE(std::is_same_v<decltype(1_TBps * 1_s), bytes>);
  STATIC_REQUIRE(std::is_same_v<decltype(1_s * 1_TBps), bytes>);
  STATIC_REQUIRE(std::is_same_v<decltype(1_TFLOPs * 1_s), flops>);
  STATIC_REQUIRE(std::is_same_v<decltype(1_TFLOP / 1_GB), flops_per_byte>);
  STATIC_REQUIRE(std::is_same_v<decltype(1_GB / 1_s), bytes_per_second>);
  STATIC_REQUIRE(std::is_same_v<decltype(1.0 / 1_GHz), seconds>);
  STATIC_REQUIRE(std::is_same_v<decltype(1.0 / 1_s), hertz>);
  STATIC_REQUIRE(std::is_same_v<decltype(1_GHz * 1_s), double>);
  // A ratio of like quantities is a plain number, not a dimensionless quantity.
  STATIC_REQUIRE(std::is_same_v<decltype(1_GiB / 1_MiB), double>);
  STATIC_REQUIRE(std::is_same_v<decltype(1_s / 1_ms), double>);
  STATIC_REQUIRE(std::is_same_v<decltype(1_TFLOPs / 1_TFLOPs), double>);

  // 2 GB over 1 TB/s takes 2 ms; both sides round 0.002 correctly, so they are equal exactly.
  CHECK(2_GB / 1_TBps == 2_ms);
  CHECK(1.0 / 1_GHz == 1_ns);
  CHECK(1_GiB / 1_MiB == 1024.0);
  CHECK(1_s / 1_ms == Approx(1000.0).epsilon(1e-15));
  // 312 TFLOP of work at 312 TFLOP/s (A100 dense BF16, NVIDIA A100 datasheet) takes one second.
  CHECK(312_TFLOP / 312_TFLOPs == 1_s);
  CHECK(1_TBps * 3_s == 3_TB);
  CHECK(2_GHz * 1_ms == Approx(2e6));
  // Roofline ridge point of an A100-80GB: 312 TFLOP/s over 2.039 TB/s is about 153 FLOP/byte.
  const flops_per_byte ridge = 312_TFLOPs / bytes_per_second{2.039e12};
  CHECK(ridge.value() == Approx(312.0 / 2.039).epsilon(1e-12));
}

TEST_CASE("quantities of one dimension add, subtract, scale and compare", "[quantity]") {
  CHECK(1_GiB + 1_GiB == 2_GiB);
  CHECK(3_ms - 1_ms == 2_ms);
  CHECK(-(2_s) == 0_s - 2_s);
  CHECK(2.0 * 3_GB == 6_GB);
  CHECK(3_GB * 2.0 == 6_GB);
  CHECK(6_GB / 3.0 == 2_GB);
  bytes b = 1_GiB;
  b += 1_GiB;
  CHECK(b == 2_GiB);
  b -= 512_MiB;
  CHECK(b == 1536_MiB);
  b *= 2.0;
  CHECK(b == 3_GiB);
  b /= 3.0;
  CHECK(b == 1_GiB);
  CHECK(bytes{} == 0_B);
  CHECK(seconds{}.value() == 0.0);

  CHECK(1_ms < 1_s);
  CHECK(1_s > 999_ms);
  CHECK(1_s >= 1000_ms);
  CHECK(1_s <= 1000_ms);
  CHECK(1_GB < 1_GiB);
  CHECK((1_GB <=> 1_GiB) == std::partial_ordering::less);
  CHECK((2_GB <=> 2000_MB) == std::partial_ordering::equivalent);
  STATIC_REQUIRE(std::is_same_v<decltype(1_GB <=> 1_GB), std::partial_ordering>);
}

TEST_CASE("named conversions leave the base unit for printing", "[quantity]") {
  CHECK(in_kib(1_MiB) == 1024.0);
  CHECK(in_mib(1_GiB) == 1024.0);
  CHECK(in_gib(80_GiB) == 80.0);
  CHECK(in_gb(1_GiB) == Approx(1.073741824).epsilon(1e-15));
  CHECK(in_gib(80_GB) == Approx(80e9 / 1073741824.0).epsilon(1e-15));
  CHECK(in_ms(1_s) == 1000.0);
  CHECK(in_us(3_ms) == Approx(3000.0).epsilon(1e-15));
  CHECK(in_gflops(1_TFLOP) == 1000.0);
  CHECK(in_tflops(1_PFLOP) == 1000.0);
  CHECK(in_tflop_per_s(312_TFLOPs) == 312.0);
  CHECK(in_gb_per_s(2_TBps) == 2000.0);
  CHECK(in_gb_per_s(400_Gbps) == 50.0);
}

TEST_CASE("dimension arithmetic is componentwise", "[quantity]") {
  constexpr dimension a{1, -1, 0};
  constexpr dimension b{0, 1, 1};
  STATIC_REQUIRE(a + b == dimension{1, 0, 1});
  STATIC_REQUIRE(a - b == dimension{1, -2, -1});
  STATIC_REQUIRE(a - a == dimensionless);
  STATIC_REQUIRE(bytes_per_second::dim == bytes::dim - seconds::dim);
  STATIC_REQUIRE(flops_per_second::dim == flops::dim - seconds::dim);
  STATIC_REQUIRE(hertz::dim == dimensionless - seconds::dim);
}

TEST_CASE("mixing dimensions or raw numbers is rejected by the type system", "[quantity]") {
  STATIC_REQUIRE(addable<bytes, bytes>);
  STATIC_REQUIRE_FALSE(addable<bytes, seconds>);
  STATIC_REQUIRE_FALSE(addable<flops, flops_per_second>);
  STATIC_REQUIRE_FALSE(addable<bytes, double>);
  STATIC_REQUIRE_FALSE(subtractable<seconds, bytes>);
  STATIC_REQUIRE_FALSE(comparable<bytes, seconds>);
  STATIC_REQUIRE_FALSE(comparable<seconds, double>);
  STATIC_REQUIRE_FALSE(assignable<bytes, seconds>);
  STATIC_REQUIRE_FALSE(assignable<bytes, double>);
  STATIC_REQUIRE(assignable<bytes, bytes>);
  // Construction from a raw number is explicit only.
  STATIC_REQUIRE(std::is_constructible_v<bytes, double>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<double, bytes>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<seconds, bytes>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<bytes, double>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<seconds>);
}
