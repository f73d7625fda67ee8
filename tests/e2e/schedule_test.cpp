// End-to-end tests of `phaze schedule`: a layer's schedule as JSON and as a table, the ILP as LP text, and
// the exit status and message for bad input.
#include <catch2/catch.hpp>

#include "run_phaze.hpp"

#include <filesystem>
#include <string>

using namespace phaze::e2e;

TEST_CASE("phaze schedule prints a valid, optimal schedule of both passes as JSON", "[e2e][schedule]") {
  const auto j = run_json("schedule gpt3-175b --device tpuv4-like --tp 8 --sequence-parallel");
  CHECK(j.at("model") == "gpt3-175b");
  CHECK(j.at("device") == "tpuv4-like");
  CHECK(j.at("role") == "block");
  CHECK(j.at("tp") == 8);
  REQUIRE(j.at("passes").size() == 2);
  for (const auto& pass : j.at("passes")) {
    CHECK(pass.at("status") == "optimal");
    const double makespan = pass.at("makespan_s");
    CHECK(makespan >= pass.at("critical_path_s").get<double>() * (1 - 1e-9));
    CHECK(makespan >= pass.at("work_bound_s").get<double>() * (1 - 1e-9));
    double last_end = 0.0;
    for (const auto& op : pass.at("ops")) {
      CHECK(op.at("end_s").get<double>() >= op.at("start_s").get<double>());
      last_end = std::max(last_end, op.at("end_s").get<double>());
    }
    CHECK(last_end == Approx(makespan).epsilon(1e-9));
  }
  // The block with sequence parallelism has its all-gathers and reduce-scatters among the ops.
  bool has_collective = false;
  for (const auto& op : j.at("passes")[0].at("ops"))
    has_collective = has_collective || op.at("name") == "attn_enter";
  CHECK(has_collective);
}

TEST_CASE("phaze schedule: the list solver, one pass, the table form and the LP text", "[e2e][schedule]") {
  const auto list = run_json("schedule llama2-7b --device tpuv4-like --pass backward --solver list");
  REQUIRE(list.at("passes").size() == 1);
  CHECK(list.at("passes")[0].at("pass") == "backward");
  CHECK(list.at("passes")[0].at("solver") == "list");
  // The list schedule states the lower bound it is measured against: its gap is never above what the bound
  // allows, and where it meets the critical path (GPT-2's forward pass on the reference design, one chain of
  // ops) it is proven optimal with a zero gap.
  const auto& pass = list.at("passes")[0];
  CHECK(pass.at("lower_bound_s").get<double>() > 0.0);
  CHECK(pass.at("gap").get<double>() ==
        Approx((pass.at("makespan_s").get<double>() - pass.at("lower_bound_s").get<double>()) /
               pass.at("makespan_s").get<double>()));
  const auto chain = run_json("schedule gpt2 --device tpuv4-like --pass forward --solver list");
  CHECK(chain.at("passes")[0].at("status") == "optimal");
  CHECK(chain.at("passes")[0].at("gap").get<double>() == 0.0);

  const auto table = run_phaze("schedule bert-large --device tpuv4-like --layer 0");
  CHECK(table.status == 0);
  CHECK(contains(table.out, "bert-large layer 0 (embedding)"));
  CHECK(contains(table.out, "word_embedding"));
  CHECK(contains(table.out, "makespan"));

  const auto lp = temp_path("layer.lp");
  const auto emitted =
      run_phaze("schedule gpt2 --device tpuv4-like --pass backward --emit-lp '" + lp.string() + "'");
  CHECK(emitted.status == 0);
  const std::string text = read_file(lp);
  CHECK(contains(text, "Minimize"));
  CHECK(contains(text, "makespan"));
  std::filesystem::remove(lp);
}

TEST_CASE("phaze schedule rejects bad input with exit 2 and a message naming it", "[e2e][schedule]") {
  const auto layer = run_phaze("schedule gpt2 --device tpuv4-like --layer 14");
  CHECK(layer.status == 2);
  CHECK(contains(layer.err, "--layer 14"));
  const auto device = run_phaze("schedule gpt2 --device tpu5");
  CHECK(device.status == 2);
  CHECK(contains(device.err, "unknown device"));
  const auto tp = run_phaze("schedule gpt2 --device tpuv4-like --tp 5");
  CHECK(tp.status == 2);
  CHECK(contains(tp.err, "tensor-parallel width must divide the number of attention heads"));
  const auto missing = run_phaze("schedule gpt2");
  CHECK(missing.status == 2);
  CHECK(contains(missing.err, "--device"));
}
