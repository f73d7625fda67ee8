// Tests of phaze/model/dsl.hpp: keyword construction of models and shapes reproduces the zoo and the
// defaults.
#include "phaze/model/dsl.hpp"

#include <catch2/catch.hpp>

#include <cstdint>

#include "phaze/model/zoo.hpp"

namespace dsl = phaze::dsl;
namespace zoo = phaze::zoo;
namespace pm = phaze::model;

namespace {
template <class... Args>
concept transformer_accepts = requires(Args... args) {
  dsl::transformer(args...);
};
template <class... Args>
concept shape_accepts = requires(Args... args) {
  dsl::shape(args...);
};

constexpr auto llama2_7b_by_keywords() {
  // Touvron et al. 2023 (Llama 2), 7B: h 4096, 32 heads, 32 layers, SwiGLU ffn 11008, vocabulary 32000,
  // context 4096, RMSNorm, rotary positions, no biases, untied output projection, no dropout.
  return dsl::transformer(dsl::name = "llama2-7b", dsl::arch = pm::family::llama, dsl::hidden = 4096,
                          dsl::heads = 32, dsl::kv_heads = 32, dsl::ffn = 11008, dsl::layers = 32,
                          dsl::vocab = 32000, dsl::sequence = 4096, dsl::norm = phaze::rmsnorm,
                          dsl::mlp = phaze::swiglu, dsl::positions = phaze::rotary, dsl::bias = false,
                          dsl::tied_embeddings = false, dsl::dropout = false);
}
}  // namespace

