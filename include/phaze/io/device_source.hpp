/// @file
/// Resolves the DEV argument of the command line: a preset name, or a path to a device JSON file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/presets.hpp"
#include "phaze/core/error.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/io/device_json.hpp"

namespace phaze::io {

/// A device, the node it comes in and where their numbers come from: the preset's citation, or the file (and
/// its "source" field).
struct resolved_device {
  hw::device spec;
  cluster::node_spec node;
  std::string source;
  bool preset = false;  ///< true when the argument named a preset
};

/// Up to `k` preset names closest to `name` (names containing it first, then by edit distance).
inline std::vector<std::string> closest_preset_names(std::string_view name, std::size_t k = 3) {
  return closest_names(name, detail::device_file::preset_names(), k);
}

namespace detail::device_file {
/// True when the argument names a file rather than a preset (a path separator, a .json suffix, or an
/// existing file of that name; a name the file system cannot look up, too long say, names no file).
inline bool looks_like_path(std::string_view arg) {
  std::error_code ignored;
  return arg.find('/') != std::string_view::npos || arg.ends_with(".json") ||
         std::filesystem::exists(std::filesystem::path{std::string{arg}}, ignored);
}

[[noreturn]] inline void unknown_device(std::string_view name) {
  throw input_error("unknown device '" + std::string{name} + "'; did you mean " +
                    quoted_list(closest_preset_names(name)) +
                    "? Run `phaze devices` for the presets, or pass a path to a device JSON file "
                    "(docs/devices.md)");
}
}  // namespace detail::device_file

/// The device file at `path`: read, parsed and checked; every error is an input_error that names the file and
/// the field. A file without "name" is named after its stem.
inline resolved_device read_device_file(const std::filesystem::path& path) {
  const std::string where = "device file '" + path.string() + "'";
  const nlohmann::json json = read_json_file(path, file_rules::device);
  resolved_device r;
  try {
    const auto read = device_and_node_from_json(json, path.stem().string());
    r.spec = read.device;
    r.node = read.node;
  } catch (const input_error& e) {
    throw input_error(where + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {  // a guard: the reader checks types before reading values
    throw input_error(where + ": " + e.what());
  }
  r.source = path.string();
  if (const auto it = json.find("source"); it != json.end() && it->is_string()) {
    r.source += " (" + it->get<std::string>() + ")";
  }
  return r;
}

/// The device a command-line argument names, with its source: a preset name (`phaze devices` lists them) or
/// a path to a device JSON file. An unknown name throws input_error suggesting the closest preset names.
inline resolved_device resolve_device(std::string_view arg) {
  for (const auto& p : hw::presets) {
    if (p.name == arg) return {p.spec, cluster::node_of(p.name), std::string{p.source}, true};
  }
  if (!detail::device_file::looks_like_path(arg)) detail::device_file::unknown_device(arg);
  return read_device_file(std::filesystem::path{std::string{arg}});
}

/// The device a command-line argument names: a preset name or a path to a device JSON file.
inline hw::device load_device(std::string_view arg) {
  return resolve_device(arg).spec;
}

/// The cluster `--device DEV --devices N [--devices-per-node G]` describe: N devices of DEV in DEV's nodes
/// (the preset's, or the file's "links"), G devices per node when given (0: the node's own).
inline cluster::cluster homogeneous_cluster(const resolved_device& d, int devices, int devices_per_node = 0) {
  const cluster::node_spec node =
      devices_per_node > 0 ? cluster::with_devices_per_node(d.node, devices_per_node) : d.node;
  return cluster::homogeneous(d.spec, devices, node);
}

}  // namespace phaze::io
