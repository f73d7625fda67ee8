// Tests of phaze/train/memory.hpp: Figure 1 of Korthikanti et al. 2022 (memory per GPU of four published
// runs, the paper's numbers typed in with their figure), the microbatches-in-flight rule of each pipeline
// schedule on hand-checked cases, bytes per parameter, the distributed optimizer and parameter conservation.
#include "phaze/train/memory.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string_view>

#include "phaze/model/zoo.hpp"

using namespace phaze;
using namespace phaze::literals;
using train::memory_breakdown;
using train::pipeline_schedule;

namespace {

/// One configuration of Korthikanti et al. 2022, Table 5, and its memory per GPU from Figure 1 (GiB).
struct figure1_row {
  std::string_view model;
  int pp;
  int v;
  std::int64_t global_batch;
  std::int64_t microbatch;
  double model_states_gib;  ///< weights + grads + optimizer
  double activations_gib;   ///< no recomputation, tensor parallelism only
  double seq_sel_gib;       ///< sequence parallelism + selective recomputation
};

// Source: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (arXiv
// 2205.05198), Table 5 (configurations: TP 8, sequence 2048, vocabulary 51200, fp16, Adam, DP 1) and
// Figure 1 (memory per GPU), as the paper plots it.
constexpr figure1_row figure1[] = {
    {"megatron-22b", 1, 1, 4, 4, 45.56, 59.25, 9.56},
    {"gpt3-175b", 8, 3, 64, 1, 45.56, 66.84, 12.35},
    {"turing-530b", 35, 3, 280, 1, 31.64, 114.02, 23.08},
    {"megatron-1t", 64, 1, 512, 1, 32.96, 131.25, 26.56},
};

model::model table5_model(std::string_view name) {
  return model::with_vocab(model::with_sequence(zoo::get(name), 2048), 51200);
}

train::training_knobs table5_knobs(const figure1_row& r) {
  train::training_knobs k;
  k.global_batch = r.global_batch;
  k.microbatch = r.microbatch;
  k.precision = hw::precision::fp16;
  k.opt = train::optimizer::adam;
  if (r.v > 1) {
    k.schedule = pipeline_schedule::interleaved;
    k.virtual_stages = r.v;
  }
  return k;
}

double relative_error(double computed, double published) {
  return std::abs(computed - published) / published;
}

/// A small GPT for hand-checked numbers: h = 64, 4 heads, 8 blocks, vocabulary 1000, sequence 32.
constexpr model::model small_gpt() {
  model::transformer_config c;
  c.name = "small";
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 256;
  c.layers = 8;
  c.vocab = 1000;
  c.sequence = 32;
  return model::make_model(c);
}

// The memory model is usable in constant expressions: a stage's memory is known to the compiler.
constexpr train::training_knobs small_knobs{.global_batch = 8, .microbatch = 2};
static_assert(train::device_memory(small_gpt(), train::parallelism{2, 2, 1}, small_knobs, 0).total.value() >
              0);
static_assert(train::device_memory(small_gpt(), train::parallelism{2, 2, 1}, small_knobs, 0).activations >
              train::device_memory(small_gpt(), train::parallelism{2, 2, 1}, small_knobs, 1).activations);

}  // namespace

