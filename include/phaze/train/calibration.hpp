/// @file
/// Calibration from a user's own measurements: a few named, bounded factors that tune the cost model to one
/// training stack (its kernels, its host overheads, its network), fitted to measured steps and applied where
/// each term is computed (hw::calibration_factors in cost/, cluster::collective_efficiency::calibrated, the
/// step overheads of training_knobs). docs/calibration.md says what each factor covers and when calibration
/// cannot help.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::train {

/// The factors. Time multipliers (1: the model as published) and fixed times (0: none). Each lies within
/// the bounds of calibration_factors below, and a calibrated kernel is never faster than its roofline.
struct calibration {
  double gemm = 1.0;        ///< every GEMM's time (hw::calibration_factors::gemm)
  double attention = 1.0;   ///< fused attention's time (hw::calibration_factors::attention)
  double memory = 1.0;      ///< memory-bound kernels' time (hw::calibration_factors::memory)
  double collective = 1.0;  ///< collectives' time (cluster::collective_efficiency::calibrated)
  double microbatch_s =
      0.0;              ///< seconds each stage adds per microbatch (training_knobs::microbatch_overhead)
  double step_s = 0.0;  ///< seconds each iteration adds (training_knobs::step_overhead)
  friend constexpr bool operator==(const calibration&, const calibration&) = default;
};

/// One factor: its name in files and reports, what it scales, its neutral value and its bounds.
struct calibration_factor {
  std::string_view name;
  std::string_view covers;
  double calibration::*value;
  double neutral;
  double least;
  double most;
};

/// Every factor, in the order a fit with few runs takes them (the ones most runs can tell apart first).
inline const std::array<calibration_factor, 6>& calibration_factors() {
  static const std::array<calibration_factor, 6> factors{{
      {"gemm", "time of every GEMM (tensor-core efficiency of the stack's GEMM library and clocks)",
       &calibration::gemm, 1.0, 0.5, 2.5},
      {"step_s", "seconds added to every iteration (optimizer host side, logging, synchronization)",
       &calibration::step_s, 0.0, 0.0, 120.0},
      {"attention", "time of the fused attention kernel (the stack's attention implementation)",
       &calibration::attention, 1.0, 0.5, 4.0},
      {"collective", "time of every collective and pipeline transfer (the network as the stack reaches it)",
       &calibration::collective, 1.0, 0.5, 4.0},
      {"microbatch_s", "seconds each pipeline stage adds to every microbatch (host and launch overhead)",
       &calibration::microbatch_s, 0.0, 0.0, 10.0},
      {"memory", "time of memory-bound kernels (norms, activations, casts, the loss)", &calibration::memory,
       1.0, 0.5, 4.0},
  }};
  return factors;
}

/// The factor named `name`, or nullptr.
inline const calibration_factor* find_calibration_factor(std::string_view name) {
  for (const auto& f : calibration_factors())
    if (f.name == name) return &f;
  return nullptr;
}

/// Throws input_error when a factor lies outside its bounds (or is not finite).
inline void check_calibration(const calibration& c) {
  for (const auto& f : calibration_factors()) {
    const double v = c.*(f.value);
    if (!(std::isfinite(v) && v >= f.least && v <= f.most)) {
      throw input_error("calibration factor '" + std::string{f.name} + "' is " + std::to_string(v) +
                        "; it must lie in [" + std::to_string(f.least) + ", " + std::to_string(f.most) +
                        "] (docs/calibration.md)");
    }
  }
}

/// The device `d` with calibration `cal`'s kernel factors (a datasheet device; a systolic design, which has
/// no measured stack, as it is). A factor out of its bounds is input_error (check_calibration), here and in
/// the other two.
inline hw::device calibrated(hw::device d, const calibration& cal) {
  check_calibration(cal);
  if (d.kind == hw::device_kind::datasheet) d.sheet.calibrated = {cal.gemm, cal.attention, cal.memory};
  return d;
}

