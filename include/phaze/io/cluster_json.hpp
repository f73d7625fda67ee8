/// @file
/// Cluster files: a cluster (cluster::cluster: device groups, their nodes, collective efficiencies and the
/// measured links between nodes or devices) to and from JSON (docs/clusters.md). A group's device is a preset
/// name, a device file or an inline device object, with the "links" of its node overridable per group; the
/// network between nodes is the groups' fabric unless the file gives measured links, sparse ("links") or
/// whole ("matrix_gb_per_s"). Reading names every field it rejects and every limit it enforces.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "phaze/cluster/analysis.hpp"
#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/links.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/io/device_json.hpp"
#include "phaze/io/device_source.hpp"
#include "phaze/io/nccl_tests.hpp"

namespace phaze::io {

/// A cluster read from a file, with what a report says about it.
struct cluster_description {
  cluster::cluster value;
  std::string name;
  std::string source;                      ///< the file (and its "source" field)
  std::vector<std::string> group_devices;  ///< what each group's "device" named: a preset, a file, "inline"
  std::size_t measured_links = 0;          ///< links the file gave (the rest come from the fabric)
  std::vector<std::string> measurements;   ///< one line per nccl-tests output read (nccl::describe)
  /// What the file gives that phaze takes as given but a user should look at (one sentence each): node
  /// entries above what the two nodes' interfaces carry.
  std::vector<std::string> warnings;
};

/// Limits of a cluster file, each named in the message that enforces it (docs/clusters.md, "Limits").
struct cluster_file_limits {
  static constexpr std::uintmax_t max_file_bytes = 64U << 20U;
  static constexpr int max_nesting = 32;
  static constexpr std::size_t max_groups = 1024;
  static constexpr int max_matrix_endpoints = 4096;
  static constexpr std::size_t max_links = 1U << 22U;
  /// The nccl-tests outputs one file names, together (each at most nccl::max_text_bytes): 256 MiB, sixteen
  /// outputs at the largest one accepts or tens of thousands of real ones (an output of 2^3 to 2^33 bytes
  /// in steps of 2 is about 5 KiB), read in about 2.5 s here.
  static constexpr std::uintmax_t max_measurement_bytes = std::uintmax_t{256} << 20U;
};

namespace detail::cluster_file {
using device_file::field_error;
using device_file::section;
using device_file::shown;

/// A whole number in [lo, hi] at `field`.
inline std::int64_t integer(const nlohmann::json& v, const std::string& field, std::int64_t lo,
                            std::int64_t hi) {
  if (const std::string problem = device_file::whole_number_problem(v, lo, hi); !problem.empty())
    field_error(field, problem + ", got " + shown(v));
  return device_file::whole_number_value(v);
}

/// A finite number > 0 (or >= 0 when `zero_allowed`) at `field`.
inline double positive(const nlohmann::json& v, const std::string& field, bool zero_allowed = false) {
  const double x = v.is_number() ? v.get<double>() : std::nan("");
  if (!std::isfinite(x) || x < 0.0 || (x == 0.0 && !zero_allowed) || x > 1e18) {
    field_error(field, std::string{zero_allowed ? "must be a finite number at least 0"
                                                : "must be a finite number above 0"} +
                           " (at most 1e18), got " + shown(v));
  }
  return x;
}

/// A link bandwidth a file gives (`v` in GB/s, or in Gbit/s with `per_byte` 1/8), in bytes/s: within the
/// physical range of a device file's links, 1e3 to 1e15 bytes/s (docs/limits.md), so that no accepted file
/// makes a collective take an infinite time.
inline double link_bandwidth(const nlohmann::json& v, const std::string& field, double per_byte = 1.0) {
  const double x = positive(v, field) * 1e9 * per_byte;
  if (x < 1e3 || x > 1e15)
    field_error(
        field,
        "must give a bandwidth from 1e3 to 1e15 bytes/s (1e-6 to 1e6 GB/s; docs/limits.md), got " + shown(v));
  return x;
}
/// A link latency a file gives in microseconds, in seconds: 0 to 1 s (docs/limits.md).
inline double link_latency(const nlohmann::json& v, const std::string& field) {
  const double x = positive(v, field, true);
  if (x > 1e6)
    field_error(field, "must be a latency from 0 to 1e6 us (1 s; docs/limits.md), got " + shown(v));
  return x * 1e-6;
}

/// The device and node of group `i`: a preset name, a device file (relative to the cluster file's folder)
/// or an inline device object, with the group's "links" laid over the device's own.
inline device_and_node group_device(const section& g, const std::filesystem::path& dir, std::string& named) {
  const nlohmann::json* device = g.get("device");
  if (device == nullptr) {
    field_error(g.name("device"),
                "is missing (a preset name such as \"a100-80gb\", a device file, or a device object)");
  }
  const nlohmann::json* links = g.get("links");
  if (links != nullptr && !links->is_object())
    field_error(g.name("links"), "must be an object, got " + shown(*links));
  nlohmann::json j;
  std::string fallback;
  if (device->is_string()) {
    const auto text = device->get<std::string>();
    if (hw::find_preset(text)) {
      j = nlohmann::json{{"base", text}};
      named = text;
    } else if (std::error_code ignored;
               device_file::looks_like_path(text) || std::filesystem::exists(dir / text, ignored)) {
      const std::filesystem::path path =
          std::filesystem::path{text}.is_absolute() ? std::filesystem::path{text} : dir / text;
      // A device file named by a cluster file is held to the cluster file's limits.
      const bounded_text read = read_at_most(path, cluster_file_limits::max_file_bytes);
      if (read.status == read_status::too_large) {
        field_error(g.name("device"), "names '" + path.string() + "', larger than " +
                                          std::to_string(cluster_file_limits::max_file_bytes >> 20U) +
                                          " MiB");
      }
      if (read.status != read_status::ok)
        field_error(g.name("device"), "names the file '" + path.string() + "', which cannot be opened");
      if (json_nesting_depth(read.text) > cluster_file_limits::max_nesting) {
        field_error(g.name("device"), "names '" + path.string() + "', which nests more than " +
                                          std::to_string(cluster_file_limits::max_nesting) + " deep");
      }
      try {
        j = nlohmann::json::parse(read.text);
      } catch (const nlohmann::json::exception& e) {
        field_error(g.name("device"), "names '" + path.string() + "', which is not valid JSON: " + e.what());
      }
      fallback = path.stem().string();
      named = path.string();
    } else {
      field_error(g.name("device"), "is \"" + text + "\": neither a preset (did you mean " +
                                        quoted_list(closest_preset_names(text)) +
                                        "?) nor an existing device file");
    }
  } else if (device->is_object()) {
    j = *device;
    named = "inline";
  } else {
    field_error(g.name("device"),
                "must be a preset name, a file path or a device object, got " + shown(*device));
  }
  if (links != nullptr) {
    if (!j.contains("links") || !j["links"].is_object()) j["links"] = nlohmann::json::object();
    j["links"].update(*links);
  }
  try {
    return device_and_node_from_json(j, fallback);
  } catch (const input_error& e) {
    throw input_error(g.name("device") + ": " + e.what());
  }
}

/// The network link of a "links" entry or a matrix cell: a bandwidth in GB/s or Gbit/s and a latency in us.
struct link_fields {
  std::optional<double> bandwidth;  ///< bytes/s
  std::optional<double> latency;    ///< s
};

inline link_fields read_link(const section& s) {
  link_fields out;
  const auto gb = s.get("gb_per_s");
  const auto gbit = s.get("gbit_per_s");
  if (gb != nullptr && gbit != nullptr) {
    throw input_error("fields '" + s.name("gb_per_s") + "' and '" + s.name("gbit_per_s") +
                      "' give the same bandwidth; keep one");
  }
  if (gb != nullptr) out.bandwidth = link_bandwidth(*gb, s.name("gb_per_s"));
  if (gbit != nullptr) out.bandwidth = link_bandwidth(*gbit, s.name("gbit_per_s"), 1.0 / 8.0);
  if (const auto* l = s.get("latency_us")) out.latency = link_latency(*l, s.name("latency_us"));
  return out;
}
/// One nccl-tests output named by a measurement: read (bounded), parsed and fitted.
struct measured_run {
  nccl::run run;
  cluster::link link;
};

inline measured_run read_measurement(const section& m, const std::filesystem::path& dir,
                                     std::uintmax_t& read_so_far) {
  const auto file = m.text("nccl_tests");
  if (!file)
    field_error(m.name("nccl_tests"), "is missing (the path of an nccl-tests output, docs/nccl-tests.md)");
  const std::filesystem::path path =
      std::filesystem::path{*file}.is_absolute() ? std::filesystem::path{*file} : dir / *file;
  const bounded_text read = read_at_most(path, nccl::max_text_bytes);
  if (read.status == read_status::too_large) {
    field_error(m.name("nccl_tests"), "names '" + path.string() + "', larger than " +
                                          std::to_string(nccl::max_text_bytes >> 20U) +
                                          " MiB (one nccl-tests run per file)");
  }
  if (read.status != read_status::ok) {
    field_error(m.name("nccl_tests"), "names '" + path.string() + "', which cannot be opened");
  }
  read_so_far += read.text.size();
  if (read_so_far > cluster_file_limits::max_measurement_bytes) {
    field_error(m.name("nccl_tests"), "brings the nccl-tests outputs this file names to more than " +
                                          std::to_string(cluster_file_limits::max_measurement_bytes >> 20U) +
                                          " MiB in all, the most phaze reads (docs/limits.md); keep the "
                                          "outputs' result lines only, or fewer runs");
  }
  const std::string& text = read.text;
  std::optional<nccl::collective> op;
  if (const auto name = m.text("collective")) {
    op = nccl::collective_from_name(*name);
    if (!op || *op == nccl::collective::other) {
      field_error(m.name("collective"),
                  "must be all_reduce, all_gather, reduce_scatter or send_recv, got \"" + *name + "\"");
    }
  }
  if (!op) {
    // Outputs before nccl-tests 2.16.7 do not name their program: take it from the file's name when that
    // names one (all_reduce_node1.txt), as docs/nccl-tests.md suggests naming them.
    const std::string stem = path.stem().string();
    for (const auto c : {nccl::collective::all_reduce, nccl::collective::all_gather,
                         nccl::collective::reduce_scatter, nccl::collective::send_recv}) {
      const std::string_view name = nccl::collective_name(c);
      if (stem.find(name) != std::string::npos ||
          (c == nccl::collective::send_recv && stem.find("sendrecv") != std::string::npos)) {
        op = c;
      }
    }
  }
  measured_run out;
  out.run = nccl::parse(text, path.string(), op);
  out.link = nccl::fit_link(out.run);
  return out;
}
}  // namespace detail::cluster_file

namespace detail::cluster_file {
/// "groups": the device groups, what each group's "device" named into out.group_devices.
inline std::vector<cluster::device_group> read_groups(const section& top, const std::filesystem::path& dir,
                                                      cluster_description& out) {
  using limits = cluster_file_limits;
  const nlohmann::json* groups = top.get("groups");
  if (groups == nullptr || !groups->is_array() || groups->empty()) {
    field_error("groups",
                "must be a non-empty array of device groups ([{\"device\": \"a100-80gb\", \"count\": 8}])" +
                    (groups == nullptr ? std::string{", and is missing"} : ", got " + shown(*groups)));
  }
  if (groups->size() > limits::max_groups) {
    field_error("groups", "holds " + std::to_string(groups->size()) + " groups; phaze accepts at most " +
                              std::to_string(limits::max_groups) +
                              " (merge groups of the same device and node)");
  }
  std::vector<cluster::device_group> built;
  std::int64_t devices = 0;
  for (std::size_t i = 0; i < groups->size(); ++i) {
    const nlohmann::json& gj = (*groups)[i];
    const std::string path = "groups[" + std::to_string(i) + "]";
    if (!gj.is_object())
      field_error(path, "must be an object ({\"device\": ..., \"count\": ...}), got " + shown(gj));
    const section g{gj, path};
    g.check_keys({"device", "count", "links", "comment"}, "a device group");
    const nlohmann::json* count = g.get("count");
    if (count == nullptr) field_error(g.name("count"), "is missing (how many devices of this type)");
    const auto n = integer(*count, g.name("count"), 1, cluster::cluster::max_devices);
    devices += n;
    if (devices > cluster::cluster::max_devices) {
      field_error(g.name("count"), "brings the cluster above " +
                                       std::to_string(cluster::cluster::max_devices) +
                                       " devices, the most phaze accepts");
    }
    std::string named;
    const device_and_node dn = group_device(g, dir, named);
    built.push_back({dn.device, static_cast<int>(n), dn.node});
    out.group_devices.push_back(named);
  }
  return built;
}

/// A measurement inside one node of group "group": checked against the group's nodes; the group it sets.
inline std::size_t run_group(const section& m, const nlohmann::json& group, const measured_run& r,
                             const std::vector<cluster::device_group>& built) {
  const auto g = static_cast<std::size_t>(
      integer(group, m.name("group"), 0, static_cast<std::int64_t>(built.size()) - 1));
  if (r.run.hosts.size() > 1) {
    field_error(m.name("nccl_tests"),
                "ran on " + std::to_string(r.run.hosts.size()) +
                    " hosts; a group's measurement runs inside one node (give \"nodes\" "
                    "for a run across nodes)");
  }
  if (r.run.ranks > built[g].node.devices) {
    field_error(m.name("nccl_tests"), "ran " + std::to_string(r.run.ranks) + " ranks, more than group " +
                                          std::to_string(g) + "'s nodes hold (" +
                                          std::to_string(built[g].node.devices) + ")");
  }
  return g;
}

/// A measurement across the nodes "nodes" lists: the list, checked against the run's hosts and ranks.
inline std::vector<int> run_nodes(const section& m, const nlohmann::json& nodes, const measured_run& r) {
  using limits = cluster_file_limits;
  if (!nodes.is_array() || nodes.size() < 2) {
    field_error(m.name("nodes"), "must list at least two nodes, got " + shown(nodes));
  }
  std::vector<int> list;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const auto n = static_cast<int>(integer(nodes[k], m.name("nodes") + "[" + std::to_string(k) + "]", 0,
                                            limits::max_matrix_endpoints - 1));
    if (std::find(list.begin(), list.end(), n) != list.end()) {
      field_error(m.name("nodes"), "lists node " + std::to_string(n) + " twice");
    }
    list.push_back(n);
  }
  if (!r.run.hosts.empty() && r.run.hosts.size() != list.size()) {
    field_error(m.name("nccl_tests"), "ran on " + std::to_string(r.run.hosts.size()) +
                                          " hosts but \"nodes\" lists " + std::to_string(list.size()));
  }
  if (r.run.ranks % static_cast<int>(list.size()) != 0) {
    field_error(m.name("nccl_tests"), "ran " + std::to_string(r.run.ranks) +
                                          " ranks, not the same number on each of the " +
                                          std::to_string(list.size()) + " nodes");
  }
  return list;
}

/// A run across nodes: the nodes it ran on and its fitted link.
using across_run = std::pair<std::vector<int>, measured_run>;

/// "measurements": a run inside one node of a group sets that group's node link in `built`; the runs across
/// nodes are returned, to be laid over the network.
inline std::vector<across_run> read_measurements(const section& top, const std::filesystem::path& dir,
                                                 std::vector<cluster::device_group>& built,
                                                 cluster_description& out) {
  using limits = cluster_file_limits;
  std::vector<across_run> across;
  std::uintmax_t read_so_far = 0;
  if (const nlohmann::json* ms = top.get("measurements")) {
    if (!ms->is_array()) {
      field_error("measurements",
                  "must be an array of {\"nccl_tests\": FILE, \"group\": G} or {\"nccl_tests\": FILE, "
                  "\"nodes\": [A, B]}, got " +
                      shown(*ms));
    }
    if (ms->size() > limits::max_groups) {
      field_error("measurements", "holds " + std::to_string(ms->size()) + " entries; phaze reads at most " +
                                      std::to_string(limits::max_groups));
    }
    for (std::size_t i = 0; i < ms->size(); ++i) {
      const std::string path = "measurements[" + std::to_string(i) + "]";
      if (!(*ms)[i].is_object()) field_error(path, "must be an object, got " + shown((*ms)[i]));
      const section m{(*ms)[i], path};
      m.check_keys({"nccl_tests", "group", "nodes", "collective", "comment"}, "a measurement");
      const nlohmann::json* group = m.get("group");
      const nlohmann::json* nodes = m.get("nodes");
      if ((group == nullptr) == (nodes == nullptr)) {
        field_error(path,
                    "must give either \"group\" (a run inside one node of that group) or \"nodes\" (a run "
                    "across those nodes)");
      }
      measured_run r;
      try {
        r = read_measurement(m, dir, read_so_far);
      } catch (const input_error& e) {
        const std::string what = e.what();
        throw input_error(what.starts_with("field '") ? what : m.name("nccl_tests") + ": " + what);
      }
      out.measurements.push_back(nccl::describe(r.run));
      // What the rest of the reader needs is the fitted link, the ranks and the hosts: the result rows
      // (up to nccl::max_rows per output) go, so the memory held stays one output's whatever the count.
      std::vector<nccl::row>{}.swap(r.run.rows);
      if (group != nullptr) {
        built[run_group(m, *group, r, built)].node.intra = r.link;
        continue;
      }
      across.emplace_back(run_nodes(m, *nodes, r), std::move(r));
    }
  }
  return across;
}

/// "collective_efficiency": each collective's share of a link's bandwidth (1 when not given).
inline cluster::collective_efficiency read_efficiency(const section& top) {
  cluster::collective_efficiency eff;
  if (const auto e = top.child("collective_efficiency")) {
    e->check_keys({"all_reduce", "all_gather", "reduce_scatter", "send_recv"}, "collective_efficiency");
    // A share of the link's bandwidth in [0.001, 1]: no real collective reaches less than a thousandth of
    // its link (docs/limits.md), and a smaller share gives times no plan can be compared by.
    const auto share = [&](std::string_view key) {
      const double x = e->fraction(key).value_or(1.0);
      if (x < 1e-3)
        field_error(e->name(key),
                    "must be a share from 0.001 to 1 of the link's bandwidth, got " + std::to_string(x));
      return x;
    };
    eff.all_reduce = share("all_reduce");
    eff.all_gather = share("all_gather");
    eff.reduce_scatter = share("reduce_scatter");
    eff.send_recv = share("send_recv");
  }
  return eff;
}

/// The measured link matrix while "network" and the runs across nodes are read: every entry from the
/// fabric first, then each one the file gives, with the node entries above what the two nodes' interfaces
/// carry counted and the largest named.
struct network_reader {
  const cluster::cluster& fabric;
  bool by_node = true;
  std::vector<cluster::node_info> nodes;
  int size = 0;
  cluster::link_matrix m;
  int above = 0;
  double worst_ratio = 1.0;
  std::string worst;

