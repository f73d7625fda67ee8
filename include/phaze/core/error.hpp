/// @file
/// The errors phaze reports to users, each tied to an exit code of docs/cli.md ("Exit codes and errors").
#pragma once

#include <stdexcept>
#include <string>

namespace phaze {

/// Exit codes of the `phaze` program (docs/cli.md).
enum class exit_code : int {
  success = 0,
  internal_error = 1,
  bad_input = 2,   ///< bad input or usage: the message says what and how to fix it
  infeasible = 3,  ///< no plan fits: the message gives the smallest need found and the capacity
};

/// Base of every error phaze throws on purpose. The message speaks to the user about their input.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& message, exit_code code = exit_code::internal_error)
      : std::runtime_error(message), code_(code) {}
  [[nodiscard]] exit_code code() const noexcept { return code_; }

 private:
  exit_code code_;
};

/// Bad input: a malformed file, a missing or nonsensical field, an unknown name, an impossible option.
class input_error : public error {
 public:
  explicit input_error(const std::string& message) : error(message, exit_code::bad_input) {}
};

/// No feasible plan exists for the given cluster and knobs.
class infeasible_error : public error {
 public:
  explicit infeasible_error(const std::string& message) : error(message, exit_code::infeasible) {}
};

}  // namespace phaze
