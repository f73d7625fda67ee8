// The training step as Megatron-Core runs it, against published measurements: the weak-scaling table of
// Megatron-LM's README (Megatron-Core r0.8.0 on H100 SXM, DGX H100 nodes; README.md "Performance
// Benchmarking", images/model_table.png, July 2024): GPT models of 1.7B to 462B parameters, vocabulary
// 131,072, sequence 4,096, bf16, data-parallel size 48, with the communication overlaps the README lists
// (--overlap-grad-reduce, --overlap-param-gather, --tp-comm-overlap) and Transformer Engine's fused
// attention. The published per-GPU TFLOP/s are turned into iteration times with Megatron-LM's own FLOP count
// (num_floating_point_operations, megatron/training/training.py at core_r0.8.0). The table gives tp, pp, dp
// and the global batch but not the microbatch or the interleaving: phaze takes the fastest it finds that fits
// (what a tuned run uses), nothing is fitted per row. Also the parts of the model this rests on: the overlap
// of bucketed collectives against an event simulation, and fused attention's activations against the closed
// form.
#include <phaze/hw/presets.hpp>
#include <phaze/model/model.hpp>
#include <phaze/model/transformer.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/train/knobs.hpp>
#include <phaze/train/step.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace phaze;

namespace {

struct readme_row {
  const char* size;
  std::int64_t heads;
  std::int64_t hidden;
  std::int64_t layers;
  int tp;
  int pp;
  int dp;
  std::int64_t batch;
  double tflops_per_gpu;  // measured
};

// Megatron-LM README, "Performance Benchmarking" model table (Megatron-Core r0.8.0, H100).
constexpr std::array<readme_row, 9> readme_table{{
    {"1.7B", 16, 2048, 24, 1, 1, 48, 192, 408.8},
    {"7.1B", 32, 4096, 30, 2, 1, 48, 192, 465.9},
    {"16B", 48, 6144, 32, 4, 1, 48, 192, 489.1},
    {"32B", 56, 7168, 48, 8, 1, 48, 192, 459.6},
    {"70B", 64, 8192, 84, 8, 2, 48, 384, 419.7},
    {"119B", 80, 10240, 92, 8, 4, 48, 768, 420.5},
    {"177B", 96, 12288, 96, 8, 6, 48, 1152, 432.8},
    {"314B", 128, 16384, 96, 8, 8, 48, 1536, 474.4},
    {"462B", 144, 18432, 112, 8, 16, 48, 3072, 459.9},
}};

constexpr std::int64_t readme_sequence = 4096;
constexpr std::int64_t readme_vocab = 131072;

// Megatron-LM's FLOPs of one iteration (GPT: no grouped-query attention, no SwiGLU, no experts).
double megatron_flops(const readme_row& r) {
  const auto h = static_cast<double>(r.hidden);
  const auto s = static_cast<double>(readme_sequence);
  const auto l = static_cast<double>(r.layers);
  const auto v = static_cast<double>(readme_vocab);
  return 12.0 * static_cast<double>(r.batch) * s * l * h * h * ((2.0 + s / h) + 4.0 + v / (2.0 * l * h));
}

// A GPT of the README's shapes: 4h MLP, untied input and output embeddings (the parameter counts of the
// table need them untied: 1.7B = 12 L h^2 + 2 V h).
model::model readme_model(const readme_row& r) {
  model::transformer_config c{.name = "gpt",
                              .arch = model::family::gpt,
                              .hidden = r.hidden,
                              .heads = r.heads,
                              .ffn = 4 * r.hidden,
                              .layers = r.layers,
                              .vocab = readme_vocab,
                              .sequence = readme_sequence,
                              .max_positions = readme_sequence};
  c.tied_embeddings = false;
  return model::make_model(c);
}

struct features {
  bool fused_attention = true;
  bool overlap = true;
  bool tp_overlap = true;
};

// The fastest fitting plan with the row's tp, pp, dp and batch over the microbatches and interleavings
// Megatron-LM accepts, its time and the relative error against the measurement.
struct predicted {
  double seconds = 0.0;
  double measured = 0.0;
  std::int64_t microbatch = 0;
  int virtual_stages = 0;
  model::recompute recompute = model::recompute::none;
  [[nodiscard]] double error() const { return (seconds - measured) / measured; }
};

predicted predict(const readme_row& r, const features& f, const sched::schedule_cache& cache) {
  const model::model m = readme_model(r);
  const train::parallelism par{r.tp, r.pp, r.dp};
  const auto cluster = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), par);
  predicted best;
  best.measured = megatron_flops(r) / (r.tflops_per_gpu * 1e12 * static_cast<double>(par.devices()));
  best.seconds = std::numeric_limits<double>::infinity();
  const std::int64_t per_replica = r.batch / r.dp;
  for (const std::int64_t mb : {1, 2, 4, 8}) {
    if (per_replica % mb != 0) continue;
    for (const int v : {1, 2, 3, 4, 6, 7, 8, 12}) {
      for (const auto mode : {model::recompute::none, model::recompute::selective, model::recompute::full}) {
        train::training_knobs k;
        k.host_overhead = train::eager_host_per_op;  // the command line's default
        k.recompute = mode;
        k.global_batch = r.batch;
        k.microbatch = mb;
        k.precision = hw::precision::bf16;
        k.sequence_parallel = r.tp > 1;
        k.distributed_optimizer = true;
        k.fused_attention = f.fused_attention;
        k.overlap_grad_reduce = k.overlap_param_gather = f.overlap;
        k.tp_comm_overlap = f.tp_overlap;
        if (v > 1) {
          if (r.pp <= 2 || r.layers % (r.pp * v) != 0 || (per_replica / mb) % r.pp != 0) continue;
          k.schedule = train::pipeline_schedule::interleaved;
          k.virtual_stages = v;
        }
        train::validate(m, par, k, static_cast<int>(par.devices()));
        const auto e = train::estimate_step(m, cluster, par, k, cache);
        if (e.fits && e.time_per_batch.value() < best.seconds) {
          best.seconds = e.time_per_batch.value();
          best.microbatch = mb;
          best.virtual_stages = v;
          best.recompute = mode;
        }
      }
    }
  }
  return best;
}

