/// @file
/// Layer-table files: a placement problem (cost tables per TP width plus cluster and training settings) to
/// and from JSON (docs/layer-table.md), so placers can be benchmarked on tables from any source. Reading
/// names every field it rejects; writing gives back the same problem.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "phaze/core/error.hpp"
#include "phaze/core/limits.hpp"
#include "phaze/core/names.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/place/cost_table.hpp"

namespace phaze::io {

/// The format name files carry in "format".
inline constexpr std::string_view layer_table_format = "phaze-layer-table";
/// The version this reader understands.
inline constexpr int layer_table_version = 1;

namespace detail::layer_table_file {

/// A JSON value as the user wrote it, shortened for a message.
inline std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

/// One JSON object of the file and the path that names it in messages ("tables[1].nodes[3]").
class object {
 public:
  object(const nlohmann::json& json, std::string path) : json_(json), path_(std::move(path)) {
    if (!json_.is_object()) fail_at(path_.empty() ? "the file" : path_, "must be an object ({...})");
  }

  [[nodiscard]] std::string name(std::string_view key) const {
    return path_.empty() ? std::string{key} : path_ + "." + std::string{key};
  }

  [[noreturn]] static void fail_at(const std::string& field, const std::string& problem) {
    throw input_error("layer table: field '" + field + "' " + problem + " (docs/layer-table.md)");
  }
  [[noreturn]] void fail(std::string_view key, const std::string& problem) const {
    fail_at(name(key), problem);
  }

  /// Rejects keys not in `allowed`, suggesting the closest (a typo would otherwise be ignored silently).
  void check_keys(const std::vector<std::string>& allowed) const {
    for (const auto& item : json_.items()) {
      if (std::find(allowed.begin(), allowed.end(), item.key()) != allowed.end()) continue;
      fail(item.key(),
           "is not a field here; did you mean " + quoted_list(closest_names(item.key(), allowed)) + "?");
    }
  }

  [[nodiscard]] const nlohmann::json* find(std::string_view key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  [[nodiscard]] const nlohmann::json& at(std::string_view key) const {
    const auto* v = find(key);
    if (v == nullptr) fail(key, "is missing");
    return *v;
  }

  /// A finite number at least 0 (positive when `positive`); `fallback` when absent, if given.
  [[nodiscard]] double number(std::string_view key, bool positive, const double* fallback = nullptr) const {
    const auto* v = find(key);
    if (v == nullptr && fallback != nullptr) return *fallback;
    const std::string rule = positive ? "must be a positive number" : "must be a number at least 0";
    if (v == nullptr) fail(key, "is missing; it " + rule);
    if (!v->is_number()) fail(key, rule + ", got " + shown(*v));
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < 0.0 || (positive && x == 0.0)) fail(key, rule + ", got " + shown(*v));
    return x;
  }

  /// A whole number in [lo, 2^53].
  [[nodiscard]] std::int64_t integer(std::string_view key, std::int64_t lo,
                                     std::int64_t hi = std::int64_t{9'000'000'000'000'000}) const {
    const auto& v = at(key);
    const double x = v.is_number() ? v.get<double>() : -1.0;
    if (!v.is_number() || !std::isfinite(x) || std::floor(x) != x || x < static_cast<double>(lo)) {
      fail(key, "must be an integer at least " + std::to_string(lo) + ", got " + shown(v));
    }
    if (x > static_cast<double>(hi)) {
      fail(key, "must be at most " + std::to_string(hi) + " (docs/limits.md), got " + shown(v));
    }
    return static_cast<std::int64_t>(x);
  }

  [[nodiscard]] bool boolean(std::string_view key, bool fallback) const {
    const auto* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, "must be true or false, got " + shown(*v));
    return v->get<bool>();
  }

  [[nodiscard]] const nlohmann::json& array(std::string_view key) const {
    const auto& v = at(key);
    if (!v.is_array()) fail(key, "must be an array ([...]), got " + shown(v));
    return v;
  }

