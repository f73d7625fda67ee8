// Tests of phaze/train/knobs.hpp: names of the knobs, the data-parallel degree, and every rule of validate
// (each throws input_error with a message that says what to change).
#include "phaze/train/knobs.hpp"

#include <catch2/catch.hpp>

#include <limits>

#include <string>

#include "phaze/model/zoo.hpp"

using namespace phaze;
using train::optimizer;
using train::pipeline_schedule;

namespace {

/// Korthikanti et al. 2022, Table 5: gpt3-175b on 64 GPUs, TP 8, PP 8, v 3, batch 64, microbatch 1.
struct run {
  model::model m = zoo::gpt3_175b();
  train::parallelism p{8, 8, 1};
  train::training_knobs k{};
  int devices = 64;
  run() {
    k.global_batch = 64;
    k.microbatch = 1;
    k.schedule = pipeline_schedule::interleaved;
    k.virtual_stages = 3;
  }
  void validate() const { train::validate(m, p, k, devices); }
};

/// The run, with one change, must throw input_error whose message contains `fragment`.
template <class Change>
void require_rule(Change change, const std::string& fragment) {
  run r;
  change(r);
  REQUIRE_THROWS_AS(r.validate(), input_error);
  REQUIRE_THROWS_WITH(r.validate(), Catch::Matchers::Contains(fragment));
}

}  // namespace

TEST_CASE("knob names round-trip and unknown names list the valid ones", "[knobs]") {
  for (auto o : train::all_optimizers) CHECK(train::parse_optimizer(train::to_string(o)) == o);
  for (auto s : train::all_schedules) CHECK(train::parse_pipeline_schedule(train::to_string(s)) == s);
  for (auto r : train::all_recompute_modes) CHECK(train::parse_recompute(model::to_string(r)) == r);
  for (auto p : train::training_precisions) CHECK(train::parse_precision(hw::to_string(p)) == p);
  CHECK(train::parse_pipeline_schedule("1f1b") == pipeline_schedule::one_f_one_b);

  CHECK_THROWS_AS(train::parse_optimizer("adagrad"), input_error);
  CHECK_THROWS_WITH(train::parse_optimizer("adagrad"),
                    Catch::Matchers::Contains("'adagrad'") && Catch::Matchers::Contains("'adam' or 'sgd'"));
  CHECK_THROWS_WITH(train::parse_pipeline_schedule("zb"),
                    Catch::Matchers::Contains("'1f1b', 'gpipe' or 'interleaved'"));
  CHECK_THROWS_WITH(train::parse_recompute("some"),
                    Catch::Matchers::Contains("'none', 'selective' or 'full'"));
  CHECK_THROWS_WITH(train::parse_precision("tf32"),
                    Catch::Matchers::Contains("'bf16', 'fp16', 'fp32' or 'fp8'"));
}

TEST_CASE("the host's time per op must lie in [0, 1 ms]", "[knobs]") {
  for (const double bad : {-1e-6, 2e-3, std::numeric_limits<double>::quiet_NaN()}) {
    run r;
    r.k.host_overhead = bad;
    CAPTURE(bad);
    CHECK_THROWS_WITH(r.validate(), Catch::Contains("`host_overhead`"));
  }
  for (const double good : {0.0, train::eager_host_per_op, 1e-3}) {
    run r;
    r.k.host_overhead = good;
    CHECK_NOTHROW(r.validate());
  }
}

TEST_CASE("the published runs validate", "[knobs]") {
  CHECK_NOTHROW(run{}.validate());
  run megatron_1t;
  megatron_1t.m = zoo::get("megatron-1t");
  megatron_1t.p = {8, 64, 1};
  megatron_1t.devices = 512;
  megatron_1t.k.global_batch = 512;
  megatron_1t.k.schedule = pipeline_schedule::one_f_one_b;
  megatron_1t.k.virtual_stages = 1;
  CHECK_NOTHROW(megatron_1t.validate());
  static_assert(train::microbatches_per_replica({8, 8, 2}, {.global_batch = 64, .microbatch = 4}) == 8);
}

