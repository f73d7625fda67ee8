// `phaze devices [DEV] [--format table|json]`: the device presets, one line each; or one device (a preset
// name or a device JSON file) in full, so users can check what a file loads as.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "phaze/io/describe_device.hpp"
#include "phaze/io/device_json.hpp"
#include "phaze/io/device_source.hpp"

namespace phaze::cli {

namespace {
struct devices_options {
  std::string device;  // empty: list every preset
  std::string format = "table";
};

int run_devices(const devices_options& options) {
  const bool json = parse_format(options.format) == output_format::json;
  if (options.device.empty()) {
    const auto devices = io::describe_presets();
    if (json) {
      auto list = nlohmann::ordered_json::array();
      for (const auto& d : devices) list.push_back(nlohmann::ordered_json(d));
      print_json(io::schemas::devices, nlohmann::ordered_json{{"devices", list}});
    } else {
      print_text(io::to_table(devices));
    }
    return 0;
  }
  const auto resolved = io::resolve_device(options.device);
  const auto summary = io::describe_device(resolved.spec, resolved.node, resolved.source);
  if (json) {
    nlohmann::ordered_json j(summary);
    // The device file that gives them.
    j["definition"] = io::with_schema(io::schemas::device, io::device_to_json(resolved.spec, resolved.node));
    print_json(io::schemas::device_description, j);
  } else {
    print_text(io::to_table(summary));
  }
  return 0;
}
}  // namespace

command add_devices_command(CLI::App& root) {
  auto options = std::make_shared<devices_options>();
  CLI::App* parser = root.add_subcommand(
      "devices", "List the device presets (names usable as DEV), or describe one device: a preset or a file");
  parser->add_option("DEV", options->device,
                     "a preset name or a path to a device JSON file (docs/devices.md); omit it to list the "
                     "presets");
  add_format_option(*parser, options->format);
  return {parser, [options] { return run_devices(*options); }};
}

}  // namespace phaze::cli