struct summary {
  double mean = 0.0;
  double max = 0.0;
};

summary compare(const features& f, const char* title) {
  const sched::schedule_cache cache;
  summary s;
  std::printf("%s\n%-6s %4s %3s %-9s %10s %10s %8s\n", title, "model", "mb", "vp", "recompute", "phaze s",
              "measured s", "error");
  for (const auto& r : readme_table) {
    const predicted p = predict(r, f, cache);
    REQUIRE(std::isfinite(p.seconds));
    std::printf("%-6s %4lld %3d %-9s %10.3f %10.3f %+7.1f%%\n", r.size, static_cast<long long>(p.microbatch),
                p.virtual_stages, std::string{model::to_string(p.recompute)}.c_str(), p.seconds, p.measured,
                100.0 * p.error());
    s.mean += std::abs(p.error()) / static_cast<double>(readme_table.size());
    s.max = std::max(s.max, std::abs(p.error()));
  }
  std::printf("mean absolute error %.1f%%, max %.1f%%\n\n", 100.0 * s.mean, 100.0 * s.max);
  return s;
}

}  // namespace

TEST_CASE("Megatron-Core r0.8.0 on H100 (Megatron-LM README table): predicted vs measured iteration times",
          "[validation][megatron_core]") {
  const summary now = compare({}, "fused attention, data-parallel and tensor-parallel overlap (as run)");
  // Measured at this commit: mean 11.4%, max 25.2% (the small models are predicted too fast: launch and
  // host overheads are not modelled). It was 12.9% / 25.6% before the GEMMs beside Transformer Engine's
  // SM-driven tensor-parallel overlaps ran on 16 fewer SMs and overlapped collectives slowed the computation
  // beside them (docs/step-time.md); the goal is 8% / 15%.
  CHECK(now.mean <= 0.12);
  CHECK(now.max <= 0.26);
  // The features the runs used, against the 2022 step model phaze had before (unfused attention, nothing
  // overlapped, 41% off with microbatch 1): fused attention and the data-parallel overlap bring it closer;
  // the tensor-parallel overlap, modelled as TE's chunked collectives, leaves phaze further on the fast side
  // on the largest models (10.5% mean without it), where something the model leaves out costs time.
  const summary no_tp = compare({true, true, false}, "without tensor-parallel overlap");
  const summary no_overlap = compare({true, false, false}, "without any overlap");
  const summary plain = compare({false, false, false}, "unfused attention, nothing overlapped (2022 model)");
  CHECK(no_tp.mean <= 0.125);
  CHECK(no_overlap.mean < plain.mean);
  CHECK(now.mean < plain.mean);
  CHECK(now.max < plain.max);
}

