// End-to-end tests of `phaze plan`: the best plan agrees with `phaze estimate` of the same plan, fixed
// choices hold, plans are ranked, Megatron-LM arguments come out, and bad or impossible requests exit 2 / 3.
#include <catch2/catch.hpp>

#include "run_phaze.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace phaze::e2e;

namespace {
/// The `phaze estimate` arguments of the plan a `phaze plan --format json` printed (its "plan" object): its
/// degrees, microbatch, recomputation, sequence parallelism and stage split, after `model` (MODEL and the
/// options both commands share).
std::string estimate_args_of(const std::string& model, const nlohmann::json& plan) {
  std::string args = "estimate" + model + " --tp " + std::to_string(plan.at("tp").get<int>()) + " --pp " +
                     std::to_string(plan.at("pp").get<int>()) + " --cp " +
                     std::to_string(plan.at("cp").get<int>()) + " --microbatch " +
                     std::to_string(plan.at("microbatch").get<int>()) + " --recompute " +
                     plan.at("recompute").get<std::string>();
  if (plan.at("sequence_parallel").get<bool>()) args += " --sequence-parallel";
  std::string blocks;
  for (const auto& stage : plan.at("stages")) {
    blocks += (blocks.empty() ? "" : ",") + std::to_string(stage.at("blocks").get<int>());
  }
  return args + " --stage-blocks " + blocks;
}
}  // namespace

TEST_CASE("phaze plan finds the best plan and ranks the others, estimate agrees", "[e2e][plan]") {
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
  // The same plan through `phaze estimate` gives the same time (its stages may be uneven: the same split).
  const auto e = run_json(estimate_args_of(
      " gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --vocab 51200", j.at("plan")));
  CHECK(e.at("time_per_batch_s").get<double>() ==
        Approx(j.at("time_per_batch_s").get<double>()).epsilon(1e-9));
}

TEST_CASE("phaze plan --progress: progress lines on stderr, the report unchanged", "[e2e][plan]") {
  const std::string args = "plan gpt2 --device a100-80gb --devices 8 --global-batch 64";
  const auto quiet = run_phaze(args);
  const auto shown = run_phaze(args + " --progress");
  REQUIRE(shown.status == 0);
  CHECK(shown.out == quiet.out);
  CHECK(contains(shown.err, "phaze: plans "));
  CHECK_FALSE(contains(quiet.err, "phaze: plans "));  // stderr is not a terminal: only with --progress
}

TEST_CASE("phaze plan --cp: the context-parallel size chosen among those listed, estimate agrees",
          "[e2e][plan]") {
  const std::string model =
      " llama3-8b --device h100-sxm --devices 64 --seq 131072 --global-batch 16 --distributed-optimizer";
  const auto j = run_json("plan" + model + " --cp 1,2,4,8,16 --placer uniform");
  const auto& plan = j.at("plan");
  const int cp = plan.at("cp").get<int>();
  CHECK(cp > 1);  // a 128K sequence fits without full recomputation only when split
  CHECK(plan.at("tp").get<int>() * plan.at("pp").get<int>() * plan.at("dp").get<int>() * cp == 64);
  // Never slower than the best plan without context parallelism.
  const auto flat = run_json("plan" + model + " --placer uniform");
  CHECK(j.at("time_per_batch_s").get<double>() <= flat.at("time_per_batch_s").get<double>());
  CHECK(run_json(estimate_args_of(model, plan)).at("time_per_batch_s").get<double>() ==
        Approx(j.at("time_per_batch_s").get<double>()).epsilon(1e-9));
  const auto emitted = run_phaze("plan" + model + " --cp 8 --placer uniform --emit megatron");
  CHECK(emitted.status == 0);
  CHECK(contains(emitted.out, "--context-parallel-size 8"));
  // The default chain placer splits stages under context parallelism too: never slower than the uniform
  // split, and estimate of its split agrees.
  const auto uneven = run_json("plan" + model + " --cp 1,2,4,8,16");
  CHECK(uneven.at("time_per_batch_s").get<double>() <= j.at("time_per_batch_s").get<double>() * (1 + 1e-12));
  CHECK(uneven.at("plan").at("cp").get<int>() > 1);
  CHECK(run_json(estimate_args_of(model, uneven.at("plan"))).at("time_per_batch_s").get<double>() ==
        Approx(uneven.at("time_per_batch_s").get<double>()).epsilon(1e-9));
  // A size that does not divide the devices is named; the interleaved schedule's plans are reported as
  // placed uniformly, which they are.
  const auto three = run_phaze("plan" + model + " --cp 3");
  CHECK(three.status == 2);
  CHECK(contains(three.err, "--cp 3: a context-parallel size must divide the 64 devices"));
  const auto interleaved = run_json("plan" + model + " --cp 8 --schedule interleaved --vp 2");
  CHECK(interleaved.at("placement") == "uniform");
  // Expert parallelism stays with the uniform split: taken when no placer is named (a note on stderr),
  // refused when an uneven one is.
  const std::string mixtral =
      "plan mixtral-8x7b --device h100-sxm --devices 64 --global-batch 256 --ep 8 --distributed-optimizer "
      "--microbatch 1";
  const auto experts = run_phaze(mixtral);
  CHECK(experts.status == 0);
  CHECK(contains(experts.err, "uniform split"));
  CHECK(contains(experts.out, "uniform stages"));
  const auto chain = run_phaze(mixtral + " --placer chain");
  CHECK(chain.status == 2);
  CHECK(contains(chain.err, "--placer uniform"));
}

