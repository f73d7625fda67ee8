// End-to-end tests of hostile input (docs/limits.md): integers past their limits, absurd and non-finite
// values, files that nest without end, are endless or are directories, and damaged search folders on
// --resume. Each must exit 2 (never crash, hang, exit 1 or run on a silently changed value) with a message
// that names what is wrong; a torn last line on resume is the one damage that is repaired.
#include <catch2/catch.hpp>

#include "run_phaze.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <tuple>
#include <vector>

using namespace phaze::e2e;

namespace {

struct hostile_case {
  std::string what;
  std::string args;     ///< phaze's arguments; FILE is replaced by the path of `file`
  std::string file;     ///< the contents of FILE ("" when the case needs none)
  std::string message;  ///< a part of the message the case must print
};

std::string nested(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') +
         std::string(static_cast<std::size_t>(depth), ']');
}

const char* const device_head = R"({"name": "x", "base": "tpuv4-like", )";

/// Runs a case and checks it exits 2 with its message on stderr.
void check_refused(const hostile_case& c) {
  std::string args = c.args;
  if (!c.file.empty()) {
    const fs::path file = write_temp("hostile.json", c.file);
    for (std::size_t at = args.find("FILE"); at != std::string::npos; at = args.find("FILE")) {
      args.replace(at, 4, "'" + file.string() + "'");
    }
  }
  const auto r = run_phaze(args);
  INFO(c.what << "\nphaze " << args.substr(0, 300) << "\nexit " << r.status
              << "\nstderr: " << r.err.substr(0, 600));
  CHECK(r.status == 2);
  CHECK(contains(r.err, c.message));
  CHECK_FALSE(contains(r.err, "internal error"));
}

/// A search of two designs on gpt2: about a second.
const char* const tiny_spec = R"({"model": "gpt2", "devices": 8, "global_batch": 16,
  "space": {"tensor_cores": {"pow2": [1, 2]}, "min_area_mm2": 100}, "knobs": {"microbatches": [1, 2]}})";

std::vector<std::string> file_lines(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

void write_file_lines(const fs::path& file, const std::vector<std::string>& lines,
                      bool final_newline = true) {
  std::ofstream out(file, std::ios::trunc);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    out << lines[i];
    if (i + 1 < lines.size() || final_newline) out << '\n';
  }
}

}  // namespace

TEST_CASE("numbers past their limits exit 2 naming the flag or field and the limit", "[e2e][hostile]") {
  const std::vector<hostile_case> cases{
      {"a device count that overflows an int",
       "plan gpt2 --device a100-80gb --devices 2147483647 --global-batch 64", "", "at most 1048576"},
      {"a device count that would hang",
       "plan gpt2 --device a100-80gb --devices 1000000000 --global-batch 64", "", "at most 1048576"},
      {"a vocabulary past int64's half",
       "estimate gpt2 --device a100-80gb --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 1 "
       "--vocab 9223372036854775807",
       "", "--vocab"},
      {"a vocabulary past int64", "describe gpt2 --vocab 99999999999999999999", "", "--vocab"},
      {"a global batch past the limit",
       "estimate gpt2 --device a100-80gb --devices 8 --tp 1 --pp 1 --global-batch 4294967296 --microbatch 1",
       "", "at most 1048576"},
      {"a negative degree",
       "estimate gpt2 --device a100-80gb --devices 8 --tp -1 --pp 1 --global-batch 64 --microbatch 1", "",
       "--tp"},
      {"a sequence past the limit", "describe gpt2 --seq 100000000", "", "at most 4194304"},
      {"a microbatch of too many tokens",
       "estimate gpt2 --device a100-80gb --devices 1 --tp 1 --pp 1 --global-batch 1048576 --microbatch "
       "1048576 "
       "--seq 4194304",
       "", "tokens"},
      {"a spec's device count past 2^32 (was silently 16)",
       "search --spec FILE --quiet --out /tmp/phaze-hostile-x", R"({"model": "gpt2", "devices": 4294967312})",
       "devices: must lie in [1, 1048576]"},
      {"a spec's HBM of 1e300 GiB", "search --spec FILE --quiet --out /tmp/phaze-hostile-x",
       R"({"model": "gpt2", "space": {"hbm_gib": 1e300}})", "space.hbm_gib"},
      {"a spec's pow2 range to 1e300 (never ended)", "search --spec FILE --quiet --out /tmp/phaze-hostile-x",
       R"({"model": "gpt2", "space": {"tensor_cores": {"pow2": [1, 1e300]}}})", "space.tensor_cores"},
      {"a spec's microbatch list with a fraction", "search --spec FILE --quiet --out /tmp/phaze-hostile-x",
       R"({"model": "gpt2", "knobs": {"microbatches": [1.5]}})", "knobs.microbatches"},
      {"a device with a 1e-300 GHz clock", "devices FILE",
       std::string{device_head} + R"("systolic": {"clock_ghz": 1e-300}})", "clock_ghz"},
      {"a device with 1e300 GiB of HBM", "devices FILE", std::string{device_head} + R"("hbm_gib": 1e300})",
       "hbm_gib"},
      {"a config whose hidden size overflows products", "describe FILE",
       R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16777216,
           "intermediate_size": 16777216, "num_hidden_layers": 16777216, "num_attention_heads": 16,
           "vocab_size": 32000, "max_position_embeddings": 4096})",
       "above"},
      {"a hybrid config whose Mamba-2 mixers overflow products", "describe FILE",
       R"({"model_type": "nemotron_h", "hidden_size": 4096, "intermediate_size": 16384,
           "num_hidden_layers": 2, "num_attention_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
           "hybrid_override_pattern": "M*", "mamba_num_heads": 16777216, "mamba_head_dim": 16777216,
           "ssm_state_size": 128, "n_groups": 8})",
       "Mamba-2 head count"},
      {"a hybrid config with a pattern of more blocks than layers", "describe FILE",
       R"({"model_type": "nemotron_h", "hidden_size": 4096, "intermediate_size": 16384,
           "num_hidden_layers": 2, "num_attention_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
           "hybrid_override_pattern": "M*M*M*M*", "mamba_head_dim": 64, "ssm_state_size": 128})",
       "hybrid_override_pattern"},
      {"a layer table with 2^31 devices (was clamped)", "plan --layer-table FILE --global-batch 8",
       R"({"format": "phaze-layer-table", "devices": 2147483648, "tables": []})", "devices"},
  };
  for (const auto& c : cases) check_refused(c);
}

