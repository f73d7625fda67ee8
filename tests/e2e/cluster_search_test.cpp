// `phaze search MODEL --cluster-space FILE`: which cluster to build. The fronts of a tiny space as JSON
// (schema, units in field names, increasing cost and throughput) and as text, front.json and front.svg in
// --out, the example space of the docs, and the exit codes: 2 for a file or an option mix a user can fix, 3
// when nothing within the budget has a plan that fits.
#include "run_phaze.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

using phaze::e2e::contains;
using phaze::e2e::read_file;
using phaze::e2e::run_json;
using phaze::e2e::run_phaze;
using phaze::e2e::temp_path;
using phaze::e2e::write_temp;

namespace {
/// Up to 8 H100s and 8 A100s in steps of 8: three compositions.
std::string tiny_space(double budget_usd) {
  return R"({"schema": "phaze.cluster-space", "version": 1, "budget_usd": )" + std::to_string(budget_usd) +
         R"(, "devices": [
      {"device": "h100-sxm", "price_usd": 30000, "power_w": 1200, "max": 8, "step": 8},
      {"device": "a100-80gb", "price_usd": 15000, "power_w": 800, "max": 8}]})";
}

const std::string cheap = " --global-batch 32 --microbatches 2 --recompute none";
}  // namespace

TEST_CASE("phaze search --cluster-space: the fronts as JSON, front.json and front.svg",
          "[e2e][cluster_search]") {
  const auto space = write_temp("space.json", tiny_space(1e6));
  const auto out = temp_path("front");
  const auto j = run_json("search gpt2 --cluster-space " + space.string() + cheap + " --out " + out.string());
  CHECK(j["schema"] == "phaze.cluster-front");
  CHECK(j["version"] == 1);
  CHECK(j["model"] == "gpt2");
  CHECK(j["global_batch"] == 32);
  CHECK(j["search"]["compositions"] == 3);
  CHECK(j["search"]["evaluated"].get<int>() + j["search"]["pruned"].get<int>() == 3);
  REQUIRE_FALSE(j["cost_front"].empty());
  REQUIRE_FALSE(j["power_front"].empty());
  double cost = 0.0;
  double rate = 0.0;
  for (const auto& p : j["cost_front"]) {
    CHECK(p["cost_usd"].get<double>() > cost);
    CHECK(p["throughput_samples_per_s"].get<double>() > rate);
    cost = p["cost_usd"].get<double>();
    rate = p["throughput_samples_per_s"].get<double>();
    CHECK(p["cost_usd"].get<double>() <= 1e6);
    CHECK(p.contains("power_w"));
    CHECK(p.contains("time_per_batch_s"));
    CHECK(p["upper_bound_samples_per_s"].get<double>() > p["throughput_samples_per_s"].get<double>());
    CHECK(p["plan"]["microbatch"] == 2);
    CHECK(p["plan"]["recompute"] == "none");
    CHECK(p["plan"]["stage_blocks"].size() == p["plan"]["stage_devices"].size());
  }
  CHECK(std::filesystem::exists(out / "front.json"));
  CHECK(nlohmann::json::parse(read_file(out / "front.json")) == j);
  const std::string svg = read_file(out / "front.svg");
  CHECK(contains(svg, "<svg"));
  CHECK(contains(svg, "class=\"front\""));
  CHECK(contains(svg, "class=\"front-label\""));

  const auto text = run_phaze("search gpt2 --cluster-space " + space.string() + cheap);
  INFO(text.err);
  CHECK(text.status == 0);
  CHECK(contains(text.out, "Pareto front, throughput vs cost"));
  CHECK(contains(text.out, "Pareto front, throughput vs power"));
  CHECK(contains(text.out, "8 x h100-sxm"));
  std::filesystem::remove_all(out);
  std::filesystem::remove(space);
}

TEST_CASE("phaze search --cluster-space runs the example space of the docs", "[e2e][cluster_search]") {
  const std::string path = std::string{PHAZE_TEST_DATA_DIR} + "/../../examples/clusters/space-h100-a100.json";
  const auto j = run_json("search gpt2 --cluster-space " + path +
                          " --global-batch 256 --microbatches 4 --recompute none --tp 1");
  CHECK(j["space"]["name"] == "space-h100-a100");
  CHECK_FALSE(j["cost_front"].empty());
}

