// The co-search engine: pruning by the sound bound changes nothing but the work done (best design, its
// throughput and the Pareto front equal the exhaustive run's), results do not depend on how a round is
// evaluated (serial, threads, any order), a resumed search gives the same answer without redoing finished
// designs, and every evaluated design's plan is exactly what estimate_step gives for it.
#include <phaze/hw/space.hpp>
#include <phaze/io/search_json.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/sched/ilp.hpp>
#include <phaze/search/baselines.hpp>
#include <phaze/search/engine.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

using namespace phaze;

namespace {
/// A few hundred designs around the PHAZE template, at PHAZE's cluster and batch.
search::spec small_spec(const char* model) {
  using namespace phaze::literals;
  search::spec s;
  s.model = zoo::get(model);
  s.devices = 64;
  s.global_batch = 256;
  s.knobs.microbatches = {1, 2};
  s.space = hw::space{hw::tpuv4_like}
                .set_pow2(hw::axis::tensor_cores, 1, 16)
                .set_pow2(hw::axis::tc_width, 32, 256)
                .set_same_as(hw::axis::tc_depth, hw::axis::tc_width)
                .set_pow2(hw::axis::vector_cores, 1, 4)
                .set_same_as(hw::axis::vc_width, hw::axis::tc_width)
                .set_pow2(hw::axis::global_buffer, (16_MiB).value(), (64_MiB).value())
                .set_area_budget(hw::area_of(hw::tpuv4_like))
                .set_min_area(0.3 * hw::area_of(hw::tpuv4_like));
  return s;
}

/// A map that evaluates a round on several threads, in a scrambled order.
std::vector<search::design_result> threaded_map(std::size_t n,
                                                const std::function<search::design_result(std::size_t)>& f) {
  std::vector<search::design_result> out(n);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 3; ++t) {
    pool.emplace_back([&] {
      for (std::size_t k; (k = next++) < n;) out[n - 1 - k] = f(n - 1 - k);
    });
  }
  for (auto& t : pool) t.join();
  return out;
}

void same_results(const search::summary& a, const search::summary& b) {
  CHECK(a.best.index == b.best.index);
  CHECK(a.best.samples_per_s == b.best.samples_per_s);
  REQUIRE(a.top.size() == b.top.size());
  for (std::size_t i = 0; i < a.top.size(); ++i) {
    CHECK(a.top[i].index == b.top[i].index);
    CHECK(a.top[i].samples_per_s == b.top[i].samples_per_s);
  }
  REQUIRE(a.pareto.size() == b.pareto.size());
  for (std::size_t i = 0; i < a.pareto.size(); ++i) {
    CHECK(a.pareto[i].index == b.pareto[i].index);
    CHECK(a.pareto[i].samples_per_s == b.pareto[i].samples_per_s);
  }
}
}  // namespace

TEST_CASE("Pruned and exhaustive searches agree on the best design and the Pareto front", "[search]") {
  for (const char* model : {"gpt2-xl", "llama2-7b"}) {
    const auto s = small_spec(model);
    REQUIRE(s.space.count() > 50);
    search::options pruned;
    pruned.baselines = false;  // the designs' results alone are compared
    pruned.top = 30;           // the top list is exact too: a long one keeps more designs from being pruned
    search::options exhaustive = pruned;
    exhaustive.exhaustive = true;
    const auto a = search::run(s, pruned);
    const auto b = search::run(s, exhaustive);
    INFO(model << ": " << a.designs << " designs, " << a.pruned << " pruned");
    same_results(a, b);
    CHECK(b.pruned == 0);
    CHECK(a.pruned > 0);
    CHECK(a.evaluated + a.pruned + a.infeasible == a.designs);
    // The bound is sound: no evaluated design beats its own upper bound.
    for (const auto& r : b.top) CHECK(r.samples_per_s <= r.upper_bound_samples_per_s);
  }
}

