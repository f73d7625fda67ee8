// The ILP scheduler against the exhaustive oracle on hundreds of random DAGs (issue: "the ILP equals an
// exhaustive scheduler's optimum, the list schedule is never better than it, and every bound is never above
// it"), with every schedule checked by the independent validator.
#include <phaze/sched/bounds.hpp>
#include <phaze/sched/exhaustive.hpp>
#include <phaze/sched/ilp.hpp>
#include <phaze/sched/list_scheduler.hpp>
#include <phaze/sched/validator.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "random_problems.hpp"

using namespace phaze;
using namespace phaze::sched;

namespace {
bool same_time(seconds a, seconds b) {
  return std::abs(a.value() - b.value()) <= 1e-7 * std::max(1.0, b.value());
}
}  // namespace

TEST_CASE("ILP equals the exhaustive optimum on random DAGs, list and bounds bracket it", "[sched][ilp]") {
  std::mt19937 rng(20240722);
  int skipped = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const problem p = testing::random_problem(rng);
    INFO("trial " << trial << ": " << p.size() << " tasks, " << p.tensor_cores << " tensor / "
                  << p.vector_cores << " vector cores");
    const schedule optimum = exhaustive_schedule(p);
    ilp_report report;
    const schedule ilp = ilp_schedule(p, {}, &report);
    const schedule list = list_schedule(p);
    const bounds b = lower_bounds(p);

    REQUIRE(check_schedule(p, optimum).violation == "");
    REQUIRE(check_schedule(p, ilp).violation == "");
    REQUIRE(check_schedule(p, list).violation == "");
    CHECK(ilp.status == solve_status::optimal);
    CHECK(same_time(ilp.makespan, optimum.makespan));
    CHECK(list.makespan.value() >= optimum.makespan.value() * (1 - 1e-12));
    CHECK(b.critical_path.value() <= optimum.makespan.value() * (1 + 1e-12));
    CHECK(b.work.value() <= optimum.makespan.value() * (1 + 1e-12));
    CHECK(ilp.lower_bound.value() <= ilp.makespan.value() * (1 + 1e-12));
    skipped += report.skipped ? 1 : 0;
  }
  // Both paths are exercised: some problems are settled by the bounds alone, most need the ILP.
  CHECK(skipped > 0);
  CHECK(skipped < 300);
}

TEST_CASE("Single-core pools force every pair sharing them into an order", "[sched][ilp]") {
  problem p;
  p.tensor_cores = 1;
  p.vector_cores = 1;
  for (int i = 0; i < 4; ++i)
    p.tasks.push_back({std::to_string(i), resource::tensor, seconds{3}, seconds{3}, {}});
  const schedule s = ilp_schedule(p);
  REQUIRE(check_schedule(p, s).violation == "");
  CHECK(same_time(s.makespan, seconds{12}));
}

TEST_CASE("Capacity cuts: three one-core tasks on two cores cannot all overlap", "[sched][ilp]") {
  // Optimal: two tasks in parallel on one core each, the third after: 2 * 4 = 8 (all-cores takes 5 each).
  problem p;
  p.tensor_cores = 2;
  p.vector_cores = 1;
  for (int i = 0; i < 3; ++i)
    p.tasks.push_back({std::to_string(i), resource::tensor, seconds{4}, seconds{5}, {}});
  const schedule s = ilp_schedule(p);
  REQUIRE(check_schedule(p, s).violation == "");
  CHECK(same_time(s.makespan, seconds{8}));
  CHECK(same_time(exhaustive_schedule(p).makespan, seconds{8}));
}

TEST_CASE("A time limit returns the best schedule found with its proven gap, never a silent guess",
          "[sched][ilp]") {
  std::mt19937 rng(7);
  testing::random_problem_options big;
  big.max_tasks = 30;
  big.edge_one_in = 12;
  big.max_tensor_cores = 3;
  int limited = 0;
  for (int trial = 0; trial < 20; ++trial) {
    problem p = testing::random_problem(rng, big);
    ilp_options o;
    o.time_limit = seconds{0.02};
    const schedule s = ilp_schedule(p, o);
    REQUIRE(check_schedule(p, s).violation == "");
    if (s.status == solve_status::optimal) {
      CHECK(s.gap() == Approx(0.0).margin(1e-9));
    } else {
      ++limited;
      CHECK(s.status == solve_status::time_limit);
      CHECK(s.lower_bound.value() <= s.makespan.value());
      CHECK(s.lower_bound.value() >= lower_bounds(p).best().value() * (1 - 1e-12));
    }
  }
  CHECK(limited > 0);  // the limit was really hit at least once
}

TEST_CASE("The ILP prints itself as LP text", "[sched][ilp]") {
  problem p;
  p.tensor_cores = 2;
  p.vector_cores = 1;
  p.tasks.push_back({"a", resource::tensor, seconds{4}, seconds{3}, {}});
  p.tasks.push_back({"b", resource::tensor, seconds{4}, seconds{3}, {}});
  p.tasks.push_back({"c", resource::vector, seconds{1}, seconds{1}, {0, 1}});
  const auto path = std::filesystem::temp_directory_path() / "phaze-ilp-test.lp";
  write_ilp(p, path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  CHECK(text.str().find("Minimize") != std::string::npos);
  CHECK(text.str().find("Generals") != std::string::npos);      // mode and ordering variables are integer
  CHECK(text.str().find("all_cores_0a") != std::string::npos);  // columns are named after the tasks
  CHECK(text.str().find("order_0a_before_1b") != std::string::npos);
  CHECK_THROWS_AS(write_ilp(p, "/nonexistent-dir/x.lp"), input_error);
}