TEST_CASE("files that nest without end, never end, or are not JSON exit 2 naming the file",
          "[e2e][hostile]") {
  const std::string deep = nested(100000);
  const std::vector<hostile_case> cases{
      {"100,000 nested arrays as a config", "describe FILE", deep,
       "nests arrays or objects more than 32 deep"},
      {"100,000 nested arrays as a device", "devices FILE", deep,
       "nests arrays or objects more than 32 deep"},
      {"100,000 nested arrays as a spec", "search --spec FILE --quiet --out /tmp/phaze-hostile-x", deep,
       "nests arrays or objects more than 32 deep"},
      {"100,000 nested arrays as a layer table", "plan --layer-table FILE --global-batch 8", deep,
       "nests arrays or objects more than 32 deep"},
      {"100,000 nested arrays as a cluster", "cluster FILE", deep,
       "nests arrays or objects more than 32 deep"},
      {"a spec holding []", "search --spec FILE --quiet --out /tmp/phaze-hostile-x", "[]",
       "must hold a JSON object"},
      {"a spec holding null (ran the default search)",
       "search --spec FILE --quiet --out /tmp/phaze-hostile-x", "null", "must hold a JSON object"},
      {"a spec holding 1e99999", "search --spec FILE --quiet --out /tmp/phaze-hostile-x", "1e99999",
       "not valid JSON"},
      {"a spec whose model is a number", "search --spec FILE --quiet --out /tmp/phaze-hostile-x",
       R"({"model": 7})", "model"},
      {"a config of the wrong type inside", "describe FILE",
       R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": "big"})",
       "hidden_size"},
      {"/dev/zero as a config", "describe /dev/zero.json", "", "cannot open"},
      {"/dev/zero as a spec", "search --spec /dev/zero --quiet --out /tmp/phaze-hostile-x", "",
       "larger than"},
      {"a directory as a spec", "search --spec /tmp --quiet --out /tmp/phaze-hostile-x", "",
       "is a directory"},
      {"a directory as a device", "devices /tmp/", "", "is a directory"},
  };
  for (const auto& c : cases) check_refused(c);
}