TEST_CASE("bucketed overlap: the closed form is the event simulation of buckets on one stream",
          "[train][overlap]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.001, 2.0);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 64);
    const double total = time(rng);
    const double window = time(rng);
    // Bucket j is ready at (j + 1) w / n and its collective takes T / n; one collective at a time.
    double stream = 0.0;
    for (int j = 0; j < n; ++j) {
      const double ready = window * static_cast<double>(j + 1) / static_cast<double>(n);
      stream = std::max(stream, ready) + total / static_cast<double>(n);
    }
    const double simulated = stream - window;
    const double formula =
        train::step_model::exposed_after(seconds{total}, static_cast<double>(n), seconds{window}).value();
    REQUIRE(formula == Approx(simulated).epsilon(1e-9));
  }
  // Megatron-Core's default buckets: max(40 M, 1 M * dp) parameters.
  CHECK(train::step_model::gradient_buckets(100e6, {1, 1, 8, 1}) == 3.0);
  CHECK(train::step_model::gradient_buckets(100e6, {1, 1, 64, 1}) == 2.0);
  CHECK(train::step_model::gradient_buckets(1e6, {1, 1, 8, 1}) == 1.0);
}

TEST_CASE("overlap only hides: the exposed data-parallel time lies between the last bucket and all of it",
          "[train][overlap]") {
  const auto d = *hw::find_preset("h100-sxm");
  const auto c = phaze::test::cluster_of(d, 64);
  train::training_knobs k;
  k.distributed_optimizer = true;
  const train::plan_shape s{8, 1, 8, 4};
  const double params = 2e9;
  const train::step_model off{c, k};
  k.overlap_grad_reduce = k.overlap_param_gather = true;
  const train::step_model on{c, k};
  const double buckets = train::step_model::gradient_buckets(params, s);
  // What overlapping costs besides what stays exposed: the computation slowed beside the hidden part
  // (step_model::with_overlap_cost; the H100's measured 5.8%).
  const double slowdown = on.overlap_slowdown();
  CHECK(slowdown == Approx(0.058));
  for (const double stage : {0.0, 0.05, 0.5, 5.0}) {
    const double all = off.exposed_data_parallel(params, s, seconds{stage}).value();
    const double hidden = on.exposed_data_parallel(params, s, seconds{stage}).value();
    CHECK(hidden <= all + 1e-15);
    CHECK(hidden >= all / buckets - 1e-15);
  }
  // No window: nothing is hidden; an endless one: only the last bucket of each collective stays, plus the
  // slowed computation beside the others.
  const double all = off.exposed_data_parallel(params, s, seconds{0.0}).value();
  CHECK(on.exposed_data_parallel(params, s, seconds{0.0}).value() == Approx(all));
  CHECK(on.exposed_data_parallel(params, s, seconds{1e6}).value() ==
        Approx(all / buckets + (all - all / buckets) * slowdown));
}

