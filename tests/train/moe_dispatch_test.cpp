// Tests of how a mixture of experts' tokens travel and what hides their exchange: the flex dispatcher's
// deduplicated copies against brute-force enumeration of every routing, Megatron-Core's EP overlap against
// its pairing of passes and its warm-up counts, the received chunks' sort, and the unfused permutation at the
// measured rate of PyTorch's add by index.
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"
#include "../support/input_error_of.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "phaze/cost/collective.hpp"
#include "phaze/cost/vector.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

using namespace phaze;
using phaze::testing::input_error_of;

namespace {

// Every set of k distinct experts out of e, as bit masks (e small).
std::vector<std::uint32_t> routings(int e, int k) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t m = 0; m < (1u << e); ++m)
    if (__builtin_popcount(m) == k) out.push_back(m);
  return out;
}

// Groups of `per` consecutive experts a routing `m` touches.
int groups_of_routing(std::uint32_t m, int e, int per) {
  int n = 0;
  for (int g = 0; g < e / per; ++g)
    if (((m >> (g * per)) & ((1u << per) - 1)) != 0) ++n;
  return n;
}

const model::op* op_named(const model::layer& l, std::string_view name) {
  for (const auto& o : l.ops)
    if (o.name.view() == name) return &o;
  return nullptr;
}

train::training_knobs moe_run_knobs() {
  train::training_knobs k;
  k.global_batch = 1024;
  k.microbatch = 1;
  k.fused_attention = true;
  k.distributed_optimizer = true;
  return k;
}

}  // namespace

TEST_CASE("the groups a token's experts fall in: the closed form against every routing", "[moe][dispatch]") {
  for (const auto [e, k, g] :
       std::vector<std::array<int, 3>>{{8, 2, 2}, {8, 2, 4}, {12, 3, 3}, {16, 4, 4}, {16, 8, 2}}) {
    const auto all = routings(e, k);
    double touched = 0.0;
    for (const auto m : all) touched += groups_of_routing(m, e, e / g);
    INFO(e << " experts, top " << k << ", " << g << " groups");
    CHECK(cost::expected_groups_hit(e, k, g) == Approx(touched / static_cast<double>(all.size())));
  }
  CHECK(cost::expected_groups_hit(128, 8, 1) == 1.0);
}

TEST_CASE("the flex dispatcher's copies: once per node over the network, handed on over NVLink",
          "[moe][dispatch]") {
  // 16 experts of 4 ranks per node, 2 nodes (n 8), top 4: brute force over every routing from rank 0 (on
  // node 0, holding experts 0-1): the other nodes holding any, the other ranks of node 0 holding any, and
  // for each other node hit, the ranks there holding any besides the one the token arrives at (rank 4,
  // the same rail: experts 8-9).
  const int e = 16;
  const int k = 4;
  const auto all = routings(e, k);
  double across = 0.0;
  double inside = 0.0;
  for (const auto m : all) {
    const bool remote = ((m >> 8) & 0xffu) != 0;
    across += remote ? 1.0 : 0.0;
    for (int r = 1; r < 4; ++r) inside += ((m >> (2 * r)) & 3u) != 0 ? 1.0 : 0.0;
    if (remote)
      for (int r = 5; r < 8; ++r) inside += ((m >> (2 * r)) & 3u) != 0 ? 1.0 : 0.0;
  }
  const auto [in, out] = cost::deduplicated_copies(e, k, 8, 4);
  CHECK(out == Approx(across / static_cast<double>(all.size())));
  CHECK(in == Approx(inside / static_cast<double>(all.size())));
  // One expert per token: NCCL's all-to-all's network share, and each received token handed on once unless
  // it arrived at its rank.
  const auto [in1, out1] = cost::deduplicated_copies(128, 1, 16, 8);
  CHECK(out1 == Approx(8.0 / 16.0));
  CHECK(in1 == Approx(7.0 / 16.0 + 8.0 / 16.0 * 7.0 / 8.0));
}

