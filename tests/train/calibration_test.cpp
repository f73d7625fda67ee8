// train::fit_calibration against runs whose predictions are closed forms of the factors: it recovers the
// factors that made the measurements, fits no more factors than the runs allow, leaves out the ones no run
// sees, and train::calibrated sets (never multiplies) the factors where the cost model reads them.
#include <phaze/cost/collective.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/train/calibration.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace phaze;

namespace {
/// A run costing `g` seconds of GEMMs, `m` microbatches and a step: g * gemm + m * microbatch_s + step_s.
train::calibration_run synthetic(double g, double m, const train::calibration& truth) {
  auto predict = [g, m](const train::calibration& c) { return g * c.gemm + m * c.microbatch_s + c.step_s; };
  return {"synthetic", predict, predict(truth)};
}
}  // namespace

TEST_CASE("calibration recovers the factors that timed the runs", "[train][calibration]") {
  train::calibration truth;
  truth.gemm = 1.25;
  truth.step_s = 0.4;
  truth.microbatch_s = 0.01;
  std::vector<train::calibration_run> runs;
  for (const auto& [g, m] : std::vector<std::pair<double, double>>{{2.0, 8}, {5.0, 32}, {1.0, 64}, {8.0, 4}})
    runs.push_back(synthetic(g, m, truth));
  const train::calibration_fit fit = train::fit_calibration(runs);
  CHECK(fit.factors.gemm == Approx(1.25).epsilon(1e-3));
  CHECK(fit.factors.step_s == Approx(0.4).epsilon(1e-2));
  CHECK(fit.factors.microbatch_s == Approx(0.01).epsilon(1e-2));
  // Attention, collectives and memory-bound kernels change no prediction: never fitted, left neutral.
  CHECK(fit.factors.attention == 1.0);
  CHECK(fit.factors.collective == 1.0);
  CHECK(fit.factors.memory == 1.0);
  CHECK(fit.fitted.size() == 3);
  CHECK(train::calibration_fit::mean_abs(fit.after) < 1e-4);
  CHECK(train::calibration_fit::mean_abs(fit.leave_one_out) < 1e-3);
  CHECK(train::calibration_fit::mean_abs(fit.before) > 0.2);
}

TEST_CASE("calibration fits fewer factors than runs, one with a single run", "[train][calibration]") {
  train::calibration truth;
  truth.gemm = 1.5;
  const std::vector<train::calibration_run> one{synthetic(2.0, 8, truth)};
  auto fit = train::fit_calibration(one);
  CHECK(fit.fitted.size() == 1);
  CHECK(fit.leave_one_out.empty());
  CHECK(train::calibration_fit::mean_abs(fit.after) < 1e-4);
  const std::vector<train::calibration_run> two{synthetic(2.0, 8, truth), synthetic(1.0, 16, truth)};
  fit = train::fit_calibration(two);
  CHECK(fit.fitted.size() == 1);
  // Factors stay within their bounds whatever the runs ask for.
  const std::vector<train::calibration_run> absurd{
      {"x", [](const train::calibration& c) { return c.gemm; }, 100.0}};
  fit = train::fit_calibration(absurd);
  CHECK(fit.factors.gemm <= 2.5);
  CHECK_THROWS_AS(train::fit_calibration({}), input_error);
  CHECK_THROWS_AS(train::fit_calibration({{"bad", [](const train::calibration&) { return 1.0; }, -1.0}}),
                  input_error);
}

TEST_CASE("a calibration is set on the cluster's devices and collectives, idempotently",
          "[train][calibration]") {
  train::calibration cal;
  cal.gemm = 1.2;
  cal.attention = 1.5;
  cal.memory = 1.1;
  cal.collective = 2.0;
  const auto c = test::cluster_of(*hw::find_preset("h100-sxm"), 16);
  const auto once = train::calibrated(c, cal);
  const auto twice = train::calibrated(once, cal);
  CHECK(once == twice);
  const auto& d = once.groups().front().device;
  CHECK(d.sheet.calibrated.gemm == 1.2);
  CHECK(d.sheet.calibrated.attention == 1.5);
  CHECK(d.sheet.calibrated.memory == 1.1);
  CHECK(once.efficiency().calibrated == 2.0);
  // PHAZE's designs have no measured stack: untouched.
  CHECK(train::calibrated(hw::tpuv4_like, cal) == hw::tpuv4_like);
  train::calibration fixed;
  fixed.microbatch_s = 0.02;
  fixed.step_s = 0.5;
  const auto k = train::calibrated(train::training_knobs{}, fixed);
  CHECK(k.microbatch_overhead.value() == 0.02);
  CHECK(k.step_overhead.value() == 0.5);
  CHECK(train::calibrated(k, fixed) == k);
  // A factor out of its bounds is refused by name.
  cal.gemm = 3.0;
  CHECK_THROWS_WITH(train::check_calibration(cal), Catch::Contains("'gemm'"));
}

TEST_CASE("calibration fits nothing when the model already matches the runs", "[train][calibration]") {
  std::vector<train::calibration_run> runs;
  for (const double g : {1.0, 2.0, 5.0, 9.0})
    runs.push_back({"exact", [g](const train::calibration& c) { return g * c.gemm + c.step_s; }, g});
  const train::calibration_fit fit = train::fit_calibration(runs);
  CHECK(fit.fitted.empty());
  CHECK(fit.factors == train::calibration{});
}

TEST_CASE("a calibrated collective never runs faster than its link", "[train][calibration]") {
  const cluster::route link{{bytes_per_second{50e9}, seconds{1e-5}}, {}};
  cluster::route faster = link;
  faster.efficiency.calibrated = 0.5;  // the most favourable factor a file may hold
  CHECK(cost::all_reduce_time(bytes{1e9}, 8, faster).value() ==
        cost::all_reduce_time(bytes{1e9}, 8, link).value());
  // Below the link's rate (an nccl-tests efficiency), a factor under 1 raises it, to the link's rate at most.
  cluster::route measured = link;
  measured.efficiency.all_gather = 0.8;
  cluster::route measured_faster = measured;
  measured_faster.efficiency.calibrated = 0.5;
  CHECK(cost::all_gather_time(bytes{1e9}, 8, measured_faster).value() ==
        cost::all_gather_time(bytes{1e9}, 8, link).value());
  cluster::route slower = link;
  slower.efficiency.calibrated = 2.0;
  CHECK(cost::reduce_scatter_time(bytes{1e9}, 8, slower).value() >
        1.9 * cost::reduce_scatter_time(bytes{1e9}, 8, link).value());
}
