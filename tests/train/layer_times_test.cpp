// Layer costs for placement: on a GPU the ops run one after another, so a pass takes the sum of its op
// costs; on the PHAZE template the schedule overlaps ops and beats that serial sum; recomputation and
// memory figures come from the model graph.
#include <phaze/cost/op_cost.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/constant_tables.hpp>
#include <phaze/sched/ilp.hpp>
#include <phaze/train/knobs.hpp>
#include <phaze/train/layer_times.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

using namespace phaze;

TEST_CASE("On a datasheet GPU a layer's passes take the sum of their op costs", "[place][layer_times]") {
  const auto d = *hw::find_preset("a100-80gb");
  const auto l = model::block_layer(zoo::gpt3_175b().config, {1, 0, 8, true, 2});
  sched::schedule_cache cache;
  const auto t = train::time_layer(l, d, phaze::test::tp_route(d, l.shape.tp), cache);
  const auto table = cost::layer_costs(l, d, phaze::test::tp_route(d, l.shape.tp));
  CHECK(t.forward.value() == Approx(table.forward_total.value()).epsilon(1e-9));
  CHECK(t.backward.value() == Approx(table.backward_total.value()).epsilon(1e-9));
  CHECK(t.recompute_full == t.forward);
  // Selective recomputation runs the attention core again: its ops' costs, a fraction of the forward.
  double core = 0.0;
  for (std::size_t i = 0; i < l.ops.size(); ++i)
    if ((l.ops[i].modules & model::recompute_module::core_attn) != 0)
      core += table.forward[i].all_cores.value();
  CHECK(t.recompute_selective.value() == Approx(core).epsilon(1e-9));
  CHECK(t.recompute_selective < t.forward);
  CHECK(t.recompute(model::recompute::none).value() == 0.0);
  CHECK(t.params == model::layer_params(l, true));
  CHECK(t.activations(model::recompute::selective) ==
        model::activation_bytes(l, model::recompute::selective));
  CHECK(t.activations_full < t.activations_selective);
  CHECK(t.activations_selective < t.activations_none);
  CHECK(t.boundary == model::boundary_bytes(l));
}

TEST_CASE("A pass whose ops launch slower than its kernels run takes the host's time",
          "[place][layer_times]") {
  // GPT-2's block at microbatch 1 on an H100: 17 forward and 23 backward ops (unfused attention) of some
  // 0.1-0.2 ms in all. At 60.7 us of host time per op (eager PyTorch, measured) each pass is the host's:
  // ops x host time exactly; at 0 the GPU's serial sum, as before; a recomputed forward pays the host too.
  const auto d = *hw::find_preset("h100-sxm");
  model::layer_shape shape{1, 0, 1, false, 2};
  const auto gpu = model::block_layer(zoo::get("gpt2").config, shape);
  shape.host_per_op = train::eager_host_per_op;
  const auto hosted = model::block_layer(zoo::get("gpt2").config, shape);
  sched::schedule_cache cache;
  const auto route = phaze::test::tp_route(d, 1);
  const auto t0 = train::time_layer(gpu, d, route, cache);
  const auto t1 = train::time_layer(hosted, d, route, cache);
  const auto forward_ops = static_cast<double>(hosted.ops.size());
  const auto backward_ops = static_cast<double>(model::backward(hosted).size());
  REQUIRE(forward_ops == 17);
  REQUIRE(backward_ops == 23);
  CHECK(t0.forward.value() < forward_ops * train::eager_host_per_op);
  CHECK(t1.forward.value() == Approx(forward_ops * train::eager_host_per_op).epsilon(1e-12));
  CHECK(t1.backward.value() == Approx(backward_ops * train::eager_host_per_op).epsilon(1e-12));
  CHECK(t1.recompute_full == t1.forward);
  CHECK(t1.recompute_selective > t0.recompute_selective);
  // A large microbatch makes the GPU the slower side again: the bound leaves the time as it was.
  model::layer_shape big{16, 0, 1, false, 2};
  const auto gpu16 = train::time_layer(model::block_layer(zoo::get("gpt2").config, big), d, route, cache);
  big.host_per_op = train::eager_host_per_op;
  const auto hosted16 = train::time_layer(model::block_layer(zoo::get("gpt2").config, big), d, route, cache);
  CHECK(gpu16.forward.value() > forward_ops * train::eager_host_per_op);
  CHECK(hosted16.forward == gpu16.forward);
  CHECK(hosted16.backward == gpu16.backward);
}

