/// @file
/// Device files: a device (hw::device: compute and memory) and the node it comes in (cluster::node_spec, the
/// "links" section) to and from JSON, one schema for PHAZE's systolic template and for datasheet devices
/// (docs/devices.md). Reading names every field it rejects; writing gives back the same device and node.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "phaze/cluster/links.hpp"
#include "phaze/cluster/presets.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/names.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"

namespace phaze::io {

/// Collective latency a device file gets when it gives none: the presets' assumption (cluster/presets.hpp).
inline constexpr seconds default_intra_latency = cluster::detail::fast_link_latency;
inline constexpr seconds default_inter_latency = cluster::detail::network_latency;

/// What a device file describes: the device and the node it comes in.
struct device_and_node {
  hw::device device;
  cluster::node_spec node;
};

namespace detail::device_file {

/// One way of writing a quantity: the key's suffix and what one unit of it is in the base unit.
struct unit {
  std::string_view suffix;
  double scale;
};

/// A quantity field and its spellings; the first spelling is the one written back. A value outside
/// [least, most] (base units) is refused: the bounds lie orders of magnitude beyond any real device on both
/// sides, so that they catch a wrong unit or a typo, not a bold design (docs/limits.md).
template <std::size_t N>
struct quantity_field {
  std::string_view stem;  ///< "hbm_bandwidth": keys are stem + "_" + suffix
  std::array<unit, N> units;
  double least = 0.0;
  double most = 0.0;
};

inline constexpr double gib = 1024.0 * 1024.0 * 1024.0;
inline constexpr double mib = 1024.0 * 1024.0;

inline constexpr quantity_field<3> hbm_capacity{
    "hbm", {{{"gib", gib}, {"gb", 1e9}, {"bytes", 1.0}}}, mib, 1e15};
inline constexpr quantity_field<3> hbm_rate{
    "hbm_bandwidth", {{{"gb_per_s", 1e9}, {"tb_per_s", 1e12}, {"bytes_per_s", 1.0}}}, 1e6, 1e15};
inline constexpr quantity_field<3> intra_node{
    "intra_node", {{{"gb_per_s", 1e9}, {"gbit_per_s", 1e9 / 8.0}, {"bytes_per_s", 1.0}}}, 1e3, 1e15};
inline constexpr quantity_field<3> inter_node{
    "inter_node", {{{"gb_per_s", 1e9}, {"gbit_per_s", 1e9 / 8.0}, {"bytes_per_s", 1.0}}}, 1e3, 1e15};
inline constexpr quantity_field<2> intra_latency{"intra_latency", {{{"us", 1e-6}, {"s", 1.0}}}, 0.0, 1.0};
inline constexpr quantity_field<2> inter_latency{"inter_latency", {{{"us", 1e-6}, {"s", 1.0}}}, 0.0, 1.0};
inline constexpr quantity_field<3> glb_size{
    "glb", {{{"mib", mib}, {"kib", 1024.0}, {"bytes", 1.0}}}, 1.0, 1e12};
inline constexpr quantity_field<3> clock_rate{
    "clock", {{{"ghz", 1e9}, {"mhz", 1e6}, {"hz", 1.0}}}, 1e6, 1e11};
inline constexpr quantity_field<2> vector_rate{
    "vector", {{{"tflops", 1e12}, {"flops_per_s", 1.0}}}, 1e6, 1e18};
inline constexpr quantity_field<2> matrix_rates{
    "matrix", {{{"tflops", 1e12}, {"flops_per_s", 1.0}}}, 1e6, 1e18};

template <std::size_t N>
std::string key(const quantity_field<N>& f, std::size_t i) {
  return std::string{f.stem} + "_" + std::string{f.units[i].suffix};
}

inline constexpr std::array<std::string_view, 5> precision_names{"fp32", "tf32", "bf16", "fp16", "fp8"};
inline constexpr std::array<hw::precision, 5> precisions{
    hw::precision::fp32, hw::precision::tf32, hw::precision::bf16, hw::precision::fp16, hw::precision::fp8};

/// Largest count accepted for an integer field (cores, array sides, tiles): far above any real design, and
/// small enough that products of a few of them stay exact in a double.
inline constexpr std::int64_t max_count = std::int64_t{1} << 24;

using phaze::quoted_list;

/// A JSON value as the user wrote it, shortened for a message.
inline std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

/// Why `v` is not a whole number in [lo, hi] ("must be a whole number" or "must lie in [lo, hi]"; 128.0
/// counts as whole), or "" when it is one: the one check of every reader's integer fields.
inline std::string whole_number_problem(const nlohmann::json& v, std::int64_t lo, std::int64_t hi) {
  const bool whole = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                               std::floor(v.get<double>()) == v.get<double>());
  if (!whole) return "must be a whole number";
  const double x = v.get<double>();
  if (x < static_cast<double>(lo) || x > static_cast<double>(hi))
    return "must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return {};
}

/// The value of a number whole_number_problem accepted.
inline std::int64_t whole_number_value(const nlohmann::json& v) {
  return v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>())
                                : static_cast<std::int64_t>(v.get<double>());
}

