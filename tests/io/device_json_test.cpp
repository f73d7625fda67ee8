/// @file
/// Tests of phaze/io/device_json.hpp: every preset survives a trip through JSON text, the schema's
/// spellings, defaults and "base", and each kind of bad input is an input_error naming its field.
#include "phaze/io/device_json.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "phaze/cluster/presets.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"

namespace hw = phaze::hw;
namespace cluster = phaze::cluster;
using phaze::io::device_and_node_from_json;
using phaze::io::device_from_json;
using phaze::io::device_to_json;
using namespace phaze::literals;
using json = nlohmann::json;

namespace {

/// The node a device file describes.
cluster::node_spec node_from_json(const json& j) {
  return device_and_node_from_json(j).node;
}

/// The what() of the input_error reading `j` throws; fails the test when it throws anything else or nothing.
std::string read_error(const json& j) {
  try {
    (void)device_from_json(j, "fallback");
  } catch (const phaze::input_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected phaze::input_error, got another exception: " << e.what());
  }
  FAIL("expected phaze::input_error, nothing was thrown for " << j.dump());
  return {};
}

/// A complete systolic device file (the TPUv4-like numbers).
json systolic_file() {
  return json::parse(R"({
    "name": "mine", "kind": "systolic", "precision": "bf16",
    "hbm_gib": 32, "hbm_bandwidth_gb_per_s": 1200,
    "links": {"devices_per_node": 4, "intra_node_gb_per_s": 268.5546875, "inter_node_gb_per_s": 268.5546875,
              "intra_latency_us": 5, "inter_latency_us": 5},
    "systolic": {"num_tc": 8, "tc_width": 128, "tc_depth": 128, "num_vc": 2, "vc_width": 128,
                 "glb_mib": 128, "clock_ghz": 1.05}
  })");
}

/// A datasheet device file with only the required fields.
json datasheet_file() {
  return json::parse(R"({
    "name": "gpu", "kind": "datasheet", "hbm_gb": 80, "hbm_bandwidth_gb_per_s": 2039,
    "links": {"devices_per_node": 8, "intra_node_gb_per_s": 300, "inter_node_gb_per_s": 25},
    "datasheet": {"matrix_tflops": {"bf16": 312, "fp16": 312, "tf32": 156}, "vector_tflops": 19.5}
  })");
}

}  // namespace

TEST_CASE("every preset and its node survive to_json, text and from_json unchanged", "[io][device_json]") {
  for (const auto& p : hw::presets) {
    CAPTURE(p.name);
    const std::string text = device_to_json(p.spec, cluster::node_of(p.name)).dump(2);
    INFO(text);
    const auto back = device_and_node_from_json(json::parse(text));
    CHECK(back.device == p.spec);
    CHECK(back.node == cluster::node_of(p.name));
  }
}

TEST_CASE("to_json writes the readable spellings", "[io][device_json]") {
  const auto tpu = device_to_json(hw::tpuv4_like, cluster::reference_node);
  CHECK(tpu.at("kind") == "systolic");
  CHECK(tpu.at("hbm_gib") == 32);
  CHECK(tpu.at("hbm_bandwidth_gb_per_s") == 1200);
  CHECK(tpu.at("systolic").at("glb_mib") == 128);
  CHECK(tpu.at("systolic").at("clock_ghz") == 1.05);
  CHECK_FALSE(tpu.contains("datasheet"));
  const auto a100 = device_to_json(*hw::find_preset("a100-80gb"), cluster::node_of("a100-80gb"));
  CHECK(a100.at("links").at("nics_per_node") == 8);
  CHECK(a100.at("hbm_gb") == 80);
  CHECK(a100.at("datasheet").at("matrix_tflops").at("bf16") == 312);
  CHECK_FALSE(a100.at("datasheet").at("matrix_tflops").contains("fp8"));  // absent formats left out
  CHECK(a100.at("datasheet").at("vector_tflops") == 19.5);
  CHECK_FALSE(a100.contains("systolic"));
}

TEST_CASE("a value no decimal in the preferred unit holds is written in the base unit", "[io][device_json]") {
  auto d = hw::tpuv4_like;
  d.hbm_bandwidth = phaze::bytes_per_second{std::nextafter(1.2e12, 2e12)};
  auto node = cluster::reference_node;
  node.nic.latency = phaze::seconds{std::nextafter(1e-5, 1.0)};
  const auto j = device_to_json(d, node);
  CHECK(device_from_json(json::parse(j.dump())) == d);
  CHECK(node_from_json(json::parse(j.dump())) == node);
}

TEST_CASE("a systolic file reads as the device it describes", "[io][device_json]") {
  auto expected = hw::tpuv4_like;
  expected.name = "mine";
  CHECK(device_from_json(systolic_file()) == expected);
}