  network_reader(const cluster::cluster& f, bool nodes_between)
      : fabric(f),
        by_node(nodes_between),
        nodes(cluster::nodes_of(f)),
        size(nodes_between ? static_cast<int>(nodes.size()) : f.devices()) {}

  /// Every entry from the fabric: a node entry is what the whole node reaches towards the other, a device
  /// entry what a pair of devices reaches when every device sends (cluster::link_matrix).
  void fill_from_fabric() {
    m.endpoints = by_node ? cluster::link_matrix::between::nodes : cluster::link_matrix::between::devices;
    m.size = size;
    m.entries.resize(static_cast<std::size_t>(size) * static_cast<std::size_t>(size));
    for (int a = 0; a < size; ++a) {
      for (int b = 0; b < size; ++b) {
        if (a == b) continue;
        cluster::link l;
        if (by_node) {
          l = cluster::node_link(fabric, nodes, a, b);
        } else {
          const int na = fabric.node_at(a);
          const int nb = fabric.node_at(b);
          const cluster::node_spec& fa = fabric.group_at(a).node;
          const cluster::node_spec& fb = fabric.group_at(b).node;
          l = na == nb ? fa.intra
                       : cluster::link{std::min(fa.network_share(1), fb.network_share(1)),
                                       std::max(fa.nic.latency, fb.nic.latency)};
        }
        m.entries[static_cast<std::size_t>(a) * static_cast<std::size_t>(size) +
                  static_cast<std::size_t>(b)] = l;
      }
    }
  }

