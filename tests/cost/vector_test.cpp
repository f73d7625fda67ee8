// Tests of phaze/cost/vector.hpp: cycles per element never claim more than one FLOP per lane per cycle,
// hand-computed times, the HBM floor, and more vector cores or lanes never making an op slower.
#include "phaze/cost/vector.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <iterator>
#include <random>

#include "../support/ops.hpp"
#include "phaze/hw/presets.hpp"

using namespace phaze;
using namespace phaze::literals;
using model::op_kind;
using model::op_phase;

namespace {

constexpr op_kind vector_kinds[] = {op_kind::softmax,   op_kind::layernorm,     op_kind::rmsnorm,
                                    op_kind::gelu,      op_kind::relu,          op_kind::silu,
                                    op_kind::swiglu,    op_kind::dropout,       op_kind::residual_add,
                                    op_kind::embedding, op_kind::cross_entropy, op_kind::rotary};

using phaze::testing::vector_op;

}  // namespace

TEST_CASE("every vector op kind has its own cost, at least its FLOPs per element", "[cost][vector]") {
  for (const op_kind k : vector_kinds) {
    for (const op_phase p : {op_phase::forward, op_phase::backward_data}) {
      INFO(model::to_string(k) << " " << model::to_string(p));
      const double floor = model::detail::vector_flops_per_element(k) * (p == op_phase::forward ? 1 : 2);
      CHECK(cost::cycles_per_element(k, p) >= floor);
      CHECK(cost::cycles_per_element(k, p) >= 1);
    }
  }
  // Transcendental-heavy ops cost more than plain arithmetic.
  CHECK(cost::cycles_per_element(op_kind::gelu, op_phase::forward) >
        cost::cycles_per_element(op_kind::relu, op_phase::forward));
  CHECK(cost::cycles_per_element(op_kind::softmax, op_phase::forward) == 6 + cost::transcendental_cycles);
  CHECK(cost::cycles_per_element(op_kind::gelu, op_phase::forward) == 7 + cost::transcendental_cycles);
  CHECK(cost::cycles_per_element(op_kind::layernorm, op_phase::backward_data) ==
        16);  // raised to 2 x 8 FLOPs
}

TEST_CASE("vector-op times on the TPUv4-like design, by hand", "[cost][vector]") {
  const hw::device d = hw::tpuv4_like;  // 2 vector cores x 128 lanes at 1.05 GHz, 1.2 TB/s
  // GELU over 2048 x 49152 elements: compute-bound. One core: ceil(E / 128) elements per lane x 11 cycles.
  const std::int64_t e = 2048 * 49152;
  const auto gelu = vector_op(op_kind::gelu, op_phase::forward, e, e);
  CHECK(cost::systolic_vector_time(gelu, d, 1).value() == Approx(static_cast<double>(e / 128) * 11 / 1.05e9));
  CHECK(cost::systolic_vector_time(gelu, d, 2).value() == Approx(static_cast<double>(e / 256) * 11 / 1.05e9));
  // A residual add is memory-bound on two cores: reads 2E, writes E at 2 bytes each over 1.2 TB/s.
  const auto add = vector_op(op_kind::residual_add, op_phase::forward, 2 * e, e);
  CHECK(cost::systolic_vector_time(add, d, 2).value() == Approx(3.0 * 2.0 * e / 1.2e12));
  // Lanes are quantized: 129 elements take two rounds on one 128-lane core.
  const auto small = vector_op(op_kind::relu, op_phase::forward, 129, 129);
  CHECK(cost::systolic_vector_time(small, d, 1).value() == Approx(2.0 / 1.05e9));
  // Cross-entropy works over the logits (its input) and writes one loss per token.
  const auto ce = vector_op(op_kind::cross_entropy, op_phase::forward, 2048 * 50257, 2048);
  CHECK(cost::vector_elements(ce) == 2048 * 50257);
  CHECK(model::flops_of(ce).value() == 6.0 * 2048 * 50257);  // model::flops_of counts the same elements
  // Dropout writes a one-byte mask with its output.
  const auto drop = vector_op(op_kind::dropout, op_phase::forward, 1000, 1000);
  CHECK(cost::vector_bytes(drop).value() == 1000.0 * 2 + 1000.0 * 3);
}

TEST_CASE("vector ops on datasheet devices are bound by HBM or the vector rate", "[cost][vector]") {
  const hw::device a100 = *hw::find_preset("a100-80gb");
  const std::int64_t e = 2048 * 12288;
  const auto ln = vector_op(op_kind::layernorm, op_phase::forward, e, e, 2 * 12288);
  const double moved = 2.0 * (2.0 * e + 2 * 12288);
  CHECK(cost::datasheet_vector_time(ln, a100).value() == Approx(moved / (2039e9 * 0.9)));
  const double work = 8.0 * e;
  CHECK(cost::datasheet_vector_time(ln, a100).value() >= work / 19.5e12);
}

