// Tests of phaze/io/cluster_space_json.hpp: the example cluster-space file read into the space it describes,
// every hostile or malformed input an input_error naming the field (and the file), the limits enforced, and
// the front written as JSON (schema, units in field names) and as a table.
#include "phaze/io/cluster_space_json.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "phaze/cluster/presets.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"

using namespace phaze;

namespace {
const std::filesystem::path example =
    std::filesystem::path{PHAZE_SOURCE_DIR} / "examples" / "clusters" / "space-h100-a100.json";

/// A valid space to break one field at a time.
nlohmann::json valid() {
  return nlohmann::json::parse(R"({
    "schema": "phaze.cluster-space", "version": 1, "budget_usd": 1000000, "power_cap_w": 50000, "max_types": 2,
    "devices": [
      {"device": "h100-sxm", "price_usd": 30000, "power_w": 1000, "min": 0, "max": 16, "step": 8},
      {"device": "a100-80gb", "price_usd": 15000, "power_w": 600, "max": 16}
    ]})");
}

std::string error_of(const nlohmann::json& j) {
  try {
    (void)io::cluster_space_from_json(j);
  } catch (const input_error& e) {
    return e.what();
  }
  return "no error";
}

std::filesystem::path write(const std::string& stem, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("phaze_cluster_space_" + stem);
  std::ofstream(path) << text;
  return path;
}