[[noreturn]] inline void field_error(std::string_view field, const std::string& problem) {
  throw input_error("field '" + std::string{field} + "' " + problem);
}

/// The preset names, for suggestions.
inline std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : hw::presets) names.emplace_back(p.name);
  return names;
}

/// One JSON object of a device file, with the dotted path that names it in messages ("links", "datasheet").
class section {
 public:
  section(const nlohmann::json& object, std::string path) : json_(object), path_(std::move(path)) {}

  /// The dotted name of a key in this section, as messages spell it.
  [[nodiscard]] std::string name(std::string_view key) const {
    return path_.empty() ? std::string{key} : path_ + "." + std::string{key};
  }

  /// The value of `key`, or nullptr when it is absent (null counts as absent).
  [[nodiscard]] const nlohmann::json* get(std::string_view key) const {
    const auto it = json_.find(key);
    if (it == json_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  /// Rejects every key not in `allowed`, suggesting the closest allowed ones (a typo would otherwise be
  /// ignored silently, and an override in a file based on a preset would not apply).
  void check_keys(const std::vector<std::string>& allowed, std::string_view what) const {
    for (const auto& item : json_.items()) {
      const std::string& k = item.key();
      if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
      field_error(name(k), "is not a field of " + std::string{what} + "; did you mean " +
                               quoted_list(closest_names(k, allowed)) +
                               "? (docs/devices.md lists the fields)");
    }
  }

  /// A nested object, or nullopt when absent.
  [[nodiscard]] std::optional<section> child(std::string_view key) const {
    const auto* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_object()) field_error(name(key), "must be an object ({...}), got " + shown(*v));
    return section{*v, name(key)};
  }

  [[nodiscard]] std::optional<std::string> text(std::string_view key) const {
    const auto* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) field_error(name(key), "must be a string, got " + shown(*v));
    return v->get<std::string>();
  }

  /// A finite number: positive, or at least zero when `zero_allowed`.
  [[nodiscard]] std::optional<double> number(std::string_view key, bool zero_allowed = false) const {
    const auto* v = get(key);
    if (v == nullptr) return std::nullopt;
    const std::string rule = zero_allowed ? "must be a number at least 0" : "must be a positive number";
    if (!v->is_number()) field_error(name(key), rule + ", got " + shown(*v));
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < 0.0 || (x == 0.0 && !zero_allowed)) {
      field_error(name(key), rule + ", got " + shown(*v));
    }
    return x;
  }

  /// A fraction in (0, 1].
  [[nodiscard]] std::optional<double> fraction(std::string_view key) const {
    const auto* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number() || !(v->get<double>() > 0.0 && v->get<double>() <= 1.0)) {
      field_error(name(key), "must be a fraction in (0, 1], got " + shown(*v));
    }
    return v->get<double>();
  }

  /// A whole number in [1, max_count]; 128.0 is accepted, 128.5 is not.
  [[nodiscard]] std::optional<int> count(std::string_view key) const {
    const auto* v = get(key);
    if (v == nullptr) return std::nullopt;
    const double x = v->is_number() ? v->get<double>() : 0.0;
    if (!v->is_number() || !std::isfinite(x) || std::floor(x) != x || x < 1.0) {
      field_error(name(key), "must be a positive integer, got " + shown(*v));
    }
    if (x > static_cast<double>(max_count)) {
      field_error(name(key),
                  "is " + shown(*v) + ", larger than phaze accepts (" + std::to_string(max_count) + ")");
    }
    return static_cast<int>(x);
  }

  /// A quantity given in any one of its spellings, converted to the base unit; nullopt when none is given.
  template <std::size_t N>
  [[nodiscard]] std::optional<double> quantity(const quantity_field<N>& f, bool zero_allowed = false) const {
    std::optional<double> value;
    std::string given;
    for (std::size_t i = 0; i < N; ++i) {
      const std::string k = key(f, i);
      const auto x = number(k, zero_allowed);
      if (!x) continue;
      if (value) {
        throw input_error("fields '" + name(given) + "' and '" + name(k) +
                          "' give the same quantity; keep one");
      }
      const double base = *x * f.units[i].scale;
      if (!std::isfinite(base) || base > f.most || (base < f.least && !(base == 0.0 && zero_allowed))) {
        const double scale = f.units[i].scale;
        field_error(name(k), "must lie in [" + fmt::format("{:g}", f.least / scale) + ", " +
                                 fmt::format("{:g}", f.most / scale) + "] (docs/limits.md), got " +
                                 shown(*get(k)));
      }
      value = base;
      given = k;
    }
    return value;
  }

  /// The message for a quantity that must be given and is not.
  template <std::size_t N>
  [[noreturn]] void missing(const quantity_field<N>& f, std::string_view hint) const {
    std::vector<std::string> spellings;
    for (std::size_t i = 0; i < N; ++i) spellings.push_back(name(key(f, i)));
    field_error(spellings.front(),
                "is missing (give one of " + quoted_list(spellings) + ")" + std::string{hint});
  }

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  const nlohmann::json& json_;
  std::string path_;
};