  /// Sets entry (a, b) from what `where` gives.
  void set(int a, int b, const link_fields& f, const std::string& where, cluster_description& out) {
    auto& e =
        m.entries[static_cast<std::size_t>(a) * static_cast<std::size_t>(size) + static_cast<std::size_t>(b)];
    if (f.bandwidth && by_node) {
      const double carried = std::min(nodes[static_cast<std::size_t>(a)].network.value(),
                                      nodes[static_cast<std::size_t>(b)].network.value());
      const double ratio = carried > 0.0 ? *f.bandwidth / carried : 1.0;
      if (ratio > 1.01) {
        ++above;
        if (ratio > worst_ratio) {
          worst_ratio = ratio;
          worst = fmt::format(
              "{} gives {:.4g} GB/s from node {} to node {}, {:.3g} times the {:.4g} GB/s "
              "their interfaces carry",
              where, *f.bandwidth / 1e9, a, b, ratio, carried / 1e9);
        }
      }
    }
    if (f.bandwidth) e.bandwidth = bytes_per_second{*f.bandwidth};  // as given: one convention
    if (f.latency) e.latency = seconds{*f.latency};
    if (!f.bandwidth && !f.latency) field_error(where, "gives neither gb_per_s/gbit_per_s nor latency_us");
    ++out.measured_links;
  }