TEST_CASE("Figure 1 of Korthikanti et al. 2022: memory per GPU within 5%", "[memory]") {
  for (const auto& row : figure1) {
    INFO(row.model);
    const auto m = table5_model(row.model);
    const train::parallelism p{8, row.pp, 1};
    train::training_knobs k = table5_knobs(row);
    train::validate(m, p, k, 8 * row.pp);

    // Weights + grads + optimizer. The published figure equals 18 * 12 l h^2 / (t p) bytes to four digits:
    // the transformer blocks of one stage, without the embedding. It is matched by a stage holding only
    // blocks (stage 1; with pp = 1 the one stage, which also holds embedding and head).
    const int blocks_only_stage = row.pp > 1 ? 1 : 0;
    const memory_breakdown blocks_only = train::device_memory(m, p, k, blocks_only_stage);
    CHECK(relative_error(in_gib(blocks_only.model_states()), row.model_states_gib) < 0.05);

    // Activations of the first stage (the one Figure 1 shows), no recomputation.
    const memory_breakdown first = train::device_memory(m, p, k, 0);
    CHECK(relative_error(in_gib(first.activations), row.activations_gib) < 0.05);

    // Sequence parallelism + selective recomputation.
    k.sequence_parallel = true;
    k.recompute = model::recompute::selective;
    const memory_breakdown first_seq_sel = train::device_memory(m, p, k, 0);
    CHECK(relative_error(in_gib(first_seq_sel.activations), row.seq_sel_gib) < 0.05);
    // Model states do not depend on the recomputation mode.
    CHECK(first_seq_sel.model_states() == first.model_states());
  }
}

TEST_CASE("the first stage adds exactly the embedding's model states", "[memory]") {
  // Where the first stage differs from Figure 1 (turing-530b: +9%, megatron-1t: +11%), the difference is the
  // word and position embeddings at 18 bytes per parameter, which the paper's figure leaves out.
  const auto m = table5_model("megatron-1t");
  const train::parallelism p{8, 64, 1};
  train::training_knobs k;
  k.global_batch = 512;
  k.precision = hw::precision::fp16;
  const double extra = train::device_memory(m, p, k, 0).model_states().value() -
                       train::device_memory(m, p, k, 1).model_states().value();
  const double embedding_params = 51200.0 / 8.0 * 25600.0 + 2048.0 * 25600.0;
  CHECK(extra == Approx(18.0 * embedding_params));
}

TEST_CASE("microbatches in flight: closed forms per schedule", "[memory]") {
  SECTION("1F1B: stage i of p holds p - i, capped at the microbatches") {
    CHECK(train::microbatches_in_flight(pipeline_schedule::one_f_one_b, 0, 4, 8) == 4.0);
    CHECK(train::microbatches_in_flight(pipeline_schedule::one_f_one_b, 1, 4, 8) == 3.0);
    CHECK(train::microbatches_in_flight(pipeline_schedule::one_f_one_b, 3, 4, 8) == 1.0);
    CHECK(train::microbatches_in_flight(pipeline_schedule::one_f_one_b, 0, 4, 2) == 2.0);
    CHECK(train::microbatches_in_flight(pipeline_schedule::one_f_one_b, 0, 1, 16) == 1.0);
  }
  SECTION("interleaved: first stage p (1 + (p - 1) / (p v)); Megatron's warm-up count elsewhere") {
    // p = 4, v = 2: device 0 runs 2 * 3 + 1 * 4 = 10 warm-up chunk forwards plus 1, i.e. 11 chunks of half
    // its layers = 5.5 = 4 * (1 + 3 / 8).
    CHECK(train::microbatches_in_flight(pipeline_schedule::interleaved, 0, 4, 8, 2) == 5.5);
    CHECK(train::microbatches_in_flight(pipeline_schedule::interleaved, 0, 4, 8, 2) ==
          4.0 * (1.0 + 3.0 / 8.0));
    // Device 3: 0 + 4 warm-up + 1 = 5 chunks = 2.5 stage-microbatches.
    CHECK(train::microbatches_in_flight(pipeline_schedule::interleaved, 3, 4, 8, 2) == 2.5);
    // Capped at all m v chunk forwards of the iteration.
    CHECK(train::microbatches_in_flight(pipeline_schedule::interleaved, 0, 4, 8, 4) == Approx(19.0 / 4.0));
    CHECK(train::microbatches_in_flight(pipeline_schedule::interleaved, 0, 4, 4, 4) == 4.0);
    CHECK(train::microbatches_in_flight(pipeline_schedule::interleaved, 0, 8, 2, 3) == 2.0);
    // Korthikanti et al.'s gpt3-175b run: p = 8, v = 3 gives 8 * (1 + 7 / 24).
    CHECK(train::microbatches_in_flight(pipeline_schedule::interleaved, 0, 8, 64, 3) ==
          Approx(8.0 * (1.0 + 7.0 / 24.0)));
    // One chunk per device is plain 1F1B.
    CHECK(train::microbatches_in_flight(pipeline_schedule::interleaved, 1, 4, 8, 1) == 3.0);
  }
  SECTION("GPipe: every stage holds every microbatch of the replica") {
    for (int i = 0; i < 4; ++i)
      CHECK(train::microbatches_in_flight(pipeline_schedule::gpipe, i, 4, 8) == 8.0);
  }
  static_assert(train::microbatches_in_flight(pipeline_schedule::one_f_one_b, 2, 8, 100) == 6.0);
}