TEST_CASE("fused attention keeps no s x s tensor: its activations are the unfused ones less 5 a s^2 b",
          "[model][fused_attention]") {
  // Korthikanti et al. 2022, section 4.1: the attention core keeps the softmax output (2 a s^2 b bytes),
  // its dropout mask (a s^2 b) and the dropout output (2 a s^2 b); a fused kernel keeps none of them but one
  // fp32 softmax statistic per row of each head's scores (4 a s b).
  for (const int tp : {1, 2, 4}) {
    for (const std::int64_t b : {1, 2}) {
      for (const auto mode : {model::recompute::none, model::recompute::selective}) {
        const model::transformer_config c{.name = "t",
                                          .hidden = 1024,
                                          .heads = 16,
                                          .ffn = 4096,
                                          .layers = 2,
                                          .vocab = 1000,
                                          .sequence = 512,
                                          .max_positions = 512};
        const model::layer_shape unfused{b, 512, tp, tp > 1, 2, false};
        model::layer_shape fused = unfused;
        fused.fused_attention = true;
        const double a = 16.0 / tp;
        const double s = 512.0;
        const auto sequences = static_cast<double>(b);
        const double kept = model::activation_bytes(model::block_layer(c, unfused), mode).value();
        const double kept_fused = model::activation_bytes(model::block_layer(c, fused), mode).value();
        const double core = mode == model::recompute::selective ? 0.0 : 5.0 * a * s * s * sequences;
        CHECK(kept - kept_fused == Approx(core - 4.0 * a * s * sequences));
      }
    }
  }
}

// The training step as NeMo and Megatron-Bridge run it on DGX-H100, against their published throughput:
// tests/data/validation/nemo-h100.csv (every row's source in its header: NVIDIA/NeMo's
// docs/source/performance/performance_summary.md, NeMo 24.07, and NVIDIA-NeMo/Megatron-Bridge's
// docs/performance-summary-archive.md, 25.09 to 26.06), dense models of 5B to 405B parameters in FP8 with
// tensor, pipeline (interleaved), context and data parallelism. Each row is estimated with exactly its
// published degrees, microbatch, sequence and batch, and the settings the recipes of its release turn on
// (tests/data/validation/nemo-h100-models.md, recipe_of below): FP8 (Transformer Engine), fused attention,
// the distributed optimizer with overlapped gradient reduction and parameter gather, sequence parallelism
// where tp > 1, tensor-parallel overlap where the recipe has it, overlapped pipeline sends under
// interleaving, recomputation where the recipe asks for it, bf16 gradients and FP8 weights where the
// recipes keep them (recipe_of), the first and last blocks in bf16 for the FP8 current-scaling rows,
// Megatron-FSDP and a bf16 optimizer state where the recipe runs them.
// Every plan must also fit the card by phaze's memory estimate, as the runs did. Nothing is chosen or
// fitted per row; the tokens per second per GPU are compared (the TFLOP/s columns count attention two ways
// across the sources). The row whose recipe runs Megatron-FSDP is costed fully sharded
// (training_knobs::fsdp).

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
      CHECK(line.rfind("model,system,gpus,precision,gbs,mbs,seq,tp,pp,cp,vp,fsdp,tokens_per_s_per_gpu", 0) ==
            0);
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
  auto nemotron = [](std::int64_t layers, std::int64_t h, std::int64_t heads, std::int64_t kv,
                     std::int64_t ffn) {
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
  double peak_gib = 0.0;  // phaze's peak memory per device
  [[nodiscard]] double error() const { return (predicted - measured) / measured; }
};

/// What the recipe of a row's release turns on beside its published layout (nemo-h100-models.md).
struct recipe {
  bool tp_overlap = false;
  model::recompute recompute = model::recompute::none;
  int recompute_layers = 0;
  bool bf16_gradients = false;
  bool fp8_weights = false;
  int bf16_edge_blocks = 0;
  bool fsdp = false;
  hw::precision optimizer_dtype = hw::precision::fp32;
};

