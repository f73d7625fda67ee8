// `phaze cluster FILE` and `--cluster FILE` on estimate and plan: a cluster file of two device types and a
// measured link described, planned on (every stage on one device type, fitting its own devices' memory),
// and the exit codes for files and option mixes a user can fix (2).
#include "run_phaze.hpp"

#include <algorithm>
#include <string>
#include <vector>

using phaze::e2e::contains;
using phaze::e2e::run_json;
using phaze::e2e::run_phaze;

namespace {
const std::string mixed = std::string{PHAZE_TEST_DATA_DIR} + "/clusters/a100-v100-measured.json";
}

TEST_CASE("phaze cluster describes groups, bisection and the slowest links", "[e2e][cluster]") {
  const auto j = run_json("cluster " + mixed + "");
  CHECK(j["devices"] == 24);
  CHECK(j["nodes"] == 4);
  REQUIRE(j["groups"].size() == 2);
  CHECK(j["groups"][1]["device"] == "v100-16gb");
  CHECK(j["bisection_bytes_per_s"].get<double>() == Approx(200e9 + 25e9 / 8.0));
  REQUIRE(j["slowest_node_links"].size() == 5);
  CHECK(j["slowest_node_links"][0]["bytes_per_s"].get<double>() == Approx(2.5e9));
  CHECK(j["definition"]["schema"] == "phaze.cluster");
  const auto text = run_phaze("cluster " + mixed);
  CHECK(text.status == 0);
  CHECK(contains(text.out, "bisection bandwidth"));
}

TEST_CASE("phaze plan --cluster keeps every stage on one device type and in its memory", "[e2e][cluster]") {
  const auto j = run_json("plan gpt2 --cluster " + mixed +
                          " --global-batch 64 --precision fp16 --solver list "
                          "--top 3");
  CHECK(j["fits"] == true);
  for (const auto& plan : j["top"]) {
    for (const auto& s : plan["plan"]["stages"]) {
      CHECK(s["memory_bytes"].get<double>() <= s["capacity_bytes"].get<double>());
      const auto first = s["first_rank"].get<long long>();
      const auto last = first + s["devices"].get<long long>() - 1;
      // Ranks 0-15 are A100s, 16-23 V100s: no stage holds both.
      CHECK((last < 16 || first >= 16));
      CHECK(s["device"] == (first < 16 ? "a100-80gb" : "v100-16gb"));
    }
  }
  const auto e =
      run_json("estimate gpt2 --cluster " + mixed +
               " --tp 1 --pp 3 --global-batch 64 --microbatch 2 --stage-blocks 5,5,2 --precision fp16 "
               "--solver list");
  CHECK(e["plan"]["stages"][2]["device"] == "v100-16gb");
}

TEST_CASE("cluster files and option mixes a user can fix exit 2", "[e2e][cluster]") {
  const std::string data = std::string{PHAZE_TEST_DATA_DIR} + "/clusters/";
  for (const std::string& args :
       {"cluster " + data + "bad-node-out-of-range.json", "cluster " + data + "bad-deep.json",
        "cluster " + data + "no-such.json", "cluster " + data,
        "plan gpt2 --cluster " + mixed + " --device a100-80gb --devices 8 --global-batch 64",
        std::string{"plan gpt2 --global-batch 64"},
        "estimate gpt2 --cluster " + mixed + " --tp 1 --pp 5 --global-batch 64 --microbatch 1",
        "plan gpt2 --cluster " + mixed + " --global-batch 64 --placer downset"}) {
    INFO(args);
    const auto r = run_phaze(args);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "phaze: error:"));
  }
}

TEST_CASE("phaze plan --cluster orders ranks and emits a rankfile that realises the order",
          "[e2e][cluster]") {
  const auto j =
      run_json("plan gpt2 --cluster " + mixed + " --global-batch 64 --precision fp16 --solver list");
  const auto& ranks = j["ranks"];
  CHECK(ranks["method"] == "anneal");
  CHECK(ranks["time_per_batch_s"].get<double>() <= ranks["megatron_time_per_batch_s"].get<double>());
  CHECK(j["time_per_batch_s"].get<double>() ==
        Approx(ranks["time_per_batch_s"].get<double>()).epsilon(1e-12));
  // Every device appears once; every group's devices are of its stage's type (0-15 A100, 16-23 V100).
  std::vector<int> seen;
  for (const auto& stage : ranks["stages"]) {
    for (const auto& group : stage["replicas"]) {
      for (const auto& d : group) {
        seen.push_back(d.get<int>());
        CHECK(stage["device"] == (d.get<int>() < 16 ? "a100-80gb" : "v100-16gb"));
      }
    }
  }
  std::sort(seen.begin(), seen.end());
  CHECK(seen.size() == 24);
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
  const auto rankfile = run_phaze("plan gpt2 --cluster " + mixed +
                                  " --global-batch 64 --precision fp16 --solver list --emit rankfile");
  REQUIRE(rankfile.status == 0);
  CHECK(contains(rankfile.out, "rank 0=node"));
  CHECK(contains(rankfile.out, "rank 23=node"));
  CHECK(!contains(rankfile.out, "rank 24="));
}
