// The pipeline timeline: with equal stages its makespan is (m + p - 1) t_stage + dp + optimizer (Narayanan et
// al., SC'21, section 2.2); segments never overlap and tile each stage's time; dependencies hold; with uneven
// stages it lies between the lower bounds and the estimate's (m - 1) t_max + sum_i t_i (1F1B) and equals a
// tick-by-tick simulation on small integer cases; a real estimate, whose last stage (the head) is the
// slowest, ends exactly at its time per batch.
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/train/knobs.hpp>
#include <phaze/train/step.hpp>
#include <phaze/train/timeline.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

using namespace phaze;
using train::segment_kind;

namespace {

constexpr double tolerance = 1e-9;

bool close(double a, double b) {
  return std::abs(a - b) <= tolerance * std::max({1.0, std::abs(a), std::abs(b)});
}

// Segments tile [0, makespan] on every stage, in order, without overlap.
void check_tiling(const train::pipeline_timeline& t) {
  for (const auto& row : t.stages) {
    REQUIRE_FALSE(row.empty());
    CHECK(row.front().start.value() == 0.0);
    CHECK(close(row.back().end.value(), t.makespan.value()));
    for (std::size_t i = 0; i < row.size(); ++i) {
      CHECK(row[i].end.value() > row[i].start.value());
      if (i > 0) CHECK(row[i].start.value() == row[i - 1].end.value());
    }
  }
}

// When each (stage, microbatch) forward and backward starts and ends, sends included.
struct op_span {
  double start = -1.0;
  double end = -1.0;
};
using op_key = std::pair<std::size_t, std::int64_t>;

std::map<op_key, op_span> spans_of(const train::pipeline_timeline& t, bool backward) {
  std::map<op_key, op_span> spans;
  for (std::size_t s = 0; s < t.stages.size(); ++s) {
    for (const auto& seg : t.stages[s]) {
      const bool is_backward = seg.kind == segment_kind::backward || seg.kind == segment_kind::recompute;
      const bool is_forward = seg.kind == segment_kind::forward;
      if (seg.microbatch < 0) continue;
      if ((backward && is_backward) || (!backward && is_forward)) {
        auto& sp = spans[{s, seg.microbatch}];
        if (sp.start < 0.0) sp.start = seg.start.value();
        sp.end = seg.end.value();
      }
    }
  }
  return spans;
}

// The dependencies of the schedule: forward i on s after forward i on s - 1 (sent), backward i on s after
// backward i on s + 1 (sent) and after its own forward.
void check_dependencies(const train::pipeline_timeline& t, const std::vector<train::stage_op_times>& ops) {
  const auto fw = spans_of(t, false);
  const auto bw = spans_of(t, true);
  const std::size_t p = t.stages.size();
  for (std::size_t s = 0; s < p; ++s) {
    for (std::int64_t i = 0; i < t.microbatches; ++i) {
      const op_span f = fw.at({s, i});
      const op_span b = bw.at({s, i});
      REQUIRE(f.start >= 0.0);
      REQUIRE(b.start >= 0.0);
      CHECK(b.start >= f.end - tolerance);
      if (s > 0) {
        CHECK(f.start >= fw.at({s - 1, i}).end + ops[s - 1].send_forward.value() - tolerance);
      }
      if (s + 1 < p) {
        CHECK(b.start >= bw.at({s + 1, i}).end + ops[s + 1].send_backward.value() - tolerance);
      }
    }
  }
}

train::stage_op_times stage_of(double f, double b, double r = 0.0, double send = 0.0) {
  return {seconds{f}, seconds{b}, seconds{r}, seconds{send}, seconds{send}};
}

// A tick-by-tick simulation with integer durations: at every tick each idle stage starts its next operation
// of the schedule's order if its input has arrived. Returns the tick the last backward ends.
std::int64_t tick_simulation(const std::vector<std::array<int, 5>>& stages, std::int64_t m, bool gpipe) {
  const auto p = static_cast<int>(stages.size());
  std::vector<std::vector<std::pair<bool, std::int64_t>>> order(stages.size());
  for (int s = 0; s < p; ++s) {
    auto& o = order[static_cast<std::size_t>(s)];
    if (gpipe) {
      for (std::int64_t i = 0; i < m; ++i) o.emplace_back(false, i);
      for (std::int64_t i = 0; i < m; ++i) o.emplace_back(true, i);
    } else {
      // PipeDream-Flush written out independently: warm-up forwards, then one backward after each forward.
      std::int64_t f = 0;
      std::int64_t b = 0;
      const std::int64_t warm = std::min<std::int64_t>(p - 1 - s, m);
      while (f < warm) o.emplace_back(false, f++);
      while (b < m) {
        if (f < m) o.emplace_back(false, f++);
        o.emplace_back(true, b++);
      }
    }
  }
  std::map<std::pair<int, std::int64_t>, std::int64_t> forward_arrives;
  std::map<std::pair<int, std::int64_t>, std::int64_t> backward_arrives;
  std::vector<std::size_t> next(stages.size(), 0);
  std::vector<std::int64_t> busy_until(stages.size(), 0);
  std::int64_t end = 0;
  for (std::int64_t tick = 0; tick < 100000; ++tick) {
    bool all_done = true;
    for (int s = 0; s < p; ++s) {
      const auto si = static_cast<std::size_t>(s);
      if (next[si] < order[si].size()) all_done = false;
      if (busy_until[si] > tick || next[si] >= order[si].size()) continue;
      const auto [backward, i] = order[si][next[si]];
      const auto& c = stages[si];  // forward, backward, recompute, send forward, send backward
      bool ready = true;
      if (!backward && s > 0) {
        auto it = forward_arrives.find({s - 1, i});
        ready = it != forward_arrives.end() && it->second <= tick;
      }
      if (backward) {
        auto it = s + 1 < p ? backward_arrives.find({s + 1, i}) : forward_arrives.find({s, i});
        ready = it != (s + 1 < p ? backward_arrives.end() : forward_arrives.end()) && it->second <= tick;
      }
      if (!ready) continue;
      const std::int64_t done = tick + (backward ? c[2] + c[1] + c[4] : c[0] + c[3]);
      (backward ? backward_arrives : forward_arrives)[{s, i}] = done;
      busy_until[si] = done;
      end = std::max(end, done);
      ++next[si];
    }
    if (all_done) return end;
  }
  FAIL("tick simulation did not finish");
  return -1;
}

}  // namespace