TEST_CASE("bytes per parameter as Megatron-LM keeps them", "[memory]") {
  using train::optimizer;
  static_assert(train::state_bytes_per_parameter(hw::precision::bf16, optimizer::adam).total() == 18.0);
  CHECK(train::state_bytes_per_parameter(hw::precision::bf16, optimizer::adam) ==
        train::bytes_per_parameter{2.0, 4.0, 12.0});
  CHECK(train::state_bytes_per_parameter(hw::precision::fp16, optimizer::adam).total() == 18.0);
  CHECK(train::state_bytes_per_parameter(hw::precision::bf16, optimizer::sgd) ==
        train::bytes_per_parameter{2.0, 4.0, 8.0});
  CHECK(train::state_bytes_per_parameter(hw::precision::fp32, optimizer::adam) ==
        train::bytes_per_parameter{4.0, 4.0, 8.0});
  CHECK(train::state_bytes_per_parameter(hw::precision::fp32, optimizer::sgd).total() == 12.0);
}

TEST_CASE("model states: bytes per parameter times the stage's parameters", "[memory]") {
  const auto m = small_gpt();
  const train::parallelism p{2, 2, 1};
  train::training_knobs k;
  k.global_batch = 4;
  const auto s = train::uniform_stage(m, 2, 1);
  const auto params = static_cast<double>(train::stage_parameters(m, s, 2));
  const auto b = train::stage_memory(m, p, k, s, 1);
  CHECK(b.weights.value() == 2.0 * params);
  CHECK(b.gradients.value() == 4.0 * params);
  CHECK(b.optimizer.value() == 12.0 * params);
  CHECK(b.total == b.weights + b.gradients + b.optimizer + b.activations);
}

TEST_CASE("the distributed optimizer divides the optimizer state by dp", "[memory]") {
  const auto m = table5_model("gpt3-175b");
  const train::parallelism p{8, 8, 4};
  train::training_knobs k;
  k.global_batch = 128;
  const memory_breakdown plain = train::device_memory(m, p, k, 0);
  k.distributed_optimizer = true;
  const memory_breakdown sharded = train::device_memory(m, p, k, 0);
  CHECK(sharded.optimizer.value() == Approx(plain.optimizer.value() / 4.0));
  CHECK(sharded.weights == plain.weights);
  CHECK(sharded.gradients == plain.gradients);
  CHECK(sharded.activations == plain.activations);
  // Megatron's table (docs/distrib_optimizer.md): 6 + 12 / d bytes per parameter.
  CHECK(sharded.model_states().value() / plain.model_states().value() == Approx((6.0 + 12.0 / 4.0) / 18.0));
}

TEST_CASE("parameters are conserved over the stages, a tied head keeps its own embedding copy", "[memory]") {
  const auto m = small_gpt();
  const std::int64_t total = model::parameter_count(m);
  const std::int64_t embedding_matrix = m.config.vocab * m.config.hidden;
  for (int pp : {1, 2, 3, 8}) {
    INFO("pp = " << pp);
    std::int64_t sum = 0;
    std::int64_t blocks = 0;
    for (int i = 0; i < pp; ++i) {
      const auto s = train::uniform_stage(m, pp, i);
      sum += train::stage_parameters(m, s, 1);
      blocks += s.blocks;
    }
    CHECK(blocks == m.config.layers);
    CHECK(sum == total + (pp > 1 ? embedding_matrix : 0));
  }
  // Uneven split: 8 blocks over 3 stages gives 2, 3, 3 (the remainder goes to the last stages).
  CHECK(train::uniform_stage(m, 3, 0).blocks == 2);
  CHECK(train::uniform_stage(m, 3, 1).blocks == 3);
  CHECK(train::uniform_stage(m, 3, 2).blocks == 3);
}

