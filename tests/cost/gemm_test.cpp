// Tests of phaze/cost/gemm.hpp: the closed-form cycle count against explicit loops, the fast mapper against
// the exhaustive reference, monotonicity in every hardware resource, and the datasheet efficiency model.
#include "phaze/cost/gemm.hpp"

#include <catch2/catch.hpp>

#include "../support/log_pick.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>

#include "phaze/cost/reference_mapper.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"

using namespace phaze;
using namespace phaze::literals;
using cost::gemm_split;
using model::gemm_dims;

namespace {

hw::device systolic(int num_tc, int width, int depth, bytes glb, bytes_per_second bandwidth,
                    hertz clock = 1_GHz) {
  hw::device d = hw::tpuv4_like;
  d.systolic.num_tc = num_tc;
  d.systolic.tc_width = width;
  d.systolic.tc_depth = depth;
  d.systolic.glb = glb;
  d.systolic.clock = clock;
  d.hbm_bandwidth = bandwidth;
  return d;
}

std::int64_t pick(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>{lo, hi}(rng);
}

using phaze::testing::log_pick;

gemm_dims random_dims(std::mt19937_64& rng, std::int64_t max_batch, std::int64_t max_dim) {
  return {pick(rng, 1, max_batch), log_pick(rng, 1, max_dim), log_pick(rng, 1, max_dim),
          log_pick(rng, 1, max_dim)};
}

}  // namespace

TEST_CASE("array passes: the closed form equals the explicit loop over passes", "[cost][gemm]") {
  // 4x4x4 on a 2x2 array in one tile: 2 reduction chunks x 2 column chunks, each pass 4 + 2 + 2 - 1 cycles.
  CHECK(cost::detail::core_cycles(1, 4, 4, 4, 4, 4, 4, 2, 2) == 4 * 7);
  CHECK(cost::detail::counted_cycles({1, 4, 4, 4}, 4, 4, 4, 2, 2) == 4 * 7);
  // Remainders everywhere: m 5 in tiles of 4 (4 + 1), k 5 in chunks of min(W 4, kt 2) = 2 (2 + 2 + 1),
  // n 7 in tiles of 4 (4 + 3) cut into chunks of 3 (3 + 1 and 3): passes (rows, kc, nc) summed by hand.
  std::int64_t by_hand = 0;
  for (std::int64_t rows : {4, 1})
    for (std::int64_t kc : {2, 2, 1})
      for (std::int64_t nc : {3, 1, 3}) by_hand += rows + kc + nc - 1;
  CHECK(cost::detail::core_cycles(1, 5, 5, 7, 4, 2, 4, 4, 3) == by_hand);
  CHECK(cost::detail::counted_cycles({1, 5, 5, 7}, 4, 2, 4, 4, 3) == by_hand);

  std::mt19937_64 rng{20240611};
  for (int trial = 0; trial < 3000; ++trial) {
    const gemm_dims s = random_dims(rng, 3, 40);
    const std::int64_t mt = pick(rng, 1, s.m), kt = pick(rng, 1, s.k), nt = pick(rng, 1, s.n);
    const std::int64_t w = pick(rng, 1, 12), dd = pick(rng, 1, 12), e = pick(rng, 1, 4);
    INFO("batch " << s.batch << " m " << s.m << " k " << s.k << " n " << s.n << " tile " << mt << "x" << kt
                  << "x" << nt << " array " << w << "x" << dd);
    REQUIRE(cost::detail::core_cycles(s.batch, s.m, s.k, s.n, mt, kt, nt, w, dd) ==
            cost::detail::counted_cycles(s, mt, kt, nt, w, dd));
    REQUIRE(cost::detail::core_traffic(s.batch, s.m, s.k, s.n, mt, nt, e) ==
            cost::detail::counted_traffic(s, mt, kt, nt, e));
  }
}

