// phaze against published training runs of sources it was not built against (tests/support/
// published_runs.hpp says how each row is expressed): LLM Foundry's PyTorch-FSDP tables on A100 and MLPerf
// Training's LLM submissions on H100/H200. For each set: the error a priori (nothing fitted), the Spearman
// rank correlation of throughput within each model, and the error on the rest of the set after calibrating
// on three of its runs chosen by a fixed rule. The tables are read from PHAZE_SHARED_DIR/validation; absent,
// the tests say so and pass. docs/validation.md holds the numbers and what drives the remaining error.
#include <phaze/core/statistics.hpp>

#include <catch2/catch.hpp>

#include "../support/published_runs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace phaze;

namespace {

struct set_errors {
  double mean_abs = 0.0;
  double max_abs = 0.0;
  double mean_signed = 0.0;
  double least_spearman = 1.0;
  std::size_t runs = 0;
};

/// Relative errors of `predicted` against the runs' measured times, with a table of every run.
set_errors errors_of(const std::vector<testing::published_run>& runs, const std::vector<double>& predicted,
                     const char* title) {
  set_errors s;
  std::printf("%s\n%-44s %10s %10s %8s\n", title, "run", "measured s", "phaze s", "error");
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_model;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const double e = (predicted[i] - runs[i].measured_s) / runs[i].measured_s;
    std::printf("%-44s %10.4g %10.4g %+7.1f%%\n", runs[i].label.c_str(), runs[i].measured_s, predicted[i],
                100.0 * e);
    s.mean_abs += std::abs(e);
    s.mean_signed += e;
    s.max_abs = std::max(s.max_abs, std::abs(e));
    const double devices = static_cast<double>(runs[i].p.devices());
    auto& [measured, phaze] = by_model[runs[i].model];
    measured.push_back(runs[i].tokens_per_iteration / runs[i].measured_s / devices);
    phaze.push_back(runs[i].tokens_per_iteration / predicted[i] / devices);
  }
  s.runs = runs.size();
  s.mean_abs /= static_cast<double>(runs.size());
  s.mean_signed /= static_cast<double>(runs.size());
  std::printf("mean absolute error %.1f%%, max %.1f%%, mean signed %+.1f%% over %zu runs\n",
              100.0 * s.mean_abs, 100.0 * s.max_abs, 100.0 * s.mean_signed, runs.size());
  for (const auto& [model, pair] : by_model) {
    if (pair.first.size() < 3) continue;
    const double rho = phaze::spearman(pair.first, pair.second);
    s.least_spearman = std::min(s.least_spearman, rho);
    std::printf("  %-24s Spearman of tokens/s per device %.3f over %zu runs\n", model.c_str(), rho,
                pair.first.size());
  }
  std::printf("\n");
  return s;
}

set_errors a_priori(const std::vector<testing::published_run>& runs, const char* title) {
  std::vector<double> predicted;
  for (const auto& r : runs) predicted.push_back(r.predict());
  return errors_of(runs, predicted, title);
}

/// The fixed rule: the runs of the least, the median and the greatest measured tokens per second per
/// device (one run each; a tie keeps the table's order).
std::vector<std::size_t> calibration_picks(const std::vector<testing::published_run>& runs) {
  std::vector<std::size_t> order(runs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto rate = [&](std::size_t i) {
    return runs[i].tokens_per_iteration / runs[i].measured_s / static_cast<double>(runs[i].p.devices());
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return rate(a) < rate(b); });
  return {order.front(), order[order.size() / 2], order.back()};
}

/// Calibrates on the three picked runs and returns the errors on the others.
set_errors calibrated(const std::vector<testing::published_run>& runs, const char* title) {
  const std::vector<std::size_t> picks = calibration_picks(runs);
  std::vector<train::calibration_run> fit_runs;
  for (const std::size_t i : picks) {
    const testing::published_run* r = &runs[i];
    fit_runs.push_back({r->label, [r](const train::calibration& c) { return r->predict(c); }, r->measured_s});
  }
  const train::calibration_fit fit = train::fit_calibration(fit_runs);
  std::printf("%s: fitted on", title);
  for (const std::size_t i : picks) std::printf(" [%s]", runs[i].label.c_str());
  std::printf("\n ");
  for (const auto& f : train::calibration_factors())
    std::printf(
        " %s %.4g%s", std::string{f.name}.c_str(), fit.factors.*(f.value),
        std::find(fit.fitted.begin(), fit.fitted.end(), f.name) != fit.fitted.end() ? " (fitted)" : "");
  std::printf("\n");
  std::vector<testing::published_run> rest;
  std::vector<double> predicted;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (std::find(picks.begin(), picks.end(), i) != picks.end()) continue;
    rest.push_back(runs[i]);
    predicted.push_back(runs[i].predict(fit.factors));
  }
  return errors_of(rest, predicted, "the other runs, calibrated");
}

}  // namespace

TEST_CASE("LLM Foundry A100 FSDP runs, a priori", "[validation][published][llmfoundry]") {
  const auto runs = testing::llmfoundry_runs();
  if (runs.empty()) {
    WARN("skipped: " << testing::validation_file("llmfoundry_a100.tsv") << " is absent");
    return;
  }
  CHECK(runs.size() == 223);
  const set_errors e = a_priori(runs, "LLM Foundry, A100, PyTorch FSDP (a priori)");
  // At this commit: mean 6.4%, max 36.0%, mean signed -0.1% (docs/validation.md). The goal is 8% / 20% with
  // a mean signed error within 3%; the largest errors are the 70B on 64 A100-40GB and the 30B at 8192 on
  // A100-80GB (both memory-bound runs, see there).
  CHECK(e.mean_abs <= 0.08);
  CHECK(e.max_abs <= 0.40);
  CHECK(std::abs(e.mean_signed) <= 0.03);
}

TEST_CASE("MLPerf Training H100/H200 LLM runs, a priori", "[validation][published][mlperf]") {
  const auto runs = testing::mlperf_runs();
  if (runs.empty()) {
    WARN("skipped: " << testing::validation_file("mlperf_training_h100_h200.tsv") << " is absent");
    return;
  }
  CHECK(runs.size() == 30);
  const set_errors e = a_priori(runs, "MLPerf Training, H100/H200, NeMo (a priori)");
  // At this commit: mean 12.5%, max 34.5%, mean signed -11.8%, Spearman 0.92 (GPT-3) and 1.00 (405B): still
  // too fast (docs/validation.md says where). The goal is 8% / 20% with a mean signed error within 3%.
  CHECK(e.mean_abs <= 0.13);
  CHECK(e.max_abs <= 0.36);
  CHECK(e.mean_signed >= -0.13);
  CHECK(e.least_spearman >= 0.9);
}

TEST_CASE("Published runs, calibrated on three of each set", "[validation][published][calibrated]") {
  for (const auto& [name, runs] :
       {std::pair{"LLM Foundry", testing::llmfoundry_runs()}, std::pair{"MLPerf", testing::mlperf_runs()}}) {
    if (runs.empty()) {
      WARN("skipped: the " << name << " table is absent from " << PHAZE_SHARED_DIR << "/validation");
      continue;
    }
    const set_errors e = calibrated(runs, name);
    INFO(name);
    CHECK(e.mean_abs <= 0.09);
  }
}
