// `phaze cluster FILE [--format table|json]`: what a cluster file describes — device groups and their
// nodes, totals, how the network is known, the bisection bandwidth and the slowest links between nodes
// (docs/clusters.md). Check a cluster file with it before planning on it.
#include <filesystem>
#include <memory>
#include <string>

#include "cli.hpp"
#include "phaze/io/cluster_json.hpp"
#include "phaze/io/describe_cluster.hpp"

namespace phaze::cli {

namespace {
struct cluster_options {
  std::string file;
  std::string format = "table";
};

int run_cluster(const cluster_options& o) {
  const io::cluster_description d = io::read_cluster_file(std::filesystem::path{o.file});
  if (parse_format(o.format) == output_format::json) {
    print_json(io::describe_cluster_json(d));
  } else {
    print_text(io::describe_cluster_table(d));
  }
  return 0;
}
}  // namespace

command add_cluster_command(CLI::App& root) {
  auto o = std::make_shared<cluster_options>();
  CLI::App* parser = root.add_subcommand(
      "cluster", "Describe a cluster file: device groups, nodes, network, bisection and slowest links");
  parser->add_option("FILE", o->file, "a cluster JSON file (docs/clusters.md)")->required();
  add_format_option(*parser, o->format);
  return {parser, [o] { return run_cluster(*o); }};
}

}  // namespace phaze::cli
