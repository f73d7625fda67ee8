// `phaze cluster FILE` and `--cluster FILE` on estimate and plan: a cluster file of two device types and a
// measured link described, planned on (a stage of both types paced by the slower, every stage fitting its
// devices' memory),
// and the exit codes for files and option mixes a user can fix (2).
#include "run_phaze.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
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

TEST_CASE("phaze plan --cluster paces a stage of two types by the slower and keeps it in memory",
          "[e2e][cluster]") {
  const auto j = run_json("plan gpt2 --cluster " + mixed +
                          " --global-batch 64 --precision fp16 --solver list "
                          "--top 3");
  CHECK(j["fits"] == true);
  for (const auto& plan : j["top"]) {
    for (const auto& s : plan["plan"]["stages"]) {
      CHECK(s["memory_bytes"].get<double>() <= s["capacity_bytes"].get<double>());
      const auto first = s["first_rank"].get<long long>();
      const auto last = first + s["devices"].get<long long>() - 1;
      // Ranks 0-15 are A100s, 16-23 V100s: a stage holding both runs at the V100s' pace.
      const bool both = first < 16 && last >= 16;
      CHECK(s["device"] == (first < 16 && !both ? "a100-80gb" : "v100-16gb"));
      CHECK(s["device_types"].size() == (both ? 2U : 1U));
    }
  }
  const auto e =
      run_json("estimate gpt2 --cluster " + mixed +
               " --tp 1 --pp 3 --global-batch 64 --microbatch 2 --stage-blocks 5,5,2 --precision fp16 "
               "--solver list");
  CHECK(e["plan"]["stages"][2]["device"] == "v100-16gb");
  // One stage over all 24 devices: both types, the V100s pace it and their 16 GB bound its memory.
  const auto one = run_json("estimate gpt2 --cluster " + mixed +
                            " --tp 1 --pp 1 --global-batch 48 --microbatch 2 --precision fp16 --solver list");
  const auto& stage = one["plan"]["stages"][0];
  CHECK(stage["device"] == "v100-16gb");
  CHECK(stage["device_types"] == nlohmann::json::array({"a100-80gb", "v100-16gb"}));
  CHECK(stage["capacity_bytes"].get<double>() < 16e9);
  const auto text =
      run_phaze("estimate gpt2 --cluster " + mixed +
                " --tp 1 --pp 1 --global-batch 48 --microbatch 2 --precision fp16 --solver list");
  CHECK(contains(text.out, "v100-16gb, slowest of a100-80gb + v100-16gb"));
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

namespace {
/// rank -> (node, slot) from an Open MPI rankfile ("rank R=nodeN slot=S" lines).
std::vector<std::pair<int, int>> rankfile_map(const std::string& text) {
  std::vector<std::pair<int, int>> out;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);) {
    int r = 0, n = 0, s = 0;
    if (std::sscanf(line.c_str(), "rank %d=node%d slot=%d", &r, &n, &s) != 3) continue;
    if (static_cast<int>(out.size()) <= r) out.resize(static_cast<std::size_t>(r) + 1, {-1, -1});
    out[static_cast<std::size_t>(r)] = {n, s};
  }
  return out;
}

/// rank -> (node, device in the node) from `--emit megatron`'s torchrun lines: ranks are given node by node
/// in node-rank order, local rank i on the node's CUDA_VISIBLE_DEVICES[i].
std::vector<std::pair<int, int>> torchrun_map(const std::string& text) {
  std::vector<std::pair<int, int>> out;
  std::istringstream in{text};
  int expected_node_rank = 0;
  for (std::string line; std::getline(in, line);) {
    int node = 0;
    char visible[256] = {};
    if (std::sscanf(line.c_str(), "# on node%d: CUDA_VISIBLE_DEVICES=%255s", &node, visible) != 2) continue;
    int node_rank = -1;
    const auto at = line.find("--node_rank ");
    if (at != std::string::npos) node_rank = std::atoi(line.c_str() + at + 12);
    CHECK(node_rank == expected_node_rank++);
    std::istringstream devices{visible};
    for (std::string d; std::getline(devices, d, ',');) out.emplace_back(node, std::stoi(d));
  }
  return out;
}
}  // namespace

TEST_CASE(
    "phaze plan --cluster --emit megatron: the fastest plan Megatron-LM can run, not a slower even split",
    "[e2e][cluster]") {
  // GPT-2 XL on 16 A100 + 8 V100: the chain placer's best splits give the interior stages different block
  // counts (the stages on V100s hold fewer), which Megatron-LM cannot express; a plan of the search re-split
  // with free first and last stages and equal interior ones is faster than any uniform plan.
  const std::string args = "plan gpt2-xl --cluster " + mixed +
                           " --global-batch 64 --precision fp16 --solver list --ranks megatron";
  const auto launch = run_json(args + " --emit megatron");
  const auto uniform = run_json(args + " --placer uniform");
  const double emitted = launch.at("time_per_batch_s").get<double>();
  CHECK(emitted <= uniform.at("time_per_batch_s").get<double>() * (1 + 1e-9));
  CHECK(emitted >= launch.at("best_time_per_batch_s").get<double>() * (1 - 1e-9));
  std::vector<int> blocks;
  for (const auto& stage : launch.at("plan").at("stages")) blocks.push_back(stage.at("blocks").get<int>());
  REQUIRE(blocks.size() >= 3);
  for (std::size_t i = 2; i + 1 < blocks.size(); ++i) CHECK(blocks[i] == blocks[1]);
  // The arguments give that split.
  const std::string arguments = launch.at("arguments").get<std::string>();
  CHECK(contains(arguments, "--decoder-first-pipeline-num-layers " + std::to_string(blocks.front()) +
                                " --decoder-last-pipeline-num-layers " + std::to_string(blocks.back())));
}

