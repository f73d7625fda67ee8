/// @file
/// Whole training iterations measured on one H100 SXM (tests/data/gpu/h100-sxm-train-step.csv, made by
/// tools/gpu/train_step.py; docs/gpu-measurements.md, "Whole training iterations on the H100") against
/// train::estimate_step with the h100-sxm preset. GPT-2 (124M), GPT-2 XL (1.56B) and Megatron's 2.5B GPT at
/// sequence 1024, microbatch 1..16, four microbatches per iteration, no or full recomputation, bf16 + Adam on
/// one GPU. phaze models no host (kernel-launch) overhead, so it is far too fast where eager PyTorch is
/// launch-bound (small models, small microbatches) and within about 10% where the GPU is busy (1.5B+ at
/// microbatch 8 and 16). The bounds below are the measured errors with a small margin, so a regression of the
/// step-time or memory model fails here. No GPU is needed: the measurements are data.
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "../support/csv.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

using namespace phaze;

namespace {

const std::string data_dir = std::string{PHAZE_TEST_DATA_DIR} + "/gpu/";

struct measured_step {
  std::string model;
  std::int64_t seq = 0;
  std::int64_t microbatch = 0;
  std::int64_t global_batch = 0;
  bool full = false;
  double seconds = 0.0;
  double peak_bytes = 0.0;
};

std::vector<measured_step> read_steps(const std::string& file) {
  std::vector<measured_step> rows;
  for (const auto& r : phaze::testing::read_csv(data_dir + file)) {
    rows.push_back({r.at("model"), std::stoll(r.at("seq")), std::stoll(r.at("microbatch")),
                    std::stoll(r.at("global_batch")), r.at("recompute") == "full",
                    std::stod(r.at("iteration_s")), std::stod(r.at("peak_mem_bytes"))});
  }
  return rows;
}

struct compared {
  measured_step run;
  double estimate_s = 0.0;
  double estimate_bytes = 0.0;
  double params = 0.0;
  /// The estimate as the runs ran: fused attention, eager PyTorch's host time per op and memory-bound
  /// kernels.
  double hosted_s = 0.0;
  [[nodiscard]] double time_error() const { return (estimate_s - run.seconds) / run.seconds; }
  [[nodiscard]] double hosted_error() const { return (hosted_s - run.seconds) / run.seconds; }
  [[nodiscard]] double memory_ratio() const { return estimate_bytes / run.peak_bytes; }
  /// Rows where the GPU, not the host, sets the pace: 1.5B+ parameters and 8+ sequences per microbatch.
  [[nodiscard]] bool gpu_bound() const { return params >= 1.0e9 && run.microbatch >= 8; }
};

struct errors {
  double mae = 0.0;
  double max = 0.0;
  int n = 0;
};

errors time_errors(const std::vector<compared>& rows, bool gpu_bound_only, bool hosted = false) {
  errors e;
  for (const auto& c : rows) {
    if (gpu_bound_only && !c.gpu_bound()) continue;
    const double err = std::abs(hosted ? c.hosted_error() : c.time_error());
    e.mae += err;
    e.max = std::max(e.max, err);
    ++e.n;
  }
  if (e.n > 0) e.mae /= e.n;
  return e;
}

}  // namespace

