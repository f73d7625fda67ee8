/// @file
/// `phaze cluster FILE`: what a cluster holds and offers — its device groups and their nodes, totals, how its
/// network is known, the bisection bandwidth and the slowest links between nodes — as a table or as JSON.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "phaze/cluster/analysis.hpp"
#include "phaze/cluster/cluster.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/io/cluster_json.hpp"
#include "phaze/io/table.hpp"

namespace phaze::io {

/// How many of the slowest node links a description lists.
inline constexpr std::size_t described_slow_links = 5;

namespace detail::describe_cluster {
inline std::string gbps(bytes_per_second b) {
  return fmt::format("{:.4g} GB/s", b.value() / 1e9);
}
inline std::string us(seconds s) {
  return fmt::format("{:.3g} us", s.value() * 1e6);
}
inline std::string network_kind(const cluster_description& d) {
  const auto& m = d.value.measured();
  if (!m) return "the groups' fabric (every node's interfaces into a non-blocking network)";
  const std::string what = m->endpoints == cluster::link_matrix::between::nodes ? "nodes" : "devices";
  return fmt::format("measured between {} ({} of {} links given, the rest from the groups' fabric)", what,
                     d.measured_links,
                     static_cast<std::size_t>(m->size) * static_cast<std::size_t>(m->size - 1));
}
}  // namespace detail::describe_cluster

/// The cluster as JSON: groups, totals, network, bisection and slowest links (bandwidths in bytes/s,
/// latencies in seconds), plus "definition", the cluster as a file cluster_from_json reads back.
inline nlohmann::ordered_json describe_cluster_json(const cluster_description& d) {
  using namespace detail::describe_cluster;
  const cluster::cluster& c = d.value;
  nlohmann::ordered_json j;
  j["schema"] = "phaze.cluster-description";
  j["version"] = 1;
  j["name"] = d.name;
  j["source"] = d.source;
  j["devices"] = c.devices();
  j["nodes"] = c.nodes();
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  double peak = 0.0;
  double hbm = 0.0;
  for (std::size_t i = 0; i < c.groups().size(); ++i) {
    const auto& g = c.groups()[i];
    const double group_peak = hw::peak_matrix_flops(g.device).value() * g.count;
    peak += group_peak;
    hbm += g.device.hbm.value() * g.count;
    groups.push_back({{"device", g.device.name.str()},
                      {"from", i < d.group_devices.size() ? d.group_devices[i] : std::string{}},
                      {"count", g.count},
                      {"nodes", (g.count + g.node.devices - 1) / g.node.devices},
                      {"devices_per_node", g.node.devices},
                      {"intra_node_bytes_per_s", g.node.intra.bandwidth.value()},
                      {"intra_node_latency_s", g.node.intra.latency.value()},
                      {"nics_per_node", g.node.nics},
                      {"nic_bytes_per_s", g.node.nic.bandwidth.value()},
                      {"nic_latency_s", g.node.nic.latency.value()},
                      {"peak_matrix_flops_per_s", group_peak},
                      {"hbm_bytes", g.device.hbm.value() * g.count}});
  }
  j["groups"] = groups;
  j["peak_matrix_flops_per_s"] = peak;
  j["hbm_bytes"] = hbm;
  j["network"] = network_kind(d);
  j["measurements"] = d.measurements;
  const cluster::bisection b = cluster::bisection_of(c);
  j["bisection_bytes_per_s"] = b.bandwidth.value();
  j["bisection_exact"] = b.exact;
  j["bisection_side"] = b.side;
  nlohmann::ordered_json slow = nlohmann::ordered_json::array();
  for (const auto& l : cluster::slowest_node_links(c, described_slow_links)) {
    slow.push_back({{"from_node", l.from},
                    {"to_node", l.to},
                    {"bytes_per_s", l.hop.bandwidth.value()},
                    {"latency_s", l.hop.latency.value()}});
  }
  j["slowest_node_links"] = slow;
  j["definition"] = cluster_to_json(c, d.name);
  return j;
}

/// The cluster as text for people.
inline std::string describe_cluster_table(const cluster_description& d) {
  using namespace detail::describe_cluster;
  const cluster::cluster& c = d.value;
  std::string out =
      fmt::format("cluster {}: {} devices in {} nodes\nsource: {}\n\n", d.name.empty() ? "(unnamed)" : d.name,
                  c.devices(), c.nodes(), d.source.empty() ? "-" : d.source);
  text_table t{{"group", "device", "count", "nodes", "per node", "in node", "NICs", "per NIC", "peak matrix",
                "HBM each"},
               {align::right, align::left, align::right, align::right, align::right, align::left,
                align::right, align::left, align::right, align::right}};
  double peak = 0.0;
  for (std::size_t i = 0; i < c.groups().size(); ++i) {
    const auto& g = c.groups()[i];
    const double group_peak = hw::peak_matrix_flops(g.device).value() * g.count;
    peak += group_peak;
    t.add_row({std::to_string(i), g.device.name.str(), std::to_string(g.count),
               std::to_string((g.count + g.node.devices - 1) / g.node.devices),
               std::to_string(g.node.devices), gbps(g.node.intra.bandwidth) + ", " + us(g.node.intra.latency),
               std::to_string(g.node.nics), gbps(g.node.nic.bandwidth) + ", " + us(g.node.nic.latency),
               fmt::format("{:.3g} PFLOP/s", group_peak / 1e15), format_bytes(g.device.hbm)});
  }
  out += t.render();
  out += fmt::format("\npeak matrix rate: {:.4g} PFLOP/s in all\n", peak / 1e15);
  out += "network: " + network_kind(d) + "\n";
  for (const auto& m : d.measurements) out += "measured: " + m + "\n";
  if (c.nodes() > 1) {
    const cluster::bisection b = cluster::bisection_of(c);
    // Runs of consecutive nodes as first-last: half of 131,072 nodes is one short line.
    std::string side;
    for (std::size_t i = 0; i < b.side.size();) {
      std::size_t j = i;
      while (j + 1 < b.side.size() && b.side[j + 1] == b.side[j] + 1) ++j;
      side += (side.empty() ? "" : ",") + std::to_string(b.side[i]);
      if (j > i) side += "-" + std::to_string(b.side[j]);
      i = j + 1;
    }
    out += fmt::format("bisection bandwidth: {} ({}; one side holds nodes {})\n", gbps(b.bandwidth),
                       b.exact ? "exact" : "estimate: more than 20 nodes", side);
    out += "slowest links between nodes (the whole node's bandwidth towards the other):\n";
    text_table s{{"from node", "to node", "bandwidth", "latency"},
                 {align::right, align::right, align::right, align::right}};
    for (const auto& l : cluster::slowest_node_links(c, described_slow_links)) {
      s.add_row({std::to_string(l.from), std::to_string(l.to), gbps(l.hop.bandwidth), us(l.hop.latency)});
    }
    out += s.render();
  }
  return out;
}

}  // namespace phaze::io