TEST_CASE("phaze plan chooses expert parallelism for a mixture of experts", "[e2e][plan][moe]") {
  // Without --ep every power of two dividing the experts is searched (a note names them): the best plan
  // is at least as fast as the best at each fixed ep, and equals one of them.
  const std::string base =
      "plan mixtral-8x7b --device h100-sxm --devices 64 --global-batch 256 --microbatch 1";
  const auto chosen = run_phaze(base);
  REQUIRE(chosen.status == 0);
  CHECK(contains(chosen.err, "expert parallelism is searched (--ep 1,2,4,8)"));
  const auto j = run_json(base);
  const double best = j.at("time_per_batch_s").get<double>();
  double fastest_fixed = 1e300;
  for (const int ep : {1, 2, 4, 8}) {
    const auto fixed = run_phaze(base + " --ep " + std::to_string(ep) + " --placer uniform --format json");
    if (fixed.status != 0) continue;
    const auto f = nlohmann::json::parse(fixed.out);
    fastest_fixed = std::min(fastest_fixed, f.at("time_per_batch_s").get<double>());
  }
  CHECK(best == Approx(fastest_fixed).epsilon(1e-9));
  CHECK(j.at("plan").at("ep").get<int>() > 1);
  // Qwen3-30B-A3B on 64 H100s: the search reaches ep 64 and picks expert parallelism too.
  const auto qwen =
      run_json("plan qwen3-30b-a3b --device h100-sxm --devices 64 --global-batch 512 --microbatch 1");
  CHECK(qwen.at("plan").at("ep").get<int>() > 1);
  // A placer that splits stages unevenly keeps ep 1 (no note).
  const auto uneven = run_phaze(base + " --placer chain");
  CHECK(uneven.status == 0);
  CHECK_FALSE(contains(uneven.err, "expert parallelism is searched"));
  // An ep above dp at tp 2 folds the expert groups over the tensor-parallel ranks (etp 1), as Megatron-Core's
  // MoE parallel folding does, and the launch line says so.
  const std::string folded =
      "plan qwen3-30b-a3b --device h100-sxm --devices 32 --global-batch 64 --tp 2 --pp 1 --ep 32 "
      "--microbatch 1";
  const auto f = run_json(folded);
  CHECK(f.at("plan").at("ep") == 32);
  CHECK(f.at("plan").at("etp") == 1);
  const auto line = run_phaze(folded + " --emit megatron");
  REQUIRE(line.status == 0);
  CHECK(contains(line.out, "--expert-model-parallel-size 32 --expert-tensor-parallel-size 1"));
}

TEST_CASE("phaze plan lays a 126-block model out as pp 8 x vp 8 with the embedding and loss counted",
          "[e2e][plan]") {
  // Llama 3.1 405B (HF meta-llama/Llama-3.1-405B's config: 405,853,388,800 parameters) as Megatron-Bridge
  // runs it: 126 blocks + the embedding + the loss = 128 layers in 64 chunks of 2.
  const std::string model = std::string{PHAZE_TEST_DATA_DIR} + "/hf/llama-3.1-405b.json";
  const std::string args =
      " --device h100-sxm --devices 1024 --global-batch 1536 --pp 8 --schedule interleaved "
      "--vp 8 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
      "--precision fp8 --distributed-optimizer";
  const auto j = run_json("plan " + model + args);
  std::vector<int> blocks;
  for (const auto& stage : j.at("plan").at("stages")) blocks.push_back(stage.at("blocks").get<int>());
  CHECK(blocks == std::vector<int>{15, 16, 16, 16, 16, 16, 16, 15});
  CHECK(j.at("plan").at("vp") == 8);
  const auto emitted = run_phaze("plan " + model + args + " --emit megatron");
  REQUIRE(emitted.status == 0);
  CHECK(contains(emitted.out, "--num-layers 126"));
  CHECK(contains(emitted.out, "--pipeline-model-parallel-size 8"));
  CHECK(contains(emitted.out, "--num-virtual-stages-per-pipeline-rank 8"));
  CHECK(contains(emitted.out,
                 "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"));
  // The config's rope_theta and Llama 3.1's rope scaling: they change the model the line trains.
  CHECK(contains(emitted.out, "--rotary-base 500000 --use-rope-scaling --rope-scaling-factor 8"));
}

TEST_CASE("phaze plan plans DeepSeek-V3's config and emits its latent attention", "[e2e][plan][mla]") {
  const std::string v3 = std::string{PHAZE_TEST_DATA_DIR} + "/hf/deepseek-v3.json";
  // core_r0.11.0 has no multi-token prediction: the module is refused by name, and dropped on request.
  const auto mtp = run_phaze(
      "plan " + v3 + " --device h100-sxm --devices 1024 --global-batch 4096 --seq 4096 --emit megatron");
  CHECK(mtp.status == 2);
  CHECK(contains(mtp.err, "--mtp-layers 0"));
  const auto r = run_phaze("plan " + v3 +
                           " --device h100-sxm --devices 1024 --global-batch 4096 --seq 4096 --mtp-layers 0 "
                           "--emit megatron");
  REQUIRE(r.status == 0);
  for (const char* flag :
       {"--multi-latent-attention", "--q-lora-rank 1536", "--kv-lora-rank 512", "--qk-head-dim 128",
        "--qk-pos-emb-head-dim 64", "--v-head-dim 128", "--qk-layernorm", "--num-experts 256",
        "--moe-router-topk 8", "--moe-router-score-function sigmoid", "--moe-layer-freq '([0]*3+[1]*58)'",
        "--moe-shared-expert-intermediate-size 2048"}) {
    INFO(flag);
    CHECK(contains(r.out, flag));
  }
  CHECK_FALSE(contains(r.out, "--expert-model-parallel-size 1 "));
}

