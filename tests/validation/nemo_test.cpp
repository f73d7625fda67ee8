// The training step as NeMo and Megatron-Bridge run it on DGX-H100, against their published throughput:
// tests/data/validation/nemo-h100.csv (every row's source in its header: NVIDIA/NeMo's
// docs/source/performance/performance_summary.md, NeMo 24.07, and NVIDIA-NeMo/Megatron-Bridge's
// docs/performance-summary-archive.md, 25.09 to 26.06), dense models of 5B to 405B parameters in FP8 with
// tensor, pipeline (interleaved), context and data parallelism. Each row is estimated with exactly its
// published degrees, microbatch, sequence and batch, and the features the recipes of those releases turn
// on (tests/data/validation/nemo-h100-models.md): FP8 (Transformer Engine), fused attention, the distributed
// optimizer with overlapped gradient reduction and parameter gather, sequence parallelism and
// tensor-parallel overlap where tp > 1, no recomputation. Nothing is chosen or fitted per row; the tokens
// per second per GPU are compared (the TFLOP/s columns count attention two ways across the sources). Rows
// whose FSDP column is set are costed with the distributed optimizer (ZeRO-1), which shards less.
#include <phaze/hw/presets.hpp>
#include <phaze/model/model.hpp>
#include <phaze/model/transformer.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/train/knobs.hpp>
#include <phaze/train/step.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace phaze;

namespace {

struct nemo_row {
  std::string model;
  int gpus = 0;
  std::string precision;
  std::int64_t gbs = 0;
  std::optional<std::int64_t> mbs;
  std::int64_t seq = 0;
  int tp = 1;
  int pp = 1;
  int cp = 1;
  int vp = 1;  // 1 for 'n/a'
  int fsdp = 0;
  std::optional<double> tokens_per_gpu;
  std::string release;
};

std::optional<std::int64_t> number_or_none(const std::string& s) {
  if (s == "n/a" || s.empty()) return std::nullopt;
  return std::stoll(s);
}

std::vector<nemo_row> read_rows() {
  std::ifstream in(std::string{PHAZE_TEST_DATA_DIR} + "/validation/nemo-h100.csv");
  REQUIRE(in.good());
  std::vector<nemo_row> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      CHECK(line.rfind("model,system,gpus,precision,gbs,mbs,seq,tp,pp,cp,vp,fsdp,tokens_per_s_per_gpu", 0) == 0);
      header = false;
      continue;
    }
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    REQUIRE(f.size() >= 15);
    nemo_row r;
    r.model = f[0];
    r.gpus = std::stoi(f[2]);
    r.precision = f[3];
    r.gbs = std::stoll(f[4]);
    r.mbs = number_or_none(f[5]);
    r.seq = std::stoll(f[6]);
    r.tp = std::stoi(f[7]);
    r.pp = std::stoi(f[8]);
    r.cp = std::stoi(f[9]);
    r.vp = static_cast<int>(number_or_none(f[10]).value_or(1));
    r.fsdp = std::stoi(f[11]);
    if (f[12] != "n/a") r.tokens_per_gpu = std::stod(f[12]);
    r.release = f[14];
    rows.push_back(r);
  }
  return rows;
}

// The architectures of tests/data/validation/nemo-h100-models.md (Megatron pads the vocabulary itself).
std::optional<model::transformer_config> config_of(const std::string& name) {
  using zoo::detail::gpt;
  using zoo::detail::llama;
  auto nemotron = [](std::int64_t layers, std::int64_t h, std::int64_t heads, std::int64_t kv, std::int64_t ffn) {
    // Squared-ReLU MLP (costed as ReLU: one elementwise pass either way), LayerNorm, RoPE, untied, no bias.
    model::transformer_config c = llama("nemotron", h, heads, kv, ffn, layers, 256000, 4096);
    c.norm = model::norm_kind::layernorm;
    c.mlp = model::mlp_kind::relu;
    return c;
  };
  auto gpt3 = [](std::int64_t layers, std::int64_t h, std::int64_t heads) {
    return gpt("gpt3", h, heads, layers, 50257, 2048);
  };
  if (name == "GPT3-5B") return gpt3(24, 4096, 32);
  if (name == "GPT3-20B") return gpt3(44, 6144, 48);
  if (name == "GPT3-175B") return gpt3(96, 12288, 96);
  if (name == "LLAMA2-7B") return zoo::get("llama2-7b").config;
  if (name == "LLAMA2-13B") return zoo::get("llama2-13b").config;
  if (name == "LLAMA2-70B") return zoo::get("llama2-70b").config;
  if (name == "LLAMA3-8B" || name == "LLAMA3_8B") return zoo::get("llama3-8b").config;
  if (name == "LLAMA3-70B" || name == "LLAMA3_70B") return zoo::get("llama3-70b").config;
  if (name == "LLAMA3.1_405B") return llama("llama3.1-405b", 16384, 128, 8, 53248, 126, 128256, 8192);
  if (name == "Nemotron-8B") return nemotron(32, 4096, 32, 32, 16384);
  if (name == "Nemotron-22B") return nemotron(40, 6144, 48, 48, 24576);
  if (name == "Nemotron-340B") return nemotron(96, 18432, 96, 8, 73728);
  return std::nullopt;
}

