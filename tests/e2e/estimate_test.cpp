// `phaze estimate`: the JSON of docs/cli.md with consistent numbers, and the exit codes for bad
// input (2) and a plan that does not fit (3).
#include "run_phaze.hpp"

#include <string>
#include <utility>
#include <vector>

using phaze::e2e::contains;
using phaze::e2e::run_json;
using phaze::e2e::run_phaze;

namespace {
const std::string gpt3_plan =
    "estimate gpt3-175b --device a100-80gb --devices 128 --tp 8 --pp 8 --dp 2 --vp 3 --schedule interleaved "
    "--global-batch 64 --microbatch 1 --recompute selective --sequence-parallel --seq 2048 --vocab 51200 "
    "--precision fp16";
}

TEST_CASE("phaze estimate prints the documented JSON with consistent numbers", "[e2e][estimate]") {
  const auto j = run_json(gpt3_plan);
  for (const char* key :
       {"time_per_batch_s", "throughput_samples_per_s", "tokens_per_s", "model_flops_per_device_per_s", "mfu",
        "peak_memory_bytes", "fits", "plan", "breakdown"})
    CHECK(j.contains(key));
  const auto& plan = j["plan"];
  CHECK(plan["tp"] == 8);
  CHECK(plan["pp"] == 8);
  CHECK(plan["dp"] == 2);
  CHECK(plan["vp"] == 3);
  CHECK(plan["microbatch"] == 1);
  CHECK(plan["recompute"] == "selective");
  CHECK(plan["schedule"] == "interleaved");
  REQUIRE(plan["stages"].size() == 8);
  for (const auto& s : plan["stages"]) {
    for (const char* key : {"layers", "devices", "fwd_s", "bwd_s", "memory_bytes"}) CHECK(s.contains(key));
    CHECK(s["devices"] == 16);
    CHECK(s["fwd_s"].get<double>() > 0.0);
    CHECK(s["bwd_s"].get<double>() > s["fwd_s"].get<double>());
  }
  const auto& b = j["breakdown"];
  double sum = 0.0;
  for (const char* key : {"compute_s", "bubble_s", "recompute_s", "tp_comm_s", "pp_comm_s", "dp_comm_s"}) {
    REQUIRE(b.contains(key));
    CHECK(b[key].get<double>() >= 0.0);
    sum += b[key].get<double>();
  }
  sum += b.value("optimizer_s", 0.0);
  const double t = j["time_per_batch_s"].get<double>();
  CHECK(sum == Approx(t).epsilon(1e-9));
  CHECK(b["dp_comm_s"].get<double>() > 0.0);  // two replicas all-reduce their gradients
  CHECK(j["throughput_samples_per_s"].get<double>() == Approx(64.0 / t).epsilon(1e-9));
  CHECK(j["tokens_per_s"].get<double>() == Approx(64.0 * 2048.0 / t).epsilon(1e-9));
  const double mfu = j["mfu"].get<double>();
  CHECK(mfu > 0.0);
  CHECK(mfu < 1.0);
  CHECK(j["model_flops_per_device_per_s"].get<double>() == Approx(mfu * 312e12).epsilon(1e-9));
  CHECK(j["fits"] == true);
}

TEST_CASE("phaze estimate prints a table for people", "[e2e][estimate]") {
  const auto r = run_phaze(gpt3_plan);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(contains(r.out, "time per batch"));
  CHECK(contains(r.out, "MFU"));
  CHECK(contains(r.out, "bubble"));
}

