// Shared by the rank-order tests and the rank-assignment benchmark: portable random draws (the same
// clusters on every platform) and the costs of a rank order they minimise, built from a cluster's routes
// alone (route_cost) or from the routes plus the slowest stage's work (speed_cost).
#pragma once

#include <phaze/cluster/cluster.hpp>
#include <phaze/core/quantity.hpp>
#include <phaze/hw/device.hpp>
#include <phaze/train/knobs.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace phaze::test {

/// Draws from a seeded mt19937_64 without std::uniform_*_distribution (whose outputs differ between
/// standard libraries).
struct draws {
  std::mt19937_64 rng;
  explicit draws(std::uint64_t seed) : rng(seed) {}
  int below(int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); }
  double between(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
  }
  /// A link of 5 to 100 GB/s and 1 to 20 us.
  cluster::link link() {
    return {bytes_per_second{between(5.0, 100.0) * 1e9}, seconds{between(1.0, 20.0) * 1e-6}};
  }
  std::vector<int> permutation(int n) {
    std::vector<int> p(static_cast<std::size_t>(n));
    std::iota(p.begin(), p.end(), 0);
    for (int i = n - 1; i > 0; --i)
      std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(below(i + 1))]);
    return p;
  }
};

inline double message_time(const cluster::route& r, double bytes) {
  return r.hop.latency.value() + bytes / r.hop.bandwidth.value();
}

/// One message over the tensor-parallel rings (read over every one of `devices`, as train::step_model does),
/// the data-parallel rings and the pipeline pairs, their routes asked of `routes` (a cluster, or a
/// cluster::route_tracker of one).
template <class Routes>
double route_time(const train::parallelism& shape, int devices, Routes& routes) {
  const int used = static_cast<int>(shape.devices());
  double t = 0.0;
  if (shape.tp > 1) t += message_time(routes.ring({shape.tp, 1}, devices - devices % shape.tp), 64e6);
  if (shape.dp > 1) t += message_time(routes.ring({shape.dp, shape.tp}, used), 256e6);
  if (shape.pp > 1) t += message_time(routes.pairs(shape.tp * shape.dp, used), 16e6);
  return t;
}

/// A cost from routes alone (route_time).
struct route_cost {
  train::parallelism shape;
  double operator()(const cluster::cluster& c) const { return route_time(shape, c.devices(), c); }
};

/// The slowest stage: each stage's work at the peak of its slowest device.
inline double slowest_stage_time(const train::parallelism& shape, const cluster::cluster& c) {
  const int stage = shape.tp * shape.dp;
  double slowest_stage = 0.0;
  for (int s = 0; s < shape.pp; ++s) {
    double peak = std::numeric_limits<double>::infinity();
    for (int r = s * stage; r < (s + 1) * stage; ++r)
      peak = std::min(peak, hw::peak_matrix_flops(c.device_at(r)).value());
    slowest_stage = std::max(slowest_stage, 2e12 / peak);
  }
  return slowest_stage;
}

/// The routes plus the slowest stage.
struct speed_cost {
  train::parallelism shape;
  double operator()(const cluster::cluster& c) const {
    return route_cost{shape}(c) + slowest_stage_time(shape, c);
  }
};

}  // namespace phaze::test
