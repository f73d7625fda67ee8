/// @file
/// The iteration times of pasted training logs (Megatron-LM, NeMo, torchtitan), for `phaze calibrate`.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/core/error.hpp"

namespace phaze::io {

/// What a training log says of one iteration: its seconds, or the tokens per second per device it reached
/// (torchtitan reports only that; the plan's tokens per device turn it into seconds).
struct logged_iteration {
  double seconds = 0.0;        ///< 0 when the line gave a rate instead
  double tokens_per_s = 0.0;   ///< per device; 0 when the line gave seconds
};

/// The iterations a pasted log reports, in order, from the lines that hold:
/// - Megatron-LM: "elapsed time per iteration (ms): 1234.5";
/// - NeMo / PyTorch Lightning: "train_step_timing in s=1.23" (or "train_step_timing=1.23");
/// - torchtitan: "tps: 6,283" (tokens per second per device; older releases "wps: 6,283").
/// Other lines are skipped.
inline std::vector<logged_iteration> logged_iterations(std::string_view log) {
  static const std::regex megatron{R"(elapsed time per iteration \(ms\):\s*([0-9]+(?:\.[0-9]*)?))"};
  static const std::regex nemo{R"(train_step_tim(?:ing|e)(?: in s)?\s*=\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?))"};
  static const std::regex titan{R"(\b(?:tps|wps):\s*([0-9][0-9,]*(?:\.[0-9]*)?))"};
  std::vector<logged_iteration> out;
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    const std::string line{log.substr(start, end - start)};
    start = end + 1;
    std::smatch m;
    if (std::regex_search(line, m, megatron)) {
      out.push_back({std::stod(m[1].str()) / 1000.0, 0.0});
    } else if (std::regex_search(line, m, nemo)) {
      out.push_back({std::stod(m[1].str()), 0.0});
    } else if (std::regex_search(line, m, titan)) {
      std::string digits = m[1].str();
      digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
      out.push_back({0.0, std::stod(digits)});
    }
  }
  return out;
}

/// The steady-state seconds per iteration of a log: the median of its iterations after the first ones
/// (warm-up: the first two are dropped when there are more than three), rates turned into seconds with
/// `tokens_per_device` (the plan's tokens per iteration per device). input_error when the log reports none.
inline double logged_step_seconds(std::string_view log, double tokens_per_device, const std::string& where) {
  std::vector<logged_iteration> its = logged_iterations(log);
  if (its.empty()) {
    throw input_error(where + " reports no iteration time: give lines of a Megatron-LM log (\"elapsed time per "
                              "iteration (ms): ...\"), a NeMo log (\"train_step_timing in s=...\") or a "
                              "torchtitan log (\"tps: ...\")");
  }
  if (its.size() > 3) its.erase(its.begin(), its.begin() + 2);
  std::vector<double> seconds;
  for (const auto& i : its) {
    const double s = i.seconds > 0.0 ? i.seconds : (i.tokens_per_s > 0.0 ? tokens_per_device / i.tokens_per_s : 0.0);
    if (s > 0.0 && std::isfinite(s)) seconds.push_back(s);
  }
  if (seconds.empty()) throw input_error(where + " reports only zero iteration times");
  std::sort(seconds.begin(), seconds.end());
  const std::size_t n = seconds.size();
  return n % 2 == 1 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
}

}  // namespace phaze::io
