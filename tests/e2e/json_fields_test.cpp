// The JSON documents docs/cli.md lists (its ```json-fields blocks) are exactly what the commands write: every
// field documented is written (unless marked optional with `?`), every field written is documented, nested
// objects and arrays alike, and each document's "schema" is its block's name. Every optional field must
// appear in at least one of the runs below, so the list cannot keep a field the program no longer writes.
#include <catch2/catch.hpp>

#include "run_phaze.hpp"

#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace phaze::e2e;

namespace {

/// One documented field: a name (or `*`: any key, or `@doc`: the fields of another document), whether it
/// is optional, and what it holds.
struct field {
  enum class kind { leaf, object, object_array, scalar_array };
  std::string name;
  bool optional = false;
  kind k = kind::leaf;
  std::vector<field> children;
  std::string origin;  ///< the document it was spliced from (`@doc`), if any
};

/// A recursive-descent reader of the notation `a, b{c, d[{e}]}, f[], g?, *{...}, @doc`.
class notation_reader {
 public:
  explicit notation_reader(std::string text) : s_(std::move(text)) {}

  std::vector<field> list(char close) {
    std::vector<field> out;
    for (;;) {
      skip();
      if (i_ < s_.size() && s_[i_] == close) return out;
      out.push_back(item());
      skip();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (close == '\0' && i_ >= s_.size()) return out;
      if (i_ < s_.size() && s_[i_] == close) return out;
      FAIL("docs/cli.md: unexpected '" << (i_ < s_.size() ? s_[i_] : '$') << "' at " << i_ << " in\n" << s_);
    }
  }

 private:
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])) != 0) ++i_;
  }
  field item() {
    field f;
    skip();
    const std::size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) != 0 ||
                              std::string_view{"_-.@*"}.find(s_[i_]) != std::string_view::npos))
      ++i_;
    f.name = s_.substr(start, i_ - start);
    REQUIRE_FALSE(f.name.empty());
    if (i_ < s_.size() && s_[i_] == '?') {
      f.optional = true;
      ++i_;
    }
    if (i_ < s_.size() && s_[i_] == '{') {
      ++i_;
      f.k = field::kind::object;
      f.children = list('}');
      ++i_;
    } else if (i_ + 1 < s_.size() && s_[i_] == '[' && s_[i_ + 1] == '{') {
      i_ += 2;
      f.k = field::kind::object_array;
      f.children = list('}');
      REQUIRE(s_.substr(i_, 2) == "}]");
      i_ += 2;
    } else if (i_ + 1 < s_.size() && s_[i_] == '[' && s_[i_ + 1] == ']') {
      i_ += 2;
      f.k = field::kind::scalar_array;
    }
    return f;
  }

  std::string s_;
  std::size_t i_ = 0;
};

using documents = std::map<std::string, std::vector<field>>;

/// The ```json-fields NAME blocks of docs/cli.md.
documents read_documents() {
  std::ifstream in(std::string{PHAZE_SOURCE_DIR} + "/docs/cli.md");
  REQUIRE(in.good());
  documents out;
  std::string line, name, body;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line.rfind("```json-fields ", 0) == 0) {
      inside = true;
      name = line.substr(15);
      body.clear();
    } else if (inside && line.rfind("```", 0) == 0) {
      inside = false;
      out[name] = notation_reader(body).list('\0');
    } else if (inside) {
      body += line + '\n';
    }
  }
  return out;
}

/// The fields of `items` with every `@doc` replaced by that document's fields (its schema and version left
/// out).
std::vector<field> expanded(const std::vector<field>& items, const documents& docs) {
  std::vector<field> out;
  for (const auto& f : items) {
    if (f.name.empty() || f.name[0] != '@') {
      out.push_back(f);
      continue;
    }
    const auto it = docs.find(f.name.substr(1));
    INFO("docs/cli.md: " << f.name << " names no json-fields block");
    REQUIRE(it != docs.end());
    for (auto g : expanded(it->second, docs)) {
      if (g.name == "schema" || g.name == "version") continue;
      if (g.origin.empty()) g.origin = it->first;
      out.push_back(g);
    }
  }
  return out;
}

struct checker {
  const documents& docs;
  std::vector<std::string> errors;
  std::set<std::string> optional_seen;

