// End-to-end tests of `phaze devices`: the preset listing, one device in full (a preset or a file), and the
// exit status and message for bad device files and unknown names.
#include <catch2/catch.hpp>

#include "run_phaze.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

using namespace phaze::e2e;

std::string device_file(const std::string& name) {
  return std::string{PHAZE_TEST_DATA_DIR} + "/devices/" + name;
}

}  // namespace

TEST_CASE("phaze devices --format json lists every preset with numeric fields", "[e2e][devices]") {
  const auto j = run_json("devices");
  REQUIRE(j.contains("devices"));
  const auto& devices = j.at("devices");
  REQUIRE(devices.is_array());
  std::vector<std::string> names;
  for (const auto& d : devices) {
    names.push_back(d.at("name").get<std::string>());
    CAPTURE(names.back());
    for (const char* key :
         {"peak_matrix_flops_per_s", "peak_vector_flops_per_s", "hbm_bytes", "hbm_bandwidth_bytes_per_s",
          "devices_per_node", "intra_node_bytes_per_s", "inter_node_bytes_per_s", "intra_latency_s",
          "inter_latency_s", "ridge_flops_per_byte", "element_bytes"}) {
      CAPTURE(key);
      REQUIRE(d.at(key).is_number());
      CHECK(d.at(key).get<double>() > 0.0);
    }
    CHECK(d.at("source").is_string());
    CHECK_FALSE(d.at("source").get<std::string>().empty());
    CHECK(d.at("precision").is_string());
    const bool systolic = d.at("kind") == "systolic";
    CHECK(d.at("systolic").is_object() == systolic);
    CHECK(d.at("datasheet").is_object() == !systolic);
    if (systolic) {
      for (const char* key :
           {"num_tc", "tc_width", "tc_depth", "num_vc", "vc_width", "glb_bytes", "clock_hz"}) {
        CAPTURE(key);
        CHECK(d.at("systolic").at(key).is_number());
      }
    }
  }
  for (const char* name : {"tpuv4-like", "tpuv4", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200",
                           "v100-16gb", "t4"}) {
    CAPTURE(name);
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
  }
  for (const auto& d : devices) {
    if (d.at("name") == "tpuv4-like")
      CHECK(d.at("peak_matrix_flops_per_s").get<double>() == Approx(275e12).epsilon(0.01));
    if (d.at("name") == "h100-sxm") CHECK(d.at("hbm_bandwidth_bytes_per_s").get<double>() == Approx(3.35e12));
  }
}

TEST_CASE("phaze devices prints a table with every preset and its source", "[e2e][devices]") {
  const auto r = run_phaze("devices");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  for (const char* part : {"tpuv4-like", "h100-sxm", "t4", "275.3", "989", "8x128x128", "1.05 GHz", "source",
                           "NVIDIA H100 datasheet"}) {
    CAPTURE(part);
    CHECK(contains(r.out, part));
  }
}

TEST_CASE("phaze devices tpuv4-like shows 8 tensor cores of 128x128", "[e2e][devices]") {
  const auto table = run_phaze("devices tpuv4-like");
  REQUIRE(table.status == 0);
  CHECK(contains(table.out, "8 of 128x128"));
  CHECK(contains(table.out, "275.3 TFLOP/s"));
  CHECK(contains(table.out, "128 MiB"));
  const auto j = run_json("devices tpuv4-like");
  CHECK(j.at("name") == "tpuv4-like");
  CHECK(j.at("systolic").at("num_tc") == 8);
  CHECK(j.at("systolic").at("tc_width") == 128);
  CHECK(j.at("systolic").at("tc_depth") == 128);
  CHECK(j.at("peak_matrix_flops_per_s").get<double>() == Approx(275e12).epsilon(0.01));
  // The definition is a device file that loads as the same device.
  CHECK(j.at("definition").at("systolic").at("num_tc") == 8);
  CHECK(j.at("definition").at("hbm_gib") == 32);
}

TEST_CASE("phaze devices FILE describes what a device file loads as", "[e2e][devices]") {
  const auto mine = run_json("devices '" + device_file("my-accelerator.json") + "'");
  CHECK(mine.at("name") == "my-accelerator");
  CHECK(mine.at("systolic").at("num_tc") == 16);
  CHECK(contains(mine.at("source").get<std::string>(), "my-accelerator.json"));

  const auto faster = run_json("devices '" + device_file("h100-sxm-3.9tbs.json") + "'");
  const auto h100 = run_json("devices h100-sxm");
  CHECK(faster.at("hbm_bandwidth_bytes_per_s").get<double>() == Approx(3.9e12));
  CHECK(faster.at("peak_matrix_flops_per_s") == h100.at("peak_matrix_flops_per_s"));

  const auto l4 = run_phaze("devices '" + device_file("nvidia-l4.json") + "'");
  REQUIRE(l4.status == 0);
  CHECK(contains(l4.out, "121 TFLOP/s"));
  CHECK(contains(l4.out, "24 GB"));

  // A definition saved to a file loads back as the same device.
  const fs::path saved = temp_path("saved.json");
  std::ofstream(saved) << h100.at("definition").dump();
  auto again = run_json("devices '" + saved.string() + "'");
  fs::remove(saved);
  auto original = h100;
  for (auto* j : {&again, &original}) {
    j->erase("source");
    j->erase("name");
    (*j)["definition"].erase("name");
  }
  CHECK(again == original);
}

TEST_CASE("phaze devices exits 2 for bad device files, naming the field", "[e2e][devices]") {
  const std::pair<const char*, const char*> cases[] = {
      {"bad-malformed.json", "not valid JSON"},
      {"bad-zero-tc-width.json", "'systolic.tc_width'"},
      {"bad-missing-hbm-bandwidth.json", "'hbm_bandwidth_gb_per_s'"},
      {"bad-wrong-type-clock.json", "'systolic.clock_ghz'"},
      {"bad-negative-inter-node.json", "'links.inter_node_gb_per_s'"},
      {"bad-unknown-kind.json", "'kind'"},
      {"bad-unknown-precision.json", "'precision'"},
      {"bad-misspelled-field.json", "'hbm_bandwith_gb_per_s'"},
      {"bad-unknown-base.json", "'base'"},
      {"bad-no-rate-for-precision.json", "'datasheet.matrix_tflops.tf32'"},
      {"bad-gemm-fraction.json", "'datasheet.gemm_efficiency.max_fraction'"},
  };
  std::size_t bad_files = 0;
  for (const auto& entry : fs::directory_iterator(device_file(""))) {
    if (entry.path().filename().string().starts_with("bad-")) ++bad_files;
  }
  CHECK(bad_files == std::size(cases));  // every bad file in tests/data/devices is checked here
  for (const auto& [file, field] : cases) {
    CAPTURE(file);
    const auto r = run_phaze("devices '" + device_file(file) + "' --format json");
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "phaze: error: device file '"));
    CHECK(contains(r.err, file));
    CHECK(contains(r.err, field));
  }
}

TEST_CASE("phaze devices h100 suggests the H100 presets", "[e2e][devices]") {
  const auto r = run_phaze("devices h100");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(contains(r.err, "unknown device 'h100'"));
  CHECK(contains(r.err, "'h100-sxm'"));
  CHECK(contains(r.err, "'h100-pcie'"));
  const auto missing = run_phaze("devices /nonexistent/phaze/device.json");
  CHECK(missing.status == 2);
  CHECK(contains(missing.err, "/nonexistent/phaze/device.json"));
  const auto format = run_phaze("devices --format xml");
  CHECK(format.status == 2);
  CHECK(contains(format.err, "--format"));
}