recipe recipe_of(const nemo_row& r) {
  recipe out;
  const bool bridge = r.release >= "25.09";  // Megatron-Bridge's tables; NeMo's are 24.07 and 25.02
  const bool nemotron_340b = r.model == "Nemotron-340B";
  // Userbuffers tensor-parallel overlap: on in every tp > 1 recipe but GPT3-175B's and Nemotron-340B's 24.07
  // launcher configs.
  out.tp_overlap = r.tp > 1 && !((r.model == "GPT3-175B" && r.release == "24.07") || nemotron_340b);
  if (nemotron_340b) {
    out.recompute = model::recompute::selective;
    // Its launcher config keeps Apex's optimizer state in bf16 (optim.dtype: bf16): no fp32 master weights.
    out.optimizer_dtype = hw::precision::bf16;
  }
  if ((r.model == "LLAMA3_8B") && r.release == "25.11") {
    out.recompute = model::recompute::full;  // recompute_granularity full, method block, 5 layers
    out.recompute_layers = 5;
  }
  // Megatron-Bridge's performance overrides reduce gradients in bf16 (grad_reduce_in_fp32 off) and its FP8
  // recipes gather FP8 weights (fp8_param_gather); so does NeMo 2.0's GPT-3 175B performance script of the
  // 25.02 period (scripts/performance/llm/pretrain_gpt3_175b.py at 81d94d1501: grad_reduce_in_fp32 = False,
  // bf16_with_fp8_mixed with fp8_params = True). Of the 24.07 rows, Nemotron-340B's config syncs gradients
  // in bf16, and so does every GPT-3 and Llama FP8 example of NeMo-Framework-Launcher for the H100
  // (examples/training/{gpt,llama}/h100/*fp8*.sh: +training.model.optim.grad_sync_dtype=bf16); the
  // Nemotron 8B and 22B examples do not.
  const bool nemo2 = r.release == "25.02";
  const bool launcher_bf16_sync = r.release == "24.07" && r.model.rfind("Nemotron", 0) != 0;
  out.bf16_gradients = bridge || nemo2 || nemotron_340b || launcher_bf16_sync;
  out.fp8_weights = bridge || nemo2;
  // Megatron-FSDP (weights, gradients and optimizer state sharded): the 25.09 Llama 3 8B FP8 recipe
  // (use_megatron_fsdp: true). The 25.11 table also writes FSDP for Llama 3 8B, but its recipe has none.
  out.fsdp = r.fsdp > 0 && r.release == "25.09";
  // bf16_with_fp8_current_scaling_mixed: the first and the last block in bf16.
  if (r.precision == "FP8-CS") out.bf16_edge_blocks = 1;
  return out;
}

