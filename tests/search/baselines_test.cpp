// The line describing a search states the area rule the space applies: checked against the designs the space
// holds (PHAZE's space exempts single-core designs from its minimum, so its smallest designs lie below it).
#include <phaze/hw/area.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/hw/space.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/search/baselines.hpp>
#include <phaze/search/spec.hpp>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>

using namespace phaze;

namespace {
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("describe: the area rule is the one the designs obey", "[search]") {
  search::spec s;
  s.model = zoo::get("gpt2");
  const hw::space& space = s.space;  // PHAZE's
  const std::string line = search::describe(s);
  const std::string minimum = fmt::format("at least {:.0f} mm2", space.min_area().value());
  INFO(line);
  CHECK(contains(line, fmt::format("{} designs (area at most {:.0f} mm2, ", space.count(),
                                   space.area_budget().value())));
  CHECK(contains(line, minimum + " except designs of one tensor core and one vector core)"));
  // True of the designs: every one under the minimum has one tensor core and one vector core, and there are
  // such designs (the front of the default search starts with them).
  double smallest = std::numeric_limits<double>::infinity();
  std::uint64_t under = 0;
  for (const hw::device& d : space) {
    const double a = hw::area_of(d.systolic, space.tech()).value();
    smallest = std::min(smallest, a);
    CHECK(a <= space.area_budget().value());
    if (a < space.min_area().value()) {
      ++under;
      CHECK(d.systolic.num_tc == 1);
      CHECK(d.systolic.num_vc == 1);
    }
  }
  CHECK(under > 0);
  CHECK(smallest < space.min_area().value());

  // Without the exemption, or without bounds, the line says so.
  s.space.set_exempt_single_core(false);
  CHECK(contains(search::describe(s), minimum + ") x"));
  s.space = hw::space{hw::tpuv4_like}.set_pow2(hw::axis::tensor_cores, 1, 4);
  CHECK(contains(search::describe(s), "3 designs (any area) x"));
  s.space.set_area_budget(hw::area{600.0});
  CHECK(contains(search::describe(s), "(area at most 600 mm2) x"));
}
