// The boxes of a timeline row: they cover the row's segments in order, edge to edge; none is narrower than
// the minimum width (unless the whole row is); each takes the kind with the most time, and is pure (one kind
// takes 90% of its time) or mixed; no two neighbours are pure of one kind; so a row of w units gives at most
// w / min_width of them. Mixed boxes join within a phase of the row (between the first and last segments of
// the same kinds), not across, and are drawn as bands that fill the row. The case users met: wide forwards
// and backwards between sends far narrower than a pixel (1F1B with thousands of microbatches).
#include <phaze/io/timeline_boxes.hpp>
#include <phaze/train/knobs.hpp>
#include <phaze/train/timeline.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

using namespace phaze;
using train::segment_kind;

namespace {

// The properties every row's boxes have, at x = origin + scale * t.
void check_boxes(const std::vector<train::timeline_segment>& row, double origin, double scale,
                 double min_width) {
  const auto boxes = io::timeline_boxes(row, origin, scale, min_width);
  if (row.empty()) {
    CHECK(boxes.empty());
    return;
  }
  REQUIRE_FALSE(boxes.empty());
  const double row_width = scale * (row.back().end - row.front().start).value();
  CHECK(boxes.front().first == 0);
  CHECK(boxes.back().last == row.size());
  CHECK(boxes.front().x0 == origin + scale * row.front().start.value());
  CHECK(std::abs(boxes.back().x1 - (origin + scale * row.back().end.value())) <= 1e-9 * (1 + origin));
  CHECK(static_cast<double>(boxes.size()) <= std::max(1.0, std::floor(row_width / min_width + 1e-9)));
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    const io::timeline_box& b = boxes[i];
    INFO("box " << i << " of " << boxes.size());
    CHECK(b.last > b.first);
    if (boxes.size() > 1) CHECK(b.width() >= min_width - 1e-9);
    if (i > 0) {
      const io::timeline_box& before = boxes[i - 1];
      CHECK(b.first == before.last);
      CHECK(b.x0 == before.x1);
      CHECK_FALSE((!b.mixed && !before.mixed && b.kind == before.kind));
    }
    // The kind with the most time in the box's segments.
    std::array<double, train::all_segment_kinds.size()> time{};
    for (std::size_t s = b.first; s < b.last; ++s)
      time[static_cast<std::size_t>(row[s].kind)] += row[s].duration().value();
    const auto most = static_cast<std::size_t>(std::max_element(time.begin(), time.end()) - time.begin());
    CHECK(time[static_cast<std::size_t>(b.kind)] == time[most]);
    double total = 0.0;
    for (const double t : time) total += t;
    if (time[most] < io::timeline_pure_share * total * (1 - 1e-9)) CHECK(b.mixed);
    if (time[most] > io::timeline_pure_share * total * (1 + 1e-9)) CHECK_FALSE(b.mixed);
    // Bands fill the row's height, the largest kind's among them, in legend order.
    const auto bands = io::timeline_bands(b, 1.0 / 24.0);
    double height = 0.0;
    bool largest = false;
    for (std::size_t k = 0; k < bands.size(); ++k) {
      height += bands[k].height_share;
      largest = largest || bands[k].kind == b.kind;
      if (k > 0) CHECK(bands[k].kind > bands[k - 1].kind);
      CHECK(time[static_cast<std::size_t>(bands[k].kind)] >= (bands[k].kind == b.kind ? 0.0 : total / 24.0));
    }
    CHECK(height == Approx(1.0));
    CHECK(largest);
    if (!b.mixed) CHECK(bands.size() == 1);
    for (std::size_t k = 0; k < time.size(); ++k) {
      CHECK(std::abs(b.shares[k].seconds - time[k]) <= 1e-9 * std::max(1.0, time[k]));
    }
  }
}

std::vector<train::timeline_segment> tile(const std::vector<std::pair<segment_kind, double>>& pieces) {
  std::vector<train::timeline_segment> row;
  double at = 0.0;
  std::int64_t mb = 0;
  for (const auto& [kind, length] : pieces) {
    const bool per_microbatch = kind != segment_kind::bubble && kind != segment_kind::gradient_sync &&
                                kind != segment_kind::optimizer;
    row.push_back({kind, per_microbatch ? mb++ : -1, seconds{at}, seconds{at + length}});
    at += length;
  }
  return row;
}

}  // namespace