TEST_CASE("phaze estimate rejects impossible plans with exit 2", "[e2e][estimate]") {
  SECTION("tp 3 does not divide the devices or the heads") {
    const auto r = run_phaze(
        "estimate gpt3-175b --device a100-80gb --devices 8 --tp 3 --pp 1 --global-batch 8 --microbatch 1");
    CHECK(r.status == 2);
    CHECK(contains(r.err, "tp"));
  }
  SECTION("a batch not divisible by microbatch * dp") {
    const auto r = run_phaze(
        "estimate gpt3-175b --device a100-80gb --devices 16 --tp 8 --pp 1 --global-batch 7 --microbatch 2");
    CHECK(r.status == 2);
    CHECK(contains(r.err, "divisible by microbatch * dp"));
  }
  SECTION("zero devices") {
    const auto r = run_phaze(
        "estimate gpt3-175b --device a100-80gb --devices 0 --tp 1 --pp 1 --global-batch 8 --microbatch 1");
    CHECK(r.status == 2);
    CHECK(contains(r.err, "devices"));
  }
  SECTION("a stage split that does not add up to the blocks, or has the wrong length") {
    const std::string plan =
        "estimate gpt3-175b --device a100-80gb --devices 32 --tp 8 --pp 4 --global-batch 8 --microbatch 1";
    const auto sum = run_phaze(plan + " --stage-blocks 24,24,24,23");
    CHECK(sum.status == 2);
    CHECK(contains(sum.err, "adds up to 95 blocks but the model has 96"));
    const auto count = run_phaze(plan + " --stage-blocks 48,48");
    CHECK(count.status == 2);
    CHECK(contains(count.err, "one count per stage"));
    const auto negative = run_phaze(plan + " --stage-blocks 49,-1,24,24");
    CHECK(negative.status == 2);
    CHECK(contains(negative.err, "0 or more blocks"));
  }
  SECTION("an interior stage of no block (AMP's cut points) passes the activations on: one more hop") {
    // gpt2 over 4 T4s with the second stage empty: the same work as 3 stages of 4, 0 bytes on the empty
    // stage, and a step no shorter than the 3-stage one (its sends cross one more hop).
    const std::string four =
        "estimate gpt2 --device t4 --devices 4 --tp 1 --pp 4 --global-batch 16 --microbatch 2 --precision "
        "fp16 --stage-blocks 4,0,4,4";
    const auto j = run_json(four);
    CHECK(j.at("plan").at("stages").at(1).at("blocks") == 0);
    CHECK(j.at("plan").at("stages").at(1).at("memory_bytes").get<double>() <
          j.at("plan").at("stages").at(2).at("memory_bytes").get<double>());
    const auto three = run_json(
        "estimate gpt2 --device t4 --devices 3 --tp 1 --pp 3 --global-batch 16 --microbatch 2 --precision "
        "fp16 --stage-blocks 4,4,4");
    CHECK(j.at("time_per_batch_s").get<double>() >= three.at("time_per_batch_s").get<double>());
    CHECK(j.at("time_per_batch_s").get<double>() <= 1.01 * three.at("time_per_batch_s").get<double>());
  }
  SECTION("under the interleaved schedule, stage counts that do not split into the vp chunks") {
    // Megatron-Core's uneven pipeline with virtual stages builds every chunk of a stage alike: 16 blocks
    // over 5 chunks is refused; 15, 25, 25, 15 runs, as does an uneven split whose total pp * vp does not
    // divide (Llama 3 8B's 32 blocks over 3 stages of 2 chunks: 10, 12, 10).
    const std::string plan =
        "estimate llama3-70b --device h100-sxm --devices 64 --tp 4 --pp 4 --schedule interleaved --vp 5 "
        "--global-batch 128 --microbatch 1 --distributed-optimizer --recompute full";
    const auto uneven = run_phaze(plan + " --stage-blocks 16,24,24,16");
    CHECK(uneven.status == 2);
    CHECK(contains(uneven.err, "stage 0 has 16 blocks, which do not split into its 5 interleaved"));
    CHECK(run_phaze(plan + " --stage-blocks 15,25,25,15").status == 0);
    const std::string three =
        "estimate llama3-8b --device h100-sxm --devices 24 --tp 1 --pp 3 --schedule interleaved --vp 2 "
        "--global-batch 96 --microbatch 1 --distributed-optimizer";
    const auto uniform = run_phaze(three);
    CHECK(uniform.status == 2);
    CHECK(contains(uniform.err, "pp * vp model chunks"));
    CHECK(run_phaze(three + " --stage-blocks 10,12,10").status == 0);
  }
}

TEST_CASE("phaze estimate: the knobs of current recipes, stated in the report and the JSON, misuse is exit 2",
          "[e2e][estimate]") {
  const std::string llama =
      "estimate llama3-8b --device h100-sxm --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 1 "
      "--seq 4096 --distributed-optimizer";
  const auto j =
      run_json(llama +
               " --precision fp8 --fp8-param-gather --grad-reduce-in-bf16 --bf16-blocks 1,1 --recompute "
               "full --recompute-layers 4");
  const auto& plan = j["plan"];
  CHECK(plan["recompute_layers"] == 4);
  CHECK(plan["bf16_blocks"] == 2);
  CHECK(plan["grad_reduce_in_bf16"] == true);
  CHECK(plan["fp8_param_gather"] == true);
  CHECK(plan["precision"] == "fp8");
  CHECK(plan["optimizer_dtype"] == "fp32");
  const auto table =
      run_phaze(llama + " --precision fp8 --fp8-param-gather --bf16-blocks 1,1 --grad-reduce-in-bf16");
  CHECK(table.status == 0);
  CHECK(contains(table.out, "(2 blocks in bf16)"));
  CHECK(contains(table.out, "FP8 weights, bf16 gradients"));
  // Each knob where it does not apply, named.
  for (const auto& [args, named] : std::vector<std::pair<std::string, std::string>>{
           {" --bf16-blocks 1,1", "--bf16-blocks"},
           {" --precision fp8 --bf16-blocks 20,20", "--bf16-blocks"},
           {" --fp8-param-gather", "--fp8-param-gather"},
           {" --recompute-layers 2", "--recompute-layers"},
           {" --precision fp32 --grad-reduce-in-bf16", "--grad-reduce-in-bf16"},
           {" --precision fp32 --optimizer-dtype fp16", "--optimizer-dtype"},
           {" --precision fp16 --optimizer-dtype bf16", "--optimizer-dtype"},
           {" --overlap grad,pipeline", "pp"}}) {
    INFO(args);
    const auto r = run_phaze(llama + args);
    CHECK(r.status == 2);
    CHECK(contains(r.err, named));
  }
}

