// Tests of phaze/model/model.hpp: published parameter counts, the training-FLOP formula of Narayanan et al.,
// the layer graph, and the sequence/vocabulary overrides.
#include "phaze/model/model.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string_view>

#include "phaze/model/zoo.hpp"

using namespace phaze::model;
using model_t = phaze::model::model;
namespace zoo = phaze::zoo;
using phaze::input_error;

namespace {
struct published_count {
  std::string_view name;
  std::int64_t params;
  std::string_view source;
};

// Exact counts of the reference implementations (HF transformers `sum(p.numel() for p in model.parameters())`
// with tied embeddings counted once; the numbers quoted on the model cards and in the papers).
constexpr published_count exact_counts[] = {
    {"llama2-7b", 6'738'415'616, "Touvron et al. 2023; HF meta-llama/Llama-2-7b-hf"},
    {"llama2-13b", 13'015'864'320, "HF meta-llama/Llama-2-13b-hf"},
    {"llama2-70b", 68'976'648'192, "HF meta-llama/Llama-2-70b-hf"},
    {"llama3-8b", 8'030'261'248, "HF meta-llama/Meta-Llama-3-8B"},
    {"llama3-70b", 70'553'706'496, "HF meta-llama/Meta-Llama-3-70B"},
    {"gpt2", 124'439'808, "HF gpt2 (GPT2LMHeadModel, tied)"},
    {"gpt2-xl", 1'557'611'200, "HF gpt2-xl"},
    {"opt-350m", 331'196'416, "HF facebook/opt-350m"},
    {"opt-1.3b", 1'315'758'080, "HF facebook/opt-1.3b"},
};

double narayanan_flops(const transformer_config& c, std::int64_t global_batch) {
  // Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM"
  // (SC'21), section 5.1: F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) per iteration, no recomputation.
  const double B = static_cast<double>(global_batch), s = static_cast<double>(c.sequence);
  const double l = static_cast<double>(c.layers), h = static_cast<double>(c.hidden);
  const double V = static_cast<double>(c.vocab);
  return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}
}  // namespace

TEST_CASE("parameter counts equal the published counts exactly", "[model][params]") {
  for (const auto& p : exact_counts) {
    INFO(p.name << " (" << p.source << ")");
    CHECK(parameter_count(zoo::lookup(p.name)) == p.params);
  }
}

TEST_CASE("GPT-3 175B has 174.6e9 parameters (Brown et al. 2020, Table 2.1)", "[model][params]") {
  const auto params = static_cast<double>(parameter_count(zoo::gpt3_175b()));
  CHECK(params == Approx(174.6e9).epsilon(0.005));
}

TEST_CASE("BERT-Large: BertModel's 335,141,888 plus the pre-training heads", "[model][params]") {
  // HF bert-large-uncased BertModel (with pooler): 335,141,888 parameters. The zoo model also carries
  // BertForPreTraining's heads: the masked-LM transform (dense h*h + h, layernorm 2h), the decoder bias (V,
  // the decoder weight is tied to the word embedding) and the next-sentence classifier (2h + 2).
  constexpr std::int64_t h = 1024, V = 30522;
  constexpr std::int64_t bert_model = 335'141'888;
  constexpr std::int64_t heads = (h * h + h) + 2 * h + V + (2 * h + 2);
  const std::int64_t params = parameter_count(zoo::bert_large());
  CHECK(params == bert_model + heads);
  CHECK(static_cast<double>(params) == Approx(static_cast<double>(bert_model)).epsilon(0.005));
}

TEST_CASE("Megatron-LM GPT-2 sizes of Shoeybi et al. 2019, Table 1", "[model][params]") {
  // Table 1: 1.2B (h 1536, 40 layers), 2.5B (h 1920, 54 layers), 8.3B (h 3072, 72 layers). The paper rounds.
  CHECK(static_cast<double>(parameter_count(zoo::megatron_gpt2_40())) == Approx(1.2e9).epsilon(0.03));
  CHECK(static_cast<double>(parameter_count(zoo::megatron_gpt2_54())) == Approx(2.5e9).epsilon(0.03));
  CHECK(static_cast<double>(parameter_count(zoo::megatron_gpt2_72())) == Approx(8.3e9).epsilon(0.03));
}

TEST_CASE("training FLOPs per iteration follow Narayanan et al.'s formula for GPT-shaped models",
          "[model][flops]") {
  for (const auto name : {"gpt3-175b", "megatron-22b", "turing-530b", "megatron-1t", "gpt2-xl", "gpt2",
                          "megatron-gpt2-40", "megatron-gpt2-54", "megatron-gpt2-72"}) {
    const model_t m = zoo::lookup(name);
    for (std::int64_t batch : {1, 8, 512, 1536}) {
      INFO(name << " global batch " << batch);
      const double phaze_flops = training_flops_per_iteration(m, batch).value();
      CHECK(phaze_flops == Approx(narayanan_flops(m.config, batch)).epsilon(0.01));
      // The formula is exact for this architecture: phaze counts the same GEMMs (logits included).
      CHECK(phaze_flops == Approx(narayanan_flops(m.config, batch)).epsilon(1e-9));
    }
  }
  // Linear in the global batch.
  const model_t gpt3 = zoo::gpt3_175b();
  CHECK(training_flops_per_iteration(gpt3, 1536).value() ==
        1536.0 * training_flops_per_iteration(gpt3, 1).value());
}

TEST_CASE("backward matrix FLOPs are exactly twice the forward for every layer of every zoo model",
          "[model][flops]") {
  for (const auto& e : zoo::entries) {
    const model_t m = make_model(e.config);
    for (int tp : {1, 2, 4, 8}) {
      const auto& c = e.config;
      if (c.heads % tp != 0 || c.kv_heads_or_default() % tp != 0 || c.ffn % tp != 0) continue;
      for (bool sp : {false, true}) {
        for (const auto& d : distinct_layers(m)) {
          INFO(e.name << " tp " << tp << " sp " << sp << " role " << to_string(d.role));
          const layer l = layer_at(m, static_cast<std::size_t>(d.first_node), {2, 0, tp, sp, 2});
          CHECK(backward_matmul_flops(l) == 2.0 * forward_matmul_flops(l));
          if (d.role != layer_role::embedding) CHECK(forward_matmul_flops(l).value() > 0.0);
        }
        const auto t = totals(m, {2, 0, tp, sp, 2});
        CHECK(t.backward_matmul == 2.0 * t.forward_matmul);
        CHECK(t.backward_vector.value() > t.forward_vector.value());
      }
    }
  }
}

TEST_CASE("a transformer's layer graph is a chain: embedding, L identical blocks, head", "[model]") {
  for (const auto& e : zoo::entries) {
    const model_t m = make_model(e.config);
    const auto L = e.config.layers;
    INFO(e.name);
    REQUIRE(static_cast<std::int64_t>(m.size()) == L + 2);
    CHECK(m.role_at(0) == layer_role::embedding);
    CHECK(m.role_at(m.size() - 1) == layer_role::head);
    for (std::size_t i = 1; i + 1 < m.size(); ++i) CHECK(m.role_at(i) == layer_role::block);
    REQUIRE(m.edges.size() == m.size() - 1);
    for (std::size_t i = 0; i < m.edges.size(); ++i) {
      CHECK(m.edges[i].from == static_cast<std::int16_t>(i));
      CHECK(m.edges[i].to == static_cast<std::int16_t>(i + 1));
    }
    const auto d = distinct_layers(m);
    if (e.config.hybrid()) {
      // One block kind per symbol of the layer pattern; their nodes add up to the blocks.
      std::int64_t blocks = 0, symbols = 0;
      for (const char symbol : {'M', '*', '-', 'E'}) symbols += e.config.blocks_of(symbol) > 0 ? 1 : 0;
      REQUIRE(static_cast<std::int64_t>(d.size()) == 2 + symbols);
      for (const auto& k : d)
        if (k.role == layer_role::block) blocks += k.count;
      CHECK(blocks == L);
      continue;
    }
    REQUIRE(d.size() == 3);
    CHECK(d[0].role == layer_role::embedding);
    CHECK(d[0].count == 1);
    CHECK(d[0].first_node == 0);
    CHECK(d[1].role == layer_role::block);
    CHECK(d[1].count == L);
    CHECK(d[1].first_node == 1);
    CHECK(d[2].role == layer_role::head);
    CHECK(d[2].count == 1);
    CHECK(d[2].first_node == static_cast<std::int16_t>(L + 1));
    // layer_at builds the layer of the node's role.
    CHECK(layer_at(m, 0, {}).role == layer_role::embedding);
    CHECK(layer_at(m, static_cast<std::size_t>(L), {}).role == layer_role::block);
    CHECK(layer_at(m, static_cast<std::size_t>(L + 1), {}).role == layer_role::head);
    CHECK_THROWS(layer_at(m, static_cast<std::size_t>(L + 2), {}));
  }
}

TEST_CASE("totals sum the distinct layers times their counts (brute force over every node)", "[model]") {
  for (const auto name : {"gpt2", "llama2-7b", "bert-large", "opt-350m"}) {
    const model_t m = zoo::lookup(name);
    for (int tp : {1, 4}) {
      const layer_shape shape{1, 0, tp, tp > 1, 2};
      std::int64_t params = 0;
      double forward = 0.0;
      for (std::size_t i = 0; i < m.size(); ++i) {
        const layer l = layer_at(m, i, shape);
        params += layer_params(l);
        forward += forward_matmul_flops(l).value();
      }
      const auto t = totals(m, shape);
      INFO(name << " tp " << tp);
      CHECK(t.params == params);
      CHECK(t.forward_matmul.value() == Approx(forward).epsilon(1e-12));
    }
  }
}

TEST_CASE("model parameters split across tensor-parallel ranks", "[model][params]") {
  // Per-rank parameters times t recover the whole model exactly once the weights every rank holds whole
  // (norms, biases added after a collective, position tables) and the vocabulary padded to a multiple of t
  // are accounted for (Shoeybi et al. 2019, section 3).
  for (const auto name : {"gpt3-175b", "llama2-70b", "llama3-8b", "megatron-1t", "opt-1.3b", "gpt2"}) {
    const model_t m = zoo::lookup(name);
    const auto& c = m.config;
    const std::int64_t whole = parameter_count(m);
    for (int tp : {2, 4, 8}) {
      if (c.heads % tp != 0) continue;
      INFO(name << " tp " << tp);
      const layer_shape shape{1, 0, tp, false, 2};
      std::int64_t replicated = 0;
      for (std::size_t i = 0; i < m.size(); ++i)
        for (const op& o : layer_at(m, i, shape).ops)
          if (o.split == tp_split::replicated) replicated += o.params;
      const std::int64_t padded_rows = (tp - c.vocab % tp) % tp;
      const std::int64_t padding = padded_rows * c.embed_dim_or_default() * (c.tied_embeddings ? 1 : 2);
      const std::int64_t per_rank = totals(m, shape).params;
      CHECK(per_rank * tp == whole + (tp - 1) * replicated + padding);
      CHECK(static_cast<double>(per_rank * tp) == Approx(static_cast<double>(whole)).epsilon(0.03));
    }
  }
}

TEST_CASE("with_sequence and with_vocab override the training sequence and vocabulary", "[model]") {
  const model_t gpt2 = zoo::gpt2();
  const model_t longer = with_sequence(gpt2, 4096);
  CHECK(longer.config.sequence == 4096);
  CHECK(longer.config.max_positions == 4096);  // the learned position table grows to cover it
  // 4096 - 1024 extra position rows of width 768.
  CHECK(parameter_count(longer) == parameter_count(gpt2) + (4096 - 1024) * 768);
  const model_t shorter = with_sequence(gpt2, 512);
  CHECK(shorter.config.max_positions == 1024);  // a table never shrinks
  CHECK(parameter_count(shorter) == parameter_count(gpt2));
  // Rotary models have no position table: parameters do not depend on the sequence.
  const model_t llama = zoo::llama2_7b();
  CHECK(parameter_count(with_sequence(llama, 16384)) == parameter_count(llama));
  CHECK(with_sequence(llama, 16384).config.max_positions == llama.config.max_positions);
  // FLOPs follow the formula at the new sequence length.
  const model_t gpt3_8k = with_sequence(zoo::gpt3_175b(), 8192);
  CHECK(training_flops_per_iteration(gpt3_8k, 4).value() ==
        Approx(narayanan_flops(gpt3_8k.config, 4)).epsilon(1e-9));

  const model_t padded = with_vocab(gpt2, 50304);  // GPT-2's vocabulary padded to a multiple of 128
  CHECK(padded.config.vocab == 50304);
  CHECK(parameter_count(padded) == parameter_count(gpt2) + (50304 - 50257) * 768);
  const model_t llama_big_vocab = with_vocab(llama, 32064);  // untied: embedding and output both grow
  CHECK(parameter_count(llama_big_vocab) == parameter_count(llama) + 2 * 64 * 4096);

  CHECK_THROWS_AS(with_sequence(gpt2, 0), input_error);
  CHECK_THROWS_AS(with_vocab(gpt2, -1), input_error);
  // The original is untouched (values, not references).
  CHECK(gpt2 == zoo::gpt2());
}

TEST_CASE("make_model rejects models with more layers than a graph holds", "[model]") {
  transformer_config c = zoo::gpt2().config;
  c.layers = static_cast<std::int64_t>(max_model_layers) - 2;
  CHECK(make_model(c).size() == max_model_layers);
  c.layers += 1;
  // The readers' limit (limits::max_layers) is the graph's: the message names the count and the limit.
  CHECK_THROWS_WITH(make_model(c), Catch::Matchers::Contains("255, above 254") &&
                                       !Catch::Matchers::Contains("max_model_layers"));
}