  /// The latency "latency_us" gives entry (a, b) of a matrix, in seconds: one number for every entry, or
  /// the entry's own cell (none where it is null).
  [[nodiscard]] std::optional<double> matrix_latency(const section& net, const nlohmann::json& lat, int a,
                                                     int b) const {
    if (lat.is_number()) return link_latency(lat, net.name("latency_us"));
    const nlohmann::json& lrow = lat[static_cast<std::size_t>(a)];
    const std::string lname = net.name("latency_us") + "[" + std::to_string(a) + "]";
    if (!lrow.is_array() || lrow.size() != static_cast<std::size_t>(size))
      field_error(lname, "must be an array of " + std::to_string(size) + " numbers, got " + shown(lrow));
    const nlohmann::json& cell = lrow[static_cast<std::size_t>(b)];
    if (cell.is_null()) return std::nullopt;
    return link_latency(cell, lname + "[" + std::to_string(b) + "]");
  }

  /// "matrix_gb_per_s" (with "latency_us"): a whole matrix, null where the fabric's entry stays.
  void read_matrix(const section& net, cluster_description& out) {
    const nlohmann::json* lat = net.get("latency_us");
    if (const nlohmann::json* mat = net.get("matrix_gb_per_s")) {
      const std::string field = net.name("matrix_gb_per_s");
      if (!mat->is_array() || mat->size() != static_cast<std::size_t>(size)) {
        field_error(field, "must be an array of " + std::to_string(size) + " rows (one per " +
                               (by_node ? std::string{"node"} : std::string{"device"}) + "), got " +
                               shown(*mat));
      }
      if (lat != nullptr && !lat->is_number() &&
          !(lat->is_array() && lat->size() == static_cast<std::size_t>(size))) {
        field_error(net.name("latency_us"), "must be one number or an array of " + std::to_string(size) +
                                                " rows like matrix_gb_per_s, got " + shown(*lat));
      }
      for (int a = 0; a < size; ++a) {
        const nlohmann::json& row = (*mat)[static_cast<std::size_t>(a)];
        const std::string rname = field + "[" + std::to_string(a) + "]";
        if (!row.is_array() || row.size() != static_cast<std::size_t>(size)) {
          field_error(rname, "must be an array of " + std::to_string(size) +
                                 " numbers (null: from the fabric), got " + shown(row));
        }
        for (int b = 0; b < size; ++b) {
          const nlohmann::json& cell = row[static_cast<std::size_t>(b)];
          const std::string cname = rname + "[" + std::to_string(b) + "]";
          if (a == b || cell.is_null()) continue;
          link_fields f;
          f.bandwidth = link_bandwidth(cell, cname);
          if (lat != nullptr) f.latency = matrix_latency(net, *lat, a, b);
          set(a, b, f, cname, out);
        }
      }
    } else if (lat != nullptr) {
      field_error(
          net.name("latency_us"),
          "applies to matrix_gb_per_s, which is missing; give latency_us inside each entry of \"links\"");
    }
  }