TEST_CASE("Selective recomputation of Megatron-Core's submodules runs their forward ops again",
          "[place][layer_times][recompute]") {
  // Llama 2 7B's block at tp 2 with sequence parallelism: recomputing the MLP and the norms costs the
  // forward ops tagged with those submodules (the MLP's all-gather and reduce-scatter included), serially.
  const auto d = *hw::find_preset("h100-sxm");
  model::layer_shape shape{1, 0, 2, true, 2};
  shape.recompute_modules = model::recompute_module::mlp | model::recompute_module::layernorm;
  const auto l = model::block_layer(zoo::get("llama2-7b").config, shape);
  sched::schedule_cache cache;
  const auto route = phaze::test::tp_route(d, l.shape.tp);
  const auto t = train::time_layer(l, d, route, cache);
  const auto table = cost::layer_costs(l, d, route);
  double again = 0.0;
  int tagged = 0;
  for (std::size_t i = 0; i < l.ops.size(); ++i) {
    if ((l.ops[i].modules & shape.recompute_modules) == 0) continue;
    again += table.forward[i].all_cores.value();
    ++tagged;
  }
  // Two norms; the MLP's entry all-gather, gate/up GEMM, SwiGLU, down GEMM and exit reduce-scatter.
  CHECK(tagged == 7);
  CHECK(t.recompute_selective.value() == Approx(again).epsilon(1e-9));
  CHECK(t.recompute_selective < t.forward);
}

TEST_CASE("torchtitan's per-op policy runs again what it does not keep, as the compile-time tables do",
          "[place][layer_times][recompute]") {
  // Llama 3 8B's block at tp 1: the recomputation is the norms, rotary embedding, SwiGLU and residual adds
  // whole, and of the matmuls the key projection (1/6 of the QKV GEMM), the output projection and the up
  // projection (half the gate/up GEMM); not the attention kernel, nor the query, value, gate and down
  // projections.
  const auto d = *hw::find_preset("h100-sxm");
  model::layer_shape shape{1, 8192, 1, false, 2};
  shape.fused_attention = true;
  shape.recompute_modules = model::recompute_module::op;
  const auto l = model::block_layer(zoo::get("llama3-8b").config, shape);
  sched::schedule_cache cache;
  const auto route = phaze::test::tp_route(d, l.shape.tp);
  const auto t = train::time_layer(l, d, route, cache);
  const auto table = cost::layer_costs(l, d, route);
  double again = 0.0;
  for (std::size_t i = 0; i < l.ops.size(); ++i) {
    const auto& o = l.ops[i];
    const double f = table.forward[i].all_cores.value();
    if (o.name.view() == "qkv")
      again += f / 6.0;
    else if (o.name.view() == "attn_out")
      again += f;
    else if (o.name.view() == "gate_up")
      again += f / 2.0;
    else if (o.kind != model::op_kind::matmul && o.kind != model::op_kind::fused_attention)
      again += f;
  }
  CHECK(t.recompute_selective.value() == Approx(again).epsilon(1e-9));
  CHECK(t.recompute_selective < t.forward);
  // The compile-time tables' serial recomputation is the same sum.
  CHECK(place::detail::serial_times_of(l, d, route).recomputed.value() == Approx(again).epsilon(1e-9));
}

TEST_CASE("On the PHAZE template the schedule overlaps ops: never slower than the serial sum",
          "[place][layer_times]") {
  sched::schedule_cache cache{sched::ilp_scheduler{}};
  for (const char* name : {"gpt3-175b", "llama2-7b", "bert-large"}) {
    const auto l = model::block_layer(zoo::get(name).config, {1, 0, 1, false, 2});
    const auto t =
        train::time_layer(l, hw::tpuv4_like, phaze::test::tp_route(hw::tpuv4_like, l.shape.tp), cache);
    const auto table =
        cost::layer_costs(l, hw::tpuv4_like, phaze::test::tp_route(hw::tpuv4_like, l.shape.tp));
    INFO(name);
    CHECK(t.forward.value() <= table.forward_total.value() * (1 + 1e-9));
    CHECK(t.backward.value() <= table.backward_total.value() * (1 + 1e-9));
    CHECK(t.backward > t.forward);  // input- and weight-gradient GEMMs
  }
}

TEST_CASE("time_model gives every node its layer's costs, computing each distinct layer once",
          "[place][layer_times]") {
  const auto m = zoo::gpt2();
  sched::schedule_cache cache;
  const auto h100 = *hw::find_preset("h100-sxm");
  const auto times = train::time_model(m, {2, 0, 1, false, 2}, h100, phaze::test::tp_route(h100, 1), cache);
  REQUIRE(times.size() == m.size());
  CHECK(times.front().params ==
        model::layer_params(model::embedding_layer(m.config, {2, 0, 1, false, 2}), true));
  for (std::size_t i = 1; i + 1 < m.size(); ++i) CHECK(times[i].forward == times[1].forward);
  CHECK(times.back().params > 0);  // the head keeps its own copy of the tied embedding
  // Three distinct layers, two passes each, plus the block's attention core: seven solves, no repeats.
  CHECK(cache.misses() == 7);
  CHECK(cache.hits() == 0);
}