  /// `path` is where the object is in the document written; `canonical` where its fields are documented
  /// (a field spliced in by `@doc` is documented in doc), which optional_seen records.
  void object(const nlohmann::json& j, const std::vector<field>& items, const std::string& path,
              const std::string& canonical) {
    if (!j.is_object()) {
      errors.push_back(path + ": documented as an object, written as " + j.dump().substr(0, 40));
      return;
    }
    const std::vector<field> fields = expanded(items, docs);
    std::set<std::string> names;
    for (const auto& f : fields) {
      const std::string documented = (f.origin.empty() ? canonical : f.origin) + "." + f.name;
      if (f.name == "*") {
        for (auto it = j.begin(); it != j.end(); ++it)
          value(it.value(), f, path + "." + it.key(), documented);
        return;
      }
      names.insert(f.name);
      const std::string where = path + "." + f.name;
      if (!j.contains(f.name)) {
        if (!f.optional) errors.push_back(where + ": documented but not written");
        continue;
      }
      if (f.optional) optional_seen.insert(documented);
      value(j.at(f.name), f, where, documented);
    }
    for (auto it = j.begin(); it != j.end(); ++it)
      if (names.count(it.key()) == 0)
        errors.push_back(path + "." + it.key() + ": written but not documented");
  }

  void value(const nlohmann::json& v, const field& f, const std::string& where,
             const std::string& documented) {
    switch (f.k) {
      case field::kind::leaf:
        return;
      case field::kind::object:
        if (!v.is_null()) object(v, f.children, where, documented);
        return;
      case field::kind::object_array:
      case field::kind::scalar_array:
        if (!v.is_array()) {
          errors.push_back(where + ": documented as an array, written as " + v.dump().substr(0, 40));
          return;
        }
        for (const auto& e : v) {
          if (f.k == field::kind::object_array) {
            object(e, f.children, where + "[]", documented + "[]");
          } else if (e.is_object()) {
            errors.push_back(where + "[]: documented as numbers or strings, written as objects");
          }
        }
        return;
    }
  }
};

/// Optional fields of a document, as the paths checker::optional_seen records.
void optional_paths(const std::vector<field>& items, const documents& docs, const std::string& path,
                    std::set<std::string>& out) {
  for (const auto& f : expanded(items, docs)) {
    if (!f.origin.empty()) continue;  // documented, and recorded, in its own document
    const std::string where = path + "." + f.name;
    if (f.optional) out.insert(where);
    const std::string inner = f.k == field::kind::object_array ? where + "[]" : where;
    if (f.name != "*") optional_paths(f.children, docs, inner, out);
  }
}

}  // namespace