TEST_CASE("optional fields take their documented defaults", "[io][device_json]") {
  const auto d = device_from_json(datasheet_file());
  CHECK(d.compute == hw::precision::bf16);  // it has bf16
  const auto node = node_from_json(datasheet_file());
  CHECK(node.intra.latency == phaze::io::default_intra_latency);
  CHECK(node.nic.latency == phaze::io::default_inter_latency);
  CHECK(node.nics == node.devices);  // one network interface per device unless the file says otherwise
  CHECK(d.sheet.gemm == hw::gemm_efficiency{});  // an ideal device: peak on every shape
  CHECK(d.sheet.memory_efficiency == 1.0);
  CHECK(d.sheet.matrix_fp8.value() == 0.0);

  auto fp16_only = datasheet_file();
  fp16_only["datasheet"]["matrix_tflops"] = {{"fp16", 125}};
  CHECK(device_from_json(fp16_only).compute == hw::precision::fp16);  // like the V100 preset

  auto one_per_node = datasheet_file();
  one_per_node["links"] = {{"inter_node_gb_per_s", 25}};
  const auto single = node_from_json(one_per_node);
  CHECK(single.devices == 1);
  CHECK(single.intra.bandwidth == single.nic.bandwidth);
  auto shared_nic = datasheet_file();
  shared_nic["links"]["nics_per_node"] = 1;
  CHECK(node_from_json(shared_nic).nics == 1);

  auto unnamed = systolic_file();
  unnamed.erase("name");
  CHECK(device_from_json(unnamed, "my-file").name.view() == "my-file");
  auto systolic_default = systolic_file();
  systolic_default.erase("precision");
  CHECK(device_from_json(systolic_default).compute == hw::precision::bf16);
}

TEST_CASE("every spelling of a quantity gives the same device", "[io][device_json]") {
  const auto reference = device_from_json(systolic_file());
  auto j = systolic_file();
  j.erase("hbm_gib");
  j["hbm_bytes"] = 34359738368.0;
  j.erase("hbm_bandwidth_gb_per_s");
  j["hbm_bandwidth_tb_per_s"] = 1.2;
  j["systolic"].erase("glb_mib");
  j["systolic"]["glb_kib"] = 131072;
  j["systolic"].erase("clock_ghz");
  j["systolic"]["clock_mhz"] = 1050;
  j["links"].erase("intra_latency_us");
  j["links"]["intra_latency_s"] = 5e-6;
  auto d = device_from_json(j);
  // 1.2 * 1e12 and 5e-6 need not be the very doubles 1200 * 1e9 and 5 * 1e-6 are.
  CHECK(d.hbm_bandwidth.value() == Approx(reference.hbm_bandwidth.value()));
  CHECK(node_from_json(j).intra.latency.value() ==
        Approx(node_from_json(systolic_file()).intra.latency.value()));
  d.hbm_bandwidth = reference.hbm_bandwidth;
  CHECK(d == reference);

  auto bits = datasheet_file();
  bits["links"].erase("inter_node_gb_per_s");
  bits["links"]["inter_node_gbit_per_s"] = 200;  // HDR InfiniBand
  CHECK(node_from_json(bits).nic.bandwidth == 25_GBps);
  auto flops = datasheet_file();
  flops["datasheet"].erase("matrix_tflops");
  flops["datasheet"]["matrix_flops_per_s"] = {{"bf16", 312e12}};
  flops["datasheet"].erase("vector_tflops");
  flops["datasheet"]["vector_flops_per_s"] = 19.5e12;
  const auto rates = device_from_json(flops);
  CHECK(rates.sheet.matrix_bf16 == 312_TFLOPs);
  CHECK(rates.sheet.vector.value() == 19.5e12);
  auto gb = systolic_file();
  gb.erase("hbm_gib");
  gb["hbm_gb"] = 32.0;
  CHECK(device_from_json(gb).hbm == 32_GB);
  CHECK(device_from_json(gb).hbm.value() == 32e9);
}

