// Reading the trial logs AMP's code writes (Li et al., NeurIPS 2022; github.com/DachengLi1/AMP,
// src/results/): a model line, `gbs:N`, AMP's ranked predictions, then one line per real trial,
//   Simulating result: None, [0, 9, 15, 21, 30], 1, {'mp_deg': tensor([1.]), 'dp_deg': tensor([4.]),
//   'pp_deg': tensor([4.])}, with p_cost: tensor([1.2841]), r_cost: 1.2
// (one line in the file; the trial's "Simulating result" may follow other text on the same line). A trial
// line that does not parse is an error naming the file and line, never skipped.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <istream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace phaze::testing::amp {

/// One real trial of AMP's log.
struct trial {
  std::size_t line = 0;   ///< 1-based line of the log
  std::vector<int> cuts;  ///< layer cut points: stage k holds AMP's layer entries [cuts[k], cuts[k + 1])
  std::int64_t microbatch = 0;
  int tp = 0;  ///< AMP's mp_deg
  int dp = 0;
  int pp = 0;
  double amp_predicted_s = 0.0;      ///< AMP's cost model (p_cost), seconds per iteration
  std::optional<double> measured_s;  ///< r_cost; empty when the real run failed (`inf`)
  [[nodiscard]] bool ran() const { return measured_s.has_value(); }
};

/// A whole log: the global batch of its `gbs:` line and its trials in the order they ran.
struct trial_log {
  std::int64_t global_batch = 0;
  std::vector<trial> trials;
};

/// The error for a line of an AMP log that does not have the expected form.
class parse_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// A cursor over one trial line; every expect_* throws parse_error naming the file, line and what it wanted.
class line_reader {
 public:
  line_reader(std::string_view text, std::string_view source, std::size_t line)
      : text_(text), source_(source), line_(line) {}

  void expect(std::string_view literal) {
    if (text_.substr(pos_, literal.size()) != literal) fail("expected \"" + std::string{literal} + "\"");
    pos_ += literal.size();
  }
  bool accept(std::string_view literal) {
    if (text_.substr(pos_, literal.size()) != literal) return false;
    pos_ += literal.size();
    return true;
  }
  void skip_spaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  std::int64_t expect_integer() {
    std::int64_t v = 0;
    const char* first = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(first, text_.data() + text_.size(), v);
    if (ec != std::errc{} || end == first) fail("expected an integer");
    pos_ += static_cast<std::size_t>(end - first);
    return v;
  }
  double expect_number() {
    double v = 0.0;
    const char* first = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(first, text_.data() + text_.size(), v);
    if (ec != std::errc{} || end == first) fail("expected a number");
    pos_ += static_cast<std::size_t>(end - first);
    return v;
  }
  /// `tensor([4.])`: a degree AMP prints as a one-element float tensor; it must be a whole number.
  int expect_degree() {
    expect("tensor([");
    const double v = expect_number();
    expect("])");
    if (v < 1.0 || v != static_cast<double>(static_cast<int>(v)))
      fail("expected a whole degree of at least 1");
    return static_cast<int>(v);
  }
  void expect_end() {
    skip_spaces();
    if (pos_ != text_.size()) fail("unexpected text after the trial");
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw parse_error(std::string{source_} + ":" + std::to_string(line_) + ": " + what + " at column " +
                      std::to_string(pos_ + 1) + " of the trial: " + std::string{text_});
  }

 private:
  std::string_view text_;
  std::string_view source_;
  std::size_t line_;
  std::size_t pos_ = 0;
};

inline constexpr std::string_view trial_marker = "Simulating result:";

/// One trial from the text that starts with "Simulating result:".
inline trial parse_trial(std::string_view text, std::string_view source, std::size_t line) {
  line_reader r{text, source, line};
  trial t;
  t.line = line;
  r.expect(trial_marker);
  r.expect(" None, [");  // the rank map: None (AMP's default device order) in the logs read here
  do {
    r.skip_spaces();
    t.cuts.push_back(static_cast<int>(r.expect_integer()));
  } while (r.accept(","));
  r.expect("], ");
  t.microbatch = r.expect_integer();
  r.expect(", {'mp_deg': ");
  t.tp = r.expect_degree();
  r.expect(", 'dp_deg': ");
  t.dp = r.expect_degree();
  r.expect(", 'pp_deg': ");
  t.pp = r.expect_degree();
  r.expect("}, with p_cost: tensor([");
  t.amp_predicted_s = r.expect_number();
  r.expect("]), r_cost: ");
  if (!r.accept("inf")) t.measured_s = r.expect_number();
  r.expect_end();

  if (t.microbatch < 1) r.fail("the microbatch must be at least 1");
  if (t.amp_predicted_s <= 0.0 || (t.measured_s && *t.measured_s <= 0.0)) r.fail("times must be positive");
  if (t.cuts.size() != static_cast<std::size_t>(t.pp) + 1) {
    r.fail("expected pp + 1 = " + std::to_string(t.pp + 1) + " cut points, found " +
           std::to_string(t.cuts.size()));
  }
  if (t.cuts.front() != 0) r.fail("the first cut point must be 0");
  for (std::size_t i = 1; i < t.cuts.size(); ++i)
    if (t.cuts[i] <= t.cuts[i - 1]) r.fail("cut points must increase");
  return t;
}

}  // namespace detail

/// Every trial of a log; `source` names the log in errors. Throws parse_error for a trial line (one holding
/// "Simulating result:") that does not parse, for a missing or malformed `gbs:` line, and for a log
/// without trials.
inline trial_log parse_log(std::istream& in, std::string_view source) {
  trial_log log;
  std::string text;
  std::size_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.rfind("gbs:", 0) == 0) {
      detail::line_reader r{text, source, line};
      r.expect("gbs:");
      log.global_batch = r.expect_integer();
      r.expect_end();
      continue;
    }
    const std::size_t at = text.find(detail::trial_marker);
    if (at == std::string::npos) continue;
    log.trials.push_back(detail::parse_trial(std::string_view{text}.substr(at), source, line));
  }
  if (log.global_batch <= 0) throw parse_error(std::string{source} + ": no `gbs:N` line with N >= 1");
  if (log.trials.empty()) throw parse_error(std::string{source} + ": no \"Simulating result:\" trial lines");
  return log;
}

/// The trials of the log file at `path`; throws parse_error when it cannot be read or parsed.
inline trial_log read_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw parse_error(path + ": cannot be read");
  return parse_log(in, path);
}

}  // namespace phaze::testing::amp