TEST_CASE("the JSON fields docs/cli.md lists are exactly the ones each command writes", "[e2e][docs]") {
  const documents docs = read_documents();
  const std::string data = PHAZE_TEST_DATA_DIR;
  const std::string spec = std::string{PHAZE_SOURCE_DIR} + "/docs/examples/my-space.json";
  const fs::path out = temp_path("search");
  REQUIRE(run_phaze("search --spec '" + spec + "' --quiet --out '" + out.string() + "'").status == 0);

  // Each document, from the runs that write it.
  std::map<std::string, std::vector<nlohmann::json>> written;
  auto json_of = [&](const std::string& schema, const std::string& args) {
    written[schema].push_back(run_json(args));
  };
  json_of("phaze.models", "models");
  json_of("phaze.model-description", "describe llama2-7b");
  json_of("phaze.model-description", "describe transgan");
  json_of("phaze.model-description", "describe nemotron-3-nano-30b-a3b");  // a hybrid: hybrid_pattern
  json_of("phaze.devices", "devices");
  json_of("phaze.device-description", "devices h100-sxm");
  json_of("phaze.device-description", "devices tpuv4-like");
  json_of("phaze.device-description", "devices '" + data + "/devices/my-accelerator.json'");
  json_of("phaze.cluster-description", "cluster '" + data + "/clusters/a100-v100-measured.json'");
  json_of("phaze.schedule", "schedule gpt2 --device tpuv4-like");
  json_of("phaze.estimate",
          "estimate gpt3-175b --device a100-80gb --devices 64 --tp 8 --pp 8 --global-batch 64 --microbatch 1 "
          "--recompute selective --sequence-parallel");
  json_of("phaze.plan", "plan gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --top 3");
  json_of("phaze.plan",
          "plan gpt2 --cluster '" + data + "/clusters/a100-v100-measured.json' --global-batch 64");
  json_of("phaze.megatron-launch",
          "plan llama2-7b --device h100-sxm --devices 16 --global-batch 32 --tp 4 --emit megatron");
  json_of("phaze.table-plan", "plan --layer-table '" + data + "/layer_tables/gpt_small_chain.json'");
  json_of("phaze.search-best", "search --spec '" + spec + "' --quiet --resume --out '" + out.string() + "'");
  written["phaze.search-best"].push_back(nlohmann::json::parse(read_file(out / "best.json")));
  written["phaze.search-run"].push_back(nlohmann::json::parse(read_file(out / "spec.json")));
  // spec.json records the schedule and the placer only when they are not the defaults (1F1B, the chain DP).
  auto gpipe = nlohmann::json::parse(read_file(spec));
  gpipe["knobs"]["schedule"] = "gpipe";
  const fs::path gpipe_spec = write_temp("gpipe.json", gpipe.dump());
  const fs::path downset = temp_path("downset");
  REQUIRE(run_phaze("search --spec '" + gpipe_spec.string() +
                    "' --placer downset --solver list --no-baselines --quiet --out '" + downset.string() +
                    "'")
              .status == 0);
  fs::remove(gpipe_spec);
  written["phaze.search-run"].push_back(nlohmann::json::parse(read_file(downset / "spec.json")));
  fs::remove_all(downset);
  // phaze calibrate: its report (per_run, with the leave-one-out errors of three runs) and the file it
  // writes.
  std::string runs;
  for (
      const char* line :
      {R"({"args": ["gpt2", "--device", "a100-80gb", "--devices", "8", "--tp", "1", "--pp", "1", "--global-batch", "64", "--microbatch", "8"], "step_s": 0.9})",
       R"({"args": ["gpt2", "--device", "a100-80gb", "--devices", "8", "--tp", "2", "--pp", "1", "--global-batch", "64", "--microbatch", "4"], "step_s": 1.1})",
       R"({"args": ["gpt2", "--device", "a100-80gb", "--devices", "16", "--tp", "1", "--pp", "2", "--global-batch", "128", "--microbatch", "4"], "step_s": 1.3})"})
    runs += std::string{line} + "\n";
  const fs::path runs_file = write_temp("runs.jsonl", runs);
  const fs::path calibration = temp_path("calibration.json");
  json_of("phaze.calibration", "calibrate '" + runs_file.string() + "' --out '" + calibration.string() + "'");
  written["phaze.calibration"].push_back(nlohmann::json::parse(read_file(calibration)));
  fs::remove(runs_file);
  fs::remove(calibration);
  std::istringstream results(read_file(out / "results.jsonl"));
  for (std::string line; std::getline(results, line);)
    written["phaze.search-result"].push_back(nlohmann::json::parse(line));

  // Every documented document is checked, and every document written is documented.
  for (const auto& [name, items] : docs) {
    INFO("docs/cli.md documents " << name << "; this test runs no command that writes it");
    CHECK(written.count(name) == 1);
  }
  checker c{docs, {}, {}};
  for (const auto& [name, values] : written) {
    INFO(name << " is written but docs/cli.md has no ```json-fields " << name << " block");
    REQUIRE(docs.count(name) == 1);
    for (const auto& v : values) {
      CHECK(v.value("schema", std::string{}) == name);
      CHECK(v.value("version", 0) >= 1);
      c.object(v, docs.at(name), name, name);
    }
  }
  std::ostringstream report;
  for (const auto& e : c.errors) report << e << '\n';
  INFO(report.str());
  CHECK(c.errors.empty());

  std::set<std::string> optional;
  for (const auto& [name, items] : docs) optional_paths(items, docs, name, optional);
  std::string seen;
  for (const auto& p : c.optional_seen) seen += "  " + p + "\n";
  for (const auto& p : optional) {
    INFO("docs/cli.md marks " << p
                              << " optional, but none of the runs wrote it; the optional fields written:\n"
                              << seen);
    CHECK(c.optional_seen.count(p) == 1);
  }
  fs::remove_all(out);
}
