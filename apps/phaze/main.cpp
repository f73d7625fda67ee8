// The `phaze` command-line program (docs/cli.md). Thin: it parses arguments, calls the library and
// prints. Each command lives in its own file (<name>_command.cpp); this file wires them up and turns errors
// into messages and exit codes: bad input or usage 2, no feasible plan 3, anything unexpected 1.
#include <array>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "cli.hpp"
#include "option_words.hpp"
#include "phaze/core/error.hpp"

#ifndef PHAZE_VERSION
#define PHAZE_VERSION "unknown"
#endif

namespace {

using phaze::cli::command;

/// Every command, in the order `phaze --help` lists them.
// One command per line, so adding a command adds one line.
// clang-format off
constexpr std::array command_table{
    &phaze::cli::add_models_command,
    &phaze::cli::add_describe_command,
    &phaze::cli::add_devices_command,
    &phaze::cli::add_cluster_command,
    &phaze::cli::add_schedule_command,
    &phaze::cli::add_estimate_command,
    &phaze::cli::add_calibrate_command,
    &phaze::cli::add_plan_command,
    &phaze::cli::add_search_command,
};
// clang-format on

constexpr int usage_exit = static_cast<int>(phaze::exit_code::bad_input);

void print_error(std::string_view message) {
  fmt::print(stderr, "phaze: error: {}\n", message);
}

/// The help hint after a usage error: the chosen command's help when there is one.
std::string help_hint(const CLI::App& app) {
  const auto chosen = app.get_subcommands();
  const std::string scope = chosen.empty() ? std::string{"phaze"} : "phaze " + chosen.front()->get_name();
  return fmt::format("run '{} --help' for usage", scope);
}

/// The first argument that is not an option names the command; a missing or unknown one gets a message
/// listing the commands (CLI11 would only say that a subcommand is required or an argument unexpected).
bool check_command_name(int argc, char** argv, const std::vector<command>& commands) {
  std::string names;
  for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c.parser->get_name();
  if (argc <= 1) {
    print_error(fmt::format("no command given; the commands are: {}", names));
    fmt::print(stderr, "run 'phaze --help' for usage\n");
    return false;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg.starts_with('-')) continue;
    for (const auto& c : commands) {
      if (c.parser->check_name(std::string{arg})) return true;
    }
    print_error(fmt::format("unknown command '{}'; the commands are: {}", arg, names));
    fmt::print(stderr, "run 'phaze --help' for usage\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "phaze: which accelerator, and which way of spreading a training job over many of them, gives the most "
      "training throughput",
      "phaze"};
  app.set_version_flag("--version", std::string{"phaze "} + PHAZE_VERSION);
  app.require_subcommand(1);

  phaze::cli::command_line().assign(argv, argv + argc);
  std::vector<command> commands;
  for (const auto add : command_table) commands.push_back(add(app));

  try {
    if (!check_command_name(argc, argv, commands)) return usage_exit;
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
      // CLI11 checks required options before it looks for arguments it does not know; a misspelled option
      // is the mistake to name first (adding the "missing" one would not fix it).
      const std::vector<std::string> unknown = app.remaining(true);
      if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !unknown.empty()) {
        std::string list;
        for (const auto& a : unknown) list += (list.empty() ? "" : " ") + a;
        print_error(fmt::format("The following argument{} not expected: {}",
                                unknown.size() > 1 ? "s were" : " was", list));
        fmt::print(stderr, "{}\n", help_hint(app));
        return usage_exit;
      }
      print_error(e.what());
      fmt::print(stderr, "{}\n", help_hint(app));
      return usage_exit;
    }
    for (const auto& c : commands) {
      if (c.parser->parsed()) return c.run();
    }
    print_error("no command given");
    fmt::print(stderr, "{}\n", help_hint(app));
    return usage_exit;
  } catch (const phaze::error& e) {
    print_error(phaze::cli::in_option_words(e.what()));
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    fmt::print(stderr, "phaze: internal error: {}\n", e.what());
    return static_cast<int>(phaze::exit_code::internal_error);
  }
}