TEST_CASE("Qwen3-30B-A3B over two nodes: the flex dispatcher sends a quarter of the network bytes",
          "[moe][dispatch]") {
  const model::model m = zoo::get("qwen3-30b-a3b");
  auto k = moe_run_knobs();
  const train::parallelism p{1, 1, 16, 1, 16};
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), p);
  const train::plan_shape where{1, 1, 16, 64, 1, 16};
  const auto nccl = train::step_model{c, k}.expert_parallel_routes(where, 128, 8);
  k.dispatcher = train::moe_dispatcher::flex;
  const auto flex = train::step_model{c, k}.expert_parallel_routes(where, 128, 8);
  CHECK(!nccl.shares);
  // A token's 8 experts miss a node of 64 with probability C(64, 8) / C(128, 8): it crosses once unless so,
  // where NCCL's all-to-all sends 8 x 8 / 16 copies across (each a 1 / 8 share of the message).
  double miss = 1.0;
  for (int i = 0; i < 8; ++i) miss *= (64.0 - i) / (128.0 - i);
  REQUIRE(flex.shares);
  CHECK(flex.shares->second / (8.0 / 16.0) == Approx((1.0 - miss) / (8.0 * 8.0 / 16.0)));
  CHECK(flex.shares->second / (8.0 / 16.0) < 0.26);
  const sched::schedule_cache cache;
  const auto a = train::estimate_step(m, c, p, moe_run_knobs(), cache);
  const auto b = train::estimate_step(m, c, p, k, cache);
  CHECK(b.breakdown.tp_comm < a.breakdown.tp_comm * 0.5);
  CHECK(b.breakdown.compute.value() < a.breakdown.compute.value());  // no sort of the received chunks
}

TEST_CASE("the all-to-all dispatcher sorts received chunks by local expert, flex hands them over grouped",
          "[moe][dispatch]") {
  const model::model m = zoo::get("qwen3-30b-a3b");
  auto shape = train::layer_shape_of(m, {1, 1, 16, 1, 16}, moe_run_knobs());
  const auto sorted = model::layer_at(m, 1, shape);
  REQUIRE(op_named(sorted, "sort_chunks") != nullptr);
  REQUIRE(op_named(sorted, "unsort_chunks") != nullptr);
  CHECK(op_named(sorted, "sort_chunks")->out_elements == op_named(sorted, "permute")->out_elements);
  shape.grouped_dispatch = true;
  CHECK(op_named(model::layer_at(m, 1, shape), "sort_chunks") == nullptr);
  // One expert per rank (ep = experts): nothing to sort.
  shape.grouped_dispatch = false;
  shape.ep = 128;
  CHECK(op_named(model::layer_at(m, 1, shape), "sort_chunks") == nullptr);
  // Without expert parallelism the dispatcher still sorts a rank's 128 experts' rows.
  shape.ep = 1;
  CHECK(op_named(model::layer_at(m, 1, shape), "sort_chunks") != nullptr);
  // Under expert tensor parallelism (tp 2, sequence parallel) it sorts the gathered rows, before the
  // reduce-scatter back.
  auto k2 = moe_run_knobs();
  k2.sequence_parallel = true;
  const auto gathered = model::layer_at(m, 1, train::layer_shape_of(m, {2, 1, 8, 1, 8}, k2));
  REQUIRE(op_named(gathered, "experts_enter") != nullptr);
  CHECK(op_named(gathered, "sort_chunks")->out_elements == op_named(gathered, "experts_enter")->out_elements);
  CHECK(op_named(gathered, "sort_chunks")->out_elements == 2 * op_named(gathered, "permute")->out_elements);
  CHECK(op_named(gathered, "unsort_chunks")->out_elements == op_named(gathered, "experts_exit")->in_elements);
}

TEST_CASE("the unfused permutation adds rows by index at PyTorch's measured rate", "[moe][dispatch]") {
  const model::model m = zoo::get("qwen3-30b-a3b");
  auto k = moe_run_knobs();
  const hw::device h100 = *hw::find_preset("h100-sxm");
  k.unfused_permutation = true;
  const auto l = model::layer_at(m, 1, train::layer_shape_of(m, {1, 1, 16, 1, 16}, k));
  const model::op* unpermute = op_named(l, "unpermute");
  const model::op* permute = op_named(l, "permute");
  REQUIRE(unpermute != nullptr);
  REQUIRE(permute != nullptr);
  REQUIRE(op_named(l, "unpermute_scale") != nullptr);
  CHECK(unpermute->permutation == model::index_kernel::scatter_add);
  CHECK(permute->permutation == model::index_kernel::select);
  // The unpermutation's forward: its rows read and its tokens written at 0.077 of the HBM peak.
  const double moved = static_cast<double>(unpermute->in_elements + unpermute->out_elements) * 2.0;
  CHECK(cost::datasheet_vector_time(*unpermute, h100).value() ==
        Approx(moved / (h100.hbm_bandwidth.value() * cost::index_add_share)).epsilon(1e-6));
  CHECK(cost::index_add_share == Approx(0.0769).epsilon(1e-3));
  // Its backward gathers a gradient for every row it summed (top_k per token), as many as the forward read.
  const auto backward = model::backward(l);
  const auto gather =
      std::ranges::find_if(backward, [](const model::op& o) { return o.name.view() == "unpermute_d"; });
  REQUIRE(gather != backward.end());
  CHECK(gather->out_elements == unpermute->in_elements);
  CHECK(gather->out_elements == 8 * unpermute->out_elements);
  // The permutation's gather runs at the copy rate; its backward adds by index.
  CHECK(!cost::adds_by_index(*permute));
  model::op back = *permute;
  back.phase = model::op_phase::backward_data;
  CHECK(cost::adds_by_index(back));
  // Fused: neither.
  const auto fused = model::layer_at(m, 1, train::layer_shape_of(m, {1, 1, 16, 1, 16}, moe_run_knobs()));
  CHECK(op_named(fused, "unpermute")->permutation == model::index_kernel::none);
  CHECK(op_named(fused, "unpermute_scale") == nullptr);
  const sched::schedule_cache cache;
  const auto c = phaze::test::cluster_of(h100, 16);
  CHECK(train::estimate_step(m, c, {1, 1, 16, 1, 16}, k, cache).time_per_batch >
        train::estimate_step(m, c, {1, 1, 16, 1, 16}, moe_run_knobs(), cache).time_per_batch);
}

