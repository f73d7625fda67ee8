// End-to-end tests of `phaze plan`: the best plan agrees with `phaze estimate` of the same plan, fixed
// choices hold, plans are ranked, Megatron-LM arguments come out, and bad or impossible requests exit 2 / 3.
#include <catch2/catch.hpp>

#include "run_phaze.hpp"

#include <string>

using namespace phaze::e2e;

TEST_CASE("phaze plan finds the best plan and ranks the others; estimate agrees", "[e2e][plan]") {
  const auto j =
      run_json("plan gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --vocab 51200 --top 4");
  REQUIRE(j.at("top").size() == 4);
  double previous = 0.0;
  for (const auto& p : j.at("top")) {
    CHECK(p.at("fits") == true);
    CHECK(p.at("time_per_batch_s").get<double>() >= previous);
    previous = p.at("time_per_batch_s").get<double>();
  }
  CHECK(j.at("time_per_batch_s") == j.at("top")[0].at("time_per_batch_s"));
  CHECK(j.at("plans_feasible").get<int>() >= 4);
  // The same plan through `phaze estimate` gives the same time.
  const auto& plan = j.at("plan");
  std::string args = "estimate gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --vocab 51200";
  args += " --tp " + std::to_string(plan.at("tp").get<int>()) + " --pp " +
          std::to_string(plan.at("pp").get<int>());
  args += " --microbatch " + std::to_string(plan.at("microbatch").get<int>());
  args += " --recompute " + plan.at("recompute").get<std::string>();
  if (plan.at("sequence_parallel").get<bool>()) args += " --sequence-parallel";
  // The plan's stages may be uneven: give estimate the same split.
  std::string blocks;
  for (const auto& stage : plan.at("stages")) {
    blocks += (blocks.empty() ? "" : ",") + std::to_string(stage.at("blocks").get<int>());
  }
  args += " --stage-blocks " + blocks;
  const auto e = run_json(args);
  CHECK(e.at("time_per_batch_s").get<double>() ==
        Approx(j.at("time_per_batch_s").get<double>()).epsilon(1e-9));
}

TEST_CASE("phaze plan keeps the choices it is given and emits Megatron-LM arguments", "[e2e][plan]") {
  const auto j = run_json(
      "plan llama2-7b --device h100-sxm --devices 16 --global-batch 32 --tp 4 --recompute none --top 3");
  for (const auto& p : j.at("top")) {
    CHECK(p.at("plan").at("tp") == 4);
    CHECK(p.at("plan").at("recompute") == "none");
  }
  const auto m =
      run_phaze("plan llama2-7b --device h100-sxm --devices 16 --global-batch 32 --tp 4 --emit megatron");
  CHECK(m.status == 0);
  CHECK(contains(m.out, "--tensor-model-parallel-size 4"));
  CHECK(contains(m.out, "--num-layers 32"));
  CHECK(contains(m.out, "--global-batch-size 32"));
}

TEST_CASE("phaze plan: impossible requests exit 2, plans that cannot fit exit 3", "[e2e][plan]") {
  const auto none_fit = run_phaze("plan llama2-70b --device v100-16gb --devices 2 --global-batch 8");
  CHECK(none_fit.status == 3);
  CHECK(contains(none_fit.err, "no plan fits"));
  CHECK(contains(none_fit.err, "per device"));
  const auto zero = run_phaze("plan gpt2 --device a100-80gb --devices 0 --global-batch 8");
  CHECK(zero.status == 2);
  const auto bad_tp = run_phaze("plan gpt2 --device a100-80gb --devices 8 --global-batch 8 --tp 5");
  CHECK(bad_tp.status == 2);
}

TEST_CASE("phaze plan on a model: every exact placer finds the same plans; uniform never beats them",
          "[e2e][plan]") {
  // GPT-2 has 14 layer nodes, few enough for the brute-force oracle.
  const std::string small = "plan gpt2 --device v100-16gb --devices 8 --global-batch 64 --top 3";
  const auto chain = run_json(small);
  for (const char* placer : {"downset", "brute"}) {
    const auto other = run_json(small + " --placer " + placer);
    INFO(placer);
    REQUIRE(other.at("top").size() == chain.at("top").size());
    for (std::size_t i = 0; i < chain.at("top").size(); ++i) {
      CHECK(other.at("top")[i].at("time_per_batch_s") == chain.at("top")[i].at("time_per_batch_s"));
      CHECK(other.at("top")[i].at("plan") == chain.at("top")[i].at("plan"));
    }
  }
  // A model too large for the oracle is refused with the limit.
  const auto r = run_phaze("plan gpt2-xl --device a100-80gb --devices 8 --global-batch 8 --placer brute");
  CHECK(r.status == 2);
  CHECK(contains(r.err, "at most 16 nodes"));
  // Uneven stages never lose to the uniform split.
  const std::string args = "plan gpt2-xl --device a100-40gb --devices 16 --global-batch 64";
  const auto uneven = run_json(args);
  const auto uniform = run_json(args + " --placer uniform");
  CHECK(uneven.at("placement") == "uneven");
  CHECK(uniform.at("placement") == "uniform");
  CHECK(uneven.at("time_per_batch_s").get<double>() <=
        uniform.at("time_per_batch_s").get<double>() * (1 + 1e-12));
}

TEST_CASE("phaze plan --layer-table runs each placer on a table from a file", "[e2e][plan]") {
  const std::string chain = std::string{PHAZE_TEST_DATA_DIR} + "/layer_tables/gpt_small_chain.json";
  const std::string dag = std::string{PHAZE_TEST_DATA_DIR} + "/layer_tables/two_branch_dag.json";
  const auto by_chain = run_json("plan --layer-table '" + chain + "' --placer chain");
  const auto by_downset = run_json("plan --layer-table '" + chain + "' --placer downset");
  const auto by_brute = run_json("plan --layer-table '" + chain + "' --placer brute");
  CHECK(by_chain.at("time_per_batch_s").get<double>() ==
        Approx(by_brute.at("time_per_batch_s").get<double>()).epsilon(1e-12));
  CHECK(by_downset.at("time_per_batch_s").get<double>() ==
        Approx(by_brute.at("time_per_batch_s").get<double>()).epsilon(1e-12));
  const auto dag_downset = run_json("plan --layer-table '" + dag + "' --placer downset");
  const auto dag_brute = run_json("plan --layer-table '" + dag + "' --placer brute");
  CHECK(dag_downset.at("time_per_batch_s").get<double>() ==
        Approx(dag_brute.at("time_per_batch_s").get<double>()).epsilon(1e-12));
  // The chain placer refuses a DAG, the uniform placer needs the degrees: exit 2 with the reason.
  const auto refused = run_phaze("plan --layer-table '" + dag + "' --placer chain");
  CHECK(refused.status == 2);
  CHECK(contains(refused.err, "downset"));
  const auto uniform = run_phaze("plan --layer-table '" + chain + "' --placer uniform");
  CHECK(uniform.status == 2);
  CHECK(contains(uniform.err, "--tp, --pp and --dp"));
  const auto fixed = run_json("plan --layer-table '" + chain + "' --placer uniform --tp 2 --pp 2 --dp 2");
  CHECK(fixed.at("time_per_batch_s").get<double>() >=
        by_brute.at("time_per_batch_s").get<double>() * (1 - 1e-12));
}