TEST_CASE("a pass never beats one MAC per array cell per cycle, and a larger array is never slower",
          "[cost][gemm]") {
  std::mt19937_64 rng{7};
  for (int trial = 0; trial < 2000; ++trial) {
    const gemm_dims s = random_dims(rng, 4, 300);
    const std::int64_t mt = log_pick(rng, 1, s.m), kt = log_pick(rng, 1, s.k), nt = log_pick(rng, 1, s.n);
    const std::int64_t w = log_pick(rng, 1, 256), dd = log_pick(rng, 1, 256);
    const auto cycles = cost::detail::core_cycles(s.batch, s.m, s.k, s.n, mt, kt, nt, w, dd);
    REQUIRE(cycles * w * dd >= s.batch * s.m * s.k * s.n);
    REQUIRE(cost::detail::core_cycles(s.batch, s.m, s.k, s.n, mt, kt, nt, w + 1, dd) <= cycles);
    REQUIRE(cost::detail::core_cycles(s.batch, s.m, s.k, s.n, mt, kt, nt, w, dd + 1) <= cycles);
  }
}

TEST_CASE("the fast mapper finds the exhaustive reference's optimum", "[cost][gemm][reference]") {
  struct config {
    int num_tc, width, depth;
    bytes glb;
    bytes_per_second bandwidth;
  };
  // Small arrays and buffers so that tiling, fit and core splits all matter on small shapes; bandwidths
  // from memory-bound (1 GB/s at 1 GHz: one byte per cycle) to compute-bound.
  const config configs[] = {
      {1, 2, 2, 64_B, 4_GBps},       {2, 4, 4, 256_B, 1_GBps},  {4, 4, 2, 1_KiB, 16_GBps},
      {3, 3, 5, 600_B, 8_GBps},      {8, 8, 8, 4_KiB, 2_GBps},  {6, 2, 8, 2_KiB, 1000_GBps},
      {4, 16, 16, 1_MiB, 1000_GBps}, {2, 8, 4, 128_B, 32_GBps}, {5, 4, 4, 10_KiB, 3_GBps},
  };
  std::mt19937_64 rng{42};
  int compared = 0;
  for (const config& c : configs) {
    const hw::device d = systolic(c.num_tc, c.width, c.depth, c.glb, c.bandwidth);
    for (int trial = 0; trial < 60; ++trial) {
      const gemm_dims g = random_dims(rng, 4, 24);
      INFO("config tc " << c.num_tc << " array " << c.width << "x" << c.depth << " glb " << c.glb.value()
                        << " B; gemm " << g.batch << " x " << g.m << "x" << g.k << "x" << g.n);
      const cost::gemm_cost fast = cost::systolic_gemm(g, d);
      const cost::gemm_cost ref = cost::reference_systolic_gemm(g, d);
      REQUIRE(fast.one_core.time == ref.one_core.time);
      REQUIRE(fast.all_cores.time == ref.all_cores.time);
      REQUIRE(cost::systolic_gemm_one_core(g, d) == fast.one_core);
      // The mapping the fast mapper reports is what the loops count for it, and it fits.
      for (const auto& m : {fast.one_core, fast.all_cores}) {
        const auto e = cost::evaluate_mapping(g, d, m.cores, m.split, m.mt, m.kt, m.nt);
        REQUIRE(e.fits);
        REQUIRE(e.mapping == m);
      }
      ++compared;
    }
  }
  CHECK(compared == 540);
}

TEST_CASE("a GLB too small for a 1x1x1 tile cannot run a GEMM", "[cost][gemm]") {
  // A 1x1x1 tile needs 2 * 2 * (1 + 1) + 4 = 12 bytes.
  const auto tiny = systolic(2, 4, 4, 11_B, 1_GBps);
  CHECK(cost::systolic_gemm({1, 3, 3, 3}, tiny).one_core.time.value() ==
        std::numeric_limits<double>::infinity());
  const auto just = systolic(2, 4, 4, 12_B, 1_GBps);
  CHECK(cost::systolic_gemm({1, 3, 3, 3}, just).one_core.time ==
        cost::reference_systolic_gemm({1, 3, 3, 3}, just).one_core.time);
}

