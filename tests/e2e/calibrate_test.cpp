// `phaze calibrate` and `--calibration FILE`: runs timed by phaze itself under a known calibration are fitted
// back to that calibration's predictions (the oracle), logs give their median iteration time, and bad runs,
// files and kernel choices are exit 2 with the fix. Also `--attention-kernel`.
#include "run_phaze.hpp"

#include <cmath>
#include <string>
#include <vector>

using phaze::e2e::contains;
using phaze::e2e::read_file;
using phaze::e2e::run_json;
using phaze::e2e::run_phaze;
using phaze::e2e::temp_path;
using phaze::e2e::write_temp;

namespace {

/// Plans of GPT-2 on A100s that differ in what a calibration scales: devices (collectives), microbatches
/// (fixed times per microbatch and per step) and the sequence (attention).
const std::vector<std::string> calibrate_plans{
    "gpt2 --device a100-80gb --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 8",
    "gpt2 --device a100-80gb --devices 8 --tp 2 --pp 2 --global-batch 64 --microbatch 2 --sequence-parallel",
    "gpt2 --device a100-80gb --devices 16 --tp 1 --pp 2 --global-batch 128 --microbatch 4 --seq 4096",
    "gpt2 --device a100-80gb --devices 4 --tp 1 --pp 1 --global-batch 16 --microbatch 4 --seq 512",
};

std::string json_args(const std::string& plan) {
  std::string out = "[";
  std::size_t start = 0;
  while (start < plan.size()) {
    std::size_t end = plan.find(' ', start);
    if (end == std::string::npos) end = plan.size();
    out += (out.size() > 1 ? ", \"" : "\"") + plan.substr(start, end - start) + "\"";
    start = end + 1;
  }
  return out + "]";
}

double time_of(const std::string& plan, const std::string& extra = "") {
  return run_json("estimate " + plan + " --solver list " + extra)["time_per_batch_s"].get<double>();
}

}  // namespace

TEST_CASE("phaze calibrate fits runs that a known calibration timed", "[e2e][calibrate]") {
  // The truth: a calibration file written by hand, GEMMs 30% slower and 50 ms per step.
  const auto truth = write_temp("truth.json", R"({"schema": "phaze.calibration", "version": 1,
      "factors": {"gemm": 1.3, "step_s": 0.05}})");
  std::string runs;
  for (const auto& plan : calibrate_plans) {
    runs += "{\"args\": " + json_args(plan) +
            ", \"step_s\": " + std::to_string(time_of(plan, "--calibration '" + truth.string() + "'")) +
            "}\n";
  }
  const auto runs_file = write_temp("runs.jsonl", runs);
  const auto out = temp_path("fitted.json");
  const auto j = run_json("calibrate '" + runs_file.string() + "' --out '" + out.string() + "'");
  CHECK(j["schema"] == "phaze.calibration");
  CHECK(j["runs"] == 4);
  // Uncalibrated, phaze is off; calibrated on these runs, within 1% of each of them and of the truth's
  // predictions for a plan it did not see.
  CHECK(j["mean_abs_error_before"].get<double>() > 0.05);
  CHECK(j["mean_abs_error_after"].get<double>() < 0.01);
  CHECK(j["per_run"].size() == 4);
  const auto written = nlohmann::json::parse(read_file(out));
  CHECK(written["factors"] == j["factors"]);
  const std::string unseen =
      "gpt2 --device a100-80gb --devices 32 --tp 2 --pp 1 --global-batch 256 --microbatch 8 "
      "--sequence-parallel";
  const double expected = time_of(unseen, "--calibration '" + truth.string() + "'");
  const double fitted = time_of(unseen, "--calibration '" + out.string() + "'");
  CHECK(std::abs(fitted - expected) / expected < 0.02);
  // The text report names every factor and the leave-one-out error.
  const auto text = run_phaze("calibrate '" + runs_file.string() + "'");
  CHECK(text.status == 0);
  for (const char* name : {"gemm", "step_s", "attention", "collective", "microbatch_s", "memory", "left out"})
    CHECK(contains(text.out, name));
  phaze::e2e::fs::remove(truth);
  phaze::e2e::fs::remove(runs_file);
  phaze::e2e::fs::remove(out);
}

