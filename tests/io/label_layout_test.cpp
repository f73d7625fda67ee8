// Label placement: text boxes from the font size and the characters (UTF-8 counted once per character); a
// label goes next to its point when that is free, farther out when not, never onto a taken box while the area
// has room, and the least overlapping place when it has none.
#include <phaze/io/label_layout.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

using namespace phaze;

TEST_CASE("label layout: text boxes and characters", "[label_layout]") {
  CHECK(io::characters("mm²") == 3);
  CHECK(io::characters("") == 0);
  const io::box b = io::text_box(10.0, 50.0, "abcd", 12.0);
  CHECK(b.x0 == 10.0);
  CHECK(b.width() == Approx(4 * 0.6 * 12.0));
  CHECK(b.y0 == Approx(50.0 - 0.8 * 12.0));
  CHECK(b.y1 == Approx(50.0 + 0.25 * 12.0));
  CHECK(io::box{0, 0, 2, 2}.intersects(io::box{1, 1, 3, 3}));
  CHECK_FALSE(io::box{0, 0, 2, 2}.intersects(io::box{2, 0, 4, 2}));  // touching edges
  CHECK(io::box{1, 1, 2, 2}.inside(io::box{0, 0, 2, 2}));
}

TEST_CASE("label layout: next to the point when free, else farther out, never on a taken box",
          "[label_layout]") {
  const io::box area{0, 0, 400, 300};
  const double w = 60.0;
  const double h = 12.6;
  auto candidates = io::around_point(200, 150, 8.0, w, h);
  REQUIRE(candidates.size() == 13 * 8);
  // Nothing taken: right of the point, touching no marker, without a leader line.
  const std::size_t first = io::pick_label(candidates, {{192, 142, 208, 158}}, area);
  CHECK(first == 0);
  CHECK_FALSE(candidates[first].leader);
  CHECK(candidates[first].bounds.x0 > 208);

  // Every position next to the point taken: the label moves out and needs a leader line.
  std::vector<io::box> taken{{192, 142, 208, 158}};
  for (std::size_t i = 0; i < 8; ++i) taken.push_back(candidates[i].bounds);
  const std::size_t out = io::pick_label(candidates, taken, area);
  CHECK(out >= 8);
  CHECK(candidates[out].leader);
  for (const auto& t : taken) CHECK_FALSE(candidates[out].bounds.intersects(t));
  CHECK(candidates[out].bounds.inside(area));

  // A crowded area: the grid of io::anywhere finds the one free corner.
  std::vector<io::box> crowd{{0, 0, 400, 280}, {0, 280, 300, 300}};
  auto everywhere = io::anywhere(area, 200, 150, w, h);
  const std::size_t corner = io::pick_label(everywhere, crowd, area);
  for (const auto& t : crowd) CHECK_FALSE(everywhere[corner].bounds.intersects(t));
  CHECK(everywhere[corner].bounds.inside(area));

  // No room at all: the least overlap, inside the area.
  const std::size_t least = io::pick_label(everywhere, {{0, 0, 400, 300}}, area);
  CHECK(everywhere[least].bounds.inside(area));
}

TEST_CASE("label layout: along a line, above then below, then stepping left", "[label_layout]") {
  const auto c = io::along_line(80, 680, 100, 90, 12.6);
  REQUIRE(c.size() >= 4);
  CHECK(c[0].bounds.y1 < 100);
  CHECK(c[1].bounds.y0 > 100);
  CHECK(c[0].bounds.x1 == Approx(676));
  CHECK(c[2].bounds.x1 < c[0].bounds.x1);
  for (const auto& k : c) CHECK(k.bounds.x0 >= 80);
}
