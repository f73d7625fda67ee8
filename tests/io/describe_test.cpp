// Tests of phaze/io/describe.hpp: the model summary against closed forms from the papers, its JSON and text.
#include "phaze/io/describe.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "phaze/model/model.hpp"
#include "phaze/model/zoo.hpp"

using phaze::io::describe;

namespace {
/// Narayanan et al. (SC'21), eq. 3: model FLOPs of one iteration are 72 B s l h^2 (1 + s/6h + V/12lh)
/// for a GPT with ffn = 4h; per token divide by B s.
double narayanan_training_flops_per_token(double l, double h, double s, double v) {
  return 72.0 * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
}

/// Korthikanti et al. (2022), section 4.1: a GPT block keeps s b h (34 + 5 a s / h) bytes (16-bit
/// activations, dropout masks one byte), s b h 34 with selective recomputation and 2 s b h (its input) with
/// full.
double korthikanti_bytes(double s, double h, double a, double t) {
  return s * h * (34.0 + 5.0 * a * s / h) / t;
}
}  // namespace

TEST_CASE("describe reports Llama-2-7B's parameters and architecture", "[io][describe]") {
  const auto s = describe(phaze::zoo::llama2_7b(), "card");
  CHECK(s.name == "llama2-7b");
  CHECK(s.source == "card");
  CHECK(s.family == "llama");
  CHECK(s.parameters == 6'738'415'616);
  CHECK_FALSE(s.tied_embeddings);
  CHECK(s.layers == 32);
  CHECK(s.hidden == 4096);
  CHECK(s.heads == 32);
  CHECK(s.kv_heads == 32);
  CHECK(s.head_dim == 128);
  CHECK(s.ffn == 11008);
  CHECK(s.vocab == 32000);
  CHECK(s.sequence == 4096);
  CHECK(s.norm == "rmsnorm");
  CHECK(s.mlp == "swiglu");
  CHECK(s.positions == "rotary");
}

TEST_CASE("describe counts GPT-2 XL's tied output projection once", "[io][describe]") {
  const auto s = describe(phaze::zoo::gpt2_xl());
  CHECK(s.parameters == 1'557'611'200);
  CHECK(s.tied_embeddings);
  REQUIRE(s.layer_kinds.size() == 3);
  const auto& head = s.layer_kinds.back();
  CHECK(head.role == "head");
  CHECK(head.tied_parameters == 50257 * 1600);
  // 25 heads: tp = 8 cannot split the block.
  CHECK_FALSE(s.activation_bytes_per_layer_split.has_value());
}

TEST_CASE("FLOPs per token match Narayanan et al.'s closed form for GPT-3", "[io][describe]") {
  for (const std::int64_t seq : {2048, 4096}) {
    const auto m = phaze::model::with_sequence(phaze::zoo::gpt3_175b(), seq);
    const auto s = describe(m);
    CHECK(s.sequence == seq);
    const double expected = narayanan_training_flops_per_token(96, 12288, static_cast<double>(seq), 50257);
    CHECK(s.training_flops_per_token().value() == Approx(expected).epsilon(1e-12));
    // Every forward GEMM has two backward GEMMs of the same size.
    CHECK(s.backward_flops_per_token.value() ==
          Approx(2.0 * s.forward_flops_per_token.value()).epsilon(1e-12));
    CHECK(s.forward_vector_flops_per_token.value() > 0.0);
    CHECK(s.backward_vector_flops_per_token.value() > s.forward_vector_flops_per_token.value());
  }
}

TEST_CASE("activation memory per block matches Korthikanti et al. for GPT-3", "[io][describe]") {
  const auto s = describe(phaze::zoo::gpt3_175b());
  const double seq = 2048, h = 12288, a = 96;
  CHECK(s.activation_bytes_per_layer.none.value() == Approx(korthikanti_bytes(seq, h, a, 1)));
  CHECK(s.activation_bytes_per_layer.selective.value() == Approx(seq * h * 34.0));
  CHECK(s.activation_bytes_per_layer.full.value() == Approx(2.0 * seq * h));
  REQUIRE(s.activation_bytes_per_layer_split.has_value());
  CHECK(s.split_tp == 8);
  CHECK(s.activation_bytes_per_layer_split->none.value() == Approx(korthikanti_bytes(seq, h, a, 8)));
  CHECK(s.activation_bytes_per_layer_split->selective.value() == Approx(seq * h * 34.0 / 8));
  CHECK(s.activation_bytes_per_layer_split->full.value() == Approx(2.0 * seq * h / 8));
}

TEST_CASE("the distinct layers add up to the model's totals", "[io][describe]") {
  for (const auto& e : phaze::zoo::entries) {
    CAPTURE(e.name);
    const auto s = describe(phaze::model::make_model(e.config));
    // A hybrid model has a block kind per symbol of its layer pattern.
    const std::size_t block_kinds =
        e.config.hybrid()
            ? static_cast<std::size_t>((e.config.blocks_of('M') > 0) + (e.config.blocks_of('*') > 0) +
                                       (e.config.blocks_of('-') > 0) + (e.config.blocks_of('E') > 0))
            : 1;
    REQUIRE(s.layer_kinds.size() == 2 + block_kinds);
    std::int64_t count = 0, params = 0;
    double forward = 0.0;
    for (const auto& k : s.layer_kinds) {
      count += k.count;
      params += k.count * k.parameters;
      forward += static_cast<double>(k.count) * k.forward_flops_per_token.value();
      CHECK(k.ops > 0);
    }
    CHECK(count == s.layers + 2);
    CHECK(params == s.parameters);
    CHECK(forward == Approx(s.forward_flops_per_token.value()).epsilon(1e-12));
    CHECK(s.layer_kinds.front().role == "embedding");
    std::int64_t blocks = 0;
    for (std::size_t k = 1; k + 1 < s.layer_kinds.size(); ++k) {
      CHECK(s.layer_kinds[k].role == "block");
      blocks += s.layer_kinds[k].count;
    }
    CHECK(blocks == s.layers);
    CHECK(s.layer_kinds.back().role == "head");
  }
}

TEST_CASE("describe follows --seq and --vocab overrides", "[io][describe]") {
  const auto base = describe(phaze::zoo::llama2_7b());
  const auto longer = describe(phaze::model::with_sequence(phaze::zoo::llama2_7b(), 8192));
  CHECK(longer.sequence == 8192);
  CHECK(longer.parameters == base.parameters);  // rotary positions: no table grows
  CHECK(longer.forward_flops_per_token.value() > base.forward_flops_per_token.value());
  const auto bigger_vocab = describe(phaze::model::with_vocab(phaze::zoo::llama2_7b(), 64000));
  CHECK(bigger_vocab.vocab == 64000);
  CHECK(bigger_vocab.parameters == base.parameters + 2 * 32000 * 4096);  // embedding and untied head
}

TEST_CASE("the model summary converts to JSON with snake_case numeric fields", "[io][describe]") {
  const nlohmann::json j = describe(phaze::zoo::gpt3_175b(), "Brown et al. 2020");
  CHECK(j.at("name") == "gpt3-175b");
  CHECK(j.at("source") == "Brown et al. 2020");
  CHECK(j.at("parameters").is_number_integer());
  CHECK(j.at("tied_embeddings") == true);
  for (const char* key : {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "sequence"}) {
    CAPTURE(key);
    CHECK(j.at(key).is_number_integer());
  }
  CHECK(
      j.at("training_flops_per_token").get<double>() ==
      Approx(j.at("forward_flops_per_token").get<double>() + j.at("backward_flops_per_token").get<double>()));
  for (const char* mode : {"none", "selective", "full"}) {
    CAPTURE(mode);
    CHECK(j.at("activation_bytes_per_layer").at(mode).is_number_integer());
    CHECK(j.at("activation_bytes_per_layer_tp8_sp").at(mode).is_number_integer());
  }
  CHECK(j.at("activation_bytes_per_layer").at("full") == 2 * 2048 * 12288);
  REQUIRE(j.at("layer_kinds").size() == 3);
  CHECK(j.at("layer_kinds")[1].at("role") == "block");
  CHECK(j.at("layer_kinds")[1].at("count") == 96);

  const nlohmann::json gpt2_xl = describe(phaze::zoo::gpt2_xl());
  CHECK(gpt2_xl.at("activation_bytes_per_layer_tp8_sp").is_null());
}

TEST_CASE("the model summary prints as a table with its numbers and units", "[io][describe]") {
  const std::string text = to_table(describe(phaze::zoo::llama2_7b(), "Touvron et al. 2023"));
  CHECK(text.find("llama2-7b  (Touvron et al. 2023)") == 0);
  CHECK(text.find("6,738,415,616 (6.74B)") != std::string::npos);
  CHECK(text.find("tied input/output embeddings  no") != std::string::npos);
  CHECK(text.find("GFLOP") != std::string::npos);
  CHECK(text.find("GiB") != std::string::npos);
  CHECK(text.find("tp=8 + seq. parallel") != std::string::npos);
  CHECK(text.find(" \n") == std::string::npos);  // no trailing spaces

  const std::string tied = to_table(describe(phaze::zoo::gpt2_xl()));
  CHECK(tied.find("tied input/output embeddings  yes") != std::string::npos);
  CHECK(tied.find("(+80.4M tied)") != std::string::npos);
  CHECK(tied.find("n/a") != std::string::npos);
}

TEST_CASE("the zoo listing has every entry with its parameter count", "[io][describe]") {
  const auto models = phaze::io::describe_zoo();
  REQUIRE(models.size() == phaze::zoo::entries.size() + phaze::zoo::composite_entries.size());
  for (std::size_t i = 0; i < models.size(); ++i) {
    CAPTURE(models[i].name);
    CHECK(models[i].name == (i < phaze::zoo::entries.size()
                                 ? phaze::zoo::entries[i].name
                                 : phaze::zoo::composite_entries[i - phaze::zoo::entries.size()].name));
    CHECK(models[i].parameters == phaze::model::parameter_count(phaze::zoo::get(models[i].name)));
    CHECK_FALSE(models[i].source.empty());
  }
  const nlohmann::json j = models;
  REQUIRE(j.is_array());
  CHECK(j[0].at("name") == models[0].name);
  CHECK(j[0].at("parameters").is_number_integer());

  const std::string text = to_table(models);
  for (const auto& m : models) CHECK(text.find(m.name) != std::string::npos);
  CHECK(text.find("6.74B") != std::string::npos);
}