TEST_CASE("h100-sxm: estimated vs measured whole training iterations (PyTorch, bf16, Adam, 1 GPU)",
          "[place][h100_step]") {
  const auto device = *hw::find_preset("h100-sxm");
  const auto runs = read_steps("h100-sxm-train-step.csv");
  REQUIRE(runs.size() == 27);
  sched::schedule_cache cache;
  std::vector<compared> rows;
  static bool printed = false;  // Catch2 re-runs the case once per SECTION; print the table once
  const bool print = !printed;
  printed = true;
  if (print) std::printf("h100-sxm: measured (tools/gpu/train_step.py) vs train::estimate_step\n");
  if (print)
    std::printf("%-17s %3s %4s %-5s %10s %10s %8s %10s %8s %10s %10s %7s\n", "model", "mb", "gb", "recomp",
                "measured s", "estimate s", "error", "+host s", "error", "meas GiB", "est GiB", "est/meas");
  for (const auto& r : runs) {
    const auto m = model::with_sequence(zoo::get(r.model), r.seq);
    const train::parallelism par{1, 1, 1};
    train::training_knobs k;
    k.global_batch = r.global_batch;
    k.microbatch = r.microbatch;
    k.precision = hw::precision::bf16;
    k.opt = train::optimizer::adam;
    k.recompute = r.full ? model::recompute::full : model::recompute::none;
    train::validate(m, par, k, 1);
    const auto e = train::estimate_step(m, phaze::test::cluster_of(device, par), par, k, cache);
    // As the runs ran: SDPA's fused attention (its FlashAttention-2 backend, the one that runs dropout),
    // launched by eager PyTorch (the command line's host default), its memory-bound ops PyTorch's own
    // kernels.
    k.fused_attention = true;
    k.attention_kernel = model::attention_kernel::flash2;
    k.host_overhead = train::eager_host_per_op;
    k.eager_vector = true;
    const auto hosted = train::estimate_step(m, phaze::test::cluster_of(device, par), par, k, cache);
    compared c{r, e.time_per_batch.value(), e.peak_memory.value(),
               static_cast<double>(model::parameter_count(m)), hosted.time_per_batch.value()};
    rows.push_back(c);
    if (print)
      std::printf("%-17s %3lld %4lld %-5s %10.4f %10.4f %+7.1f%% %10.4f %+7.1f%% %10.2f %10.2f %7.2f\n",
                  r.model.c_str(), static_cast<long long>(r.microbatch),
                  static_cast<long long>(r.global_batch), r.full ? "full" : "none", r.seconds, c.estimate_s,
                  100.0 * c.time_error(), c.hosted_s, 100.0 * c.hosted_error(), r.peak_bytes / 1073741824.0,
                  c.estimate_bytes / 1073741824.0, c.memory_ratio());
  }
  const auto all = time_errors(rows, false);
  const auto busy = time_errors(rows, true);
  const auto hosted_all = time_errors(rows, false, true);
  const auto hosted_busy = time_errors(rows, true, true);
  if (print)
    std::printf("time, all %d rows: mean absolute error %.1f%%, max %.1f%%\n", all.n, 100.0 * all.mae,
                100.0 * all.max);
  if (print)
    std::printf("time, %d GPU-bound rows (1.5B+ parameters, microbatch 8+): mean %.1f%%, max %.1f%%\n",
                busy.n, 100.0 * busy.mae, 100.0 * busy.max);
  if (print)
    std::printf(
        "with eager PyTorch's host time per op (%.1f us): all rows mean %.1f%%, max %.1f%%; GPU-bound rows "
        "mean %.1f%%, max %.1f%%\n\n",
        1e6 * train::eager_host_per_op, 100.0 * hosted_all.mae, 100.0 * hosted_all.max,
        100.0 * hosted_busy.mae, 100.0 * hosted_busy.max);

  SECTION("time: far off where eager PyTorch is launch-bound, close where the GPU is busy") {
    CHECK(all.mae <= 0.44);  // measured 38.4%
    CHECK(all.max <= 0.88);  // measured 84.6%
    REQUIRE(busy.n == 5);
    CHECK(busy.mae <= 0.06);  // measured 4.0%
    CHECK(busy.max <= 0.12);  // measured 8.2%
    // phaze leaves out the host's launch overheads, so it must never be much slower than the GPU was.
    for (const auto& c : rows) CHECK(c.time_error() <= 0.06);
  }

  SECTION("time: with eager PyTorch's host time per op, the launch-bound rows are within 16%") {
    // The rows at microbatch 1 and 2 without recomputation are host-bound (the measured time hardly moves
    // with the microbatch). With the host's time per op (train::eager_host_per_op, from the three
    // microbatch-1 rows) they are within 16%, where the GPU's time alone misses them by 29-76%. Where the GPU
    // paces the step the fused-attention estimate stays 17-29% fast, eager kernels' measured rates included
    // (22-34% at the copy rate): what the rest is was not profiled (docs/gpu-measurements.md).
    double sum = 0.0, worst = 0.0;
    int n = 0;
    for (const auto& c : rows) {
      if (c.run.full || c.run.microbatch > 2) continue;
      CAPTURE(c.run.model, c.run.microbatch, c.hosted_error(), c.time_error());
      CHECK(std::abs(c.hosted_error()) < std::abs(c.time_error()));
      sum += std::abs(c.hosted_error());
      worst = std::max(worst, std::abs(c.hosted_error()));
      ++n;
    }
    REQUIRE(n == 6);
    CHECK(sum / n <= 0.10);  // measured 8.2%
    CHECK(worst <= 0.16);    // measured 14.7% (gpt2, microbatch 1)
    // The five GPU-bound rows: 23.0% mean, 29.0% max (at the copy rate with no fixed time: 27.7%, 33.8%).
    CHECK(hosted_busy.mae <= 0.245);
    CHECK(hosted_busy.max <= 0.31);
  }

  SECTION("memory: within the stated bounds of torch.cuda.max_memory_allocated") {
    for (const auto& c : rows) {
      INFO(c.run.model << " microbatch " << c.run.microbatch << (c.run.full ? " full" : " none"));
      // Without recomputation phaze keeps the attention scores and softmax of every block (unfused
      // attention), which SDPA's fused kernels never store: over-estimates, growing with the microbatch.
      // With full recomputation phaze under-counts the fp32 logits and loss buffers of the LM head (vocab
      // 50257 x tokens), which dominate GPT-2's activations.
      CHECK(c.memory_ratio() >= 0.40);
      CHECK(c.memory_ratio() <= 1.80);
      if (c.params >= 1.0e9 && c.run.full) {
        CHECK(c.memory_ratio() >= 0.83);
        CHECK(c.memory_ratio() <= 1.00);
      }
    }
  }
}

