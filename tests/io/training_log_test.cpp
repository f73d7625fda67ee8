// Iteration times from pasted training logs (io/training_log.hpp): each framework's line, the warm-up
// dropped, the median taken, rates turned into seconds, and a log without any refused with what to give.
#include <phaze/io/training_log.hpp>

#include <catch2/catch.hpp>

using namespace phaze;

TEST_CASE("training logs: Megatron-LM, NeMo and torchtitan lines", "[io][training_log]") {
  const auto its = io::logged_iterations(
      " iteration       10/  500000 | consumed samples: 640 | elapsed time per iteration (ms): 1234.5 | lr: "
      "1\n"
      "Epoch 0: : 10/100 [00:52<07:48] reduced_train_loss=3.1, global_step=9.000, train_step_timing in "
      "s=5.18\n"
      "[rank0]: step: 10  loss:  7.9  memory: 30.1GiB(38.01%)  tps: 6,283  tflops: 363.86  mfu: 36.79%\n"
      "unrelated line with numbers 12.5\n");
  REQUIRE(its.size() == 3);
  CHECK(its[0].seconds == Approx(1.2345));
  CHECK(its[1].seconds == Approx(5.18));
  CHECK(its[2].tokens_per_s == Approx(6283.0));
  CHECK(its[2].seconds == 0.0);
}

TEST_CASE("training logs: the median after the warm-up", "[io][training_log]") {
  std::string log;
  for (const double ms : {9000.0, 7000.0, 2000.0, 2400.0, 2100.0})
    log += "elapsed time per iteration (ms): " + std::to_string(ms) + "\n";
  CHECK(io::logged_step_seconds(log, 0.0, "log") == Approx(2.1));
  // Three iterations or fewer: all of them count.
  CHECK(io::logged_step_seconds("train_step_timing in s=1.0\ntrain_step_timing in s=3.0\n", 0.0, "log") ==
        Approx(2.0));
  // torchtitan's per-device rate over the plan's tokens per device.
  CHECK(io::logged_step_seconds("tps: 4,096\n", 8192.0, "log") == Approx(2.0));
  CHECK_THROWS_WITH(io::logged_step_seconds("no times\n", 1.0, "log 'x'"),
                    Catch::Contains("reports no iteration time"));
}

TEST_CASE("training logs: colours, hostile numbers and impossible times", "[io][training_log]") {
  // torchtitan colours its fields: the escape sequences are skipped.
  const auto its = io::logged_iterations("\x1b[31mstep: 10\x1b[39m  \x1b[34mtps: 1,234\x1b[39m\n");
  REQUIRE(its.size() == 1);
  CHECK(its[0].tokens_per_s == Approx(1234.0));
  // A number past a double's range is an input error naming the line; a very long one is read linearly.
  CHECK_THROWS_WITH(io::logged_iterations("x\ntrain_step_timing in s=1e400\n", "log 'y'"),
                    Catch::Contains("log 'y', line 2"));
  const std::string digits(200000, '9');
  CHECK_THROWS_AS(io::logged_iterations("tps: " + digits + "\n"), input_error);
  CHECK(io::logged_iterations("tps: " + std::string(100000, ' ') + "\n").empty());
  // A word that only ends in "tps" is not torchtitan's field.
  CHECK(io::logged_iterations("steps: 5\n").empty());
  // Iterations of 0 or more than 1e6 s are refused.
  CHECK_THROWS_WITH(io::logged_step_seconds("elapsed time per iteration (ms): 0.0\n", 0.0, "log"),
                    Catch::Contains("must lie in (0, 1e6]"));
  CHECK_THROWS_WITH(io::logged_step_seconds("train_step_timing in s=2e6\n", 0.0, "log"),
                    Catch::Contains("must lie in (0, 1e6]"));
}
