/// @file
/// Tests of model::from_hf_config: HuggingFace config.json files reproduce the zoo and published parameter
/// counts; bad files give input_errors that name the offending field.
#include <catch2/catch.hpp>

#include "../support/input_error_of.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "phaze/cost/attention.hpp"
#include "phaze/model/hf_config.hpp"
#include "phaze/model/zoo.hpp"

namespace {

using phaze::input_error;
using phaze::model::from_hf_config;
using phaze::model::parameter_count;
using json = nlohmann::json;

std::string hf_path(std::string_view file) {
  return std::string{PHAZE_TEST_DATA_DIR} + "/hf/" + std::string{file};
}

std::string read_text(std::string_view file) {
  std::ifstream in(hf_path(file));
  REQUIRE(in);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json read_config(std::string_view file) {
  return json::parse(read_text(file));
}

using phaze::testing::input_error_of;

/// Every architecture field of two configs, compared one by one so a failure names the field.
void require_same_architecture(const phaze::model::transformer_config& a,
                               const phaze::model::transformer_config& b) {
  CHECK(a.arch == b.arch);
  CHECK(a.hidden == b.hidden);
  CHECK(a.heads == b.heads);
  CHECK(a.kv_heads == b.kv_heads);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.ffn == b.ffn);
  CHECK(a.layers == b.layers);
  CHECK(a.vocab == b.vocab);
  CHECK(a.sequence == b.sequence);
  CHECK(a.max_positions == b.max_positions);
  CHECK(a.position_offset == b.position_offset);
  CHECK(a.token_types == b.token_types);
  CHECK(a.embed_dim == b.embed_dim);
  CHECK(a.norm == b.norm);
  CHECK(a.mlp == b.mlp);
  CHECK(a.positions == b.positions);
  CHECK(a.rotary_fraction == b.rotary_fraction);
  CHECK(a.rotary_base == b.rotary_base);
  CHECK(a.rope_scaling_factor == b.rope_scaling_factor);
  CHECK(a.bias == b.bias);
  CHECK(a.tied_embeddings == b.tied_embeddings);
  CHECK(a.pre_norm == b.pre_norm);
  CHECK(a.final_norm == b.final_norm);
  CHECK(a.parallel_residual == b.parallel_residual);
  CHECK(a.dropout == b.dropout);
  CHECK(a.causal == b.causal);
  CHECK(a.bert_heads == b.bert_heads);
  // The field list above must cover the struct: with the names made equal, the configs compare equal.
  auto renamed = a;
  renamed.name = b.name;
  CHECK(renamed == b);
}

struct zoo_case {
  std::string_view file;
  std::string_view zoo_name;
  std::string_view expected_name;  ///< `_name_or_path`, or the fallback name when the file has none
  std::int64_t published_params;   ///< HF's num_parameters(), or 0 when the brief names none
};

}  // namespace