TEST_CASE("activations: Korthikanti's per-layer closed forms times the microbatches in flight", "[memory]") {
  // gpt3-175b shape, s = 2048, b = 1, h = 12288, a = 96, t = 8; 1F1B over p = 8, stage 2 (no embedding or
  // head): 12 blocks, 6 microbatches in flight.
  const auto m = table5_model("gpt3-175b");
  const train::parallelism p{8, 8, 1};
  train::training_knobs k;
  k.global_batch = 64;
  const double s = 2048.0, b = 1.0, h = 12288.0, a = 96.0, t = 8.0;
  const double in_flight_blocks = 6.0 * 12.0;

  // Tensor parallelism: s b h (10 + 24 / t + 5 a s / (h t)).
  CHECK(train::device_memory(m, p, k, 2).activations.value() ==
        Approx(in_flight_blocks * s * b * h * (10.0 + 24.0 / t + 5.0 * a * s / (h * t))));
  // Tensor + sequence parallelism + selective recomputation: 34 s b h / t.
  k.sequence_parallel = true;
  k.recompute = model::recompute::selective;
  CHECK(train::device_memory(m, p, k, 2).activations.value() ==
        Approx(in_flight_blocks * 34.0 * s * b * h / t));
  // Full recomputation (no sequence parallelism): 2 s b h per block in flight, plus one block's full
  // activations while it is recomputed.
  k.sequence_parallel = false;
  k.recompute = model::recompute::full;
  CHECK(train::device_memory(m, p, k, 2).activations.value() ==
        Approx(in_flight_blocks * 2.0 * s * b * h + s * b * h * (10.0 + 24.0 / t + 5.0 * a * s / (h * t))));
  // GPipe keeps all 64 microbatches.
  k.recompute = model::recompute::none;
  k.schedule = pipeline_schedule::gpipe;
  CHECK(train::device_memory(m, p, k, 2).activations.value() ==
        Approx(64.0 * 12.0 * s * b * h * (10.0 + 24.0 / t + 5.0 * a * s / (h * t))));
}

TEST_CASE("sequence parallelism with tp = 1 changes nothing", "[memory]") {
  const auto m = small_gpt();
  const train::parallelism p{1, 2, 1};
  train::training_knobs k;
  k.global_batch = 8;
  const auto plain = train::device_memory(m, p, k, 0);
  k.sequence_parallel = true;
  CHECK(train::device_memory(m, p, k, 0) == plain);
}

TEST_CASE("peak over stages and whether it fits", "[memory]") {
  const auto m = table5_model("megatron-1t");
  const train::parallelism p{8, 64, 1};
  train::training_knobs k;
  k.global_batch = 512;
  k.precision = hw::precision::fp16;
  k.sequence_parallel = true;
  k.recompute = model::recompute::selective;
  const train::stage_peak peak = train::peak_memory(m, p, k);
  CHECK(peak.stage == 0);  // the first stage holds the most microbatches and the embedding
  for (int i = 0; i < p.pp; ++i) CHECK(train::device_memory(m, p, k, i).total <= peak.memory.total);

  hw::device a100;
  a100.hbm = 80_GiB;
  CHECK(train::fits(peak.memory, a100));  // the run was made on A100-80GB
  hw::device small;
  small.hbm = 32_GiB;
  CHECK_FALSE(train::fits(peak.memory, small));
  // Without recomputation or sequence parallelism the first stage (about 33 + 134 GiB) does not fit.
  k.sequence_parallel = false;
  k.recompute = model::recompute::none;
  CHECK_FALSE(train::fits(train::peak_memory(m, p, k).memory, a100));
}
