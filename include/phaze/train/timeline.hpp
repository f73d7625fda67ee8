/// @file
/// The pipeline timeline of a step estimate: an event simulation of the 1F1B (PipeDream-Flush) or GPipe
/// schedule with each stage's own per-microbatch times, then the data-parallel gradient synchronization and
/// the optimizer step (docs/search-report.md). It draws what train::estimate_step sums up.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

namespace phaze::train {

/// What a stage is doing during a segment of the timeline.
enum class segment_kind : std::uint8_t {
  forward,        ///< forward pass of one microbatch
  backward,       ///< backward pass of one microbatch
  recompute,      ///< recomputation of one microbatch's forward before its backward
  communication,  ///< pipeline point-to-point send of one microbatch's activation or gradient
  bubble,         ///< idle: waiting for a neighbouring stage
  gradient_sync,  ///< data-parallel gradient synchronization
  optimizer,      ///< optimizer step
};

/// Every segment kind, in the order legends list them.
inline constexpr std::array all_segment_kinds{
    segment_kind::forward, segment_kind::backward,      segment_kind::recompute, segment_kind::communication,
    segment_kind::bubble,  segment_kind::gradient_sync, segment_kind::optimizer};

constexpr std::string_view to_string(segment_kind k) {
  switch (k) {
    case segment_kind::forward:
      return "forward";
    case segment_kind::backward:
      return "backward";
    case segment_kind::recompute:
      return "recompute";
    case segment_kind::communication:
      return "communication";
    case segment_kind::bubble:
      return "bubble";
    case segment_kind::gradient_sync:
      return "gradient-sync";
    case segment_kind::optimizer:
      return "optimizer";
  }
  return "?";
}

/// One interval of one stage's timeline.
struct timeline_segment {
  segment_kind kind = segment_kind::bubble;
  std::int64_t microbatch = -1;  ///< forward, backward, recompute, communication: its microbatch; else -1
  seconds start{0.0};
  seconds end{0.0};
  [[nodiscard]] seconds duration() const { return end - start; }
};

/// What one microbatch costs on one stage, split the way the timeline draws it.
struct stage_op_times {
  seconds forward{0.0};
  seconds backward{0.0};
  seconds recompute{0.0};
  seconds send_forward{0.0};   ///< after each forward: the activation send the next stage waits for
  seconds send_backward{0.0};  ///< after each backward: the gradient send the previous stage waits for
};

/// A simulated training iteration: per stage, segments in time order that tile [0, makespan] exactly
/// (idle time is a bubble segment).
struct pipeline_timeline {
  train::pipeline_schedule schedule = train::pipeline_schedule::one_f_one_b;  ///< the schedule simulated
  std::int64_t microbatches = 0;
  std::vector<std::vector<timeline_segment>> stages;
  seconds pipeline_end{0.0};  ///< the last backward of any stage (the flush)
  seconds makespan{0.0};      ///< pipeline_end + gradient synchronization + optimizer step
  std::string note;           ///< how the drawing differs from the estimate, if it does ("" otherwise)
};

namespace detail {
struct pipeline_op {
  bool backward = false;
  std::int64_t microbatch = 0;
};

/// Each stage's order of operations. 1F1B (PipeDream-Flush, Narayanan et al. SC'21, section 2.2): stage s
/// of p runs min(p - s - 1, m) warm-up forwards, then alternates one forward and one backward, then drains
/// the remaining backwards. GPipe: all forwards, then all backwards.
inline std::vector<pipeline_op> stage_order(int stage, int stages, std::int64_t m, bool gpipe) {
  std::vector<pipeline_op> ops;
  ops.reserve(static_cast<std::size_t>(2 * m));
  if (gpipe) {
    for (std::int64_t i = 0; i < m; ++i) ops.push_back({false, i});
    for (std::int64_t i = 0; i < m; ++i) ops.push_back({true, i});
    return ops;
  }
  const std::int64_t warm_up = std::min<std::int64_t>(stages - stage - 1, m);
  for (std::int64_t i = 0; i < warm_up; ++i) ops.push_back({false, i});
  for (std::int64_t j = 0; j < m - warm_up; ++j) {
    ops.push_back({false, warm_up + j});
    ops.push_back({true, j});
  }
  for (std::int64_t i = m - warm_up; i < m; ++i) ops.push_back({true, i});
  return ops;
}

inline void append_segment(std::vector<timeline_segment>& row, segment_kind kind, std::int64_t microbatch,
                           seconds& clock, seconds duration) {
  if (duration.value() <= 0.0) return;
  row.push_back({kind, microbatch, clock, clock + duration});
  clock += duration;
}
}  // namespace detail

/// Simulates `microbatches` microbatches through stages with the given per-microbatch times under
/// `schedule` (interleaved is simulated as 1F1B). Forward i on stage s starts after forward i on stage s - 1
/// and its send; backward i on stage s after backward i on stage s + 1 and its send; each stage runs its
/// operations in the schedule's order, one at a time. After the last backward of every stage (Megatron-LM
/// clips the gradient norm over all stages before stepping, so the step waits for the flush) every stage
/// synchronizes gradients for `gradient_sync` and steps the optimizer for `optimizer_step`.
inline pipeline_timeline simulate_pipeline(const std::vector<stage_op_times>& stages,
                                           std::int64_t microbatches, train::pipeline_schedule schedule,
                                           seconds gradient_sync, seconds optimizer_step) {
  if (stages.empty()) throw input_error("a pipeline timeline needs at least one stage");
  if (microbatches < 1) throw input_error("a pipeline timeline needs at least one microbatch");
  const int p = static_cast<int>(stages.size());
  const std::int64_t m = microbatches;
  const bool gpipe = schedule == train::pipeline_schedule::gpipe;
  pipeline_timeline t;
  t.schedule = schedule;
  t.microbatches = m;
  t.stages.resize(stages.size());

  constexpr double unset = -1.0;
  const auto mb = static_cast<std::size_t>(m);
  // When each microbatch's activation (forward) and gradient (backward) has arrived at the next stage.
  std::vector<std::vector<double>> forward_done(stages.size(), std::vector<double>(mb, unset));
  std::vector<std::vector<double>> backward_done(stages.size(), std::vector<double>(mb, unset));
  std::vector<std::vector<detail::pipeline_op>> order;
  for (int s = 0; s < p; ++s) order.push_back(detail::stage_order(s, p, m, gpipe));
  std::vector<std::size_t> next(stages.size(), 0);
  std::vector<seconds> clock(stages.size(), seconds{0.0});

  std::size_t remaining = 0;
  for (const auto& o : order) remaining += o.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < p; ++s) {
      const auto si = static_cast<std::size_t>(s);
      const stage_op_times& c = stages[si];
      auto& row = t.stages[si];
      while (next[si] < order[si].size()) {
        const detail::pipeline_op op = order[si][next[si]];
        const auto i = static_cast<std::size_t>(op.microbatch);
        double ready = 0.0;
        if (!op.backward && s > 0) ready = forward_done[si - 1][i];
        if (op.backward) ready = s + 1 < p ? backward_done[si + 1][i] : forward_done[si][i];
        if (ready == unset) break;
        seconds now{std::max(clock[si].value(), ready)};
        if (!op.backward) {
          detail::append_segment(row, segment_kind::forward, op.microbatch, now, c.forward);
          detail::append_segment(row, segment_kind::communication, op.microbatch, now, c.send_forward);
          forward_done[si][i] = now.value();
        } else {
          detail::append_segment(row, segment_kind::recompute, op.microbatch, now, c.recompute);
          detail::append_segment(row, segment_kind::backward, op.microbatch, now, c.backward);
          detail::append_segment(row, segment_kind::communication, op.microbatch, now, c.send_backward);
          backward_done[si][i] = now.value();
        }
        clock[si] = now;
        ++next[si];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) throw error("pipeline timeline: the schedule deadlocked (a bug in phaze)");
  }

