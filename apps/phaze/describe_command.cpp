// `phaze describe MODEL [--seq S] [--vocab V] [--format table|json]`: parameters, FLOPs per token,
// activation memory and layers of one model.
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "phaze/io/describe.hpp"
#include "phaze/io/model_source.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/zoo.hpp"

namespace phaze::cli {

namespace {
struct describe_options {
  std::string model;
  std::int64_t sequence = 0;  // 0: the model's own
  std::int64_t vocab = 0;     // 0: the model's own
  std::string format = "table";
};

int run_describe(const describe_options& options) {
  model::model m = io::load_model(options.model);
  if (options.sequence > 0) m = model::with_sequence(m, options.sequence);
  if (options.vocab > 0) m = model::with_vocab(m, options.vocab);
  const auto entry = zoo::find(options.model);
  const auto composite = zoo::find_composite(options.model);
  const std::string source = entry       ? std::string{entry->source}
                             : composite ? std::string{composite->source}
                                         : options.model;
  const auto summary = io::describe(m, source);
  if (parse_format(options.format) == output_format::json) {
    print_json(io::schemas::model_description, nlohmann::ordered_json(summary));
  } else {
    print_text(io::to_table(summary));
  }
  return 0;
}
}  // namespace

command add_describe_command(CLI::App& root) {
  auto options = std::make_shared<describe_options>();
  CLI::App* parser = root.add_subcommand(
      "describe", "Describe a model: parameters, FLOPs per token, activation memory per layer, its layers");
  parser
      ->add_option("MODEL", options->model,
                   "a zoo name (see `phaze models`) or a path to a HuggingFace config.json")
      ->required();
  parser->add_option("--seq", options->sequence, "train at this sequence length instead of the model's own")
      ->check(sequence_length);
  parser->add_option("--vocab", options->vocab, "use this vocabulary size instead of the model's own")
      ->check(vocabulary_size);
  add_format_option(*parser, options->format);
  return {parser, [options] { return run_describe(*options); }};
}

}  // namespace phaze::cli