  /// "links": entries one by one, both ways unless "both_ways" is false.
  void read_links(const section& net, const std::string& between, cluster_description& out) {
    if (const nlohmann::json* links = net.get("links")) {
      const std::string field = net.name("links");
      if (!links->is_array())
        field_error(field, "must be an array of {\"from\", \"to\", \"gb_per_s\", \"latency_us\"}, got " +
                               shown(*links));
      if (links->size() > cluster_file_limits::max_links) {
        field_error(field, "holds " + std::to_string(links->size()) + " entries; phaze accepts at most " +
                               std::to_string(cluster_file_limits::max_links));
      }
      for (std::size_t i = 0; i < links->size(); ++i) {
        const std::string ename = field + "[" + std::to_string(i) + "]";
        const nlohmann::json& ej = (*links)[i];
        if (!ej.is_object())
          field_error(ename,
                      "must be an object {\"from\", \"to\", \"gb_per_s\", \"latency_us\"}, got " + shown(ej));
        const section e{ej, ename};
        e.check_keys({"from", "to", "gb_per_s", "gbit_per_s", "latency_us", "both_ways", "comment"},
                     "a network link");
        const auto* from = e.get("from");
        const auto* to = e.get("to");
        if (from == nullptr || to == nullptr)
          field_error(e.name(from == nullptr ? "from" : "to"),
                      "is missing (a " + between.substr(0, between.size() - 1) + " number from 0)");
        const auto a = static_cast<int>(integer(*from, e.name("from"), 0, size - 1));
        const auto b = static_cast<int>(integer(*to, e.name("to"), 0, size - 1));
        if (a == b)
          field_error(ename, "links " + between.substr(0, between.size() - 1) + " " + std::to_string(a) +
                                 " to itself; give two different ones");
        bool both = true;
        if (const auto* bw = e.get("both_ways")) {
          if (!bw->is_boolean()) field_error(e.name("both_ways"), "must be true or false, got " + shown(*bw));
          both = bw->get<bool>();
        }
        const link_fields f = read_link(e);
        set(a, b, f, ename, out);
        if (both) set(b, a, f, ename, out);
      }
    }
  }