TEST_CASE("\"base\" starts from a preset and overrides the fields given", "[io][device_json]") {
  const auto h100 = *hw::find_preset("h100-sxm");
  const auto faster = device_from_json(json{{"base", "h100-sxm"}, {"hbm_bandwidth_tb_per_s", 3.9}}, "fast");
  CHECK(faster.hbm_bandwidth.value() == Approx(3.9e12));
  CHECK(faster.name.view() == "fast");  // named after the file, not the base
  auto expected = h100;
  expected.hbm_bandwidth = faster.hbm_bandwidth;
  expected.name = "fast";
  CHECK(faster == expected);

  // Nested fields override one by one.
  const auto j = json::parse(R"({"base": "tpuv4-like", "name": "wide",
                                 "systolic": {"tc_width": 256}, "links": {"inter_node_gb_per_s": 50}})");
  const auto wide = device_from_json(j);
  CHECK(wide.systolic.tc_width == 256);
  CHECK(wide.systolic.tc_depth == 128);
  CHECK(node_from_json(j).nic.bandwidth == 50_GBps);
  CHECK(node_from_json(j).intra == cluster::reference_node.intra);
  CHECK(hw::peak_matrix_flops(wide).value() == Approx(2.0 * hw::peak_matrix_flops(hw::tpuv4_like).value()));

  // A base alone, with no fallback name, keeps the preset's name.
  CHECK(device_from_json(json{{"base", "t4"}}) == *hw::find_preset("t4"));
  const auto rates = device_from_json(json::parse(R"({"base": "a100-80gb",
      "datasheet": {"matrix_tflops": {"fp8": 624}, "gemm_efficiency": {"max_fraction": 0.9}}})"));
  CHECK(rates.sheet.matrix_fp8 == 624_TFLOPs);
  CHECK(rates.sheet.matrix_bf16 == 312_TFLOPs);
  CHECK(rates.sheet.gemm.max_fraction == 0.9);
  CHECK(rates.sheet.gemm.compute_units == 108);
}

