// End-to-end tests of `phaze search`: the same best.json for one thread, several threads and two MPI
// processes; a search killed midway and resumed gives the same best.json without evaluating any design twice;
// the outputs are written; mistakes in a spec exit 2 naming them.
#include <catch2/catch.hpp>

#include "run_phaze.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

using namespace phaze::e2e;

namespace {
/// A space of a few hundred designs on a small cluster: a search takes about a second.
const char* const small_spec = R"({"model": "gpt2", "devices": 16, "global_batch": 64,
 "space": {"tensor_cores": {"pow2": [1, 16]}, "tc_width": {"pow2": [16, 256]}, "tc_depth": {"same_as": "tc_width"},
           "vector_cores": {"pow2": [1, 8]}, "vc_width": {"same_as": "tc_width"},
           "global_buffer_mib": {"pow2": [16, 64]}, "min_area_mm2": 180},
 "knobs": {"microbatches": [1, 2]}})";

/// Lines of a file.
std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

/// The records of results.jsonl as (design index, scheduler): every design once with the list scheduler's
/// first pass, and the designs refined on ILP schedules once more. `count` is the number of lines.
std::set<std::pair<std::uint64_t, std::string>> indices(const fs::path& file, std::size_t* count) {
  std::set<std::pair<std::uint64_t, std::string>> out;
  *count = 0;
  for (const auto& line : lines_of(file)) {
    const auto j = nlohmann::json::parse(line);
    out.emplace(j.at("index").get<std::uint64_t>(), j.value("scheduler", std::string{"list"}));
    ++*count;
  }
  return out;
}

/// How a search stopped midway ended.
struct stopped_search {
  bool interrupted =
      false;       ///< the signal was sent (results.jsonl reached the count before the search ended)
  int status = 0;  ///< waitpid's status
};

/// Starts `phaze search --spec SPEC --quiet --exhaustive --threads 1 --out OUT` (stdout to /dev/null, stderr
/// to `err` when given), sends `signal` once results.jsonl holds `records` lines and waits for it to end.
stopped_search stop_search_midway(const fs::path& spec, const fs::path& out, std::size_t records, int signal,
                                  const fs::path& err = {}) {
  const std::string exe = PHAZE_EXECUTABLE;
  std::vector<std::string> argv_text{exe,       "search",       "--spec",    spec.string(),
                                     "--quiet", "--exhaustive", "--threads", "1",
                                     "--out",   out.string()};
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  if (!err.empty())
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  stopped_search result;
  for (int wait = 0; wait < 60000; wait += 5) {
    if (fs::exists(out / "results.jsonl") && lines_of(out / "results.jsonl").size() >= records) {
      ::kill(pid, signal);
      result.interrupted = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::waitpid(pid, &result.status, 0);
  return result;
}
}  // namespace

TEST_CASE("phaze search gives the same best.json for 1 thread, 2 threads and 2 MPI processes",
          "[e2e][search]") {
  const fs::path spec = write_temp("spec.json", small_spec);
  const fs::path one = temp_path("one"), two = temp_path("two"), mpi = temp_path("mpi");
  const std::string args = "search --spec '" + spec.string() + "' --quiet --out ";
  const auto a = run_phaze(args + "'" + one.string() + "' --threads 1");
  REQUIRE(a.status == 0);
  CHECK(contains(a.out, "tpuv4-like"));
  CHECK(contains(a.out, "spotlight-style"));
  const auto b = run_phaze(args + "'" + two.string() + "' --threads 2");
  REQUIRE(b.status == 0);
  const std::string best = read_file(one / "best.json");
  CHECK(read_file(two / "best.json") == best);
  for (const char* file : {"results.jsonl", "pareto.csv", "report.md", "report.html", "pareto.svg",
                           "timeline.svg", "spec.json"}) {
    CHECK(fs::file_size(one / file) > 0);
  }
  // The report states the workload it assumed, and an area rule the designs obey.
  const std::string md = read_file(one / "report.md");
  for (const char* item : {"- **Sequence length**: 1024 tokens\n", "- **Vocabulary**: 50257 tokens\n",
                           "- **Precision**: bf16\n"}) {
    CHECK(contains(md, item));
  }
  const auto space_line = md.find("- **Space**: ");
  REQUIRE(space_line != std::string::npos);
  const std::string space = md.substr(space_line, md.find('\n', space_line) - space_line);
  const auto at_least = space.find("at least ");
  REQUIRE(at_least != std::string::npos);
  const double minimum = std::stod(space.substr(at_least + 9));
  CHECK(minimum == 180.0);
  const bool exempt = contains(space, "except designs of one tensor core and one vector core");
  const auto csv = lines_of(one / "pareto.csv");
  REQUIRE(csv.size() > 1);
  for (std::size_t i = 1; i < csv.size(); ++i) {
    const double area = std::stod(csv[i].substr(csv[i].find(',') + 1));
    INFO(space << "\n" << csv[i]);
    CHECK((area >= minimum || exempt));
  }
  // The best design beats or equals the reference, and best.json names every baseline.
  const auto j = nlohmann::json::parse(best);
  for (const char* name : {"tpuv4-like", "spotlight-style", "megatron-uniform"}) {
    CHECK(j.at("baselines").contains(name));
  }
  CHECK(j.at("throughput_samples_per_s").get<double>() >=
        j.at("baselines").at("tpuv4-like").at("throughput_samples_per_s").get<double>());
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    WARN("mpirun not found: the MPI part is skipped (Debian package openmpi-bin)");
    return;
  }
  // Open MPI refuses root without these; ASan builds would report Open MPI's own leaks.
  const std::string launch =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 mpirun -np 2 "
      "--oversubscribe '" +
      std::string{PHAZE_EXECUTABLE} + "' " + args + "'" + mpi.string() + "' --threads 1 >/dev/null 2>&1";
  REQUIRE(std::system(launch.c_str()) == 0);
  CHECK(read_file(mpi / "best.json") == best);
  std::size_t n1 = 0, n2 = 0;
  CHECK(indices(one / "results.jsonl", &n1) == indices(mpi / "results.jsonl", &n2));
  CHECK(n1 == n2);
}