TEST_CASE("phaze estimate --fsdp: sharded states in less memory, stated in the report and the JSON",
          "[e2e][estimate]") {
  const std::string llama =
      "estimate llama3-8b --device h100-sxm --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 1 "
      "--seq 2048";
  const auto zero1 = run_json(llama + " --distributed-optimizer");
  const auto sharded = run_json(llama + " --fsdp");
  CHECK(sharded["plan"]["fsdp"] == true);
  CHECK(zero1["plan"]["fsdp"] == false);
  CHECK(sharded["peak_memory_bytes"].get<double>() < zero1["peak_memory_bytes"].get<double>());
  CHECK(sharded["breakdown"]["dp_comm_s"].get<double>() > zero1["breakdown"]["dp_comm_s"].get<double>());
  const auto table = run_phaze(
      "estimate llama3-8b --device h100-sxm --devices 8 --tp 1 --pp 1 --global-batch 64 "
      "--microbatch 1 --seq 4096 --fsdp");
  CHECK(table.status == 0);
  CHECK(contains(table.out, "fully sharded (FSDP, gathers prefetched)"));
  CHECK(!contains(table.out, "overlap grad"));
}

TEST_CASE(
    "phaze estimate --fsdp-shard: hybrid sharding stated, more memory than full sharding, misuse exit 2",
    "[e2e][estimate]") {
  const std::string plan =
      "estimate llama3-8b --device h100-sxm --devices 32 --tp 1 --pp 1 --global-batch 64 --microbatch 2 "
      "--fsdp --grad-reduce-in-bf16 --recompute full";
  const auto full = run_json(plan);
  const auto hybrid = run_json(plan + " --fsdp-shard 8");
  CHECK(full.at("plan").at("fsdp_shard") == 32);
  CHECK(hybrid.at("plan").at("fsdp_shard") == 8);
  CHECK(hybrid.at("peak_memory_bytes").get<double>() > full.at("peak_memory_bytes").get<double>());
  CHECK(run_json(plan + " --fsdp-shard 32").at("time_per_batch_s") == full.at("time_per_batch_s"));
  const auto table = run_phaze(plan + " --fsdp-shard 8");
  CHECK(contains(table.out, "hybrid sharded (HSDP over groups of 8"));
  const auto odd = run_phaze(plan + " --fsdp-shard 5");
  CHECK(odd.status == 2);
  CHECK(contains(odd.err, "divide the data-parallel ranks"));
  const auto alone = run_phaze(
      "estimate llama3-8b --device h100-sxm --devices 32 --tp 1 --pp 1 --global-batch 64 --microbatch 2 "
      "--fsdp-shard 8");
  CHECK(alone.status == 2);
  CHECK(contains(alone.err, "give --fsdp"));
  const auto emitted = run_phaze(
      "plan llama3-8b --device h100-sxm --devices 32 --global-batch 64 --fsdp --fsdp-shard 8 "
      "--grad-reduce-in-bf16 --emit megatron");
  CHECK(emitted.status == 2);
  CHECK(contains(emitted.err, "--fsdp-shard"));
}

TEST_CASE(
    "phaze estimate --recompute-modules op: torchtitan's per-op policy between none and full, refused "
    "where it is not modelled",
    "[e2e][estimate][recompute]") {
  const std::string plan =
      "estimate llama3-8b --device h100-sxm --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 1 "
      "--seq 8192 --fsdp --memory-headroom 0";
  const auto none = run_json(plan);
  const auto op = run_json(plan + " --recompute selective --recompute-modules op");
  const auto full = run_json(plan + " --recompute full");
  CHECK(op.at("plan").at("recompute_modules") == nlohmann::json::array({"op"}));
  CHECK(op.at("peak_memory_bytes").get<double>() < none.at("peak_memory_bytes").get<double>());
  CHECK(op.at("peak_memory_bytes").get<double>() > full.at("peak_memory_bytes").get<double>());
  CHECK(op.at("time_per_batch_s").get<double>() > none.at("time_per_batch_s").get<double>());
  CHECK(op.at("time_per_batch_s").get<double>() < full.at("time_per_batch_s").get<double>());
  for (const auto& [args, named] : std::vector<std::pair<std::string, std::string>>{
           {" --recompute selective --recompute-modules op,mlp", "give op alone"},
           {" --recompute selective --recompute-modules op --precision fp8", "without FP8 training"},
           {" --recompute selective --recompute-modules op --attention unfused", "with fused attention only"},
           {" --recompute full --recompute-modules op", "give --recompute selective"}}) {
    INFO(args);
    const auto r = run_phaze(plan + args);
    CHECK(r.status == 2);
    CHECK(contains(r.err, named));
  }
  const auto moe = run_phaze(
      "estimate mixtral-8x7b --device h100-sxm --devices 8 --tp 1 --pp 1 --ep 8 --global-batch 64 "
      "--microbatch 1 --recompute selective --recompute-modules op");
  CHECK(moe.status == 2);
  CHECK(contains(moe.err, "no experts"));
}