TEST_CASE("brute force on a wide graph stops at its step budget instead of running for hours",
          "[e2e][hostile]") {
  // Twelve layers without edges: every order is a topological order, so the chains of downsets number in the
  // billions, though the table is within the 16 nodes brute force accepts.
  std::string nodes;
  for (int i = 0; i < 12; ++i) {
    nodes += std::string{i > 0 ? ", " : ""} + R"({"name": "n)" + std::to_string(i) +
             R"(", "forward_s": 0.003, "backward_s": 0.006, "recompute_s": 0.003, "parameter_bytes": 2e8,
                 "activation_bytes": 3e7, "tensor_parallel": true})";
  }
  check_refused(
      {"12 independent layers under --placer brute",
       "plan --layer-table FILE --global-batch 64 --placer brute",
       R"({"format": "phaze-layer-table", "version": 1, "devices": 64, "memory_per_device_bytes": 3e9,
                     "microbatches": 64, "p2p_bandwidth_bytes_per_s": 5e10, "dp_bandwidth_bytes_per_s": 5e10,
                     "tables": [{"tp": 1, "nodes": [)" +
           nodes + R"(], "edges": []}]})",
       "use the chain or downset placer"});
}

TEST_CASE("a name cut to its capacity stays valid UTF-8 in the JSON output", "[e2e][hostile]") {
  // 47 bytes fit a model name: 23 two-byte characters and one more would cut the 24th in half.
  std::string name;
  for (int i = 0; i < 30; ++i) name += "\xC3\xA9";  // U+00E9
  const fs::path config =
      write_temp("config.json", R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "_name_or_path": ")" + name + R"(", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
    "vocab_size": 50257})");
  const auto r = run_phaze("describe '" + config.string() + "' --format json");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);  // throws on invalid UTF-8
  CHECK(j.dump().find("\xC3\xA9") != std::string::npos);
}

TEST_CASE("a damaged search folder is refused on --resume, naming what is wrong", "[e2e][hostile][search]") {
  const fs::path spec = write_temp("tiny.json", tiny_spec);
  const fs::path dir = temp_path("hostile-search");
  const std::string run = "search --spec '" + spec.string() +
                          "' --quiet --solver list --no-baselines --out '" + dir.string() + "'";
  REQUIRE(run_phaze(run).status == 0);
  const auto good = file_lines(dir / "results.jsonl");
  REQUIRE(good.size() >= 2);
  const std::string good_spec = read_file(dir / "spec.json");
  auto refused = [&](const std::string& message) {
    const auto r = run_phaze(run + " --resume");
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, message));
  };

  SECTION("a resume of the intact folder finds nothing to do and the same answer") {
    const std::string best = read_file(dir / "best.json");
    const auto r = run_phaze(run + " --resume");
    REQUIRE(r.status == 0);
    CHECK(read_file(dir / "best.json") == best);
    CHECK(file_lines(dir / "results.jsonl") == good);
  }
  SECTION("no spec.json") {
    fs::remove(dir / "spec.json");
    refused("holds no readable spec.json");
    CHECK(file_lines(dir / "results.jsonl") == good);  // nothing truncated
  }
  SECTION("a damaged spec.json") {
    std::ofstream(dir / "spec.json", std::ios::trunc) << good_spec.substr(0, good_spec.size() / 2);
    refused("is not valid JSON");
  }
  SECTION("a record repeated") {
    auto lines = good;
    lines.push_back(good.front());
    write_file_lines(dir / "results.jsonl", lines);
    refused("line " + std::to_string(lines.size()) + ": design");
  }
  SECTION("an edited throughput") {
    auto lines = good;
    auto j = nlohmann::json::parse(lines.front());
    REQUIRE(j.at("status") == "evaluated");
    j["throughput_samples_per_s"] = j.at("throughput_samples_per_s").get<double>() * 1.5;
    lines.front() = j.dump();
    write_file_lines(dir / "results.jsonl", lines);
    refused("line 1:");
  }
  SECTION("a garbage line in the middle, or last but with its newline") {
    auto lines = good;
    lines.push_back("{\"index\": 1, \"trunc");
    write_file_lines(dir / "results.jsonl", lines, true);
    refused("line " + std::to_string(lines.size()) + ": not a JSON record");
  }
  SECTION("a last line torn by a kill (no newline) is dropped and its design evaluated again") {
    auto lines = good;
    const std::string last = lines.back();
    lines.back() = last.substr(0, last.size() / 2);
    write_file_lines(dir / "results.jsonl", lines, false);
    const auto r = run_phaze(run + " --resume");
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(file_lines(dir / "results.jsonl").size() == good.size());
  }
}