outcome estimate(const nemo_row& r, const model::transformer_config& config,
                 const sched::schedule_cache& cache) {
  model::transformer_config c = config;
  c.sequence = r.seq;
  c.max_positions = std::max(c.max_positions, r.seq);
  const recipe how = recipe_of(r);
  model::model m = model::make_model(c);
  if (how.bf16_edge_blocks > 0) m = model::with_bf16_blocks(m, how.bf16_edge_blocks, how.bf16_edge_blocks);
  train::parallelism par{r.tp, r.pp, r.gpus / (r.tp * r.pp * r.cp), r.cp};
  REQUIRE(par.devices() == r.gpus);
  train::training_knobs k;
  k.host_overhead = train::eager_host_per_op;  // the command line's default
  k.global_batch = r.gbs;
  k.microbatch = r.mbs.value_or(1);
  k.precision = hw::precision::fp8;
  k.fused_attention = true;
  k.sequence_parallel = r.tp > 1;
  k.tp_comm_overlap = how.tp_overlap;
  k.distributed_optimizer = true;
  k.fsdp = how.fsdp;
  k.optimizer_dtype = how.optimizer_dtype;
  k.overlap_grad_reduce = k.overlap_param_gather = true;
  k.recompute = how.recompute;
  k.recompute_layers = how.recompute_layers;
  k.grad_reduce_in_bf16 = how.bf16_gradients;
  k.fp8_param_gather = how.fp8_weights;
  // Megatron-Bridge's Llama 3.1 405B recipe counts the embedding and the loss as pipeline layers
  // (account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split): 126 blocks over pp 8 x
  // vp 8.
  k.embedding_in_pipeline_split = k.loss_in_pipeline_split = r.pp > 1 && c.layers % (r.pp * r.vp) != 0;
  if (r.vp > 1) {
    k.schedule = train::pipeline_schedule::interleaved;
    k.virtual_stages = r.vp;
    // NeMo-Launcher's interleaved configs (overlap_p2p_comm: true) and Megatron-Bridge's comm-overlap
    // defaults (on whenever vp > 1) overlap the pipeline sends.
    k.overlap_p2p = true;
  }
  const auto cluster = phaze::test::cluster_of(*hw::find_preset("h100-sxm"), par);
  train::validate(m, par, k, r.gpus);
  const auto e = train::estimate_step(m, cluster, par, k, cache);
  outcome o;
  o.predicted = static_cast<double>(r.gbs * r.seq) / e.time_per_batch.value() / static_cast<double>(r.gpus);
  o.measured = *r.tokens_per_gpu;
  o.fits = e.fits;
  o.peak_gib = e.peak_memory.value() / 1073741824.0;
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
  std::printf("%-14s %-8s %5s %3s %3s %3s %3s %3s %6s %10s %10s %8s %9s\n", "model", "release", "gpus", "tp",
              "pp", "cp", "vp", "mb", "seq", "phaze", "published", "error", "GiB");
  for (const auto& r : rows) {
    const auto c = config_of(r.model);
    INFO(r.model << " " << r.release);
    REQUIRE(c.has_value());
    // Left out: rows that publish TFLOP/s only (NeMo's long-sequence table). Llama 3.1 405B's 126 blocks
    // run over 8 x 8 virtual stages with the embedding and the loss counted as layers (estimate).
    if (!r.tokens_per_gpu ||
        (r.pp > 1 && ((*c).layers + 2) % (r.pp * r.vp) != 0 && (*c).layers % (r.pp * r.vp) != 0))
      continue;
    const outcome o = estimate(r, *c, cache);
    std::printf("%-14s %-8s %5d %3d %3d %3d %3d %3lld %6lld %10.0f %10.0f %+7.1f%% %9.1f%s\n",
                r.model.c_str(), r.release.c_str(), r.gpus, r.tp, r.pp, r.cp, r.vp,
                static_cast<long long>(r.mbs.value_or(1)), static_cast<long long>(r.seq), o.predicted,
                o.measured, 100.0 * o.error(), o.peak_gib, o.fits ? "" : " (no fit)");
    // The published run ran, so its plan must fit the card (no headroom here) by phaze's memory estimate.
    CHECK(o.fits);
    sum += std::abs(o.error());
    worst = std::max(worst, std::abs(o.error()));
    ++compared;
  }
  const double mean = sum / compared;
  std::printf("%d runs: mean absolute error %.1f%%, max %.1f%%\n", compared, 100.0 * mean, 100.0 * worst);
  CHECK(compared >= 20);
  // Measured at this commit: 26 runs, mean 10.4%, max 23.3% (the goal is 8% / 15%); 21 runs, 8.5% / 23.3%,
  // without the five Llama 3.1 405B rows (14-22% too fast), expressible since the embedding and the loss can
  // count as pipeline layers. Each row carries its
  // recipe's settings (recipe_of); the FP8 quantization passes run at the bandwidth fused cast kernels
  // reached on an H100 (0.454 of the peak, docs/gpu-measurements.md). The Megatron-Bridge and NeMo 25.02 rows
  // are within 0.1-4.4% but for the FSDP one (+10.1%, costed fully sharded); the NeMo 24.07 rows of small
  // models and interleaved ones 10-23% too fast (docs/step-time.md; whole blocks measured on an H100 put that
  // gap in the 24.07 software, tests/train/hopper_block_test.cpp). These bounds guard against regressions.
  CHECK(mean <= 0.11);
  CHECK(worst <= 0.25);
}