TEST_CASE("equal stages: the makespan is (m + p - 1) t_stage + dp + optimizer", "[timeline]") {
  for (const auto schedule : {train::pipeline_schedule::one_f_one_b, train::pipeline_schedule::gpipe}) {
    for (int p : {1, 2, 4, 7}) {
      for (std::int64_t m : {1, 3, 4, 8, 13}) {
        const std::vector<train::stage_op_times> ops(static_cast<std::size_t>(p),
                                                     stage_of(0.013, 0.027, 0.009, 0.0007));
        const seconds dp{0.05};
        const seconds opt{0.011};
        const auto t = train::simulate_pipeline(ops, m, schedule, dp, opt);
        const double t_stage = 0.013 + 0.027 + 0.009 + 2 * 0.0007;
        INFO("schedule " << train::to_string(schedule) << " p " << p << " m " << m);
        CHECK(close(t.pipeline_end.value(), static_cast<double>(m + p - 1) * t_stage));
        CHECK(close(t.makespan.value(), static_cast<double>(m + p - 1) * t_stage + 0.05 + 0.011));
        REQUIRE(t.stages.size() == static_cast<std::size_t>(p));
        check_tiling(t);
        check_dependencies(t, ops);
        for (const auto& row : t.stages) {
          CHECK(row[row.size() - 2].kind == segment_kind::gradient_sync);
          CHECK(row.back().kind == segment_kind::optimizer);
        }
      }
    }
  }
}

TEST_CASE("1F1B keeps at most p - s microbatches in flight on stage s", "[timeline]") {
  const int p = 4;
  const std::int64_t m = 8;
  const std::vector<train::stage_op_times> ops(p, stage_of(1.0, 2.0));
  const auto t =
      train::simulate_pipeline(ops, m, train::pipeline_schedule::one_f_one_b, seconds{0.0}, seconds{0.0});
  for (std::size_t s = 0; s < t.stages.size(); ++s) {
    int in_flight = 0;
    int most = 0;
    for (const auto& seg : t.stages[s]) {
      if (seg.kind == segment_kind::forward) most = std::max(most, ++in_flight);
      if (seg.kind == segment_kind::backward) --in_flight;
    }
    CHECK(most == p - static_cast<int>(s));
  }
}