TEST_CASE("phaze plan --cluster --emit megatron: the torchrun launch realises the rank order",
          "[e2e][cluster]") {
  // A short annealing: the properties hold for whatever order it ends in.
  const std::string args = "plan gpt2 --cluster " + mixed +
                           " --global-batch 64 --precision fp16 --solver list --rank-iterations 500";
  // Megatron-LM's order: the launch puts every rank where the rankfile does.
  const auto identity = run_phaze(args + " --ranks megatron --emit megatron");
  REQUIRE(identity.status == 0);
  CHECK(contains(identity.out, "--pipeline-model-parallel-size"));
  const auto rankfile = run_phaze(args + " --ranks megatron --emit rankfile");
  REQUIRE(rankfile.status == 0);
  CHECK(torchrun_map(identity.out) == rankfile_map(rankfile.out));
  // The searched order is one torchrun can launch: every node once, with each of its devices once (nodes 0
  // and 1 hold 8 A100s, nodes 2 and 3 4 V100s: a100-v100-measured.json).
  const auto searched = run_phaze(args + " --ranks auto --emit megatron");
  REQUIRE(searched.status == 0);
  CHECK_FALSE(contains(searched.out, "cannot express"));
  const auto launch = torchrun_map(searched.out);
  REQUIRE(launch.size() == 24);
  std::vector<std::vector<int>> devices(4);
  for (const auto& [node, device] : launch) devices[static_cast<std::size_t>(node)].push_back(device);
  for (std::size_t n = 0; n < 4; ++n) {
    std::sort(devices[n].begin(), devices[n].end());
    std::vector<int> all(n < 2 ? 8 : 4);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    CHECK(devices[n] == all);
  }
  // A composite model has no Megatron-LM arguments.
  const auto composite =
      run_phaze("plan transgan --device v100-16gb --devices 16 --global-batch 64 --emit megatron");
  CHECK(composite.status == 2);
  CHECK(contains(composite.err, "composite"));
}

TEST_CASE("phaze plan on device groups without measured links orders ranks by group sequences",
          "[e2e][cluster]") {
  // Two groups of 16, no measured links: --ranks auto takes the group orders, never slower than
  // Megatron-LM's order, and the plan's time is the order's.
  const auto two = phaze::e2e::write_temp(
      "two-groups.json",
      R"({"groups": [{"device": "h100-sxm", "count": 16}, {"device": "a100-80gb", "count": 16}]})");
  const auto j = run_json("plan gpt2 --cluster " + two.string() + " --global-batch 64 --solver list");
  const auto& ranks = j["ranks"];
  CHECK(ranks["method"] == "groups");
  CHECK(ranks["orders_evaluated"].get<int>() >= 2);
  CHECK(ranks["time_per_batch_s"].get<double>() <= ranks["megatron_time_per_batch_s"].get<double>());
  CHECK(j["time_per_batch_s"].get<double>() ==
        Approx(ranks["time_per_batch_s"].get<double>()).epsilon(1e-12));
  // Nine groups are more than the group orders take: asked for by name, exit 2 pointing at the annealing.
  std::string groups;
  for (int g = 0; g < 9; ++g)
    groups += std::string{g > 0 ? ", " : ""} + R"({"device": ")" + (g % 2 == 0 ? "h100-sxm" : "a100-80gb") +
              R"(", "count": 8})";
  const auto nine = phaze::e2e::write_temp("nine-groups.json", R"({"groups": [)" + groups + "]}");
  const auto r =
      run_phaze("plan gpt2 --cluster " + nine.string() + " --global-batch 72 --solver list --ranks groups");
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--ranks anneal"));
}

TEST_CASE("phaze plan --ranks groups on one thread and on three: the same order", "[e2e][cluster]") {
  // The A100s and V100s of the measured example without their measured links (so the group orders apply):
  // 2 sequences of the groups in every rank layout, timed on --threads N and decided in order.
  const auto unmeasured = phaze::e2e::write_temp("a100-v100.json", R"({"groups": [
      {"device": "a100-80gb", "count": 16},
      {"device": "v100-16gb", "count": 8, "links": {"inter_node_gbit_per_s": 25}}]})");
  const std::string args = "plan gpt2 --cluster '" + unmeasured.string() +
                           "' --global-batch 64 --precision fp16 --solver list --ranks groups";
  const auto one = run_json(args + " --threads 1");
  const auto three = run_json(args + " --threads 3");
  CHECK(one["ranks"]["method"] == "groups");
  CHECK(three["ranks"] == one["ranks"]);
  CHECK(three["time_per_batch_s"] == one["time_per_batch_s"]);
  const auto bad = run_phaze(args + " --threads 0");
  CHECK(bad.status == 2);
  CHECK(contains(bad.err, "--threads"));
  std::filesystem::remove(unmeasured);
}
