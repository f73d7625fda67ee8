// Tests of phaze/train/knob_space.hpp: the defaults are PHAZE's setting, every rule of validate on knob
// spaces and training spaces (each throws input_error with a message that says what to change), and the
// knobs of one setting or of a fixed run.
#include "phaze/train/knob_space.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "phaze/model/zoo.hpp"

using namespace phaze;
using model::recompute;
using train::pipeline_schedule;

namespace {
template <class Check>
std::string knob_error_of(Check check) {
  try {
    check();
  } catch (const input_error& e) {
    return e.what();
  }
  return "no error";
}

/// A training space of gpt3-175b (96 blocks, 96 heads) on 1024 devices, changed by `change`.
template <class Change>
std::string error_with(Change change) {
  train::training_space t;
  t.global_batch = 1536;
  t.devices = 1024;
  change(t);
  return knob_error_of([&] { train::validate(zoo::gpt3_175b(), t); });
}
}  // namespace

TEST_CASE("A knob space's defaults are PHAZE's setting", "[train]") {
  constexpr train::knob_space k{};
  static_assert(k.microbatches.size() == 4 && k.microbatches[3] == 8);
  static_assert(k.recompute.size() == 3 && k.sequence_parallel.size() == 2 && k.tensor_parallel.empty());
  static_assert(k.virtual_stages == 1 && k.schedule == pipeline_schedule::one_f_one_b);
  CHECK(knob_error_of([&] { train::validate(k); }) == "no error");
}

TEST_CASE("Every rule of a knob space names the mistake", "[train]") {
  auto error = [](auto change) {
    train::knob_space k;
    change(k);
    return knob_error_of([&] { train::validate(k); });
  };
  CHECK_THAT(error([](auto& k) { k.recompute.clear(); }), Catch::Contains("needs at least one value"));
  CHECK_THAT(error([](auto& k) {
               k.microbatches = {0, 1};
             }),
             Catch::Contains("microbatch sizes must be at least 1"));
  CHECK_THAT(error([](auto& k) { k.tensor_parallel = {-2}; }),
             Catch::Contains("tensor-parallel widths must be at least 1"));
  CHECK_THAT(error([](auto& k) { k.microbatches = {2, 2}; }), Catch::Contains("gives a value twice"));
  CHECK_THAT(error([](auto& k) { k.sequence_parallel = {true, true}; }), Catch::Contains("twice"));
  CHECK_THAT(error([](auto& k) { k.precision = hw::precision::tf32; }),
             Catch::Contains("bf16, fp16, fp32 or fp8"));
  CHECK_THAT(error([](auto& k) { k.virtual_stages = 0; }), Catch::Contains("virtual stages"));
  CHECK_THAT(error([](auto& k) { k.virtual_stages = 2; }), Catch::Contains("needs the interleaved schedule"));
  CHECK_THAT(error([](auto& k) { k.schedule = pipeline_schedule::interleaved; }),
             Catch::Contains("at least two model chunks"));
  CHECK(error([](auto& k) {
          k.schedule = pipeline_schedule::interleaved;
          k.virtual_stages = 2;
        }) == "no error");
  // A width that divides no model is still a valid knob: the search skips it (and says so if nothing is
  // left).
  CHECK(error([](auto& k) { k.tensor_parallel = {3}; }) == "no error");
}