TEST_CASE("EP overlap: the passes Megatron-Core leaves unpaired", "[moe][dispatch]") {
  // No pipeline: the first forward and the last backward of m.
  CHECK(train::detail::expert_overlap_unpaired(1, 1, 64) == Approx(1.0 / 64.0));
  // Interleaved over pp 2 x vp 12, 128 microbatches: (2 - 1) x 2 + (12 - 1) x 2 warm-up forwards plus the
  // overlap's extra one, of 128 x 12 (schedules.py, get_pp_rank_microbatches).
  CHECK(train::detail::expert_overlap_unpaired(2, 12, 128) == Approx(25.0 / 1536.0));
  CHECK(train::detail::expert_overlap_unpaired(8, 4, 2) == 1.0);  // all warm-up: nothing paired
}

TEST_CASE("EP overlap hides the all-to-alls behind the other microbatch's pass, step by step",
          "[moe][dispatch]") {
  const model::model m = zoo::get("qwen3-30b-a3b");
  const hw::device h100 = *hw::find_preset("h100-sxm");
  const train::parallelism p{1, 1, 16, 1, 16};
  const auto c = phaze::test::cluster_of(h100, p);
  const auto k = moe_run_knobs();
  const train::plan_shape where{1, 1, 16, 64, 1, 16};
  const auto routes = train::step_model{c, k}.expert_parallel_routes(where, 128, 8);
  const auto l = model::layer_at(m, 1, train::layer_shape_of(m, p, k));
  const auto [forward_a2a, backward_a2a] = train::detail::expert_parallel_exposed(l, routes);
  const auto exchanges = train::detail::expert_exchanges_of(l, routes);
  REQUIRE(exchanges.count == 2);
  // Compute far longer than the exchanges: all of them hidden. None: nothing.
  const phaze::seconds long_pass{1.0};
  CHECK(train::detail::expert_overlap_saving(l, h100, {}, exchanges, long_pass, long_pass).value() ==
        Approx((forward_a2a + backward_a2a).value()));
  CHECK(train::detail::expert_overlap_saving(l, h100, {}, exchanges, phaze::seconds{0.0}, phaze::seconds{0.0})
            .value() == Approx(0.0).margin(1e-15));
  // At the real passes: at most the exchanges and at most the compute beside them.
  const sched::schedule_cache cache;
  const auto timed = train::time_layer(l, h100, {}, cache);
  const auto saved =
      train::detail::expert_overlap_saving(l, h100, {}, exchanges, timed.gpu_forward, timed.gpu_backward);
  CHECK(saved.value() > 0.0);
  CHECK(saved <= forward_a2a + backward_a2a);
  CHECK(saved <= timed.gpu_forward + timed.gpu_backward);
  // The step: per microbatch the hidden time, less the unpaired share, comes off the exchanges.
  auto on = k;
  on.overlap_expert_comm = true;
  const auto a = train::estimate_step(m, c, p, k, cache);
  const auto b = train::estimate_step(m, c, p, on, cache);
  const double blocks = 48.0;
  const double per_microbatch = saved.value() * (1.0 - 1.0 / 64.0);
  CHECK((a.breakdown.tp_comm - b.breakdown.tp_comm).value() ==
        Approx(blocks * 64.0 * per_microbatch).epsilon(1e-6));
}