template <std::size_t N>
void add_keys(std::vector<std::string>& keys, const quantity_field<N>& f) {
  for (std::size_t i = 0; i < N; ++i) keys.push_back(key(f, i));
}

inline constexpr std::string_view base_hint = "; or start from a preset with \"base\"";

/// Reads a device object into `d` and `node`, which hold the base preset's values or defaults.
class reader {
 public:
  reader(hw::device& d, cluster::node_spec& node, bool has_base) : d_(d), node_(node), has_base_(has_base) {}

  /// Sets `target` from a quantity field when given; a field without a value and without a base is missing.
  template <std::size_t N, class Q>
  void quantity(const section& s, const quantity_field<N>& f, Q& target, bool required,
                bool zero_allowed = false) {
    if (const auto v = s.quantity(f, zero_allowed)) {
      target = Q{*v};
    } else if (required && !has_base_) {
      s.missing(f, base_hint);
    }
  }

  void count(const section& s, std::string_view k, int& target) {
    if (const auto v = s.count(k)) {
      target = *v;
    } else if (!has_base_) {
      field_error(s.name(k), "is missing (a positive integer)" + std::string{base_hint});
    }
  }

  void links(const section& top) {
    const auto s = top.child("links");
    if (!s) {
      if (!has_base_)
        field_error("links", "is missing (an object with the device's links)" + std::string{base_hint});
      return;
    }
    std::vector<std::string> keys{"devices_per_node", "nics_per_node"};
    for (const auto* f : {&intra_node, &inter_node}) add_keys(keys, *f);
    for (const auto* f : {&intra_latency, &inter_latency}) add_keys(keys, *f);
    s->check_keys(keys, "links");
    auto& n = node_;
    if (!has_base_) {
      n.devices = 1;
      n.nics = 1;
      n.intra.latency = default_intra_latency;
      n.nic.latency = default_inter_latency;
    }
    // One interface per device (rails) unless the file says otherwise.
    if (const auto count = s->count("devices_per_node")) n = cluster::with_devices_per_node(n, *count);
    if (const auto count = s->count("nics_per_node")) n.nics = *count;
    quantity(*s, inter_node, n.nic.bandwidth, true);
    if (const auto v = s->quantity(intra_node)) {
      n.intra.bandwidth = bytes_per_second{*v};
    } else if (!has_base_) {
      // One device per node needs no intra-node link; it then gets the network's bandwidth.
      if (n.devices > 1) s->missing(intra_node, base_hint);
      n.intra.bandwidth = n.nic.bandwidth;
    }
    quantity(*s, intra_latency, n.intra.latency, false, true);
    quantity(*s, inter_latency, n.nic.latency, false, true);
  }

