// Tests of phaze/hw/space.hpp: enumeration against brute-force nested loops over the raw grid (order and
// content), the area filter, same_as ties, count() and at(i) against enumeration, run-time construction, and
// the rules a run-time spec must keep.
#include "phaze/hw/space.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using namespace phaze;
using namespace phaze::literals;
namespace dsl = phaze::dsl;
using hw::axis;

namespace {
/// What distinguishes designs of one space: the template fields and the HBM capacity.
struct design {
  hw::systolic_design systolic;
  bytes hbm;
  friend bool operator==(const design&, const design&) = default;
};

std::ostream& operator<<(std::ostream& os, const design& d) {
  const auto& s = d.systolic;
  return os << hw::design_label(s, d.hbm).str();
}

design design_of(const hw::device& d) {
  return {d.systolic, d.hbm};
}

/// The oracle: nested loops over every dimension in enumeration order (tensor_cores outermost, hbm
/// innermost), ties resolved by hand, filtered by the space's area bounds computed from scratch.
std::vector<design> brute_force(const hw::space& s) {
  auto list = [&](axis d) {
    std::vector<double> v;
    if (s.same_as(d)) {
      v.push_back(-1.0);  // placeholder: takes its target's value
    } else {
      for (double x : s.values(d)) v.push_back(x);
    }
    return v;
  };
  auto resolve = [&](axis d, const std::array<double, 7>& v) {
    const auto target = s.same_as(d);
    return target ? v[static_cast<std::size_t>(*target)] : v[static_cast<std::size_t>(d)];
  };
  std::vector<design> out;
  for (double tc : list(axis::tensor_cores)) {
    for (double tw : list(axis::tc_width)) {
      for (double td : list(axis::tc_depth)) {
        for (double vc : list(axis::vector_cores)) {
          for (double vw : list(axis::vc_width)) {
            for (double glb : list(axis::global_buffer)) {
              for (double hbm : list(axis::hbm)) {
                const std::array<double, 7> raw{tc, tw, td, vc, vw, glb, hbm};
                std::array<double, 7> v{};
                for (std::size_t i = 0; i < 7; ++i) v[i] = resolve(static_cast<axis>(i), raw);
                hw::systolic_design sd = s.base().systolic;
                sd.num_tc = static_cast<int>(v[0]);
                sd.tc_width = static_cast<int>(v[1]);
                sd.tc_depth = static_cast<int>(v[2]);
                sd.num_vc = static_cast<int>(v[3]);
                sd.vc_width = static_cast<int>(v[4]);
                sd.glb = bytes{v[5]};
                const hw::area a = hw::area_of(sd);
                const bool single = sd.num_tc == 1 && sd.num_vc == 1;
                const bool fits =
                    a <= s.area_budget() && (a >= s.min_area() || (s.exempts_single_core() && single));
                if (fits) out.push_back({sd, bytes{v[6]}});
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<design> enumerated(const hw::space& s) {
  std::vector<design> out;
  for (const hw::device& d : s) out.push_back(design_of(d));
  return out;
}

/// Every way of reading a space agrees with the brute force.
void check_against_brute_force(const hw::space& s) {
  const auto expected = brute_force(s);
  const auto by_iterator = enumerated(s);
  REQUIRE(by_iterator.size() == expected.size());
  CHECK(by_iterator == expected);
  CHECK(s.count() == expected.size());

  std::vector<design> by_for_each;
  s.for_each([&](const hw::device& d) { by_for_each.push_back(design_of(d)); });
  CHECK(by_for_each == expected);

  // Random access, at a spread of indices (all of them for small spaces).
  const std::size_t n = expected.size();
  const std::size_t step = n > 400 ? n / 197 : 1;
  for (std::size_t i = 0; i < n; i += step) {
    INFO("index " << i);
    CHECK(design_of(s.at(i)) == expected[i]);
  }
  if (n > 0) CHECK(design_of(s.at(n - 1)) == expected.back());
  CHECK_THROWS_AS(s.at(n), input_error);

  // The design table: every design by index, the same as at() (and so brute force), whole devices equal.
  const hw::space::design_table table = s.designs();
  REQUIRE(table.size() == n);
  for (std::size_t i = 0; i < n; i += step) {
    INFO("table index " << i);
    CHECK(table[i] == s.at(i));
  }
  if (n > 0) CHECK(table[n - 1] == s.at(n - 1));
}

hw::area reference() {
  return hw::area_of(hw::tpuv4_like);
}
}  // namespace

TEST_CASE("enumeration equals brute force on small spaces, in order and content", "[hw][space]") {
  SECTION("no area bounds: the whole grid") {
    const auto s =
        dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(1, 8), dsl::tc_width = dsl::one_of(4, 16),
                               dsl::vector_cores = dsl::one_of(2, 1), dsl::hbm = dsl::one_of(64_GiB, 32_GiB));
    CHECK(s.raw_size() == 4 * 2 * 2 * 2);
    CHECK(s.count() == s.raw_size());
    check_against_brute_force(s);
  }
  SECTION("budgets that cut every dimension mid-range") {
    // Budgets from well below the smallest design to above the largest, so pruning happens at every
    // level of the counter.
    for (double budget : {50.0, 110.0, 150.0, 200.0, 260.0, 333.3, 420.0, 599.5, 800.0, 5000.0}) {
      INFO("budget " << budget << " mm2");
      const auto s = dsl::accelerator_space(
          dsl::tensor_cores = dsl::pow2(1, 64), dsl::tc_width = dsl::pow2(4, 128),
          dsl::tc_depth = dsl::pow2(8, 256), dsl::vector_cores = dsl::one_of(1, 3, 16),
          dsl::vc_width = dsl::pow2(16, 256), dsl::global_buffer = dsl::pow2(4_MiB, 64_MiB),
          dsl::hbm = dsl::one_of(32_GiB, 80_GiB), dsl::area_budget = hw::area{budget});
      check_against_brute_force(s);
    }
  }
  SECTION("a minimum area with and without the single-core exemption") {
    for (bool exempt : {false, true}) {
      for (double low : {0.0, 120.0, 180.0, 300.0}) {
        INFO("min " << low << " exempt " << exempt);
        const auto s = dsl::accelerator_space(
            dsl::tensor_cores = dsl::pow2(1, 32), dsl::tc_width = dsl::pow2(2, 256),
            dsl::vector_cores = dsl::pow2(1, 16), dsl::vc_width = dsl::same_as(dsl::tc_width),
            dsl::global_buffer = dsl::pow2(2_MiB, 128_MiB), dsl::area_budget = reference(),
            dsl::min_area = hw::area{low}, dsl::exempt_single_core = exempt);
        check_against_brute_force(s);
      }
    }
  }
  SECTION("ties in several directions") {
    const auto square = dsl::accelerator_space(
        dsl::tensor_cores = dsl::pow2(1, 16), dsl::tc_width = dsl::pow2(2, 64),
        dsl::tc_depth = dsl::same_as(dsl::tc_width), dsl::vector_cores = dsl::same_as(dsl::tensor_cores),
        dsl::vc_width = dsl::same_as(dsl::tc_width), dsl::area_budget = hw::area{400.0});
    check_against_brute_force(square);
    // Ties to a later dimension: tensor cores follow the vector cores.
    const auto later = dsl::accelerator_space(
        dsl::tensor_cores = dsl::same_as(dsl::vector_cores), dsl::vector_cores = dsl::pow2(1, 64),
        dsl::min_area = hw::area{200.0}, dsl::exempt_single_core = true, dsl::area_budget = reference());
    check_against_brute_force(later);
  }
}

TEST_CASE("PHAZE's default space: brute force over its 227,136-point grid", "[hw][space]") {
  const hw::space& s = hw::phaze_default_space;
  CHECK(s.raw_size() == 13ull * 8 * 8 * 13 * 7 * 3);
  CHECK(s.area_budget() == reference());
  CHECK(s.min_area() == 0.3 * reference());
  CHECK(s.exempts_single_core());
  check_against_brute_force(s);
  // Regression value reported in docs/space.md.
  CHECK(s.count() == 38451);
  // The reference design itself is in the space.
  bool found = false;
  s.for_each([&](const hw::device& d) { found = found || design_of(d) == design_of(hw::tpuv4_like); });
  CHECK(found);
}

TEST_CASE("every enumerated design is within the area bounds and keeps the base's other fields",
          "[hw][space]") {
  const hw::space& s = hw::phaze_default_space;
  std::uint64_t single_core_below_min = 0;
  for (const hw::device& d : s) {
    const hw::area a = hw::area_of(d);
    REQUIRE(a <= s.area_budget());
    if (a < s.min_area()) {
      REQUIRE(d.systolic.num_tc == 1);
      REQUIRE(d.systolic.num_vc == 1);
      ++single_core_below_min;
    }
    REQUIRE(d.systolic.vc_width == d.systolic.tc_width);  // same_as
    REQUIRE(d.systolic.clock == hw::tpuv4_like.systolic.clock);
    REQUIRE(d.hbm_bandwidth == hw::tpuv4_like.hbm_bandwidth);
    REQUIRE(d.name == hw::design_label(d.systolic, d.hbm));
  }
  CHECK(single_core_below_min > 0);  // the exemption matters in PHAZE's space
}

TEST_CASE("same_as ties a dimension to another instead of adding one", "[hw][space]") {
  const auto tied =
      dsl::accelerator_space(dsl::tc_width = dsl::pow2(2, 256), dsl::vc_width = dsl::same_as(dsl::tc_width));
  const auto free =
      dsl::accelerator_space(dsl::tc_width = dsl::pow2(2, 256), dsl::vc_width = dsl::pow2(2, 256));
  CHECK(tied.raw_size() == 8);
  CHECK(free.raw_size() == 64);
  CHECK(tied.same_as(axis::vc_width) == axis::tc_width);
  CHECK(tied.values(axis::vc_width).empty());
  for (const auto& d : tied) CHECK(d.systolic.vc_width == d.systolic.tc_width);
}

TEST_CASE("options left out keep the base design's values", "[hw][space]") {
  const auto only_hbm = dsl::accelerator_space(dsl::hbm = dsl::one_of(32_GiB, 64_GiB));
  REQUIRE(only_hbm.count() == 2);
  CHECK(only_hbm.at(0).systolic == hw::tpuv4_like.systolic);
  CHECK(only_hbm.at(1).hbm == 64_GiB);

  hw::device slow = hw::tpuv4_like;
  slow.systolic.clock = 700_MHz;
  slow.hbm_bandwidth = 600_GBps;
  const auto based = dsl::accelerator_space(dsl::base = slow, dsl::tensor_cores = dsl::one_of(2, 4));
  REQUIRE(based.count() == 2);
  for (const auto& d : based) {
    CHECK(d.systolic.clock == 700_MHz);
    CHECK(d.hbm_bandwidth == 600_GBps);
    CHECK(d.systolic.tc_width == 128);
  }
  CHECK(based.at(1).systolic.num_tc == 4);

  // A single value fixes a dimension without adding one.
  const auto fixed = dsl::accelerator_space(dsl::tc_width = 64, dsl::global_buffer = 32_MiB,
                                            dsl::vector_cores = dsl::pow2(1, 4));
  CHECK(fixed.raw_size() == 3);
  for (const auto& d : fixed) {
    CHECK(d.systolic.tc_width == 64);
    CHECK(d.systolic.glb == 32_MiB);
  }
}

TEST_CASE("a space built at run time equals the DSL's", "[hw][space]") {
  hw::space s{hw::tpuv4_like};
  s.set_pow2(axis::tensor_cores, 1, 4096)
      .set_pow2(axis::tc_width, 2, 256)
      .set_pow2(axis::tc_depth, 2, 256)
      .set_pow2(axis::vector_cores, 1, 4096)
      .set_same_as(axis::vc_width, axis::tc_width)
      .set_pow2(axis::global_buffer, (2_MiB).value(), (128_MiB).value())
      .set_values(axis::hbm, {(80_GiB).value(), (32_GiB).value(), (64_GiB).value()})
      .set_area_budget(reference())
      .set_min_area(0.3 * reference())
      .set_exempt_single_core(true);
  CHECK(s == hw::phaze_default_space);
  CHECK(s.values(axis::hbm)[0] == (32_GiB).value());  // sorted ascending
}

TEST_CASE("run-time specs are checked by the same rules", "[hw][space]") {
  hw::space s;
  CHECK_THROWS_AS(s.set_pow2(axis::tc_width, 3, 256), input_error);
  CHECK_THROWS_AS(s.set_pow2(axis::tc_width, 256, 2), input_error);
  CHECK_THROWS_AS(s.set_values(axis::tc_width, {4, 8, 4}), input_error);
  CHECK_THROWS_AS(s.set_values(axis::tc_width, {}), input_error);
  CHECK_THROWS_AS(s.set_values(axis::tc_width, {0}), input_error);
  CHECK_THROWS_AS(s.set_values(axis::tc_width, {2.5}), input_error);
  CHECK_THROWS_AS(s.set_same_as(axis::tc_width, axis::tc_width), input_error);
  CHECK_THROWS_AS(s.set_same_as(axis::hbm, axis::tc_width), input_error);
  s.set_same_as(axis::vc_width, axis::tc_width);
  CHECK_THROWS_AS(s.set_same_as(axis::tc_depth, axis::vc_width), input_error);  // chain
  CHECK_THROWS_AS(s.set_same_as(axis::tc_width, axis::tc_depth), input_error);  // target of a tie
  CHECK_THROWS_AS(s.set_area_budget(hw::area{0.0}), input_error);
  CHECK_THROWS_AS(hw::space{*hw::find_preset("h100-sxm")}, input_error);
  CHECK_THROWS_AS(dsl::pow2(3, 8), input_error);
  CHECK_THROWS_AS(dsl::pow2(8_MiB, 2_MiB), input_error);
  // Byte sizes need not be whole numbers of anything but must be positive.
  CHECK_NOTHROW(s.set_values(axis::global_buffer, {1.5 * 1048576.0}));
}

TEST_CASE("an empty space enumerates nothing", "[hw][space]") {
  const auto s =
      dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(1, 8), dsl::area_budget = hw::area{50.0});
  CHECK(s.count() == 0);
  CHECK(s.begin() == s.end());
  CHECK_THROWS_AS(s.at(0), input_error);
}

TEST_CASE("design labels name the design", "[hw][space]") {
  CHECK(hw::design_label(hw::tpuv4_like.systolic, hw::tpuv4_like.hbm).view() == "8x128x128 2x128 128M 32G");
  hw::systolic_design s{4096, 256, 256, 4096, 256, 512_KiB, 1050_MHz};
  CHECK(hw::design_label(s, 80_GiB).view() == "4096x256x256 4096x256 512K 80G");
  CHECK(to_string(axis::global_buffer) == "global_buffer");
}
