// Hybrid Mamba-2 / attention / MLP / mixture-of-experts models (transformer_config::hybrid_pattern):
// Nemotron-H 8B and Nemotron 3 Nano imported from their config.json, their parameters and a Mamba-2 block's
// FLOPs against closed forms written here from the papers and Megatron-LM, and the checks of their rules.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/input_error_of.hpp"
#include "phaze/io/describe.hpp"
#include "phaze/model/hf_config.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/train/knobs.hpp"

using namespace phaze;
using phaze::testing::input_error_of;

namespace {

nlohmann::json hybrid_json(const std::string& file) {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/hf/" + file);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

model::model hybrid_model(const std::string& file) {
  return model::from_hf_config(hybrid_json(file));
}

/// Parameters of every node of `m` (tied ones counted once).
double total_params(const model::model& m) {
  const model::layer_shape s{1, 1024, 1, false, 2};
  double total = 0.0;
  for (std::size_t i = 0; i < m.size(); ++i)
    total += static_cast<double>(model::layer_params(model::layer_at(m, i, s)));
  return total;
}

/// The nodes of `m` whose kind carries `symbol`.
std::int64_t nodes_of(const model::model& m, char symbol) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < m.size(); ++i) n += m.kind_at(i).hybrid == symbol ? 1 : 0;
  return n;
}

/// A Mamba-2 block's parameters from its sizes (Megatron-Core's MambaMixer, mamba_mixer.py): the pre-norm,
/// the input projection to z, x, B, C and dt, the convolution's taps and bias over x, B and C, A, D and the
/// dt bias per head, the gated norm over d_inner, the output projection.
double mamba_block_params(const model::transformer_config& c) {
  const double h = static_cast<double>(c.hidden);
  const double inner = static_cast<double>(c.mamba_inner());
  const double gn = static_cast<double>(c.mamba_groups * c.mamba_state);
  const double heads = static_cast<double>(c.mamba_heads);
  return h + h * (2.0 * inner + 2.0 * gn + heads) +
         (inner + 2.0 * gn) * static_cast<double>(c.mamba_conv + 1) + 3.0 * heads + inner + inner * h;
}

}  // namespace

TEST_CASE("Nemotron-H and Nemotron 3 configs import as their hybrid patterns' blocks", "[model][hybrid]") {
  const auto nano = hybrid_model("nemotron-3-nano-30b-a3b.json");
  CHECK(nano.config.hybrid());
  CHECK(nano.config.layers == 52);
  CHECK(nodes_of(nano, 'M') == 23);
  CHECK(nodes_of(nano, 'E') == 23);
  CHECK(nodes_of(nano, '*') == 6);
  CHECK(nano.config.experts == 128);
  CHECK(nano.config.top_k == 6);
  CHECK(nano.config.shared_expert_ffn == 3712);
  CHECK(nano.config.mamba_inner() == 4096);
  CHECK(nano.config.mlp == model::mlp_kind::squared_relu);
  CHECK(!nano.config.tied_embeddings);
  // Only the 'E' blocks carry experts.
  for (std::int64_t i = 0; i < nano.config.layers; ++i)
    CHECK(nano.config.moe_block(i) == (nano.config.block_symbol(i) == 'E'));
  const auto h8 = hybrid_model("nemotron-h-8b-base-8k.json");
  CHECK(nodes_of(h8, 'M') == 24);
  CHECK(nodes_of(h8, '-') == 24);
  CHECK(nodes_of(h8, '*') == 4);
  CHECK(h8.config.head_dim == 0);  // attention_head_dim 128 = 4096 / 32
  CHECK(h8.config.experts == 0);
}

TEST_CASE("Nemotron 3 Nano has its published 31.6B parameters, 3.6B of them active", "[model][hybrid]") {
  // NVIDIA's Nemotron 3 Nano model card and report: 31.6B parameters in total, about 3.2B active per token
  // (3.6B with the embeddings).
  const auto nano = hybrid_model("nemotron-3-nano-30b-a3b.json");
  const auto& c = nano.config;
  const double total = total_params(nano);
  CHECK(total == Approx(31.6e9).epsilon(0.005));
  // Active: all but the routed experts a token does not reach (experts - top_k of each 'E' block's).
  const double one_expert = 2.0 * static_cast<double>(c.hidden * c.expert_ffn);  // squared ReLU: up, down
  const double idle = static_cast<double>(c.blocks_of('E') * (c.experts - c.top_k)) * one_expert;
  CHECK(total - idle == Approx(3.6e9).epsilon(0.02));
}