TEST_CASE("uneven stages: between the lower bounds and the estimate, equal to a tick simulation",
          "[timeline]") {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> duration(1, 5);
  std::uniform_int_distribution<int> send(0, 1);
  std::uniform_int_distribution<int> depth(1, 5);
  std::uniform_int_distribution<int> count(1, 9);
  for (int trial = 0; trial < 200; ++trial) {
    const int p = depth(rng);
    const std::int64_t m = count(rng);
    const bool gpipe = trial % 3 == 0;
    std::vector<std::array<int, 5>> ticks;
    std::vector<train::stage_op_times> ops;
    for (int s = 0; s < p; ++s) {
      const int c = send(rng);
      ticks.push_back({duration(rng), duration(rng), duration(rng) - 1, c, c});
      const auto& k = ticks.back();
      ops.push_back(stage_of(k[0], k[1], k[2], k[3]));
    }
    const auto schedule = gpipe ? train::pipeline_schedule::gpipe : train::pipeline_schedule::one_f_one_b;
    const auto t = train::simulate_pipeline(ops, m, schedule, seconds{0.0}, seconds{0.0});
    INFO("trial " << trial << " p " << p << " m " << m);
    check_tiling(t);
    check_dependencies(t, ops);
    CHECK(t.pipeline_end.value() == static_cast<double>(tick_simulation(ticks, m, gpipe)));

    double t_max = 0.0;
    double one_microbatch = 0.0;
    for (const auto& o : ops) {
      const double stage = (o.forward + o.backward + o.recompute + o.send_forward + o.send_backward).value();
      t_max = std::max(t_max, stage);
      one_microbatch += stage;
    }
    CHECK(t.pipeline_end.value() >= static_cast<double>(m) * t_max - tolerance);
    CHECK(t.pipeline_end.value() >= one_microbatch - tolerance);
    if (gpipe) {
      // All forwards, then all backwards: the slowest forward and the slowest backward may sit on
      // different stages, so each pass is a flow shop paced by its own slowest stage.
      double f_max = 0.0;
      double b_max = 0.0;
      for (const auto& o : ops) {
        f_max = std::max(f_max, (o.forward + o.send_forward).value());
        b_max = std::max(b_max, (o.backward + o.recompute + o.send_backward).value());
      }
      CHECK(t.pipeline_end.value() == static_cast<double>(m - 1) * (f_max + b_max) + one_microbatch);
    } else {
      // The step model's (m - 1) t_max + sum_i t_i (train::step_model::pipeline_time) bounds 1F1B.
      CHECK(t.pipeline_end.value() <= static_cast<double>(m - 1) * t_max + one_microbatch + tolerance);
    }
  }
}

TEST_CASE("the timeline of a real estimate ends at its time per batch", "[timeline]") {
  const model::model m = zoo::get("llama2-7b");
  const hw::device d = *hw::find_preset("a100-80gb");
  train::training_knobs k;
  k.global_batch = 64;
  k.microbatch = 2;
  k.recompute = model::recompute::selective;
  k.sequence_parallel = true;
  const train::parallelism par{2, 4, 4};
  sched::schedule_cache cache;
  train::step_estimate e = train::estimate_step(m, phaze::test::cluster_of(d, par), par, k, cache);
  REQUIRE(e.stages.size() == 4);

  // Uneven (the embedding and the head): the head makes the last stage the slowest, and then 1F1B takes
  // exactly the estimate's (m - 1) t_max + sum_i t_i.
  double t_max = 0.0;
  for (const auto& s : e.stages) t_max = std::max(t_max, s.per_microbatch().value());
  REQUIRE(e.stages.back().per_microbatch().value() == t_max);
  REQUIRE(e.stages.front().per_microbatch().value() < t_max);
  const auto uneven = train::build_timeline(e, k.schedule);
  check_tiling(uneven);
  CHECK(close(uneven.makespan.value(), e.time_per_batch.value()));
  CHECK(uneven.note.empty());
  CHECK(uneven.pipeline_end.value() >= static_cast<double>(e.microbatches) * t_max);

  // Every stage as the slowest one: (m + p - 1) t_max, as the estimate of equal stages says.
  const train::stage_estimate slowest =
      *std::max_element(e.stages.begin(), e.stages.end(),
                        [](const auto& a, const auto& b) { return a.per_microbatch() < b.per_microbatch(); });
  for (auto& s : e.stages) s = slowest;
  e.time_per_batch =
      seconds{static_cast<double>(e.microbatches + 3) * t_max} + e.breakdown.dp_comm + e.breakdown.optimizer;
  const auto equal = train::build_timeline(e, k.schedule);
  check_tiling(equal);
  CHECK(close(equal.makespan.value(), e.time_per_batch.value()));
  CHECK(equal.note.empty());
  CHECK(close(equal.stages[0].back().end.value(), e.time_per_batch.value()));
  CHECK_FALSE(train::build_timeline(e, train::pipeline_schedule::interleaved).note.empty());
}

TEST_CASE("a timeline needs stages and microbatches", "[timeline]") {
  CHECK_THROWS_AS(
      train::simulate_pipeline({}, 4, train::pipeline_schedule::one_f_one_b, seconds{0.0}, seconds{0.0}),
      input_error);
  CHECK_THROWS_AS(train::simulate_pipeline({stage_of(1, 1)}, 0, train::pipeline_schedule::one_f_one_b,
                                           seconds{0.0}, seconds{0.0}),
                  input_error);
}
