// Tests of phaze/io/cluster_json.hpp: cluster files read into the cluster they describe (groups from presets,
// device files and inline objects, per-group node overrides, measured links sparse and whole), written and
// read back to the same cluster, and every malformed file an input_error naming the file and the field.
#include "phaze/io/cluster_json.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "../support/input_error_of.hpp"
#include "phaze/cluster/presets.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/io/nccl_tests.hpp"

using namespace phaze;

namespace {
const std::filesystem::path data = std::filesystem::path{PHAZE_TEST_DATA_DIR} / "clusters";

std::string error_of(const std::filesystem::path& p) {
  try {
    (void)io::read_cluster_file(p);
  } catch (const input_error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("a cluster file with two device types and a measured link", "[cluster_json]") {
  const auto d = io::read_cluster_file(data / "a100-v100-measured.json");
  const cluster::cluster& c = d.value;
  REQUIRE(c.groups().size() == 2);
  CHECK(c.devices() == 24);
  CHECK(c.nodes() == 4);
  CHECK(c.groups()[0].device == *hw::find_preset("a100-80gb"));
  CHECK(c.groups()[0].node == cluster::node_of("a100-80gb"));
  // The group's override replaces the preset node's interface bandwidth and nothing else.
  cluster::node_spec v100 = cluster::node_of("v100-16gb");
  v100.nic.bandwidth = bytes_per_second{25e9 / 8.0};
  CHECK(c.groups()[1].node == v100);
  REQUIRE(c.measured().has_value());
  const cluster::link_matrix& m = *c.measured();
  CHECK(m.endpoints == cluster::link_matrix::between::nodes);
  CHECK(m.size == 4);
  // The given link, both ways, as the file gives it: the whole node's bandwidth (one convention in C++ and
  // in files); node 1 holds 8 devices and node 2 four, each device's share is the entry over them.
  CHECK(m.at(1, 2).bandwidth.value() == Approx(2.5e9));
  CHECK(m.at(2, 1).bandwidth.value() == Approx(2.5e9));
  CHECK(d.value.devices_in_node(1) == 8);
  CHECK(d.value.devices_in_node(2) == 4);
  CHECK(m.at(1, 2).latency.value() == Approx(30e-6));
  CHECK(d.measured_links == 2);
  // Entries not given come from the fabric: what both nodes' interfaces allow.
  CHECK(m.at(0, 1).bandwidth.value() == Approx(200e9));
  CHECK(m.at(0, 2).bandwidth.value() == Approx(25e9 / 8.0));
  CHECK(m.at(3, 0).bandwidth.value() == Approx(25e9 / 8.0));
}

TEST_CASE("a cluster without measurements routes rings as the same groups built in code", "[cluster_json]") {
  const auto d = io::read_cluster_file(data / "amp-t4.json");
  CHECK(d.name == "amp-t4");
  CHECK(d.value == cluster::preset_cluster("t4", 16));
}

TEST_CASE("groups of a device file and of an inline device with a node override", "[cluster_json]") {
  const auto d = io::read_cluster_file(data / "file-device.json");
  const cluster::cluster& c = d.value;
  REQUIRE(c.groups().size() == 2);
  CHECK(c.groups()[0].device.name.view() == "l4");
  CHECK(c.groups()[1].device.name.view() == "t4-fast-net");
  CHECK(c.groups()[1].node.nic.bandwidth.value() == Approx(12.5e9));
  CHECK(c.efficiency().all_reduce == Approx(0.8));
  CHECK(c.efficiency().all_gather == 1.0);
  CHECK_FALSE(c.measured().has_value());
}

TEST_CASE("a cluster written and read back is the same cluster", "[cluster_json]") {
  for (const char* name : {"a100-v100-measured.json", "file-device.json", "amp-t4.json"}) {
    const auto d = io::read_cluster_file(data / name);
    const auto back =
        io::cluster_from_json(nlohmann::json::parse(io::cluster_to_json(d.value, d.name).dump()));
    INFO(name);
    CHECK(back.value.groups() == d.value.groups());
    CHECK(back.value.efficiency() == d.value.efficiency());
    REQUIRE(back.value.measured().has_value() == d.value.measured().has_value());
    if (d.value.measured()) {
      const auto& a = *d.value.measured();
      const auto& b = *back.value.measured();
      REQUIRE(a.size == b.size);
      for (int i = 0; i < a.size; ++i)
        for (int j = 0; j < a.size; ++j)
          if (i != j) {
            CHECK(b.at(i, j).bandwidth.value() == Approx(a.at(i, j).bandwidth.value()).epsilon(1e-12));
            CHECK(b.at(i, j).latency.value() == Approx(a.at(i, j).latency.value()).epsilon(1e-12));
          }
    }
  }
}

TEST_CASE("a whole matrix between devices", "[cluster_json]") {
  const auto j = nlohmann::json::parse(R"({
    "groups": [{"device": "t4", "count": 2}, {"device": "v100-16gb", "count": 1}],
    "network": {"between": "devices", "matrix_gb_per_s": [[null, 6, 1], [6, null, 2], [0.5, 2, null]],
                "latency_us": 20}})");
  const auto d = io::cluster_from_json(j);
  const auto& m = *d.value.measured();
  CHECK(m.endpoints == cluster::link_matrix::between::devices);
  CHECK(m.at(0, 2).bandwidth.value() == Approx(1e9));
  CHECK(m.at(2, 0).bandwidth.value() == Approx(0.5e9));
  CHECK(m.at(1, 2).latency.value() == Approx(20e-6));
  CHECK(d.measured_links == 6);
  // The ring over all three devices is as slow as its slowest hop: 0 -> 1 -> 2 -> 0.
  CHECK(d.value.ring({3, 1}, 3).hop.bandwidth.value() == Approx(0.5e9));
}

TEST_CASE("malformed cluster files are input errors naming the file and the field", "[cluster_json]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of(data / "bad-matrix-rows.json"),
             Contains("network.matrix_gb_per_s") && Contains("2 rows"));
  CHECK_THAT(error_of(data / "bad-node-out-of-range.json"),
             Contains("network.links[0].to") && Contains("[0, 1]"));
  CHECK_THAT(error_of(data / "bad-count.json"), Contains("groups[0].count") && Contains("whole number"));
  CHECK_THAT(error_of(data / "bad-unknown-device.json"),
             Contains("groups[0].device") && Contains("a100-80gb"));
  CHECK_THAT(error_of(data / "bad-misspelled.json"), Contains("'netwrok'") && Contains("network"));
  CHECK_THAT(error_of(data / "bad-deep.json"), Contains("bad-deep.json") && Contains("32 deep"));
  CHECK_THAT(error_of(data / "no-such-file.json"), Contains("cannot open"));
  CHECK_THAT(error_of(data), Contains("is a directory"));
  for (
      const char* text :
      {"[]", "null", "1e99999", R"({"groups": []})", R"({"groups": [{"count": 1}]})",
       R"({"groups": [{"device": "t4", "count": 0}]})",
       R"({"groups": [{"device": "t4", "count": 4294967312}]})",
       R"({"groups": [{"device": "t4", "count": 4}], "network": {}})",
       R"({"groups": [{"device": "t4", "count": 8}], "network": {"links": [{"from": 0, "to": 0, "gb_per_s": 1}]}})",
       R"({"groups": [{"device": "t4", "count": 8}], "network": {"links": [{"from": 0, "to": 1, "gb_per_s": -1}]}})",
       R"({"groups": [{"device": "t4", "count": 8}], "network": {"links": [{"from": 0, "to": 1}]}})",
       R"({"groups": [{"device": "t4", "count": 8}], "schema": "phaze.device"})"}) {
    INFO(text);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
      continue;  // not JSON at all: read_cluster_file's message (tested above with a file)
    }
    CHECK_THROWS_AS(io::cluster_from_json(j), input_error);
  }
}