TEST_CASE("phaze search --cluster-space: exit 2 for what a user can fix, 3 when nothing fits the budget",
          "[e2e][cluster_search]") {
  const auto no_budget = write_temp("no-budget.json", R"({"devices": [{"device": "h100-sxm", "price_usd": 1,
      "power_w": 1, "max": 8}]})");
  const auto unknown = write_temp("unknown.json", R"({"budget_usd": 1e6, "devices": [{"device": "h100-sxm",
      "price_usd": 1, "power_w": 1, "max": 8, "cnt": 3}]})");
  for (const auto& [args, message] :
       {std::pair{"search gpt2 --cluster-space " + no_budget.string() + cheap, std::string{"budget_usd"}},
        std::pair{"search gpt2 --cluster-space " + unknown.string() + cheap, std::string{"devices[0].cnt"}},
        std::pair{"search gpt2 --cluster-space /no/such/space.json" + cheap, std::string{"cannot open"}},
        std::pair{"search gpt2 --cluster-space " + no_budget.string() + cheap + " --devices 64",
                  std::string{"--devices"}},
        std::pair{"search --cluster-space " + no_budget.string() + cheap, std::string{"MODEL"}},
        std::pair{"search gpt2 --cluster-space " + no_budget.string(), std::string{"--global-batch"}}}) {
    const auto r = run_phaze(args);
    INFO(args << "\n" << r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, message));
  }
  // A budget below one node of the cheapest type: no composition.
  const auto poor = write_temp("poor.json", tiny_space(1000));
  auto r = run_phaze("search gpt2 --cluster-space " + poor.string() + cheap);
  INFO(r.err);
  CHECK(r.status == 3);
  CHECK(contains(r.err, "budget"));
  // Compositions within the budget, but no plan uses their devices (batch 1, tp 1, 12 blocks, 16 devices).
  const auto wide = write_temp("wide.json", R"({"budget_usd": 1e7, "devices": [{"device": "h100-sxm",
      "price_usd": 30000, "power_w": 1200, "min": 16, "max": 16}]})");
  r = run_phaze("search gpt2 --cluster-space " + wide.string() + " --global-batch 1 --microbatches 1 --tp 1");
  CHECK(r.status == 3);
  for (const auto& p : {no_budget, unknown, poor, wide}) std::filesystem::remove(p);
}

TEST_CASE("phaze search --cluster-space on one thread and on four: the same fronts and counts",
          "[e2e][cluster_search]") {
  // Up to 16 H100s, 16 A100s and 16 V100s in steps of 8, at most two types: compositions of one and two types
  // (the latter in both rank orders). The rounds are fixed (16 compositions), so four threads plan and prune
  // the very compositions one thread does, and find the same fronts.
  const auto space = write_temp("space-threads.json", R"({"schema": "phaze.cluster-space", "version": 1,
      "budget_usd": 1e7, "max_types": 2, "devices": [
      {"device": "h100-sxm", "price_usd": 30000, "power_w": 1200, "max": 16, "step": 8},
      {"device": "a100-80gb", "price_usd": 15000, "power_w": 800, "max": 16, "step": 8},
      {"device": "v100-16gb", "price_usd": 8000, "power_w": 300, "max": 16, "step": 8}]})");
  const std::string args = "search gpt2 --cluster-space '" + space.string() + "'" + cheap;
  const auto one = run_json(args + " --threads 1");
  const auto four = run_json(args + " --threads 4");
  CHECK(one["search"]["compositions"].get<int>() > 16);  // more than one round
  for (const char* count : {"compositions", "evaluated", "pruned", "infeasible", "plans_evaluated"})
    CHECK(four["search"][count] == one["search"][count]);
  CHECK(!one["cost_front"].empty());
  CHECK(four["cost_front"] == one["cost_front"]);
  CHECK(four["power_front"] == one["power_front"]);
  std::filesystem::remove(space);
}