std::string file_error_of(const std::filesystem::path& p) {
  try {
    (void)io::read_cluster_space_file(p);
  } catch (const input_error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("the example cluster-space file", "[cluster_space][cluster_space_json]") {
  const auto d = io::read_cluster_space_file(example);
  const search::cluster_space& s = d.value;
  CHECK(d.name == "space-h100-a100");
  CHECK(d.source.find("put your own") != std::string::npos);
  REQUIRE(s.devices.size() == 2);
  CHECK(s.devices[0].label == "h100-sxm");
  CHECK(s.devices[0].device == *hw::find_preset("h100-sxm"));
  CHECK(s.devices[0].node == cluster::node_of("h100-sxm"));
  CHECK(s.devices[1].power.value() == 812.5);
  CHECK(s.max_types == 2);
  REQUIRE(s.power_cap);
  CHECK_FALSE(search::compositions_of(s).empty());
}

TEST_CASE("cluster-space fields: defaults, links overrides, inline devices, labels", "[cluster_space_json]") {
  auto j = valid();
  j["devices"][1]["links"] = {{"devices_per_node", 4}};
  j["devices"][1]["label"] = "a100-4-per-node";
  j["devices"].push_back({{"device", {{"base", "t4"}, {"name", "t4-custom"}}},
                          {"price_usd", 2000},
                          {"power_w", 70},
                          {"max", 8}});
  j.erase("max_types");
  j.erase("power_cap_w");
  const auto d = io::cluster_space_from_json(j);
  const auto& s = d.value;
  CHECK(s.max_types == 2);
  CHECK_FALSE(s.power_cap);
  CHECK(s.devices[1].node.devices == 4);
  CHECK(s.devices[1].count_step() == 4);  // the step defaults to the node's size
  CHECK(s.devices[1].label == "a100-4-per-node");
  CHECK(s.devices[2].label == "t4-custom");
  CHECK(d.device_sources[2] == "inline");
  CHECK(s.devices[0].min == 0);
}

TEST_CASE("hostile cluster-space inputs are input errors naming the field",
          "[cluster_space][cluster_space_json]") {
  using edit = std::pair<std::string, nlohmann::json (*)()>;
  const std::vector<edit> cases{
      {"a cluster space must be one JSON object", [] { return nlohmann::json::array(); }},
      {"'budget'",
       [] {
         auto j = valid();
         j["budget"] = 1;
         return j;
       }},
      {"'budget_usd' is missing",
       [] {
         auto j = valid();
         j.erase("budget_usd");
         return j;
       }},
      {"'budget_usd'",
       [] {
         auto j = valid();
         j["budget_usd"] = -5;
         return j;
       }},
      {"'budget_usd'",
       [] {
         auto j = valid();
         j["budget_usd"] = "a lot";
         return j;
       }},
      {"'budget_usd'",
       [] {
         auto j = valid();
         j["budget_usd"] = 1e300;
         return j;
       }},
      {"'power_cap_w'",
       [] {
         auto j = valid();
         j["power_cap_w"] = 0;
         return j;
       }},
      {"'max_types'",
       [] {
         auto j = valid();
         j["max_types"] = 5;
         return j;
       }},
      {"'max_types'",
       [] {
         auto j = valid();
         j["max_types"] = 1.5;
         return j;
       }},
      {"'schema'",
       [] {
         auto j = valid();
         j["schema"] = "phaze.cluster";
         return j;
       }},
      {"'version'",
       [] {
         auto j = valid();
         j["version"] = 2;
         return j;
       }},
      {"'devices'",
       [] {
         auto j = valid();
         j.erase("devices");
         return j;
       }},
      {"'devices'",
       [] {
         auto j = valid();
         j["devices"] = nlohmann::json::array();
         return j;
       }},
      {"'devices'",
       [] {
         auto j = valid();
         j["devices"] = {{"device", "h100-sxm"}};
         return j;
       }},
      {"'devices'",
       [] {
         auto j = valid();
         for (int i = 0; i < 16; ++i) j["devices"].push_back(j["devices"][0]);
         return j;
       }},
      {"'devices[1]'",
       [] {
         auto j = valid();
         j["devices"][1] = 7;
         return j;
       }},
      {"'devices[0].device'",
       [] {
         auto j = valid();
         j["devices"][0]["device"] = "h200-sxm9";
         return j;
       }},
      {"'devices[0].device'",
       [] {
         auto j = valid();
         j["devices"][0].erase("device");
         return j;
       }},
      {"'devices[0].device'",
       [] {
         auto j = valid();
         j["devices"][0]["device"] = 12;
         return j;
       }},
      {"'devices[0].price'",
       [] {
         auto j = valid();
         j["devices"][0]["price"] = 1;
         return j;
       }},
      {"'devices[0].price_usd' is missing",
       [] {
         auto j = valid();
         j["devices"][0].erase("price_usd");
         return j;
       }},
      {"'devices[1].price_usd'",
       [] {
         auto j = valid();
         j["devices"][1]["price_usd"] = 0;
         return j;
       }},
      {"'devices[1].power_w' is missing",
       [] {
         auto j = valid();
         j["devices"][1].erase("power_w");
         return j;
       }},
      {"'devices[1].power_w'",
       [] {
         auto j = valid();
         j["devices"][1]["power_w"] = -300;
         return j;
       }},
      {"'devices[1].power_w'",
       [] {
         auto j = valid();
         j["devices"][1]["power_w"] = nullptr;
         return j;
       }},
      {"'devices[0].max' is missing",
       [] {
         auto j = valid();
         j["devices"][0].erase("max");
         return j;
       }},
      {"'devices[0].max'",
       [] {
         auto j = valid();
         j["devices"][0]["max"] = 0;
         return j;
       }},
      {"'devices[0].max'",
       [] {
         auto j = valid();
         j["devices"][0]["max"] = 1e12;
         return j;
       }},
      {"'devices[0].min'",
       [] {
         auto j = valid();
         j["devices"][0]["min"] = 32;
         return j;
       }},
      {"'devices[0].min'",
       [] {
         auto j = valid();
         j["devices"][0]["min"] = -8;
         return j;
       }},
      {"'devices[0].step'",
       [] {
         auto j = valid();
         j["devices"][0]["step"] = 0;
         return j;
       }},
      {"'devices[0].step'",
       [] {
         auto j = valid();
         j["devices"][0]["step"] = 2.5;
         return j;
       }},
      {"'devices[0].links'",
       [] {
         auto j = valid();
         j["devices"][0]["links"] = "fast";
         return j;
       }},
      {"devices[0].device: ",
       [] {
         auto j = valid();
         j["devices"][0]["links"] = {{"devices_per_node", 0}};
         return j;
       }},
      {"'devices[0].label'",
       [] {
         auto j = valid();
         j["devices"][0]["label"] = "";
         return j;
       }},
      {"'devices[1].label'",
       [] {
         auto j = valid();
         j["devices"][1]["label"] = "h100-sxm";
         return j;
       }},
      {"4096",
       [] {
         auto j = valid();
         j["budget_usd"] = 1e15;
         j.erase("power_cap_w");
         j["devices"][0]["max"] = 100000;
         j["devices"][0]["step"] = 1;
         j["devices"][1]["max"] = 100000;
         j["devices"][1]["step"] = 1;
         return j;
       }},
  };
  for (const auto& [expected, make] : cases) {
    const std::string what = error_of(make());
    INFO(what);
    CHECK(what.find(expected) != std::string::npos);
  }
}

TEST_CASE("cluster-space files: the file is named, size and nesting are bounded", "[cluster_space_json]") {
  CHECK(file_error_of(std::filesystem::temp_directory_path()).find("is a directory") != std::string::npos);
  CHECK(file_error_of("/no/such/space.json").find("cannot open") != std::string::npos);
  const auto bad = write("bad.json", "{\"budget_usd\": ");
  CHECK(file_error_of(bad).find("is not valid JSON") != std::string::npos);
  const auto deep = write("deep.json", std::string(40, '[') + std::string(40, ']'));
  CHECK(file_error_of(deep).find("nests") != std::string::npos);
  const auto big = write("big.json", "{\"comment\": \"" + std::string((1U << 20U) + 10U, 'x') + "\"}");
  CHECK(file_error_of(big).find("larger than") != std::string::npos);
  auto j = valid();
  j["devices"][0]["price_usd"] = "cheap";
  const auto field = write("field.json", j.dump());
  const std::string what = file_error_of(field);
  CHECK(what.find(field.string()) != std::string::npos);
  CHECK(what.find("'devices[0].price_usd'") != std::string::npos);
  for (const auto& p : {bad, deep, big, field}) std::filesystem::remove(p);
}

TEST_CASE("the front as JSON (units in field names) and as a table", "[cluster_space][cluster_space_json]") {
  const auto d = io::cluster_space_from_json(valid());
  train::training_knobs k;
  k.global_batch = 32;
  place::plan_choices cheap;
  cheap.placement = place::stage_placement::uneven;
  cheap.microbatches = {2};
  cheap.recompute = {model::recompute::none};
  cheap.sequence_parallel = {false};
  search::cluster_space s = d.value;
  s.devices[0].max = 8;
  s.devices[1].max = 8;
  s.devices[1].step = 8;
  io::cluster_space_description small = d;
  small.value = s;
  const model::model m = zoo::get("gpt2");
  const auto r = search::cluster_search(s, m, k).choices(cheap).run();
  REQUIRE_FALSE(r.cost_front.empty());
  const auto j = io::cluster_front_json(small, r, m, k);
  CHECK(j["schema"] == "phaze.cluster-front");
  CHECK(j["version"] == 1);
  CHECK(j["model"] == "gpt2");
  CHECK(j["space"]["budget_usd"] == 1000000.0);
  CHECK(j["space"]["devices"][0]["price_usd"] == 30000.0);
  CHECK(j["search"]["compositions"] == r.compositions.size());
  REQUIRE(j["cost_front"].size() == r.cost_front.size());
  for (std::size_t i = 0; i < r.cost_front.size(); ++i) {
    const auto& p = j["cost_front"][i];
    CHECK(p["cost_usd"].get<double>() == r.cost_front[i].mix.cost_usd);
    CHECK(p["power_w"].get<double>() == r.cost_front[i].mix.power.value());
    CHECK(p["throughput_samples_per_s"].get<double>() == r.cost_front[i].samples_per_s);
    CHECK(p["upper_bound_samples_per_s"].get<double>() > p["throughput_samples_per_s"].get<double>());
    CHECK(p["plan"]["stage_blocks"].size() == static_cast<std::size_t>(p["plan"]["pp"].get<int>()));
    CHECK(p["plan"]["stage_devices"].size() == p["plan"]["stage_blocks"].size());
    int blocks = 0;
    for (const auto& b : p["plan"]["stage_blocks"]) blocks += b.get<int>();
    CHECK(blocks == 12);
  }
  const std::string table = io::cluster_front_table(s, r.cost_front);
  CHECK(table.find("samples/s") != std::string::npos);
  CHECK(table.find(io::mix_text(s, r.cost_front.front())) != std::string::npos);
}