TEST_CASE("nccl-tests outputs set a group's node link and the links between nodes", "[cluster_json][nccl]") {
  const auto d = io::read_cluster_file(data / "h100-nccl-measured.json");
  auto fitted = [](const char* name) {
    const auto path = std::filesystem::path{PHAZE_TEST_DATA_DIR} / "nccl_tests" / name;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return io::nccl::fit_link(io::nccl::parse(text.str(), path.string(), io::nccl::collective::all_reduce));
  };
  const cluster::link inside = fitted("all_reduce_1node_8gpu_v2.19.txt");
  const cluster::link across = fitted("all_reduce_2node_16gpu_v2.11.txt");
  const cluster::cluster& c = d.value;
  CHECK(c.groups()[0].node.intra == inside);
  REQUIRE(c.measured().has_value());
  // 16 ranks over 2 nodes: each ring had 8 members in each node, so each device's share is busbw / 8, the
  // whole node's entry busbw / 8 x 8, and a data-parallel ring over both whole nodes runs at the measured
  // bus bandwidth again.
  CHECK(c.measured()->at(0, 1).bandwidth.value() == Approx(across.bandwidth.value()));
  CHECK(c.measured()->at(1, 0).latency == across.latency);
  CHECK(c.ring({16, 1}, 16).hop.bandwidth.value() ==
        Approx(std::min(across.bandwidth.value(), inside.bandwidth.value())));
  CHECK(d.measurements.size() == 2);
}

