// Iteration times from pasted training logs (io/training_log.hpp): each framework's line, the warm-up
// dropped, the median taken, rates turned into seconds, and a log without any refused with what to give.
#include <phaze/io/training_log.hpp>

#include <catch2/catch.hpp>

using namespace phaze;

TEST_CASE("training logs: Megatron-LM, NeMo and torchtitan lines", "[io][training_log]") {
  const auto its = io::logged_iterations(
      " iteration       10/  500000 | consumed samples: 640 | elapsed time per iteration (ms): 1234.5 | lr: 1\n"
      "Epoch 0: : 10/100 [00:52<07:48] reduced_train_loss=3.1, global_step=9.000, train_step_timing in s=5.18\n"
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