TEST_CASE("phaze estimate --shard-gradients: ZeRO-2 in less memory, stated, misuse exit 2",
          "[e2e][estimate]") {
  const std::string plan =
      "estimate llama3-8b --device h100-sxm --devices 64 --tp 1 --pp 1 --global-batch 256 --microbatch 1 "
      "--seq 4096 --distributed-optimizer";
  const auto zero1 = run_json(plan);
  const auto zero2 = run_json(plan + " --shard-gradients");
  CHECK(zero2.at("plan").at("shard_gradients") == true);
  CHECK(zero1.at("plan").at("shard_gradients") == false);
  CHECK(zero2.at("peak_memory_bytes").get<double>() < zero1.at("peak_memory_bytes").get<double>());
  CHECK(zero2.at("breakdown").at("dp_comm_s").get<double>() >
        zero1.at("breakdown").at("dp_comm_s").get<double>());
  CHECK(contains(run_phaze(plan + " --shard-gradients").out, "sharded gradients (ZeRO-2)"));
  const auto bare = run_phaze(
      "estimate llama3-8b --device h100-sxm --devices 64 --tp 1 --pp 1 --global-batch 256 --microbatch 1 "
      "--shard-gradients");
  CHECK(bare.status == 2);
  CHECK(contains(bare.err, "give --distributed-optimizer"));
  const auto piped = run_phaze(
      "estimate llama3-8b --device h100-sxm --devices 64 --tp 1 --pp 2 --global-batch 256 --microbatch 1 "
      "--distributed-optimizer --shard-gradients");
  CHECK(piped.status == 2);
  CHECK(contains(piped.err, "--pp 1"));
  // plan keeps ZeRO-2 plans on one stage (here deeper pipelines would be faster: without ZeRO-2 the best
  // plan has pp > 1), and says why a fixed pipeline cannot be one.
  const std::string seventy =
      "plan llama3-70b --device h100-sxm --devices 32 --global-batch 64 --distributed-optimizer";
  CHECK(run_json(seventy).at("plan").at("pp").get<int>() > 1);
  for (const char* placer : {"", " --placer downset", " --placer uniform"}) {
    INFO(placer);
    const auto planned = run_phaze(seventy + " --shard-gradients --format json" + placer);
    if (planned.status == 0) {
      CHECK(nlohmann::json::parse(planned.out).at("plan").at("pp") == 1);
    } else {
      CHECK(planned.status == 3);  // no single-stage plan fits: said, never a deeper one
    }
  }
  const auto unsharded =
      run_phaze("plan llama3-8b --device h100-sxm --devices 64 --global-batch 256 --shard-gradients");
  CHECK(unsharded.status == 2);
  CHECK(contains(unsharded.err, "give --distributed-optimizer"));
  const auto fixed = run_phaze(
      "plan llama3-8b --device h100-sxm --devices 64 --global-batch 256 --distributed-optimizer "
      "--shard-gradients --pp 2");
  CHECK(fixed.status == 2);
  CHECK(contains(fixed.err, "--pp 1"));
  const auto emitted = run_phaze(
      "plan llama3-8b --device h100-sxm --devices 64 --global-batch 256 --distributed-optimizer "
      "--shard-gradients --emit megatron");
  CHECK(emitted.status == 2);
  CHECK(contains(emitted.err, "ZeRO stage 2"));
}