TEST_CASE("more vector cores or lanes never make a vector op slower", "[cost][vector]") {
  std::mt19937_64 rng{5};
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>{lo, hi}(rng);
  };
  for (int trial = 0; trial < 3000; ++trial) {
    hw::device d = hw::tpuv4_like;
    d.systolic.num_vc = static_cast<int>(pick(1, 64));
    d.systolic.vc_width = static_cast<int>(pick(1, 512));
    d.hbm_bandwidth = bytes_per_second{static_cast<double>(pick(1, 5000)) * 1e9};
    const op_kind k = vector_kinds[pick(0, static_cast<std::int64_t>(std::size(vector_kinds)) - 1)];
    const op_phase p = pick(0, 1) == 0 ? op_phase::forward : op_phase::backward_data;
    const std::int64_t out = pick(1, 1 << 26);
    const auto o = vector_op(k, p, out * pick(1, 2), out, pick(0, 4096));
    const seconds one = cost::systolic_vector_time(o, d, 1);
    const seconds all = cost::systolic_vector_time(o, d, d.systolic.num_vc);
    REQUIRE(all <= one);
    // Physical floors: the lanes' FLOP rate and HBM.
    REQUIRE(all.value() >= model::flops_of(o).value() / hw::peak_vector_flops(d).value() * (1 - 1e-12));
    REQUIRE(all.value() >= cost::vector_bytes(o).value() / d.hbm_bandwidth.value() * (1 - 1e-12));
    hw::device more = d;
    more.systolic.num_vc += static_cast<int>(pick(1, 8));
    REQUIRE(cost::systolic_vector_time(o, more, more.systolic.num_vc) <= all);
    more = d;
    more.systolic.vc_width += static_cast<int>(pick(1, 128));
    REQUIRE(cost::systolic_vector_time(o, more, 1) <= one);
    REQUIRE(cost::systolic_vector_time(o, more, more.systolic.num_vc) <= all);
  }
}

TEST_CASE("a fused cross-entropy moves the logits once forward and twice backward, in their format",
          "[cost][vector]") {
  const hw::device a100 = *hw::find_preset("a100-80gb");
  const std::int64_t tokens = 8 * 2048;
  const std::int64_t logits = tokens * 50368;
  auto ce = [&](op_phase p, bool fused) {
    model::op o = p == op_phase::forward ? vector_op(op_kind::cross_entropy, p, logits, tokens)
                                         : vector_op(op_kind::cross_entropy, p, tokens, logits);
    o.fused_loss = fused;
    return o;
  };
  // Closed forms: bf16 logits (2 bytes) read once forward; read and written once backward.
  CHECK(cost::datasheet_vector_bytes(ce(op_phase::forward, true)).value() == Approx(2.0 * logits));
  CHECK(cost::datasheet_vector_bytes(ce(op_phase::backward_data, true)).value() == Approx(4.0 * logits));
  // Megatron-LM's fp32 passes: 38 and 14 bytes per logit.
  CHECK(cost::datasheet_vector_bytes(ce(op_phase::forward, false)).value() == Approx(38.0 * logits));
  CHECK(cost::datasheet_vector_bytes(ce(op_phase::backward_data, false)).value() == Approx(14.0 * logits));
  // Both memory-bound on the A100: fused, (2 + 4) / (38 + 14) of the time.
  const double fused = cost::datasheet_vector_time(ce(op_phase::forward, true), a100).value() +
                       cost::datasheet_vector_time(ce(op_phase::backward_data, true), a100).value();
  const double unfused = cost::datasheet_vector_time(ce(op_phase::forward, false), a100).value() +
                         cost::datasheet_vector_time(ce(op_phase::backward_data, false), a100).value();
  CHECK(fused / unfused == Approx(6.0 / 52.0));
}

