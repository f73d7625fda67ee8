// Tests of phaze/cost/op_cost.hpp: physical limits for every preset, every op kind and pass over thousands
// of random shapes; the layer cost table; GPT-3 and every zoo model costed on every preset.
#include "phaze/cost/op_cost.hpp"

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"
#include "../support/log_pick.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "phaze/cluster/presets.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"

using namespace phaze;
using namespace phaze::literals;
using model::op_kind;
using model::op_phase;

namespace {

constexpr int op_kind_count = 18;  // op_kind::matmul .. op_kind::all_gather

std::vector<hw::device> devices_under_test() {
  std::vector<hw::device> out;
  for (const auto& p : hw::presets) out.push_back(p.spec);
  // Systolic designs away from the reference: few large cores, many small ones, a small GLB, slow HBM.
  auto variant = [&](int tc, int w, int d, int vc, int lanes, bytes glb, bytes_per_second bw) {
    hw::device v = hw::tpuv4_like;
    v.name = "variant";
    v.systolic = {tc, w, d, vc, lanes, glb, 940_MHz};
    v.hbm_bandwidth = bw;
    out.push_back(v);
  };
  variant(1, 256, 256, 1, 256, 32_MiB, 800_GBps);
  variant(64, 16, 32, 16, 32, 8_MiB, 2000_GBps);
  variant(6, 64, 128, 3, 96, 256_KiB, 300_GBps);
  variant(4096, 4, 4, 4096, 4, 128_MiB, 4000_GBps);
  return out;
}

using phaze::test::node_of;
using phaze::test::tp_route;

using phaze::testing::log_pick;

/// A random op of a kind and pass, with shapes as the layer builder would give them.
model::op random_op(std::mt19937_64& rng, op_kind kind, op_phase phase, int elem_bytes) {
  model::op o;
  o.kind = kind;
  o.phase = phase;
  o.elem_bytes = elem_bytes;
  if (kind == op_kind::matmul || kind == op_kind::batched_matmul) {
    const std::int64_t batch = kind == op_kind::matmul ? 1 : log_pick(rng, 1, 256);
    o.gemm = {batch, log_pick(rng, 1, 16384), log_pick(rng, 1, 16384), log_pick(rng, 1, 16384)};
    o.in_elements = batch * o.gemm.m * o.gemm.k;
    o.out_elements = batch * o.gemm.m * o.gemm.n;
    return o;
  }
  o.out_elements = log_pick(rng, 1, std::int64_t{1} << 28);
  o.in_elements = o.out_elements * (kind == op_kind::residual_add ? 2 : 1);
  if (kind == op_kind::cross_entropy && phase == op_phase::forward) o.in_elements = o.out_elements * 50257;
  if (kind == op_kind::layernorm || kind == op_kind::rmsnorm) o.params = log_pick(rng, 1, 65536);
  o.group = static_cast<int>(log_pick(rng, 1, 512));
  return o;
}

std::vector<op_phase> phases_of(op_kind kind) {
  if (kind == op_kind::matmul) return {op_phase::forward, op_phase::backward_data, op_phase::backward_weight};
  if (kind == op_kind::embedding) return {op_phase::forward, op_phase::backward_weight};
  return {op_phase::forward, op_phase::backward_data};
}

/// The peak of one core of a systolic device (its one-core cost can use no more).
flops_per_second one_core_matrix_peak(const hw::device& d) {
  if (d.kind != hw::device_kind::systolic) return hw::peak_matrix_flops(d);
  hw::device one = d;
  one.systolic.num_tc = 1;
  return hw::peak_matrix_flops(one);
}
flops_per_second one_core_vector_peak(const hw::device& d) {
  if (d.kind != hw::device_kind::systolic) return hw::peak_vector_flops(d);
  hw::device one = d;
  one.systolic.num_vc = 1;
  return hw::peak_vector_flops(one);
}

}  // namespace

TEST_CASE("no op beats the device's peak rate or HBM bandwidth, on any device", "[cost][op_cost]") {
  std::mt19937_64 rng{2024};
  const double slack = 1 - 1e-12;  // rounding only
  long checked = 0;
  for (const hw::device& d : devices_under_test()) {
    const int eb = hw::element_bytes(d.compute);
    for (int k = 0; k < op_kind_count; ++k) {
      const auto kind = static_cast<op_kind>(k);
      for (const op_phase phase : phases_of(kind)) {
        for (int trial = 0; trial < 40; ++trial) {
          const model::op o = random_op(rng, kind, phase, eb);
          const cost::op_cost c = cost::cost_of(o, d, tp_route(d, o.group));
          INFO(d.name.view() << ": " << model::to_string(kind) << " " << model::to_string(phase) << " gemm "
                             << o.gemm.batch << "x" << o.gemm.m << "x" << o.gemm.k << "x" << o.gemm.n
                             << " out " << o.out_elements << " group " << o.group);
          REQUIRE(std::isfinite(c.one_core.value()));
          REQUIRE(c.all_cores.value() >= 0.0);
          REQUIRE(c.all_cores <= c.one_core);
          if (d.kind == hw::device_kind::datasheet) REQUIRE(c.all_cores == c.one_core);
          const double work = model::flops_of(o).value();
          const double moved = (model::bytes_read(o) + model::bytes_written(o)).value();
          switch (model::unit_of(o)) {
            case model::unit::tensor:
              REQUIRE(c.all_cores.value() >= work / hw::peak_matrix_flops(d).value() * slack);
              REQUIRE(c.one_core.value() >= work / one_core_matrix_peak(d).value() * slack);
              REQUIRE(c.all_cores.value() >= moved / d.hbm_bandwidth.value() * slack);
              break;
            case model::unit::vector:
              REQUIRE(c.all_cores.value() >= work / hw::peak_vector_flops(d).value() * slack);
              REQUIRE(c.one_core.value() >= work / one_core_vector_peak(d).value() * slack);
              REQUIRE(c.all_cores.value() >= moved / d.hbm_bandwidth.value() * slack);
              break;
            case model::unit::network: {
              // At least the message's ring share over the fastest link the device's node has.
              const double n = o.group;
              const double share = kind == op_kind::all_reduce ? 2 * (n - 1) / n : (n - 1) / n;
              const auto node = node_of(d);
              const double fastest =
                  std::max(node.intra.bandwidth.value(), node.network_share(node.devices).value());
              REQUIRE(c.all_cores.value() >= share * model::collective_bytes(o).value() / fastest * slack);
              break;
            }
            case model::unit::none:
              REQUIRE(c == cost::op_cost{});
              break;
          }
          ++checked;
        }
      }
    }
  }
  CHECK(checked == static_cast<long>(devices_under_test().size()) * 40 * (3 + 17 * 2));
}