  /// The runs across nodes: a ring with r ranks in each node reached the fitted bus bandwidth, and a ring
  /// with k members in a node gets k of its n devices' shares of a node entry (cluster::link_matrix), so
  /// each entry is busbw / r x n.
  void lay_across(const std::vector<across_run>& across, cluster_description& out) {
    for (const auto& [list, r] : across) {
      if (!by_node) {
        field_error("measurements",
                    "across nodes need \"network\" between nodes (drop \"between\": \"devices\")");
      }
      const int per_node = r.run.ranks / static_cast<int>(list.size());
      for (const int a : list) {
        if (a >= size) {
          field_error("measurements", "name node " + std::to_string(a) + " but the cluster has " +
                                          std::to_string(size) + " nodes (numbered from 0)");
        }
      }
      for (const int a : list) {
        for (const int b : list) {
          if (a == b) continue;
          m.entries[static_cast<std::size_t>(a) * static_cast<std::size_t>(size) +
                    static_cast<std::size_t>(b)] = {
              r.link.bandwidth / static_cast<double>(per_node) *
                  static_cast<double>(nodes[static_cast<std::size_t>(a)].devices),
              r.link.latency};
          ++out.measured_links;
        }
      }
    }
  }

  /// The warning about node entries above what the two nodes' interfaces carry, when there are any.
  void warn(cluster_description& out) const {
    if (above > 0) {
      out.warnings.push_back(fmt::format(
          "{} node entr{} of \"network\" exceed what the nodes' interfaces carry ({}); a "
          "node entry is what the whole node reaches while all its devices send, at most its interfaces' "
          "total (nics_per_node x one interface): check the measurement, or give the nodes' interfaces in "
          "the group's \"links\"",
          above, above == 1 ? "y" : "ies", worst));
    }
  }
};

/// "network" and the runs across nodes laid over it: the measured link matrix, or none when the file gives
/// neither.
inline std::optional<cluster::link_matrix> read_network(const section& top, const cluster::cluster& fabric,
                                                        const std::vector<across_run>& across,
                                                        cluster_description& out) {
  using limits = cluster_file_limits;
  const auto given = top.child("network");
  if (!given && across.empty()) return std::nullopt;
  const nlohmann::json no_network = nlohmann::json::object();
  const section net_default{no_network, "network"};
  const section& net = given ? *given : net_default;
  net.check_keys({"between", "links", "matrix_gb_per_s", "latency_us"}, "network");
  const std::string between = net.text("between").value_or("nodes");
  if (between != "nodes" && between != "devices") {
    field_error(net.name("between"), "must be \"nodes\" or \"devices\", got \"" + between + "\"");
  }
  network_reader reader{fabric, between == "nodes"};
  if (reader.size > limits::max_matrix_endpoints) {
    field_error(net.name("between"), "gives links between " + std::to_string(reader.size) + " " + between +
                                         "; phaze accepts measured links between at most " +
                                         std::to_string(limits::max_matrix_endpoints) +
                                         " (give them between nodes)");
  }
  reader.fill_from_fabric();
  reader.read_matrix(net, out);
  reader.read_links(net, between, out);
  reader.warn(out);
  if (out.measured_links == 0 && across.empty()) {
    field_error("network",
                "gives no links; give \"links\" or \"matrix_gb_per_s\", or drop \"network\" to use the "
                "groups' fabric");
  }
  reader.lay_across(across, out);
  return std::move(reader.m);
}
}  // namespace detail::cluster_file