TEST_CASE("phaze plan --emit megatron writes Llama 4's expert blocks as a --moe-layer-freq pattern",
          "[e2e][plan][moe]") {
  const std::string maverick = std::string{PHAZE_TEST_DATA_DIR} + "/hf/llama-4-maverick-17b-128e.json";
  const auto r = run_phaze("plan " + maverick +
                           " --device h100-sxm --devices 128 --global-batch 256 --ep 8 --precision fp8 "
                           "--distributed-optimizer --emit megatron");
  REQUIRE(r.status == 0);
  std::string pattern;
  for (int i = 0; i < 48; ++i) pattern += std::string{i > 0 ? "," : ""} + (i % 2 == 1 ? "1" : "0");
  for (const std::string& flag : std::vector<std::string>{
           "--num-experts 128", "--moe-router-topk 1", "--moe-ffn-hidden-size 8192",
           "--ffn-hidden-size 16384", "--moe-shared-expert-intermediate-size 8192",
           "--moe-router-score-function sigmoid", "--moe-layer-freq '[" + pattern + "]'"}) {
    INFO(flag);
    CHECK(contains(r.out, flag));
  }
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
  CHECK(contains(m.out, "--rotary-base 10000 "));  // Llama 2's rope_theta
  CHECK_FALSE(contains(m.out, "--use-rope-scaling"));
  // The emitted plan's time is printed, and --format json gives it with the arguments and the launch.
  CHECK(contains(m.out, "# phaze: "));
  const auto launch =
      run_json("plan llama2-7b --device h100-sxm --devices 16 --global-batch 32 --tp 4 --emit megatron");
  CHECK(launch.at("schema") == "phaze.megatron-launch");
  CHECK(launch.at("plan").at("tp") == 4);
  CHECK(launch.at("time_per_batch_s").get<double>() >=
        launch.at("best_time_per_batch_s").get<double>() * (1 - 1e-9));
  CHECK(m.out.starts_with(launch.at("arguments").get<std::string>()));
  CHECK_FALSE(launch.at("launch").empty());
  // The same plan estimated: the number the launch line is reported with.
  const auto& p = launch.at("plan");
  std::string blocks;
  for (const auto& stage : p.at("stages"))
    blocks += (blocks.empty() ? "" : ",") + std::to_string(stage.at("blocks").get<int>());
  const auto e = run_json(
      "estimate llama2-7b --device h100-sxm --devices 16 --global-batch 32 --tp 4 --pp " +
      std::to_string(p.at("pp").get<int>()) + " --microbatch " +
      std::to_string(p.at("microbatch").get<int>()) + " --recompute " + p.at("recompute").get<std::string>() +
      (p.at("sequence_parallel").get<bool>() ? " --sequence-parallel" : "") + " --stage-blocks " + blocks);
  CHECK(e.at("time_per_batch_s").get<double>() ==
        Approx(launch.at("time_per_batch_s").get<double>()).epsilon(1e-9));
}