  void systolic(const section& top) {
    const auto s = top.child("systolic");
    if (!s) {
      if (!has_base_) {
        field_error("systolic",
                    "is missing (an object: num_tc, tc_width, tc_depth, num_vc, vc_width, glb_mib, "
                    "clock_ghz)" +
                        std::string{base_hint});
      }
      return;
    }
    std::vector<std::string> keys{"num_tc", "tc_width", "tc_depth", "num_vc", "vc_width"};
    add_keys(keys, glb_size);
    add_keys(keys, clock_rate);
    s->check_keys(keys, "systolic");
    auto& a = d_.systolic;
    count(*s, "num_tc", a.num_tc);
    count(*s, "tc_width", a.tc_width);
    count(*s, "tc_depth", a.tc_depth);
    count(*s, "num_vc", a.num_vc);
    count(*s, "vc_width", a.vc_width);
    quantity(*s, glb_size, a.glb, true);
    quantity(*s, clock_rate, a.clock, true);
  }

  /// Reads the datasheet section: matrix rates by format, vector rate, efficiency model.
  void datasheet(const section& top) {
    const auto s = top.child("datasheet");
    if (!s) {
      if (!has_base_) {
        field_error("datasheet",
                    "is missing (an object: matrix_tflops, vector_tflops, optional gemm_efficiency and "
                    "memory_efficiency)" +
                        std::string{base_hint});
      }
      return;
    }
    std::vector<std::string> keys;
    add_keys(keys, matrix_rates);
    add_keys(keys, vector_rate);
    keys.insert(keys.end(), {"gemm_efficiency", "memory_efficiency", "attention_efficiency", "architecture",
                             "overlap_slowdown"});
    s->check_keys(keys, "datasheet");
    auto& sheet = d_.sheet;

    std::optional<section> rates;
    double scale = 1.0;
    for (std::size_t i = 0; i < matrix_rates.units.size(); ++i) {
      auto r = s->child(key(matrix_rates, i));
      if (!r) continue;
      if (rates) {
        throw input_error("fields '" + rates->path() + "' and '" + r->path() +
                          "' give the same rates; keep one");
      }
      rates.emplace(*r);
      scale = matrix_rates.units[i].scale;
    }
    if (rates) {
      rates->check_keys(std::vector<std::string>(precision_names.begin(), precision_names.end()),
                        "the matrix rates");
      flops_per_second* targets[] = {&sheet.matrix_fp32, &sheet.matrix_tf32, &sheet.matrix_bf16,
                                     &sheet.matrix_fp16, &sheet.matrix_fp8};
      for (std::size_t i = 0; i < precision_names.size(); ++i) {
        if (const auto v = rates->number(precision_names[i])) {
          const double rate = *v * scale;
          if (!std::isfinite(rate) || rate < matrix_rates.least || rate > matrix_rates.most) {
            field_error(rates->name(precision_names[i]),
                        "must lie in [" + fmt::format("{:g}", matrix_rates.least / scale) + ", " +
                            fmt::format("{:g}", matrix_rates.most / scale) + "] (docs/limits.md), got " +
                            fmt::format("{:g}", *v));
          }
          *targets[i] = flops_per_second{*v * scale};
        }
      }
    } else if (!has_base_) {
      field_error(s->name("matrix_tflops"),
                  "is missing (an object of dense peak rates in TFLOP/s by format, e.g. {\"bf16\": 312})" +
                      std::string{base_hint});
    }
    quantity(*s, vector_rate, sheet.vector, true);

    if (const auto g = s->child("gemm_efficiency")) {
      g->check_keys({"max_fraction", "tile_m", "tile_n", "compute_units", "k_half", "fp8_max_fraction",
                     "fp8_quantize_fraction"},
                    "gemm_efficiency");
      auto& e = sheet.gemm;
      if (const auto v = g->fraction("max_fraction")) e.max_fraction = *v;
      if (const auto v = g->count("tile_m")) e.tile_m = *v;
      if (const auto v = g->count("tile_n")) e.tile_n = *v;
      if (const auto v = g->count("compute_units")) e.compute_units = *v;
      if (const auto v = g->number("k_half", true)) e.k_half = *v;
      if (const auto v = g->fraction("fp8_max_fraction")) e.fp8_max_fraction = *v;
      if (const auto v = g->fraction("fp8_quantize_fraction")) e.fp8_quantize_fraction = *v;
    }
    if (const auto v = s->fraction("memory_efficiency")) sheet.memory_efficiency = *v;
    if (const auto v = s->number("overlap_slowdown", true)) {
      if (*v >= 1.0)
        field_error(s->name("overlap_slowdown"), "must lie in [0, 1), got " + fmt::format("{:g}", *v));
      sheet.overlap_slowdown = *v;
    }
    if (const auto name = s->text("architecture")) {
      const auto known = {hw::architecture::unspecified, hw::architecture::volta,
                          hw::architecture::turing,      hw::architecture::ampere,
                          hw::architecture::hopper,      hw::architecture::blackwell};
      const auto it = std::find_if(known.begin(), known.end(),
                                   [&](hw::architecture a) { return hw::to_string(a) == *name; });
      if (it == known.end()) {
        field_error(
            s->name("architecture"),
            "must be one of \"volta\", \"turing\", \"ampere\", \"hopper\" or \"unspecified\", got \"" +
                *name + "\"");
      }
      sheet.arch = *it;
    }
    if (const auto a = s->child("attention_efficiency")) {
      a->check_keys(
          {"forward", "backward", "causal_forward", "causal_backward", "work_half", "key_tiles_half"},
          "attention_efficiency");
      auto& e = sheet.attention;
      if (const auto v = a->fraction("forward")) e.forward = *v;
      if (const auto v = a->fraction("backward")) e.backward = *v;
      if (const auto v = a->fraction("causal_forward")) e.causal_forward = *v;
      if (const auto v = a->fraction("causal_backward")) e.causal_backward = *v;
      if (const auto v = a->number("work_half", true)) e.work_half = *v;
      if (const auto v = a->number("key_tiles_half", true)) e.key_tiles_half = *v;
      if (!e.measured()) {
        field_error(a->path(),
                    "needs all four fractions (forward, backward, causal_forward, causal_backward), each in "
                    "(0, 1], as measured for fused attention (docs/devices.md)");
      }
    }
  }