/// The cluster `c` with calibration `cal` applied: every datasheet device of every group takes the kernel
/// factors (systolic designs have no measured stack and keep theirs) and the collectives the collective
/// factor; the rank order is kept. Idempotent: the factors are set, not multiplied.
inline cluster::cluster calibrated(const cluster::cluster& c, const calibration& cal) {
  std::vector<cluster::device_group> groups = c.groups();
  for (auto& g : groups) g.device = calibrated(g.device, cal);
  check_calibration(cal);
  cluster::collective_efficiency e = c.efficiency();
  e.calibrated = cal.collective;
  cluster::cluster out{std::move(groups), e, c.measured()};
  return c.order().empty() ? out : out.with_order(c.order());
}

/// The knobs `k` with calibration `cal`'s fixed times.
inline training_knobs calibrated(training_knobs k, const calibration& cal) {
  check_calibration(cal);
  k.microbatch_overhead = seconds{cal.microbatch_s};
  k.step_overhead = seconds{cal.step_s};
  return k;
}

/// A run to fit against: a function that predicts its step time (seconds) under a calibration, and the
/// time measured.
struct calibration_run {
  std::string label;
  std::function<double(const calibration&)> predict;
  double measured_s = 0.0;
};

/// The most fits a cross-validation of one subset of factors runs: leave-one-out up to this many runs, as
/// many folds beyond.
inline constexpr std::size_t max_calibration_folds = 12;

/// The outcome of a fit: the factors, which were fitted, and how well they fit.
struct calibration_fit {
  calibration factors;
  std::vector<std::string> fitted;  ///< names of the fitted factors, in calibration_factors() order
  std::vector<double> before;       ///< per run: relative error of the uncalibrated model
  std::vector<double> after;        ///< per run: relative error with the fitted factors
  /// per run: relative error when fitted without it (leave-one-out, or in one of 12 folds beyond 12 runs;
  /// empty with fewer than 3 runs)
  std::vector<double> leave_one_out;
  [[nodiscard]] static double mean_abs(const std::vector<double>& v) {
    double s = 0.0;
    for (const double x : v) s += std::abs(x);
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  }
};

