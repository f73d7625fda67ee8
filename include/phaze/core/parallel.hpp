/// @file
/// How a computation of independent items runs them, for C++ callers with a thread pool: the group orders of
/// a rank search (place::rank_search_settings::parallel) take one. A computation that hands its items out
/// this way keeps each item's result at its index and decides in index order, so its result does not depend
/// on the runner.
#pragma once

#include <cstddef>
#include <functional>

namespace phaze {

/// Runs body(i) for every i below n, on whatever threads it has, and returns when all are done (an exception
/// of a body reaches the caller). Empty: one after another on the calling thread.
using index_runner = std::function<void(std::size_t, const std::function<void(std::size_t)>&)>;

/// body(i) for every i below n through `runner` (in order on this thread when it is empty).
inline void run_indices(const index_runner& runner, std::size_t n,
                        const std::function<void(std::size_t)>& body) {
  if (runner) {
    runner(n, body);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) body(i);
}

}  // namespace phaze