TEST_CASE(
    "phaze estimate --fsdp-reshard-after-forward: one gather per microbatch, more memory, stated, misuse "
    "exit 2",
    "[e2e][estimate]") {
  const std::string plan =
      "estimate llama3-8b --device h100-sxm --devices 32 --tp 1 --pp 1 --global-batch 128 --microbatch 1 "
      "--seq 2048 --fsdp --grad-reduce-in-bf16";
  const auto freed = run_json(plan);
  const auto kept = run_json(plan + " --fsdp-reshard-after-forward never");
  CHECK(freed.at("plan").at("fsdp_reshard_after_forward") == "default");
  CHECK(freed.at("plan").at("fsdp_keeps_weights") == false);
  CHECK(kept.at("plan").at("fsdp_reshard_after_forward") == "never");
  CHECK(kept.at("plan").at("fsdp_keeps_weights") == true);
  CHECK(kept.at("breakdown").at("dp_comm_s").get<double>() <
        freed.at("breakdown").at("dp_comm_s").get<double>());
  CHECK(kept.at("peak_memory_bytes").get<double>() > freed.at("peak_memory_bytes").get<double>());
  CHECK(run_json(plan + " --fsdp-reshard-after-forward always").at("time_per_batch_s") ==
        freed.at("time_per_batch_s"));
  // Under a pipeline torchtitan's default keeps the weights gathered.
  const auto piped = run_json(
      "estimate llama3-8b --device h100-sxm --devices 32 --tp 1 --pp 2 --global-batch 128 --microbatch 1 "
      "--seq 2048 --fsdp --grad-reduce-in-bf16");
  CHECK(piped.at("plan").at("fsdp_keeps_weights") == true);
  const auto table = run_phaze(plan + " --fsdp-reshard-after-forward never");
  CHECK(table.status == 0);
  CHECK(contains(table.out, "reshard after forward never"));
  const auto alone = run_phaze(
      "estimate llama3-8b --device h100-sxm --devices 32 --tp 1 --pp 1 --global-batch 64 --microbatch 2 "
      "--fsdp-reshard-after-forward never");
  CHECK(alone.status == 2);
  CHECK(contains(alone.err, "give --fsdp"));
  const auto emitted = run_phaze(
      "plan llama3-8b --device h100-sxm --devices 32 --global-batch 64 --fsdp --grad-reduce-in-bf16 "
      "--fsdp-reshard-after-forward never --emit megatron");
  CHECK(emitted.status == 2);
  CHECK(contains(emitted.err, "--fsdp-reshard-after-forward never"));
}

TEST_CASE("phaze estimate of an uneven split differs from the uniform one and keeps the breakdown exact",
          "[e2e][estimate]") {
  const std::string plan =
      "estimate gpt3-175b --device a100-80gb --devices 64 --tp 8 --pp 8 --global-batch 8 --microbatch 1 "
      "--recompute full";
  const auto even = run_json(plan);
  const auto uneven = run_json(plan + " --stage-blocks 14,12,12,12,12,12,12,10");
  // The first stage holds 14 blocks instead of 12: it is the slowest and needs more memory.
  CHECK(uneven.at("time_per_batch_s").get<double>() > even.at("time_per_batch_s").get<double>());
  CHECK(uneven.at("plan").at("stages")[0].at("blocks") == 14);
  CHECK(uneven.at("plan").at("stages")[0].at("memory_bytes").get<double>() >
        even.at("plan").at("stages")[0].at("memory_bytes").get<double>());
  double parts = 0.0;
  for (const auto& [name, value] : uneven.at("breakdown").items()) parts += value.get<double>();
  CHECK(parts == Approx(uneven.at("time_per_batch_s").get<double>()).epsilon(1e-12));
}

TEST_CASE("phaze estimate still prints a plan that does not fit, then exits 3", "[e2e][estimate]") {
  const auto r = run_phaze(
      "estimate llama2-70b --device v100-16gb --devices 8 --tp 1 --pp 1 --global-batch 8 --microbatch 1 "
      "--precision fp16 --format json");
  CHECK(r.status == 3);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["fits"] == false);
  CHECK(j["peak_memory_bytes"].get<double>() > 16e9);
  CHECK(contains(r.err, "does not fit"));
  CHECK(contains(r.err, "v100-16gb"));
}

TEST_CASE("phaze estimate: how the step runs is stated, fused attention only where the devices run it",
          "[e2e][estimate]") {
  const std::string plan = " --devices 8 --tp 2 --pp 1 --global-batch 16 --microbatch 1 --seq 1024";
  // Ampere and later run fused kernels; V100 does not (no FlashAttention-2 or cuDNN fused attention).
  const auto h100 = run_json("estimate gpt2 --device h100-sxm" + plan);
  CHECK(h100.at("plan").at("attention") == "fused");
  CHECK(h100.at("plan").at("overlap") == nlohmann::json::array({"grad"}));
  const auto v100 = run_json("estimate gpt2 --device v100-16gb --precision fp16" + plan);
  CHECK(v100.at("plan").at("attention") == "unfused");
  // Asked for, it is what was asked; the table says it with the sequence.
  const auto forced = run_phaze("estimate gpt2 --device v100-16gb --precision fp16 --attention fused" + plan);
  CHECK(forced.status == 0);
  CHECK(contains(forced.out, "sequence 1024, vocabulary 50257 (padded to 50432), fp16, fused attention"));
  // The fused plan keeps no s x s scores: less memory than the unfused one on the same devices.
  const auto unfused = run_json("estimate gpt2 --device h100-sxm --attention unfused" + plan);
  CHECK(h100.at("peak_memory_bytes").get<double>() < unfused.at("peak_memory_bytes").get<double>());
  // Headroom outside [0, 1) is bad input.
  CHECK(run_phaze("estimate gpt2 --device h100-sxm --memory-headroom 1.5" + plan).status == 2);
  CHECK(contains(run_phaze("estimate gpt2 --device h100-sxm --overlap grad,bogus" + plan).err, "bogus"));
}

