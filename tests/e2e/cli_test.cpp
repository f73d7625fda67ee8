// End-to-end tests of the `phaze` program's `models` and `describe` commands: run it, read its exit status,
// its stdout (JSON or a table) and its stderr.
#include <catch2/catch.hpp>

#include "run_phaze.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

using namespace phaze::e2e;

const std::string llama_config = std::string{PHAZE_TEST_DATA_DIR} + "/hf/llama-2-7b-hf.json";

}  // namespace

TEST_CASE("phaze models --format json lists every zoo model", "[e2e]") {
  const auto j = run_json("models");
  REQUIRE(j.contains("models"));
  const auto& models = j.at("models");
  REQUIRE(models.is_array());
  std::vector<std::string> names;
  for (const auto& m : models) {
    names.push_back(m.at("name").get<std::string>());
    for (const char* key :
         {"layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "sequence", "parameters"}) {
      CAPTURE(m.at("name"), key);
      CHECK(m.at(key).is_number_integer());
    }
    CHECK(m.at("family").is_string());
    CHECK(m.at("source").is_string());
  }
  for (const char* name :
       {"bert-large", "megatron-bert", "gpt2", "gpt2-xl", "megatron-gpt2-40", "megatron-gpt2-54",
        "megatron-gpt2-72", "gpt3-175b", "megatron-22b", "turing-530b", "megatron-1t", "opt-350m", "opt-1.3b",
        "opt-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b"}) {
    CAPTURE(name);
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  }
  for (const auto& m : models) {
    if (m.at("name") == "llama2-7b") CHECK(m.at("parameters") == 6738415616);
  }
}

TEST_CASE("phaze models prints a table by default", "[e2e]") {
  const auto r = run_phaze("models");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  CHECK(contains(r.out, "llama2-7b"));
  CHECK(contains(r.out, "6.74B"));
  CHECK(contains(r.out, "gpt3-175b"));
}

TEST_CASE("phaze describe llama2-7b reports untied embeddings and 6,738,415,616 parameters", "[e2e]") {
  const auto j = run_json("describe llama2-7b");
  CHECK(j.at("name") == "llama2-7b");
  CHECK(j.at("parameters") == 6738415616);
  CHECK(j.at("tied_embeddings") == false);
  CHECK(j.at("layers") == 32);
  CHECK(j.at("hidden") == 4096);
  CHECK(j.at("heads") == 32);
  CHECK(j.at("kv_heads") == 32);
  CHECK(j.at("head_dim") == 128);
  CHECK(j.at("ffn") == 11008);
  CHECK(j.at("vocab") == 32000);
  CHECK(j.at("sequence") == 4096);
  CHECK(j.at("forward_flops_per_token").get<double>() > 2.0 * 6738415616.0 * 0.9);
  CHECK(j.at("backward_flops_per_token").get<double>() ==
        Approx(2.0 * j.at("forward_flops_per_token").get<double>()));
  for (const char* mode : {"none", "selective", "full"}) {
    CAPTURE(mode);
    CHECK(j.at("activation_bytes_per_layer").at(mode).get<double>() > 0.0);
  }
  CHECK(j.at("activation_bytes_per_layer").at("full") == 2 * 4096 * 4096);
  REQUIRE(j.at("layer_kinds").size() == 3);
}

TEST_CASE("phaze describe gpt2-xl reports tied embeddings and 1,557,611,200 parameters", "[e2e]") {
  const auto j = run_json("describe gpt2-xl");
  CHECK(j.at("parameters") == 1557611200);
  CHECK(j.at("tied_embeddings") == true);
  CHECK(j.at("activation_bytes_per_layer_tp8_sp").is_null());  // 25 heads
}

TEST_CASE("phaze describe prints a table with the parameter count", "[e2e]") {
  const auto r = run_phaze("describe llama2-7b");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  CHECK(contains(r.out, "6,738,415,616"));
  CHECK(contains(r.out, "tied input/output embeddings  no"));
  CHECK(contains(r.out, "GFLOP"));
  const auto tied = run_phaze("describe gpt2-xl --format table");
  REQUIRE(tied.status == 0);
  CHECK(contains(tied.out, "1,557,611,200"));
  CHECK(contains(tied.out, "tied input/output embeddings  yes"));
}

TEST_CASE("phaze describe --seq changes the sequence and the FLOPs per token", "[e2e]") {
  const auto base = run_json("describe gpt3-175b");
  const auto longer = run_json("describe gpt3-175b --seq 4096");
  CHECK(base.at("sequence") == 2048);
  CHECK(longer.at("sequence") == 4096);
  // Attention's s^2 work grows with the sequence: 72 l h^2 s/6h per token more, i.e. 12 l h * 2048.
  const double growth =
      longer.at("training_flops_per_token").get<double>() - base.at("training_flops_per_token").get<double>();
  CHECK(growth == Approx(12.0 * 96 * 12288 * 2048));
  const auto vocab = run_json("describe gpt3-175b --vocab 51200");
  CHECK(vocab.at("vocab") == 51200);
  CHECK(vocab.at("parameters").get<std::int64_t>() - base.at("parameters").get<std::int64_t>() ==
        (51200 - 50257) * 12288);  // tied: one matrix grows
}

TEST_CASE("phaze describe reads a HuggingFace config.json like the zoo entry", "[e2e]") {
  REQUIRE(fs::exists(llama_config));
  auto from_file = run_json("describe '" + llama_config + "'");
  auto from_zoo = run_json("describe llama2-7b");
  for (auto* j : {&from_file, &from_zoo}) {
    j->erase("name");
    j->erase("source");
  }
  CHECK(from_file == from_zoo);
}

TEST_CASE("phaze --help and --version succeed", "[e2e]") {
  const auto help = run_phaze("--help");
  CHECK(help.status == 0);
  CHECK(contains(help.out, "models"));
  CHECK(contains(help.out, "describe"));
  const auto describe_help = run_phaze("describe --help");
  CHECK(describe_help.status == 0);
  CHECK(contains(describe_help.out, "--seq"));
  const auto version = run_phaze("--version");
  CHECK(version.status == 0);
  CHECK(contains(version.out, "phaze"));
}

TEST_CASE("bad input exits 2 with a message naming the problem", "[e2e]") {
  SECTION("unknown model suggests zoo names") {
    const auto r = run_phaze("describe gpt5 --format json");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "phaze: error: unknown model 'gpt5'"));
    CHECK(contains(r.err, "gpt2"));
  }
  SECTION("an unknown option is named before a missing required one") {
    const auto r = run_phaze("estimate gpt2 --device h100-sxm --devices 8 --tpp 1");
    CHECK(r.status == 2);
    CHECK(contains(r.err, "not expected: --tpp"));
    CHECK_FALSE(contains(r.err, "is required"));
    // With every option known, the missing one is named.
    const auto missing = run_phaze("estimate gpt2 --device h100-sxm --devices 8 --pp 1");
    CHECK(missing.status == 2);
    CHECK(contains(missing.err, "--tp is required"));
  }
  SECTION("malformed JSON file") {
    const auto path = write_temp("malformed.json", "{\"model_type\": \"llama\", \"hidden_size\": ");
    const auto r = run_phaze("describe '" + path.string() + "'");
    fs::remove(path);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "not valid JSON"));
    CHECK(contains(r.err, path.filename().string()));
  }
  SECTION("config missing a field") {
    auto config = nlohmann::json::parse(std::ifstream(llama_config));
    config.erase("num_attention_heads");
    const auto path = write_temp("missing.json", config.dump());
    const auto r = run_phaze("describe '" + path.string() + "'");
    fs::remove(path);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "num_attention_heads"));
  }
  SECTION("missing file") {
    const auto r = run_phaze("describe /nonexistent/phaze/config.json");
    CHECK(r.status == 2);
    CHECK(contains(r.err, "/nonexistent/phaze/config.json"));
  }
  SECTION("--seq 0 and negative or non-numeric --seq") {
    for (const char* value : {"0", "-5", "abc"}) {
      CAPTURE(value);
      const auto r = run_phaze(std::string{"describe llama2-7b --seq "} + value);
      CHECK(r.status == 2);
      CHECK(contains(r.err, "--seq"));
      CHECK(contains(r.err, "--help"));
    }
  }
  SECTION("--vocab 0") {
    const auto r = run_phaze("describe llama2-7b --vocab 0");
    CHECK(r.status == 2);
    CHECK(contains(r.err, "--vocab"));
  }
  SECTION("unknown subcommand") {
    const auto r = run_phaze("frobnicate");
    CHECK(r.status == 2);
    CHECK(contains(r.err, "unknown command 'frobnicate'"));
    CHECK(contains(r.err, "describe"));
  }
  SECTION("no command") {
    const auto r = run_phaze("");
    CHECK(r.status == 2);
    CHECK(contains(r.err, "no command given"));
  }
  SECTION("--format xml") {
    for (const char* command : {"models", "describe llama2-7b"}) {
      CAPTURE(command);
      const auto r = run_phaze(std::string{command} + " --format xml");
      CHECK(r.status == 2);
      CHECK(contains(r.err, "--format"));
      CHECK(contains(r.err, "xml"));
    }
  }
  SECTION("unknown option and missing argument") {
    const auto unknown = run_phaze("models --bogus");
    CHECK(unknown.status == 2);
    CHECK(contains(unknown.err, "--bogus"));
    const auto missing = run_phaze("describe");
    CHECK(missing.status == 2);
    CHECK(contains(missing.err, "MODEL"));
    const auto no_value = run_phaze("describe llama2-7b --seq");
    CHECK(no_value.status == 2);
    CHECK(contains(no_value.err, "--seq"));
  }
}