TEST_CASE("EP overlap refuses what Megatron-Core refuses, and does nothing without expert parallelism",
          "[moe][dispatch]") {
  const model::model m = zoo::get("qwen3-30b-a3b");
  // The message `validate` refuses model `n` with, on 16 devices.
  auto refusal = [](const model::model& n, const train::parallelism& p, const train::training_knobs& knobs) {
    return input_error_of([&] { train::validate(n, p, knobs, 16); });
  };
  const std::size_t none = std::string::npos;
  auto k = moe_run_knobs();
  k.overlap_expert_comm = true;
  CHECK(refusal(m, {1, 2, 8, 1, 8}, k).find("interleaved") != none);
  auto full = k;
  full.recompute = model::recompute::full;
  CHECK(refusal(m, {1, 1, 16, 1, 16}, full).find("full recomputation") != none);
  auto moe = k;
  moe.recompute = model::recompute::selective;
  moe.recompute_modules = model::recompute_module::moe;
  CHECK(refusal(m, {1, 1, 16, 1, 16}, moe).find("moe") != none);
  auto fp32 = k;
  fp32.precision = hw::precision::fp32;
  CHECK(refusal(m, {1, 1, 16, 1, 16}, fp32).find("bf16 or fp16") != none);
  auto interleaved = k;
  interleaved.schedule = train::pipeline_schedule::interleaved;
  interleaved.virtual_stages = 12;
  interleaved.overlap_p2p = true;
  train::validate(m, {1, 2, 8, 1, 8}, interleaved, 16);
  // ep 1: no all-to-all to overlap, and no rule to break.
  train::validate(m, {1, 1, 16, 1, 1}, k, 16);
  // The flex dispatcher: dropless, and with expert tensor parallelism 1.
  auto flex = moe_run_knobs();
  flex.dispatcher = train::moe_dispatcher::flex;
  flex.sequence_parallel = true;
  CHECK(refusal(m, {2, 1, 8, 1, 8}, flex).find("`etp` 1") != none);
  train::validate(m, {2, 1, 8, 1, 16, 1}, flex, 16);
  auto padded = m;
  padded.config.capacity_factor = 1.0;
  CHECK(refusal(padded, {1, 1, 16, 1, 16}, flex).find("capacity") != none);
}

TEST_CASE("EP overlap's pairs: each waits for its longer side, in Megatron-Core's order", "[moe][dispatch]") {
  using phaze::seconds;
  // pre_f 2, mlp_f 3, pre_b 5, mlp_b 7; dispatch 4, combine 1: max(2, 1) + max(7, 4) + max(3, 4) +
  // max(1, 5) = 2 + 7 + 4 + 5.
  CHECK(train::detail::paired_passes(seconds{2}, seconds{3}, seconds{5}, seconds{7}, seconds{4}, seconds{1})
            .value() == 18.0);
  // The combine beside the forward's pre-dispatch part and the backward's, the dispatch beside the experts.
  CHECK(train::detail::paired_passes(seconds{1}, seconds{1}, seconds{1}, seconds{1}, seconds{0}, seconds{6})
            .value() == 14.0);
  CHECK(train::detail::paired_passes(seconds{1}, seconds{1}, seconds{1}, seconds{1}, seconds{6}, seconds{0})
            .value() == 14.0);
  CHECK(train::detail::paired_passes(seconds{6}, seconds{0}, seconds{0}, seconds{0}, seconds{0}, seconds{6})
            .value() == 12.0);
}

TEST_CASE("EP overlap splits a pass at its all-to-alls: the experts between them, the rest before",
          "[moe][dispatch]") {
  // Qwen3-30B-A3B at ep 16: the share of the pass's op time of the ops named as the experts' part (the sort,
  // the expert GEMMs and activation, the sort back), summed here by name, forward and backward.
  const model::model m = zoo::get("qwen3-30b-a3b");
  const train::parallelism p{1, 1, 16, 1, 16};
  const auto l = model::layer_at(m, 1, train::layer_shape_of(m, p, moe_run_knobs()));
  const hw::device h100 = *hw::find_preset("h100-sxm");
  const auto table = cost::layer_costs(l, h100, {});
  auto expert_part = [](std::string_view name) {
    for (const char* e : {"sort_chunks", "expert_up", "expert_swiglu", "expert_down", "unsort_chunks"})
      if (name.starts_with(e)) return true;
    return false;
  };
  double inside = 0.0;
  double all = 0.0;
  for (std::size_t i = 0; i < l.ops.size(); ++i) {
    all += table.forward[i].all_cores.value();
    if (expert_part(l.ops[i].name.view())) inside += table.forward[i].all_cores.value();
  }
  const double forward = train::detail::expert_share(l.ops, table.forward);
  CHECK(forward == Approx(inside / all));
  CHECK(forward > 0.2);
  CHECK(forward < 0.8);
  const auto back = model::backward(l);
  inside = all = 0.0;
  for (std::size_t i = 0; i < back.size(); ++i) {
    all += table.backward[i].all_cores.value();
    if (expert_part(back[i].name.view())) inside += table.backward[i].all_cores.value();
  }
  CHECK(train::detail::expert_share(back, table.backward) == Approx(inside / all));
}
