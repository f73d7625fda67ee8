/// @file
/// A device's summary as a value (peak rates in its compute format, memory, links, cores) and the preset
/// listing, with their JSON (nlohmann) and text-table (fmt) forms: what `phaze devices` prints.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "phaze/cluster/links.hpp"
#include "phaze/cluster/presets.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/io/device_json.hpp"
#include "phaze/io/table.hpp"

namespace phaze::io {

/// What `phaze devices` reports about one device: the device itself, where it comes from, and the rates
/// derived from it.
struct device_summary {
  hw::device spec;
  cluster::node_spec node;  ///< the node the device comes in
  std::string source;
  flops_per_second peak_matrix{0.0};  ///< dense peak in the compute format (hw::peak_matrix_flops)
  flops_per_second peak_vector{0.0};
  /// Arithmetic intensity at which the matrix peak and HBM bandwidth balance (the roofline's ridge point).
  flops_per_byte ridge{0.0};
};

/// The summary of a device in its node; `source` says where their numbers come from.
inline constexpr auto describe_device = [](const hw::device& d, const cluster::node_spec& node,
                                           std::string_view source = {}) {
  device_summary s;
  s.spec = d;
  s.node = node;
  s.source = std::string{source};
  s.peak_matrix = hw::peak_matrix_flops(d);
  s.peak_vector = hw::peak_vector_flops(d);
  s.ridge = s.peak_matrix / d.hbm_bandwidth;
  return s;
};

/// Every preset, in preset order.
inline constexpr auto describe_presets = []() -> std::vector<device_summary> {
  std::vector<device_summary> out;
  for (const auto& p : hw::presets)
    out.push_back(describe_device(p.spec, cluster::node_of(p.name), p.source));
  return out;
};

// ---------------------------------------------------------------------------------------------------------
// JSON: base units throughout (bytes, seconds, FLOP/s, bytes/s), as the other commands print.

template <class Json>
void to_json(Json& j, const device_summary& s) {
  const auto& d = s.spec;
  j = Json::object();
  j["name"] = d.name.str();
  j["kind"] = std::string{hw::to_string(d.kind)};
  j["source"] = s.source;
  j["precision"] = std::string{hw::to_string(d.compute)};
  j["element_bytes"] = hw::element_bytes(d.compute);
  j["peak_matrix_flops_per_s"] = s.peak_matrix.value();
  j["peak_vector_flops_per_s"] = s.peak_vector.value();
  j["hbm_bytes"] = std::llround(d.hbm.value());
  j["hbm_bandwidth_bytes_per_s"] = d.hbm_bandwidth.value();
  j["ridge_flops_per_byte"] = s.ridge.value();
  j["devices_per_node"] = s.node.devices;
  j["nics_per_node"] = s.node.nics;
  j["intra_node_bytes_per_s"] = s.node.intra.bandwidth.value();
  j["inter_node_bytes_per_s"] = s.node.nic.bandwidth.value();
  j["intra_latency_s"] = s.node.intra.latency.value();
  j["inter_latency_s"] = s.node.nic.latency.value();
  if (d.kind == hw::device_kind::systolic) {
    const auto& a = d.systolic;
    Json sys = Json::object();
    sys["num_tc"] = a.num_tc;
    sys["tc_width"] = a.tc_width;
    sys["tc_depth"] = a.tc_depth;
    sys["num_vc"] = a.num_vc;
    sys["vc_width"] = a.vc_width;
    sys["glb_bytes"] = std::llround(a.glb.value());
    sys["clock_hz"] = a.clock.value();
    j["systolic"] = sys;
    j["datasheet"] = nullptr;
  } else {
    const auto& sheet = d.sheet;
    Json ds = Json::object();
    Json rates = Json::object();
    for (std::size_t i = 0; i < detail::device_file::precisions.size(); ++i) {
      const auto p = detail::device_file::precisions[i];
      rates[std::string{hw::to_string(p)}] = hw::matrix_peak(sheet, p).value();
    }
    ds["matrix_flops_per_s"] = rates;  // with the fallbacks applied (bf16 -> fp16 on V100, ...)
    ds["vector_flops_per_s"] = sheet.vector.value();
    Json gemm = Json::object();
    gemm["max_fraction"] = sheet.gemm.max_fraction;
    gemm["tile_m"] = sheet.gemm.tile_m;
    gemm["tile_n"] = sheet.gemm.tile_n;
    gemm["compute_units"] = sheet.gemm.compute_units;
    gemm["k_half"] = sheet.gemm.k_half;
    if (sheet.gemm.fp8_max_fraction > 0) gemm["fp8_max_fraction"] = sheet.gemm.fp8_max_fraction;
    if (sheet.gemm.fp8_quantize_fraction > 0)
      gemm["fp8_quantize_fraction"] = sheet.gemm.fp8_quantize_fraction;
    ds["gemm_efficiency"] = gemm;
    ds["memory_efficiency"] = sheet.memory_efficiency;
    j["systolic"] = nullptr;
    j["datasheet"] = ds;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Text.

namespace detail {
/// A plain number with up to four significant digits and no exponent: 275.25 -> "275.3", 1200 -> "1200",
/// 0.26880 -> "0.2688".
inline std::string format_plain(double x) {
  if (x == 0.0 || !std::isfinite(x)) return fmt::format("{}", x);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(x))));
  const int decimals = magnitude >= 3 ? 0 : 3 - magnitude;
  std::string s = fmt::format("{:.{}f}", x, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

inline std::string format_tflops(flops_per_second f) {
  return format_plain(in_tflop_per_s(f)) + " TFLOP/s";
}

inline std::string format_gbps(bytes_per_second b) {
  return format_plain(in_gb_per_s(b)) + " GB/s";
}

/// Memory capacity as its maker quotes it: whole GiB as GiB (TPU HBM), else decimal GB (GPU datasheets).
inline std::string format_capacity(bytes b) {
  const double gib = in_gib(b);
  if (gib >= 1.0 && std::floor(gib) == gib) return format_plain(gib) + " GiB";
  if (b.value() >= 1e9) return format_plain(in_gb(b)) + " GB";
  return format_bytes(b);
}

inline std::string format_latency(seconds s) {
  return format_plain(in_us(s)) + " us";
}
}  // namespace detail

/// `phaze devices DEV` as text: everything the device file says, and the peak rates derived from it.
inline std::string to_table(const device_summary& s) {
  const auto& d = s.spec;
  const bool systolic = d.kind == hw::device_kind::systolic;
  std::string out = s.source.empty() ? fmt::format("{}\n\n", d.name.view())
                                     : fmt::format("{}  ({})\n\n", d.name.view(), s.source);

  text_table t;
  t.add_section("Device");
  t.add_row({"  kind", systolic ? "systolic (PHAZE tensor-core/vector-core template)"
                                : "datasheet (peak rates and an efficiency model)"});
  t.add_row({"  compute precision",
             fmt::format("{} ({}-byte elements)", hw::to_string(d.compute), hw::element_bytes(d.compute))});
  t.add_row({"  peak matrix", detail::format_tflops(s.peak_matrix)});
  t.add_row({"  peak vector", detail::format_tflops(s.peak_vector)});
  t.add_row({"  HBM capacity", detail::format_capacity(d.hbm)});
  t.add_row({"  HBM bandwidth", detail::format_gbps(d.hbm_bandwidth)});
  t.add_row({"  ridge point", detail::format_plain(s.ridge.value()) + " FLOP/byte"});

  if (systolic) {
    const auto& a = d.systolic;
    t.add_section("Cores");
    t.add_row(
        {"  tensor cores", fmt::format("{} of {}x{} (systolic arrays, {} MACs each)", a.num_tc, a.tc_width,
                                       a.tc_depth, static_cast<long long>(a.tc_width) * a.tc_depth)});
    t.add_row({"  vector cores", fmt::format("{} of {} lanes", a.num_vc, a.vc_width)});
    t.add_row({"  global buffer (GLB)", format_bytes(a.glb)});
    t.add_row({"  clock", detail::format_plain(a.clock.value() / 1e9) + " GHz"});
  } else {
    const auto& sheet = d.sheet;
    t.add_section("Dense matrix peak by format");
    const flops_per_second given[] = {sheet.matrix_fp32, sheet.matrix_tf32, sheet.matrix_bf16,
                                      sheet.matrix_fp16, sheet.matrix_fp8};
    for (std::size_t i = 0; i < detail::device_file::precisions.size(); ++i) {
      const auto p = detail::device_file::precisions[i];
      const auto rate = hw::matrix_peak(sheet, p);
      std::string cell = rate.value() > 0 ? detail::format_tflops(rate) : std::string{"-"};
      // A format without its own path runs on another one (hw::matrix_peak); say which.
      if (given[i].value() == 0 && rate.value() > 0) {
        cell += p == hw::precision::fp32
                    ? "  (no fp32 matrix path: vector rate)"
                    : fmt::format("  (no {} path: runs at the rate of {})", hw::to_string(p),
                                  p == hw::precision::tf32 ? "fp32" : "fp16");
      }
      t.add_row({"  " + std::string{hw::to_string(p)}, cell});
    }
    t.add_row({"  vector (fp32)", detail::format_tflops(sheet.vector)});
    t.add_section("Achieved-efficiency model");
    t.add_row({"  GEMM max fraction of peak", detail::format_plain(sheet.gemm.max_fraction)});
    t.add_row({"  GEMM output tile", fmt::format("{}x{}", sheet.gemm.tile_m, sheet.gemm.tile_n)});
    t.add_row({"  compute units (SMs)", fmt::format("{}", sheet.gemm.compute_units)});
    t.add_row({"  GEMM k_half", detail::format_plain(sheet.gemm.k_half)});
    t.add_row({"  HBM efficiency", detail::format_plain(sheet.memory_efficiency)});
    if (sheet.gemm.fp8_max_fraction > 0)
      t.add_row({"  FP8 GEMM max fraction", detail::format_plain(sheet.gemm.fp8_max_fraction)});
    if (sheet.gemm.fp8_quantize_fraction > 0)
      t.add_row({"  FP8 quantization share of HBM", detail::format_plain(sheet.gemm.fp8_quantize_fraction)});
  }

  t.add_section("Node (links per direction)");
  t.add_row({"  devices per node", fmt::format("{}", s.node.devices)});
  t.add_row(
      {"  intra-node, per device", fmt::format("{}, {} latency", detail::format_gbps(s.node.intra.bandwidth),
                                               detail::format_latency(s.node.intra.latency))});
  t.add_row({"  network interfaces", fmt::format("{}", s.node.nics)});
  t.add_row(
      {"  inter-node, per interface", fmt::format("{}, {} latency", detail::format_gbps(s.node.nic.bandwidth),
                                                  detail::format_latency(s.node.nic.latency))});
  out += t.render();
  return out;
}

/// `phaze devices` as text: one row per device.
inline std::string to_table(const std::vector<device_summary>& devices) {
  text_table t{{"name", "kind", "prec", "matrix TFLOP/s", "vector TFLOP/s", "HBM", "HBM GB/s", "per node",
                "intra GB/s", "NICs", "NIC GB/s", "TC", "VC", "GLB", "clock", "source"},
               {align::left, align::left, align::left, align::right, align::right, align::right, align::right,
                align::right, align::right, align::right, align::right, align::right, align::right,
                align::right, align::right, align::left}};
  for (const auto& s : devices) {
    const auto& d = s.spec;
    const bool systolic = d.kind == hw::device_kind::systolic;
    const auto& a = d.systolic;
    t.add_row({d.name.str(), std::string{hw::to_string(d.kind)}, std::string{hw::to_string(d.compute)},
               detail::format_plain(in_tflop_per_s(s.peak_matrix)),
               detail::format_plain(in_tflop_per_s(s.peak_vector)), detail::format_capacity(d.hbm),
               detail::format_plain(in_gb_per_s(d.hbm_bandwidth)), fmt::format("{}", s.node.devices),
               detail::format_plain(in_gb_per_s(s.node.intra.bandwidth)), fmt::format("{}", s.node.nics),
               detail::format_plain(in_gb_per_s(s.node.nic.bandwidth)),
               systolic ? fmt::format("{}x{}x{}", a.num_tc, a.tc_width, a.tc_depth) : "-",
               systolic ? fmt::format("{}x{}", a.num_vc, a.vc_width) : "-",
               systolic ? format_bytes(a.glb) : "-",
               systolic ? detail::format_plain(a.clock.value() / 1e9) + " GHz" : "-", s.source});
  }
  return t.render();
}

}  // namespace phaze::io
