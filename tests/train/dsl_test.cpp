// Tests of phaze/train/dsl.hpp at run time: dsl::training with values only known at run time checks the
// same rules (each throws input_error), training_for checks against a model, and a DSL-built space gives the
// same search spec as the defaults and the JSON reader.
#include "phaze/train/dsl.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "phaze/io/search_json.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/search/spec.hpp"
#include "phaze/train/knob_settings.hpp"

using namespace phaze;
namespace dsl = phaze::dsl;

namespace {
template <class Check>
std::string error_of(Check check) {
  try {
    check();
  } catch (const input_error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("dsl::training builds the knob space a search tries", "[train][dsl]") {
  const auto t =
      dsl::training(dsl::devices = 256, dsl::global_batch = 1024, dsl::microbatch = dsl::pow2(1, 4),
                    dsl::recompute = dsl::one_of(phaze::selective, phaze::full),
                    dsl::sequence_parallel = false, dsl::tensor_parallel = dsl::one_of(2, 8));
  CHECK(t.devices == 256);
  CHECK(t.global_batch == 1024);
  CHECK(std::vector<std::int64_t>(t.knobs.microbatches) == std::vector<std::int64_t>{1, 2, 4});
  CHECK(std::vector<int>(t.knobs.tensor_parallel) == std::vector<int>{2, 8});
  const auto settings = train::knob_settings(t.knobs);
  REQUIRE(settings.size() == 3 * 2);
  CHECK(settings.front() == train::knob_setting{1, model::recompute::selective, false});
  CHECK(settings.back() == train::knob_setting{4, model::recompute::full, false});
}

TEST_CASE("dsl::training checks values known only at run time", "[train][dsl]") {
  for (const std::int64_t batch : {std::int64_t{64}, std::int64_t{4}}) {
    const auto build = [&] {
      (void)dsl::training(dsl::global_batch = batch, dsl::microbatch = dsl::pow2(1, 8));
    };
    if (batch == 64) {
      CHECK(error_of(build) == "no error");
    } else {
      CHECK_THAT(error_of(build), Catch::Contains("larger than the global batch"));
    }
  }
  const int width = 1;
  CHECK_THAT(error_of([&] {
               (void)dsl::training(dsl::global_batch = 64, dsl::tensor_parallel = width,
                                   dsl::sequence_parallel = true);
             }),
             Catch::Contains("every tensor-parallel width is 1"));
}

TEST_CASE("dsl::training_for checks the knobs against the model", "[train][dsl]") {
  const model::model m = zoo::get("gpt2");  // 12 heads, 12 blocks
  CHECK(error_of([&] { (void)dsl::training_for(m, dsl::global_batch = 64, dsl::tensor_parallel = 4); }) ==
        "no error");
  CHECK_THAT(error_of([&] { (void)dsl::training_for(m, dsl::global_batch = 64, dsl::tensor_parallel = 8); }),
             Catch::Contains("tensor-parallel width must divide the number of attention heads"));
  // 12 blocks in pp * 8 chunks: no pp > 2 does it; gpt2-xl's 48 blocks split at pp 3 or 6.
  const auto knobs =
      dsl::training(dsl::global_batch = 64, dsl::schedule = phaze::interleaved, dsl::virtual_stages = 8);
  CHECK_THAT(error_of([&] { (void)dsl::training_for(m, knobs); }), Catch::Contains("pp * vp model chunks"));
  CHECK(error_of([&] { (void)dsl::training_for(zoo::get("gpt2-xl"), knobs); }) == "no error");  // 48 blocks
}

TEST_CASE("A spec from dsl::training equals the defaults and the JSON reader's", "[train][dsl][search]") {
  const model::model m = zoo::get("gpt2");
  constexpr auto knobs = dsl::training(dsl::global_batch = 512, dsl::devices = 64);
  const search::spec from_dsl = search::spec_of(m, hw::phaze_default_space, knobs);
  search::spec by_hand;
  by_hand.model = m;
  by_hand.devices = 64;
  by_hand.global_batch = 512;
  CHECK(from_dsl.knobs == by_hand.knobs);
  CHECK(from_dsl.devices == by_hand.devices);
  CHECK(io::spec_to_json(from_dsl) == io::spec_to_json(by_hand));

  constexpr auto listed = dsl::training(
      dsl::global_batch = 512, dsl::microbatch = dsl::one_of(1, 2),
      dsl::recompute = dsl::one_of(phaze::none, phaze::full), dsl::tensor_parallel = dsl::pow2(1, 4),
      dsl::schedule = phaze::interleaved, dsl::virtual_stages = 2, dsl::distributed_optimizer = true);
  const auto json = nlohmann::json::parse(R"({"microbatches": [1, 2], "recompute": ["none", "full"],
      "tensor_parallel": [1, 2, 4], "schedule": "interleaved", "virtual_stages": 2,
      "distributed_optimizer": true})");
  CHECK(io::knobs_from_json(json) == listed.knobs);
}
