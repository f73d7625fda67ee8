// The schedule validator rejects planted invalid schedules of every kind and accepts valid ones.
#include <phaze/sched/list_scheduler.hpp>
#include <phaze/sched/validator.hpp>

#include <catch2/catch.hpp>

using namespace phaze;
using namespace phaze::sched;

namespace {
// a, b: tensor tasks (b after a); c: vector task; d: tensor task unordered with a and b; e: a marker.
problem sample() {
  problem p;
  p.tensor_cores = 2;
  p.vector_cores = 1;
  p.tasks.push_back({"a", resource::tensor, seconds{4}, seconds{3}, {}});
  p.tasks.push_back({"b", resource::tensor, seconds{2}, seconds{1}, {0}});
  p.tasks.push_back({"c", resource::vector, seconds{1}, seconds{1}, {1}});
  p.tasks.push_back({"d", resource::tensor, seconds{5}, seconds{3}, {}});
  p.tasks.push_back({"e", resource::none, seconds{0}, seconds{0}, {2}});
  return p;
}

// A valid schedule: a on core 0 [0,4), d on core 1 [0,5), b on core 0 [4,6), c [6,7), e at 7.
schedule valid() {
  schedule s;
  s.tasks.resize(5);
  s.tasks[0] = {seconds{0}, false, {0, -1}};
  s.tasks[1] = {seconds{4}, false, {0, -1}};
  s.tasks[2] = {seconds{6}, false, {-1, 0}};
  s.tasks[3] = {seconds{0}, false, {1, -1}};
  s.tasks[4] = {seconds{7}, false, {-1, -1}};
  s.makespan = seconds{7};
  return s;
}

std::string violation_of(const schedule& s) {
  return check_schedule(sample(), s).violation;
}
}  // namespace

TEST_CASE("The validator accepts a valid schedule", "[sched][validator]") {
  CHECK(violation_of(valid()) == "");
  const problem p = sample();
  CHECK(check_schedule(p, list_schedule(p)).ok());
}

TEST_CASE("The validator rejects planted invalid schedules of each kind", "[sched][validator]") {
  using Catch::Matchers::Contains;
  SECTION("wrong number of tasks") {
    schedule s = valid();
    s.tasks.pop_back();
    CHECK_THAT(violation_of(s), Contains("places 4 tasks"));
  }
  SECTION("precedence: b starts before a ends") {
    schedule s = valid();
    s.tasks[1].start = seconds{3};
    s.tasks[1].core[0] = 1;  // on the other core, so only precedence is broken... but d is there: move d
    s.tasks[3].start = seconds{6};
    s.makespan = seconds{11};
    s.tasks[2].start = seconds{5};
    s.tasks[4].start = seconds{6};
    CHECK_THAT(violation_of(s), Contains("before its predecessor"));
  }
  SECTION("capacity: two one-core tasks on the same core at once") {
    schedule s = valid();
    s.tasks[3].core[0] = 0;  // d joins a on core 0
    CHECK_THAT(violation_of(s), Contains("overlap in time on the same tensor core"));
  }
  SECTION("exclusivity: an all-cores task overlaps another task of its pool") {
    schedule s = valid();
    s.tasks[0] = {seconds{0}, true, {-1, -1}};  // a spread over both cores [0,3) while d runs
    s.tasks[1].start = seconds{3};
    s.tasks[2].start = seconds{5};
    s.tasks[4].start = seconds{6};
    CHECK_THAT(violation_of(s), Contains("overlap in time"));
  }
  SECTION("core index outside the pool") {
    schedule s = valid();
    s.tasks[3].core[0] = 2;
    CHECK_THAT(violation_of(s), Contains("outside its pool"));
  }
  SECTION("a core named in a pool the task does not hold") {
    schedule s = valid();
    s.tasks[0].core[1] = 0;
    CHECK_THAT(violation_of(s), Contains("does not hold"));
  }
  SECTION("an all-cores task that also names a core") {
    schedule s = valid();
    s.tasks[3] = {seconds{7}, true, {1, -1}};
    s.makespan = seconds{10};
    s.tasks[4].start = seconds{7};
    CHECK_THAT(violation_of(s), Contains("does not hold"));
  }
  SECTION("timing: negative start") {
    schedule s = valid();
    s.tasks[3].start = seconds{-1};
    CHECK_THAT(violation_of(s), Contains("negative"));
  }
  SECTION("timing: makespan is not the last finish") {
    schedule s = valid();
    s.makespan = seconds{6.5};
    CHECK_THAT(violation_of(s), Contains("makespan"));
  }
  SECTION("a lower bound above the makespan") {
    schedule s = valid();
    s.lower_bound = seconds{8};
    CHECK_THAT(violation_of(s), Contains("lower bound"));
  }
  SECTION("a marker task claiming all cores") {
    schedule s = valid();
    s.tasks[4].all_cores = true;
    CHECK_THAT(violation_of(s), Contains("holds no cores"));
  }
}

TEST_CASE("assign_cores colours one-core tasks within each pool's capacity", "[sched][validator]") {
  const problem p = sample();
  schedule s = valid();
  for (auto& t : s.tasks) t.core[0] = t.core[1] = -1;
  REQUIRE(assign_cores(p, s));
  CHECK(check_schedule(p, s).ok());
  // Three tensor tasks at once on two cores cannot be coloured.
  s.tasks[1].start = seconds{0};
  CHECK_FALSE(assign_cores(p, s));
}

TEST_CASE("Problem validation names the broken rule", "[sched][validator]") {
  problem p = sample();
  p.tasks[0].preds.push_back(3);  // a later task as predecessor
  CHECK_THROWS_WITH(validate(p), Catch::Matchers::Contains("earlier task"));
  p = sample();
  p.tasks[1].one_core = seconds{-1};
  CHECK_THROWS_WITH(validate(p), Catch::Matchers::Contains("non-negative"));
  p = sample();
  p.vector_cores = 0;
  CHECK_THROWS_AS(validate(p), input_error);
}
