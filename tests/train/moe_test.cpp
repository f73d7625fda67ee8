// Tests of mixture-of-experts blocks and expert parallelism (Megatron-Core's MoE with the all-to-all token
// dispatcher): parameters against HuggingFace's counts and the papers' totals, the experts' work per token
// against its closed form at every expert-parallel size, what a rank holds and sends, the distributed
// optimizer's sharding of the experts' state over the expert-data-parallel ranks, the all-to-all's time
// against its closed form, and the rules that refuse what Megatron-Core would not run.
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"
#include "../support/input_error_of.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "phaze/hw/presets.hpp"
#include "phaze/model/hf_config.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

using namespace phaze;
using phaze::testing::input_error_of;

namespace {

nlohmann::json hf(std::string_view file) {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/hf/" + std::string{file});
  REQUIRE(in);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

model::layer_shape shape_of(int tp, int ep, std::int64_t microbatch = 1, std::int64_t sequence = 4096) {
  model::layer_shape s{microbatch, sequence, tp, tp > 1, 2, true};
  s.ep = ep;
  return s;
}

const model::op* find_op(const model::layer& l, std::string_view name) {
  for (const auto& o : l.ops)
    if (o.name.view() == name) return &o;
  return nullptr;
}

constexpr std::int64_t mixtral_expert = 3LL * 4096 * 14336;  // gate, up and down of one expert

}  // namespace

TEST_CASE("Mixtral 8x7B has HuggingFace's parameters, 12.9B of them active per token", "[moe]") {
  const model::model zoo = zoo::get("mixtral-8x7b");
  // HF MixtralForCausalLM(mistralai/Mixtral-8x7B-v0.1).num_parameters(): 46,702,792,704.
  CHECK(model::parameter_count(zoo) == 46'702'792'704);
  const model::model imported = model::from_hf_config(hf("mixtral-8x7b-v0.1.json"), "mixtral");
  CHECK(model::parameter_count(imported) == 46'702'792'704);
  CHECK(imported.config.experts == 8);
  CHECK(imported.config.top_k == 2);
  // Active: attention, norms, router and 2 of 8 experts per block, embeddings (Jiang et al. 2024: 12.9B).
  const auto block = model::layer_at(zoo, 1, shape_of(1, 1));
  const std::int64_t dense_part = model::layer_params(block) - model::layer_expert_params(block);
  const std::int64_t active = 32 * (dense_part + 2 * mixtral_expert) + 2 * 32000LL * 4096 + 4096;
  CHECK(model::layer_expert_params(block) == 8 * mixtral_expert);
  CHECK(active == Approx(12.9e9).epsilon(0.005));
}

TEST_CASE("DeepSeekMoE and Qwen-MoE configs import with shared experts and dense first blocks", "[moe][hf]") {
  // DeepSeekMoE 16B (Dai et al. 2024, Table 1: 16.4B parameters): 64 routed experts of 1408, top 6, two
  // shared experts, the first block dense (intermediate_size 10944).
  const model::model ds = model::from_hf_config(hf("deepseek-moe-16b-base.json"), "deepseek");
  CHECK(ds.config.experts == 64);
  CHECK(ds.config.top_k == 6);
  CHECK(ds.config.expert_ffn == 1408);
  CHECK(ds.config.shared_expert_ffn == 2 * 1408);
  CHECK(ds.config.dense_layers == 1);
  CHECK(ds.kinds.size() == 4);
  CHECK(ds.kind_at(1).dense_mlp);
  CHECK_FALSE(ds.kind_at(2).dense_mlp);
  CHECK(model::parameter_count(ds) == Approx(16.4e9).epsilon(0.005));
  const auto dense = model::layer_at(ds, 1, shape_of(1, 1));
  const auto sparse = model::layer_at(ds, 2, shape_of(1, 1));
  CHECK(model::layer_expert_params(dense) == 0);
  CHECK(model::layer_expert_params(sparse) == 64LL * 3 * 2048 * 1408);
  // Qwen1.5-MoE-A2.7B (Qwen team 2024: 14.3B parameters): 60 experts of 1408, top 4, a shared expert of
  // 5632, QKV biases.
  const model::model qw = model::from_hf_config(hf("qwen1.5-moe-a2.7b.json"), "qwen");
  CHECK(qw.config.experts == 60);
  CHECK(qw.config.shared_expert_ffn == 5632);
  CHECK(qw.config.qkv_bias);
  CHECK(model::parameter_count(qw) == Approx(14.3e9).epsilon(0.005));
}

TEST_CASE("DeepSeek-V2 and V3 configs import with multi-head latent attention", "[moe][hf][mla]") {
  // DeepSeek-V2-Lite (DeepSeek-AI 2024, arXiv 2405.04434, appendix B: 15.7B parameters, 2.4B activated per
  // token): queries projected directly (q_lora_rank null), a 512-wide key/value latent, 64 experts of 1408,
  // 2 shared, the first block dense.
  const model::model lite = model::from_hf_config(hf("deepseek-v2-lite.json"), "lite");
  CHECK(lite.config.latent_attention());
  CHECK(lite.config.q_lora_rank == 0);
  CHECK(lite.config.kv_lora_rank == 512);
  CHECK(lite.config.qk_head_dim() == 192);
  CHECK(lite.config.value_head_dim() == 128);
  CHECK(model::parameter_count(lite) == Approx(15.7e9).epsilon(0.01));
  // One block's attention by hand: q 2048 x 16 x 192, kv_down 2048 x (512 + 64), its norm 512, kv_up
  // 512 x 16 x (128 + 128), the output 16 x 128 x 2048.
  const auto block = model::layer_at(lite, 1, shape_of(1, 1));
  std::int64_t attention = 0;
  for (const auto& o : block.ops)
    for (const char* n : {"q", "kv_down", "kv_norm", "kv_up", "attn_out"})
      if (o.name.view() == n) attention += o.params;
  CHECK(attention == 2048LL * 16 * 192 + 2048LL * 576 + 512 + 512LL * 16 * 256 + 16LL * 128 * 2048);
  // DeepSeek-V3 (DeepSeek-AI 2024, arXiv 2412.19437, section 4.2: 671B parameters, 37B activated, plus a
  // 14B multi-token-prediction module): query latent 1536, 256 experts of 2048, top 8, one shared, the first
  // 3 blocks dense, sigmoid scores, num_nextn_predict_layers 1.
  const model::model v3 = model::from_hf_config(hf("deepseek-v3.json"), "v3");
  CHECK(v3.config.q_lora_rank == 1536);
  CHECK(v3.config.dense_layers == 3);
  CHECK(v3.config.shared_expert_ffn == 2048);
  CHECK(v3.config.mtp_layers == 1);
  model::transformer_config main_only = v3.config;
  main_only.mtp_layers = 0;
  const model::model v3_main = model::make_model(main_only);
  CHECK(model::parameter_count(v3_main) == Approx(671e9).epsilon(0.01));
  // The module's own parameters (section 2.2): one more expert block, the 2h x h projection M_1 and three
  // RMSNorms (the embedding's, the hidden state's and its own final one); the embedding and the output head
  // are the main model's. The HF checkpoint stores a copy of each (layer 61's embed_tokens and
  // shared_head.head, 129,280 x 7,168 each): with them the 685B of the model card.
  const auto expert_block = model::layer_at(v3, 4, shape_of(1, 1));
  CHECK(model::parameter_count(v3) - model::parameter_count(v3_main) ==
        model::layer_params(expert_block) + 2LL * 7168 * 7168 + 3LL * 7168);
  CHECK(model::parameter_count(v3) + 2LL * 129280 * 7168 == Approx(685e9).epsilon(0.001));
  // The output layer runs the module: its block's attention and experts, its projection, its own loss over
  // the output projection it shares (no parameters of its own), and the embedding copy it reads (kept, not
  // counted in the model).
  const auto head = model::layer_at(v3, v3.size() - 1, shape_of(1, 1));
  CHECK(find_op(head, "mtp_projection")->params == 2LL * 7168 * 7168);
  CHECK(find_op(head, "mtp_output_proj")->params == 0);
  CHECK(find_op(head, "mtp_output_proj")->gemm.n == find_op(head, "output_projection")->gemm.n);
  CHECK(find_op(head, "mtp_embedding")->tied_params == 129280LL * 7168);
  CHECK(find_op(head, "mtp_cross_entropy") != nullptr);
  CHECK(model::layer_params(head, true) - model::layer_params(head, false) == 129280LL * 7168);
  // Split over 8 tensor-parallel ranks, the up projections and the heads split, the down projections kept
  // whole on every rank (Megatron-Core's "duplicated" linear layers).
  const auto split = model::layer_at(v3, 4, shape_of(8, 1));
  for (const auto& o : split.ops) {
    if (o.name.view() == "kv_down") CHECK(o.params == 7168LL * (512 + 64));
    if (o.name.view() == "q_up") CHECK(o.params == 1536LL * 128 / 8 * 192);
  }
}

TEST_CASE("GPT-OSS configs import with biased experts and a window on every other block", "[moe][hf]") {
  // gpt-oss-120b (OpenAI 2025, model card: 116.83B parameters, 5.13B active): the count without the 36 x 64
  // attention-sink logits, which phaze does not build (2,304 parameters).
  const auto json = hf("gpt-oss-120b.json");
  const model::model big = model::from_hf_config(json, "oss");
  CHECK(model::parameter_count(big) == 116'829'154'368);
  CHECK(model::parameter_count(big) + 36 * 64 == Approx(116.83e9).epsilon(1e-4));
  CHECK(big.config.bias);
  CHECK(big.config.attention_window == 128);
  CHECK(big.config.full_attention_every == 2);
  // Blocks alternate: windowed first, then one attending to every key.
  for (std::size_t v = 1; v + 1 < big.size(); ++v) CHECK(big.kind_at(v).full_attention == (v % 2 == 0));
  const auto sliding = model::layer_at(big, 1, shape_of(1, 1));
  const auto full = model::layer_at(big, 2, shape_of(1, 1));
  CHECK(find_op(sliding, "attention")->window == 128);
  CHECK(find_op(full, "attention")->window == 0);
  // Every expert carries its biases (2 x 2880 for gate and up, 2880 for down), the router its own.
  CHECK(find_op(sliding, "expert_up")->params == 128LL * (2880 * 5760 + 5760));
  CHECK(find_op(sliding, "router")->params == 2880LL * 128 + 128);
  // gpt-oss-20b (model card: 20.91B): 24 blocks, 32 experts.
  auto small = json;
  small["num_hidden_layers"] = 24;
  small["num_local_experts"] = 32;
  small["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 24; ++i)
    small["layer_types"].push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  CHECK(model::parameter_count(model::from_hf_config(small, "oss20")) == Approx(20.91e9).epsilon(1e-3));
  // A pattern other than every N-th block full is refused, naming the field.
  auto odd = json;
  odd["layer_types"][2] = "full_attention";
  CHECK_THAT(input_error_of([&] { (void)model::from_hf_config(odd, "x"); }),
             Catch::Contains("'layer_types'"));
}

TEST_CASE("HuggingFace MoE configs phaze would cost wrong are refused, naming the field", "[moe][hf]") {
  // Latent attention fields in a model type without it.
  auto latent_llama = hf("llama-2-7b-hf.json");
  latent_llama["kv_lora_rank"] = 512;
  CHECK_THAT(input_error_of([&] { (void)model::from_hf_config(latent_llama, "x"); }),
             Catch::Contains("'kv_lora_rank'") && Catch::Contains("latent attention"));
  auto qw = hf("qwen1.5-moe-a2.7b.json");
  qw["mlp_only_layers"] = nlohmann::json::array({24});  // past its 24 blocks
  CHECK_THAT(input_error_of([&] { (void)model::from_hf_config(qw, "x"); }),
             Catch::Contains("'mlp_only_layers'"));
  qw["mlp_only_layers"] = "3";
  CHECK_THAT(input_error_of([&] { (void)model::from_hf_config(qw, "x"); }),
             Catch::Contains("'mlp_only_layers'"));
  nlohmann::json all = nlohmann::json::array();
  for (int i = 0; i < 24; ++i) all.push_back(i);
  qw["mlp_only_layers"] = all;
  CHECK_THAT(input_error_of([&] { (void)model::from_hf_config(qw, "x"); }),
             Catch::Contains("at least one block with experts"));
  auto mx = hf("mixtral-8x7b-v0.1.json");
  mx["num_experts_per_tok"] = 9;
  CHECK_THAT(input_error_of([&] { (void)model::from_hf_config(mx, "x"); }), Catch::Contains("top_k"));
}

TEST_CASE("experts every N-th block: Qwen-MoE's decoder_sparse_step and DeepSeekMoE's moe_layer_freq",
          "[moe][hf]") {
  // Qwen1.5-MoE-A2.7B (24 blocks) with decoder_sparse_step 2: blocks 1, 3, ..., 23 carry the experts
  // ((i + 1) % 2 == 0, transformers' Qwen2MoeDecoderLayer), the others Qwen2MoeMLP of intermediate_size.
  const model::model every = model::from_hf_config(hf("qwen1.5-moe-a2.7b.json"), "x");
  auto alternate_config = hf("qwen1.5-moe-a2.7b.json");
  alternate_config["decoder_sparse_step"] = 2;
  const model::model alternate = model::from_hf_config(alternate_config, "x");
  int dense = 0;
  for (std::size_t v = 1; v + 1 < alternate.size(); ++v) {
    const bool moe = v % 2 == 0;  // block i = v - 1 carries experts when (i + 1) % 2 == 0
    CHECK(alternate.kind_at(v).dense_mlp == !moe);
    dense += alternate.kind_at(v).dense_mlp ? 1 : 0;
  }
  CHECK(dense == 12);
  // Twelve expert blocks exchanged for dense ones: the parameter count moves by twelve times their
  // difference, each block's parameters as built.
  const model::layer_shape shape{1, 4096, 1, false, 2};
  const auto moe_block = model::block_layer(every.config, shape);
  const auto dense_block = model::block_layer(every.config.without_experts(), shape);
  CHECK(static_cast<std::int64_t>(model::parameter_count(every)) -
            static_cast<std::int64_t>(model::parameter_count(alternate)) ==
        12 * (model::layer_params(moe_block, true) - model::layer_params(dense_block, true)));
  // DeepSeekMoE 16B (28 blocks, the first dense) with moe_layer_freq 2: blocks i >= 1 with i % 2 == 0
  // (transformers' DeepseekV3DecoderLayer): 2, 4, ..., 26, thirteen expert blocks.
  auto ds = hf("deepseek-moe-16b-base.json");
  ds["moe_layer_freq"] = 2;
  const model::model freq = model::from_hf_config(ds, "x");
  int experts = 0;
  for (std::size_t v = 1; v + 1 < freq.size(); ++v) {
    const auto i = static_cast<std::int64_t>(v - 1);
    CHECK(freq.kind_at(v).dense_mlp == !(i >= 1 && i % 2 == 0));
    experts += freq.kind_at(v).dense_mlp ? 0 : 1;
  }
  CHECK(experts == 13);
  // Qwen-MoE's mlp_only_layers [0, 5, 23]: those three blocks dense, the others (decoder_sparse_step 1) with
  // experts, whatever the step; the parameters move by three blocks' difference.
  auto listed_config = hf("qwen1.5-moe-a2.7b.json");
  listed_config["mlp_only_layers"] = nlohmann::json::array({0, 5, 23});
  const model::model listed = model::from_hf_config(listed_config, "x");
  for (std::size_t v = 1; v + 1 < listed.size(); ++v) {
    const auto i = static_cast<std::int64_t>(v - 1);
    CHECK(listed.kind_at(v).dense_mlp == (i == 0 || i == 5 || i == 23));
  }
  CHECK(static_cast<std::int64_t>(model::parameter_count(every)) -
            static_cast<std::int64_t>(model::parameter_count(listed)) ==
        3 * (model::layer_params(moe_block, true) - model::layer_params(dense_block, true)));
  // An interleave with no expert block left, or an offset outside the step, is refused.
  model::transformer_config c = every.config;
  c.moe_every = 2;
  c.moe_offset = 2;
  CHECK_THROWS_WITH(model::make_model(c), Catch::Contains("moe_offset < N"));
}

TEST_CASE("a rank computes top_k of the experts' work per token at every expert-parallel size", "[moe]") {
  const model::model m = zoo::get("mixtral-8x7b");
  const std::int64_t tokens = 2 * 4096;
  for (const int tp : {1, 2, 4}) {
    for (const int ep : {1, 2, 4, 8}) {
      INFO("tp " << tp << " ep " << ep);
      const auto l = model::layer_at(m, 1, shape_of(tp, ep, 2));
      const auto* up = find_op(l, "expert_up");
      const auto* down = find_op(l, "expert_down");
      REQUIRE(up != nullptr);
      REQUIRE(down != nullptr);
      CHECK(up->expert);
      CHECK(up->gemm.batch == 8 / ep);
      // Balanced routing: each of the rank's 8 / ep experts gets tokens * 2 * ep / 8 token slots, so a
      // rank's experts do 2 x (one expert's work on every token of its tensor-parallel group) / tp.
      const double expert_flops = model::flops_of(*up).value() + model::flops_of(*down).value();
      CHECK(expert_flops == Approx(2.0 * static_cast<double>(tokens) * 2.0 * mixtral_expert / tp));
      CHECK(model::layer_expert_params(l) == 8 / ep * mixtral_expert / tp);
      // Dispatch and combine: one all-to-all each over the ep ranks, of the rank's tokens x top_k.
      int exchanges = 0;
      for (const auto& o : l.ops) {
        if (o.kind != model::op_kind::all_to_all) continue;
        ++exchanges;
        CHECK(o.group == ep);
        CHECK(o.out_elements == tokens / tp * 2 * 4096);
      }
      CHECK(exchanges == (ep > 1 ? 2 : 0));
      // The router stays in bf16 under FP8; the experts run in FP8.
      auto fp8 = shape_of(tp, ep, 2);
      fp8.fp8 = true;
      const auto f = model::layer_at(m, 1, fp8);
      CHECK_FALSE(find_op(f, "router")->fp8);
      CHECK(find_op(f, "expert_up")->fp8);
    }
  }
}

TEST_CASE("the capacity factor pads every expert to its share of tokens times the factor", "[moe]") {
  auto c = zoo::get("mixtral-8x7b").config;
  c.capacity_factor = 1.25;
  const auto l = model::block_layer(c, shape_of(1, 4));
  // 4096 tokens x 2 slots x 4 ranks / 8 experts x 1.25 = 5120 per expert; 4096 x 2 x 1.25 slots sent.
  CHECK(find_op(l, "expert_up")->gemm.m == 5120);
  CHECK(find_op(l, "dispatch")->out_elements == 4096LL * 2 * 5 / 4 * 4096);
}

TEST_CASE("expert parallelism: states, the optimizer's shards and the all-to-all time", "[moe]") {
  const model::model m = zoo::get("mixtral-8x7b");
  const hw::device h100 = *hw::find_preset("h100-sxm");
  train::training_knobs k;
  k.global_batch = 64;
  k.microbatch = 1;
  k.fused_attention = true;
  k.distributed_optimizer = true;
  k.sequence = 4096;
  const train::parallelism dense_plan{1, 4, 16, 1, 1};
  const train::parallelism ep_plan{1, 4, 16, 1, 8};
  const auto c = phaze::test::cluster_of(h100, 64);
  const auto stage = train::uniform_stage(m, 4, 1);
  const auto a = train::stage_memory(m, dense_plan, k, stage, 1);
  const auto b = train::stage_memory(m, ep_plan, k, stage, 1);
  // 8 blocks per stage; with ep 8 a rank holds one expert of each instead of eight.
  const double blocks = 8.0;
  const auto per = train::state_bytes_per_parameter(k.precision, k.opt);
  const double removed = blocks * 7.0 * static_cast<double>(mixtral_expert);
  CHECK((a.weights - b.weights).value() == Approx(removed * per.weights));
  CHECK((a.gradients - b.gradients).value() == Approx(removed * per.gradients));
  // The distributed optimizer: dense state over 16 ranks; the experts' over 16 / 8 = 2.
  const double expert_ep = blocks * static_cast<double>(mixtral_expert);
  const double dense_params =
      (a.weights.value() / per.weights) - blocks * 8.0 * static_cast<double>(mixtral_expert);
  CHECK(b.optimizer.value() == Approx(dense_params * per.optimizer / 16.0 + expert_ep * per.optimizer / 2.0));
  CHECK(a.optimizer.value() == Approx((dense_params + 8.0 * expert_ep) * per.optimizer / 16.0));

  // The all-to-all: per block and pass two exchanges of the rank's 4096 x 2 token slots of 4096 bf16 values,
  // (ep - 1) / ep of them over the route of 8 ranks (one DGX node here: NVLink).
  const train::step_model sm{c, k};
  const train::plan_shape where{1, 4, 16, 16, 1, 8};
  const cost::all_to_all_routes routes = sm.expert_parallel_routes(where);
  REQUIRE(routes.local == 8);  // the whole group in one DGX node
  const cluster::route nvlink = routes.inside;
  const auto l = model::layer_at(m, 1, train::layer_shape_of(m, ep_plan, k));
  const auto [fwd, bwd] = train::detail::expert_parallel_exposed(l, routes);
  const double message = 4096.0 * 2 * 4096 * 2;
  const double one = 7.0 / 8.0 * message / (nvlink.hop.bandwidth.value() * nvlink.efficiency.send_recv) +
                     7.0 * nvlink.hop.latency.value();
  CHECK(fwd.value() == Approx(2.0 * one));
  CHECK(bwd.value() == Approx(2.0 * one));
  // Over two nodes (ep 16 at tp 1): 7 / 16 of a rank's tokens over NVLink and 8 / 16 over its own network
  // interface at once; the interface sets the time.
  const train::plan_shape wide{1, 4, 16, 16, 1, 16};
  const cost::all_to_all_routes two = sm.expert_parallel_routes(wide);
  REQUIRE(two.local == 8);
  const cluster::route nic = two.across;
  CHECK(nic.hop.bandwidth < nvlink.hop.bandwidth);
  const double in = 7.0 / 16.0 * message / (nvlink.hop.bandwidth.value() * nvlink.efficiency.send_recv);
  const double out = 8.0 / 16.0 * message / (nic.hop.bandwidth.value() * nic.efficiency.send_recv);
  CHECK(out > in);
  CHECK(cost::all_to_all_time(phaze::bytes{message}, 16, two).value() ==
        Approx(out + 15.0 * std::max(nic.hop.latency.value(), nvlink.hop.latency.value())));
  // The whole step: experts spread over 8 ranks cut the optimizer's memory; the exchange costs time.
  const sched::schedule_cache cache;
  const auto e1 = train::estimate_step(m, c, dense_plan, k, cache);
  const auto e8 = train::estimate_step(m, c, ep_plan, k, cache);
  CHECK(e8.peak_memory < e1.peak_memory);
  CHECK(e8.breakdown.tp_comm > e1.breakdown.tp_comm);
}

TEST_CASE("expert tensor parallelism below tp: the same expert work and state per rank, no gather",
          "[moe][etp]") {
  // Qwen3-30B-A3B's experts (128 of 768, top 8) at tp 2 with sequence parallelism: etp 2 with ep 16, or
  // etp 1 with ep 32 (MoE parallel folding: the expert groups carved from tp x dp). Either way a rank holds
  // 128 x 768 / 32 of the experts' width and does the same expert work.
  const model::model m = zoo::get("qwen3-30b-a3b");
  auto folded = shape_of(2, 32);
  folded.etp = 1;
  const auto a = model::layer_at(m, 1, shape_of(2, 16));
  const auto b = model::layer_at(m, 1, folded);
  CHECK(model::layer_expert_params(a) == model::layer_expert_params(b));
  const auto work = [](const model::layer& l) {
    return model::flops_of(*find_op(l, "expert_up")).value() +
           model::flops_of(*find_op(l, "expert_down")).value();
  };
  CHECK(work(a) == Approx(work(b)).epsilon(1e-12));
  CHECK(find_op(b, "expert_up")->gemm.batch == 4);
  CHECK(find_op(b, "expert_up")->gemm.n == 2 * 768);  // swiglu's gate and up, whole
  // etp 1: each rank's experts work on the tokens it received, no gather over the tensor-parallel ranks.
  CHECK(find_op(a, "experts_enter") != nullptr);
  CHECK(find_op(b, "experts_enter") == nullptr);
  CHECK(find_op(b, "experts_exit") == nullptr);
  CHECK(find_op(b, "dispatch")->group == 32);

  // The step: ep 32 at tp 2, dp 16 is a plan only with etp 1, and its experts' states are sharded over
  // tp x dp / (ep x etp) = 1 rank.
  train::training_knobs k;
  k.global_batch = 64;
  k.microbatch = 1;
  k.sequence = 4096;
  k.fused_attention = true;
  k.sequence_parallel = true;
  k.distributed_optimizer = true;
  CHECK_THAT(input_error_of([&] {
               train::validate(m, train::parallelism{2, 1, 16, 1, 32}, k, 32);
             }),
             Catch::Contains("`etp` 1"));
  const train::parallelism p{2, 1, 16, 1, 32, 1};
  CHECK_NOTHROW(train::validate(m, p, k, 32));
  CHECK(train::plan_shape{2, 1, 16, 2, 1, 32, 1}.expert_gradient_ranks() == 1);
  CHECK(train::plan_shape{2, 1, 16, 2, 1, 16}.expert_gradient_ranks() == 1);
  CHECK(train::plan_shape{2, 1, 16, 2, 1, 8, 1}.expert_gradient_ranks() == 4);
  const sched::schedule_cache cache;
  const auto c = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), 32);
  const auto e = train::estimate_step(m, c, p, k, cache);
  CHECK(e.time_per_batch.value() > 0.0);
  // etp must divide tp, and a dense model has no experts to fold.
  CHECK_THAT(input_error_of([&] {
               train::validate(m, train::parallelism{2, 1, 16, 1, 16, 3}, k, 32);
             }),
             Catch::Contains("divisor of the tensor-parallel width"));
  CHECK_THAT(input_error_of([&] {
               train::validate(zoo::get("llama3-8b"), train::parallelism{2, 1, 4, 1, 1, 1}, k, 8);
             }),
             Catch::Contains("mixture-of-experts model"));
}

TEST_CASE("expert parallelism refuses what Megatron-Core would not run", "[moe]") {
  const model::model mixtral = zoo::get("mixtral-8x7b");
  train::training_knobs k;
  k.global_batch = 48;
  k.microbatch = 1;
  k.fused_attention = true;
  CHECK_THAT(input_error_of([&] {
               train::validate(mixtral, train::parallelism{1, 1, 6, 1, 3}, k, 6);
             }),
             Catch::Contains("divide the number of routed experts"));
  CHECK_THAT(input_error_of([&] {
               train::validate(mixtral, train::parallelism{1, 1, 4, 1, 8}, k, 4);
             }),
             Catch::Contains("divide the data-parallel size"));
  // With etp = tp = 1 the folding changes nothing: ep 8 over dp 4 stays refused.
  CHECK_THAT(input_error_of([&] {
               train::validate(mixtral, train::parallelism{1, 1, 4, 1, 8, 1}, k, 4);
             }),
             Catch::Contains("divide the data-parallel size"));
  CHECK_THAT(input_error_of([&] {
               train::validate(zoo::get("llama3-8b"), train::parallelism{1, 1, 8, 1, 8}, k, 8);
             }),
             Catch::Contains("mixture-of-experts model"));
  CHECK_THAT(input_error_of([&] {
               train::validate(mixtral, train::parallelism{2, 1, 4, 1, 1}, k, 8);
             }),
             Catch::Contains("sequence parallelism"));
  k.sequence_parallel = true;
  CHECK_NOTHROW(train::validate(mixtral, train::parallelism{2, 1, 4, 1, 4}, k, 8));
}
