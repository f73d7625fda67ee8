// Tests of context parallelism (parallelism::cp, model::layer_shape::cp): what a rank computes and keeps
// (1 / cp of the sequence, its queries against all keys), the ring's exposed sends against their closed form,
// and the ranks the gradients are reduced over.
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include "phaze/cost/attention.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/train/step.hpp"

using namespace phaze;

namespace {
model::layer block(int cp, int tp = 1) {
  const model::model m = zoo::get("llama3-8b");
  train::training_knobs k;
  k.fused_attention = true;
  k.sequence = 8192;
  k.microbatch = 1;
  k.sequence_parallel = tp > 1;
  return model::build_kind(m, m.kind_at(1), train::layer_shape_of(m, train::parallelism{tp, 1, 1, cp}, k));
}
const model::op& attention_of(const model::layer& l) {
  for (const auto& o : l.ops)
    if (o.kind == model::op_kind::fused_attention) return o;
  FAIL("no fused attention");
  return l.ops[0];
}
}  // namespace

TEST_CASE("context parallelism: each rank holds 1/cp of the sequence, its queries against every key", "[cp]") {
  for (const int tp : {1, 2}) {
    const model::layer one = block(1, tp);
    for (const int cp : {2, 4, 8}) {
      const model::layer l = block(cp, tp);
      INFO("tp " << tp << " cp " << cp);
      const model::op& a = attention_of(l);
      CHECK(a.gemm.m * cp == attention_of(one).gemm.m);
      CHECK(a.gemm.n == 8192);
      // Attention work, every GEMM's work and the activations kept divide by cp exactly.
      CHECK(cost::fused_attention_executed_flops(a) * cp ==
            Approx(cost::fused_attention_executed_flops(attention_of(one))).epsilon(1e-12));
      CHECK(model::forward_matmul_flops(l).value() * cp ==
            Approx(model::forward_matmul_flops(one).value()).epsilon(1e-12));
      CHECK(model::activation_bytes(l, model::recompute::none).value() * cp ==
            Approx(model::activation_bytes(one, model::recompute::none).value()).epsilon(1e-12));
      // The parameters do not.
      CHECK(model::layer_params(l, false) == model::layer_params(one, false));
    }
  }
}

TEST_CASE("context parallelism: ring attention exposes (cp - 1) max(0, send - attention / cp) per pass", "[cp]") {
  const hw::device h100 = *hw::find_preset("h100-sxm");
  const cluster::route tp{};
  for (const double gbps : {1.0, 10.0, 50.0, 450.0}) {
    cluster::route ring;
    ring.hop.bandwidth = bytes_per_second{gbps * 1e9};
    ring.hop.latency = seconds{5e-6};
    for (const int cp : {2, 4}) {
      const model::layer l = block(cp);
      const model::op& a = attention_of(l);
      const bytes kv{static_cast<double>(a.in_elements - a.out_elements) * 2.0};
      // llama3-8b at tp 1: 8 key/value heads of 128, sequence / cp tokens each.
      CHECK(kv.value() == Approx(2.0 * 8 * 128 * 8192 / cp * 2.0));
      const seconds send = cost::point_to_point_time(kv, ring);
      const seconds fwd = cost::cost_of(a, h100, tp).all_cores;
      seconds bwd{0.0};
      for (const auto& b : model::backward(l))
        if (b.kind == model::op_kind::fused_attention) bwd = cost::cost_of(b, h100, tp).all_cores;
      const auto [f, b] = train::detail::context_parallel_exposed(l, h100, tp, ring);
      INFO(gbps << " GB/s, cp " << cp);
      CHECK(f.value() == Approx((cp - 1) * std::max(0.0, (send - fwd / cp).value())).margin(1e-15));
      CHECK(b.value() == Approx((cp - 1) * std::max(0.0, (send * 2.0 - bwd / cp).value())).margin(1e-15));
    }
  }
  const auto none = train::detail::context_parallel_exposed(block(1), h100, tp, tp);
  CHECK(none.first.value() == 0.0);
  CHECK(none.second.value() == 0.0);
}

TEST_CASE("context parallelism: gradients reduced over dp * cp ranks, stages tp * cp * dp wide", "[cp]") {
  const train::plan_shape s{2, 4, 3, 8, 2};
  CHECK(s.devices() == 48);
  CHECK(s.stage_ranks() == 12);
  CHECK(s.gradient_ranks() == 6);
  // The same gradients over dp 2 x cp 2 cost what dp 4 costs without context parallelism.
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 32);
  const train::step_model with_cp{c, train::training_knobs{}};
  const train::plan_shape cp{2, 4, 2, 8, 2};
  const train::plan_shape dp{2, 4, 4, 8, 1};
  CHECK(with_cp.gradient_sync(1e9, cp).value() == Approx(with_cp.gradient_sync(1e9, dp).value()));
}