TEST_CASE("measurements that do not match the cluster are input errors", "[cluster_json][nccl]") {
  using Catch::Matchers::Contains;
  const std::string dir = std::string{PHAZE_TEST_DATA_DIR} + "/nccl_tests/";
  auto error_of_json = [&](const std::string& text) -> std::string {
    try {
      (void)io::cluster_from_json(nlohmann::json::parse(text), std::filesystem::path{dir});
    } catch (const input_error& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string groups = R"("groups": [{"device": "h100-sxm", "count": 16}])";
  CHECK_THAT(
      error_of_json("{" + groups +
                    R"(, "measurements": [{"nccl_tests": "all_reduce_2node_16gpu_v2.11.txt", "group": 0}]})"),
      Contains("measurements[0].nccl_tests") && Contains("2 hosts"));
  CHECK_THAT(
      error_of_json(
          "{" + groups +
          R"(, "measurements": [{"nccl_tests": "all_reduce_2node_16gpu_v2.11.txt", "nodes": [0, 1, 1]}]})"),
      Contains("twice"));
  CHECK_THAT(
      error_of_json("{" + groups + R"(, "measurements": [{"nccl_tests": "missing.txt", "nodes": [0, 1]}]})"),
      Contains("cannot be opened"));
  CHECK_THAT(
      error_of_json("{" + groups + R"(, "measurements": [{"nccl_tests": "sendrecv_2node_v2.19.txt"}]})"),
      Contains("either \"group\""));
  CHECK_THAT(
      error_of_json("{" + groups +
                    R"(, "measurements": [{"nccl_tests": "sendrecv_2node_v2.19.txt", "nodes": [0, 5]}]})"),
      Contains("node 5"));
}

TEST_CASE("the nccl-tests outputs of one file are bounded in number and in bytes together",
          "[cluster_json][nccl]") {
  using Catch::Matchers::Contains;
  const std::filesystem::path dir = std::filesystem::path{PHAZE_TEST_DATA_DIR} / "nccl_tests";
  auto with_runs = [](const std::string& file, std::size_t runs) {
    nlohmann::json j = nlohmann::json::parse(R"({"groups": [{"device": "h100-sxm", "count": 16}]})");
    for (std::size_t i = 0; i < runs; ++i)
      j["measurements"].push_back({{"nccl_tests", file}, {"nodes", {0, 1}}});
    return j;
  };
  // The most runs a file may name (1024), each a real output: read, one link laid per run.
  const auto most = io::cluster_from_json(with_runs("all_reduce_2node_16gpu_v2.11.txt", 1024), dir);
  CHECK(most.measurements.size() == 1024);
  CHECK_THAT(testing::input_error_of([&] {
               (void)io::cluster_from_json(with_runs("all_reduce_2node_16gpu_v2.11.txt", 1025), dir);
             }),
             Contains("at most 1024"));
  // Outputs at the largest size one may have (16 MiB: a real run padded with comment lines): sixteen are
  // read, the seventeenth brings them past 256 MiB in all and is refused by name before it is parsed.
  const auto scratch = std::filesystem::temp_directory_path() / "phaze-nccl-bytes-test";
  std::filesystem::create_directories(scratch);
  const auto padded = scratch / "all_reduce_padded.txt";
  {
    std::ifstream in{dir / "all_reduce_2node_16gpu_v2.11.txt"};
    std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
    const std::string pad = "# padding\n";
    while (text.size() + pad.size() <= std::size_t{16} << 20U) text += pad;
    std::ofstream{padded} << text;
  }
  const auto sixteen = io::cluster_from_json(with_runs(padded.string(), 16), dir);
  CHECK(sixteen.measurements.size() == 16);
  CHECK_THAT(
      testing::input_error_of([&] { (void)io::cluster_from_json(with_runs(padded.string(), 17), dir); }),
      Contains("measurements[16].nccl_tests") && Contains("256 MiB"));
  std::filesystem::remove_all(scratch);
}

TEST_CASE("a node entry above what the nodes' interfaces carry is read, with a warning naming it",
          "[cluster_json]") {
  // Two DGX A100 nodes: 8 interfaces of 200 Gb/s each, 200 GB/s a node. 500 GB/s between them cannot be one
  // node's whole bandwidth (perhaps a per-device figure multiplied twice, or a bus bandwidth summed).
  const auto d = io::cluster_from_json(nlohmann::json::parse(R"({
      "groups": [{"device": "a100-80gb", "count": 16}],
      "network": {"links": [{"from": 0, "to": 1, "gb_per_s": 500}]}})"));
  REQUIRE(d.warnings.size() == 1);
  CHECK_THAT(d.warnings[0], Catch::Contains("2 node entries"));
  CHECK_THAT(d.warnings[0],
             Catch::Contains("network.links[0] gives 500 GB/s from node 0 to node 1, 2.5 times"));
  // Taken as given all the same: the node's 500 GB/s, each device's share an eighth of it.
  CHECK(d.value.measured()->at(0, 1).bandwidth.value() == Approx(500e9));
  // Within the interfaces: no warning.
  CHECK(io::read_cluster_file(data / "a100-v100-measured.json").warnings.empty());
}
