/// @file
/// The rectangles a pipeline timeline is drawn with (docs/search-report.md): a stage's segments grouped left
/// to right into boxes at least `min_width` drawing units wide. A box whose largest kind takes at least 90%
/// of its time is drawn in that kind's colour and joins a neighbour of the same kind; a run of boxes none of
/// which is that pure, in one phase of the row (where the schedule alternates faster than the boxes are
/// wide, as in 1F1B's steady state), is one mixed box, drawn as bands in proportion to its kinds' time. A
/// row of w units thus gives at most w / min_width boxes, however many microbatches it holds.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/train/timeline.hpp"

namespace phaze::io {

/// A box is drawn in one colour when its largest kind takes at least this share of its time.
inline constexpr double timeline_pure_share = 0.9;

/// What a box holds of one segment kind.
struct timeline_share {
  double seconds = 0.0;                ///< time of this kind in the box
  std::int64_t first_microbatch = -1;  ///< the lowest microbatch of this kind in the box (-1: none)
  std::int64_t last_microbatch = -1;   ///< the highest
};

/// One box of a stage's row: segments [first, last) of the row, drawn from x0 to x1.
struct timeline_box {
  double x0 = 0.0;
  double x1 = 0.0;
  std::size_t first = 0;
  std::size_t last = 0;
  /// The kind with the most time (ties: the first in legend order).
  train::segment_kind kind = train::segment_kind::bubble;
  /// No kind takes timeline_pure_share of the time: drawn as bands.
  bool mixed = false;
  /// The row's phases the box's segments lie in: a bit for each kind whose first and last segments in the
  /// row enclose one of them.
  unsigned phase = 0;
  /// What the box holds of each kind, in legend order.
  std::array<timeline_share, train::all_segment_kinds.size()> shares{};
  [[nodiscard]] double width() const { return x1 - x0; }
  [[nodiscard]] std::size_t segments() const { return last - first; }
  [[nodiscard]] double seconds() const {
    double total = 0.0;
    for (const timeline_share& s : shares) total += s.seconds;
    return total;
  }
};

/// One band of a mixed box: a kind and the share of the box's height it takes.
struct timeline_band {
  train::segment_kind kind = train::segment_kind::bubble;
  double height_share = 0.0;
};

namespace detail::timeline_boxes {
inline void add(timeline_box& b, const train::timeline_segment& s) {
  timeline_share& share = b.shares[static_cast<std::size_t>(s.kind)];
  share.seconds += s.duration().value();
  if (s.microbatch >= 0) {
    share.first_microbatch =
        share.first_microbatch < 0 ? s.microbatch : std::min(share.first_microbatch, s.microbatch);
    share.last_microbatch = std::max(share.last_microbatch, s.microbatch);
  }
}
inline void absorb(timeline_box& into, const timeline_box& b) {
  into.x1 = b.x1;
  into.last = b.last;
  for (std::size_t k = 0; k < into.shares.size(); ++k) {
    const timeline_share& s = b.shares[k];
    timeline_share& t = into.shares[k];
    t.seconds += s.seconds;
    if (s.first_microbatch >= 0) {
      t.first_microbatch =
          t.first_microbatch < 0 ? s.first_microbatch : std::min(t.first_microbatch, s.first_microbatch);
      t.last_microbatch = std::max(t.last_microbatch, s.last_microbatch);
    }
  }
}
inline void settle(timeline_box& b) {
  std::size_t best = 0;
  for (std::size_t k = 1; k < b.shares.size(); ++k) {
    if (b.shares[k].seconds > b.shares[best].seconds) best = k;
  }
  b.kind = train::all_segment_kinds[best];
  b.mixed = b.shares[best].seconds < timeline_pure_share * b.seconds();
}
}  // namespace detail::timeline_boxes

/// The boxes of one stage's row (segments in time order, each starting where the previous ends) drawn at
/// x = origin + scale * t. Left to right, a box takes segments until it is at least `min_width` wide; a
/// remainder narrower than that joins the box before it. Then neighbouring boxes join when both are pure
/// with the same kind, or both are mixed and lie in the same phases of the row: between the first and the
/// last segment of the same kinds (so 1F1B's steady state, where forwards and backwards alternate, and its
/// cool-down after the last forward stay apart; a box across the border is a third). Every box is at least
/// `min_width` wide unless the whole row is narrower, so a row spanning w units gives at most max(1, w /
/// min_width) boxes.
inline std::vector<timeline_box> timeline_boxes(const std::vector<train::timeline_segment>& row,
                                                double origin, double scale, double min_width) {
  namespace d = detail::timeline_boxes;
  if (!(min_width > 0.0) || !(scale > 0.0)) {
    throw error("timeline_boxes: the scale and the minimum width must be positive (a bug in phaze)");
  }
  auto x = [&](seconds t) { return origin + scale * t.value(); };
  // The row's phases: between the first and the last segment of each kind.
  std::array<std::size_t, train::all_segment_kinds.size()> first_of{};
  std::array<std::size_t, train::all_segment_kinds.size()> last_of{};
  first_of.fill(row.size());
  for (std::size_t i = 0; i < row.size(); ++i) {
    const auto k = static_cast<std::size_t>(row[i].kind);
    first_of[k] = std::min(first_of[k], i);
    last_of[k] = i;
  }
  auto phase_of = [&](std::size_t i) {
    unsigned mask = 0;
    for (std::size_t k = 0; k < first_of.size(); ++k) {
      if (first_of[k] <= i && i <= last_of[k]) mask |= 1U << k;
    }
    return mask;
  };
  std::vector<timeline_box> boxes;
  for (std::size_t i = 0; i < row.size();) {
    timeline_box b;
    b.first = i;
    b.x0 = x(row[i].start);
    while (i < row.size()) {
      d::add(b, row[i]);
      b.phase |= phase_of(i);
      b.x1 = x(row[i].end);
      ++i;
      if (b.width() >= min_width) break;
    }
    b.last = i;
    if (b.width() < min_width && !boxes.empty()) {
      d::absorb(boxes.back(), b);  // the row's narrow remainder
      boxes.back().phase |= b.phase;
    } else {
      boxes.push_back(b);
    }
  }
  std::vector<timeline_box> joined;
  for (timeline_box& b : boxes) {
    d::settle(b);
    timeline_box* before = joined.empty() ? nullptr : &joined.back();
    const bool join = before != nullptr && before->mixed == b.mixed &&
                      (b.mixed ? before->phase == b.phase : before->kind == b.kind);
    if (join) {
      d::absorb(*before, b);
      d::settle(*before);
    } else {
      joined.push_back(b);
    }
  }
  return joined;
}

/// The bands a mixed box is drawn with: the kinds that take at least `min_share` of its time (the largest
/// always), in legend order, each with its share of the height (their time over the time of the kinds
/// drawn). A pure box is one band of its kind.
inline std::vector<timeline_band> timeline_bands(const timeline_box& b, double min_share) {
  if (!b.mixed) return {{b.kind, 1.0}};
  const double total = b.seconds();
  double drawn = 0.0;
  std::vector<timeline_band> bands;
  for (std::size_t k = 0; k < b.shares.size(); ++k) {
    const auto kind = train::all_segment_kinds[k];
    const double t = b.shares[k].seconds;
    if (kind == b.kind || (t > 0.0 && t >= min_share * total)) {
      bands.push_back({kind, t});
      drawn += t;
    }
  }
  for (timeline_band& band : bands) band.height_share /= drawn;
  return bands;
}

}  // namespace phaze::io
