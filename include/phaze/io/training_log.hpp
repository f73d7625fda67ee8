/// @file
/// The iteration times of pasted training logs (Megatron-LM, NeMo, torchtitan), for `phaze calibrate`. The
/// lines are scanned by hand (a literal prefix, then a number read by std::from_chars): linear in the text,
/// whatever it holds.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "phaze/core/error.hpp"

namespace phaze::io {

/// What a training log says of one iteration: its seconds, or the tokens per second per device it reached
/// (torchtitan reports only that; the plan's tokens per device turn it into seconds).
struct logged_iteration {
  double seconds = 0.0;       ///< 0 when the line gave a rate instead
  double tokens_per_s = 0.0;  ///< per device; 0 when the line gave seconds
};

/// The longest iteration a log may report, in seconds (as a runs file's step_s; docs/limits.md).
inline constexpr double max_logged_step_s = 1e6;

namespace detail::training_log {

/// `line` without ANSI escape sequences (ESC '[' ... a letter): torchtitan colours its fields.
inline std::string without_escapes(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < line.size() && !((line[j] >= 'A' && line[j] <= 'Z') || (line[j] >= 'a' && line[j] <= 'z')))
        ++j;
      i = j;
      continue;
    }
    out += line[i];
  }
  return out;
}

/// The number at the start of `text` after blanks (with `commas`, digits grouped by commas as torchtitan
/// prints them), or a negative value when there is none. input_error naming `where` when it is out of the
/// range of a double.
inline double number_at(std::string_view text, bool commas, const std::string& where) {
  std::size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  std::string digits;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (commas && c == ',') continue;
    if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' ||
        ((c == '-' || c == '+') && !digits.empty() && (digits.back() == 'e' || digits.back() == 'E'))) {
      digits += c;
      continue;
    }
    break;
  }
  if (digits.empty() || digits.front() < '0' || digits.front() > '9') return -1.0;
  double value = 0.0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error == std::errc::result_out_of_range || !std::isfinite(value)) {
    throw input_error(where + ": the number '" + digits.substr(0, 40) + "' is out of range");
  }
  if (error != std::errc{}) return -1.0;
  (void)end;
  return value;
}

/// Whether `name` occurs in `line` at `at` as a word of its own (not the end of a longer word).
inline bool word_at(const std::string& line, std::size_t at) {
  if (at == 0) return true;
  const char c = line[at - 1];
  return !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
}

}  // namespace detail::training_log

/// The iterations a pasted log reports, in order, from the lines that hold:
/// - Megatron-LM: "elapsed time per iteration (ms): 1234.5";
/// - NeMo / PyTorch Lightning: "train_step_timing in s=1.23" (or "train_step_timing=1.23",
/// "train_step_time=");
/// - torchtitan: "tps: 6,283" (tokens per second per device; older releases "wps: 6,283"), colours or not.
/// Other lines are skipped. A number out of a double's range is input_error naming the line (`where` names
/// the log).
inline std::vector<logged_iteration> logged_iterations(std::string_view log,
                                                       const std::string& where = "the log") {
  namespace d = detail::training_log;
  std::vector<logged_iteration> out;
  std::size_t start = 0;
  std::size_t line_no = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    const std::string line = d::without_escapes(log.substr(start, end - start));
    start = end + 1;
    ++line_no;
    const std::string at = where + ", line " + std::to_string(line_no);
    const std::string_view text{line};
    if (const auto p = text.find("elapsed time per iteration (ms):"); p != std::string_view::npos) {
      const double ms = d::number_at(text.substr(p + 32), false, at);
      if (ms >= 0.0) out.push_back({ms / 1000.0, 0.0});
      continue;
    }
    bool found = false;
    for (const std::string_view key : {"train_step_timing in s=", "train_step_timing=", "train_step_time="}) {
      if (const auto p = text.find(key); p != std::string_view::npos) {
        const double s = d::number_at(text.substr(p + key.size()), false, at);
        if (s >= 0.0) out.push_back({s, 0.0});
        found = true;
        break;
      }
    }
    if (found) continue;
    for (const std::string_view key : {"tps:", "wps:"}) {
      const auto p = line.find(key);
      if (p == std::string::npos || !d::word_at(line, p)) continue;
      const double rate = d::number_at(text.substr(p + key.size()), true, at);
      if (rate >= 0.0) out.push_back({0.0, rate});
      break;
    }
  }
  return out;
}

/// The steady-state seconds per iteration of a log: the median of its iterations after the first ones
/// (warm-up: the first two are dropped when there are more than three), rates turned into seconds with
/// `tokens_per_device` (the plan's tokens per iteration per device). input_error when the log reports none,
/// or an iteration of 0 or more than max_logged_step_s seconds.
inline double logged_step_seconds(std::string_view log, double tokens_per_device, const std::string& where) {
  std::vector<logged_iteration> its = logged_iterations(log, where);
  if (its.empty()) {
    throw input_error(where +
                      " reports no iteration time: give lines of a Megatron-LM log (\"elapsed time per "
                      "iteration (ms): ...\"), a NeMo log (\"train_step_timing in s=...\") or a "
                      "torchtitan log (\"tps: ...\")");
  }
  if (its.size() > 3) its.erase(its.begin(), its.begin() + 2);
  std::vector<double> seconds;
  for (const auto& i : its) {
    const double s =
        i.seconds > 0.0 ? i.seconds : (i.tokens_per_s > 0.0 ? tokens_per_device / i.tokens_per_s : 0.0);
    if (!(s > 0.0) || !std::isfinite(s) || s > max_logged_step_s) {
      throw input_error(
          where + " reports an iteration of " + std::to_string(s) +
          " s; an iteration time must lie in (0, 1e6] seconds (a tokens-per-second rate above 0)");
    }
    seconds.push_back(s);
  }
  std::sort(seconds.begin(), seconds.end());
  const std::size_t n = seconds.size();
  return n % 2 == 1 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
}

}  // namespace phaze::io
