/// @file
/// Designs of a ranked list that differ only in HBM capacity and train with the same plan at the same
/// throughput (docs/search-report.md): the reports show each such group as one row, "HBM 32/64/80 GiB".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "phaze/hw/device.hpp"
#include "phaze/hw/space.hpp"
#include "phaze/search/result.hpp"

namespace phaze::io {

/// "8x128x128 2x128 128M 32G" for a design of the template, the device's name otherwise.
inline std::string design_text(const hw::device& d) {
  if (d.kind == hw::device_kind::systolic && d.systolic.num_tc > 0) {
    return hw::design_label(d.systolic, d.hbm).str();
  }
  return d.name.str();
}

/// Designs of a list shown as one: positions in the list, ascending; the first is the group's
/// representative (the best ranked).
struct design_group {
  std::vector<std::size_t> members;
};

namespace detail::design_groups {
inline bool same_number(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}
inline bool same_blocks(const train::step_estimate& a, const train::step_estimate& b) {
  if (a.stages.size() != b.stages.size()) return false;
  for (std::size_t i = 0; i < a.stages.size(); ++i) {
    if (a.stages[i].blocks != b.stages[i].blocks) return false;
  }
  return true;
}
}  // namespace detail::design_groups

/// Whether `a` and `b` are designs of a template that differ at most in HBM capacity (same arrays, cores,
/// buffer, clock, HBM bandwidth and die area) and whose best plans are the same (parallelism, knobs, blocks
/// per stage) with the same time per batch, throughput and energy per sample: their rows would differ only
/// in the HBM size.
inline bool differ_only_in_hbm(const search::design_result& a, const search::design_result& b) {
  namespace d = detail::design_groups;
  if (a.status != search::outcome::evaluated || b.status != search::outcome::evaluated) return false;
  if (a.device.kind != hw::device_kind::systolic || b.device.kind != hw::device_kind::systolic) return false;
  hw::device with_b_hbm = a.device;
  with_b_hbm.hbm = b.device.hbm;
  with_b_hbm.name = b.device.name;
  return with_b_hbm == b.device && a.die_area == b.die_area && a.parallel == b.parallel &&
         a.knobs == b.knobs && d::same_blocks(a.estimate, b.estimate) &&
         d::same_number(a.estimate.time_per_batch.value(), b.estimate.time_per_batch.value()) &&
         d::same_number(a.samples_per_s, b.samples_per_s) &&
         d::same_number(a.energy_per_sample.value(), b.energy_per_sample.value());
}

/// The list's designs in groups of those that differ only in HBM (differ_only_in_hbm with the group's first),
/// in the order of their first members: a list of n distinct designs gives n groups of one.
inline std::vector<design_group> group_by_hbm(const std::vector<search::design_result>& ranked) {
  std::vector<design_group> groups;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    auto same = std::find_if(groups.begin(), groups.end(), [&](const design_group& g) {
      return differ_only_in_hbm(ranked[g.members.front()], ranked[i]);
    });
    if (same != groups.end()) {
      same->members.push_back(i);
    } else {
      groups.push_back({{i}});
    }
  }
  return groups;
}

/// A group's design: "8x128x128 4x128 32M, HBM 32/64/80 GiB" (sizes ascending), or the design's own text
/// (design_text) for a group of one.
inline std::string group_design_text(const std::vector<search::design_result>& ranked,
                                     const design_group& g) {
  const hw::device& first = ranked[g.members.front()].device;
  if (g.members.size() == 1) return design_text(first);
  std::vector<double> gib;
  for (const std::size_t i : g.members)
    gib.push_back(ranked[i].device.hbm.value() / (1024.0 * 1024.0 * 1024.0));
  std::sort(gib.begin(), gib.end());
  gib.erase(std::unique(gib.begin(), gib.end()), gib.end());
  std::string sizes;
  for (const double v : gib) sizes += (sizes.empty() ? "" : "/") + fmt::format("{:g}", v);
  // The template's label without its last field, the HBM size.
  std::string label = hw::design_label(first.systolic, first.hbm).str();
  label.erase(label.rfind(' '));
  return label + ", HBM " + sizes + " GiB";
}

}  // namespace phaze::io