TEST_CASE("h100-sxm: the host's time per op on eager blocks it was not derived from", "[place][h100_step]") {
  // tests/data/gpu/h100-sxm-host-overhead.csv (tools/gpu/host_overhead.py): 24 blocks of hidden 256, 4 heads,
  // 128 tokens at microbatch 1 under bf16 autocast, forward + backward, so small that the host paces every
  // kernel. phaze's estimate of such a block is its ops times train::eager_host_per_op (derived from other
  // runs: GPT-2, GPT-2 XL and Megatron's 2.5B GPT). A GPT block of another size is within 15%; a Llama block
  // written in plain PyTorch (rotary embedding by slicing and concatenating, SwiGLU by chunk, SiLU and
  // product) launches about twice the kernels per op of phaze and is missed by some 43%: the constant belongs
  // to GPT-style eager blocks, not to every way of writing a block.
  const auto device = *hw::find_preset("h100-sxm");
  std::map<std::string, double> measured;
  for (const auto& r : phaze::testing::read_csv(data_dir + "h100-sxm-host-overhead.csv"))
    if (r.at("mode") == "eager") measured[r.at("arch")] = std::stod(r.at("seconds_per_block"));
  REQUIRE(measured.size() == 2);
  auto gpt = zoo::get("gpt2").config;
  gpt.hidden = 256;
  gpt.heads = 4;
  gpt.ffn = 1024;
  auto llama = zoo::get("llama2-7b").config;
  llama.hidden = 256;
  llama.heads = 4;
  llama.kv_heads = 1;
  llama.head_dim = 0;
  llama.ffn = 1024;
  model::layer_shape shape{1, 128, 1, false, 2};
  shape.fused_attention = true;
  shape.host_per_op = train::eager_host_per_op;
  shape.eager_vector = true;
  sched::schedule_cache cache;
  const auto route = phaze::test::tp_route(device, 1);
  for (const auto& [arch, config, bound] :
       {std::tuple{std::string{"gpt"}, gpt, 0.15}, std::tuple{std::string{"llama"}, llama, 0.50}}) {
    const auto t = train::time_layer(model::block_layer(config, shape), device, route, cache);
    const double estimate = (t.forward + t.backward).value();
    const double error = (estimate - measured.at(arch)) / measured.at(arch);
    CAPTURE(arch, estimate, measured.at(arch), error);
    CHECK(std::abs(error) < bound);
    CHECK(error < 0.0);  // both blocks launch at least phaze's ops' worth of kernels
    WARN(arch << " block of hidden 256 at 128 tokens: measured " << 1e6 * measured.at(arch) << " us, phaze "
              << 1e6 * estimate << " us (" << 100 * error << "%)");
  }
}