  for (const seconds c : clock) t.pipeline_end = std::max(t.pipeline_end, c);
  t.makespan = t.pipeline_end + gradient_sync + optimizer_step;
  for (auto& row : t.stages) {
    // Fill the idle gaps with bubbles, then the gradient synchronization and the optimizer step.
    std::vector<timeline_segment> filled;
    filled.reserve(row.size() * 2 + 3);
    seconds at{0.0};
    for (const timeline_segment& seg : row) {
      if (seg.start > at) filled.push_back({segment_kind::bubble, -1, at, seg.start});
      filled.push_back(seg);
      at = seg.end;
    }
    if (t.pipeline_end > at) filled.push_back({segment_kind::bubble, -1, at, t.pipeline_end});
    at = t.pipeline_end;
    detail::append_segment(filled, segment_kind::gradient_sync, -1, at, gradient_sync);
    detail::append_segment(filled, segment_kind::optimizer, -1, at, optimizer_step);
    row = std::move(filled);
  }
  return t;
}

/// The timeline of a step estimate under `schedule`: each stage's forward, recomputation and backward per
/// microbatch, its pipeline sends (the estimate's pp_comm, half after the forward and half after the
/// backward), and the breakdown's gradient synchronization and optimizer step. With equal stages its
/// makespan is estimate_step's time per batch, (m + p - 1) t_stage + dp + optimizer. With uneven stages it
/// differs: the estimate charges every stage the slowest one's per-microbatch time, the simulation each
/// stage its own (for 1F1B never later than the estimate in tests/place/timeline_test.cpp). The interleaved
/// schedule is drawn as 1F1B, whose bubble is v times the interleaved one. `note` says how the drawing
/// differs from the estimate.
/// The most microbatches a timeline draws: a pipeline's steady state repeats, and a global batch of 2^20
/// sequences in microbatches of one would otherwise give a timeline of billions of segments.
inline constexpr std::int64_t max_drawn_microbatches = 1024;

inline pipeline_timeline build_timeline(const step_estimate& e, train::pipeline_schedule schedule) {
  std::vector<stage_op_times> ops;
  ops.reserve(e.stages.size());
  for (const stage_estimate& s : e.stages) {
    ops.push_back({s.forward, s.backward, s.recompute, s.pp_comm * 0.5, s.pp_comm * 0.5});
  }
  const std::int64_t drawn_microbatches = std::min(e.microbatches, max_drawn_microbatches);
  pipeline_timeline t =
      simulate_pipeline(ops, drawn_microbatches, schedule, e.breakdown.dp_comm, e.breakdown.optimizer);
  if (drawn_microbatches < e.microbatches) {
    t.note = "the first " + std::to_string(drawn_microbatches) + " of " + std::to_string(e.microbatches) +
             " microbatches drawn (the steady state repeats); the estimate counts them all";
    return t;
  }
  if (schedule == train::pipeline_schedule::interleaved) {
    t.note = "interleaved 1F1B drawn as 1F1B: its bubble is v times the interleaved schedule's";
  }
  const double estimate = e.time_per_batch.value();
  const double drawn = t.makespan.value();
  if (schedule != train::pipeline_schedule::interleaved &&
      std::abs(drawn - estimate) > 1e-9 * std::max(std::abs(estimate), 1e-300)) {
    t.note = std::string{"uneven stages: each stage drawn with its own time, so the iteration ends "} +
             (drawn < estimate ? "before" : "after") +
             " the estimate's, which charges every stage the slowest one's time";
  }
  return t;
}

}  // namespace phaze::train