TEST_CASE("more cores, larger arrays, more GLB or more bandwidth never make a GEMM slower", "[cost][gemm]") {
  std::mt19937_64 rng{1234};
  for (int trial = 0; trial < 600; ++trial) {
    const int num_tc = 1 << pick(rng, 0, 4);
    const int w = static_cast<int>(log_pick(rng, 2, 256)), dd = static_cast<int>(log_pick(rng, 2, 256));
    const bytes glb{static_cast<double>(log_pick(rng, 64, 64 << 20))};
    const bytes_per_second bw{static_cast<double>(log_pick(rng, 1, 4000)) * 1e9};
    const hw::device d = systolic(num_tc, w, dd, glb, bw);
    const gemm_dims g = random_dims(rng, 64, 8192);
    INFO("tc " << num_tc << " array " << w << "x" << dd << " glb " << glb.value() << " bw " << bw.value()
               << "; gemm " << g.batch << " x " << g.m << "x" << g.k << "x" << g.n);
    const auto base = cost::systolic_gemm(g, d);
    REQUIRE(base.all_cores.time <= base.one_core.time);

    auto never_slower = [&](const hw::device& better) {
      const auto r = cost::systolic_gemm(g, better);
      REQUIRE(r.one_core.time <= base.one_core.time);
      REQUIRE(r.all_cores.time <= base.all_cores.time);
    };
    hw::device more = d;
    more.systolic.num_tc = num_tc * 2;
    never_slower(more);
    more.systolic.num_tc = num_tc + static_cast<int>(pick(rng, 1, 7));  // from a power of two to any count
    never_slower(more);
    more = d;
    more.systolic.tc_width = w * 2;
    never_slower(more);
    more.systolic.tc_width = w + 1;
    never_slower(more);
    more = d;
    more.systolic.tc_depth = dd * 2;
    never_slower(more);
    more.systolic.tc_depth = dd + 1;
    never_slower(more);
    more = d;
    more.systolic.glb = glb * 2.0;
    never_slower(more);
    more.systolic.glb = glb + 1_KiB;
    never_slower(more);
    more = d;
    more.hbm_bandwidth = bw * 1.5;
    never_slower(more);
  }
}

TEST_CASE("a GEMM never beats peak or reads its operands faster than HBM allows", "[cost][gemm]") {
  std::mt19937_64 rng{99};
  for (int trial = 0; trial < 1000; ++trial) {
    const hw::device d = systolic(static_cast<int>(pick(rng, 1, 16)), static_cast<int>(log_pick(rng, 1, 256)),
                                  static_cast<int>(log_pick(rng, 1, 256)),
                                  bytes{static_cast<double>(log_pick(rng, 16, 256 << 20))},
                                  bytes_per_second{static_cast<double>(log_pick(rng, 1, 4000)) * 1e9});
    const gemm_dims g = random_dims(rng, 64, 16384);
    const auto r = cost::systolic_gemm(g, d);
    const double work = 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.m) *
                        static_cast<double>(g.k) * static_cast<double>(g.n);
    const double moved =
        2.0 * static_cast<double>(g.batch) * static_cast<double>(g.m * g.k + g.k * g.n + g.m * g.n);
    hw::device one = d;
    one.systolic.num_tc = 1;
    for (const auto& [m, peak] : {std::pair{r.one_core, hw::peak_matrix_flops(one)},
                                  std::pair{r.all_cores, hw::peak_matrix_flops(d)}}) {
      REQUIRE(m.time.value() >= work / peak.value() * (1 - 1e-12));
      REQUIRE(m.time.value() >= moved / d.hbm_bandwidth.value() * (1 - 1e-12));
      REQUIRE(m.cores <= d.systolic.num_tc);
    }
  }
}

TEST_CASE("the TPUv4-like reference: 275 TFLOP/s peak and large GPT-3 GEMMs above half of it",
          "[cost][gemm]") {
  CHECK(hw::peak_matrix_flops(hw::tpuv4_like).value() == Approx(275e12).epsilon(0.01));
  const auto gpt3 = zoo::find("gpt3-175b")->config;
  const std::int64_t tokens = 2048, h = gpt3.hidden;
  for (const gemm_dims g : {gemm_dims{1, tokens, h, 3 * h}, gemm_dims{1, tokens, h, 4 * h},
                            gemm_dims{1, tokens, 4 * h, h}, gemm_dims{1, 4 * h, tokens, h}}) {
    const auto r = cost::systolic_gemm(g, hw::tpuv4_like);
    const double work = 2.0 * static_cast<double>(g.m * g.k * g.n);
    const double achieved = work / r.all_cores.time.value() / hw::peak_matrix_flops(hw::tpuv4_like).value();
    INFO("gemm " << g.m << "x" << g.k << "x" << g.n << " reaches " << achieved << " of peak");
    CHECK(achieved > 0.5);
    CHECK(achieved <= 1.0);
    CHECK(r.all_cores.cores == 8);
    // Eight cores are at least six times faster than one (one core has the whole GLB to itself, so it can
    // tile better than each of eight).
    CHECK(r.one_core.time.value() >= 6.0 * r.all_cores.time.value());
  }
}