TEST_CASE("from_hf_config reproduces every zoo model whose config.json is typed in", "[hf]") {
  const auto c = GENERATE(values<zoo_case>({
      {"llama-2-7b-hf.json", "llama2-7b", "meta-llama/Llama-2-7b-hf", 6'738'415'616},
      {"llama-2-70b-hf.json", "llama2-70b", "meta-llama/Llama-2-70b-hf", 68'976'648'192},
      {"meta-llama-3-8b.json", "llama3-8b", "fallback", 8'030'261'248},
      {"gpt2.json", "gpt2", "fallback", 0},
      {"gpt2-xl.json", "gpt2-xl", "fallback", 1'557'611'200},
      {"opt-350m.json", "opt-350m", "facebook/opt-350m", 331'196'416},
      {"opt-1.3b.json", "opt-1.3b", "facebook/opt-1.3b", 0},
      {"bert-large-uncased.json", "bert-large", "fallback", 0},
      // Typed from the Nemotron-4 15B Technical Report's Table 1 in NemotronConfig's field names.
      {"nemotron-4-15b.json", "nemotron4-15b", "fallback", 0},
  }));
  INFO(c.file);
  const auto imported = from_hf_config(read_config(c.file), "fallback");
  const auto zoo = phaze::zoo::lookup(c.zoo_name);
  CHECK(imported.config.name.view() == c.expected_name);
  require_same_architecture(imported.config, zoo.config);
  CHECK(imported.nodes == zoo.nodes);
  CHECK(imported.edges == zoo.edges);
  CHECK(parameter_count(imported) == parameter_count(zoo));
  if (c.published_params > 0) CHECK(parameter_count(imported) == c.published_params);
}

TEST_CASE("from_hf_config imports GPT-NeoX with parallel residuals, partial rotary and untied embeddings",
          "[hf]") {
  SECTION("gpt-neox-20b") {
    const auto m = from_hf_config(read_config("gpt-neox-20b.json"), "gpt-neox-20b");
    const auto& c = m.config;
    CHECK(c.name.view() == "gpt-neox-20b");
    CHECK(c.arch == phaze::model::family::neox);
    CHECK(c.hidden == 6144);
    CHECK(c.heads == 64);
    CHECK(c.layers == 44);
    CHECK(c.ffn == 24576);
    CHECK(c.vocab == 50432);
    CHECK(c.sequence == 2048);
    CHECK(c.rotary_fraction == 0.25);
    CHECK(c.parallel_residual);
    CHECK_FALSE(c.tied_embeddings);
    CHECK(c.bias);
    CHECK(c.final_norm);
    CHECK(c.pre_norm);
    CHECK(c.norm == phaze::model::norm_kind::layernorm);
    CHECK(c.mlp == phaze::model::mlp_kind::gelu);
    CHECK(c.positions == phaze::model::position_kind::rotary);
    CHECK_FALSE(c.dropout);  // the config has no dropout fields; GPTNeoXConfig defaults them to 0
    // HF GPTNeoXForCausalLM.num_parameters() for EleutherAI/gpt-neox-20b.
    const auto params = static_cast<double>(parameter_count(m));
    CHECK(std::abs(params - 20'554'567'680.0) / 20'554'567'680.0 < 0.005);
  }
  SECTION("pythia-160m") {
    const auto m = from_hf_config(read_config("pythia-160m.json"), "pythia-160m");
    CHECK(m.config.vocab == 50304);
    CHECK(m.config.layers == 12);
    // HF num_parameters() for EleutherAI/pythia-160m (the "160m" counts neither embedding matrix in full).
    const auto params = static_cast<double>(parameter_count(m));
    CHECK(std::abs(params - 162'322'944.0) / 162'322'944.0 < 0.005);
  }
}

TEST_CASE("from_hf_config keeps the rotary base and Llama 3.1's scaling, wherever the config writes them",
          "[hf]") {
  const auto base_of = [](const json& j) { return from_hf_config(j).config.rotary_base; };
  auto j = read_config("llama-2-7b-hf.json");
  j.erase("rope_theta");
  CHECK(base_of(j) == 10000.0);  // LlamaConfig's default
  j["rope_theta"] = 500000.0;
  CHECK(base_of(j) == 500000.0);
  // transformers v5 nests it in rope_parameters, with the scaling.
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 250000.0}, {"factor", 32.0}};
  CHECK(base_of(j) == 250000.0);
  CHECK(from_hf_config(j).config.rope_scaling_factor == 32.0);
  j.erase("rope_parameters");
  // Mixtral's default when absent is 1e6 (MixtralConfig); GPT-NeoX's field is rotary_emb_base.
  auto mixtral = j;
  mixtral["model_type"] = "mixtral";
  mixtral["num_local_experts"] = 8;
  mixtral["num_experts_per_tok"] = 2;
  CHECK(base_of(mixtral) == 1e6);
  // Llama 3.1 scaling from the 405B config; other scaling types (DeepSeek-V3's yarn) are not kept.
  const auto big = from_hf_config(read_config("llama-3.1-405b.json")).config;
  CHECK(big.rotary_base == 500000.0);
  CHECK(big.rope_scaling_factor == 8.0);
  CHECK(from_hf_config(read_config("deepseek-v3.json")).config.rope_scaling_factor == 0.0);
  // Nonsense names the field.
  for (const json& bad : {json(-1.0), json(0), json("1e4"), json(1e300)}) {
    j["rope_theta"] = bad;
    INFO(bad.dump());
    CHECK_THAT(input_error_of([&] { (void)from_hf_config(j); }), Catch::Contains("'rope_theta'"));
  }
  j["rope_theta"] = 10000.0;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 0.5}};
  CHECK_THAT(input_error_of([&] { (void)from_hf_config(j); }), Catch::Contains("'rope_scaling.factor'"));
}

TEST_CASE("from_hf_config names the model from _name_or_path, the fallback, or the model_type", "[hf]") {
  auto j = read_config("llama-2-7b-hf.json");
  CHECK(from_hf_config(j, "ignored").config.name.view() == "meta-llama/Llama-2-7b-hf");
  j.erase("_name_or_path");
  CHECK(from_hf_config(j, "my-llama").config.name.view() == "my-llama");
  CHECK(from_hf_config(j).config.name.view() == "llama");
  j["_name_or_path"] = "";
  CHECK(from_hf_config(j, "my-llama").config.name.view() == "my-llama");
}

TEST_CASE("from_hf_config infers model_type from architectures", "[hf]") {
  const auto file = GENERATE(as<std::string>{}, "llama-2-7b-hf.json", "gpt2.json", "opt-350m.json",
                             "bert-large-uncased.json", "pythia-160m.json");
  INFO(file);
  const auto j = read_config(file);
  auto without = j;
  without.erase("model_type");
  CHECK(from_hf_config(without, "x") == from_hf_config(j, "x"));
}

TEST_CASE("from_hf_config ignores fields it does not need", "[hf]") {
  auto j = read_config("gpt2.json");
  const auto plain = from_hf_config(j, "x");
  j["torch_dtype"] = "bfloat16";
  j["quantization_config"] = {{"bits", 4}, {"quant_method", "gptq"}};
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  j["some_future_field"] = json::array({1, "two", nullptr});
  j["n_inner"] = nullptr;
  CHECK(from_hf_config(j, "x") == plain);
}

TEST_CASE("from_hf_config honours the optional architecture fields", "[hf]") {
  using phaze::model::mlp_kind;
  SECTION("GPT-2 n_inner and tied embeddings") {
    auto j = read_config("gpt2.json");
    j["n_inner"] = 2048;
    CHECK(from_hf_config(j).config.ffn == 2048);
    j["activation_function"] = "relu";
    CHECK(from_hf_config(j).config.mlp == mlp_kind::relu);
    j.erase("n_positions");  // older configs give only n_ctx
    CHECK(from_hf_config(j).config.sequence == 1024);
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
    CHECK_FALSE(from_hf_config(j).config.dropout);
  }
  SECTION("Llama: missing num_key_value_heads means multi-head attention") {
    auto j = read_config("llama-2-7b-hf.json");
    j.erase("num_key_value_heads");
    CHECK(from_hf_config(j).config.kv_heads == 32);
  }
  SECTION("Llama: biases, tied embeddings and an explicit head_dim") {
    auto j = read_config("meta-llama-3-8b.json");
    const auto base = from_hf_config(j);
    j["head_dim"] = 128;  // equals hidden / heads: the same model
    CHECK(from_hf_config(j) == base);
    j["attention_bias"] = true;
    CHECK(from_hf_config(j).config.bias);
    CHECK(parameter_count(from_hf_config(j)) > parameter_count(base));
    j["attention_bias"] = false;
    j["mlp_bias"] = true;
    CHECK(from_hf_config(j).config.bias);
    j["mlp_bias"] = false;
    j["tie_word_embeddings"] = true;
    CHECK(parameter_count(base) - parameter_count(from_hf_config(j)) == 128256LL * 4096);
    j["tie_word_embeddings"] = false;
    j["head_dim"] = 256;  // wider heads than hidden / heads (Gemma-style)
    CHECK(from_hf_config(j).config.head_dim == 256);
  }
  SECTION("Mistral configs import as Llama with their sliding window") {
    auto j = read_config("llama-2-7b-hf.json");
    j["model_type"] = "mistral";
    j["sliding_window"] = 4096;
    auto m = from_hf_config(j);
    CHECK(m.config.arch == phaze::model::family::llama);
    CHECK(m.config.attention_window == 4096);
    m.config.attention_window = 0;
    m.config.name = phaze::zoo::llama2_7b().config.name;
    CHECK(m == phaze::zoo::llama2_7b());
  }
  SECTION("OPT: pre-norm sizes keep the final norm, unless _remove_final_layer_norm") {
    auto j = read_config("opt-1.3b.json");
    CHECK(from_hf_config(j).config.final_norm);
    j["_remove_final_layer_norm"] = true;
    CHECK_FALSE(from_hf_config(j).config.final_norm);
  }
  SECTION("GPT-NeoX: sequential residual") {
    auto j = read_config("pythia-160m.json");
    j["use_parallel_residual"] = false;
    CHECK_FALSE(from_hf_config(j).config.parallel_residual);
    j.erase("use_parallel_residual");
    CHECK(from_hf_config(j).config.parallel_residual);
    j["rotary_pct"] = 1.0;
    CHECK(from_hf_config(j).config.rotary_fraction == 1.0);
  }
  SECTION("an imported model trains at another sequence length with with_sequence") {
    const auto m = phaze::model::with_sequence(from_hf_config(read_config("gpt2.json")), 2048);
    CHECK(m.config.sequence == 2048);
    CHECK(m.config.max_positions == 2048);
  }
}

TEST_CASE("from_hf_config: bad config files give input_errors naming the field", "[hf]") {
  struct bad_case {
    std::string_view file;
    std::vector<std::string_view> message_parts;
  };
  const auto c = GENERATE(values<bad_case>({
      {"bad_missing_heads.json",
       {"config.json field 'num_attention_heads' is missing (required for model_type 'llama')"}},
      {"bad_negative_hidden.json", {"field 'hidden_size' must be a positive integer, got -4"}},
      {"bad_zero_layers.json", {"field 'n_layer' must be a positive integer, got 0"}},
      {"bad_wrong_type.json", {"field 'hidden_size' must be a positive integer, got \"1024\""}},
      {"bad_unknown_model_type.json", {"'model_type'", "\"rwkv\"", "gpt_neox"}},
      {"bad_no_model_type.json", {"'model_type'", "architectures"}},
      {"bad_heads_do_not_divide.json", {"'hidden_size' (1000)", "'num_attention_heads' (16)"}},
      {"bad_too_many_layers.json", {"cannot build", "1000, above 254", "docs/limits.md"}},
  }));
  INFO(c.file);
  const auto message = input_error_of([&] { (void)from_hf_config(read_config(c.file), "x"); });
  for (const auto part : c.message_parts) CHECK_THAT(message, Catch::Contains(std::string{part}));
}

TEST_CASE("from_hf_config: mistyped and out-of-range fields name the field", "[hf]") {
  SECTION("a JSON value that is not an object") {
    CHECK_THAT(input_error_of([] {
                 (void)from_hf_config(json::array({1, 2}));
               }),
               Catch::Contains("JSON object"));
    CHECK_THAT(input_error_of([] { (void)from_hf_config(json(nullptr)); }), Catch::Contains("JSON object"));
  }
  SECTION("model_type that is not a string") {
    auto j = read_config("gpt2.json");
    j["model_type"] = 7;
    CHECK_THAT(input_error_of([&] { (void)from_hf_config(j); }), Catch::Contains("'model_type'"));
  }
  SECTION("sizes") {
    auto j = read_config("llama-2-7b-hf.json");
    const auto field =
        GENERATE(as<std::string>{}, "hidden_size", "num_attention_heads", "num_key_value_heads",
                 "num_hidden_layers", "intermediate_size", "vocab_size", "max_position_embeddings");
    const auto value = GENERATE(json(-4), json(0), json(1.5), json("32"), json(true), json::array(),
                                json::object(), json(1e30), json(std::uint64_t{1} << 63));
    INFO(field << " = " << value.dump());
    j[field] = value;
    CHECK_THAT(input_error_of([&] { (void)from_hf_config(j); }), Catch::Contains("'" + field + "'"));
  }
  SECTION("flags, probabilities and activations") {
    struct field_case {
      std::string_view file;
      std::string_view field;
      json value;
    };
    const auto c = GENERATE(values<field_case>({
        {"llama-2-7b-hf.json", "tie_word_embeddings", json("yes")},
        {"llama-2-7b-hf.json", "attention_bias", json(1)},
        {"llama-2-7b-hf.json", "hidden_act", json("gelu")},
        {"llama-2-7b-hf.json", "hidden_act", json(3)},
        {"opt-350m.json", "do_layer_norm_before", json("false")},
        {"opt-350m.json", "activation_function", json("swish")},
        {"opt-350m.json", "dropout", json(1.5)},
        {"gpt2.json", "resid_pdrop", json("0.1")},
        {"bert-large-uncased.json", "hidden_act", json("tanh")},
        {"bert-large-uncased.json", "type_vocab_size", json(-1)},
        {"pythia-160m.json", "rotary_pct", json(0.0)},
        {"pythia-160m.json", "rotary_pct", json(1.5)},
        {"pythia-160m.json", "use_parallel_residual", json("true")},
        {"gpt2.json", "_name_or_path", json(42)},
    }));
    auto j = read_config(c.file);
    j[std::string{c.field}] = c.value;
    INFO(c.file << ": " << c.field << " = " << c.value.dump());
    CHECK_THAT(input_error_of([&] { (void)from_hf_config(j); }),
               Catch::Contains("'" + std::string{c.field} + "'"));
  }
  SECTION("grouped-query heads that do not divide the attention heads") {
    auto j = read_config("llama-2-70b-hf.json");
    j["num_key_value_heads"] = 7;
    CHECK_THAT(input_error_of([&] { (void)from_hf_config(j); }),
               Catch::Contains("'num_key_value_heads' (7)"));
  }
}

TEST_CASE("from_hf_config never throws anything but input_error, whatever a field holds", "[hf]") {
  // Replace each field of each real config by values of every JSON type: the import either succeeds or
  // throws input_error (never a nlohmann exception, never a crash).
  const auto file = GENERATE(as<std::string>{}, "llama-2-7b-hf.json", "gpt2-xl.json", "opt-350m.json",
                             "bert-large-uncased.json", "gpt-neox-20b.json");
  const auto base = read_config(file);
  const std::vector<json> values{json(nullptr),
                                 json(-1),
                                 json(0),
                                 json(3),
                                 json(0.5),
                                 json(1e300),
                                 json("text"),
                                 json(false),
                                 json(true),
                                 json::array({1}),
                                 json::object({{"a", 1}}),
                                 json(std::numeric_limits<std::uint64_t>::max())};
  int imported = 0;
  int rejected = 0;
  for (const auto& [field, original] : base.items()) {
    for (const auto& v : values) {
      auto j = base;
      j[field] = v;
      try {
        (void)from_hf_config(j, "x");
        ++imported;
      } catch (const input_error&) {
        ++rejected;
      } catch (const std::exception& e) {
        FAIL(file << ": " << field << " = " << v.dump() << " threw " << e.what());
      }
    }
    auto j = base;
    j.erase(field);
    try {
      (void)from_hf_config(j, "x");
    } catch (const input_error&) {
    }
  }
  CHECK(imported > 0);
  CHECK(rejected > 0);
}

TEST_CASE(
    "from_hf_config imports Mistral, Qwen2, Qwen3, Phi-3, Gemma, Falcon and Llama 3.1 to their published "
    "sizes",
    "[hf]") {
  // Parameter counts as the models' HuggingFace pages state them (safetensors totals).
  struct imported_case {
    std::string_view file;
    std::int64_t published_params;
    std::int64_t sequence;  // the training sequence phaze gives it
    std::int64_t window;
  };
  const auto c = GENERATE(values<imported_case>({
      {"mistral-7b-v0.1.json", 7'241'732'096, 8192, 4096},
      {"qwen2-7b.json", 7'615'616'512, 8192, 0},
      {"gemma-7b.json", 8'537'680'896, 8192, 0},
      {"falcon-7b.json", 6'921'720'704, 2048, 0},
      {"llama-3.1-8b.json", 8'030'261'248, 8192, 0},
      {"qwen3-8b.json", 8'190'735'360, 8192, 0},
      {"qwen3-30b-a3b.json", 30'532'122'624, 8192, 0},
      {"phi-3-mini-4k-instruct.json", 3'821'079'552, 4096, 2047},
  }));
  INFO(c.file);
  const auto m = from_hf_config(read_config(c.file), "x");
  CHECK(parameter_count(m) == c.published_params);
  CHECK(m.config.sequence == c.sequence);
  CHECK(m.config.attention_window == c.window);
}

TEST_CASE("from_hf_config keeps what changes the cost: QKV bias, GeGLU, head_dim, multi-query, contexts",
          "[hf]") {
  using phaze::model::mlp_kind;
  const auto qwen = from_hf_config(read_config("qwen2-7b.json"), "x").config;
  CHECK(qwen.qkv_bias);
  CHECK_FALSE(qwen.bias);
  CHECK(qwen.max_positions == 131072);  // what it can attend over; it trains at 8192 unless --seq says
  const auto gemma = from_hf_config(read_config("gemma-7b.json"), "x").config;
  CHECK(gemma.mlp == mlp_kind::geglu);
  CHECK(gemma.head_dim_or_default() == 256);
  CHECK(gemma.tied_embeddings);
  const auto falcon = from_hf_config(read_config("falcon-7b.json"), "x").config;
  CHECK(falcon.kv_heads_or_default() == 1);
  CHECK(falcon.parallel_residual);
  CHECK(falcon.shared_norm);
  const auto llama = from_hf_config(read_config("llama-3.1-8b.json"), "x").config;
  CHECK(llama.max_positions == 131072);
  CHECK(llama.sequence == phaze::model::hf_default_training_sequence);
}

TEST_CASE("from_hf_config imports Qwen3's query/key norms, Phi-3's block and Nemotron's squared ReLU",
          "[hf]") {
  using phaze::model::mlp_kind;
  using phaze::model::norm_kind;
  const phaze::model::layer_shape shape{1, 4096, 1, false, 2};
  // Qwen3: no QKV bias, an RMSNorm over each query and key head (head_dim weights each) before the rotary
  // embedding; the zoo's Qwen3-8B is the same architecture at its own training sequence.
  const auto qwen3 = from_hf_config(read_config("qwen3-8b.json"), "x");
  CHECK(qwen3.config.qk_norm);
  CHECK_FALSE(qwen3.config.qkv_bias);
  CHECK(qwen3.config.head_dim_or_default() == 128);
  const auto block = phaze::model::block_layer(qwen3.config, shape);
  const auto norm = std::find_if(block.ops.begin(), block.ops.end(),
                                 [](const auto& o) { return o.name.view() == "qk_norm"; });
  REQUIRE(norm != block.ops.end());
  CHECK(norm->kind == phaze::model::op_kind::rmsnorm);
  CHECK(norm->params == 2 * 128);
  CHECK(std::next(norm)->name.view() == "rotary");
  auto without = qwen3.config;
  without.qk_norm = false;
  CHECK(parameter_count(qwen3) - parameter_count(phaze::model::make_model(without)) == 36 * 2 * 128);
  CHECK(phaze::model::with_sequence(qwen3, 4096).config.qk_norm ==
        phaze::zoo::lookup("qwen3-8b").config.qk_norm);
  // transformers' Qwen3Config defaults head_dim to 128, not hidden / heads.
  auto no_head_dim = read_config("qwen3-30b-a3b.json");
  no_head_dim.erase("head_dim");
  CHECK(from_hf_config(no_head_dim, "x").config.head_dim_or_default() == 128);
  // A model type phaze cannot import is named as such, whatever else the config holds.
  auto hybrid = read_config("qwen3-30b-a3b.json");
  hybrid["model_type"] = "jamba";  // Mamba-1 mixers: not imported
  CHECK_THAT(input_error_of([&] { (void)from_hf_config(hybrid, "x"); }),
             Catch::Contains("\"jamba\"") && Catch::Contains("cannot import"));
  // A nemotron_h type without its layer pattern is refused naming the field.
  hybrid["model_type"] = "nemotron_h";
  CHECK_THAT(input_error_of([&] { (void)from_hf_config(hybrid, "x"); }),
             Catch::Contains("hybrid_override_pattern"));
  // Qwen3-MoE: Qwen2-MoE's experts without the shared one, and the same norms.
  const auto moe = from_hf_config(read_config("qwen3-30b-a3b.json"), "x").config;
  CHECK(moe.experts == 128);
  CHECK(moe.top_k == 8);
  CHECK(moe.expert_ffn == 768);
  CHECK(moe.shared_expert_ffn == 0);
  CHECK(moe.qk_norm);
  // Phi-3: the Llama block (SwiGLU, RMSNorm, untied), its sliding window kept.
  const auto phi3 = from_hf_config(read_config("phi-3-mini-4k-instruct.json"), "x").config;
  CHECK(phi3.mlp == mlp_kind::swiglu);
  CHECK(phi3.norm == norm_kind::rmsnorm);
  CHECK(phi3.rotary_fraction == 1.0);
  CHECK_FALSE(phi3.dropout);
  CHECK(phi3.attention_window == 2047);
  CHECK(phi3.name.view() == "Phi-3-mini-4k-instruct");
  // Nemotron: squared ReLU in a two-matrix MLP (one activation kernel, a ReLU's traffic), LayerNorm, half of
  // each head rotated. The same MLP with a plain ReLU has the same parameters and GEMMs.
  const auto nemotron = from_hf_config(read_config("nemotron-4-15b.json"), "x");
  CHECK(nemotron.config.mlp == mlp_kind::squared_relu);
  CHECK(nemotron.config.norm == norm_kind::layernorm);
  CHECK(nemotron.config.rotary_fraction == 0.5);
  auto relu = nemotron.config;
  relu.mlp = mlp_kind::relu;
  CHECK(parameter_count(nemotron) == parameter_count(phaze::model::make_model(relu)));
  const auto squared = phaze::model::block_layer(nemotron.config, shape);
  const auto plain = phaze::model::block_layer(relu, shape);
  REQUIRE(squared.ops.size() == plain.ops.size());
  CHECK(phaze::model::forward_matmul_flops(squared) == phaze::model::forward_matmul_flops(plain));
  auto wrong = read_config("nemotron-4-15b.json");
  wrong["hidden_act"] = "silu";
  CHECK_THAT(input_error_of([&] { (void)from_hf_config(wrong, "x"); }),
             Catch::Contains("'hidden_act'") && Catch::Contains("relu2"));
  // The model type comes from the class name too; Phi-3-small is another architecture.
  auto unnamed = read_config("qwen3-30b-a3b.json");
  unnamed.erase("model_type");
  CHECK(from_hf_config(unnamed, "x").config.experts == 128);
  auto small = read_config("phi-3-mini-4k-instruct.json");
  small.erase("model_type");
  small["architectures"] = json::array({"Phi3SmallForCausalLM"});
  CHECK_THAT(input_error_of([&] { (void)from_hf_config(small, "x"); }), Catch::Contains("'model_type'"));
}

TEST_CASE("from_hf_config imports BLOOM and Falcon-RW with ALiBi positions", "[hf]") {
  // BLOOM 176B's config.json as bigscience/bloom publishes it (no position count: ALiBi needs none).
  const json bloom =
      json::parse(R"({"apply_residual_connection_post_layernorm": false, "attention_dropout": 0.0,
    "bias_dropout_fusion": true, "bos_token_id": 1, "eos_token_id": 2, "hidden_dropout": 0.0,
    "hidden_size": 14336, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": true,
    "model_type": "bloom", "n_head": 112, "n_inner": null, "n_layer": 70, "offset_alibi": 100,
    "pad_token_id": 3, "pretraining_tp": 4, "skip_bias_add": true, "skip_bias_add_qkv": false,
    "slow_but_exact": false, "unk_token_id": 0, "use_cache": true, "vocab_size": 250880})");
  const auto imported = from_hf_config(bloom, "bloom-176b");
  CHECK(parameter_count(imported) == 176'247'271'424);  // bigscience/bloom's model card
  CHECK(imported.config.positions == phaze::model::position_kind::alibi);
  CHECK(imported.config.embedding_norm);
  CHECK(imported.config.sequence == phaze::model::hf_bloom_training_sequence);
  require_same_architecture(imported.config, phaze::zoo::lookup("bloom-176b").config);
  // Unfused attention adds the bias to the scores in one pass; fused kernels add it in their tiles.
  const phaze::model::layer_shape unfused{1, 2048, 8, true, 2};
  auto has_alibi = [](const phaze::model::layer& l) {
    return std::any_of(l.ops.begin(), l.ops.end(), [](const auto& o) { return o.name.view() == "alibi"; });
  };
  CHECK(has_alibi(phaze::model::block_layer(imported.config, unfused)));
  auto fused = unfused;
  fused.fused_attention = true;
  CHECK_FALSE(has_alibi(phaze::model::block_layer(imported.config, fused)));
  // Falcon-RW: ALiBi in place of rotary embeddings; nothing else changes.
  auto falcon = read_config("falcon-7b.json");
  const auto rotary = parameter_count(from_hf_config(falcon, "x"));
  falcon["alibi"] = true;
  const auto rw = from_hf_config(falcon, "x");
  CHECK(rw.config.positions == phaze::model::position_kind::alibi);
  CHECK(parameter_count(rw) == rotary);
}

TEST_CASE(
    "from_hf_config gives a Qwen2-MoE config without shared_expert_intermediate_size transformers' default",
    "[hf]") {
  // transformers' Qwen2MoeConfig: shared_expert_intermediate_size = 5632 when absent.
  auto config = read_config("qwen1.5-moe-a2.7b.json");
  const auto stated = parameter_count(from_hf_config(config, "x"));
  config.erase("shared_expert_intermediate_size");
  const auto defaulted = from_hf_config(config, "x");
  CHECK(defaulted.config.shared_expert_ffn == 5632);
  CHECK(parameter_count(defaulted) == stated);
}

TEST_CASE("from_hf_config refuses what it would cost wrong, naming the field", "[hf]") {
  // Experts in a config of a dense model type: refused, naming the field and the types that carry experts.
  auto dense_with_experts = read_config("mixtral-8x7b-v0.1.json");
  dense_with_experts["model_type"] = "llama";
  const auto experts = input_error_of([&] { (void)from_hf_config(dense_with_experts, "x"); });
  CHECK_THAT(experts, Catch::Contains("'num_local_experts'") && Catch::Contains("mixture of experts") &&
                          Catch::Contains("mixtral"));
  auto qwen = read_config("qwen2-7b.json");
  qwen["use_sliding_window"] = true;
  CHECK_THAT(input_error_of([&] { (void)from_hf_config(qwen, "x"); }),
             Catch::Contains("'use_sliding_window'"));
  auto gemma = read_config("gemma-7b.json");
  gemma["model_type"] = "llama";
  gemma["final_logit_softcapping"] = 30.0;
  CHECK_THAT(input_error_of([&] { (void)from_hf_config(gemma, "x"); }),
             Catch::Contains("'final_logit_softcapping'"));
  // A dense model that states one expert, or no soft-capping, is what it says.
  auto llama = read_config("meta-llama-3-8b.json");
  llama["num_experts"] = 1;
  llama["final_logit_softcapping"] = nullptr;
  CHECK(parameter_count(from_hf_config(llama, "x")) == 8'030'261'248);
}

TEST_CASE("Gemma 2 imports with sandwich norms, alternating windows and soft-capping", "[hf]") {
  using namespace phaze;
  // google/gemma-2-9b: HF Gemma2ForCausalLM.num_parameters() 9,241,705,984 (the Gemma 2 report: 9.24B).
  const auto gemma = from_hf_config(read_config("gemma-2-9b.json"), "x");
  CHECK(parameter_count(gemma) == 9'241'705'984);
  const auto& c = gemma.config;
  CHECK(c.mlp == model::mlp_kind::geglu);
  CHECK(c.sandwich_norm);
  CHECK(c.attention_softcap);
  CHECK(c.logit_softcap);
  CHECK(c.tied_embeddings);
  CHECK(c.attention_window == 4096);
  CHECK(c.full_attention_every == 2);
  // A block holds four norms; the unfused scores and the logits each pass through one tanh kernel.
  const model::layer_shape unfused{1, 8192, 1, false, 2, false};
  const auto block = model::layer_at(gemma, 1, unfused);
  int norms = 0;
  bool capped_scores = false;
  for (const auto& o : block.ops) {
    norms += o.kind == model::op_kind::rmsnorm ? 1 : 0;
    capped_scores = capped_scores || o.name.view() == "score_softcap";
  }
  CHECK(norms == 4);
  CHECK(capped_scores);
  const auto head = model::layer_at(gemma, gemma.size() - 1, unfused);
  bool capped_logits = false;
  for (const auto& o : head.ops) capped_logits = capped_logits || o.name.view() == "logit_softcap";
  CHECK(capped_logits);
  // google/gemma-2-2b: 2,614,341,888.
  auto small = read_config("gemma-2-9b.json");
  small["hidden_size"] = 2304;
  small["num_attention_heads"] = 8;
  small["num_key_value_heads"] = 4;
  small["intermediate_size"] = 9216;
  small["num_hidden_layers"] = 26;
  CHECK(parameter_count(from_hf_config(small, "x")) == 2'614'341'888);
}

TEST_CASE("a sliding window shortens fused attention only: the kernel skips the keys outside it", "[hf]") {
  using namespace phaze;
  const auto m = from_hf_config(read_config("mistral-7b-v0.1.json"), "x");
  for (const std::int64_t s : {2048, 4096, 8192, 16384}) {
    const model::layer_shape fused{1, s, 1, false, 2, true};
    const auto l = model::block_layer(m.config, fused);
    const auto attention = std::find_if(l.ops.begin(), l.ops.end(), [](const model::op& o) {
      return o.kind == model::op_kind::fused_attention;
    });
    REQUIRE(attention != l.ops.end());
    const double share = cost::fused_attention_score_share(*attention);
    const double w = 4096.0;
    const auto sd = static_cast<double>(s);
    // Pairs (query, key) with 0 <= query - key < w, over s^2.
    const double expected = s <= 4096 ? 0.5 * (sd + 1.0) / sd : (w * sd - w * (w - 1.0) / 2.0) / (sd * sd);
    CHECK(share == Approx(expected).epsilon(1e-3));  // the model leaves out the diagonal's half
  }
}

TEST_CASE("Llama 4 imports from its text_config: experts every N-th block, a shared expert, one chunk",
          "[hf][moe]") {
  // Llama 4 Maverick (128 experts in every other block) and Scout (16 experts in every block): 5120 wide, 48
  // blocks, 40 query heads and 8 key/value heads of 128, experts and the shared expert of 8192, dense blocks
  // of 16384, a 202,048-token vocabulary, untied. Per block: attention 2 x 5120^2 + 2 x 5120 x 1024, two
  // norms; per expert block 3 x 5120 x 8192 per expert and for the shared expert, and a 5120 x E router;
  // per dense block 3 x 5120 x 16384; Scout's query/key norms 2 x 128 weights per block.
  const double attention = 2.0 * 5120 * 5120 + 2.0 * 5120 * 1024 + 2.0 * 5120;
  const double expert = 3.0 * 5120 * 8192;
  const double embeddings = 2.0 * 202048 * 5120 + 5120;
  const phaze::model::model maverick =
      from_hf_config(read_config("llama-4-maverick-17b-128e.json"), "maverick");
  CHECK(static_cast<double>(parameter_count(maverick)) ==
        48 * attention + 24 * (129 * expert + 5120.0 * 128) + 24 * 3.0 * 5120 * 16384 + embeddings);
  CHECK(parameter_count(maverick) == 400'711'848'960);  // the model card's 400B
  const phaze::model::model scout = from_hf_config(read_config("llama-4-scout-17b-16e.json"), "scout");
  CHECK(static_cast<double>(parameter_count(scout)) ==
        48 * (attention + 17 * expert + 5120.0 * 16 + 2 * 128) + embeddings);
  // Maverick's blocks 1, 3, ..., 47 carry the experts (interleave_moe_layer_step 2, transformers'
  // Llama4TextConfig.moe_layers default), the others a dense MLP.
  for (std::size_t v = 1; v + 1 < maverick.size(); ++v) CHECK(maverick.kind_at(v).dense_mlp == (v % 2 == 1));
  CHECK(maverick.config.sigmoid_router);
  CHECK(maverick.config.shared_expert_ffn == 8192);
  // Trained at one chunk of 8192 tokens, where chunked attention is causal attention; a longer sequence
  // is refused, naming the chunk.
  CHECK(maverick.config.sequence == 8192);
  CHECK(maverick.config.attention_chunk == 8192);
  CHECK(phaze::model::with_sequence(maverick, 4096).config.sequence == 4096);
  CHECK_THAT(input_error_of([&] { (void)phaze::model::with_sequence(maverick, 16384); }),
             Catch::Contains("chunks of 8192") && Catch::Contains("`sequence` 8192"));
  // The text model alone (model_type llama4_text) and a config without model_type import alike.
  const auto whole = read_config("llama-4-maverick-17b-128e.json");
  CHECK(from_hf_config(whole.at("text_config"), "maverick") == maverick);
  auto unnamed = whole;
  unnamed.erase("model_type");
  CHECK(from_hf_config(unnamed, "maverick") == maverick);
  auto text_only = whole.at("text_config");
  text_only.erase("model_type");
  text_only["architectures"] = nlohmann::json::array({"Llama4ForCausalLM"});
  CHECK(from_hf_config(text_only, "maverick") == maverick);
  // A multimodal config without its text_config, and expert blocks listed off the interleave, are refused.
  auto bare = whole;
  bare.erase("text_config");
  CHECK_THAT(input_error_of([&] { (void)from_hf_config(bare, "x"); }), Catch::Contains("'text_config'"));
  auto listed = whole;
  listed["text_config"]["moe_layers"] = nlohmann::json::array({0, 2});
  CHECK_THAT(input_error_of([&] { (void)from_hf_config(listed, "x"); }), Catch::Contains("'moe_layers'"));
  auto matching = whole;
  auto odd = nlohmann::json::array();
  for (int i = 1; i < 48; i += 2) odd.push_back(i);
  matching["text_config"]["moe_layers"] = odd;
  CHECK(from_hf_config(matching, "maverick") == maverick);
}