TEST_CASE("phaze plan and estimate with the embedding counted as a pipeline layer: Megatron-Core's split",
          "[e2e][plan]") {
  // Llama 3 8B: 32 blocks and the embedding over 3 stages of 11 layers: 10, 11, 11 blocks.
  const std::string model = " llama3-8b --device h100-sxm --devices 24 --global-batch 48";
  const auto j = run_json("plan" + model + " --pp 3 --account-for-embedding-in-pipeline-split --top 1");
  const auto& best = j.at("top").at(0).at("plan");
  std::vector<int> blocks;
  for (const auto& stage : best.at("stages")) blocks.push_back(stage.at("blocks").get<int>());
  CHECK(blocks == std::vector<int>{10, 11, 11});
  // estimate with the flag splits the same way, and agrees with the split given stage by stage.
  const std::string degrees = " --tp " + std::to_string(best.at("tp").get<int>()) + " --pp 3 --microbatch " +
                              std::to_string(best.at("microbatch").get<int>()) + " --recompute " +
                              best.at("recompute").get<std::string>() +
                              (best.at("sequence_parallel").get<bool>() ? " --sequence-parallel" : "");
  const auto counted = run_json("estimate" + model + degrees + " --account-for-embedding-in-pipeline-split");
  const auto given = run_json("estimate" + model + degrees + " --stage-blocks 10,11,11");
  CHECK(counted.at("time_per_batch_s").get<double>() ==
        Approx(given.at("time_per_batch_s").get<double>()).epsilon(1e-9));
  CHECK(counted.at("time_per_batch_s").get<double>() ==
        Approx(j.at("top").at(0).at("time_per_batch_s").get<double>()).epsilon(1e-9));
  // The launch line carries Megatron-Core's flag and no uneven-split flags beside it.
  const auto emitted =
      run_phaze("plan" + model + " --pp 3 --account-for-embedding-in-pipeline-split --emit megatron");
  REQUIRE(emitted.status == 0);
  CHECK(contains(emitted.out, "--account-for-embedding-in-pipeline-split"));
  CHECK_FALSE(contains(emitted.out, "--decoder-first-pipeline-num-layers"));
  // Layers that do not divide into the stages, an uneven placer and a design search are exit 2, saying why.
  const auto four = run_phaze("plan" + model + " --pp 4 --account-for-embedding-in-pipeline-split");
  CHECK(four.status == 2);
  CHECK(contains(four.err, "divide into the 4 model chunks"));
  const auto bad = run_phaze("estimate" + model +
                             " --tp 2 --pp 4 --microbatch 1 --account-for-embedding-in-pipeline-split");
  CHECK(bad.status == 2);
  CHECK(contains(bad.err, "divide into the 4 model chunks"));
  const auto chain = run_phaze("plan" + model + " --placer chain --account-for-loss-in-pipeline-split");
  CHECK(chain.status == 2);
  CHECK(contains(chain.err, "--placer uniform"));
  // core_r0.11.0 without virtual stages also divides the blocks over the stages between a counted
  // embedding and loss: pp 2 leaves none, so no plan Megatron-LM can run is emitted.
  const auto middle = run_phaze("plan" + model +
                                " --pp 2 --account-for-embedding-in-pipeline-split "
                                "--account-for-loss-in-pipeline-split --emit megatron");
  CHECK(middle.status == 3);
  CHECK(contains(middle.err, "between them"));
  // A mixture of experts' load-balancing loss and the counted layers: core_r0.11.0 refuses them together.
  const auto moe = run_phaze(
      "plan mixtral-8x7b --device h100-sxm --devices 16 --global-batch 32 --pp 2 --sequence-parallel "
      "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split --emit megatron");
  CHECK(moe.status == 2);
  CHECK(contains(moe.err, "load-balancing loss"));
  // A composite model's layers are split by --stage-blocks, not by the counted layers.
  const auto composite = run_phaze(
      "plan transgan --device v100-16gb --devices 16 --global-batch 64 --pp 4 "
      "--account-for-loss-in-pipeline-split");
  CHECK(composite.status == 2);
  CHECK(contains(composite.err, "composite model"));
  // The JSON states the flags.
  CHECK(j.at("plan").at("embedding_in_pipeline_split") == true);
  CHECK(j.at("plan").at("loss_in_pipeline_split") == false);
  // With a split given stage by stage and no model chunks, the flags would change nothing: refused.
  const auto given_split = run_phaze("estimate" + model + degrees +
                                     " --stage-blocks 10,11,11 --account-for-embedding-in-pipeline-split");
  CHECK(given_split.status == 2);
  CHECK(contains(given_split.err, "drop them or --stage-blocks"));
  const auto search = run_phaze("search gpt2 --devices 8 --account-for-loss-in-pipeline-split");
  CHECK(search.status == 2);
  CHECK(contains(search.err, "phaze plan"));
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

TEST_CASE("phaze plan on a model: every exact placer finds the same plans, uniform never beats them",
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

namespace {
/// Every option name Megatron-LM core_r0.11.0's argument parser declares (tests/data/megatron/).
std::set<std::string> megatron_options() {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/megatron/arguments-core_r0.11.0.txt");
  REQUIRE(in);
  std::set<std::string> names;
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("--")) names.insert(line);
  return names;
}

/// The `--name value...` pairs of the first line of `--emit megatron`'s output (its Megatron-LM arguments).
std::map<std::string, std::string> emitted_arguments(const std::string& out) {
  std::istringstream line(out.substr(0, out.find('\n')));
  std::map<std::string, std::string> args;
  std::string token;
  std::string last;
  while (line >> token) {
    if (token.starts_with("--")) {
      last = token;
      args[last];
    } else if (!last.empty()) {
      args[last] += (args[last].empty() ? "" : " ") + token;
    }
  }
  return args;
}
}  // namespace

TEST_CASE("phaze plan --emit megatron: every flag is one Megatron-LM's parser declares, with a valid value",
          "[e2e][plan]") {
  const auto declared = megatron_options();
  REQUIRE(declared.size() > 300);
  struct emit_case {
    std::string args;
    std::vector<std::string> must;  // flags the model or plan needs
  };
  const std::vector<emit_case> cases{
      {"plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --distributed-optimizer --overlap "
       "grad,param,tp",
       {"--swiglu", "--normalization", "--position-embedding-type", "--untie-embeddings-and-output-weights",
        "--disable-bias-linear", "--group-query-attention", "--attention-backend", "--overlap-grad-reduce",
        "--overlap-param-gather", "--use-distributed-optimizer", "--bf16"}},
      {"plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --precision fp8",
       {"--fp8-format", "--transformer-impl", "--fp8-amax-history-len", "--bf16"}},
      {"plan gpt2-xl --device a100-80gb --devices 8 --global-batch 32 --attention unfused --recompute full "
       "--overlap none",
       {"--recompute-granularity", "--recompute-method", "--recompute-num-layers", "--attention-backend"}},
      {"plan " + std::string{PHAZE_TEST_DATA_DIR} +
           "/hf/qwen2-7b.json --device h100-sxm --devices 8 "
           "--global-batch 16 --seq 4096",
       {"--add-qkv-bias", "--disable-bias-linear", "--seq-length"}},
      {"plan gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --vocab 51200 --pp 8 --schedule "
       "interleaved --vp 3 --placer uniform",
       {"--num-layers-per-virtual-pipeline-stage"}},
      {"plan gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --vocab 51200 --pp 8 --schedule "
       "interleaved --vp 3 --placer uniform --overlap grad,param",
       {"--num-layers-per-virtual-pipeline-stage", "--no-overlap-p2p-communication"}},
      {"plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --precision fp8 "
       "--distributed-optimizer --fp8-param-gather",
       {"--fp8-format", "--fp8-param-gather", "--use-distributed-optimizer"}},
      {"plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --optimizer-dtype fp16 "
       "--distributed-optimizer",
       {"--use-precision-aware-optimizer", "--main-params-dtype", "--exp-avg-dtype", "--exp-avg-sq-dtype"}},
      {"plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --fsdp --grad-reduce-in-bf16",
       {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion", "--untie-embeddings-and-output-weights"}},
      {"plan qwen3-8b --device h100-sxm --devices 8 --global-batch 16", {"--qk-layernorm", "--kv-channels"}},
      {"plan nemotron4-15b --device h100-sxm --devices 16 --global-batch 32",
       {"--squared-relu", "--rotary-percent", "--group-query-attention"}},
      {"plan " + std::string{PHAZE_TEST_DATA_DIR} +
           "/hf/deepseek-moe-16b-base.json --device h100-sxm --devices 8 --global-batch 16 --seq 4096",
       {"--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size", "--moe-token-dispatcher-type",
        "--moe-grouped-gemm", "--expert-model-parallel-size", "--moe-shared-expert-intermediate-size",
        "--moe-layer-freq", "--moe-permute-fusion"}},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const auto r = run_phaze(c.args + " --emit megatron");
    REQUIRE(r.status == 0);
    const auto args = emitted_arguments(r.out);
    for (const auto& [name, value] : args) {
      INFO(name << " " << value);
      CHECK(declared.count(name) == 1);
    }
    for (const auto& name : c.must) CHECK(args.count(name) == 1);
    if (args.count("--attention-backend"))
      CHECK((args.at("--attention-backend") == "fused" || args.at("--attention-backend") == "unfused" ||
             args.at("--attention-backend") == "flash"));
    if (args.count("--normalization")) CHECK(args.at("--normalization") == "RMSNorm");
    if (args.count("--squared-relu")) CHECK(args.count("--swiglu") == 0);
    if (args.count("--rotary-percent")) CHECK(args.at("--rotary-percent") == "0.5");
    if (args.count("--position-embedding-type")) CHECK(args.at("--position-embedding-type") == "rope");
    if (args.count("--moe-layer-freq")) CHECK(args.at("--moe-layer-freq") == "'([0]*1+[1]*27)'");
    if (args.count("--num-experts")) CHECK(args.at("--num-experts") == "64");
  }
  // The plan's step comes out as it was costed.
  const auto unfused = emitted_arguments(
      run_phaze(
          "plan gpt2-xl --device a100-80gb --devices 8 --global-batch 32 --attention unfused --overlap none "
          "--emit megatron")
          .out);
  CHECK(unfused.at("--attention-backend") == "unfused");
  CHECK(unfused.count("--overlap-grad-reduce") == 0);
  // FP8 on a device without FP8 tensor cores is refused, naming it.
  const auto a100_fp8 =
      run_phaze("plan gpt2-xl --device a100-80gb --devices 8 --global-batch 32 --precision fp8");
  CHECK(a100_fp8.status == 2);
  CHECK(contains(a100_fp8.err, "a100-80gb"));
  CHECK(contains(a100_fp8.err, "FP8"));
}

TEST_CASE("phaze plan --emit megatron refuses what Megatron-LM cannot run as costed, exit 2", "[e2e][plan]") {
  // What Megatron-LM core_r0.11.0 cannot run as costed, each named: FSDP2 with tied embeddings or a pipeline,
  // a bf16 optimizer state, and the combinations it rejects together.
  const std::string llama = "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --emit megatron";
  for (const auto& [args, named] : std::vector<std::pair<std::string, std::string>>{
           {"plan gpt2-xl --device a100-80gb --devices 8 --global-batch 32 --emit megatron --fsdp "
            "--grad-reduce-in-bf16",
            "untied embeddings"},
           {llama + " --fsdp --grad-reduce-in-bf16 --pp 2", "--pp 1"},
           {llama + " --optimizer-dtype bf16", "precision-aware"},
           {llama + " --optimizer-dtype fp16", "--distributed-optimizer"},
           {llama + " --optimizer-dtype fp16 --distributed-optimizer --fsdp --grad-reduce-in-bf16",
            "without --fsdp"},
           {llama + " --fsdp", "--grad-reduce-in-bf16"},
           {llama + " --fsdp --grad-reduce-in-bf16 --precision fp8 --fp8-param-gather", "--fp8-param-gather"},
           {llama + " --attention-kernel triton", "Triton kernel"},
           {llama + " --attention-kernel flex", "FlexAttention"},
           {llama + " --attention-kernel efficient", "memory-efficient kernel"},
           {llama + " --cross-entropy fused", "--cross-entropy megatron"}}) {
    INFO(args);
    const auto r = run_phaze(args);
    CHECK(r.status == 2);
    CHECK(contains(r.err, named));
  }
  // The attention kernel becomes Megatron-Core's backend: FlashAttention's is `flash`, cuDNN's `fused`.
  const auto flash = run_phaze(llama + " --attention-kernel flash2");
  REQUIRE(flash.status == 0);
  CHECK(contains(flash.out, "--attention-backend flash"));
  // With --fsdp the emitted plan has no pipeline: core_r0.11.0's FSDP2 runs without one.
  const auto flat = run_phaze(
      "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --fsdp --grad-reduce-in-bf16 --emit "
      "megatron");
  REQUIRE(flat.status == 0);
  CHECK(contains(flat.out, "--pipeline-model-parallel-size 1 "));
  const auto gpipe = run_phaze(
      "plan gpt2 --device a100-80gb --devices 8 --global-batch 32 --schedule gpipe "
      "--emit megatron");
  CHECK(gpipe.status == 2);
  CHECK(contains(gpipe.err, "GPipe"));
  const auto gemma =
      run_phaze("plan " + std::string{PHAZE_TEST_DATA_DIR} +
                "/hf/gemma-7b.json --device h100-sxm --devices 8 --global-batch 16 --emit megatron");
  CHECK(gemma.status == 2);
  CHECK(contains(gemma.err, "GeGLU"));
  // Knobs of later Megatron-LM releases than the one phaze emits for.
  const auto bf16_grads = run_phaze(
      "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --grad-reduce-in-bf16 --emit "
      "megatron");
  CHECK(bf16_grads.status == 2);
  CHECK(contains(bf16_grads.err, "--grad-reduce-in-bf16"));
  const auto edges = run_phaze(
      "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --precision fp8 --bf16-blocks 1,1 "
      "--emit megatron");
  CHECK(edges.status == 2);
  CHECK(contains(edges.err, "--first-last-layers-bf16"));
}

TEST_CASE("phaze plan --report writes the best plan's report, misuse exits 2", "[e2e][plan]") {
  const fs::path dir = temp_path("plan-report");
  const std::string plan = "plan gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --vocab 51200";
  const auto r = run_phaze(plan + " --report '" + dir.string() + "'");
  REQUIRE(r.status == 0);
  CHECK(contains(r.out, "report in " + dir.string()));
  for (const char* f : {"report.html", "report.md", "timeline.svg", "memory.svg"})
    CHECK(fs::file_size(dir / f) > 0);
  // The report shows the plan the command chose.
  const auto j = run_json(plan);
  const std::string md = read_file(dir / "report.md");
  CHECK(contains(md, "**Parallelism**: tp " + std::to_string(j.at("plan").at("tp").get<int>()) + ", pp " +
                         std::to_string(j.at("plan").at("pp").get<int>())));
  CHECK(contains(md, "**Time per batch**: "));
  fs::remove_all(dir);
  // No model to draw with a layer table; a file where the folder should be is named.
  const auto table = run_phaze("plan --layer-table '" + std::string{PHAZE_TEST_DATA_DIR} +
                               "/layer_tables/gpt_small_chain.json' --report '" + dir.string() + "'");
  CHECK(table.status == 2);
  CHECK(contains(table.err, "--report"));
  const fs::path file = write_temp("not-a-folder", "x");
  const auto blocked = run_phaze(plan + " --report '" + (file / "report").string() + "'");
  CHECK(blocked.status == 2);
  CHECK(contains(blocked.err, file.string()));
  fs::remove(file);
}

TEST_CASE("phaze plans hybrid Mamba-2 models from their configs and says why it cannot emit them",
          "[e2e][plan][hybrid]") {
  const std::string data = std::string{PHAZE_TEST_DATA_DIR} + "/hf/";
  // Nemotron-H 8B: Mamba-2, attention and MLP blocks; plan chooses tp and pp over 8 H100s.
  const auto h8 = run_json("plan '" + data + "nemotron-h-8b-base-8k.json' --device h100-sxm --devices 8 " +
                           "--global-batch 64 --microbatch 1 --seq 8192");
  CHECK(h8.at("time_per_batch_s").get<double>() > 0.0);
  // Nemotron 3 Nano: Mamba-2, attention and expert blocks; plan picks expert parallelism itself.
  const std::string nano =
      "plan '" + data + "nemotron-3-nano-30b-a3b.json' --device h100-sxm --devices 16 " +
      "--global-batch 1024 --microbatch 1 --seq 8192 --precision fp8 --distributed-optimizer";
  const auto planned = run_json(nano);
  CHECK(planned.at("plan").at("ep").get<int>() > 1);
  // Nano's 2 key/value heads allow tp 1 or 2: at tp 4 no plan is admissible.
  const auto bad = run_phaze(nano + " --tp 4");
  CHECK(bad.status == 2);
  CHECK(contains(bad.err, "tensor-parallel width"));
  // Two Mamba-2 groups: attention splits 4 ways, the mixers do not, and tp 4 is not offered.
  auto two_groups = nlohmann::json::parse(read_file(data + "nemotron-h-8b-base-8k.json"));
  two_groups["n_groups"] = 2;
  const auto file = write_temp("two-groups.json", two_groups.dump());
  const auto split =
      run_phaze("plan '" + file.string() + "' --device h100-sxm --devices 8 --global-batch 64 " +
                "--microbatch 1 --seq 8192 --tp 4");
  CHECK(split.status == 2);
  CHECK(contains(split.err, "tensor-parallel width"));
  CHECK(run_phaze("plan '" + file.string() + "' --device h100-sxm --devices 8 --global-batch 64 " +
                  "--microbatch 1 --seq 8192 --tp 2")
            .status == 0);
  fs::remove(file);
  // Megatron-LM builds hybrids with pretrain_mamba.py: the launch line is refused with the reason.
  const auto emitted = run_phaze(nano + " --emit megatron");
  CHECK(emitted.status == 2);
  CHECK(contains(emitted.err, "pretrain_mamba.py"));
}

TEST_CASE("phaze plan --emit megatron writes only what Megatron-LM's own checks accept", "[e2e][plan]") {
  // Megatron-Core's uneven pipeline (TransformerConfig.__post_init__): the first and the last stage at least
  // one layer each, the stages between them the same count, at least one. GPT-2's 12 blocks at every depth.
  const auto number_after = [](const std::string& out, const std::string& flag) {
    const auto at = out.find(flag + " ");
    return at == std::string::npos ? -1 : std::stoi(out.substr(at + flag.size() + 1));
  };
  for (int pp = 2; pp <= 12; ++pp) {
    INFO("pp " << pp);
    const auto r = run_phaze("plan gpt2 --device a100-80gb --devices " + std::to_string(pp) +
                             " --global-batch 64 --pp " + std::to_string(pp) + " --emit megatron");
    if (r.status != 0) {
      CHECK(r.status == 2);  // nothing Megatron-LM can run fits: said, not written
      continue;
    }
    const int first = number_after(r.out, "--decoder-first-pipeline-num-layers");
    const int last = number_after(r.out, "--decoder-last-pipeline-num-layers");
    if (first < 0) continue;  // an even split
    CHECK(first >= 1);
    CHECK(last >= 1);
    const int middle = 12 - first - last;
    if (pp > 2) {
      CHECK(middle >= pp - 2);
      CHECK(middle % (pp - 2) == 0);
    } else {
      CHECK(middle == 0);
    }
  }
  // --overlap-param-gather needs --overlap-grad-reduce (validate_args); --bf16 needs a card with bf16.
  const auto param_only = run_phaze(
      "plan gpt2 --device a100-80gb --devices 16 --global-batch 64 --distributed-optimizer --overlap param "
      "--emit megatron");
  CHECK(param_only.status == 2);
  CHECK(contains(param_only.err, "--overlap grad,param"));
  const auto volta = run_phaze("plan gpt2 --device v100-16gb --devices 8 --global-batch 64 --emit megatron");
  CHECK(volta.status == 2);
  CHECK(contains(volta.err, "--precision fp16"));
  const auto fp16 = run_phaze(
      "plan gpt2 --device v100-16gb --devices 8 --global-batch 64 --precision fp16 --emit megatron");
  INFO(fp16.err);
  CHECK(fp16.status == 0);
  CHECK(contains(fp16.out, "--fp16"));
}

TEST_CASE("phaze plan names the rule every plan breaks, not a generic 'no admissible plan'", "[e2e][plan]") {
  // Rules of the knobs alone, which estimate names: plan used to answer "no admissible plan" for them.
  const std::string plan = "plan gpt2 --device h100-sxm --devices 8 --global-batch 64 ";
  const auto fp8 = run_phaze(plan + "--precision fp8 --fp8-param-gather");
  CHECK(fp8.status == 2);
  CHECK(contains(fp8.err, "--distributed-optimizer"));
  CHECK_FALSE(contains(fp8.err, "no admissible plan"));
  const auto interleaved = run_phaze(plan + "--pp 2 --schedule interleaved --vp 2 --overlap grad");
  CHECK(interleaved.status == 2);
  CHECK(contains(interleaved.err, "pp > 2"));
  CHECK_FALSE(contains(interleaved.err, "no admissible plan"));
  // A rule every candidate breaks (each refusal the same words): context parallelism over unfused
  // attention, which estimate names too.
  const auto cp = run_phaze(
      "plan llama2-7b --device h100-sxm --devices 16 --global-batch 64 --cp 2 "
      "--attention unfused");
  CHECK(cp.status == 2);
  CHECK(contains(cp.err, "every candidate checked breaks one rule"));
  CHECK(contains(cp.err, "--attention fused"));
}

TEST_CASE("phaze plan --emit megatron: every line keeps Megatron-LM's own checks, each check exercised",
          "[e2e][plan]") {
  // Megatron-LM's checks on the flags phaze writes, as its code states them (Megatron-LM at d98e8a6,
  // 2026-08-22: megatron/training/arguments.py validate_args, megatron/core/transformer/
  // transformer_config.py TransformerConfig.__post_init__, megatron/core/transformer/
  // dot_product_attention.py; the flags are core_r0.11.0's, tests/data/megatron/). Each check applies when
  // its flags appear (`applies`) and must then hold (`holds`); every check must apply to one line at least,
  // so each is tested against a plan that could break it.
  using args_t = std::map<std::string, std::string>;
  const auto number = [](const args_t& a, const std::string& flag, long long fallback) {
    const auto it = a.find(flag);
    return it == a.end() || it->second.empty() ? fallback : std::stoll(it->second);
  };
  const auto has = [](const args_t& a, const std::string& flag) { return a.count(flag) == 1; };
  struct check {
    std::string where;
    std::function<bool(const args_t&)> applies;
    std::function<bool(const args_t&)> holds;
  };
  const std::vector<check> checks{
      {"arguments.py:998, layers divisible by pp (with the embedding and loss counted when accounted for)",
       [&](const args_t& a) {
         return number(a, "--pipeline-model-parallel-size", 1) > 1 &&
                !has(a, "--decoder-first-pipeline-num-layers") &&
                !has(a, "--decoder-last-pipeline-num-layers");
       },
       [&](const args_t& a) {
         const long long layers = number(a, "--num-layers", 0) +
                                  (has(a, "--account-for-embedding-in-pipeline-split") ? 1 : 0) +
                                  (has(a, "--account-for-loss-in-pipeline-split") ? 1 : 0);
         return layers % number(a, "--pipeline-model-parallel-size", 1) == 0;
       }},
      {"arguments.py:1000-1010, interleaving: pp > 1, and pp > 2 without overlapped sends",
       [&](const args_t& a) { return has(a, "--num-layers-per-virtual-pipeline-stage"); },
       [&](const args_t& a) {
         const long long pp = number(a, "--pipeline-model-parallel-size", 1);
         const long long per_stage = number(a, "--num-layers", 0) / pp;
         return pp > (has(a, "--no-overlap-p2p-communication") ? 2 : 1) &&
                per_stage % number(a, "--num-layers-per-virtual-pipeline-stage", 1) == 0;
       }},
      {"arguments.py:1024-1029, --overlap-param-gather needs the distributed optimizer and "
       "--overlap-grad-reduce",
       [&](const args_t& a) { return has(a, "--overlap-param-gather"); },
       [&](const args_t& a) {
         return has(a, "--use-distributed-optimizer") && has(a, "--overlap-grad-reduce");
       }},
      {"arguments.py:1031-1041, --use-torch-fsdp2: pp 1, ep 1, no distributed optimizer, no gradient "
       "accumulation fusion",
       [&](const args_t& a) { return has(a, "--use-torch-fsdp2"); },
       [&](const args_t& a) {
         return number(a, "--pipeline-model-parallel-size", 1) == 1 &&
                number(a, "--expert-model-parallel-size", 1) == 1 && !has(a, "--use-distributed-optimizer") &&
                has(a, "--no-gradient-accumulation-fusion");
       }},
      {"arguments.py:1095-1096, --fp8-param-gather needs the distributed optimizer or FSDP",
       [&](const args_t& a) { return has(a, "--fp8-param-gather"); },
       [&](const args_t& a) { return has(a, "--use-distributed-optimizer") || has(a, "--use-torch-fsdp2"); }},
      {"arguments.py:1204-1205, not --bf16 and --fp16 together",
       [&](const args_t& a) { return has(a, "--bf16") || has(a, "--fp16"); },
       [&](const args_t& a) { return !(has(a, "--bf16") && has(a, "--fp16")); }},
      {"arguments.py:1354, learned positions cover the sequence",
       [&](const args_t& a) {
         return has(a, "--max-position-embeddings") && !has(a, "--position-embedding-type");
       },
       [&](const args_t& a) {
         return number(a, "--max-position-embeddings", 0) >= number(a, "--seq-length", 0);
       }},
      {"arguments.py:1431-1439, sequence parallelism is switched off at tp 1 (so it is written only above)",
       [&](const args_t& a) { return has(a, "--sequence-parallel"); },
       [&](const args_t& a) { return number(a, "--tensor-model-parallel-size", 1) > 1; }},
      {"arguments.py:1441-1442, --tp-comm-overlap needs sequence parallelism",
       [&](const args_t& a) { return has(a, "--tp-comm-overlap"); },
       [&](const args_t& a) { return has(a, "--sequence-parallel"); }},
      {"arguments.py:1657, the experts divide over expert parallelism",
       [&](const args_t& a) { return has(a, "--num-experts"); },
       [&](const args_t& a) {
         return number(a, "--num-experts", 0) % number(a, "--expert-model-parallel-size", 1) == 0;
       }},
      {"transformer_config.py:1446, tp divides the attention heads",
       [&](const args_t& a) { return has(a, "--num-attention-heads"); },
       [&](const args_t& a) {
         return number(a, "--num-attention-heads", 0) % number(a, "--tensor-model-parallel-size", 1) == 0;
       }},
      {"transformer_config.py:1462, query groups a multiple or a divisor of tp",
       [&](const args_t& a) { return has(a, "--num-query-groups"); },
       [&](const args_t& a) {
         const long long g = number(a, "--num-query-groups", 1);
         const long long tp = number(a, "--tensor-model-parallel-size", 1);
         return g % tp == 0 || tp % g == 0;
       }},
      {"transformer_config.py:1862-1865, padding to capacity needs a capacity factor",
       [&](const args_t& a) { return has(a, "--moe-pad-expert-input-to-capacity"); },
       [&](const args_t& a) { return has(a, "--moe-expert-capacity-factor"); }},
      {"dot_product_attention.py:59, context parallelism only with Transformer Engine's attention",
       [&](const args_t& a) { return number(a, "--context-parallel-size", 1) > 1; },
       [&](const args_t& a) {
         return !has(a, "--attention-backend") || a.at("--attention-backend") != "unfused";
       }},
  };
  const std::string hf = std::string{PHAZE_TEST_DATA_DIR} + "/hf/";
  const std::vector<std::string> plans{
      "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --distributed-optimizer --overlap "
      "grad,param,tp --tp 4",
      "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --precision fp8 "
      "--distributed-optimizer --fp8-param-gather",
      "plan gpt2-xl --device a100-80gb --devices 8 --global-batch 32 --attention unfused --recompute full "
      "--overlap none",
      "plan gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --vocab 51200 --pp 8 --schedule "
      "interleaved --vp 3 --placer uniform",
      "plan gpt3-175b --device a100-80gb --devices 64 --global-batch 64 --vocab 51200 --pp 8 --schedule "
      "interleaved --vp 3 --placer uniform --overlap grad,param",
      "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --fsdp --grad-reduce-in-bf16",
      "plan " + hf + "deepseek-moe-16b-base.json --device h100-sxm --devices 8 --global-batch 16 --seq 4096",
      "plan " + hf +
          "deepseek-moe-16b-base.json --device h100-sxm --devices 8 --global-batch 16 --seq 4096 "
          "--capacity-factor 1.25",
      "plan llama2-7b --device h100-sxm --devices 16 --global-batch 64 --cp 2",
      "plan gpt2 --device a100-80gb --devices 8 --global-batch 64 --pp 4",
      "plan gpt2 --device v100-16gb --devices 8 --global-batch 64 --precision fp16",
      "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --tp 1",
  };
  std::vector<int> applied(checks.size(), 0);
  for (const std::string& plan : plans) {
    const auto r = run_phaze(plan + " --emit megatron");
    INFO(plan << "\n" << r.err);
    REQUIRE(r.status == 0);
    const args_t a = emitted_arguments(r.out);
    for (std::size_t i = 0; i < checks.size(); ++i) {
      if (!checks[i].applies(a)) continue;
      ++applied[i];
      INFO(checks[i].where << "\n" << r.out.substr(0, r.out.find('\n')));
      CHECK(checks[i].holds(a));
    }
  }
  for (std::size_t i = 0; i < checks.size(); ++i) {
    INFO(checks[i].where);
    CHECK(applied[i] > 0);
  }
}