TEST_CASE("backward GEMMs go through the same mapper with their transposed shapes", "[cost][gemm]") {
  const auto l = model::block_layer(zoo::find("gpt3-175b")->config, {1, 0, 8, false, 2});
  const auto bwd = model::backward(l);
  int checked = 0;
  for (const auto& o : bwd) {
    if (o.kind != model::op_kind::matmul) continue;
    // Find the forward matmul this gradient belongs to by name prefix.
    for (const auto& f : l.ops) {
      if (f.kind != model::op_kind::matmul || !o.name.view().starts_with(f.name.view())) continue;
      const gemm_dims expect = o.phase == model::op_phase::backward_data
                                   ? gemm_dims{f.gemm.batch, f.gemm.m, f.gemm.n, f.gemm.k}
                                   : gemm_dims{f.gemm.batch, f.gemm.k, f.gemm.m, f.gemm.n};
      CHECK(o.gemm == expect);
      CHECK(cost::systolic_gemm(o.gemm, hw::tpuv4_like) == cost::systolic_gemm(expect, hw::tpuv4_like));
      ++checked;
    }
  }
  CHECK(checked == 8);  // qkv, attn_out, fc1, fc2: dX and dW each
}

TEST_CASE("datasheet GEMMs: wave and tile quantization, reduction overhead, HBM floor", "[cost][gemm]") {
  const hw::device a100 = *hw::find_preset("a100-80gb");
  const auto& e = a100.sheet.gemm;
  const double f = e.max_fraction;
  const auto k_factor = [&](double k) { return k / (k + e.k_half); };
  // One 128x128 tile occupies one of 108 SMs for its wave.
  CHECK(cost::gemm_fraction({1, 128, 1024, 128}, e) == Approx(f * (1.0 / 108.0) * k_factor(1024)));
  // 108 tiles fill a wave exactly; 109 need two waves.
  CHECK(cost::gemm_fraction({1, 128 * 108, 4096, 128}, e) == Approx(f * k_factor(4096)));
  CHECK(cost::gemm_fraction({1, 128 * 109, 4096, 128}, e) == Approx(f * (109.0 / 216.0) * k_factor(4096)));
  // A padded tile: 130 rows occupy two tile rows.
  CHECK(cost::gemm_fraction({1, 130, 4096, 128}, e) ==
        Approx(f * (130.0 / (108.0 * 128.0)) * k_factor(4096)));
  // Batches add tiles.
  CHECK(cost::gemm_fraction({108, 128, 4096, 128}, e) == Approx(f * k_factor(4096)));

  // A large GEMM runs at flops / (312 TFLOP/s * max_fraction * k / (k + k_half)): one full wave of tiles.
  const gemm_dims big{1, 8192, 8192, 8192};
  const double work = 2.0 * 8192.0 * 8192.0 * 8192.0;
  CHECK(cost::datasheet_gemm(big, a100).value() ==
        Approx(work / (312e12 * f * k_factor(8192))).epsilon(0.02));
  CHECK(cost::datasheet_gemm(big, a100).value() >= work / (312e12 * f));
  // A thin GEMM never beats moving its operands and result over 2039 GB/s * 0.9; without the per-tile
  // reduction overhead (k_half 0) it is bound by exactly that.
  const gemm_dims thin{1, 65536, 8, 8192};
  const double moved = 2.0 * (65536.0 * 8 + 8.0 * 8192 + 65536.0 * 8192);
  CHECK(cost::datasheet_gemm(thin, a100).value() >= moved / (2039e9 * 0.9) * (1 - 1e-12));
  hw::device no_overhead = a100;
  no_overhead.sheet.gemm.k_half = 0.0;
  CHECK(cost::datasheet_gemm(thin, no_overhead).value() == Approx(moved / (2039e9 * 0.9)));
}