TEST_CASE("phaze estimate --pipeline-model-parallel-layout lays chunks out as Megatron-Core does",
          "[e2e][estimate][layout]") {
  // DeepSeek-V3 as Megatron-Bridge's H100 recipe runs it: 61 blocks and the multi-token prediction module
  // over pp 8 x vp 4, written as Megatron-Core's layout string.
  const std::string v3 = std::string{PHAZE_TEST_DATA_DIR} + "/hf/deepseek-v3.json";
  const std::string plan =
      "estimate " + v3 +
      " --device h100-sxm --devices 1024 --tp 2 --pp 8 --ep 64 --global-batch 8192 --microbatch 1 --seq 4096 "
      "--precision fp8 --distributed-optimizer --grad-reduce-in-bf16 --fp8-param-gather --sequence-parallel "
      "--recompute selective --recompute-modules mla_up_proj,mlp";
  const auto j = run_json(plan + " --pipeline-model-parallel-layout 'Et|(tt|)*30mL'");
  std::vector<int> blocks;
  for (const auto& stage : j.at("plan").at("stages")) blocks.push_back(stage.at("blocks").get<int>());
  CHECK(blocks == std::vector<int>{7, 8, 8, 8, 8, 8, 8, 6});
  CHECK(j.at("plan").at("vp") == 4);
  CHECK(j.at("plan").at("schedule") == "interleaved");
  // The last stage runs the module: one more block's work than its six, so it is not the lightest.
  const auto& stages = j.at("plan").at("stages");
  CHECK(stages.at(7).at("fwd_s").get<double>() > stages.at(1).at("fwd_s").get<double>() * 6.0 / 8.0);

  SECTION("misuse is exit 2 with the reason") {
    const auto letter = run_phaze(plan + " --pipeline-model-parallel-layout 'Et|(tt|)*30xL'");
    CHECK(letter.status == 2);
    CHECK(contains(letter.err, "is not a layer letter"));
    const auto mtp = run_phaze(plan + " --pipeline-model-parallel-layout 'Et|(tt|)*30tL' --mtp-layers 1");
    CHECK(mtp.status == 2);
    const auto dropped = run_phaze(plan + " --pipeline-model-parallel-layout 'Et|(tt|)*30L' --mtp-layers 0");
    CHECK(dropped.status == 0);
    const auto vp = run_phaze(plan + " --pipeline-model-parallel-layout 'Et|(tt|)*30mL' --vp 2");
    CHECK(vp.status == 2);
    CHECK(contains(vp.err, "gives 4 chunks per stage"));
    const auto both =
        run_phaze(plan + " --pipeline-model-parallel-layout 'Et|(tt|)*30mL' --stage-blocks 7,8,8,8,8,8,8,6");
    CHECK(both.status == 2);
    CHECK(contains(both.err, "keep one"));
  }
}

TEST_CASE("phaze estimate --recompute-modules recomputes Megatron-Core's submodules, stated in the JSON",
          "[e2e][estimate][recompute]") {
  const std::string plan =
      "estimate llama3-8b --device h100-sxm --devices 8 --tp 1 --pp 1 --global-batch 16 --microbatch 1 "
      "--memory-headroom 0 --seq 2048 --distributed-optimizer";
  const auto core = run_json(plan + " --recompute selective");
  const auto more = run_json(plan + " --recompute selective --recompute-modules mlp,layernorm");
  CHECK(core.at("plan").at("recompute_modules") == std::vector<std::string>{"core_attn"});
  CHECK(more.at("plan").at("recompute_modules") == std::vector<std::string>{"mlp", "layernorm"});
  // Recomputing the MLP and the norms keeps less and runs more again.
  CHECK(more.at("peak_memory_bytes").get<double>() < core.at("peak_memory_bytes").get<double>());
  CHECK(more.at("breakdown").at("recompute_s").get<double>() >
        core.at("breakdown").at("recompute_s").get<double>());
  const auto without = run_phaze(plan + " --recompute full --recompute-modules mlp");
  CHECK(without.status == 2);
  CHECK(contains(without.err, "give --recompute selective"));
  const auto unknown = run_phaze(plan + " --recompute selective --recompute-modules attention");
  CHECK(unknown.status == 2);
}