TEST_CASE("a search whose results cannot be written stops at once with exit 2 and says how to resume",
          "[e2e][hostile][search]") {
  if (!fs::exists("/dev/full")) {
    WARN("/dev/full not found: the full-disk case is skipped");
    return;
  }
  // results.jsonl as a link to /dev/full: every write fails with ENOSPC, as on a full disk.
  const fs::path spec = write_temp("tiny.json", tiny_spec);
  const fs::path dir = temp_path("full-disk");
  fs::create_directories(dir);
  fs::create_symlink("/dev/full", dir / "results.jsonl");
  const auto r = run_phaze("search --spec '" + spec.string() +
                           "' --quiet --solver list --no-baselines --out '" + dir.string() + "'");
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "disk full"));
  CHECK(contains(r.err, "--resume"));
  CHECK_FALSE(fs::exists(dir / "best.json"));
}

TEST_CASE("an empty path is refused, never read as an option not given", "[e2e][hostile]") {
  // A shell passes "" for an unset variable: `--spec ""` used to run the whole default search and
  // `--report ""` to write no report, both silently.
  const std::string plan = "plan gpt2 --device a100-80gb --devices 8 --global-batch 8 ";
  for (const std::string& args :
       {std::string{"search --spec '' --quiet"}, std::string{"search --out '' --quiet"}, plan + "--report ''",
        plan + "--calibration ''", std::string{"plan --layer-table ''"},
        std::string{"plan gpt2 --cluster '' --global-batch 8"},
        std::string{"search gpt2 --cluster-space '' --global-batch 8"},
        std::string{"calibrate x.jsonl --out ''"}}) {
    INFO(args);
    const auto r = run_phaze(args);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "an empty path"));
  }
  // More HBM sizes than a dimension of the space holds: exit 2 naming the flag and the limit, not an
  // internal error.
  std::string sizes = "8";
  for (int g = 9; g < 8 + 65; ++g) sizes += "," + std::to_string(g);
  const auto many = run_phaze("search --hbm " + sizes + " --quiet --out '" + temp_path("hbm").string() + "'");
  CHECK(many.status == 2);
  CHECK(contains(many.err, "--hbm"));
  CHECK(contains(many.err, "at most 64"));
}

