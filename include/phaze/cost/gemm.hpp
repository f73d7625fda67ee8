/// @file
/// GEMM latency: an analytic mapper for PHAZE's systolic tensor cores (core split, GLB tiling, array passes
/// with fill and drain) and a shape-dependent efficiency model for datasheet devices.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <string_view>

#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/op.hpp"

namespace phaze::cost {

/// The dimension a GEMM is divided along when it runs on several tensor cores.
enum class gemm_split : std::uint8_t {
  none,   ///< one core
  batch,  ///< independent GEMMs of a batch go to different cores
  m,      ///< rows of A and C (tokens)
  n,      ///< columns of B and C (output features)
};

constexpr std::string_view to_string(gemm_split s) {
  switch (s) {
    case gemm_split::none:
      return "none";
    case gemm_split::batch:
      return "batch";
    case gemm_split::m:
      return "m";
    case gemm_split::n:
      return "n";
  }
  return "?";
}

/// Bytes per element of the output tile while the reduction runs: fp32 accumulation of bf16/fp16 products,
/// as TPU matrix units do (Jouppi et al., ISCA 2017, section 2: 32-bit accumulators; the TPUv4 MXU keeps
/// fp32 accumulation, Jouppi et al., ISCA 2023) and as tensor cores do for training (NVIDIA A100
/// whitepaper, "FP16/BF16 with FP32 accumulate"). The finished C tile is written to HBM in the compute
/// format.
inline constexpr std::int64_t accumulator_bytes = 4;

/// How the mapper runs one GEMM on a systolic device, and what it costs.
struct gemm_mapping {
  int cores = 1;                        ///< tensor cores the GEMM is divided among
  gemm_split split = gemm_split::none;  ///< the dimension divided among them
  std::int64_t mt = 0;                  ///< GLB tile: rows of A and C
  std::int64_t kt = 0;                  ///< GLB tile: reduction
  std::int64_t nt = 0;                  ///< GLB tile: columns of B and C
  std::int64_t cycles = 0;              ///< compute cycles of the busiest core
  std::int64_t traffic = 0;             ///< HBM bytes moved by all cores together
  seconds compute{0.0};                 ///< cycles / clock
  seconds memory{0.0};                  ///< traffic / HBM bandwidth
  seconds time{0.0};  ///< max(compute, memory): transfers overlap compute (double buffering)
  friend constexpr bool operator==(const gemm_mapping&, const gemm_mapping&) = default;
};

/// PHAZE's two costs of an op: alone on one tensor core, and split across all of them.
struct gemm_cost {
  gemm_mapping one_core;
  gemm_mapping all_cores;
  friend constexpr bool operator==(const gemm_cost&, const gemm_cost&) = default;
};

namespace detail {

/// The systolic device as the mapper sees it: integers for everything it counts.
struct systolic_params {
  std::int64_t width = 1;  ///< W: array rows, the reduction chunk
  std::int64_t depth = 1;  ///< D: array columns, the output-feature chunk
  std::int64_t elem = 2;   ///< bytes per element in the compute format
  double glb = 0.0;        ///< GLB bytes, all cores together
  double clock = 1.0;
  double bandwidth = 1.0;
  int num_tc = 1;
};

constexpr systolic_params params_of(const hw::device& d) {
  const auto& s = d.systolic;
  return {s.tc_width,    s.tc_depth,      hw::element_bytes(d.compute),
          s.glb.value(), s.clock.value(), d.hbm_bandwidth.value(),
          s.num_tc};
}

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

constexpr bool is_pow2(std::int64_t v) {
  return v > 0 && std::has_single_bit(static_cast<std::uint64_t>(v));
}
constexpr std::int64_t floor_pow2(std::int64_t v) {
  return static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(v)));
}
constexpr std::int64_t ceil_pow2(std::int64_t v) {
  return static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(v)));
}

/// Legal GLB tile sizes along a dimension of length `full`: the powers of two below it and `full` itself.
/// The next smaller legal size after `t` (0 after 1).
constexpr std::int64_t next_smaller_tile(std::int64_t t, std::int64_t full) {
  if (t == full && !is_pow2(full)) return floor_pow2(full);
  return t / 2;
}
/// The largest legal tile size not above `limit` (limit >= 1).
constexpr std::int64_t largest_tile_within(std::int64_t limit, std::int64_t full) {
  return limit >= full ? full : floor_pow2(limit);
}

/// GLB bytes per core when `cores` share it. Tiles are counted in whole bytes, so flooring loses nothing.
constexpr std::int64_t glb_per_core(double glb, int cores) {
  return static_cast<std::int64_t>(glb / static_cast<double>(cores));
}