TEST_CASE("timeline boxes: sends far narrower than a pixel between wide segments are never drawn alone",
          "[timeline_boxes]") {
  // 1F1B's steady state: forward, send, backward, send, ... each send a thousandth of a pixel.
  std::vector<std::pair<segment_kind, double>> pieces;
  for (int i = 0; i < 200; ++i) {
    pieces.emplace_back(segment_kind::forward, 1.0);
    pieces.emplace_back(segment_kind::communication, 0.001);
    pieces.emplace_back(segment_kind::backward, 2.0);
    pieces.emplace_back(segment_kind::communication, 0.001);
  }
  const auto row = tile(pieces);
  check_boxes(row, 80.0, 1.0, 1.0);
  const auto boxes = io::timeline_boxes(row, 80.0, 1.0, 1.0);
  for (const auto& b : boxes) CHECK(b.width() >= 1.0);
  // Every send joins a neighbour: one box per forward and per backward.
  CHECK(boxes.size() == 400);
  // Boxes of at least 7 units hold two or three pairs, none 90% one kind: joined into one mixed box, drawn
  // as a band of forwards (a third) over one of backwards (two thirds); the sends are too thin for a band.
  check_boxes(row, 80.0, 1.0, 7.0);
  const auto coarse = io::timeline_boxes(row, 80.0, 1.0, 7.0);
  REQUIRE(coarse.size() == 1);
  CHECK(coarse[0].mixed);
  CHECK(coarse[0].kind == segment_kind::backward);
  const auto bands = io::timeline_bands(coarse[0], 1.0 / 24.0);
  REQUIRE(bands.size() == 2);
  CHECK(bands[0].kind == segment_kind::forward);
  CHECK(bands[0].height_share == Approx(1.0 / 3.0).epsilon(1e-3));
  CHECK(bands[1].kind == segment_kind::backward);
}

TEST_CASE("timeline boxes: mixed boxes join within a phase of the row, not across", "[timeline_boxes]") {
  // 100 rounds of forward 1, backward 2 (a steady state), then 50 of backward 2 and a bubble of 1.5 (a
  // cool-down after the last forward): at 4 units, one mixed box for each, the second without forwards.
  std::vector<std::pair<segment_kind, double>> pieces;
  for (int i = 0; i < 100; ++i) {
    pieces.emplace_back(segment_kind::forward, 1.0);
    pieces.emplace_back(segment_kind::backward, 2.0);
  }
  for (int i = 0; i < 50; ++i) {
    pieces.emplace_back(segment_kind::backward, 2.0);
    pieces.emplace_back(segment_kind::bubble, 1.5);
  }
  const auto row = tile(pieces);
  check_boxes(row, 0.0, 1.0, 4.0);
  const auto boxes = io::timeline_boxes(row, 0.0, 1.0, 4.0);
  REQUIRE(boxes.size() >= 2);
  CHECK(boxes.size() <= 3);
  CHECK(boxes.front().mixed);
  CHECK(boxes.front().x1 == Approx(300.0).margin(5.0));
  CHECK(boxes.back().mixed);
  CHECK(boxes.back().shares[static_cast<std::size_t>(segment_kind::forward)].seconds == 0.0);
  CHECK(boxes.back().shares[static_cast<std::size_t>(segment_kind::bubble)].seconds >= 70.0);
}

TEST_CASE("timeline boxes: random rows keep every property", "[timeline_boxes]") {
  std::mt19937_64 rng(20261126);
  std::uniform_int_distribution<std::size_t> kind(0, train::all_segment_kinds.size() - 1);
  std::uniform_real_distribution<double> exponent(-6.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::pair<segment_kind, double>> pieces;
    const std::size_t n = 1 + static_cast<std::size_t>(trial) % 97;
    for (std::size_t i = 0; i < n; ++i) {
      pieces.emplace_back(train::all_segment_kinds[kind(rng)], std::pow(10.0, exponent(rng)));
    }
    const auto row = tile(pieces);
    for (const double min_width : {0.5, 1.0, 3.5, 40.0}) check_boxes(row, 80.0, 37.0, min_width);
  }
  CHECK(io::timeline_boxes({}, 0.0, 1.0, 1.0).empty());
}

TEST_CASE("timeline boxes: a 1F1B pipeline of 4096 microbatches fits the width, whatever the batch",
          "[timeline_boxes]") {
  const std::vector<train::stage_op_times> stages(
      8, {seconds{0.010}, seconds{0.020}, seconds{0.0}, seconds{1e-6}, seconds{1e-6}});
  const auto t = train::simulate_pipeline(stages, 4096, train::pipeline_schedule::one_f_one_b, seconds{0.5},
                                          seconds{0.1});
  const double width = 890.0;
  const double scale = width / t.makespan.value();
  std::size_t all = 0;
  for (const auto& row : t.stages) {
    check_boxes(row, 80.0, scale, 2.0);
    all += io::timeline_boxes(row, 80.0, scale, 2.0).size();
  }
  CHECK(all <= t.stages.size() * static_cast<std::size_t>(width / 2.0));
}
