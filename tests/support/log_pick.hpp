// Test helper: integers drawn log-uniformly, so that small, power-of-two and odd sizes all show up.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

namespace phaze::testing {

/// An integer in [lo, hi] whose logarithm is uniform.
inline std::int64_t log_pick(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  const double x = std::uniform_real_distribution<double>{std::log(static_cast<double>(lo)),
                                                          std::log(static_cast<double>(hi) + 1.0)}(rng);
  return std::clamp(static_cast<std::int64_t>(std::exp(x)), lo, hi);
}

}  // namespace phaze::testing