/// GLB bytes a tile needs: A (mt x kt) and B (kt x nt) double-buffered so the next tiles load while the
/// array works, and the C tile (mt x nt) in fp32 while K is reduced.
constexpr std::int64_t tile_footprint(std::int64_t mt, std::int64_t kt, std::int64_t nt, std::int64_t elem) {
  return 2 * elem * (mt * kt + kt * nt) + accumulator_bytes * mt * nt;
}

/// Array passes along a dimension of length `n` cut into GLB tiles of `tile`, each tile cut into chunks of
/// at most `chunk` (the array side): full tiles contribute ceil(tile / chunk) chunks, the remainder tile
/// ceil(remainder / chunk).
constexpr std::int64_t chunk_count(std::int64_t n, std::int64_t tile, std::int64_t chunk) {
  return (n / tile) * ceil_div(tile, chunk) + ceil_div(n % tile, chunk);
}

/// Compute cycles of one core running `batch` GEMMs of m x k x n with GLB tile (mt, kt, nt), in closed form.
/// The array holds a kc x nc block of B (weight-stationary: kc <= W rows of the reduction, nc <= D output
/// columns) and streams the mt rows of the A tile through it: mt + kc + nc - 1 cycles (mt cycles of
/// streaming plus the skew of filling and draining the occupied kc x nc part of the array; Kung, "Why
/// systolic architectures?", IEEE Computer 1982; Samajdar et al., SCALE-Sim, 2018). The reduction is consumed
/// in chunks of min(W, kt) consecutive elements of K: a chunk touches at most two consecutive K tiles, both
/// resident under double buffering. Summed over TM = ceil(m / mt) row tiles (sizes adding up to m),
/// CK = ceil(k / min(W, kt)) reduction chunks (adding up to k) and CN output-column chunks (adding up to n):
///   cycles = sum (mt_i + kc_j + nc_l - 1) = CK CN m + TM CN k + TM CK n - TM CK CN.
constexpr std::int64_t core_cycles(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                                   std::int64_t mt, std::int64_t kt, std::int64_t nt, std::int64_t width,
                                   std::int64_t depth) {
  const std::int64_t tm = ceil_div(m, mt);
  const std::int64_t ck = ceil_div(k, std::min(width, kt));
  const std::int64_t cn = chunk_count(n, nt, depth);
  return batch * (ck * cn * m + tm * cn * k + tm * ck * n - tm * ck * cn);
}

/// HBM bytes of one core's share in the output-stationary order (for each C tile, stream the K tiles of A
/// and B; write C once): A is read once per column tile, B once per row tile, C written once.
constexpr std::int64_t core_traffic(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                                    std::int64_t mt, std::int64_t nt, std::int64_t elem) {
  return elem * batch * (m * k * ceil_div(n, nt) + k * n * ceil_div(m, mt) + m * n);
}

constexpr void finish(gemm_mapping& r, const systolic_params& p) {
  r.compute = seconds{static_cast<double>(r.cycles) / p.clock};
  r.memory = seconds{static_cast<double>(r.traffic) / p.bandwidth};
  r.time = std::max(r.compute, r.memory);
}

constexpr double time_of(std::int64_t cycles, std::int64_t traffic, const systolic_params& p) {
  return std::max(static_cast<double>(cycles) / p.clock, static_cast<double>(traffic) / p.bandwidth);
}

/// A GEMM divided among `cores` cores along one dimension, as evenly as possible: `big_cores` cores get the
/// larger share `big`, `small_cores` the share `small` (one row/column/batch element fewer).
struct share_plan {
  model::gemm_dims big{};
  model::gemm_dims small{};
  std::int64_t big_cores = 1;
  std::int64_t small_cores = 0;
};

constexpr share_plan plan_of(model::gemm_dims g, int cores, gemm_split split) {
  std::int64_t model::gemm_dims::*dim = &model::gemm_dims::batch;
  if (split == gemm_split::m) dim = &model::gemm_dims::m;
  if (split == gemm_split::n) dim = &model::gemm_dims::n;
  if (split == gemm_split::none) return {g, g, 1, 0};
  const std::int64_t c = cores;
  const std::int64_t q = g.*dim / c;
  const std::int64_t r = g.*dim % c;
  share_plan p{g, g, r == 0 ? c : r, 0};
  p.big.*dim = r == 0 ? q : q + 1;
  if (r != 0 && q > 0) {
    p.small.*dim = q;
    p.small_cores = c - r;
  }
  return p;
}