namespace detail {

/// Sum of squared log ratios of predicted to measured over `runs` (the fit's objective: symmetric in too fast
/// and too slow, scale-free across runs of different lengths).
inline double calibration_loss(const std::vector<const calibration_run*>& runs, const calibration& c) {
  double loss = 0.0;
  for (const calibration_run* r : runs) {
    const double p = r->predict(c);
    if (!(p > 0.0) || !std::isfinite(p)) return std::numeric_limits<double>::infinity();
    const double l = std::log(p / r->measured_s);
    loss += l * l;
  }
  return loss;
}

/// Minimizes calibration_loss over the factors `free` (indices into calibration_factors()) within their
/// bounds, from the neutral calibration, by Nelder and Mead's simplex method (Computer Journal 7, 1965;
/// reflection 1, expansion 2, contraction and shrink 1/2) in coordinates where the factors vary evenly: the
/// logarithm of a multiplier, the square root of a fixed time (fine near zero, where they mostly land); a
/// point outside the bounds is clamped to them. 500 iterations at most, or until the simplex's losses differ
/// by less than 1e-14. Deterministic.
inline calibration fit_factors(const std::vector<const calibration_run*>& runs,
                               const std::vector<std::size_t>& free) {
  const auto& all = calibration_factors();
  const std::size_t d = free.size();
  calibration neutral;
  if (d == 0) return neutral;
  auto to_x = [&](std::size_t j, double v) {
    return all[free[j]].neutral > 0.0 ? std::log(v) : std::sqrt(v);
  };
  auto from_x = [&](std::size_t j, double x) {
    const calibration_factor& f = all[free[j]];
    const double v = f.neutral > 0.0 ? std::exp(x) : x * x;
    return std::clamp(v, f.least, f.most);
  };
  auto at = [&](const std::vector<double>& x) {
    calibration c;
    for (std::size_t j = 0; j < d; ++j) c.*(all[free[j]].value) = from_x(j, x[j]);
    return c;
  };
  auto loss = [&](const std::vector<double>& x) { return calibration_loss(runs, at(x)); };
  // The first simplex: the neutral point and one step along each coordinate (+20% for a multiplier, 0.1 s
  // for a fixed time).
  std::vector<std::vector<double>> points(d + 1, std::vector<double>(d));
  for (std::size_t j = 0; j < d; ++j) points[0][j] = to_x(j, all[free[j]].neutral);
  for (std::size_t i = 1; i <= d; ++i) {
    points[i] = points[0];
    points[i][i - 1] += all[free[i - 1]].neutral > 0.0 ? std::log(1.2) : std::sqrt(0.1);
  }
  std::vector<double> losses(d + 1);
  for (std::size_t i = 0; i <= d; ++i) losses[i] = loss(points[i]);
  std::vector<std::size_t> order(d + 1);
  for (int iteration = 0; iteration < 500; ++iteration) {
    for (std::size_t i = 0; i <= d; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return losses[a] < losses[b]; });
    const std::size_t best = order.front();
    const std::size_t worst = order.back();
    const std::size_t second = order[d - 1];
    if (std::abs(losses[worst] - losses[best]) < 1e-14) break;
    std::vector<double> centre(d, 0.0);
    for (std::size_t i = 0; i <= d; ++i)
      if (i != worst)
        for (std::size_t j = 0; j < d; ++j) centre[j] += points[i][j] / static_cast<double>(d);
    auto toward = [&](double t) {
      std::vector<double> x(d);
      for (std::size_t j = 0; j < d; ++j) x[j] = centre[j] + t * (points[worst][j] - centre[j]);
      return x;
    };
    const std::vector<double> reflected = toward(-1.0);
    const double fr = loss(reflected);
    if (fr < losses[best]) {
      const std::vector<double> expanded = toward(-2.0);
      const double fe = loss(expanded);
      if (fe < fr) {
        points[worst] = expanded;
        losses[worst] = fe;
      } else {
        points[worst] = reflected;
        losses[worst] = fr;
      }
    } else if (fr < losses[second]) {
      points[worst] = reflected;
      losses[worst] = fr;
    } else {
      const std::vector<double> contracted = toward(fr < losses[worst] ? -0.5 : 0.5);
      const double fc = loss(contracted);
      if (fc < std::min(fr, losses[worst])) {
        points[worst] = contracted;
        losses[worst] = fc;
      } else {
        for (std::size_t i = 0; i <= d; ++i) {
          if (i == best) continue;
          for (std::size_t j = 0; j < d; ++j)
            points[i][j] = points[best][j] + 0.5 * (points[i][j] - points[best][j]);
          losses[i] = loss(points[i]);
        }
      }
    }
  }
  std::size_t best = 0;
  for (std::size_t i = 1; i <= d; ++i)
    if (losses[i] < losses[best]) best = i;
  return at(points[best]);
}

inline double relative_error(const calibration_run& r, const calibration& c) {
  return (r.predict(c) - r.measured_s) / r.measured_s;
}

}  // namespace detail