TEST_CASE("one writer per output folder: a second phaze on a folder in use is refused before any work",
          "[e2e][hostile][search]") {
  // The test holds the folder's lock as a running search would (flock on DIR/.phaze.lock).
  const fs::path spec = write_temp("tiny-locked.json", tiny_spec);
  const fs::path dir = temp_path("locked");
  fs::create_directories(dir);
  const int fd = ::open((dir / ".phaze.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const std::string search = "search --spec '" + spec.string() +
                             "' --quiet --solver list --no-baselines --out '" + dir.string() + "'";
  const auto refused = run_phaze(search);
  CHECK(refused.status == 2);
  CHECK(contains(refused.err, "another phaze is writing"));
  CHECK_FALSE(fs::exists(dir / "spec.json"));  // nothing of the refused run written
  const auto cluster =
      run_phaze("search gpt2 --cluster-space '" + std::string{PHAZE_SOURCE_DIR} +
                "/examples/clusters/space-h100-a100.json' --global-batch 64 --microbatches 1 --out '" +
                dir.string() + "'");
  CHECK(cluster.status == 2);
  CHECK(contains(cluster.err, "another phaze is writing"));
  const auto report =
      run_phaze("plan gpt2 --device h100-sxm --devices 8 --global-batch 8 --report '" + dir.string() + "'");
  CHECK(report.status == 2);
  CHECK(contains(report.err, "give another --report"));
  CHECK_FALSE(fs::exists(dir / "report.md"));
  ::close(fd);  // the first writer ends: the folder is free again
  const auto after = run_phaze(search);
  INFO(after.err);
  CHECK(after.status == 0);
  CHECK(fs::exists(dir / "best.json"));
}

TEST_CASE("reals inside their documented ranges only: no accepted cluster file makes a time infinite",
          "[e2e][hostile]") {
  // A collective efficiency or a link bandwidth of 1e-300 used to pass (above 0) and give "inf s" and a
  // NaN MFU; both have physical floors now, named with the field.
  const auto cluster = [](const std::string& efficiency, const std::string& link) {
    return write_temp(
        "tiny-cluster.json",
        R"({"schema": "phaze.cluster", "version": 1, "groups": [{"device": "a100-80gb", "count": 16}],
          "collective_efficiency": {"all_reduce": )" +
            efficiency + R"(}, "network": {"links": [{"from": 0, "to": 1, "gb_per_s": )" + link +
            R"(, "latency_us": 5}]}})");
  };
  const std::string estimate = " --tp 1 --pp 1 --global-batch 16 --microbatch 1 --format json";
  const auto fine = run_phaze("estimate gpt2 --cluster '" + cluster("0.8", "12.5").string() + "'" + estimate);
  INFO(fine.err);
  REQUIRE(fine.status == 0);
  CHECK_FALSE(contains(fine.out, "inf"));
  CHECK_FALSE(contains(fine.out, "nan"));
  CHECK_FALSE(contains(fine.out, "null"));
  for (const auto& [efficiency, link, field] :
       {std::tuple{"1e-300", "12.5", "all_reduce"}, std::tuple{"0.8", "1e-300", "gb_per_s"},
        std::tuple{"0.8", "1e300", "gb_per_s"}}) {
    INFO(efficiency << " " << link);
    const auto r =
        run_phaze("estimate gpt2 --cluster '" + cluster(efficiency, link).string() + "'" + estimate);
    CHECK(r.status == 2);
    CHECK(contains(r.err, field));
  }
}

TEST_CASE("no command prints inf, nan or a JSON null, at the ends of every accepted range",
          "[e2e][hostile]") {
  // The slowest link, the longest latency and the least collective efficiency a cluster file accepts, the
  // largest host overhead per op and the longest sequence of a microbatch: every number each command prints,
  // as text and as JSON, must be finite and present.
  const auto slowest = write_temp(
      "slowest-cluster.json",
      R"({"schema": "phaze.cluster", "version": 1, "groups": [{"device": "a100-80gb", "count": 16}],
        "collective_efficiency": {"all_reduce": 0.001, "all_gather": 0.001, "reduce_scatter": 0.001,
                                  "send_recv": 0.001},
        "network": {"links": [{"from": 0, "to": 1, "gb_per_s": 1e-6, "latency_us": 1e6},
                              {"from": 1, "to": 0, "gb_per_s": 1e-6, "latency_us": 1e6}]}})");
  const std::string on = " --cluster '" + slowest.string() + "'";
  const std::vector<std::string> commands = {
      "estimate gpt2" + on + " --tp 1 --pp 2 --global-batch 16 --microbatch 1",
      "estimate gpt2" + on + " --tp 2 --pp 1 --global-batch 16 --microbatch 1",
      "plan gpt2" + on + " --global-batch 16",
      "cluster '" + slowest.string() + "'",
      "estimate gpt2 --device h100-sxm --devices 8 --tp 1 --pp 1 --global-batch 8 --microbatch 1 "
      "--host-overhead 1000",
      "estimate llama2-7b --device h100-sxm --devices 8 --tp 8 --pp 1 --cp 1 --global-batch 1 --microbatch 1 "
      "--seq 262144 --recompute full",
      "plan gpt2 --device t4 --devices 4 --global-batch 4 --host-overhead 1000",
      "schedule gpt2 --device h100-sxm",
      "devices",
      "models",
  };
  const std::regex undefined{R"((^|[^A-Za-z_])(inf|nan|null|infinity)([^A-Za-z_]|$))", std::regex::icase};
  // In JSON a field may be null only where it does not apply, as the docs say: a datasheet device's
  // `systolic`, a systolic design's `datasheet` (docs/cli.md), the diagonal of a cluster's link matrices
  // (docs/clusters.md). Any other null is a number that could not be printed.
  std::vector<std::string> stray_nulls;
  const auto walk = [&](const auto& self, const nlohmann::json& j, const std::string& key) -> void {
    const bool may_be_null = key == "systolic" || key == "datasheet" || key.starts_with("matrix_gb_per_s[") ||
                             key.starts_with("latency_us[");
    if (j.is_null() && !may_be_null) stray_nulls.push_back(key);
    if (j.is_object())
      for (auto it = j.begin(); it != j.end(); ++it) self(self, it.value(), it.key());
    if (j.is_array())
      for (const auto& e : j) self(self, e, key + "[]");
  };
  for (const std::string& command : commands) {
    for (const bool json : {false, true}) {
      const auto r = run_phaze(command + (json ? " --format json" : ""));
      INFO("phaze " << command << (json ? " --format json" : "") << "\nstdout: " << r.out.substr(0, 2000)
                    << "\nstderr: " << r.err);
      CHECK((r.status == 0 || r.status == 3));
      std::smatch found;
      CHECK_FALSE(std::regex_search(r.err, found, undefined));
      if (!json || r.status != 0) {
        CHECK_FALSE(std::regex_search(r.out, found, undefined));
        continue;
      }
      stray_nulls.clear();
      walk(walk, nlohmann::json::parse(r.out), "");  // inf and nan are no JSON: parse refuses them
      CHECK(stray_nulls.empty());
    }
  }
}