TEST_CASE("collective ops cost their kind over the route of the tensor-parallel group", "[cost][op_cost]") {
  const hw::device a100 = *hw::find_preset("a100-80gb");
  model::op ar;
  ar.kind = op_kind::all_reduce;
  ar.in_elements = ar.out_elements = 2048 * 12288;
  ar.group = 8;
  const bytes message = model::collective_bytes(ar);
  const cluster::route in_node = tp_route(a100, 8);
  CHECK(in_node.hop.bandwidth == 300_GBps);
  CHECK(cost::cost_of(ar, a100, in_node).all_cores == cost::all_reduce_time(message, 8, in_node));
  ar.group = 16;  // more than a node holds: the rings leave the node with 8 members there (all 8 NICs)
  const cluster::route across = tp_route(a100, 16);
  CHECK(across.hop.bandwidth == 200_GBps);
  CHECK(cost::cost_of(ar, a100, across).all_cores == cost::all_reduce_time(message, 16, across));
  model::op copy = ar;
  copy.kind = op_kind::tp_copy;
  CHECK(cost::cost_of(copy, a100, across) == cost::op_cost{});
}

TEST_CASE("the layer cost table: one row per forward and backward op, totals of the all-cores costs",
          "[cost][op_cost]") {
  const auto gpt3 = zoo::find("gpt3-175b")->config;
  for (const hw::device& d : {hw::tpuv4_like, *hw::find_preset("a100-80gb"), *hw::find_preset("h100-sxm")}) {
    for (int tp : {1, 8}) {
      const auto l = model::block_layer(gpt3, {1, 0, tp, false, 2});
      const auto bwd = model::backward(l);
      const auto t = cost::layer_costs(l, d, tp_route(d, tp));
      REQUIRE(t.forward.size() == l.ops.size());
      REQUIRE(t.backward.size() == bwd.size());
      seconds fwd_sum{0.0}, bwd_sum{0.0}, fwd_matmul{0.0}, bwd_matmul{0.0};
      for (std::size_t i = 0; i < l.ops.size(); ++i) {
        CHECK(t.forward[i] == cost::cost_of(l.ops[i], d, tp_route(d, tp)));
        fwd_sum += t.forward[i].all_cores;
        if (model::unit_of(l.ops[i]) == model::unit::tensor) fwd_matmul += t.forward[i].all_cores;
      }
      for (std::size_t i = 0; i < bwd.size(); ++i) {
        CHECK(t.backward[i] == cost::cost_of(bwd[i], d, tp_route(d, tp)));
        bwd_sum += t.backward[i].all_cores;
        if (model::unit_of(bwd[i]) == model::unit::tensor) bwd_matmul += t.backward[i].all_cores;
      }
      CHECK(t.forward_total.value() == Approx(fwd_sum.value()));
      CHECK(t.backward_total.value() == Approx(bwd_sum.value()));
      CHECK(t.total().value() == Approx((fwd_sum + bwd_sum).value()));
      // The backward pass does twice the forward's matrix work; its GEMMs take about twice as long.
      INFO(d.name.view() << " tp " << tp << ": backward / forward GEMM time " << bwd_matmul / fwd_matmul);
      CHECK(bwd_matmul / fwd_matmul > 1.8);
      CHECK(bwd_matmul / fwd_matmul < 2.4);
    }
  }
}

TEST_CASE("every layer of every zoo model has a finite cost on every preset", "[cost][op_cost]") {
  for (const auto& e : zoo::entries) {
    const auto m = model::make_model(e.config);
    for (const auto& p : hw::presets) {
      for (const auto& dl : model::distinct_layers(m)) {
        const auto l = model::make_layer(e.config, dl.role, {1, 0, 1, false, 2});
        const auto t = cost::layer_costs(l, p.spec, tp_route(p.spec, 1));
        INFO(e.name << " on " << p.name);
        CHECK(std::isfinite(t.total().value()));
        CHECK(t.total().value() > 0.0);
      }
    }
  }
}