/// A cluster from its JSON form (docs/clusters.md). `dir` is the folder device file paths are relative to.
/// Read in steps: the header, the groups, the measurements (which set the groups' node links), the
/// collective efficiency, and the network over the fabric the groups make.
inline cluster_description cluster_from_json(const nlohmann::json& j, const std::filesystem::path& dir = {},
                                             std::string_view fallback_name = {}) {
  using namespace detail::cluster_file;
  if (!j.is_object()) {
    throw input_error("a cluster must be one JSON object ({\"groups\": [...]}), got " + shown(j));
  }
  const section top{j, ""};
  top.check_keys({"schema", "version", "name", "source", "comment", "groups", "collective_efficiency",
                  "network", "measurements"},
                 "a cluster");
  if (const auto schema = top.text("schema"); schema && *schema != "phaze.cluster") {
    field_error("schema", "must be \"phaze.cluster\", got \"" + *schema + "\"");
  }
  if (const auto* v = top.get("version")) {
    if (integer(*v, "version", 1, 1000) != 1)
      field_error("version", "must be 1 (the only version), got " + shown(*v));
  }
  cluster_description out;
  out.name = top.text("name").value_or(std::string{fallback_name});
  (void)top.text("comment");
  out.source = top.text("source").value_or("");

  std::vector<cluster::device_group> built = read_groups(top, dir, out);
  const std::vector<across_run> across = read_measurements(top, dir, built, out);
  const cluster::collective_efficiency eff = read_efficiency(top);
  // The fabric first: the cluster without measurements gives every default entry.
  std::optional<cluster::link_matrix> measured = read_network(top, cluster::cluster{built, eff}, across, out);
  out.value = cluster::cluster{std::move(built), eff, std::move(measured)};
  return out;
}