 private:
  const nlohmann::json& json_;
  std::string path_;
};

inline place::cost_table read_table(const nlohmann::json& json, const std::string& path) {
  const object o{json, path};
  o.check_keys({"tp", "nodes", "edges"});
  place::cost_table t;
  t.tp = static_cast<int>(o.integer("tp", 1, limits::max_devices));
  const auto& nodes = o.array("nodes");
  if (nodes.empty()) o.fail("nodes", "is empty; give at least one layer node");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const object n{nodes[i], o.name("nodes") + "[" + std::to_string(i) + "]"};
    n.check_keys({"name", "forward_s", "backward_s", "recompute_s", "parameter_bytes", "activation_bytes",
                  "tensor_parallel"});
    place::cost_node node;
    if (const auto* name = n.find("name")) {
      if (!name->is_string()) n.fail("name", "must be a string, got " + shown(*name));
      node.name = name->get<std::string>();
    }
    const double zero = 0.0;
    node.forward = seconds{n.number("forward_s", false)};
    node.backward = seconds{n.number("backward_s", false)};
    node.recompute = seconds{n.number("recompute_s", false, &zero)};
    node.parameters = bytes{n.number("parameter_bytes", false)};
    node.activations = bytes{n.number("activation_bytes", false)};
    node.tensor_parallel = n.boolean("tensor_parallel", true);
    t.nodes.push_back(node);
  }
  const auto& edges = o.array("edges");
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const object e{edges[i], o.name("edges") + "[" + std::to_string(i) + "]"};
    e.check_keys({"from", "to", "boundary_bytes"});
    place::cost_edge edge;
    edge.from = static_cast<std::size_t>(e.integer("from", 0));
    edge.to = static_cast<std::size_t>(e.integer("to", 0));
    if (edge.to >= t.nodes.size()) {
      e.fail("to", "is " + std::to_string(edge.to) + " but there are " + std::to_string(t.nodes.size()) +
                       " nodes (numbered from 0)");
    }
    if (edge.from >= edge.to) {
      e.fail("from", "is " + std::to_string(edge.from) + ", not below 'to' (" + std::to_string(edge.to) +
                         "); list nodes in topological order so every edge goes forward");
    }
    edge.boundary = bytes{e.number("boundary_bytes", false)};
    t.edges.push_back(edge);
  }
  return t;
}

}  // namespace detail::layer_table_file

/// A placement problem from a parsed layer-table file. Throws input_error naming the field at fault.
inline place::placement_problem<> layer_table_from_json(const nlohmann::json& json) {
  using detail::layer_table_file::object;
  const object o{json, ""};
  o.check_keys({"format", "version", "devices", "memory_per_device_bytes", "microbatches",
                "weight_bytes_per_parameter", "state_bytes_per_parameter", "p2p_bandwidth_bytes_per_s",
                "dp_bandwidth_bytes_per_s", "schedule", "recompute", "tables"});
  if (const auto* f = o.find("format"); f != nullptr && *f != std::string{layer_table_format}) {
    o.fail("format",
           "must be \"" + std::string{layer_table_format} + "\", got " + detail::layer_table_file::shown(*f));
  }
  if (o.find("version") != nullptr && o.integer("version", 1) != layer_table_version) {
    o.fail("version", "must be " + std::to_string(layer_table_version) + "; this phaze reads version " +
                          std::to_string(layer_table_version));
  }
  place::placement_problem<> p;
  p.devices = static_cast<int>(o.integer("devices", 1, limits::max_devices));
  p.memory_per_device = bytes{o.number("memory_per_device_bytes", true)};
  p.microbatches = o.integer("microbatches", 1, limits::max_global_batch);
  const double two = 2.0;
  const double sixteen = 16.0;
  p.weight_bytes_per_parameter = o.number("weight_bytes_per_parameter", true, &two);
  p.state_bytes_per_parameter = o.number("state_bytes_per_parameter", true, &sixteen);
  p.p2p_bandwidth = bytes_per_second{o.number("p2p_bandwidth_bytes_per_s", true)};
  p.dp_bandwidth = bytes_per_second{o.number("dp_bandwidth_bytes_per_s", true)};
  if (const auto* sch = o.find("schedule")) {
    if (*sch == "1f1b") {
      p.schedule = train::pipeline_schedule::one_f_one_b;
    } else if (*sch == "gpipe") {
      p.schedule = train::pipeline_schedule::gpipe;
    } else {
      o.fail("schedule", "must be \"1f1b\" or \"gpipe\", got " + detail::layer_table_file::shown(*sch));
    }
  }
  p.recompute = o.boolean("recompute", false);
  const auto& tables = o.array("tables");
  if (tables.empty()) o.fail("tables", "is empty; give a table for at least one TP width");
  for (std::size_t i = 0; i < tables.size(); ++i) {
    p.tables.push_back(detail::layer_table_file::read_table(tables[i], "tables[" + std::to_string(i) + "]"));
  }
  for (std::size_t i = 0; i < p.tables.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (p.tables[i].tp == p.tables[j].tp) {
        object::fail_at("tables[" + std::to_string(i) + "].tp",
                        "repeats tp " + std::to_string(p.tables[i].tp) + "; give one table per TP width");
      }
    }
  }
  place::validate(p);  // whatever the field checks above left
  return p;
}

