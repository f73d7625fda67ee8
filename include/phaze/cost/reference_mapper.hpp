/// @file
/// The exhaustive GEMM mapper the fast one (cost/gemm.hpp) is tested against: every core count and split,
/// every legal GLB tile shape, and cycles and traffic counted by explicit loops over tiles and array passes.
/// Slow by design (use it on small shapes only); it shares no search logic with the fast mapper.
#pragma once

#include <algorithm>
#include <cstdint>

#include "phaze/cost/gemm.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/op.hpp"

namespace phaze::cost {

namespace detail {

/// One core's share of a GEMM divided along `split` among `cores` cores: core `index` gets one element
/// more than the others while the remainder lasts.
constexpr model::gemm_dims share_of(model::gemm_dims g, int cores, gemm_split split, int index) {
  auto part = [&](std::int64_t extent) { return extent / cores + (index < extent % cores ? 1 : 0); };
  if (split == gemm_split::batch) g.batch = part(g.batch);
  if (split == gemm_split::m) g.m = part(g.m);
  if (split == gemm_split::n) g.n = part(g.n);
  return g;
}

/// Compute cycles of one core, by walking every array pass: for each GEMM of the batch, each row tile, each
/// reduction chunk of min(W, kt), each column tile and each chunk of at most D columns in it, one pass of
/// rows + kc + nc - 1 cycles.
constexpr std::int64_t counted_cycles(model::gemm_dims s, std::int64_t mt, std::int64_t kt, std::int64_t nt,
                                      std::int64_t width, std::int64_t depth) {
  std::int64_t total = 0;
  const std::int64_t chunk = std::min(width, kt);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t m0 = 0; m0 < s.m; m0 += mt) {
      const std::int64_t rows = std::min(mt, s.m - m0);
      for (std::int64_t k0 = 0; k0 < s.k; k0 += chunk) {
        const std::int64_t kc = std::min(chunk, s.k - k0);
        for (std::int64_t n0 = 0; n0 < s.n; n0 += nt) {
          const std::int64_t cols = std::min(nt, s.n - n0);
          for (std::int64_t j0 = 0; j0 < cols; j0 += depth) {
            const std::int64_t nc = std::min(depth, cols - j0);
            total += rows + kc + nc - 1;
          }
        }
      }
    }
  }
  return total;
}

/// HBM bytes of one core, by walking the output-stationary loop nest: for each C tile, load every K tile
/// of A and B, then write the C tile.
constexpr std::int64_t counted_traffic(model::gemm_dims s, std::int64_t mt, std::int64_t kt, std::int64_t nt,
                                       std::int64_t elem) {
  std::int64_t total = 0;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t m0 = 0; m0 < s.m; m0 += mt) {
      const std::int64_t rows = std::min(mt, s.m - m0);
      for (std::int64_t n0 = 0; n0 < s.n; n0 += nt) {
        const std::int64_t cols = std::min(nt, s.n - n0);
        for (std::int64_t k0 = 0; k0 < s.k; k0 += kt) {
          const std::int64_t depth_k = std::min(kt, s.k - k0);
          total += elem * (rows * depth_k + depth_k * cols);
        }
        total += elem * rows * cols;
      }
    }
  }
  return total;
}

/// Number of legal tile sizes along a dimension (powers of two up to it, and the dimension itself) and
/// the i-th of them, smallest first.
constexpr int tile_size_count(std::int64_t full) {
  int count = 0;
  for (std::int64_t t = 1; t <= full; t *= 2) ++count;
  return is_pow2(full) ? count : count + 1;
}
constexpr std::int64_t tile_size(std::int64_t full, int index) {
  std::int64_t t = 1;
  for (int i = 0; i < index; ++i) t *= 2;
  return t > full ? full : t;
}

}  // namespace detail

/// Evaluates one mapping (core count, split, GLB tile) by explicit loops over every core's share: the
/// busiest core's cycles, every core's traffic. `fits` tells whether the tile fits in GLB / cores.
struct evaluated_mapping {
  gemm_mapping mapping;
  bool fits = false;
};

inline constexpr auto evaluate_mapping =
    [](model::gemm_dims g, const hw::device& d, int cores, gemm_split split, std::int64_t mt, std::int64_t kt,
       std::int64_t nt) constexpr -> evaluated_mapping {
  const auto p = detail::params_of(d);
  evaluated_mapping r;
  r.mapping.cores = cores;
  r.mapping.split = split;
  r.mapping.mt = mt;
  r.mapping.kt = kt;
  r.mapping.nt = nt;
  for (int i = 0; i < cores; ++i) {
    const model::gemm_dims s = detail::share_of(g, cores, split, i);
    if (s.batch == 0 || s.m == 0 || s.n == 0) continue;  // an idle core
    r.mapping.cycles = std::max(r.mapping.cycles, detail::counted_cycles(s, mt, kt, nt, p.width, p.depth));
    r.mapping.traffic += detail::counted_traffic(s, mt, kt, nt, p.elem);
  }
  r.fits = detail::tile_footprint(mt, kt, nt, p.elem) <= detail::glb_per_core(p.glb, cores);
  detail::finish(r.mapping, p);
  return r;
};

/// The exhaustive mapper: one-core and all-cores costs by trying every core count (powers of two up to
/// num_tc, and num_tc), every split (batch, M, N), and every legal tile shape (powers of two up to the
/// share's dimensions, and the dimensions themselves) that fits the GLB, keeping the fastest.
inline constexpr auto reference_systolic_gemm =
    [](model::gemm_dims g, const hw::device& d) constexpr -> gemm_cost {
  gemm_cost r;
  if (!detail::valid(g)) return r;
  auto best_of = [&](int cores, gemm_split split, gemm_mapping& best) {
    const model::gemm_dims s = detail::share_of(g, cores, split, 0);  // core 0 has the largest share
    if (s.batch == 0 || s.m == 0 || s.n == 0) return;
    for (int i = 0; i < detail::tile_size_count(s.m); ++i) {
      for (int j = 0; j < detail::tile_size_count(s.k); ++j) {
        for (int l = 0; l < detail::tile_size_count(s.n); ++l) {
          const auto e = evaluate_mapping(g, d, cores, split, detail::tile_size(s.m, i),
                                          detail::tile_size(s.k, j), detail::tile_size(s.n, l));
          if (e.fits && e.mapping.time < best.time) best = e.mapping;
        }
      }
    }
  };
  r.one_core = detail::unmappable();
  best_of(1, gemm_split::none, r.one_core);
  r.all_cores = r.one_core;
  const int n = d.systolic.num_tc;
  for (int c = 2; c <= n; c = (c * 2 > n && c != n) ? n : c * 2) {
    for (const gemm_split split : {gemm_split::batch, gemm_split::m, gemm_split::n})
      best_of(c, split, r.all_cores);
  }
  return r;
};

}  // namespace phaze::cost