TEST_CASE("the data-parallel degree uses every device", "[knobs]") {
  CHECK(train::data_parallel_degree(64, 8, 2) == 4);
  static_assert(train::data_parallel_degree(1024, 8, 8) == 16);
  CHECK_THROWS_WITH(train::data_parallel_degree(48, 8, 4), Catch::Matchers::Contains("divide"));
  CHECK_THROWS_AS(train::data_parallel_degree(0, 1, 1), input_error);
  CHECK_THROWS_AS(train::data_parallel_degree(8, 0, 1), input_error);
}

TEST_CASE("every validate rule throws input_error saying how to fix it", "[knobs]") {
  require_rule([](run& r) { r.devices = 0; }, "number of devices must be at least 1");
  require_rule([](run& r) { r.p.dp = 0; }, "tp, pp, dp and cp must each be at least 1");
  require_rule([](run& r) { r.devices = 128; }, "tp * pp * dp (* cp) must equal the number of devices");
  require_rule([](run& r) { r.p.cp = 0; }, "tp, pp, dp and cp must each be at least 1");
  require_rule(
      [](run& r) {
        r.p = {8, 4, 1, 2};
        r.k.fused_attention = false;
      },
      "context parallelism runs ring attention over fused attention");
  require_rule(
      [](run& r) {
        r.p = {8, 4, 1, 2};
        r.k.fused_attention = true;
        r.k.sequence = 2050;
      },
      "2 * cp chunks");
  require_rule([](run& r) { r.k.global_batch = 0; }, "global batch must be at least 1");
  require_rule([](run& r) { r.k.microbatch = 0; }, "microbatch must be at least 1");
  require_rule([](run& r) { r.k.sequence = -1; }, "sequence length must be positive");
  require_rule(
      [](run& r) {
        r.p.dp = 2;
        r.devices = 128;
        r.k.global_batch = 63;
      },
      "divisible by microbatch * dp");
  require_rule([](run& r) { r.k.precision = hw::precision::tf32; }, "bf16, fp16, fp32 or fp8");
  require_rule(
      [](run& r) {
        r.m = model::with_vocab(zoo::get("megatron-gpt2-40"), 51200);  // 40 blocks
        r.p = {1, 64, 1};
        r.k.schedule = pipeline_schedule::one_f_one_b;
        r.k.virtual_stages = 1;
      },
      "pp is larger than the number of transformer blocks");
  require_rule([](run& r) { r.k.virtual_stages = 0; }, "at least 1");
  require_rule([](run& r) { r.k.schedule = pipeline_schedule::one_f_one_b; },
               "needs the interleaved schedule");
  require_rule([](run& r) { r.k.virtual_stages = 1; }, "at least two model chunks");
  require_rule(
      [](run& r) {
        r.p = {8, 2, 4};
        r.k.global_batch = 64;
        r.k.virtual_stages = 2;
      },
      "pp > 2");
  require_rule([](run& r) { r.k.virtual_stages = 5; }, "split evenly into pp * vp model chunks");
  require_rule([](run& r) { r.k.global_batch = 60; }, "a multiple of pp");
  // The model's own shape rules: tp must divide the heads (96) and the MLP width.
  require_rule(
      [](run& r) {
        r.p = {5, 8, 1};
        r.devices = 40;
        r.k.global_batch = 64;
      },
      "tensor-parallel width must divide the number of attention heads");
  require_rule(
      [](run& r) {
        r.k.sequence = 2052;  // not divisible by tp = 8
        r.k.sequence_parallel = true;
      },
      "sequence length must be divisible by the tensor-parallel width");
}

TEST_CASE("sequence parallelism with tp = 1 is accepted as a no-op", "[knobs]") {
  run r;
  r.p = {1, 8, 8};
  r.k.sequence_parallel = true;
  CHECK_NOTHROW(r.validate());
}