TEST_CASE("an eager op moves its bytes at its kernel's measured share of the peak, plus a fixed time",
          "[cost][vector]") {
  const hw::device a100 = *hw::find_preset("a100-80gb");
  const std::int64_t e = 8192 * 4096;
  auto op = [&](op_kind k, op_phase p, bool eager) {
    model::op o = vector_op(k, p, e, e, k == op_kind::layernorm ? 2 * 4096 : 0);
    o.eager = eager;
    return o;
  };
  const double bw = 2039e9;
  // Closed forms: LayerNorm forward at the two cards' mean share and fixed time, its backward at the
  // backward share; a fused op at the copy rate and no fixed time.
  const auto ln = op(op_kind::layernorm, op_phase::forward, true);
  const double moved = cost::datasheet_vector_bytes(ln).value();
  CHECK(cost::datasheet_vector_time(ln, a100).value() ==
        Approx(moved / (bw * cost::eager_layernorm.share) + cost::eager_layernorm.fixed_s));
  const auto ln_back = op(op_kind::layernorm, op_phase::backward_data, true);
  CHECK(cost::datasheet_vector_time(ln_back, a100).value() ==
        Approx(cost::datasheet_vector_bytes(ln_back).value() / (bw * cost::eager_norm_backward) +
               cost::eager_layernorm.fixed_s));
  CHECK(cost::datasheet_vector_time(op(op_kind::layernorm, op_phase::forward, false), a100).value() ==
        Approx(moved / (bw * 0.9)));
  // Every kind but the loss and the embedding (their own byte counts): never more than 2% faster than the
  // fused op (an eager add reaches a copy's rate), and on a one-element op at least a microsecond slower (the
  // fixed time per op); the eager rotary embedding and SwiGLU, several kernels each, far slower.
  for (const op_kind k : vector_kinds) {
    if (k == op_kind::cross_entropy || k == op_kind::embedding) continue;
    for (const op_phase p : {op_phase::forward, op_phase::backward_data}) {
      INFO(model::to_string(k) << " " << model::to_string(p));
      CHECK(cost::datasheet_vector_time(op(k, p, true), a100).value() >=
            0.98 * cost::datasheet_vector_time(op(k, p, false), a100).value());
      model::op tiny = vector_op(k, p, 1, 1);
      const double fused = cost::datasheet_vector_time(tiny, a100).value();
      tiny.eager = true;
      CHECK(cost::datasheet_vector_time(tiny, a100).value() - fused >= 1e-6);
    }
  }
  for (const op_kind k : {op_kind::rotary, op_kind::swiglu})
    CHECK(cost::datasheet_vector_time(op(k, op_phase::forward, true), a100).value() >
          3.0 * cost::datasheet_vector_time(op(k, op_phase::forward, false), a100).value());
}

TEST_CASE("unfused attention's eager softmax runs PyTorch's fp32 kernels, each at its measured share",
          "[cost][vector]") {
  const hw::device h200 = *hw::find_preset("h200");
  const std::int64_t scores = std::int64_t{32} * 4096 * 4096;
  auto softmax = [&](op_phase p, bool eager, std::uint8_t modules) {
    model::op o = vector_op(op_kind::softmax, p, scores, scores);
    o.eager = eager;
    o.modules = modules;
    return o;
  };
  constexpr auto core = model::recompute_module::core_attn;
  // The kernel times measured on the H200 (tests/data/gpu/h200-megatron-attention-ops.csv), summed: the
  // forward's four kernels and the backward's six, each with the add's fixed time.
  const double forward_s = 1.524e-3 + 1.706e-3 + 1.9606e-3 + 0.7346e-3 + 4 * cost::eager_add.fixed_s;
  const double backward_s =
      1.524e-3 + 1.4956e-3 + 1.706e-3 + 0.7346e-3 + 1.4763e-3 + 1.0034e-3 + 6 * cost::eager_add.fixed_s;
  CHECK(cost::datasheet_vector_time(softmax(op_phase::forward, true, core), h200).value() ==
        Approx(forward_s).epsilon(1e-9));
  CHECK(cost::datasheet_vector_time(softmax(op_phase::backward_data, true, core), h200).value() ==
        Approx(backward_s).epsilon(1e-9));
  // Fused softmax kernels, and an eager softmax outside the attention core (a router's), keep the one-kernel
  // model: several times faster.
  for (const auto& o : {softmax(op_phase::forward, false, core), softmax(op_phase::forward, true, 0)})
    CHECK(cost::datasheet_vector_time(o, h200).value() < forward_s / 4.0);
  // Scores already in fp32 take the one-kernel model too (nothing to cast).
  model::op fp32 = softmax(op_phase::forward, true, core);
  fp32.elem_bytes = 4;
  CHECK_FALSE(model::eager_fp32_softmax(fp32));
}

TEST_CASE("a weight gradient added by a kernel of its own moves 10 bytes per weight at the measured share",
          "[cost][vector]") {
  const hw::device h100 = *hw::find_preset("h100-sxm");
  model::op o = vector_op(op_kind::embedding, op_phase::backward_weight, 4096, 4096);
  CHECK(cost::gradient_accumulation_time(o, h100).value() == 0.0);
  o.accumulated = 1'000'000'000;
  o.main_grad_bytes = 10;
  // 10 GB at 0.55 of the H100's 3.35 TB/s, and one kernel's fixed time.
  CHECK(cost::gradient_accumulation_share == Approx(0.55).margin(0.005));
  CHECK(cost::gradient_accumulation_time(o, h100).value() ==
        Approx(1e10 / (3.35e12 * cost::gradient_accumulation_share) + cost::eager_add.fixed_s));
}