/// Searches the GLB tilings of one share plan and improves `best` when one beats it.
/// Soundness of the pruning (every step keeps an optimal tiling reachable):
///  - cycles and traffic never grow when mt, kt or nt grows along its legal sizes (fewer row tiles, fewer
///    chunks: a tile twice as large is the union of two, and ceil((a + b) / D) <= ceil(a / D) + ceil(b / D)),
///    and the footprint grows with each; so for a given (mt, kt) only the largest fitting nt matters, and
///    kt beyond `kcap` (the smallest legal size >= min(W, K)) changes nothing but the footprint;
///  - a lower bound for a row tile mt (and every smaller one) is the time with the largest kt and nt,
///    ignoring the fit; when it reaches the incumbent, smaller mt cannot win. The same holds for kt.
/// No allocation; O(log M * log min(W, K)) evaluations in the worst case, a handful in practice.
constexpr void search_tiles(const share_plan& plan, int cores, gemm_split split, const systolic_params& p,
                            gemm_mapping& best) {
  const model::gemm_dims& g = plan.big;
  const std::int64_t glb = glb_per_core(p.glb, cores);
  const std::int64_t e = p.elem;
  const std::int64_t kcap = std::min(ceil_pow2(std::min(p.width, g.k)), g.k);
  auto traffic_of = [&](std::int64_t mt, std::int64_t nt) {
    std::int64_t t = plan.big_cores * core_traffic(g.batch, g.m, g.k, g.n, mt, nt, e);
    if (plan.small_cores > 0) {
      const auto& s = plan.small;
      t += plan.small_cores * core_traffic(s.batch, s.m, s.k, s.n, mt, nt, e);
    }
    return t;
  };
  const double incumbent_at_start = best.time.value();
  double incumbent = incumbent_at_start;
  for (std::int64_t mt = g.m; mt > 0; mt = next_smaller_tile(mt, g.m)) {
    const std::int64_t least_traffic = traffic_of(mt, g.n);
    const std::int64_t least_cycles = core_cycles(g.batch, g.m, g.k, g.n, mt, kcap, g.n, p.width, p.depth);
    if (time_of(least_cycles, least_traffic, p) >= incumbent) break;
    for (std::int64_t kt = kcap; kt > 0; kt = next_smaller_tile(kt, g.k)) {
      const std::int64_t fixed = 2 * e * mt * kt;
      const std::int64_t per_column = 2 * e * kt + accumulator_bytes * mt;
      if (glb - fixed < per_column) continue;  // not even one column fits; a smaller kt may
      const std::int64_t nt = largest_tile_within((glb - fixed) / per_column, g.n);
      const std::int64_t cycles = core_cycles(g.batch, g.m, g.k, g.n, mt, kt, nt, p.width, p.depth);
      const std::int64_t traffic = traffic_of(mt, nt);
      const double t = time_of(cycles, traffic, p);
      if (t < incumbent) {
        incumbent = t;
        best.cores = cores;
        best.split = split;
        best.mt = mt;
        best.kt = kt;
        best.nt = nt;
        best.cycles = cycles;
        best.traffic = traffic;
      }
      if (nt == g.n) break;  // smaller kt only adds reduction chunks
      const std::int64_t next_kt = next_smaller_tile(kt, g.k);
      if (next_kt > 0 && time_of(core_cycles(g.batch, g.m, g.k, g.n, mt, next_kt, g.n, p.width, p.depth),
                                 least_traffic, p) >= incumbent) {
        break;
      }
    }
  }
  if (incumbent < incumbent_at_start) finish(best, p);
}

constexpr bool valid(model::gemm_dims g) {
  return g.batch > 0 && g.m > 0 && g.k > 0 && g.n > 0;
}

constexpr gemm_mapping unmappable() {
  gemm_mapping r;
  r.time = r.compute = r.memory = seconds{std::numeric_limits<double>::infinity()};
  return r;
}

}  // namespace detail

/// The best mapping of a GEMM on one tensor core of a systolic device, with the whole GLB and HBM bandwidth
/// to itself (what the op costs when other cores run other ops is the scheduler's concern). Its time is
/// infinite only when the GLB cannot hold even a 1 x 1 x 1 tile.
inline constexpr auto systolic_gemm_one_core =
    [](model::gemm_dims g, const hw::device& d) constexpr -> gemm_mapping {
  if (!detail::valid(g)) return {};
  const auto p = detail::params_of(d);
  gemm_mapping best = detail::unmappable();
  detail::search_tiles(detail::plan_of(g, 1, gemm_split::none), 1, gemm_split::none, p, best);
  return best;
};