TEST_CASE("phaze search killed midway and resumed gives the same best.json and redoes nothing",
          "[e2e][search]") {
  const fs::path spec = write_temp("spec.json", small_spec);
  const fs::path whole = temp_path("whole"), killed = temp_path("killed");
  const std::string common = "search --spec '" + spec.string() + "' --quiet --exhaustive --threads 1 --out ";
  REQUIRE(run_phaze(common + "'" + whole.string() + "'").status == 0);
  std::size_t designs = 0;
  const auto all = indices(whole / "results.jsonl", &designs);
  REQUIRE(designs == all.size());
  REQUIRE(designs > 100);

  // Start the same search, kill it (SIGKILL) once a tenth of the designs are written.
  const auto [interrupted, status] = stop_search_midway(spec, killed, designs / 10, SIGKILL);
  REQUIRE(interrupted);
  REQUIRE(WIFSIGNALED(status));
  std::size_t written = 0;
  const auto before = indices(killed / "results.jsonl", &written);
  CHECK(written < designs);
  CHECK_FALSE(fs::exists(killed / "best.json"));

  const auto resumed = run_phaze(common + "'" + killed.string() + "' --resume");
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK(read_file(killed / "best.json") == read_file(whole / "best.json"));
  // Every design once: the finished ones were not evaluated again.
  std::size_t after_count = 0;
  const auto after = indices(killed / "results.jsonl", &after_count);
  CHECK(after_count == designs);
  CHECK(after == all);

  // A resume of another search into the same folder is refused.
  const fs::path other = write_temp("other.json", R"({"model": "gpt2", "devices": 8, "global_batch": 64,
      "space": {"tensor_cores": {"pow2": [1, 4]}, "min_area_mm2": 100}})");
  const auto refused =
      run_phaze("search --spec '" + other.string() + "' --quiet --out '" + killed.string() + "' --resume");
  CHECK(refused.status == 2);
  CHECK(contains(refused.err, "different search"));
}

