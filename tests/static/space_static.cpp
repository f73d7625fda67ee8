// Compile-time tests of phaze/hw/area.hpp and phaze/hw/space.hpp: the reference area, a space built and
// counted by the compiler against a constexpr brute force, random access, ties and PHAZE's default space.
// Compiling is the test. (Counting all of PHAZE's default space at compile time exceeds GCC's default
// constexpr operation limit; tests/hw/space_test.cpp counts it at run time.)
#include "phaze/hw/area.hpp"
#include "phaze/hw/space.hpp"

#include <cstdint>
#include <iterator>
#include <ranges>

namespace {
using namespace phaze;
using namespace phaze::literals;
namespace dsl = phaze::dsl;
using hw::axis;

// --- area -------------------------------------------------------------------------------------------------
constexpr hw::area reference = hw::area_of(hw::tpuv4_like);
static_assert(reference <= hw::tpuv4_die_bound && reference.value() > 0.995 * hw::tpuv4_die_bound.value());
static_assert(hw::area_breakdown_of(hw::tpuv4_like).total() == reference);
static_assert(hw::area_of(hw::systolic_design{16, 128, 128, 2, 128, 128_MiB, 1050_MHz}) > reference);
static_assert(hw::area_of(hw::systolic_design{8, 128, 128, 2, 128, 64_MiB, 1050_MHz}) < reference);
static_assert(hw::energy_per_byte(hw::memory_level::hbm) >
              hw::energy_per_byte(hw::memory_level::global_buffer));

// --- a space built and counted by the compiler ------------------------------------------------------------
constexpr auto small =
    dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(1, 64), dsl::tc_width = dsl::pow2(8, 128),
                           dsl::tc_depth = dsl::same_as(dsl::tc_width), dsl::vector_cores = dsl::one_of(2, 1),
                           dsl::global_buffer = dsl::pow2(16_MiB, 128_MiB), dsl::area_budget = reference,
                           dsl::min_area = 0.3 * reference, dsl::exempt_single_core = true);

static_assert(small.raw_size() == 7 * 5 * 2 * 4);
static_assert(small.values(axis::vector_cores)[0] == 1.0);  // listed in any order, kept ascending
static_assert(small.same_as(axis::tc_depth) == axis::tc_width);
static_assert(small.values(axis::hbm).size() == 1 && small.values(axis::hbm)[0] == (32_GiB).value());

/// The oracle, evaluated by the compiler: nested loops over the raw grid in enumeration order.
constexpr std::uint64_t brute_force_count() {
  std::uint64_t n = 0;
  for (int tc = 1; tc <= 64; tc *= 2) {
    for (int w = 8; w <= 128; w *= 2) {
      for (int vc : {1, 2}) {
        for (double mib = 16; mib <= 128; mib *= 2) {
          const hw::systolic_design s{tc, w, w, vc, 128, bytes{mib * 1048576.0}, 1050_MHz};
          const hw::area a = hw::area_of(s);
          if (a <= reference && (a >= 0.3 * reference || (tc == 1 && vc == 1))) ++n;
        }
      }
    }
  }
  return n;
}
static_assert(small.count() == brute_force_count());
static_assert(small.count() > 0 && small.count() < small.raw_size());

// Random access in enumeration order: the first design is the smallest single-core one.
static_assert(small.at(0).systolic.num_tc == 1 && small.at(0).systolic.tc_width == 8 &&
              small.at(0).systolic.num_vc == 1);
static_assert(small.at(0).name == "1x8x8 1x128 16M 32G");
static_assert(small.at(small.count() - 1).systolic.tc_depth == small.at(small.count() - 1).systolic.tc_width);

// Counting whole sub-ranges agrees with stepping the iterator.
constexpr std::uint64_t iterated_count() {
  std::uint64_t n = 0;
  for (auto it = small.begin(); it != small.end(); ++it) ++n;
  return n;
}
static_assert(iterated_count() == small.count());
static_assert(std::forward_iterator<hw::space::iterator>);
static_assert(std::ranges::forward_range<const hw::space>);

// --- PHAZE's default space
// ----------------------------------------------------------------------------------
static_assert(hw::phaze_default_space.raw_size() == 227'136);
static_assert(hw::phaze_default_space.values(axis::tensor_cores).size() == 13);
static_assert(hw::phaze_default_space.values(axis::global_buffer).size() == 7);
static_assert(hw::phaze_default_space.same_as(axis::vc_width) == axis::tc_width);
static_assert(hw::phaze_default_space.area_budget() == reference);
static_assert(hw::phaze_default_space.base() == hw::tpuv4_like);
}  // namespace
