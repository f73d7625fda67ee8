/// @file
/// Tests of phaze/io/device_source.hpp: the DEV argument as a preset name or a path to a device JSON file,
/// with the example files of docs/devices.md (tests/data/devices).
#include "phaze/io/device_source.hpp"

#include <catch2/catch.hpp>

#include "../support/input_error_of.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"

namespace hw = phaze::hw;
using phaze::io::load_device;
using phaze::io::resolve_device;

namespace {

std::string device_path(std::string_view file) {
  return std::string{PHAZE_TEST_DATA_DIR} + "/devices/" + std::string{file};
}

using phaze::testing::input_error_of;

}  // namespace

TEST_CASE("load_device resolves preset names", "[io][device_source]") {
  for (const auto& p : hw::presets) {
    CAPTURE(p.name);
    const auto r = resolve_device(p.name);
    CHECK(r.spec == p.spec);
    CHECK(r.preset);
    CHECK(r.source == p.source);
  }
  CHECK(load_device("tpuv4-like") == hw::tpuv4_like);
}

TEST_CASE("load_device reads the example device files", "[io][device_source]") {
  SECTION("a systolic design") {
    const auto r = resolve_device(device_path("my-accelerator.json"));
    CHECK_FALSE(r.preset);
    CHECK_THAT(r.source, Catch::Contains("my-accelerator.json") && Catch::Contains("what-if"));
    const auto& d = r.spec;
    CHECK(d.name.view() == "my-accelerator");
    CHECK(d.kind == hw::device_kind::systolic);
    CHECK(d.systolic.num_tc == 16);
    CHECK(d.systolic.vc_width == 256);
    CHECK(d.hbm == phaze::bytes{64.0 * 1024 * 1024 * 1024});
    CHECK(r.node.nic.bandwidth.value() == 400e9 / 8);  // 400 Gb/s
    CHECK(phaze::in_tflop_per_s(hw::peak_matrix_flops(d)) == Approx(2.0 * 16 * 128 * 128 * 1.4e9 / 1e12));
  }
  SECTION("a datasheet GPU that is not a preset") {
    const auto d = load_device(device_path("nvidia-l4.json"));
    CHECK(d.name.view() == "l4");
    CHECK(d.kind == hw::device_kind::datasheet);
    CHECK(d.compute == hw::precision::bf16);
    CHECK(phaze::in_tflop_per_s(hw::peak_matrix_flops(d)) == Approx(121.0));
    CHECK(phaze::in_gb(d.hbm) == Approx(24.0));
    CHECK(d.sheet.gemm.compute_units == 58);
  }
  SECTION("a preset with one field changed") {
    const auto d = load_device(device_path("h100-sxm-3.9tbs.json"));
    auto expected = *hw::find_preset("h100-sxm");
    expected.name = "h100-sxm-3.9tbs";
    expected.hbm_bandwidth = phaze::bytes_per_second{3.9e12};
    CHECK(d == expected);
  }
}

TEST_CASE("an unknown device name suggests the closest presets", "[io][device_source]") {
  const auto message = input_error_of([] { (void)load_device("h100"); });
  CHECK_THAT(message, Catch::StartsWith("unknown device 'h100'; did you mean 'h100-sxm', 'h100-pcie'"));
  CHECK_THAT(message, Catch::Contains("phaze devices"));
  CHECK_THAT(input_error_of([] { (void)load_device("a100"); }),
             Catch::Contains("'a100-40gb'") && Catch::Contains("'a100-80gb'"));
  CHECK(phaze::io::closest_preset_names("tpu-v4").front() == "tpuv4");
}

TEST_CASE("bad device files name the file and the field", "[io][device_source]") {
  const std::pair<const char*, const char*> cases[] = {
      {"bad-malformed.json", "is not valid JSON"},
      {"bad-zero-tc-width.json", "field 'systolic.tc_width' must be a positive integer, got 0"},
      {"bad-missing-hbm-bandwidth.json", "field 'hbm_bandwidth_gb_per_s' is missing"},
      {"bad-wrong-type-clock.json", "field 'systolic.clock_ghz' must be a positive number, got \"1.05\""},
      {"bad-negative-inter-node.json",
       "field 'links.inter_node_gb_per_s' must be a positive number, got -25"},
      {"bad-unknown-kind.json", "field 'kind'"},
      {"bad-unknown-precision.json", "field 'precision'"},
      {"bad-misspelled-field.json", "did you mean 'hbm_bandwidth_gb_per_s'"},
      {"bad-unknown-base.json", "field 'base'"},
      {"bad-no-rate-for-precision.json", "field 'datasheet.matrix_tflops.tf32' is missing"},
      {"bad-gemm-fraction.json", "field 'datasheet.gemm_efficiency.max_fraction'"},
  };
  for (const auto& [file, expected] : cases) {
    CAPTURE(file);
    const auto path = device_path(file);
    const auto message = input_error_of([&] { (void)load_device(path); });
    CHECK_THAT(message, Catch::StartsWith("device file '" + path + "'"));
    CHECK_THAT(message, Catch::Contains(expected));
  }
}

TEST_CASE("a missing device file is an input_error naming the path", "[io][device_source]") {
  const auto path = device_path("no-such-device.json");
  CHECK_THAT(input_error_of([&] { (void)load_device(path); }),
             Catch::Contains("cannot open") && Catch::Contains(path));
}
