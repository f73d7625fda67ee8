/// @file
/// How far a long computation has come, for the progress lines of the program and of C++ callers: the plan
/// search (place::plan_choices::progress), the rank annealing (place::rank_search_settings::progress,
/// place::anneal_ranks::progress) and the cluster-space search (search::cluster_search::progress) report
/// through one hook type.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace phaze {

/// One report: `done` of `total` units of the work named `what` ("plans", "refining plans", "rank orders",
/// "compositions"), `seconds` after that work started.
struct work_progress {
  std::string_view what;
  std::uint64_t done = 0;
  std::uint64_t total = 0;
  double seconds = 0.0;
  /// The seconds left at the rate so far; negative when nothing is done yet.
  [[nodiscard]] double seconds_left() const {
    return done == 0 ? -1.0 : seconds / static_cast<double>(done) * static_cast<double>(total - done);
  }
};

/// A callback a long computation calls as it goes (empty: nothing is reported). It runs on the computing
/// thread, so it should be quick (print, or note the value).
using progress_hook = std::function<void(const work_progress&)>;

}  // namespace phaze