TEST_CASE("phaze search --cluster-space under mpirun: the same fronts from two processes",
          "[e2e][cluster_search]") {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    WARN("mpirun not found: skipped (Debian package openmpi-bin)");
    return;
  }
  // Up to 16 H100s and 16 A100s in steps of 8: eight compositions, dealt to two processes a round at a time.
  const auto space = write_temp("space-mpi.json", R"({"schema": "phaze.cluster-space", "version": 1,
      "budget_usd": 1e7, "devices": [
      {"device": "h100-sxm", "price_usd": 30000, "power_w": 1200, "max": 16, "step": 8},
      {"device": "a100-80gb", "price_usd": 15000, "power_w": 800, "max": 16, "step": 8}]})");
  const std::string args = "search gpt2 --cluster-space '" + space.string() + "'" + cheap;
  const auto one = run_json(args);
  const auto out = temp_path("mpi-front.json");
  // Open MPI refuses root without these; ASan builds would report Open MPI's own leaks.
  const std::string launch =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 mpirun -np 2 "
      "--oversubscribe '" +
      std::string{PHAZE_EXECUTABLE} + "' " + args + " --format json > '" + out.string() + "' 2>/dev/null";
  REQUIRE(std::system(launch.c_str()) == 0);
  const auto two = nlohmann::json::parse(read_file(out));  // rank 0 alone prints
  CHECK(two["search"]["compositions"] == one["search"]["compositions"]);
  CHECK(two["search"]["evaluated"].get<int>() + two["search"]["pruned"].get<int>() ==
        two["search"]["compositions"].get<int>());
  CHECK(two["cost_front"] == one["cost_front"]);
  CHECK(two["power_front"] == one["power_front"]);
}

TEST_CASE("phaze search --cluster-space stopped by Ctrl-C keeps the fronts of what it searched",
          "[e2e][cluster_search]") {
  // 33 x 33 mixes of up to 256 H100s and 256 A100s, every one planned (--exhaustive) for a 72-block model:
  // about 16 s here on two threads, far longer than the second of progress this test waits for before it
  // sends SIGINT.
  const auto space = write_temp("big-space.json", R"({"schema": "phaze.cluster-space", "version": 1,
    "budget_usd": 1e9, "devices": [
      {"device": "h100-sxm", "price_usd": 30000, "power_w": 1200, "max": 256, "step": 8},
      {"device": "a100-80gb", "price_usd": 15000, "power_w": 800, "max": 256, "step": 8}]})");
  const auto out = temp_path("stopped-front");
  const auto err = temp_path("stopped-stderr.txt");
  const std::string exe = PHAZE_EXECUTABLE;
  std::vector<std::string> argv_text{exe,
                                     "search",
                                     "megatron-gpt2-72",
                                     "--cluster-space",
                                     space.string(),
                                     "--global-batch",
                                     "512",
                                     "--microbatches",
                                     "1,2,4",
                                     "--exhaustive",
                                     "--progress",
                                     "--format",
                                     "json",
                                     "--out",
                                     out.string()};
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto printed = temp_path("stopped-stdout.json");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, printed.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  // Two progress lines (--progress prints one a second into a file): a few compositions are planned.
  const auto progress_lines = [&] {
    const std::string text = read_file(err);
    std::size_t lines = 0;
    for (std::size_t at = text.find("compositions"); at != std::string::npos;
         at = text.find("compositions", at + 1))
      ++lines;
    return lines;
  };
  for (int wait = 0; wait < 60000 && progress_lines() < 2; wait += 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO(read_file(err));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(contains(read_file(err), "interrupted:"));
  const auto j = nlohmann::json::parse(read_file(out / "front.json"));
  CHECK(nlohmann::json::parse(read_file(printed)) == j);
  CHECK(j["search"]["unsearched"].get<int>() > 0);
  CHECK(j["search"]["compositions"].get<int>() + j["search"]["unsearched"].get<int>() == 33 * 33 - 1);
  CHECK_FALSE(j["cost_front"].empty());
  CHECK(std::filesystem::exists(out / "front.svg"));
  std::filesystem::remove_all(out);
}