/// The cluster file at `path`: read (size and nesting bounded), parsed and checked; every error names the
/// file and the field. A file without "name" is named after its stem.
inline cluster_description read_cluster_file(const std::filesystem::path& path) {
  using limits = cluster_file_limits;
  const std::string where = "cluster file '" + path.string() + "'";
  const nlohmann::json json = read_json_file(
      path, {"cluster", limits::max_file_bytes,
             ", the most phaze reads; give links between nodes rather than devices", limits::max_nesting, 4});
  try {
    cluster_description d = cluster_from_json(json, path.parent_path(), path.stem().string());
    d.source = path.string() + (d.source.empty() ? std::string{} : " (" + d.source + ")");
    for (std::string& w : d.warnings) w = where + ": " + w;
    return d;
  } catch (const input_error& e) {
    throw input_error(where + ": " + e.what());
  }
}

/// The JSON form of a cluster: every group with its device inline (device_to_json), the efficiencies when
/// not 1, and a measured matrix in full (a node entry as the node's whole bandwidth, as files give it).
/// cluster_from_json reads it back to the same cluster.
inline nlohmann::ordered_json cluster_to_json(const cluster::cluster& c, std::string_view name = {}) {
  nlohmann::ordered_json j;
  j["schema"] = "phaze.cluster";
  j["version"] = 1;
  if (!name.empty()) j["name"] = std::string{name};
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const auto& g : c.groups()) {
    nlohmann::ordered_json gj;
    gj["device"] = device_to_json(g.device, g.node);
    gj["count"] = g.count;
    groups.push_back(gj);
  }
  j["groups"] = groups;
  const cluster::collective_efficiency& e = c.efficiency();
  if (e != cluster::collective_efficiency{}) {
    j["collective_efficiency"] = {{"all_reduce", e.all_reduce},
                                  {"all_gather", e.all_gather},
                                  {"reduce_scatter", e.reduce_scatter},
                                  {"send_recv", e.send_recv}};
  }
  if (const auto& m = c.measured()) {
    const bool by_node = m->endpoints == cluster::link_matrix::between::nodes;
    nlohmann::ordered_json bw = nlohmann::ordered_json::array();
    nlohmann::ordered_json lat = nlohmann::ordered_json::array();
    for (int a = 0; a < m->size; ++a) {
      nlohmann::ordered_json brow = nlohmann::ordered_json::array();
      nlohmann::ordered_json lrow = nlohmann::ordered_json::array();
      for (int b = 0; b < m->size; ++b) {
        if (a == b) {
          brow.push_back(nullptr);
          lrow.push_back(nullptr);
          continue;
        }
        const cluster::link& l = m->at(a, b);
        brow.push_back(l.bandwidth.value() / 1e9);
        lrow.push_back(l.latency.value() * 1e6);
      }
      bw.push_back(brow);
      lat.push_back(lrow);
    }
    j["network"] = {{"between", by_node ? "nodes" : "devices"}, {"matrix_gb_per_s", bw}, {"latency_us", lat}};
  }
  return j;
}

}  // namespace phaze::io