/// Fits a calibration to `runs` (at least one). With n runs it fits at most min(n - 1, 3) factors (one with a
/// single run), chosen by forward selection: starting from none, it adds one factor at a time, the one whose
/// subset has the least leave-one-out error (the mean absolute relative error of each run predicted by the
/// factors fitted to the others; with fewer than three runs, the fit's own error; ties to the earlier
/// factor), and keeps the best subset on that path, the empty one (no calibration) included, a larger one
/// only when its error is a tenth of a point lower. A factor none of the runs is sensitive to (its bounds
/// change no prediction by more than 0.1%) is never taken. Reports the errors before, after, and left out.
inline calibration_fit fit_calibration(const std::vector<calibration_run>& runs) {
  if (runs.empty()) throw input_error("calibration needs at least one measured run");
  for (const auto& r : runs) {
    if (!(r.measured_s > 0.0) || !std::isfinite(r.measured_s)) {
      throw input_error("run '" + r.label + "': the measured step time must be a positive number of seconds");
    }
  }
  const auto& all = calibration_factors();
  std::vector<const calibration_run*> every;
  for (const auto& r : runs) every.push_back(&r);
  const calibration neutral{};
  // Factors the runs can see.
  std::vector<std::size_t> visible;
  for (std::size_t i = 0; i < all.size(); ++i) {
    calibration lo = neutral;
    calibration hi = neutral;
    lo.*(all[i].value) = all[i].least;
    hi.*(all[i].value) = all[i].most;
    bool seen = false;
    for (const auto& r : runs) {
      const double base = r.predict(neutral);
      if (std::abs(r.predict(lo) - base) > 1e-3 * base || std::abs(r.predict(hi) - base) > 1e-3 * base)
        seen = true;
    }
    if (seen) visible.push_back(i);
  }
  const std::size_t n = runs.size();
  const std::size_t most_free =
      std::min<std::size_t>(visible.size(), n <= 1 ? 1 : std::min<std::size_t>(n - 1, 3));
  // The score of a subset: each run's error when fitted without it (three runs or more: leave-one-out up to
  // twelve runs, beyond that in twelve folds, run i in fold i mod 12, to bound the fits), else the fit's own.
  const std::size_t folds = std::min<std::size_t>(n, max_calibration_folds);
  auto score_of = [&](const std::vector<std::size_t>& subset) {
    std::vector<double> errors(n, 0.0);
    if (n >= 3) {
      for (std::size_t fold = 0; fold < folds; ++fold) {
        std::vector<const calibration_run*> rest;
        for (std::size_t j = 0; j < n; ++j)
          if (j % folds != fold) rest.push_back(&runs[j]);
        const calibration c = detail::fit_factors(rest, subset);
        for (std::size_t j = fold; j < n; j += folds) errors[j] = detail::relative_error(runs[j], c);
      }
    } else {
      const calibration c = detail::fit_factors(every, subset);
      for (std::size_t j = 0; j < n; ++j) errors[j] = detail::relative_error(runs[j], c);
    }
    return errors;
  };
  calibration_fit out;
  for (const auto& r : runs) out.before.push_back(detail::relative_error(r, neutral));
  // Forward selection: grow a subset one factor at a time, each time by the factor whose subset scores best,
  // up to most_free; keep the best subset met on the way (a larger one only when it scores a tenth of a point
  // better: two factors may be needed together before either helps).
  // The empty subset first: no factor at all (its error left out is its error, `before`).
  std::vector<std::size_t> best_subset;
  std::vector<double> best_loo = out.before;
  double best_score = calibration_fit::mean_abs(out.before);
  std::vector<std::size_t> path;
  while (path.size() < most_free) {
    std::vector<std::size_t> round_best;
    std::vector<double> round_errors;
    double round_score = std::numeric_limits<double>::infinity();
    for (const std::size_t i : visible) {
      if (std::find(path.begin(), path.end(), i) != path.end()) continue;
      std::vector<std::size_t> subset = path;
      subset.push_back(i);
      std::sort(subset.begin(), subset.end());
      const std::vector<double> errors = score_of(subset);
      const double score = calibration_fit::mean_abs(errors);
      if (score < round_score - 1e-12) {
        round_score = score;
        round_best = subset;
        round_errors = errors;
      }
    }
    if (round_best.empty()) break;
    path = round_best;
    if (round_score < best_score - 1e-3) {
      best_score = round_score;
      best_subset = round_best;
      best_loo = round_errors;
    }
  }
  out.factors = best_subset.empty() ? neutral : detail::fit_factors(every, best_subset);
  for (const std::size_t i : best_subset) out.fitted.emplace_back(all[i].name);
  for (const auto& r : runs) out.after.push_back(detail::relative_error(r, out.factors));
  if (n >= 3) out.leave_one_out = best_loo;
  return out;
}

}  // namespace phaze::train