 private:
  hw::device& d_;
  cluster::node_spec& node_;
  bool has_base_;
};

inline hw::precision parse_precision(const section& top, std::string_view k, const std::string& text) {
  for (std::size_t i = 0; i < precision_names.size(); ++i) {
    if (precision_names[i] == text) return precisions[i];
  }
  field_error(top.name(k),
              "must be one of \"fp32\", \"tf32\", \"bf16\", \"fp16\", \"fp8\", got \"" + text + "\"");
}

inline std::vector<std::string> top_level_keys() {
  std::vector<std::string> keys{"schema", "version",   "name",   "kind",
                                "base",   "precision", "source", "comment"};
  add_keys(keys, hbm_capacity);
  add_keys(keys, hbm_rate);
  keys.insert(keys.end(), {"links", "systolic", "datasheet"});
  return keys;
}

// --- writing ---------------------------------------------------------------------------------------------

/// The shortest decimal that, read back and scaled by `scale`, gives exactly `value` (so that a device
/// written and read back is the same device); nullopt when no decimal in this unit does.
inline std::optional<double> exact_in(double value, double scale) {
  for (int digits = 1; digits <= 17; ++digits) {
    const std::string text = fmt::format("{:.{}g}", value / scale, digits);
    double x = 0.0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (ec == std::errc{} && x * scale == value) return x;
  }
  return std::nullopt;
}

/// A number as JSON: whole numbers as integers (32, not 32.0).
inline nlohmann::ordered_json number_json(double x) {
  if (std::floor(x) == x && std::fabs(x) < 9.0e15) return static_cast<std::int64_t>(x);
  return x;
}

/// Writes a quantity in the first of `preferred` spellings (indices into the field's units) that holds it
/// exactly, else in the base unit (the last spelling).
template <std::size_t N>
void write_quantity(nlohmann::ordered_json& j, const quantity_field<N>& f, double value,
                    std::initializer_list<std::size_t> preferred) {
  for (const std::size_t i : preferred) {
    if (const auto x = exact_in(value, f.units[i].scale)) {
      j[key(f, i)] = number_json(*x);
      return;
    }
  }
  j[key(f, N - 1)] = number_json(value);
}

}  // namespace detail::device_file

