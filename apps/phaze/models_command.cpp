// `phaze models [--format table|json]`: the zoo, one line per model.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "phaze/io/describe.hpp"

namespace phaze::cli {

namespace {
struct models_options {
  std::string format = "table";
};

int run_models(const models_options& options) {
  const auto models = io::describe_zoo();
  if (parse_format(options.format) == output_format::json) {
    auto list = nlohmann::ordered_json::array();
    for (const auto& m : models) list.push_back(nlohmann::ordered_json(m));
    print_json(io::schemas::models, nlohmann::ordered_json{{"models", list}});
  } else {
    print_text(io::to_table(models));
  }
  return 0;
}
}  // namespace

command add_models_command(CLI::App& root) {
  auto options = std::make_shared<models_options>();
  CLI::App* parser = root.add_subcommand("models", "List the models of the zoo (names usable as MODEL)");
  add_format_option(*parser, options->format);
  return {parser, [options] { return run_models(*options); }};
}

}  // namespace phaze::cli