/// Both costs of a GEMM on a systolic device. The all-cores cost divides the GEMM among c cores along the
/// batch, M or N, for every c that is a power of two up to num_tc and num_tc itself, and keeps the fastest
/// (c = 1 included, so it is never slower than one core, and more cores never make it slower). Each core
/// gets GLB / c; all cores share the HBM bandwidth, so the memory time is the total traffic / bandwidth.
/// The busiest core's cycles set the compute time. Splits that leave cores idle (a dimension smaller than
/// c) are skipped: the smallest core count that covers the dimension does the same work with more GLB.
inline constexpr auto systolic_gemm = [](model::gemm_dims g, const hw::device& d) constexpr -> gemm_cost {
  gemm_cost r;
  if (!detail::valid(g)) return r;
  const auto p = detail::params_of(d);
  r.one_core = systolic_gemm_one_core(g, d);
  r.all_cores = r.one_core;
  const int n = std::max(p.num_tc, 1);
  // Core counts, most first: an early fast incumbent prunes the rest.
  for (int c = n; c > 1;
       c = (c == n && !detail::is_pow2(c)) ? static_cast<int>(detail::floor_pow2(c)) : c / 2) {
    for (const gemm_split split : {gemm_split::m, gemm_split::n, gemm_split::batch}) {
      const std::int64_t extent = split == gemm_split::m ? g.m : split == gemm_split::n ? g.n : g.batch;
      // The smallest candidate count covering the extent dominates every larger count.
      const std::int64_t covering = std::min<std::int64_t>(detail::ceil_pow2(extent), n);
      if (c > covering) continue;
      detail::search_tiles(detail::plan_of(g, c, split), c, split, p, r.all_cores);
    }
  }
  return r;
};

// ---------------------------------------------------------------------------------------------------------
// Datasheet devices.

/// The share of peak a datasheet device reaches on a GEMM (hw::gemm_efficiency):
/// max_fraction * wave efficiency * k / (k + k_half). The wave efficiency is the useful share of the tile
/// work issued: batch * ceil(m / tile_m) * ceil(n / tile_n) output tiles run in ceil(tiles / units) waves
/// over `compute_units`, each wave slot a full tile_m x tile_n tile, so it counts both tile quantization
/// (padded tiles) and wave quantization (an idle tail wave) (NVIDIA, "Matrix Multiplication Background
/// User's Guide"). k / (k + k_half) charges each tile a fixed prologue/epilogue that a short reduction
/// cannot hide.
inline constexpr auto gemm_fraction =
    [](model::gemm_dims g, const hw::gemm_efficiency& e) constexpr -> double {
  if (!detail::valid(g)) return 0.0;
  const std::int64_t tile_m = std::max(e.tile_m, 1);
  const std::int64_t tile_n = std::max(e.tile_n, 1);
  const std::int64_t units = std::max(e.compute_units, 1);
  const std::int64_t tiles = g.batch * detail::ceil_div(g.m, tile_m) * detail::ceil_div(g.n, tile_n);
  const std::int64_t waves = detail::ceil_div(tiles, units);
  const double useful = static_cast<double>(g.batch) * static_cast<double>(g.m) * static_cast<double>(g.n);
  const double issued = static_cast<double>(waves) * static_cast<double>(units) *
                        static_cast<double>(tile_m) * static_cast<double>(tile_n);
  const double k = static_cast<double>(g.k);
  return e.max_fraction * (useful / issued) * (k / (k + e.k_half));
};

/// GEMM time on a datasheet device in format `p`: FLOPs / (matrix peak in `p` * gemm_fraction) (times the
/// device's calibrated GEMM factor, never below FLOPs / peak), never less
/// than the operands read once and the result written once over the achievable HBM bandwidth
/// (hbm_bandwidth * memory_efficiency). FP8 GEMMs take hw::fp8_gemm_efficiency, 1-byte operands and a
/// 2-byte (bf16) result.
inline constexpr auto datasheet_gemm_in =
    [](model::gemm_dims g, const hw::device& d, hw::precision p) constexpr -> seconds {
  if (!detail::valid(g)) return seconds{0.0};
  const double b = static_cast<double>(g.batch);
  const double m = static_cast<double>(g.m);
  const double k = static_cast<double>(g.k);
  const double n = static_cast<double>(g.n);
  const flops work{2.0 * b * m * k * n};
  const bool fp8 = p == hw::precision::fp8;
  const hw::gemm_efficiency e = fp8 ? hw::fp8_gemm_efficiency(d.sheet.gemm) : d.sheet.gemm;
  const flops_per_second peak = hw::matrix_peak(d.sheet, p);
  const seconds compute =
      std::max(work / (peak * gemm_fraction(g, e)) * d.sheet.calibrated.gemm, work / peak);
  const double operand_bytes = fp8 ? 1.0 : static_cast<double>(hw::element_bytes(p));
  const double result_bytes = fp8 ? 2.0 : static_cast<double>(hw::element_bytes(p));
  const bytes moved{b * (operand_bytes * (m * k + k * n) + result_bytes * m * n)};
  const seconds memory = moved / (d.hbm_bandwidth * d.sheet.memory_efficiency);
  return std::max(compute, memory);
};

/// GEMM time on a datasheet device in its compute format (datasheet_gemm_in). A starting point that
/// calibration against measured runs refines.
inline constexpr auto datasheet_gemm = [](model::gemm_dims g, const hw::device& d) constexpr -> seconds {
  return datasheet_gemm_in(g, d, d.compute);
};

}  // namespace phaze::cost