TEST_CASE("phaze calibrate reads training logs with the plan they ran", "[e2e][calibrate]") {
  // Megatron-LM's iteration lines: two warm-up iterations dropped, the median of the rest.
  const auto log = write_temp(
      "megatron.log", R"( iteration        1/     100 | elapsed time per iteration (ms): 9000.0 | loss 10.1
 iteration        2/     100 | elapsed time per iteration (ms): 7000.0 | loss 9.9
 iteration        3/     100 | elapsed time per iteration (ms): 2000.0 | loss 9.1
 iteration        4/     100 | elapsed time per iteration (ms): 2200.0 | loss 8.7
 iteration        5/     100 | elapsed time per iteration (ms): 2100.0 | loss 8.5
)");
  const auto j = run_json("calibrate '" + log.string() + "' --plan '" + calibrate_plans[0] + "'");
  REQUIRE(j["per_run"].size() == 1);
  CHECK(j["per_run"][0]["measured_s"].get<double>() == Approx(2.1));
  CHECK(j["fitted"].size() == 1);  // one run: one factor at most
  // NeMo's and torchtitan's lines in a runs file.
  const auto runs =
      write_temp("logs.jsonl",
                 "{\"args\": " + json_args(calibrate_plans[0]) +
                     R"(, "log": "Epoch 0: 10/100 reduced_train_loss=3.1, train_step_timing in s=1.5\n"})" +
                     "\n" + "{\"args\": " + json_args(calibrate_plans[3]) +
                     R"(, "log": "step: 5  loss: 7.9  tps: 4,096  mfu: 30%"})" + "\n");
  const auto k = run_json("calibrate '" + runs.string() + "'");
  REQUIRE(k["per_run"].size() == 2);
  CHECK(k["per_run"][0]["measured_s"].get<double>() == Approx(1.5));
  // 16 sequences of 512 tokens over 4 devices at 4,096 tokens per second per device.
  CHECK(k["per_run"][1]["measured_s"].get<double>() == Approx(16.0 * 512.0 / 4.0 / 4096.0));
  phaze::e2e::fs::remove(log);
  phaze::e2e::fs::remove(runs);
}

TEST_CASE("bad runs, calibration files and kernels are exit 2 with the fix", "[e2e][calibrate]") {
  const std::string plan = json_args(calibrate_plans[0]);
  struct bad_case {
    std::string file;
    std::string message;
  };
  for (const auto& [text, message] : std::vector<bad_case>{
           {"{\"args\": " + plan + "}", "give exactly one of 'step_s'"},
           {"{\"args\": " + plan + ", \"step_s\": -1}", "must be a positive number of seconds"},
           {"{\"args\": [\"gpt2\", \"--tp\"], \"step_s\": 1}", "not those of a phaze estimate"},
           {"{\"args\": " + plan + ", \"step_s\": 1, \"stepp\": 2}", "unknown field 'stepp'"},
           {"{\"args\": [\"gpt2\", \"--calibration\", \"x.json\"], \"step_s\": 1}",
            "must not name --calibration"},
           {"{\"args\": " + plan + ", \"log\": \"nothing here\"}", "reports no iteration time"},
           {"{\"args\": [1, 2", "not valid JSON"},
       }) {
    const auto f = write_temp("bad.jsonl", text);
    const auto r = run_phaze("calibrate '" + f.string() + "'");
    INFO(text << "\n" << r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, message));
    phaze::e2e::fs::remove(f);
  }
  // A log without its plan.
  const auto log = write_temp("plain.log", "elapsed time per iteration (ms): 100.0\n");
  auto r = run_phaze("calibrate '" + log.string() + "'");
  CHECK(r.status == 2);
  CHECK(contains(r.err, "give the plan it ran with --plan"));
  phaze::e2e::fs::remove(log);
  // Calibration files: wrong schema, unknown factor, factor out of bounds.
  for (const auto& [text, message] : std::vector<bad_case>{
           {R"({"schema": "phaze.device", "factors": {}})", "must be \"phaze.calibration\""},
           {R"({"schema": "phaze.calibration", "factors": {"gemms": 1.2}})",
            "unknown factor 'factors.gemms'"},
           {R"({"schema": "phaze.calibration", "factors": {"gemm": 9}})", "must lie in [0.5, 2.5]"},
           {R"({"schema": "phaze.calibration", "version": 2, "factors": {"gemm": 1.1}})",
            "'version' must be 1"},
           {R"({"schema": "phaze.calibration", "factor": {"gemm": 1.1}})", "unknown field 'factor'"},
           {R"({"schema": "phaze.calibration", "factors": {}})", "missing or empty"},
       }) {
    const auto f = write_temp("cal.json", text);
    const auto e = run_phaze("estimate " + calibrate_plans[0] + " --calibration '" + f.string() + "'");
    INFO(text << "\n" << e.err);
    CHECK(e.status == 2);
    CHECK(contains(e.err, message));
    phaze::e2e::fs::remove(f);
  }
  // A layer table holds its times already.
  r = run_phaze("plan --layer-table '" + std::string{PHAZE_TEST_DATA_DIR} +
                "/layer_tables/gpt_small_chain.json' --attention-kernel flash2");
  CHECK(r.status == 2);
  CHECK(contains(r.err, "drop them with --layer-table"));
  // Kernels: FlashAttention-3 is Hopper's; a kernel for unfused attention is a contradiction.
  r = run_phaze("estimate " + calibrate_plans[0] + " --attention-kernel flash3");
  CHECK(r.status == 2);
  CHECK(contains(r.err, "FlashAttention-3 runs on Hopper only"));
  r = run_phaze("estimate " + calibrate_plans[0] + " --attention unfused --attention-kernel triton");
  CHECK(r.status == 2);
  CHECK(contains(r.err, "give --attention fused, or drop --attention-kernel"));
}

