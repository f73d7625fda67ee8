/// @file
/// Tests of io::load_model: the MODEL argument as a zoo name or a path to a HuggingFace config.json.
#include <catch2/catch.hpp>

#include "../support/input_error_of.hpp"

#include <string>
#include <string_view>

#include "phaze/io/model_source.hpp"

namespace {

using phaze::input_error;
using phaze::io::load_model;

std::string hf_path(std::string_view file) {
  return std::string{PHAZE_TEST_DATA_DIR} + "/hf/" + std::string{file};
}

using phaze::testing::input_error_of;

}  // namespace

TEST_CASE("load_model resolves zoo names", "[io]") {
  CHECK(load_model("llama2-7b") == phaze::zoo::llama2_7b());
  CHECK(load_model("gpt3-175b") == phaze::zoo::gpt3_175b());
  CHECK(load_model("bert-large").config.name.view() == "bert-large");
}

TEST_CASE("load_model reads a HuggingFace config.json from a path", "[io]") {
  SECTION("a file that names itself (_name_or_path)") {
    const auto m = load_model(hf_path("llama-2-70b-hf.json"));
    CHECK(m.config.name.view() == "meta-llama/Llama-2-70b-hf");
    auto renamed = m;
    renamed.config.name = phaze::zoo::llama2_70b().config.name;
    CHECK(renamed == phaze::zoo::llama2_70b());
  }
  SECTION("a file without _name_or_path takes a name from its place") {
    const auto m = load_model(hf_path("meta-llama-3-8b.json"));
    CHECK_FALSE(m.config.name.empty());
    CHECK(phaze::model::parameter_count(m) == 8'030'261'248);
  }
}

TEST_CASE("load_model: a missing file is an input_error naming the path", "[io]") {
  const auto path = hf_path("no-such-dir/config.json");
  CHECK_THAT(input_error_of([&] { (void)load_model(path); }), Catch::Contains(path));
}

TEST_CASE("load_model: malformed JSON and bad fields name the file and the field", "[io]") {
  SECTION("malformed JSON") {
    const auto path = hf_path("bad_malformed.json");
    const auto message = input_error_of([&] { (void)load_model(path); });
    CHECK_THAT(message, Catch::Contains(path));
    CHECK_THAT(message, Catch::Contains("not valid JSON"));
  }
  SECTION("a missing field") {
    const auto path = hf_path("bad_missing_heads.json");
    const auto message = input_error_of([&] { (void)load_model(path); });
    CHECK_THAT(message, Catch::Contains(path));
    CHECK_THAT(message, Catch::Contains("'num_attention_heads'"));
  }
  SECTION("an unknown model_type") {
    const auto path = hf_path("bad_unknown_model_type.json");
    const auto message = input_error_of([&] { (void)load_model(path); });
    CHECK_THAT(message, Catch::Contains(path));
    CHECK_THAT(message, Catch::Contains("'model_type'"));
  }
}

TEST_CASE("load_model: an unknown zoo name suggests the closest names", "[io]") {
  SECTION("a truncated name") {
    const auto message = input_error_of([] { (void)load_model("llama2-7"); });
    CHECK_THAT(message, Catch::Contains("'llama2-7'"));
    CHECK_THAT(message, Catch::Contains("'llama2-7b'"));
  }
  SECTION("a misspelled name") {
    const auto message = input_error_of([] { (void)load_model("gpt2-xxl"); });
    CHECK_THAT(message, Catch::Contains("gpt2-xl"));
    CHECK_THAT(message, Catch::Contains("config.json"));
  }
}

TEST_CASE("looks_like_path tells files from zoo names", "[io]") {
  CHECK(phaze::io::looks_like_path("models/llama/config.json"));
  CHECK(phaze::io::looks_like_path("config.json"));
  CHECK_FALSE(phaze::io::looks_like_path("llama2-7b"));
}
