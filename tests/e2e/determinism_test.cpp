// Identical inputs give byte-identical JSON: every command that prints a JSON document, run twice (plan over
// a mixed cluster too, whose rank annealing is seeded). `phaze search` is checked across thread and process
// counts in search_test.cpp.
#include <catch2/catch.hpp>

#include "run_phaze.hpp"

#include <string>
#include <vector>

using namespace phaze::e2e;

TEST_CASE("every JSON command prints the same bytes when run again", "[e2e][determinism]") {
  const std::string data = PHAZE_TEST_DATA_DIR;
  const std::vector<std::string> commands{
      "models",
      "describe llama2-7b",
      "describe '" + data + "/hf/mistral-7b-v0.1.json'",
      "devices",
      "devices h100-sxm",
      "cluster '" + data + "/clusters/amp-t4.json'",
      "schedule gpt3-175b --device a100-80gb --tp 8 --solver list",
      "estimate llama2-7b --device h100-sxm --devices 64 --tp 2 --pp 2 --global-batch 512 --microbatch 1",
      "plan gpt2-xl --device v100-16gb --devices 32 --global-batch 512 --top 5 --solver list",
      "plan gpt2 --cluster '" + data + "/clusters/a100-v100-measured.json' --global-batch 64 --solver list",
      // Its compositions are evaluated on all cores, in whatever order the threads take them.
      "search gpt2 --cluster-space '" + std::string{PHAZE_SOURCE_DIR} +
          "/examples/clusters/space-h100-a100.json' --global-batch 256 --out '" +
          temp_path("front").string() + "'",
  };
  for (const auto& c : commands) {
    const auto first = run_phaze(c + " --format json");
    const auto second = run_phaze(c + " --format json");
    INFO("phaze " << c << "\nstderr: " << first.err);
    REQUIRE(first.status == 0);
    CHECK(second.status == 0);
    CHECK(first.out == second.out);
  }
}