TEST_CASE("phaze estimate --cross-entropy fused: a faster loss in less memory, stated in the report and JSON",
          "[e2e][estimate]") {
  const std::string gpt2 =
      "estimate gpt2 --device a100-80gb --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 8 --seq "
      "1024";
  const auto megatron = run_json(gpt2);
  const auto fused = run_json(gpt2 + " --cross-entropy fused");
  CHECK(megatron["plan"]["cross_entropy"] == "megatron");
  CHECK(fused["plan"]["cross_entropy"] == "fused");
  CHECK(fused["time_per_batch_s"].get<double>() < megatron["time_per_batch_s"].get<double>());
  CHECK(fused["peak_memory_bytes"].get<double>() < megatron["peak_memory_bytes"].get<double>());
  const auto table = run_phaze(gpt2 + " --cross-entropy fused");
  CHECK(table.status == 0);
  CHECK(contains(table.out, "fused cross-entropy"));
  const auto bad = run_phaze(gpt2 + " --cross-entropy apex");
  CHECK(bad.status == 2);
  CHECK(contains(bad.err, "--cross-entropy"));
}

TEST_CASE("phaze estimate --vector-kernels eager: plain PyTorch's memory-bound kernels, slower, stated",
          "[e2e][estimate]") {
  const std::string llama =
      "estimate llama3-8b --device h100-sxm --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 1 "
      "--seq 8192 --distributed-optimizer --recompute full";
  const auto fused = run_json(llama);
  const auto eager = run_json(llama + " --vector-kernels eager");
  CHECK(fused["plan"]["vector_kernels"] == "fused");
  CHECK(eager["plan"]["vector_kernels"] == "eager");
  // Eager rotary embedding and SwiGLU run at an eighth and a quarter of the HBM peak: a slower step, the
  // same memory.
  CHECK(eager["time_per_batch_s"].get<double>() > 1.02 * fused["time_per_batch_s"].get<double>());
  CHECK(eager["peak_memory_bytes"].get<double>() == fused["peak_memory_bytes"].get<double>());
  const auto table = run_phaze(llama + " --vector-kernels eager");
  CHECK(table.status == 0);
  CHECK(contains(table.out, "eager vector kernels"));
  const auto bad = run_phaze(llama + " --vector-kernels compiled");
  CHECK(bad.status == 2);
  CHECK(contains(bad.err, "--vector-kernels"));
  const auto emitted = run_phaze(
      "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --vector-kernels eager "
      "--emit megatron");
  CHECK(emitted.status == 2);
  CHECK(contains(emitted.err, "--vector-kernels fused"));
  // `plan` states both knobs in its JSON too; a layer table and an accelerator design refuse them by name.
  const auto planned = run_json(
      "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --vector-kernels eager "
      "--cross-entropy "
      "fused");
  CHECK(planned["plan"]["vector_kernels"] == "eager");
  CHECK(planned["plan"]["cross_entropy"] == "fused");
  const std::string layer_table = std::string{PHAZE_TEST_DATA_DIR} + "/layer_tables/gpt_small_chain.json";
  for (const std::string knob : {"--vector-kernels eager", "--cross-entropy fused"}) {
    INFO(knob);
    const auto on_table = run_phaze("plan --layer-table '" + layer_table + "' " + knob);
    CHECK(on_table.status == 2);
    CHECK(contains(on_table.err, knob.substr(0, knob.find(' '))));
    const auto on_design = run_phaze(
        "estimate gpt2 --device tpuv4-like --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 8 " +
        knob);
    CHECK(on_design.status == 2);
    CHECK(contains(on_design.err, "accelerator design"));
  }
}