struct outcome {
  double predicted = 0.0;  // tokens per second per GPU
  double measured = 0.0;
  bool fits = false;
  [[nodiscard]] double error() const { return (predicted - measured) / measured; }
};

outcome estimate(const nemo_row& r, const model::transformer_config& config, const sched::schedule_cache& cache) {
  model::transformer_config c = config;
  c.sequence = r.seq;
  c.max_positions = std::max(c.max_positions, r.seq);
  const model::model m = model::make_model(c);
  train::parallelism par{r.tp, r.pp, r.gpus / (r.tp * r.pp * r.cp), r.cp};
  REQUIRE(par.devices() == r.gpus);
  train::training_knobs k;
  k.global_batch = r.gbs;
  k.microbatch = r.mbs.value_or(1);
  k.precision = hw::precision::fp8;
  k.fused_attention = true;
  k.sequence_parallel = r.tp > 1;
  k.tp_comm_overlap = r.tp > 1;
  k.distributed_optimizer = true;  // FSDP rows: sharded like ZeRO-1 here (not modelled further)
  k.overlap_grad_reduce = k.overlap_param_gather = true;
  if (r.vp > 1) {
    k.schedule = train::pipeline_schedule::interleaved;
    k.virtual_stages = r.vp;
  }
  const auto cluster = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), par);
  train::validate(m, par, k, r.gpus);
  const auto e = train::estimate_step(m, cluster, par, k, cache);
  outcome o;
  o.predicted = static_cast<double>(r.gbs * r.seq) / e.time_per_batch.value() / static_cast<double>(r.gpus);
  o.measured = *r.tokens_per_gpu;
  o.fits = e.fits;
  return o;
}

}  // namespace

TEST_CASE("NeMo / Megatron-Bridge FP8 runs on DGX-H100: predicted vs published tokens per second per GPU",
          "[validation][nemo]") {
  const auto rows = read_rows();
  REQUIRE(rows.size() >= 30);
  const sched::schedule_cache cache;
  double sum = 0.0;
  double worst = 0.0;
  int compared = 0;
  std::printf("%-14s %-8s %5s %3s %3s %3s %3s %3s %6s %10s %10s %8s\n", "model", "release", "gpus", "tp", "pp",
              "cp", "vp", "mb", "seq", "phaze", "published", "error");
  for (const auto& r : rows) {
    const auto c = config_of(r.model);
    INFO(r.model << " " << r.release);
    REQUIRE(c.has_value());
    // Left out: rows that publish TFLOP/s only (NeMo's long-sequence table), and Llama 3.1 405B, whose 126
    // blocks Megatron-Bridge splits over 8 x 8 virtual stages counting the embedding and the loss as layers
    // (account_for_embedding_in_pipeline_split), a split phaze does not model.
    if (!r.tokens_per_gpu || (r.pp > 1 && (*c).layers % (r.pp * r.vp) != 0)) continue;
    const outcome o = estimate(r, *c, cache);
    std::printf("%-14s %-8s %5d %3d %3d %3d %3d %3lld %6lld %10.0f %10.0f %+7.1f%%%s\n", r.model.c_str(),
                r.release.c_str(), r.gpus, r.tp, r.pp, r.cp, r.vp, static_cast<long long>(r.mbs.value_or(1)),
                static_cast<long long>(r.seq), o.predicted, o.measured, 100.0 * o.error(), o.fits ? "" : " (no fit)");
    sum += std::abs(o.error());
    worst = std::max(worst, std::abs(o.error()));
    ++compared;
  }
  const double mean = sum / compared;
  std::printf("%d runs: mean absolute error %.1f%%, max %.1f%%\n", compared, 100.0 * mean, 100.0 * worst);
  CHECK(compared >= 20);
  // Measured at this commit: 21 runs, mean 20.8%, max 41.6%, every run predicted too fast (the goal is 8% /
  // 15%). The FP8 GEMM rate is the cuBLASLt microbenchmark's (hw/presets.hpp); sustained training reaches
  // less (docs/step-time.md). These bounds guard against regressions only.
  CHECK(mean <= 0.23);
  CHECK(worst <= 0.45);
}
