// `phaze cluster FILE [--format table|json]`: what a cluster file describes — device groups and their
// nodes, totals, how the network is known, the bisection bandwidth and the slowest links between nodes
// (docs/clusters.md). Check a cluster file with it before planning on it.
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli.hpp"
#include "phaze/core/error.hpp"
#include "phaze/io/cluster_json.hpp"
#include "phaze/io/describe_cluster.hpp"
#include "phaze/io/device_source.hpp"

namespace phaze::cli {

namespace {
struct cluster_options {
  std::string file;
  std::string format = "table";
};

int run_cluster(const cluster_options& o) {
  const io::cluster_description d = io::read_cluster_file(std::filesystem::path{o.file});
  for (const std::string& w : d.warnings) fmt::print(stderr, "phaze: warning: {}\n", w);
  if (parse_format(o.format) == output_format::json) {
    print_json(io::schemas::cluster_description, io::describe_cluster_json(d));
  } else {
    print_text(io::describe_cluster_table(d));
  }
  return 0;
}
}  // namespace

void add_cluster_options(CLI::App& app, cluster_choice& choice) {
  app.add_option("--device", choice.device, "a preset name or a device JSON file (with --devices)");
  app.add_option("--devices", choice.devices, "number of devices of --device")->check(device_count);
  app.add_option("--devices-per-node", choice.devices_per_node, "devices per node (default: the device's)")
      ->check(device_count);
  app.add_option(
         "--cluster", choice.file,
         "a cluster JSON file (docs/clusters.md): device groups of one or more types, their nodes and "
         "measured links; instead of --device and --devices")
      ->check(non_empty_path);
}

chosen_cluster resolve_cluster(const cluster_choice& choice, std::string_view command) {
  if (!choice.file.empty()) {
    if (!choice.device.empty() || choice.devices != 0 || choice.devices_per_node != 0) {
      throw input_error(fmt::format(
          "phaze {}: give either --cluster FILE or --device and --devices, not both (the cluster file names "
          "its devices and nodes)",
          command));
    }
    io::cluster_description d = io::read_cluster_file(std::filesystem::path{choice.file});
    for (const std::string& w : d.warnings) fmt::print(stderr, "phaze: warning: {}\n", w);
    std::string label = d.name.empty() ? choice.file : d.name;
    std::string groups;
    for (const auto& g : d.value.groups()) {
      groups += fmt::format("{}{} x {}", groups.empty() ? "" : " + ", g.count, g.device.name.view());
    }
    return {std::move(d.value), fmt::format("{} ({})", label, groups)};
  }
  if (choice.device.empty() || choice.devices == 0) {
    throw input_error(fmt::format("phaze {} needs {} (or --cluster FILE); run 'phaze {} --help'", command,
                                  choice.device.empty() ? "--device" : "--devices", command));
  }
  const io::resolved_device d = io::resolve_device(choice.device);
  return {io::homogeneous_cluster(d, choice.devices, choice.devices_per_node),
          fmt::format("{} x {}", choice.devices, d.spec.name.view())};
}

command add_cluster_command(CLI::App& root) {
  auto o = std::make_shared<cluster_options>();
  CLI::App* parser = root.add_subcommand(
      "cluster", "Describe a cluster file: device groups, nodes, network, bisection and slowest links");
  parser->add_option("FILE", o->file, "a cluster JSON file (docs/clusters.md)")->required();
  add_format_option(*parser, o->format);
  return {parser, [o] { return run_cluster(*o); }};
}

}  // namespace phaze::cli