TEST_CASE(
    "phaze estimate without Apex or Transformer Engine: unfused gradient accumulation, multi-tensor Adam",
    "[e2e][estimate]") {
  const std::string llama =
      "estimate llama3-8b --device h100-sxm --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 1 "
      "--seq 8192 --distributed-optimizer --recompute full";
  const auto fused = run_json(llama);
  const auto local = run_json(llama + " --no-gradient-accumulation-fusion --optimizer-kernels foreach");
  CHECK(fused["plan"]["gradient_accumulation_fusion"] == true);
  CHECK(fused["plan"]["optimizer_kernels"] == "fused");
  CHECK(local["plan"]["gradient_accumulation_fusion"] == false);
  CHECK(local["plan"]["optimizer_kernels"] == "foreach");
  // A slower step, three times the optimizer's traffic, the same memory.
  CHECK(local["breakdown"]["compute_s"].get<double>() > fused["breakdown"]["compute_s"].get<double>());
  CHECK(local["breakdown"]["optimizer_s"].get<double>() ==
        Approx(3.0 * fused["breakdown"]["optimizer_s"].get<double>()));
  CHECK(local["peak_memory_bytes"].get<double>() == fused["peak_memory_bytes"].get<double>());
  const auto table = run_phaze(llama + " --no-gradient-accumulation-fusion --optimizer-kernels foreach");
  CHECK(table.status == 0);
  CHECK(contains(table.out, "gradients accumulated by a kernel of their own"));
  CHECK(contains(table.out, "multi-tensor Adam"));
  // Megatron-LM has the first as a flag and not the second; SGD has no multi-tensor Adam; an accelerator
  // design runs no GPU software stack.
  const std::string plan = "plan llama3-8b --device h100-sxm --devices 16 --global-batch 64 --emit megatron";
  const auto emitted = run_phaze(plan + " --no-gradient-accumulation-fusion");
  CHECK(emitted.status == 0);
  CHECK(contains(emitted.out, "--no-gradient-accumulation-fusion"));
  const auto refused = run_phaze(plan + " --optimizer-kernels foreach");
  CHECK(refused.status == 2);
  CHECK(contains(refused.err, "--optimizer-kernels fused"));
  const auto sgd = run_phaze(llama + " --optimizer sgd --optimizer-kernels foreach");
  CHECK(sgd.status == 2);
  CHECK(contains(sgd.err, "--optimizer-kernels foreach"));
  const auto bf16_state = run_phaze(llama + " --optimizer-kernels foreach --optimizer-dtype bf16");
  CHECK(bf16_state.status == 2);
  CHECK(contains(bf16_state.err, "--optimizer-dtype"));
  const auto design = run_phaze(
      "estimate gpt2 --device tpuv4-like --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 8 "
      "--no-gradient-accumulation-fusion");
  CHECK(design.status == 2);
  CHECK(contains(design.err, "accelerator design"));
}

TEST_CASE(
    "phaze estimate of a mixture of experts: dispatcher, EP overlap and permutation, stated and refused",
    "[e2e][estimate][moe]") {
  const std::string plan =
      "estimate qwen3-30b-a3b --device h100-sxm --devices 16 --tp 1 --pp 1 --ep 16 --global-batch 1024 "
      "--microbatch 1 --seq 4096 --distributed-optimizer";
  const auto nccl = run_json(plan);
  CHECK(nccl.at("plan").at("moe_dispatcher") == "alltoall");
  CHECK(nccl.at("plan").at("moe_permutation") == "fused");
  const auto flex = run_json(plan + " --moe-dispatcher flex");
  CHECK(flex.at("plan").at("moe_dispatcher") == "flex");
  CHECK(flex.at("breakdown").at("tp_comm_s").get<double>() <
        nccl.at("breakdown").at("tp_comm_s").get<double>() / 2.0);
  const auto overlapped = run_json(plan + " --overlap grad,param,ep");
  CHECK(overlapped.at("plan").at("overlap").dump() == R"(["grad","param","ep"])");
  CHECK(overlapped.at("time_per_batch_s").get<double>() < nccl.at("time_per_batch_s").get<double>());
  const auto unfused = run_json(plan + " --moe-permutation unfused");
  CHECK(unfused.at("plan").at("moe_permutation") == "unfused");
  CHECK(unfused.at("breakdown").at("compute_s").get<double>() >
        nccl.at("breakdown").at("compute_s").get<double>());
  const auto text = run_phaze(plan + " --moe-dispatcher flex --moe-permutation unfused --overlap ep").out;
  CHECK(contains(text, "flex token dispatcher, unfused permutation"));
  CHECK(contains(text, "overlap ep"));
  // Megatron-Core's rules of --overlap-moe-expert-parallel-comm: exit 2 with the reason.
  const auto piped = run_phaze(
      "estimate qwen3-30b-a3b --device h100-sxm --devices 16 --tp 1 --pp 2 --ep 8 --global-batch 1024 "
      "--microbatch 1 --overlap ep");
  CHECK(piped.status == 2);
  CHECK(contains(piped.err, "interleaved schedule"));
  const auto unknown = run_phaze(plan + " --moe-dispatcher deepep");
  CHECK(unknown.status == 2);
  // Megatron-LM core_r0.11.0 has neither the flex dispatcher nor EP overlap: --emit megatron says so.
  const std::string planned =
      "plan qwen3-30b-a3b --device h100-sxm --devices 16 --global-batch 64 --tp 1 --pp 1 --ep 16 "
      "--placer uniform --emit megatron";
  for (const char* extra : {" --moe-dispatcher flex", " --overlap ep"}) {
    INFO(extra);
    const auto refused = run_phaze(planned + extra);
    CHECK(refused.status == 2);
    CHECK(contains(refused.err, "core_r0.11.0"));
  }
  const auto unfused_line = run_phaze(planned + " --moe-permutation unfused");
  REQUIRE(unfused_line.status == 0);
  CHECK_FALSE(contains(unfused_line.out, "--moe-permute-fusion"));
}