TEST_CASE("a Mamba-2 block's parameters and FLOPs equal their closed forms", "[model][hybrid]") {
  const auto h8 = hybrid_model("nemotron-h-8b-base-8k.json");
  const auto& c = h8.config;
  std::size_t node = 1;
  while (h8.kind_at(node).hybrid != 'M') ++node;
  const std::int64_t tokens = 8192;
  for (const int tp : {1, 2, 8}) {
    INFO("tp " << tp);
    const model::layer_shape s{1, tokens, tp, tp > 1, 2};
    const model::layer l = model::layer_at(h8, node, s);
    const double t = static_cast<double>(tp);
    // Parameters: the norm replicated, the rest split over tp.
    const double h = static_cast<double>(c.hidden);
    CHECK(static_cast<double>(model::layer_params(l)) == Approx(h + (mamba_block_params(c) - h) / t));
    // The projections' forward FLOPs as Megatron-LM counts them (training.py, mamba_layer_flops at
    // d98e8a64dd: 2 T h (2 d_in + 2 G N + heads) + 2 T d_in h, d_in = 2 h, which Nemotron-H 8B's 128 heads
    // of 64 are), plus the chunked scan's four GEMMs per chunk of Q tokens (Dao and Gu 2024, section 6): the
    // groups' C B^T (2 Q N per token and group), the heads' scores times x (2 Q P), their states B^T x and
    // the states read out by C (2 N P each), per token and head.
    const double tk = static_cast<double>(tokens);
    const double d_in = 2.0 * h;
    const double g = static_cast<double>(c.mamba_groups), n = static_cast<double>(c.mamba_state);
    const double heads = static_cast<double>(c.mamba_heads), p = static_cast<double>(c.mamba_head_dim);
    const double q = static_cast<double>(c.mamba_chunk);
    const double projections = 2.0 * tk * h * (2.0 * d_in + 2.0 * g * n + heads) + 2.0 * tk * d_in * h;
    const double scan = tk * (2.0 * g * q * n + heads * (2.0 * q * p + 4.0 * n * p));
    CHECK(model::forward_matmul_flops(l).value() == Approx((projections + scan) / t).epsilon(1e-9));
    // The backward: twice the forward's GEMM work.
    CHECK(model::backward_matmul_flops(l).value() == Approx(2.0 * model::forward_matmul_flops(l).value()));
  }
}

TEST_CASE("hybrid patterns and Mamba-2 sizes are checked", "[model][hybrid]") {
  auto j = hybrid_json("nemotron-3-nano-30b-a3b.json");
  auto with = [&](const std::string& field, const nlohmann::json& v) {
    auto k = j;
    k[field] = v;
    return input_error_of([&] { model::from_hf_config(k); });
  };
  CHECK_THAT(with("hybrid_override_pattern", "MEM"), Catch::Contains("one per block"));
  CHECK_THAT(with("hybrid_override_pattern", std::string(51, 'M') + "G"), Catch::Contains("'G'"));
  CHECK_THAT(with("mlp_hidden_act", "silu"), Catch::Contains("relu2"));
  CHECK_THAT(with("n_groups", 5), Catch::Contains("groups dividing the heads"));
  {
    auto k = j;
    k.erase("ssm_state_size");
    CHECK_THAT(input_error_of([&] { model::from_hf_config(k); }), Catch::Contains("ssm_state_size"));
  }
  const auto nano = hybrid_model("nemotron-3-nano-30b-a3b.json");
  // tp must divide the Mamba heads and groups (one group: tp 2 cannot).
  auto one_group = nano.config;
  one_group.mamba_groups = 1;
  model::layer_shape s{1, 1024, 2, true, 2};
  CHECK_NOTHROW(model::validate_model_shape(nano, s));
  CHECK_THAT(input_error_of([&] { model::validate_model_shape(model::make_model(one_group), s); }),
             Catch::Contains("Mamba-2 heads and groups"));
  s.tp = 1;
  s.sequence_parallel = false;
  s.cp = 2;
  s.fused_attention = true;
  CHECK_THAT(input_error_of([&] { model::validate_model_shape(nano, s); }), Catch::Contains("`cp` 1"));
  // Experts blocks without experts, and experts without 'E' blocks.
  auto c = nano.config;
  c.experts = 0;
  CHECK_THAT(input_error_of([&] { model::make_model(c); }), Catch::Contains("'E'"));
  c = nano.config;
  c.mtp_layers = 1;
  CHECK_THAT(input_error_of([&] { model::make_model(c); }), Catch::Contains("layer pattern"));
  // Sizes past phaze's limits, and biases on the mixers' projections, are refused naming them.
  CHECK_THAT(with("mamba_num_heads", 1 << 20), Catch::Contains("Mamba-2 head count"));
  CHECK_THAT(with("chunk_size", 1 << 24), Catch::Contains("chunk size"));
  CHECK_THAT(with("use_bias", true), Catch::Contains("Mamba-2 projections"));
  CHECK_THAT(with("mamba_proj_bias", true), Catch::Contains("Mamba-2 projections"));
  {
    auto k = j;
    k.erase("mamba_num_heads");  // NemotronHConfig's default, 128 heads
    CHECK(model::from_hf_config(k).config.mamba_heads == 128);
  }
  // A dense variant of the model turns its expert blocks into MLP blocks.
  const auto dense = nano.config.without_experts();
  CHECK(dense.blocks_of('E') == 0);
  CHECK(dense.blocks_of('-') == 23);
  CHECK_NOTHROW(model::make_model(dense));
}