TEST_CASE("bad input names its field", "[io][device_json]") {
  SECTION("not an object") {
    CHECK_THAT(read_error(json::array({1, 2})), Catch::Contains("one JSON object"));
  }
  SECTION("a zero, a negative, a fractional or a huge count") {
    for (const json& bad : {json(0), json(-8), json(8.5), json(1e12), json("8"), json(true)}) {
      auto j = systolic_file();
      j["systolic"]["num_tc"] = bad;
      CAPTURE(bad.dump());
      CHECK_THAT(read_error(j), Catch::Contains("field 'systolic.num_tc'"));
    }
    auto j = systolic_file();
    j["systolic"]["tc_width"] = 0;
    CHECK(read_error(j) == "field 'systolic.tc_width' must be a positive integer, got 0");
  }
  SECTION("an integer written as a float is accepted") {
    auto j = systolic_file();
    j["systolic"]["num_tc"] = 8.0;
    CHECK(device_from_json(j).systolic.num_tc == 8);
  }
  SECTION("a zero or negative quantity") {
    auto j = systolic_file();
    j["hbm_bandwidth_gb_per_s"] = 0;
    CHECK(read_error(j) == "field 'hbm_bandwidth_gb_per_s' must be a positive number, got 0");
    j = systolic_file();
    j["links"]["inter_node_gb_per_s"] = -25;
    CHECK_THAT(read_error(j), Catch::Contains("field 'links.inter_node_gb_per_s' must be a positive number"));
    j = systolic_file();
    j["links"]["inter_latency_us"] = -1;
    CHECK_THAT(read_error(j), Catch::Contains("field 'links.inter_latency_us' must be a number at least 0"));
    j["links"]["inter_latency_us"] = 0;  // zero latency is fine
    CHECK(node_from_json(j).nic.latency.value() == 0.0);
  }
  SECTION("a wrong type") {
    auto j = systolic_file();
    j["systolic"]["clock_ghz"] = "1.05";
    CHECK(read_error(j) == "field 'systolic.clock_ghz' must be a positive number, got \"1.05\"");
    j = systolic_file();
    j["links"] = 4;
    CHECK_THAT(read_error(j), Catch::Contains("field 'links' must be an object"));
    j = systolic_file();
    j["name"] = 7;
    CHECK_THAT(read_error(j), Catch::Contains("field 'name' must be a string"));
    j = datasheet_file();
    j["datasheet"]["matrix_tflops"]["bf16"] = nlohmann::json::array({312});
    CHECK_THAT(read_error(j), Catch::Contains("field 'datasheet.matrix_tflops.bf16'"));
  }
  SECTION("a missing required field") {
    for (const char* field : {"hbm_gib", "hbm_bandwidth_gb_per_s", "kind", "links", "systolic"}) {
      auto j = systolic_file();
      j.erase(field);
      CAPTURE(field);
      CHECK_THAT(read_error(j),
                 Catch::Contains(std::string{"field '"} + field + "'") && Catch::Contains("missing"));
    }
    for (const char* field :
         {"num_tc", "tc_width", "tc_depth", "num_vc", "vc_width", "glb_mib", "clock_ghz"}) {
      auto j = systolic_file();
      j["systolic"].erase(field);
      CAPTURE(field);
      CHECK_THAT(read_error(j), Catch::Contains(std::string{"field 'systolic."} + field + "'") &&
                                    Catch::Contains("missing"));
    }
    auto j = systolic_file();
    j["links"].erase("intra_node_gb_per_s");  // 4 devices per node need an intra-node link
    CHECK_THAT(read_error(j), Catch::Contains("field 'links.intra_node_gb_per_s' is missing"));
    j = datasheet_file();
    j["datasheet"].erase("vector_tflops");
    CHECK_THAT(read_error(j), Catch::Contains("field 'datasheet.vector_tflops' is missing"));
    j = datasheet_file();
    j["datasheet"].erase("matrix_tflops");
    CHECK_THAT(read_error(j), Catch::Contains("field 'datasheet.matrix_tflops' is missing"));
    j = systolic_file();
    j.erase("name");
    try {
      (void)device_from_json(j);
      FAIL("a device without a name and without a fallback name was accepted");
    } catch (const phaze::input_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("field 'name' is missing"));
    }
  }
  SECTION("no matrix rate for the compute precision") {
    auto j = datasheet_file();
    j["precision"] = "fp8";
    j["datasheet"]["matrix_tflops"] = {{"tf32", 156}};
    CHECK_THAT(read_error(j), Catch::Contains("field 'datasheet.matrix_tflops.fp8' is missing"));
  }
  SECTION("an unknown kind or precision") {
    auto j = systolic_file();
    j["kind"] = "gpu";
    CHECK_THAT(read_error(j), Catch::Contains("field 'kind' must be \"systolic\"") &&
                                  Catch::Contains("\"datasheet\"") && Catch::Contains("got \"gpu\""));
    j = systolic_file();
    j["precision"] = "int8";
    CHECK_THAT(read_error(j), Catch::Contains("field 'precision' must be one of") &&
                                  Catch::Contains("\"bf16\"") && Catch::Contains("got \"int8\""));
  }
  SECTION("an unknown field suggests the closest ones") {
    auto j = systolic_file();
    j["hbm_bandwith_gb_per_s"] = 1200;
    CHECK_THAT(read_error(j), Catch::Contains("field 'hbm_bandwith_gb_per_s' is not a field of a device") &&
                                  Catch::Contains("'hbm_bandwidth_gb_per_s'"));
    j = systolic_file();
    j["systolic"]["tc_widht"] = 128;
    CHECK_THAT(read_error(j), Catch::Contains("field 'systolic.tc_widht'") && Catch::Contains("'tc_width'"));
    j = datasheet_file();
    j["datasheet"]["matrix_tflops"]["int8"] = 624;
    CHECK_THAT(read_error(j), Catch::Contains("field 'datasheet.matrix_tflops.int8'"));
  }
  SECTION("the other kind's section") {
    auto j = systolic_file();
    j["datasheet"] = {{"vector_tflops", 1}};
    CHECK_THAT(read_error(j), Catch::Contains("field 'datasheet' does not apply to a systolic device"));
  }
  SECTION("two spellings of one quantity") {
    auto j = systolic_file();
    j["hbm_gb"] = 34.4;
    CHECK_THAT(read_error(j),
               Catch::Contains("'hbm_gib'") && Catch::Contains("'hbm_gb'") && Catch::Contains("keep one"));
  }
  SECTION("fractions outside (0, 1]") {
    auto j = datasheet_file();
    j["datasheet"]["gemm_efficiency"] = {{"max_fraction", 1.5}};
    CHECK_THAT(read_error(j),
               Catch::Contains("field 'datasheet.gemm_efficiency.max_fraction' must be a fraction"));
    j = datasheet_file();
    j["datasheet"]["memory_efficiency"] = 0;
    CHECK_THAT(read_error(j), Catch::Contains("field 'datasheet.memory_efficiency'"));
  }
  SECTION("an unknown base suggests presets; a kind that contradicts it") {
    CHECK_THAT(read_error(json{{"base", "h100"}}), Catch::Contains("field 'base'") &&
                                                       Catch::Contains("'h100-sxm'") &&
                                                       Catch::Contains("'h100-pcie'"));
    CHECK_THAT(read_error(json{{"base", "h100-sxm"}, {"kind", "systolic"}}),
               Catch::Contains("field 'kind'") && Catch::Contains("datasheet device"));
  }
  SECTION("a name too long to keep") {
    auto j = systolic_file();
    j["name"] = std::string(40, 'x');
    CHECK_THAT(read_error(j), Catch::Contains("field 'name' must be 1 to 31 characters"));
  }
  SECTION("a value too large for a double once scaled") {
    auto j = systolic_file();
    j["hbm_gib"] = 1e308;
    CHECK_THAT(read_error(j), Catch::Contains("field 'hbm_gib'"));
  }
}
