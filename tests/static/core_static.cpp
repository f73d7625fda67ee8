// Compile-time tests of phaze/core: quantities, fixed_string and static_vector. Compiling is the test.
#include "phaze/core/fixed_string.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/core/static_vector.hpp"

#include <type_traits>

namespace {
using namespace phaze;
using namespace phaze::literals;

// --- quantities ---------------------------------------------------------------------------------------
// Adding, subtracting, comparing or assigning different dimensions is not a valid expression (checked with
// requires-expressions, so the test states the property rather than breaking the build).
template <class A, class B>
concept addable = requires(A a, B b) {
  a + b;
};
template <class A, class B>
concept subtractable = requires(A a, B b) {
  a - b;
};
template <class A, class B>
concept equality_comparable = requires(A a, B b) {
  a == b;
};
template <class A, class B>
concept ordered = requires(A a, B b) {
  a < b;
};
template <class A, class B>
concept assignable = requires(A& a, B b) {
  a = b;
};
template <class A, class B>
concept accumulable = requires(A& a, B b) {
  a += b;
};

static_assert(addable<bytes, bytes>);
static_assert(!addable<bytes, seconds>);
static_assert(!addable<seconds, bytes>);
static_assert(!subtractable<bytes, seconds>);
static_assert(!equality_comparable<bytes, seconds>);
static_assert(!ordered<bytes, seconds>);
static_assert(!addable<bytes, double>);
static_assert(!assignable<bytes, seconds>);
static_assert(!assignable<bytes, double>);
static_assert(!accumulable<bytes, seconds>);
static_assert(!addable<flops, flops_per_second>);
static_assert(!std::is_convertible_v<double, bytes>);  // construction from a raw number is explicit
static_assert(std::is_constructible_v<bytes, double>);

static_assert(1_GiB == 1024_MiB);
static_assert(1_TiB == 1024 * 1_GiB);
static_assert(2_GB / 1_TBps == 2_ms);
static_assert(std::is_same_v<decltype(2_GB / 1_TBps), seconds>);
static_assert(std::is_same_v<decltype(1_PFLOP / 1_PFLOPs), seconds>);
static_assert(std::is_same_v<decltype(1.0 / 1_GHz), seconds>);
static_assert(std::is_same_v<decltype(1_GiB / 1_KiB), double>);
static_assert(1_GiB / 1_KiB == 1048576.0);
static_assert(1.0 / 1_GHz == 1_ns);
static_assert(400_Gbps == 50_GBps);
static_assert(in_gib(80_GiB) == 80.0);
static_assert(in_ms(1.5_s) == 1500.0);
static_assert(1_ms < 1_s && 1_GB < 1_GiB && !(1_GiB < 1_GB));

// --- fixed_string -------------------------------------------------------------------------------------
constexpr fixed_string<8> short_name{"attention"};  // truncated to N - 1 characters
static_assert(short_name.view() == "attenti");
static_assert(short_name.size() == 7);
static_assert(fixed_string<16>{"qkv", "_dx"}.view() == "qkv_dx");
static_assert(fixed_string<6>{"qkv", "_dx_long"}.view() == "qkv_d");
static_assert(fixed_string<4>{}.empty());
static_assert(fixed_string<16>{"fc1"} == fixed_string<16>{std::string_view{"fc1"}});
static_assert(!(fixed_string<16>{"fc1"} == fixed_string<16>{"fc2"}));
// c_str() is NUL-terminated, truncated or not.
static_assert(short_name.c_str()[7] == '\0' && short_name.c_str()[0] == 'a');
static_assert(fixed_string<16>{"qkv", "_dx"}.c_str()[6] == '\0');
static_assert(std::string_view{fixed_string<16>{"fc1"}.c_str()} == "fc1");

// --- static_vector ------------------------------------------------------------------------------------
constexpr auto filled = [] {
  static_vector<int, 4> v{3, 1, 4};
  v.push_back(1);
  v.pop_back();
  v.push_back(5);
  return v;
}();
static_assert(filled.size() == 4 && filled[3] == 5 && filled.back() == 5);
static_assert(filled == static_vector<int, 4>{3, 1, 4, 5});
static_assert(decltype(filled)::capacity() == 4);
// Overflow in a constant expression is not a constant expression (the call to the non-constexpr raise
// function is the diagnostic).
template <int N>
constexpr bool fits() {
  static_vector<int, 2> v;
  for (int i = 0; i < N; ++i) v.push_back(i);
  return true;
}
template <int N>
concept constant_fill = requires {
  typename std::integral_constant<bool, fits<N>()>;
};
static_assert(constant_fill<2>);
static_assert(!constant_fill<3>);
}  // namespace
