// The include graph of include/phaze: dependency arrows between folders point one way (the layer order of
// docs/architecture.md), and only the ILP scheduler's header reaches Lemon and GLPK, so a translation unit
// pays for the solver only when it asks for the ILP.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;

const fs::path include_root = fs::path{PHAZE_SOURCE_DIR} / "include";

/// The layer of each folder: a header may include headers of its own folder and of lower layers only.
/// Folders of the same layer (model and hw) do not include each other. detail/ holds the doors to
/// third-party libraries (detail/hana.hpp), below everything.
const std::map<std::string, int> layer_of{
    {"detail", -1}, {"core", 0},  {"model", 1}, {"hw", 1},     {"cluster", 2}, {"cost", 3},
    {"sched", 4},   {"train", 5}, {"place", 6}, {"search", 7}, {"io", 8},
};

struct header {
  std::vector<std::string> phaze;     ///< included phaze headers, as "folder/name.hpp"
  std::vector<std::string> external;  ///< included <...> headers
};

/// Every header under include/phaze, by its path relative to include/phaze ("place/chain_dp.hpp").
std::map<std::string, header> read_headers() {
  std::map<std::string, header> out;
  const std::regex quoted(R"(^\s*#\s*include\s*"phaze/([^"]+)\")");
  const std::regex angled(R"(^\s*#\s*include\s*<([^>]+)>)");
  for (const auto& entry : fs::recursive_directory_iterator(include_root / "phaze")) {
    if (entry.path().extension() != ".hpp") continue;
    header h;
    std::ifstream in(entry.path());
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
      if (std::regex_search(line, m, quoted)) h.phaze.push_back(m[1]);
      if (std::regex_search(line, m, angled)) h.external.push_back(m[1]);
    }
    out[fs::relative(entry.path(), include_root / "phaze").generic_string()] = h;
  }
  return out;
}

std::string folder_of(const std::string& path) {
  const auto slash = path.find('/');
  return slash == std::string::npos ? std::string{} : path.substr(0, slash);
}

/// The headers `start` reaches through phaze includes, itself included.
std::set<std::string> reach(const std::map<std::string, header>& all, const std::string& start) {
  std::set<std::string> seen{start};
  std::vector<std::string> todo{start};
  while (!todo.empty()) {
    const std::string h = todo.back();
    todo.pop_back();
    const auto it = all.find(h);
    if (it == all.end()) continue;
    for (const auto& next : it->second.phaze)
      if (seen.insert(next).second) todo.push_back(next);
  }
  return seen;
}

bool includes_solver(const header& h) {
  return std::any_of(h.external.begin(), h.external.end(),
                     [](const std::string& e) { return e.rfind("lemon/", 0) == 0 || e == "glpk.h"; });
}
}  // namespace

TEST_CASE("Every phaze header lives in a folder of the layer order", "[architecture]") {
  const auto all = read_headers();
  REQUIRE(all.size() > 50);
  for (const auto& [path, h] : all) {
    const std::string folder = folder_of(path);
    INFO(path);
    CHECK((folder.empty() || layer_of.count(folder) == 1));
  }
}

TEST_CASE("Dependency arrows between folders point one way, down the layer order", "[architecture]") {
  const auto all = read_headers();
  int arrows = 0;
  for (const auto& [path, h] : all) {
    const std::string from = folder_of(path);
    if (from.empty()) continue;  // the umbrella headers may include any layer
    for (const auto& target : h.phaze) {
      const std::string to = folder_of(target);
      INFO(path << " includes phaze/" << target);
      REQUIRE(all.count(target) == 1);
      if (to == from) continue;
      ++arrows;
      CHECK(layer_of.at(to) < layer_of.at(from));
    }
  }
  CHECK(arrows > 50);  // the check saw the real graph
}

TEST_CASE("Only the ILP scheduler reaches Lemon and GLPK", "[architecture]") {
  const auto all = read_headers();
  std::vector<std::string> direct;
  for (const auto& [path, h] : all)
    if (includes_solver(h)) direct.push_back(path);
  CHECK(direct == std::vector<std::string>{"sched/ilp.hpp"});
  std::vector<std::string> reaching;
  for (const auto& [path, h] : all)
    if (reach(all, path).count("sched/ilp.hpp") == 1) reaching.push_back(path);
  // The umbrella for the DSL and the pure model, every record and every report reach no solver.
  CHECK(reaching == std::vector<std::string>{"sched/ilp.hpp"});
}

TEST_CASE("Boost.Hana is reached through phaze/detail/hana.hpp only", "[architecture]") {
  const auto all = read_headers();
  std::vector<std::string> direct;
  for (const auto& [path, h] : all) {
    const bool hana = std::any_of(h.external.begin(), h.external.end(),
                                  [](const std::string& e) { return e.rfind("boost/hana", 0) == 0; });
    if (hana) direct.push_back(path);
  }
  CHECK(direct == std::vector<std::string>{"detail/hana.hpp"});
  // It includes Hana's parts one by one: <boost/hana.hpp> would cost every DSL user all of Hana.
  const auto& parts = all.at("detail/hana.hpp").external;
  CHECK(std::find(parts.begin(), parts.end(), "boost/hana.hpp") == parts.end());
}
