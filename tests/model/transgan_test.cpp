// The TransGAN generator as a composite model (model/transgan.hpp): its 56 layer entries, parameters and
// FLOPs against closed forms of its architecture, and the rules a composite model obeys.
#include <phaze/model/model.hpp>
#include <phaze/model/transgan.hpp>
#include <phaze/model/zoo.hpp>

#include <catch2/catch.hpp>

#include <cstdint>

using namespace phaze;
using namespace phaze::model;

namespace {
/// Parameters of a TransGAN block of width d and window w: QKV 3 d^2 + 3 d, projection d^2 + d, MLP
/// 4 d^2 + 4 d and 4 d^2 + d, and a relative-position bias of (2 w - 1)^2 entries for each of the 4 heads.
constexpr std::int64_t block_parameters(std::int64_t d, std::int64_t w) {
  return 12 * d * d + 9 * d + 4 * (2 * w - 1) * (2 * w - 1);
}
/// Forward matrix FLOPs of such a block on one sample of `windows` windows of s tokens: 24 s d^2 in the
/// projections and MLP, 4 s^2 d in the attention scores and context.
constexpr double block_flops(double d, double s, double windows) {
  return windows * (24.0 * s * d * d + 4.0 * s * s * d);
}
}  // namespace

TEST_CASE("the TransGAN generator has AMP's 56 layer entries", "[model][transgan]") {
  const model::model m = zoo::transgan();
  REQUIRE(m.size() == 56);
  CHECK(composite(m));
  CHECK(body_nodes(m) == 54);
  CHECK(m.role_at(0) == layer_role::embedding);
  CHECK(m.role_at(55) == layer_role::head);
  int blocks_1024 = 0;
  int blocks_16 = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const auto& k = m.kind_at(i);
    if (k.role != layer_role::block) continue;
    if (k.architecture.hidden == 1024) {
      CHECK((i >= 3 && i <= 14));
      ++blocks_1024;
    } else {
      CHECK((i >= 41 && i <= 52));
      ++blocks_16;
    }
  }
  CHECK(blocks_1024 == 12);
  CHECK(blocks_16 == 12);
  // Every entry hands on the elements the table of docs/validation-amp.md gives (per sample).
  const layer_shape one{1, 0, 1, false, 2};
  CHECK(layer_at(m, 0, one).output_elements() == 82944);
  CHECK(layer_at(m, 14, one).output_elements() == 82944);
  CHECK(layer_at(m, 16, one).output_elements() == 331776);
  for (std::size_t i = 19; i <= 54; ++i) CHECK(layer_at(m, i, one).output_elements() == 1327104);
  CHECK(layer_at(m, 55, one).output_elements() == 288 * 288 * 3);
}

TEST_CASE("TransGAN's parameters and FLOPs equal the closed forms of its architecture", "[model][transgan]") {
  const model::model m = zoo::transgan();
  const layer_shape one{1, 0, 1, false, 2};
  CHECK(layer_params(layer_at(m, 0, one)) == 512 * 82944 + 82944);
  CHECK(layer_params(layer_at(m, 3, one)) == block_parameters(1024, 9));
  CHECK(layer_params(layer_at(m, 41, one)) == block_parameters(16, 18));
  CHECK(layer_params(layer_at(m, 55, one)) == 16 * 3 + 3);
  // Position embeddings: 9 x 9 and 18 x 18 of width 1024, then four of 1,327,104 elements.
  const std::int64_t positions = 82944 + 331776 + 4 * 1327104;
  const std::int64_t expected =
      512 * 82944 + 82944 + 12 * block_parameters(1024, 9) + positions + 12 * block_parameters(16, 18) + 51;
  CHECK(parameter_count(m) == expected);
  CHECK(expected == 199'490'259);  // 199.5 M (AMP's table less one noise weight per block)

  CHECK(forward_matmul_flops(layer_at(m, 3, one)).value() == Approx(block_flops(1024, 81, 1)));
  CHECK(forward_matmul_flops(layer_at(m, 41, one)).value() == Approx(block_flops(16, 324, 256)));
  // A block of the second half runs its 256 windows as 256 sequences of the microbatch.
  const layer_shape four{4, 0, 1, false, 2};
  CHECK(forward_matmul_flops(layer_at(m, 41, four)).value() == Approx(4 * block_flops(16, 324, 256)));
  // Training FLOPs per sample: three times the forward matrix work.
  double forward = 2.0 * 512 * 82944 + 12 * block_flops(1024, 81, 1) + 12 * block_flops(16, 324, 256) +
                   2.0 * 82944 * 16 * 3;
  CHECK(training_flops_per_iteration(m, 1).value() == Approx(3 * forward).epsilon(1e-9));
}

TEST_CASE("a composite model keeps its own sequences and refuses the schedules of identical blocks",
          "[model][transgan]") {
  const model::model m = zoo::transgan();
  CHECK_THROWS_WITH(with_sequence(m, 2048), Catch::Contains("drop `sequence`"));
  CHECK_THROWS_WITH(with_vocab(m, 50000), Catch::Contains("drop `vocab`"));
  CHECK(with_sequence(m, m.config.sequence) == m);
  // Tensor parallelism splits both kinds of block over their 4 heads, never 8.
  CHECK(splits_over(m, 4));
  CHECK_FALSE(splits_over(m, 8));
  CHECK_THROWS_AS(validate_model_shape(m, {1, 0, 8, false, 2}), input_error);
  // 81 tokens do not split over 2 ranks with sequence parallelism.
  CHECK_THROWS_AS(validate_model_shape(m, {1, 0, 2, true, 2}), input_error);
  CHECK_NOTHROW(validate_model_shape(m, {1, 0, 2, false, 2}));
}

TEST_CASE("make_chain_model checks its kinds and nodes", "[model][transgan]") {
  const transformer_config summary = zoo::gpt2().config;
  const layer_spec in{.name = "in",
                      .role = layer_role::embedding,
                      .recipe = layer_recipe::dense,
                      .rows = 1,
                      .in = 8,
                      .out = 8};
  const layer_spec body{
      .name = "body", .role = layer_role::adapter, .recipe = layer_recipe::view, .in = 8, .out = 8};
  const layer_spec out{
      .name = "out", .role = layer_role::head, .recipe = layer_recipe::dense, .rows = 1, .in = 8, .out = 2};
  CHECK(make_chain_model(summary, {in, body, out}, {0, 1, 1, 2}).size() == 4);
  CHECK_THROWS_WITH(make_chain_model(summary, {in, body, out}, {0, 2}), Catch::Contains("at least three"));
  CHECK_THROWS_WITH(make_chain_model(summary, {in, body, out}, {0, 3, 2}), Catch::Contains("layer kind"));
  layer_spec bad_view = body;
  bad_view.out = 16;
  CHECK_THROWS_WITH(make_chain_model(summary, {in, bad_view, out}, {0, 1, 2}), Catch::Contains("as many"));
  layer_spec empty = in;
  empty.rows = 0;
  CHECK_THROWS_WITH(make_chain_model(summary, {empty, body, out}, {0, 1, 2}), Catch::Contains("size"));
}