TEST_CASE("Every rule of a training space names the mistake", "[train]") {
  CHECK(error_with([](auto&) {}) == "no error");
  CHECK_THAT(error_with([](auto& t) { t.global_batch = 0; }),
             Catch::Contains("global batch must be at least"));
  CHECK_THAT(error_with([](auto& t) {
               t.knobs.microbatches = {1, 2048};
             }),
             Catch::Contains("larger than the global batch"));
  // 1536 / 1024 devices: microbatch 4 needs dp | 384, which some tp * pp = 1024 / dp allows; 5 never divides.
  CHECK(error_with([](auto& t) { t.knobs.microbatches = {4}; }) == "no error");
  CHECK_THAT(error_with([](auto& t) { t.knobs.microbatches = {5}; }),
             Catch::Contains("divisible by microbatch * dp"));
  // Only tp 1 and pp <= 96 blocks: dp is at least 1024 / 96, so dp >= 16 and microbatch 512 * 16 > 1536.
  CHECK_THAT(error_with([](auto& t) {
               t.knobs.microbatches = {512};
               t.knobs.tensor_parallel = {1};
             }),
             Catch::Contains("divisible by microbatch * dp"));
  CHECK_THAT(error_with([](auto& t) { t.knobs.tensor_parallel = {5}; }),
             Catch::Contains("tensor-parallel width must divide the number of attention heads"));
  CHECK_THAT(error_with([](auto& t) { t.knobs.tensor_parallel = {3}; }),
             Catch::Contains("does not divide the number of devices"));
  CHECK_THAT(error_with([](auto& t) {
               t.knobs.tensor_parallel = {1};
               t.knobs.sequence_parallel = {true};
             }),
             Catch::Contains("every tensor-parallel width is 1"));
  CHECK_THAT(error_with([](auto& t) {
               t.devices = 16;
               t.knobs.tensor_parallel = {8};
               t.knobs.schedule = pipeline_schedule::interleaved;
               t.knobs.virtual_stages = 2;
             }),
             Catch::Contains("needs pp > 2"));
  // 96 blocks in pp * 5 chunks: no pp > 2 does it (96 is not a multiple of 5).
  CHECK_THAT(error_with([](auto& t) {
               t.knobs.schedule = pipeline_schedule::interleaved;
               t.knobs.virtual_stages = 5;
             }),
             Catch::Contains("split evenly into pp * vp model chunks"));
  CHECK(error_with([](auto& t) {
          t.knobs.schedule = pipeline_schedule::interleaved;
          t.knobs.virtual_stages = 4;
        }) == "no error");
}

TEST_CASE("A training space without a model or devices checks what it can", "[train]") {
  train::training_space t;
  t.global_batch = 12;
  t.knobs.microbatches = {1, 2, 3, 4};
  CHECK(knob_error_of([&] { train::validate(t); }) == "no error");
  t.knobs.microbatches = {8};
  CHECK_THAT(knob_error_of([&] { train::validate(t); }), Catch::Contains("divisible by microbatch * dp"));
  t.knobs.microbatches = {4};
  t.knobs.tensor_parallel = {5};  // no model: any width may do
  CHECK(knob_error_of([&] { train::validate(t); }) == "no error");
}

TEST_CASE("knobs_of fills a setting's knobs from the space's fixed knobs", "[train]") {
  train::knob_space k;
  k.schedule = pipeline_schedule::interleaved;
  k.virtual_stages = 3;
  k.opt = train::optimizer::sgd;
  k.distributed_optimizer = true;
  k.precision = hw::precision::fp16;
  const auto run = train::knobs_of(k, {4, recompute::selective, true}, 512);
  CHECK(run.global_batch == 512);
  CHECK(run.microbatch == 4);
  CHECK(run.recompute == recompute::selective);
  CHECK(run.sequence_parallel);
  CHECK(run.schedule == pipeline_schedule::interleaved);
  CHECK(run.virtual_stages == 3);
  CHECK(run.opt == train::optimizer::sgd);
  CHECK(run.distributed_optimizer);
  CHECK(run.precision == hw::precision::fp16);
  CHECK(run.sequence == 0);
}

TEST_CASE("fixed_knobs gives the run a space fixes, and refuses a space that leaves choices", "[train]") {
  train::training_space t;
  t.global_batch = 64;
  t.sequence = 1024;
  t.knobs.microbatches = {2};
  t.knobs.recompute = {recompute::full};
  t.knobs.sequence_parallel = {false};
  const train::training_knobs k = train::fixed_knobs(t);
  CHECK(k.global_batch == 64);
  CHECK(k.microbatch == 2);
  CHECK(k.sequence == 1024);
  CHECK(k.recompute == recompute::full);
  t.knobs.recompute = {recompute::full, recompute::none};
  CHECK_THAT(knob_error_of([&] { (void)train::fixed_knobs(t); }), Catch::Contains("not fixed"));
}