TEST_CASE("Refined on ILP schedules, the pruned search reports what refining every design would",
          "[search]") {
  // The oracle: every design of the space placed on ILP schedules (no pruning, no bounds), then ranked.
  auto s = small_spec("gpt2-xl");
  s.knobs.microbatches = {1};
  s.knobs.recompute = {model::recompute::selective, model::recompute::full};
  sched::ilp_options ilp;
  ilp.max_nodes = 100;  // deterministic, and fast enough for a test
  search::options o;
  o.baselines = false;
  o.top = 5;
  o.refine = sched::any_scheduler{sched::ilp_scheduler{ilp}};
  const auto fast = search::run(s, o);
  CHECK(fast.scheduler == "ilp");
  CHECK(fast.refined > 0);
  CHECK(fast.pruned + fast.infeasible + fast.evaluated == fast.designs);
  std::vector<search::design_result> every;
  bool improved = false;
  for (std::uint64_t i = 0; i < s.space.count(); ++i) {
    every.push_back(search::refine_design(s, s.space.at(i), i, o, *o.refine));
    const auto listed = search::evaluate_design(s, s.space.at(i), i);
    // Never slower than the list schedules, never faster than lower-bound layer times allow.
    CHECK(every.back().samples_per_s >= listed.samples_per_s * (1 - 1e-12));
    CHECK(every.back().samples_per_s <= listed.samples_per_s / (1 - listed.schedule_gap) * (1 + 1e-9));
    improved = improved || every.back().samples_per_s > listed.samples_per_s * (1 + 1e-6);
  }
  CHECK(improved);  // the ILP matters on this space, so the comparison below is not trivial
  auto ranked = every;
  std::sort(ranked.begin(), ranked.end(), search::ranks_before);
  ranked.resize(o.top);
  const auto front = search::pareto_front(every);
  REQUIRE(fast.top.size() == ranked.size());
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    CHECK(fast.top[i].index == ranked[i].index);
    CHECK(fast.top[i].samples_per_s == ranked[i].samples_per_s);
  }
  REQUIRE(fast.pareto.size() == front.size());
  for (std::size_t i = 0; i < front.size(); ++i) {
    CHECK(fast.pareto[i].index == front[i].index);
    CHECK(fast.pareto[i].samples_per_s == front[i].samples_per_s);
  }
}

TEST_CASE("Progress: `open` bounds the designs still to evaluate, counting the ones pruning rules out",
          "[search]") {
  auto s = small_spec("gpt2-xl");
  s.knobs.microbatches = {1};
  sched::ilp_options ilp;
  ilp.max_nodes = 100;
  search::options o;
  o.baselines = false;
  o.round = 8;
  o.top = 3;
  o.recount_every_s = 0.0;  // recount after every round
  o.refine = sched::any_scheduler{sched::ilp_scheduler{ilp}};
  std::vector<search::progress> first, refining;
  search::hooks h;
  h.report = [&](const search::progress& p) { (p.refining ? refining : first).push_back(p); };
  const auto sum = search::run(s, o, h);
  REQUIRE(first.size() >= 3);
  CHECK(sum.pruned > 0);
  const std::uint64_t placed = first.back().placed;
  CHECK(placed == sum.evaluated + sum.infeasible);
  bool ahead = false;  // some designs not reached yet are already known to be pruned
  for (std::size_t k = 0; k < first.size(); ++k) {
    const auto& p = first[k];
    INFO("report " << k << ": " << p.done << " of " << p.total << ", " << p.placed << " placed, " << p.open
                   << " open");
    CHECK(placed - p.placed <= p.open);
    CHECK(p.open <= p.total - p.done);
    if (k > 0) CHECK(p.open <= first[k - 1].open);
    ahead = ahead || p.open < p.total - p.done;
  }
  CHECK(ahead);
  CHECK(first.back().done == first.back().total);
  CHECK(first.back().open == 0);
  // The refinement: at most `open` more placed again, and as many as summary::refined in all.
  REQUIRE_FALSE(refining.empty());
  CHECK(refining.back().open == 0);
  CHECK(refining.back().placed == sum.refined);
  for (const auto& p : refining) CHECK(sum.refined - p.placed <= p.open);
}

TEST_CASE("Search results do not depend on how rounds are evaluated", "[search]") {
  const auto s = small_spec("gpt2-xl");
  search::hooks threads;
  threads.map = threaded_map;
  search::options o;
  o.baselines = false;
  o.round = 16;
  const auto serial = search::run(s, o);
  const auto parallel = search::run(s, o, threads);
  same_results(serial, parallel);
  CHECK(serial.pruned == parallel.pruned);
  CHECK(serial.evaluated == parallel.evaluated);
}

TEST_CASE("A resumed search gives the same answer and skips finished designs", "[search]") {
  const auto s = small_spec("gpt2-xl");
  search::options o;
  o.baselines = false;
  o.round = 16;
  // The first run is "killed" after 40 designs: keep what it wrote, through the results.jsonl form.
  std::vector<nlohmann::json> lines;
  search::hooks first;
  first.finished = [&](const search::design_result& r) {
    if (lines.size() < 40) lines.push_back(io::result_json(r));
  };
  const auto full = search::run(s, o, first);
  std::vector<search::design_result> resumed;
  for (const auto& j : lines) {
    auto r = io::result_from_json(j, s);
    search::restore_estimate(s, r);
    resumed.push_back(r);
  }
  std::atomic<int> evaluated_again{0};
  search::hooks second;
  second.finished = [&](const search::design_result& r) {
    for (const auto& done : resumed) {
      if (done.index == r.index) ++evaluated_again;
    }
  };
  const auto rest = search::run(s, o, second, resumed);
  same_results(full, rest);
  CHECK(evaluated_again == 0);
  CHECK(rest.evaluated == full.evaluated);
  CHECK(rest.pruned == full.pruned);
}