/// A device and its node from their JSON form (docs/devices.md). `fallback_name` names a device whose JSON
/// has no "name" (read_device_file passes the file's stem). Every rejected field is named in the
/// input_error; the assembled device is then checked by hw::validate and the node by cluster::validate.
inline constexpr auto device_and_node_from_json = [](const nlohmann::json& j,
                                                     std::string_view fallback_name = {}) -> device_and_node {
  using namespace detail::device_file;
  if (!j.is_object()) {
    throw input_error("a device must be one JSON object ({\"name\": ..., \"kind\": ...}), got " + shown(j));
  }
  const section top{j, ""};
  top.check_keys(top_level_keys(), "a device");

  hw::device d;
  cluster::node_spec node;
  const auto base = top.text("base");
  if (base) {
    const auto preset = hw::find_preset(*base);
    if (!preset) {
      field_error("base", "is \"" + *base + "\", not a preset; did you mean " +
                              quoted_list(closest_names(*base, preset_names())) +
                              "? (`phaze devices` lists them)");
    }
    d = *preset;
    node = cluster::node_of(*base);
  }

  if (const auto kind = top.text("kind")) {
    hw::device_kind k{};
    if (*kind == "systolic") {
      k = hw::device_kind::systolic;
    } else if (*kind == "datasheet") {
      k = hw::device_kind::datasheet;
    } else {
      field_error("kind",
                  "must be \"systolic\" (PHAZE's tensor/vector-core template) or \"datasheet\" (a GPU "
                  "or TPU by its datasheet), got \"" +
                      *kind + "\"");
    }
    if (base && k != d.kind) {
      field_error("kind", "is \"" + *kind + "\" but base '" + *base + "' is a " +
                              std::string{hw::to_string(d.kind)} + " device; drop one of them");
    }
    d.kind = k;
  } else if (!base) {
    field_error("kind", "is missing (\"systolic\" or \"datasheet\")" + std::string{base_hint});
  }
  const bool systolic = d.kind == hw::device_kind::systolic;
  const std::string_view other = systolic ? "datasheet" : "systolic";
  if (top.get(other) != nullptr) {
    field_error(other, "does not apply to a " + std::string{hw::to_string(d.kind)} + " device (kind \"" +
                           std::string{hw::to_string(d.kind)} + "\")");
  }

  // A device file phaze wrote (best-device.json, `phaze devices DEV --format json`'s definition) says what it
  // is.
  if (const auto schema = top.text("schema"); schema && *schema != "phaze.device") {
    field_error("schema", "must be \"phaze.device\" (a device file), got \"" + *schema + "\"");
  }
  if (const auto version = top.count("version"); version && *version != 1) {
    field_error("version",
                "must be 1 (the only version of the device file), got " + std::to_string(*version));
  }
  (void)top.text("source");  // free text: where the numbers come from
  (void)top.text("comment");
  if (const auto name = top.text("name")) {
    if (name->empty() || name->size() > 31) {
      field_error("name", "must be 1 to 31 characters, got " + shown(*top.get("name")));
    }
    d.name = std::string_view{*name};
  } else if (!fallback_name.empty()) {
    d.name = fallback_name;
  } else if (!base) {
    field_error("name", "is missing (a short label such as \"my-accelerator\")");
  }

  reader r{d, node, base.has_value()};
  r.quantity(top, hbm_capacity, d.hbm, true);
  r.quantity(top, hbm_rate, d.hbm_bandwidth, true);
  r.links(top);
  if (systolic) {
    r.systolic(top);
  } else {
    r.datasheet(top);
  }

  if (const auto p = top.text("precision")) {
    d.compute = parse_precision(top, "precision", *p);
  } else if (!base) {
    // Datasheet devices without bf16 (V100, T4) train in fp16, as the presets do.
    d.compute = systolic || d.sheet.matrix_bf16.value() > 0 ? hw::precision::bf16 : hw::precision::fp16;
  }
  if (!systolic && !(hw::matrix_peak(d.sheet, d.compute).value() > 0)) {
    // The format hw::matrix_peak runs a format without its own path in.
    const std::string p{hw::to_string(d.compute)};
    const std::string_view fallback = d.compute == hw::precision::tf32   ? "fp32"
                                      : d.compute == hw::precision::bf16 ? "fp16"
                                      : d.compute == hw::precision::fp8  ? "fp16"
                                                                         : "";
    field_error(
        "datasheet.matrix_tflops." + p,
        "is missing: the device computes in " + p + " (field 'precision'); give its dense peak rate" +
            (fallback.empty() ? std::string{}
                              : " or the " + std::string{fallback} + " rate, which " + p + " falls back to"));
  }
  hw::validate(d);
  cluster::validate(node);
  return device_and_node{d, node};
};

/// The device of a device file's JSON form (device_and_node_from_json without the node).
inline constexpr auto device_from_json = [](const nlohmann::json& j,
                                            std::string_view fallback_name = {}) -> hw::device {
  return device_and_node_from_json(j, fallback_name).device;
};