TEST_CASE("dsl::transformer reproduces Llama 2 7B from keywords", "[dsl]") {
  constexpr auto m = llama2_7b_by_keywords();
  STATIC_REQUIRE(pm::parameter_count(m) == 6'738'415'616);
  const auto reference = zoo::llama2_7b();
  CHECK(pm::parameter_count(m) == pm::parameter_count(reference));
  CHECK(m.size() == reference.size());
  // Layer by layer, for several shapes, the graphs are identical.
  for (int tp : {1, 4, 8}) {
    for (bool sp : {false, true}) {
      const auto shape = dsl::shape(dsl::microbatch = 2, dsl::tp = tp, dsl::sequence_parallel = sp);
      for (std::size_t i : {std::size_t{0}, std::size_t{1}, m.size() - 1}) {
        INFO("tp " << tp << " sp " << sp << " node " << i);
        CHECK(pm::layer_at(m, i, shape) == pm::layer_at(reference, i, shape));
      }
    }
  }
  CHECK(pm::training_flops_per_iteration(m, 16) == pm::training_flops_per_iteration(reference, 16));
}

TEST_CASE("dsl::transformer with grouped-query attention reproduces Llama 2 70B", "[dsl]") {
  constexpr auto m = dsl::transformer(
      dsl::hidden = 8192, dsl::heads = 64, dsl::kv_heads = 8, dsl::ffn = 28672, dsl::layers = 80,
      dsl::vocab = 32000, dsl::sequence = 4096, dsl::norm = phaze::rmsnorm, dsl::mlp = phaze::swiglu,
      dsl::positions = phaze::rotary, dsl::bias = false, dsl::tied_embeddings = false, dsl::dropout = false);
  STATIC_REQUIRE(pm::parameter_count(m) == 68'976'648'192);  // HF meta-llama/Llama-2-70b-hf
  STATIC_REQUIRE(m.config.kv_heads_or_default() == 8);
}

TEST_CASE("dsl::transformer defaults to a GPT: GPT-2 from its five sizes", "[dsl]") {
  // Radford et al. 2019 (GPT-2 small): h 768, 12 heads, 12 layers, vocabulary 50257, context 1024.
  constexpr auto m = dsl::transformer(dsl::name = "gpt2", dsl::hidden = 768, dsl::heads = 12,
                                      dsl::layers = 12, dsl::vocab = 50257, dsl::sequence = 1024);
  STATIC_REQUIRE(pm::parameter_count(m) == 124'439'808);
  CHECK(m.config == zoo::gpt2().config);
  CHECK(m.config.ffn == 4 * 768);
  CHECK(m.config.max_positions == 1024);
  CHECK(m.config.norm == pm::norm_kind::layernorm);
  CHECK(m.config.mlp == pm::mlp_kind::gelu);
  CHECK(m.config.positions == pm::position_kind::learned);
  CHECK(m.config.bias);
  CHECK(m.config.tied_embeddings);
  CHECK(m.config.pre_norm);
  CHECK(m.config.final_norm);
  CHECK(m.config.dropout);
  CHECK_FALSE(m.config.parallel_residual);
  // The default name says the model is not from the zoo.
  CHECK(dsl::transformer(dsl::hidden = 64, dsl::heads = 4, dsl::layers = 2, dsl::vocab = 100,
                         dsl::sequence = 16)
            .config.name.view() == "custom");
}

TEST_CASE("keyword order does not matter and every option reaches the configuration", "[dsl]") {
  constexpr auto a =
      dsl::transformer(dsl::hidden = 1024, dsl::heads = 16, dsl::layers = 4, dsl::vocab = 1000,
                       dsl::sequence = 256, dsl::ffn = 3000, dsl::head_dim = 80, dsl::max_positions = 512,
                       dsl::mlp = phaze::relu, dsl::pre_norm = false, dsl::parallel_residual = true);
  constexpr auto b =
      dsl::transformer(dsl::parallel_residual = true, dsl::pre_norm = false, dsl::mlp = phaze::relu,
                       dsl::max_positions = 512, dsl::head_dim = 80, dsl::ffn = 3000, dsl::sequence = 256,
                       dsl::vocab = 1000, dsl::layers = 4, dsl::heads = 16, dsl::hidden = 1024);
  STATIC_REQUIRE(a == b);
  STATIC_REQUIRE(a.config.ffn == 3000);
  STATIC_REQUIRE(a.config.head_dim_or_default() == 80);
  STATIC_REQUIRE(a.config.max_positions == 512);
  STATIC_REQUIRE(a.config.mlp == pm::mlp_kind::relu);
  STATIC_REQUIRE_FALSE(a.config.pre_norm);
  STATIC_REQUIRE_FALSE(a.config.final_norm);  // follows pre_norm
  STATIC_REQUIRE(a.config.parallel_residual);
  STATIC_REQUIRE(a.size() == 6);
}

TEST_CASE("dsl::shape defaults and options", "[dsl]") {
  constexpr auto defaults = dsl::shape();
  STATIC_REQUIRE(defaults == pm::layer_shape{});
  STATIC_REQUIRE(defaults.microbatch == 1);
  STATIC_REQUIRE(defaults.sequence == 0);
  STATIC_REQUIRE(defaults.tp == 1);
  STATIC_REQUIRE_FALSE(defaults.sequence_parallel);
  STATIC_REQUIRE(defaults.elem_bytes == 2);
  constexpr auto s = dsl::shape(dsl::tp = 8, dsl::microbatch = 4, dsl::shape_sequence = 1024,
                                dsl::sequence_parallel = true, dsl::element_bytes = 4);
  STATIC_REQUIRE(s == pm::layer_shape{4, 1024, 8, true, 4});
}

TEST_CASE("dsl::layer builds the checked block (or another role) of a model", "[dsl]") {
  constexpr auto m = zoo::gpt3_175b();
  constexpr auto shape = dsl::shape(dsl::tp = 8, dsl::sequence_parallel = true);
  constexpr auto block = dsl::layer(m, shape);
  STATIC_REQUIRE(block.role == pm::layer_role::block);
  STATIC_REQUIRE(block == pm::block_layer(m.config, shape));
  // Korthikanti et al. 2022: sbh/t (34 + 5as/h) bytes per layer with tensor and sequence parallelism.
  STATIC_REQUIRE(pm::activation_bytes(block, pm::recompute::none) ==
                 phaze::bytes{2048.0 * 12288 / 8 * (34.0 + 5.0 * 96 * 2048 / 12288)});
  CHECK(dsl::layer(m, shape, pm::layer_role::head) == pm::head_layer(m.config, shape));
  CHECK(dsl::layer(m, shape, pm::layer_role::embedding) == pm::embedding_layer(m.config, shape));
  // fp32 activations take twice the bytes; a shorter sequence scales the linear and quadratic terms.
  const auto fp32 =
      dsl::layer(m, dsl::shape(dsl::tp = 8, dsl::sequence_parallel = true, dsl::element_bytes = 4));
  CHECK(pm::activation_bytes(fp32, pm::recompute::full) ==
        2.0 * pm::activation_bytes(block, pm::recompute::full));
  const auto short_seq = dsl::layer(m, dsl::shape(dsl::shape_sequence = 1024));
  CHECK(short_seq.input_elements == 1024 * 12288);
  CHECK(pm::activation_bytes(short_seq, pm::recompute::none) ==
        phaze::bytes{1024.0 * 12288 * (34.0 + 5.0 * 96 * 1024 / 12288)});
}

TEST_CASE("the DSL rejects non-keyword arguments and broken values", "[dsl]") {
  STATIC_REQUIRE(transformer_accepts<decltype(dsl::hidden = 8)>);
  STATIC_REQUIRE_FALSE(transformer_accepts<int>);
  STATIC_REQUIRE_FALSE(transformer_accepts<decltype(dsl::hidden = 8), double>);
  STATIC_REQUIRE(shape_accepts<>);
  STATIC_REQUIRE_FALSE(shape_accepts<int>);
  // At run time the same rules throw input_error.
  CHECK_THROWS_AS(
      dsl::transformer(dsl::hidden = 0, dsl::heads = 4, dsl::layers = 2, dsl::vocab = 10, dsl::sequence = 8),
      phaze::input_error);
  CHECK_THROWS_WITH(dsl::layer(zoo::gpt3_175b(), dsl::shape(dsl::tp = 5)),
                    Catch::Matchers::Contains("divide the number of attention heads"));
}