TEST_CASE(
    "phaze estimate --attention-kernel: the Triton kernel is slower than FlashAttention-2, FlashAttention-2 "
    "than FlexAttention, FlexAttention than cuDNN; the memory-efficient kernel slowest",
    "[e2e][estimate]") {
  const std::string a100 =
      "gpt2 --device a100-80gb --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 8 "
      "--seq 8192 --vocab 50304";
  CHECK(time_of(a100, "--attention-kernel triton") > time_of(a100, "--attention-kernel flash2"));
  CHECK(time_of(a100) == Approx(time_of(a100, "--attention-kernel flash2")));
  const std::string h100 =
      "gpt2 --device h100-sxm --devices 8 --tp 1 --pp 1 --global-batch 64 --microbatch 8 "
      "--seq 8192 --vocab 50304";
  CHECK(time_of(h100, "--attention-kernel flash2") > time_of(h100, "--attention-kernel flex"));
  CHECK(time_of(h100, "--attention-kernel flex") > time_of(h100, "--attention-kernel cudnn"));
  CHECK(time_of(h100, "--attention-kernel efficient") > time_of(h100, "--attention-kernel triton"));
  CHECK(time_of(h100) == Approx(time_of(h100, "--attention-kernel cudnn")));
  // On the A100 FlexAttention trails FlashAttention-2 (published), where on Hopper it leads (measured).
  CHECK(time_of(a100, "--attention-kernel flex") > time_of(a100, "--attention-kernel flash2"));
  const auto j = run_json("estimate " + h100 + " --attention-kernel flash2");
  CHECK(j["plan"]["attention_kernel"] == "flash2");
}

TEST_CASE("phaze estimate --host-overhead: an eager host paces small layers, not large ones",
          "[e2e][estimate]") {
  // GPT-2 at microbatch 1 on an H100 launches its ops slower than the GPU runs them (docs/cost-model.md,
  // section 7.4a): the default (eager PyTorch, measured) is slower than the GPU's time alone (0, CUDA
  // graphs), and a slower host slower still. At microbatch 16 the GPU paces every block and the host changes
  // next to nothing.
  const std::string small =
      "gpt2 --device h100-sxm --devices 1 --tp 1 --pp 1 --global-batch 4 --microbatch 1 --seq 1024";
  const double eager = time_of(small);
  CHECK(eager == Approx(time_of(small, "--host-overhead 60.7")));
  CHECK(eager > 1.5 * time_of(small, "--host-overhead 0"));
  CHECK(time_of(small, "--host-overhead 120") > 1.5 * eager);
  const std::string large =
      "gpt2-xl --device h100-sxm --devices 1 --tp 1 --pp 1 --global-batch 32 --microbatch 16 --seq 1024 "
      "--recompute full";
  // (the embedding's few small ops may still wait on the host: within 0.5%)
  CHECK(time_of(large) == Approx(time_of(large, "--host-overhead 0")).epsilon(0.005));
  const auto j = run_json("estimate " + small + " --host-overhead 25");
  CHECK(j["plan"]["host_overhead_us"].get<double>() == Approx(25.0));
  for (const char* bad : {"-1", "1001", "nan", "fast"}) {
    const auto r = run_phaze("estimate " + small + " --host-overhead " + bad);
    INFO(bad << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "--host-overhead"));
  }
}