TEST_CASE("the zoo's Nemotron-H 8B and Nemotron 3 Nano are their configs", "[model][hybrid][zoo]") {
  // The zoo entries and the imported config.json build the same layers (names aside).
  for (const auto& [zoo_name, file] :
       {std::pair{"nemotron-h-8b", "nemotron-h-8b-base-8k.json"},
        std::pair{"nemotron-3-nano-30b-a3b", "nemotron-3-nano-30b-a3b.json"}}) {
    INFO(zoo_name);
    auto imported = hybrid_model(file).config;
    imported.name = zoo_name;
    const auto zoo_config = phaze::zoo::get(zoo_name).config;
    CHECK(zoo_config.hybrid_pattern == imported.hybrid_pattern);
    CHECK(total_params(phaze::zoo::get(zoo_name)) == total_params(model::make_model(imported)));
    const model::layer_shape s{1, 8192, 1, false, 2};
    const auto a = phaze::zoo::get(zoo_name);
    const auto b = model::make_model(imported);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(model::layer_at(a, i, s) == model::layer_at(b, i, s));
  }
}

TEST_CASE("a Mamba-2 chunk longer than the sequence costs the sequence's one chunk", "[model][hybrid]") {
  auto c = hybrid_model("nemotron-h-8b-base-8k.json").config;
  auto mixer_flops = [](const model::transformer_config& cfg, std::int64_t sequence) {
    const auto m = model::make_model(cfg);
    std::size_t node = 1;
    while (m.kind_at(node).hybrid != 'M') ++node;
    return model::forward_matmul_flops(model::layer_at(m, node, {1, sequence, 1, false, 2})).value();
  };
  const double at_128 = mixer_flops(c, 512);
  c.mamba_chunk = 512;
  const double at_sequence = mixer_flops(c, 512);
  c.mamba_chunk = 65536;
  CHECK(mixer_flops(c, 512) == Approx(at_sequence));  // not 128 times the sequence's work
  CHECK(at_sequence > at_128);                        // longer chunks: more work in their Q x Q scores
}

TEST_CASE("describe and the per-op policy know a hybrid's mixers", "[model][hybrid]") {
  // Two groups: attention splits 8 ways, the mixers do not; describe leaves the tp-8 row out, not throwing.
  auto j = hybrid_json("nemotron-h-8b-base-8k.json");
  j["n_groups"] = 2;
  const auto two_groups = model::from_hf_config(j);
  CHECK_FALSE(model::splits_over(two_groups, 8));
  CHECK(model::splits_over(two_groups, 2));
  const auto s = phaze::io::describe(two_groups);
  CHECK_FALSE(s.activation_bytes_per_layer_split.has_value());
  CHECK(s.hybrid.find("24 Mamba-2") != std::string::npos);
  CHECK(s.hybrid_pattern == two_groups.config.hybrid_pattern.view());
  nlohmann::json described = s;
  CHECK(described.at("hybrid_pattern") == s.hybrid_pattern);
  CHECK_FALSE(nlohmann::json(phaze::io::describe(phaze::zoo::get("llama2-7b"))).contains("hybrid_pattern"));
  // torchtitan's per-op checkpointing has no Mamba-2 mixers.
  phaze::train::training_knobs k;
  k.global_batch = 8;
  k.fused_attention = true;
  k.recompute = model::recompute::selective;
  k.recompute_modules = model::recompute_module::op;
  CHECK_THAT(input_error_of([&] {
               phaze::train::validate(hybrid_model("nemotron-h-8b-base-8k.json"), {1, 1, 8}, k, 8);
             }),
             Catch::Contains("Mamba-2"));
}