/// The JSON form of a device and its node, in the preferred spellings of docs/devices.md;
/// device_and_node_from_json reads it back to the same device and node.
inline constexpr auto device_to_json = [](const hw::device& d,
                                          const cluster::node_spec& node) -> nlohmann::ordered_json {
  using namespace detail::device_file;
  nlohmann::ordered_json j;
  if (!d.name.empty()) j["name"] = d.name.str();
  j["kind"] = std::string{hw::to_string(d.kind)};
  j["precision"] = std::string{hw::to_string(d.compute)};
  // Whole GiB as GiB (TPU HBM), else decimal GB as datasheets quote them.
  const double in_gib_units = d.hbm.value() / gib;
  if (std::floor(in_gib_units) == in_gib_units) {
    write_quantity(j, hbm_capacity, d.hbm.value(), {0});
  } else {
    write_quantity(j, hbm_capacity, d.hbm.value(), {1, 0});
  }
  write_quantity(j, hbm_rate, d.hbm_bandwidth.value(), {0});

  nlohmann::ordered_json links;
  links["devices_per_node"] = node.devices;
  links["nics_per_node"] = node.nics;
  write_quantity(links, intra_node, node.intra.bandwidth.value(), {0});
  write_quantity(links, inter_node, node.nic.bandwidth.value(), {0});
  write_quantity(links, intra_latency, node.intra.latency.value(), {0});
  write_quantity(links, inter_latency, node.nic.latency.value(), {0});
  j["links"] = links;

  if (d.kind == hw::device_kind::systolic) {
    const auto& a = d.systolic;
    nlohmann::ordered_json s;
    s["num_tc"] = a.num_tc;
    s["tc_width"] = a.tc_width;
    s["tc_depth"] = a.tc_depth;
    s["num_vc"] = a.num_vc;
    s["vc_width"] = a.vc_width;
    write_quantity(s, glb_size, a.glb.value(), {0});
    write_quantity(s, clock_rate, a.clock.value(), {0, 1});
    j["systolic"] = s;
  } else {
    const auto& sheet = d.sheet;
    const std::array<double, 5> rates{sheet.matrix_fp32.value(), sheet.matrix_tf32.value(),
                                      sheet.matrix_bf16.value(), sheet.matrix_fp16.value(),
                                      sheet.matrix_fp8.value()};
    // TFLOP/s when every rate is exact in it, else FLOP/s; absent formats (rate 0) are left out.
    const bool in_tflops = std::all_of(rates.begin(), rates.end(),
                                       [](double r) { return r == 0.0 || exact_in(r, 1e12).has_value(); });
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < rates.size(); ++i) {
      if (rates[i] == 0.0) continue;
      m[std::string{precision_names[i]}] = number_json(in_tflops ? *exact_in(rates[i], 1e12) : rates[i]);
    }
    nlohmann::ordered_json s;
    s[key(matrix_rates, in_tflops ? 0 : 1)] = m;
    write_quantity(s, vector_rate, sheet.vector.value(), {0});
    const auto& g = sheet.gemm;
    s["gemm_efficiency"] = {{"max_fraction", g.max_fraction},
                            {"tile_m", g.tile_m},
                            {"tile_n", g.tile_n},
                            {"compute_units", g.compute_units},
                            {"k_half", number_json(g.k_half)}};
    if (g.fp8_max_fraction > 0) s["gemm_efficiency"]["fp8_max_fraction"] = g.fp8_max_fraction;
    if (g.fp8_quantize_fraction > 0) s["gemm_efficiency"]["fp8_quantize_fraction"] = g.fp8_quantize_fraction;
    s["memory_efficiency"] = sheet.memory_efficiency;
    if (sheet.arch != hw::architecture::unspecified)
      s["architecture"] = std::string{hw::to_string(sheet.arch)};
    if (sheet.overlap_slowdown > 0) s["overlap_slowdown"] = sheet.overlap_slowdown;
    if (sheet.attention.measured()) {
      const auto& a = sheet.attention;
      s["attention_efficiency"] = {{"forward", a.forward},
                                   {"backward", a.backward},
                                   {"causal_forward", a.causal_forward},
                                   {"causal_backward", a.causal_backward},
                                   {"work_half", number_json(a.work_half)},
                                   {"key_tiles_half", number_json(a.key_tiles_half)}};
    }
    j["datasheet"] = s;
  }
  return j;
};

}  // namespace phaze::io