TEST_CASE("phaze search: a spec with a mistake exits 2 with a clear message", "[e2e][search]") {
  const fs::path out = temp_path("bad");
  auto run_spec = [&](const std::string& text) {
    return run_phaze("search --spec '" + write_temp("bad.json", text).string() + "' --quiet --out '" +
                     out.string() + "'");
  };
  const auto unknown = run_spec(R"({"model": "gpt2", "knobs": {"microbatch": [1]}})");
  CHECK(unknown.status == 2);
  CHECK(contains(unknown.err, "did you mean 'microbatches'"));
  const auto empty = run_spec(R"({"model": "gpt2", "space": {"tensor_cores": {"one_of": []}}})");
  CHECK(empty.status == 2);
  CHECK(contains(empty.err, "non-empty"));
  const auto tiny = run_spec(R"({"model": "gpt2", "space": {"area_budget_mm2": 50}})");
  CHECK(tiny.status == 2);
  CHECK(contains(tiny.err, "holds no design"));
  // The co-search places uneven stages, which the interleaved schedule cannot use: said at once, not as "no
  // design fits" after the search.
  const auto interleaved = run_spec(
      R"({"model": "gpt2", "devices": 48, "global_batch": 96, "knobs": {"schedule": "interleaved", "virtual_stages": 2}})");
  CHECK(interleaved.status == 2);
  CHECK(contains(interleaved.err, "interleaved"));
  CHECK(contains(interleaved.err, "--placer uniform"));
  const auto model = run_phaze("search gpt5 --quiet --out '" + out.string() + "'");
  CHECK(model.status == 2);
  CHECK(contains(model.err, "did you mean"));
}

TEST_CASE("phaze search shows progress on a terminal only, and not with --quiet", "[e2e][search]") {
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    WARN("util-linux 'script' not found: the terminal part is skipped");
    return;
  }
  const fs::path spec = write_temp("spec.json", small_spec);
  const std::string args = std::string{"'"} + PHAZE_EXECUTABLE + "' search --spec '" + spec.string() +
                           "' --threads 1 --no-baselines --out '";
  // `script` runs the program on a pseudo-terminal: stderr is a TTY there.
  auto on_terminal = [&](const std::string& extra) {
    const fs::path log = temp_path("tty.txt");
    const std::string command = "script -qec \"" + args + temp_path("tty").string() + "'" + extra + "\" '" +
                                log.string() + "' >/dev/null 2>&1";
    REQUIRE(std::system(command.c_str()) == 0);
    return read_file(log);
  };
  const std::string shown = on_terminal("");
  CHECK(contains(shown, "designs]"));
  CHECK(contains(shown, "designs/s, ETA"));
  // The ETA counts only the designs the bound does not rule out yet (docs/search-report.md).
  CHECK(contains(shown, "to go, "));
  CHECK_FALSE(contains(on_terminal(" --quiet"), "designs/s, ETA"));
  // Not a terminal: no progress.
  const auto piped = run_phaze("search --spec '" + spec.string() + "' --threads 1 --no-baselines --out '" +
                               temp_path("pipe").string() + "'");
  REQUIRE(piped.status == 0);
  CHECK_FALSE(contains(piped.err, "designs/s"));
}

TEST_CASE("phaze search stopped by SIGINT keeps its records and prints the command that resumes it",
          "[e2e][search]") {
  const fs::path spec = write_temp("spec.json", small_spec);
  const fs::path out = temp_path("interrupted"), err = temp_path("interrupted-stderr.txt");
  const auto [interrupted, status] = stop_search_midway(spec, out, 20, SIGINT, err);
  REQUIRE(interrupted);
  const std::string said = read_file(err);
  INFO(said);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGINT);
  CHECK(contains(said, "designs finished are kept in"));
  const auto at = said.find("continue with:\n  phaze ");
  REQUIRE(at != std::string::npos);
  std::string command = said.substr(at + std::string{"continue with:\n  phaze "}.size());
  command = command.substr(0, command.find('\n'));
  CHECK(contains(command, "--resume"));
  const auto resumed = run_phaze(command);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK(fs::exists(out / "best.json"));
}