/// A placement problem from layer-table text; malformed JSON is an input_error too.
inline place::placement_problem<> parse_layer_table(std::string_view text) {
  const nlohmann::json json = parse_json_within(text, file_rules::layer_table, "the layer table");
  try {
    return layer_table_from_json(json);
  } catch (const nlohmann::json::exception& e) {  // a guard: the reader checks types before reading values
    throw input_error(std::string{"layer table: "} + e.what());
  }
}

/// A placement problem from a layer-table file.
inline place::placement_problem<> read_layer_table(const std::string& path) {
  const nlohmann::json json = read_json_file(path, file_rules::layer_table);
  try {
    return layer_table_from_json(json);
  } catch (const input_error& e) {
    throw input_error("'" + path + "': " + e.what());
  } catch (const nlohmann::json::exception& e) {  // a guard: the reader checks types before reading values
    throw input_error("'" + path + "': " + e.what());
  }
}

/// The layer-table JSON of a problem; layer_table_from_json gives the same problem back.
inline nlohmann::json layer_table_to_json(const place::placement_problem<>& p) {
  nlohmann::json out;
  out["format"] = std::string{layer_table_format};
  out["version"] = layer_table_version;
  out["devices"] = p.devices;
  out["memory_per_device_bytes"] = p.memory_per_device.value();
  out["microbatches"] = p.microbatches;
  out["weight_bytes_per_parameter"] = p.weight_bytes_per_parameter;
  out["state_bytes_per_parameter"] = p.state_bytes_per_parameter;
  out["p2p_bandwidth_bytes_per_s"] = p.p2p_bandwidth.value();
  out["dp_bandwidth_bytes_per_s"] = p.dp_bandwidth.value();
  out["schedule"] = p.schedule == train::pipeline_schedule::gpipe ? "gpipe" : "1f1b";
  out["recompute"] = p.recompute;
  out["tables"] = nlohmann::json::array();
  for (const auto& t : p.tables) {
    nlohmann::json table;
    table["tp"] = t.tp;
    table["nodes"] = nlohmann::json::array();
    for (const auto& n : t.nodes) {
      table["nodes"].push_back({{"name", n.name},
                                {"forward_s", n.forward.value()},
                                {"backward_s", n.backward.value()},
                                {"recompute_s", n.recompute.value()},
                                {"parameter_bytes", n.parameters.value()},
                                {"activation_bytes", n.activations.value()},
                                {"tensor_parallel", n.tensor_parallel}});
    }
    table["edges"] = nlohmann::json::array();
    for (const auto& e : t.edges) {
      table["edges"].push_back({{"from", e.from}, {"to", e.to}, {"boundary_bytes", e.boundary.value()}});
    }
    out["tables"].push_back(std::move(table));
  }
  return out;
}

}  // namespace phaze::io