TEST_CASE("A record whose whole numbers are out of range or not whole is refused, not converted",
          "[search]") {
  const auto s = small_spec("gpt2-xl");
  search::options o;
  o.baselines = false;
  std::vector<nlohmann::json> lines;
  search::hooks keep;
  keep.finished = [&](const search::design_result& r) {
    if (r.status == search::outcome::evaluated && lines.empty()) lines.push_back(io::result_json(r));
  };
  (void)search::run(s, o, keep);
  REQUIRE_FALSE(lines.empty());
  CHECK_NOTHROW(io::result_from_json(lines.front(), s));
  // A fuzzer's record: 84444444444444444444444444 parses as a double beyond every integer type.
  const std::vector<std::pair<std::string, nlohmann::json>> bad{{"/configurations", 8.4444444444444e25},
                                                                {"/configurations", -3},
                                                                {"/index", 1.5},
                                                                {"/plan/tp", 1e30},
                                                                {"/plan/microbatch", 2.5},
                                                                {"/plan/stage_blocks/0", 1e300}};
  for (const auto& [where, value] : bad) {
    INFO(where << " = " << value.dump());
    nlohmann::json j = lines.front();
    j[nlohmann::json::json_pointer(where)] = value;
    CHECK_THROWS_AS(io::result_from_json(j, s), input_error);
  }
}

TEST_CASE("The best design's plan is estimate_step's and beats the tpuv4-like baseline", "[search]") {
  const auto s = small_spec("gpt2-xl");
  const auto sum = search::run(s, {});
  const auto& b = sum.best;
  sched::schedule_cache cache;
  const auto e = train::estimate_step(s.model, phaze::test::cluster_of(b.device, b.parallel), b.parallel,
                                      b.knobs, cache, b.split);
  CHECK(e.samples_per_s == Approx(b.samples_per_s).epsilon(1e-12));
  CHECK(e.fits);
  CHECK(b.die_area <= s.space.area_budget());
  // The default options fill the baselines, as search::baselines computes them on the best design.
  const auto& base = sum.baselines;
  const auto again = search::baselines(s, b);
  REQUIRE(base.size() == 3);
  REQUIRE(again.size() == 3);
  for (std::size_t i = 0; i < base.size(); ++i) {
    CHECK(base[i].name == again[i].name);
    CHECK(base[i].result.samples_per_s == again[i].result.samples_per_s);
  }
  CHECK(sum.space == search::describe(s));
  CHECK(base[0].name == "tpuv4-like");
  // Not in this space (its 128 MiB GLB is outside 16..64 MiB), yet the co-searched design is at least as
  // fast.
  CHECK(b.samples_per_s >= base[0].result.samples_per_s);
  // Uneven placement is never slower than the uniform plans on the same design.
  CHECK(b.samples_per_s >= base[2].result.samples_per_s * (1 - 1e-12));
  CHECK(base[1].result.status == search::outcome::evaluated);
}

TEST_CASE("Search specs in JSON: the PHAZE space, and mistakes named", "[search]") {
  const auto s = io::spec_from_json(nlohmann::json::parse(R"({"model": "gpt2", "space": "phaze-default"})"));
  CHECK(s.space.count() == hw::phaze_default_space.count());
  CHECK(s.devices == 1024);
  const auto small = io::spec_from_json(nlohmann::json::parse(R"({"model": "gpt2", "devices": 8,
      "space": {"tensor_cores": {"pow2": [1, 8]}, "tc_width": {"one_of": [64, 128]},
                "tc_depth": {"same_as": "tc_width"}},
      "knobs": {"microbatches": [1, 2], "recompute": ["none", "full"]}})"));
  CHECK(small.space.count() > 0);
  CHECK(small.knobs.recompute.size() == 2);
  auto error_of = [](const char* text) {
    try {
      (void)io::spec_from_json(nlohmann::json::parse(text));
    } catch (const input_error& e) {
      return std::string{e.what()};
    }
    return std::string{"no error"};
  };
  CHECK_THAT(error_of(R"({"model": "gpt2", "devise": 8})"), Catch::Contains("did you mean 'devices'"));
  CHECK_THAT(error_of(R"({"model": "gpt2", "space": {"tensor_cores": {"pow2": [1, 8]}, "tc_widht": 4}})"),
             Catch::Contains("did you mean 'tc_width'"));
  CHECK_THAT(error_of(R"({"model": "gpt2", "knobs": {"microbatches": []}})"), Catch::Contains("non-empty"));
  CHECK_THAT(error_of(R"({"model": "gpt2", "space": {"area_budget_mm2": 10}})"),
             Catch::Contains("holds no design"));
}

TEST_CASE("A spec that admits no plan at all is bad input, found before the search", "[search]") {
  auto s = small_spec("gpt2-xl");
  s.knobs.tensor_parallel = {3};  // divides nothing
  CHECK_THROWS_WITH(search::run(s, {}), Catch::Contains("no admissible plan"));
  s = small_spec("gpt2");
  s.devices = 13;  // prime: pp 13 exceeds gpt2's 12 blocks and dp 13 does not divide the batch
  s.global_batch = 64;
  CHECK_THROWS_WITH(search::run(s, {}), Catch::Contains("no admissible plan"));
}
