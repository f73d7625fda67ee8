#include "phaze/place/objective.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/place/cost_table.hpp"

using namespace phaze;
using namespace phaze::literals;
using namespace phaze::place;

namespace {
cost_table three_nodes() {
  cost_table t;
  t.tp = 2;
  t.nodes = {{"embedding", 1_s, 2_s, 1_s, bytes{10.0}, bytes{4.0}, false},
             {"block", 3_s, 6_s, 3_s, bytes{20.0}, bytes{8.0}, true},
             {"head", 2_s, 4_s, 2_s, bytes{30.0}, bytes{2.0}, true}};
  t.edges = {{0, 1, bytes{5.0}}, {1, 2, bytes{6.0}}};
  return t;
}
placement_settings settings() {
  placement_settings s;
  s.devices = 8;
  s.memory_per_device = bytes{1000.0};
  s.microbatches = 8;
  s.weight_bytes_per_parameter = 2.0;
  s.state_bytes_per_parameter = 16.0;
  s.p2p_bandwidth = bytes_per_second{2.0};
  s.dp_bandwidth = bytes_per_second{4.0};
  return s;
}
}  // namespace

TEST_CASE("evaluate follows the documented formula", "[place]") {
  const auto t = three_nodes();
  auto s = settings();
  // tp 2, pp 2, dp 2: m = 4. Stage 0 = {0}: t = 3 + 2 * 5 / 2 = 8 s; cost (4 + 1) * 8 = 40 s; all-reduce
  // 2 * 1/2 * 10 / 4 = 2.5 s; memory 10 / 2 * 16 + 4 * min(2, 4) = 88 B.
  // Stage 1 = {1, 2}: t = 9 + 6 = 15 s; cost 75 s; all-reduce 50 / 4 = 12.5 s; memory 50 / 2 * 16 + 10 = 410
  // B. Time per batch = 75 + all-reduce of the largest stage's parameters (50 B) = 87.5 s.
  const plan p = evaluate(s, t, 2, {{0}, {1, 2}});
  CHECK(p.feasible);
  CHECK(p.devices_used() == 8);
  CHECK(p.microbatches_per_replica == 4);
  CHECK(p.stages[0].cost.value() == Approx(40.0));
  CHECK(p.stages[0].allreduce.value() == Approx(2.5));
  CHECK(p.stages[0].memory.value() == Approx(88.0));
  CHECK(p.stages[1].cost.value() == Approx(75.0));
  CHECK(p.stages[1].allreduce.value() == Approx(12.5));
  CHECK(p.stages[1].memory.value() == Approx(410.0));
  CHECK(p.time_per_batch.value() == Approx(87.5));
  CHECK(p.peak_memory.value() == Approx(410.0));
  // When the slowest stage is not the one with the most parameters the policies differ: with 100 B on node 0
  // the default adds stage 0's all-reduce (25 s) to stage 1's 75 s; the bottleneck policy takes
  // max(40 + 25, 75 + 12.5).
  auto heavy = t;
  heavy.nodes[0].parameters = bytes{100.0};
  CHECK(evaluate(s, heavy, 2, {{0}, {1, 2}}).time_per_batch.value() == Approx(100.0));
  CHECK(evaluate<bottleneck_policy>(s, heavy, 2, {{0}, {1, 2}}).time_per_batch.value() == Approx(87.5));
  // Recomputation adds its time; GPipe keeps all m microbatches: stage 0 memory 80 + 4 * 4.
  s.recompute = true;
  s.schedule = train::pipeline_schedule::gpipe;
  const plan q = evaluate(s, t, 2, {{0}, {1, 2}});
  CHECK(q.stages[0].time.value() == Approx(9.0));
  CHECK(q.stages[0].memory.value() == Approx(96.0));
  s.memory_per_device = bytes{100.0};
  CHECK_FALSE(evaluate(s, t, 2, {{0}, {1, 2}}).feasible);
}

TEST_CASE("evaluate rejects plans that are not plans", "[place]") {
  const auto t = three_nodes();
  const auto s = settings();
  CHECK_THROWS_WITH(evaluate(s, t, 3, {{0, 1, 2}}), Catch::Contains("does not divide"));
  CHECK_THROWS_WITH(evaluate(s, t, 4, {{0}, {1, 2}}), Catch::Contains("exceeds"));
  CHECK_THROWS_WITH(evaluate(s, t, 1, {{1}, {0, 2}}), Catch::Contains("contiguous"));
  CHECK_THROWS_WITH(evaluate(s, t, 1, {{0}, {1}}), Catch::Contains("cover"));
  CHECK_THROWS_WITH(evaluate(s, t, 1, {{0}, {}, {1, 2}}), Catch::Contains("empty"));
  CHECK_THROWS_AS(evaluate(s, t, 1, {{0, 0}, {1, 2}}), input_error);
}

TEST_CASE("problems are validated with messages that say what to fix", "[place]") {
  placement_problem<> p;
  p.memory_per_device = bytes{1.0};
  CHECK_THROWS_WITH(validate(p), Catch::Contains("no cost tables"));
  p.tables.push_back(three_nodes());
  CHECK_NOTHROW(validate(p));
  p.tables.push_back(three_nodes());
  CHECK_THROWS_WITH(validate(p), Catch::Contains("one table per TP width"));
  p.tables.pop_back();
  p.tables[0].edges.push_back({2, 1, bytes{1.0}});
  CHECK_THROWS_WITH(validate(p), Catch::Contains("topological"));
  p.tables[0].edges.pop_back();
  p.microbatches = 0;
  CHECK_THROWS_WITH(validate(p), Catch::Contains("microbatches"));
  CHECK(is_chain(three_nodes()));
}

TEST_CASE("a plan prints itself as a table", "[place]") {
  const plan p = evaluate(settings(), three_nodes(), 2, {{0}, {1, 2}});
  const std::string text = to_string(p);
  CHECK_THAT(text,
             Catch::Contains("tp 2, pp 2, dp 2 (8 devices)") && Catch::Contains("87.500000 s per batch"));
  CHECK_THAT(text, Catch::Contains("    1  1..2"));
  plan none;
  none.smallest_memory_need = bytes{3.0 * 1073741824.0};
  none.memory_per_device = bytes{2.0 * 1073741824.0};
  CHECK(to_string(none) == "no feasible plan: needs at least 3.00 GiB per device, has 2.00 GiB\n");
}
