/// @file
/// Calibration files (schema `phaze.calibration`, written by `phaze calibrate`, read by `--calibration
/// FILE`), and the measured runs `phaze calibrate` reads (JSON lines of a phaze estimate's arguments and the
/// measured step time or a pasted log: io/training_log.hpp reads its iteration times).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "phaze/core/error.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/io/schema.hpp"
#include "phaze/train/calibration.hpp"

namespace phaze::io {

namespace schemas {
inline constexpr schema calibration{"phaze.calibration", 1};  ///< phaze calibrate --out FILE
}  // namespace schemas

namespace file_rules {
inline constexpr json_file_rules calibration{
    "calibration", 1U << 20U, "; give a file `phaze calibrate --out` wrote (docs/calibration.md)", 8, 3};
/// One line of a runs file (its lines are read one at a time, each bounded).
inline constexpr json_file_rules calibration_run{
    "calibration run", 1U << 20U, "; give {\"args\": [...], \"step_s\": SECONDS} (docs/calibration.md)", 8,
    2};
}  // namespace file_rules

/// The most runs `phaze calibrate` reads, and the most bytes of its inputs (docs/limits.md).
inline constexpr std::size_t max_calibration_runs = 256;
inline constexpr std::uintmax_t max_calibration_input_bytes = 64U << 20U;

/// The calibration file's document: the factors (all of them, fitted or not), which were fitted, and the fit.
inline nlohmann::ordered_json calibration_json(const train::calibration_fit& fit, const std::string& source) {
  nlohmann::ordered_json factors = nlohmann::ordered_json::object();
  for (const auto& f : train::calibration_factors()) factors[std::string{f.name}] = fit.factors.*(f.value);
  nlohmann::ordered_json j;
  j["factors"] = factors;
  j["fitted"] = fit.fitted;
  j["runs"] = fit.before.size();
  j["source"] = source;
  j["mean_abs_error_before"] = train::calibration_fit::mean_abs(fit.before);
  j["mean_abs_error_after"] = train::calibration_fit::mean_abs(fit.after);
  if (!fit.leave_one_out.empty())
    j["mean_abs_error_leave_one_out"] = train::calibration_fit::mean_abs(fit.leave_one_out);
  return with_schema(schemas::calibration, j);
}

/// A calibration from a parsed calibration file: `schema` must be phaze.calibration, `factors` an object of
/// known factor names to numbers within their bounds (a factor left out keeps its neutral value); other
/// fields are ignored. input_error naming `where` and the field otherwise.
inline train::calibration calibration_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw input_error(where + " must hold a JSON object (schema phaze.calibration)");
  const auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_string() || *schema != schemas::calibration.name) {
    throw input_error(where +
                      ": field 'schema' must be \"phaze.calibration\"; give a file `phaze calibrate "
                      "--out` wrote");
  }
  const auto version = j.find("version");
  if (version != j.end() &&
      !(version->is_number_integer() && version->get<long long>() == schemas::calibration.version)) {
    throw input_error(where + ": field 'version' must be 1 (the calibration files this phaze reads), got " +
                      version->dump());
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    static constexpr std::string_view known[] = {"schema",
                                                 "version",
                                                 "factors",
                                                 "fitted",
                                                 "runs",
                                                 "source",
                                                 "mean_abs_error_before",
                                                 "mean_abs_error_after",
                                                 "mean_abs_error_leave_one_out",
                                                 "per_run"};
    if (std::find(std::begin(known), std::end(known), it.key()) == std::end(known)) {
      throw input_error(where + ": unknown field '" + it.key() +
                        "'; a calibration file has schema, version, "
                        "factors and what phaze calibrate reports of its fit");
    }
  }
  const auto factors = j.find("factors");
  if (factors == j.end() || !factors->is_object() || factors->empty())
    throw input_error(where + ": field 'factors' is missing or empty (an object of factor names to numbers)");
  train::calibration c;
  for (auto it = factors->begin(); it != factors->end(); ++it) {
    const train::calibration_factor* f = train::find_calibration_factor(it.key());
    if (f == nullptr) {
      std::string names;
      for (const auto& g : train::calibration_factors())
        names += (names.empty() ? "" : ", ") + std::string{g.name};
      throw input_error(where + ": unknown factor 'factors." + it.key() + "'; the factors are " + names);
    }
    if (!it->is_number()) {
      throw input_error(where + ": field 'factors." + it.key() + "' must be a number, got " + it->dump());
    }
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < f->least || v > f->most) {
      throw input_error(fmt::format("{}: field 'factors.{}' must lie in [{:g}, {:g}], got {:g}", where,
                                    it.key(), f->least, f->most, v));
    }
    c.*(f->value) = v;
  }
  return c;
}

/// The calibration file at `path` (bounded read, then calibration_from_json).
inline train::calibration read_calibration(const std::filesystem::path& path) {
  return calibration_from_json(read_json_file(path, file_rules::calibration),
                               "calibration file '" + path.string() + "'");
}

/// One measured run of a runs file: the arguments of a `phaze estimate` (without the command name) and the
/// measured seconds per iteration, or a pasted log whose iteration times give it.
struct calibration_measurement {
  std::vector<std::string> args;
  std::optional<double> step_s;
  std::string log;  ///< pasted log lines (when step_s is absent)
  std::string label;
};

/// The run of one line of a runs file: {"args": [strings], "step_s": number > 0} or {"args": [...], "log":
/// "pasted lines"}, optionally "label"; `where` names the line in messages.
inline calibration_measurement calibration_measurement_from_json(const nlohmann::json& j,
                                                                 const std::string& where) {
  if (!j.is_object())
    throw input_error(where + " must be a JSON object {\"args\": [...], \"step_s\": SECONDS}");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "args" && it.key() != "step_s" && it.key() != "log" && it.key() != "label") {
      throw input_error(where + ": unknown field '" + it.key() +
                        "'; a run has args, step_s or log, and label");
    }
  }
  calibration_measurement r;
  const auto args = j.find("args");
  if (args == j.end() || !args->is_array() || args->empty())
    throw input_error(where +
                      ": field 'args' must be a non-empty array of the arguments of a phaze estimate");
  for (const auto& a : *args) {
    if (!a.is_string()) throw input_error(where + ": field 'args' must hold strings, got " + a.dump());
    r.args.push_back(a.get<std::string>());
  }
  const auto step = j.find("step_s");
  const auto log = j.find("log");
  if ((step == j.end()) == (log == j.end()))
    throw input_error(where + ": give exactly one of 'step_s' (measured seconds per iteration) and 'log'");
  if (step != j.end()) {
    if (!step->is_number() || !std::isfinite(step->get<double>()) || !(step->get<double>() > 0.0) ||
        step->get<double>() > 1e6) {
      throw input_error(where + ": field 'step_s' must be a positive number of seconds (at most 1e6), got " +
                        step->dump());
    }
    r.step_s = step->get<double>();
  } else {
    if (!log->is_string()) throw input_error(where + ": field 'log' must be a string of pasted log lines");
    r.log = log->get<std::string>();
  }
  if (const auto label = j.find("label"); label != j.end()) {
    if (!label->is_string()) throw input_error(where + ": field 'label' must be a string");
    r.label = label->get<std::string>();
  }
  return r;
}

}  // namespace phaze::io
