/// @file
/// Pieces shared by the `phaze` program's commands: the command record, common options, output helpers.
/// Adding a command: write `<name>_command.cpp` defining `add_<name>_command`, declare it below, list it in
/// `command_table` (main.cpp) and in CMakeLists.txt.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "phaze/cluster/cluster.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/limits.hpp"
#include "phaze/core/progress.hpp"
#include "phaze/cost/attention.hpp"
#include "phaze/io/calibration_json.hpp"
#include "phaze/io/schema.hpp"
#include "phaze/place/any_placer.hpp"
#include "phaze/sched/scheduler.hpp"
#include "phaze/train/calibration.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::place {
struct step_policy;
}  // namespace phaze::place

namespace phaze::cli {

/// Accepts whole numbers from 1 to `most`; `why` ends the message of a larger one ("the most phaze plans
/// for, docs/limits.md").
inline CLI::Validator whole_number_up_to(std::int64_t most, std::string why, std::string name) {
  return CLI::Validator{
      [most, why = std::move(why)](std::string& text) -> std::string {
        std::int64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc::result_out_of_range ||
            (ec == std::errc{} && value > most && end == text.data() + text.size())) {
          return "must be at most " + std::to_string(most) + " (" + why + "), got '" + text + "'";
        }
        if (ec != std::errc{} || end != text.data() + text.size() || value <= 0) {
          return "must be a positive whole number, got '" + text + "'";
        }
        return {};
      },
      std::move(name)};
}

/// Accepts finite numbers in (0, most], or [0, most) with `zero_allowed` and `below_most` as for a share;
/// `what` names the range in the message ("seconds, at most a day").
inline CLI::Validator number_up_to(double most, std::string what, bool zero_allowed = false,
                                   bool below_most = false) {
  return CLI::Validator{
      [=](std::string& text) -> std::string {
        double value = 0.0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        const bool number = ec == std::errc{} && end == text.data() + text.size() && std::isfinite(value);
        const bool low = zero_allowed ? value < 0.0 : value <= 0.0;
        const bool high = below_most ? value >= most : value > most;
        if (!number || low || high) {
          return "must be a number in " + std::string{zero_allowed ? "[0, " : "(0, "} +
                 fmt::format("{:g}", most) + (below_most ? ")" : "]") + " (" + what + "), got '" + text + "'";
        }
        return {};
      },
      "NUMBER"};
}

/// Accepts whole numbers above zero that fit an int (a count: --top, --threads, a parallel degree).
inline const CLI::Validator positive_integer =
    whole_number_up_to(phaze::limits::max_count, "2^30, the largest count phaze takes", "POSITIVE");
/// A device count, a parallel degree: at most limits::max_devices.
inline const CLI::Validator device_count = whole_number_up_to(
    phaze::limits::max_devices, "2^20, the most devices phaze plans for; docs/limits.md", "DEVICES");
/// Sequences in a global batch or microbatch: at most limits::max_global_batch.
inline const CLI::Validator batch_size =
    whole_number_up_to(phaze::limits::max_global_batch,
                       "2^20 sequences, the largest batch phaze plans for; docs/limits.md", "SEQUENCES");
/// A sequence length: at most limits::max_sequence.
inline const CLI::Validator sequence_length =
    whole_number_up_to(phaze::limits::max_sequence,
                       "2^22 tokens, the longest sequence phaze plans for; docs/limits.md", "TOKENS");
/// A vocabulary size: at most limits::max_vocab.
inline const CLI::Validator vocabulary_size =
    whole_number_up_to(phaze::limits::max_vocab,
                       "2^24 entries, the largest vocabulary phaze plans for; docs/limits.md", "ENTRIES");

/// A file or folder given on the command line: not an empty string (which a shell passes for `--spec ""` or
/// an unset variable, and which would otherwise read as "not given").
inline const CLI::Validator non_empty_path{
    [](std::string& path) {
      return path.empty() ? std::string{"an empty path; give a file or folder"} : std::string{};
    },
    ""};

/// An exclusive lock on an output folder while this program writes it: an advisory flock(2) on
/// DIR/.phaze.lock, which the system releases when the program ends, however it ends (a killed search leaves
/// no stale lock for --resume to trip on). A second phaze on the same folder is refused instead of
/// interleaving its records with the first's.
class folder_lock {
 public:
  /// `option` names the flag that gave `dir`, for the message when another phaze holds it.
  explicit folder_lock(const std::filesystem::path& dir, std::string_view option = "--out") {
    const std::filesystem::path file = dir / ".phaze.lock";
    fd_ = ::open(file.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) throw input_error("cannot create '" + file.string() + "' (is the folder writable?)");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
      throw input_error("another phaze is writing '" + dir.string() +
                        "' now; wait for it to finish, or give another " + std::string{option});
    }
  }
  folder_lock(folder_lock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  folder_lock& operator=(folder_lock&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  folder_lock(const folder_lock&) = delete;
  folder_lock& operator=(const folder_lock&) = delete;
  ~folder_lock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

/// Makes `dir` if missing and locks it (folder_lock), before the work that fills it: a folder that cannot be
/// made, or that another phaze is writing, is refused before any work. `option` names the flag that gave it.
inline folder_lock made_and_locked(const std::filesystem::path& dir, std::string_view option = "--out") {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw input_error("cannot create the output folder '" + dir.string() + "' (" + std::string{option} +
                      "): " + ec.message());
  }
  return folder_lock{dir, option};
}

/// A registered subcommand: its CLI11 parser and the action to run when the user picked it. The action
/// prints to stdout and returns the exit code; it reports bad input by throwing phaze::error.
struct command {
  CLI::App* parser = nullptr;
  std::function<int()> run;
};

/// How a command prints its result.
enum class output_format { table, json };

/// Adds `--format table|json` to a command; anything else is a usage error naming --format.
inline CLI::Option* add_format_option(CLI::App& app, std::string& format) {
  return app
      .add_option("--format", format, "output: aligned text for people (table) or one JSON value (json)")
      ->check(CLI::IsMember({"table", "json"}))
      ->default_str("table");
}

inline output_format parse_format(const std::string& format) {
  return format == "json" ? output_format::json : output_format::table;
}

/// Adds `--solver ilp|list`: which scheduler times each layer (sched/: the ILP on GLPK, proven optimal or
/// with its gap; the list scheduler, optimal whenever it meets the lower bound).
inline CLI::Option* add_solver_option(CLI::App& app, std::string& solver, const char* default_name = "list") {
  return app
      .add_option(
          "--solver", solver,
          "layer schedules: ilp (optimal, GLPK; proven or with its gap) or list (fast; optimal when it "
          "meets the lower bound)")
      ->check(CLI::IsMember({"ilp", "list"}))
      ->default_str(default_name);
}

/// What a model trains with, as the commands that train one (`estimate`, `plan`) take it: each option is
/// registered once, here (add_run_options), and read once (shaped, apply_run_options).
struct run_options {
  std::int64_t sequence = 0;  ///< --seq; 0: the model's
  std::int64_t vocab = 0;     ///< --vocab; 0: the model's
  std::string schedule = "1f1b";
  int vp = 1;
  std::string optimizer = "adam";
  bool distributed_optimizer = false;
  std::string precision = "bf16";
};

/// `--seq`, `--vocab`, `--schedule`, `--vp`, `--optimizer`, `--distributed-optimizer` and `--precision`.
inline void add_run_options(CLI::App& app, run_options& o) {
  app.add_option("--seq", o.sequence, "sequence length (default: the model's)")->check(sequence_length);
  app.add_option("--vocab", o.vocab, "vocabulary size (default: the model's)")->check(vocabulary_size);
  app.add_option("--schedule", o.schedule, "pipeline schedule")
      ->check(CLI::IsMember({"1f1b", "gpipe", "interleaved"}))
      ->default_str("1f1b");
  app.add_option("--vp", o.vp, "model chunks per device (interleaved schedule)")
      ->default_str("1")
      ->check(device_count);
  app.add_option("--optimizer", o.optimizer, "optimizer")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->default_str("adam");
  app.add_flag("--distributed-optimizer", o.distributed_optimizer,
               "shard optimizer state over data-parallel ranks (ZeRO-1)");
  app.add_option("--precision", o.precision, "training precision")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32", "fp8"}))
      ->default_str("bf16");
}

/// `m` at the sequence and vocabulary `o` gives (the model's own where it gives none).
inline model::model shaped(model::model m, const run_options& o) {
  if (o.sequence > 0) m = model::with_sequence(m, o.sequence);
  if (o.vocab > 0) m = model::with_vocab(m, o.vocab);
  return m;
}

/// The schedule, chunks per device, optimizer, its sharding and the precision `o` gives, on `k`.
inline void apply_run_options(const run_options& o, train::training_knobs& k) {
  k.precision = train::parse_precision(o.precision);
  k.opt = train::parse_optimizer(o.optimizer);
  k.schedule = train::parse_pipeline_schedule(o.schedule);
  k.virtual_stages = o.vp;
  k.distributed_optimizer = o.distributed_optimizer;
}

/// How the training step runs beside its parallel plan: the attention kernel and what communication overlaps
/// computation. The defaults are those of Megatron-Core as its pretraining recipes run it (docs/step-time.md,
/// "The step as Megatron-Core runs it"): fused attention where the devices run it, data-parallel gradient
/// reduction and parameter gather overlapped, 10% of memory left free; tensor-parallel overlap (Transformer
/// Engine's userbuffers) on request.
struct step_options {
  std::string attention = "auto";
  std::string attention_kernel = "auto";
  std::string cross_entropy = "megatron";
  std::string vector_kernels = "fused";
  std::string overlap = "grad,param,pp";
  double memory_headroom = 0.10;
  // Host time per op in microseconds; NaN (not given): eager PyTorch's, measured, on GPUs and 0 on PHAZE's
  // designs (an accelerator with no framework of its own measured).
  double host_overhead_us = std::numeric_limits<double>::quiet_NaN();
  int vocab_padding = 128;  // Megatron-LM's --make-vocab-size-divisible-by default
  bool grad_reduce_in_bf16 = false;
  bool no_gradient_accumulation_fusion = false;
  std::string optimizer_kernels = "fused";
  bool fp8_param_gather = false;
  bool fsdp = false;
  bool shard_gradients = false;
  int fsdp_shard = 0;  // 0: every data-parallel rank
  std::string fsdp_reshard = "default";
  std::string optimizer_dtype = "fp32";
  std::vector<std::int64_t> bf16_blocks;  // empty: every block in the training precision
  std::string calibration;                // a phaze.calibration file; empty: none
  bool embedding_in_pipeline_split = false;
  bool loss_in_pipeline_split = false;
  double capacity_factor = 0.0;  // 0: dropless routing
  int mtp_layers = -1;           // multi-token prediction modules; -1: the model's own
  std::string moe_dispatcher = "alltoall";
  std::string moe_permutation = "fused";
};

/// The kernels' options: `--attention`, `--attention-kernel`, `--cross-entropy`, `--vector-kernels`.
inline void add_kernel_options(CLI::App& app, step_options& o) {
  app.add_option("--attention", o.attention,
                 "attention kernel: fused (FlashAttention / cuDNN, no s x s scores stored), unfused (score "
                 "GEMM, softmax, dropout, context GEMM), or auto: fused where every device runs it (Ampere "
                 "and later), else unfused")
      ->check(CLI::IsMember({"auto", "fused", "unfused"}))
      ->default_str("auto");
  app.add_option(
         "--attention-kernel", o.attention_kernel,
         "the fused attention kernel's implementation: cudnn (Transformer Engine's fused attention, "
         "Megatron-Core and NeMo on Hopper), flash3 (FlashAttention-3, Hopper), flash2 "
         "(FlashAttention-2: flash-attn 2.x, PyTorch SDPA's flash backend, torchtitan), triton (flash-attn "
         "1.0's Triton kernel, LLM Foundry's attn_impl triton), flex (PyTorch's FlexAttention), efficient "
         "(PyTorch SDPA's memory-efficient backend), or auto: the device's own (cudnn on Hopper, flash2 on "
         "Ampere)")
      ->check(CLI::IsMember({"auto", "cudnn", "flash3", "flash2", "triton", "flex", "efficient"}))
      ->default_str("auto");
  app.add_option(
         "--cross-entropy", o.cross_entropy,
         "the loss's implementation: megatron (Megatron-LM's vocabulary-parallel cross-entropy, fp32 "
         "passes over the logits, the fp32 softmax kept) or fused (one kernel each way over the logits "
         "in the training format: flash-attn's CrossEntropyLoss, LLM Foundry's default)")
      ->check(CLI::IsMember({"megatron", "fused"}))
      ->default_str("megatron");
  app.add_option(
         "--vector-kernels", o.vector_kernels,
         "how the memory-bound ops (norms, activations, rotary embedding, residual adds) run: fused "
         "(Transformer Engine, Megatron-Core's fusions or a compiler: the device's copy rate) or eager "
         "(plain PyTorch, one or more kernels per op at their rates measured on Hopper: Composer, "
         "Hugging Face Transformers, torchtitan without torch.compile; with --attention unfused, the "
         "attention's softmax in fp32 as Megatron-Core runs it without its CUDA kernels)")
      ->check(CLI::IsMember({"fused", "eager"}))
      ->default_str("fused");
}

/// The step's overlaps, memory headroom, host time, padding and the data-parallel layout's options.
inline void add_layout_options(CLI::App& app, step_options& o) {
  app.add_option(
         "--overlap", o.overlap,
         "communication overlapped with computation, comma-separated: grad (data-parallel gradient "
         "reduction), param (the distributed optimizer's parameter gather), tp (tensor-parallel "
         "collectives, with sequence parallelism), pp (pipeline sends, interleaved schedule), ep (expert "
         "parallelism's all-to-alls beside the other microbatch's pass: Megatron-Core's "
         "--overlap-moe-expert-parallel-comm), or none")
      ->default_str("grad,param,pp");
  app.add_option("--memory-headroom", o.memory_headroom,
                 "share of each device's memory a plan leaves free for the allocator's cache, the CUDA "
                 "context and communication buffers, in [0, 1)")
      ->check(number_up_to(1.0, "a share of the memory", true, true))
      ->default_str("0.1");
  app.add_option(
         "--host-overhead", o.host_overhead_us,
         "host (CPU) time in microseconds the framework spends per op of a pass, in [0, 1000]: a "
         "layer's pass takes at least its ops times this (default 60.7 on GPUs, eager PyTorch measured "
         "on an H100 machine, and 0 on PHAZE's designs; 0 for CUDA graphs)")
      ->check(number_up_to(1000.0, "microseconds per op", true, false))
      ->default_str("60.7 on GPUs, 0 on PHAZE designs");
  app.add_option(
         "--vocab-padding", o.vocab_padding,
         "pad the vocabulary to a multiple of N x tp, as Megatron-LM's --make-vocab-size-divisible-by "
         "(1: a multiple of tp only)")
      ->check(vocabulary_size)
      ->default_str("128");
  app.add_flag("--grad-reduce-in-bf16", o.grad_reduce_in_bf16,
               "keep, accumulate and reduce gradients in bf16 instead of fp32 (Megatron-Core's "
               "--grad-reduce-in-bf16; Megatron-Bridge's performance recipes): half the gradient memory and "
               "data-parallel traffic");
  app.add_flag("--no-gradient-accumulation-fusion", o.no_gradient_accumulation_fusion,
               "add each weight gradient into its main gradient with a kernel of its own after every "
               "backward pass (Megatron-LM's flag of the same name, and what Megatron-Core does without Apex "
               "or Transformer Engine) instead of inside the weight-gradient GEMM; no cost under --fsdp, "
               "which keeps no main gradient");
  app.add_option(
         "--optimizer-kernels", o.optimizer_kernels,
         "how the optimizer's update runs: fused (one kernel: Transformer Engine's or Apex's FusedAdam, "
         "torch's fused=True) or foreach (torch's multi-tensor Adam, torch.optim's default and "
         "Megatron-Core's fallback without Transformer Engine or Apex: eight passes over the states)")
      ->check(CLI::IsMember({"fused", "foreach"}))
      ->default_str("fused");
  app.add_flag(
      "--fp8-param-gather", o.fp8_param_gather,
      "with --precision fp8: keep the weights in FP8 only and all-gather them in FP8 (Megatron-Core's "
      "--fp8-param-gather)");
  app.add_flag(
      "--fsdp", o.fsdp,
      "fully sharded data parallelism (ZeRO-3; PyTorch FSDP2, Megatron-FSDP): weights, gradients and "
      "optimizer state sharded over the data-parallel ranks; every microbatch gathers each layer's "
      "weights before its forward (and backward: --fsdp-reshard-after-forward) and reduce-scatters its "
      "gradients, prefetched under the neighbouring layers; under pipeline parallelism the gradients are "
      "reduce-scattered once, after the last microbatch (PyTorch's pipeline schedules)");
  app.add_flag("--shard-gradients", o.shard_gradients,
               "with --distributed-optimizer: shard the gradients too (ZeRO stage 2, DeepSpeed's "
               "zero_optimization.stage 2): each rank keeps its shard of the gradients, reduce-scattered in "
               "every microbatch's backward pass, the weights whole; without pipeline parallelism");
  app.add_option(
         "--fsdp-shard", o.fsdp_shard,
         "with --fsdp: shard over groups of N consecutive data-parallel ranks and replicate across the "
         "groups (hybrid sharding, HSDP: torchtitan's data_parallel_shard_degree, FSDP's HYBRID_SHARD); "
         "default: every data-parallel rank")
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--fsdp-reshard-after-forward", o.fsdp_reshard,
         "with --fsdp: when a layer's gathered weights are freed (FSDP2's reshard_after_forward, "
         "torchtitan's "
         "fsdp_reshard_after_forward): always (after its forward, gathered again for its backward: FSDP2's "
         "and FULL_SHARD's default), never (after its backward: one gather per microbatch, all of a stage's "
         "weights gathered at once; SHARD_GRAD_OP) or default (torchtitan's: never under pipeline "
         "parallelism, always without)")
      ->check(CLI::IsMember({"default", "always", "never"}))
      ->default_str("default");
  app.add_option(
         "--optimizer-dtype", o.optimizer_dtype,
         "format of the optimizer state under mixed precision: fp32 (master weights and moments), fp16 "
         "(Megatron-Core's precision-aware optimizer: 2-byte master weights and moments) or bf16 "
         "(bf16 moments, the bf16 weights updated in place: Apex's distributed Adam with dtype bf16)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->default_str("fp32");
}

/// Calibration, FP8's bf16 blocks, Megatron-Core's pipeline-split layers and the mixture of experts' options.
inline void add_model_step_options(CLI::App& app, step_options& o) {
  app.add_option("--calibration", o.calibration,
                 "a calibration file `phaze calibrate --out` wrote: factors fitted to measured steps of your "
                 "stack, applied to every device, collective and step (docs/calibration.md)")
      ->check(non_empty_path);
  app.add_option("--bf16-blocks", o.bf16_blocks,
                 "with --precision fp8: START,END blocks at the start and the end of the model that stay in "
                 "bf16 (Megatron-Core's --first-last-layers-bf16; the FP8 current-scaling recipe keeps 1,1)")
      ->delimiter(',')
      ->expected(2);
  app.add_flag(
      "--account-for-embedding-in-pipeline-split", o.embedding_in_pipeline_split,
      "count the input embedding as one layer of Megatron-Core's even pipeline split: the first model "
      "chunk holds one block fewer (Megatron-Core's flag of the same name)");
  app.add_flag("--account-for-loss-in-pipeline-split", o.loss_in_pipeline_split,
               "count the output layer and its loss as one layer of Megatron-Core's even pipeline split: the "
               "last model chunk holds one block fewer (Megatron-Core's flag of the same name)");
  app.add_option(
         "--capacity-factor", o.capacity_factor,
         "mixture of experts: drop the tokens beyond F times each expert's balanced share and pad every "
         "expert to it (Megatron-Core's --moe-expert-capacity-factor F with "
         "--moe-pad-expert-input-to-capacity; token-dropping recipes use 1.0); default: dropless")
      ->check(number_up_to(64.0, "a multiple of each expert's balanced share of tokens"));
  app.add_option(
         "--moe-dispatcher", o.moe_dispatcher,
         "mixture of experts: how tokens reach their experts' ranks: alltoall (NCCL's all-to-all, one "
         "copy per routed expert: what Megatron-Core's recipes run) or flex (DeepEP's or HybridEP's kernels: "
         "a token crosses the network once per node holding any of its experts and is handed on over "
         "NVLink; Megatron-Core's --moe-token-dispatcher-type flex)")
      ->check(CLI::IsMember({"alltoall", "flex"}))
      ->default_str("alltoall");
  app.add_option("--moe-permutation", o.moe_permutation,
                 "mixture of experts: the token permutation and unpermutation as fused kernels (Transformer "
                 "Engine's: Megatron-Core's --moe-permute-fusion, which Megatron-Bridge's recipes set) or "
                 "unfused (Megatron-Core's default: a gather by index, then a scale and an atomic add by "
                 "index at PyTorch's measured rate)")
      ->check(CLI::IsMember({"fused", "unfused"}))
      ->default_str("fused");
  app.add_option("--mtp-layers", o.mtp_layers,
                 "multi-token prediction modules after the output layer, one more block and loss "
                 "(DeepSeek-V3; Megatron-Core's --mtp-num-layers); default: the model's own "
                 "(num_nextn_predict_layers), 0 drops it; phaze builds at most 1")
      ->check(CLI::Range(0, 1));
}

/// Adds every option of how a step runs (each registered here once, for every command that costs steps):
/// the kernels (add_kernel_options), the overlaps and layouts (add_layout_options), calibration, pipeline
/// layers and experts (add_model_step_options).
inline void add_step_options(CLI::App& app, step_options& o) {
  add_kernel_options(app, o);
  add_layout_options(app, o);
  add_model_step_options(app, o);
}

/// How often a long run says how far it is into a log (stderr not a terminal) without `--progress`: a line
/// every log_progress_every_s once it has run that long, so that no run is silent for minutes and quick runs
/// print nothing.
inline constexpr double log_progress_every_s = 30.0;

/// Progress lines on stderr for a command's long work (work_progress reports): on a terminal one line
/// rewritten in place, once the command has run two seconds (quick runs print nothing); with `--progress`
/// (`forced`) from the start, and when stderr is not a terminal one line per second, for logs; into a log
/// without `--progress`, a line every log_progress_every_s once the run has taken that long.
class progress_line {
 public:
  explicit progress_line(bool forced)
      : forced_(forced), terminal_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;
  ~progress_line() { finish(); }

  /// A hook that prints through this line (it must outlive the work).
  [[nodiscard]] progress_hook hook() {
    return [this](const work_progress& p) { show(p); };
  }
  void show(const work_progress& p) {
    const auto now = std::chrono::steady_clock::now();
    const double running = std::chrono::duration<double>(now - start_).count();
    if (!forced_ && running < (terminal_ ? 2.0 : log_progress_every_s)) return;
    const double since = std::chrono::duration<double>(now - last_).count();
    if (printed_ && since < (terminal_ ? 0.2 : forced_ ? 1.0 : log_progress_every_s)) return;
    last_ = now;
    const double left = p.seconds_left();
    const std::string text =
        fmt::format("phaze: {} {}/{} ({:.0f}%), {:.1f} s{}", p.what, p.done, p.total,
                    p.total > 0 ? 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total) : 0.0,
                    p.seconds, left >= 0.0 ? fmt::format(", about {:.0f} s left", left) : std::string{});
    if (terminal_) {
      fmt::print(stderr, "\r{}\033[K", text);
    } else {
      fmt::print(stderr, "{}\n", text);
    }
    std::fflush(stderr);
    printed_ = true;
  }
  /// Ends the line on a terminal (the report that follows starts on its own line).
  void finish() {
    if (printed_ && terminal_) fmt::print(stderr, "\n");
    printed_ = false;
  }

 private:
  bool forced_ = false;
  bool terminal_ = false;
  bool printed_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_{};
};

/// `--progress`: progress lines even for short runs and when stderr is not a terminal (progress_line).
inline void add_progress_option(CLI::App& app, bool& progress) {
  app.add_flag("--progress", progress,
               "print progress lines on stderr from the start, a line a second when stderr is not a terminal "
               "(without it: on a terminal once a run has taken two seconds, into a log a line every 30 s "
               "once it has taken 30 s)");
}

/// Writes `text` to `file` through a temporary file and a rename, so a kill never leaves it half written.
/// The temporary is this process's own (FILE.tmp.PID): two programs writing one file never share it.
inline void write_atomically(const std::filesystem::path& file, const std::string& text) {
  const auto temporary = std::filesystem::path{file.string() + ".tmp." + std::to_string(::getpid())};
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);  // the old file stays as it was; no partial copy beside it
      throw input_error("cannot write '" + temporary.string() + "' (disk full or not writable?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, file, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw input_error("cannot write '" + file.string() + "': " + ec.message());
  }
}

/// The calibration `--calibration FILE` names (the neutral one without it).
inline train::calibration calibration_of(const step_options& o) {
  return o.calibration.empty() ? train::calibration{} : io::read_calibration(o.calibration);
}

/// The cluster `c` under the calibration `--calibration` names (train::calibrated; `c` itself without it).
inline cluster::cluster with_calibration(const step_options& o, const cluster::cluster& c) {
  return o.calibration.empty() ? c : train::calibrated(c, calibration_of(o));
}

/// The model the step options make of `m`: with --mtp-layers N its multi-token prediction modules
/// (transformer_config::mtp_layers); with --capacity-factor F its routed experts padded to F times
/// their balanced share of tokens (transformer_config::capacity_factor); with --bf16-blocks START,END (FP8
/// training only) its first START and last END blocks as bf16 kinds of their own (model::with_bf16_blocks).
inline model::model apply_model_options(const step_options& o, model::model m,
                                        const train::training_knobs& k) {
  // The architecture the options change, rebuilt once; a composite model has none of these to change.
  model::transformer_config c = m.config;
  if (o.mtp_layers >= 0) c.mtp_layers = o.mtp_layers;
  if (o.capacity_factor > 0.0) c.capacity_factor = o.capacity_factor;
  if (c.mtp_layers != m.config.mtp_layers && model::composite(m)) {
    throw input_error(fmt::format(
        "--mtp-layers adds multi-token prediction to a transformer, and {} is a composite model; drop it",
        m.config.name.view()));
  }
  if (o.capacity_factor > 0.0 && (m.config.experts == 0 || model::composite(m))) {
    throw input_error(fmt::format(
        "--capacity-factor pads the routed experts of a mixture of experts, and {} has none; drop it",
        m.config.name.view()));
  }
  if (c.mtp_layers != m.config.mtp_layers || c.capacity_factor != m.config.capacity_factor)
    m = model::make_model(c);
  if (o.bf16_blocks.empty()) return m;
  if (k.precision != hw::precision::fp8) {
    throw input_error(
        "--bf16-blocks keeps some blocks out of FP8 training; give --precision fp8 with it, or drop "
        "--bf16-blocks");
  }
  return model::with_bf16_blocks(std::move(m), o.bf16_blocks.at(0), o.bf16_blocks.at(1));
}

/// The device types of a cluster, each once.
inline std::vector<hw::device> device_types(const cluster::cluster& c) {
  std::vector<hw::device> types;
  for (const auto& g : c.groups())
    if (std::find(types.begin(), types.end(), g.device) == types.end()) types.push_back(g.device);
  return types;
}

/// The kernels `o` names, on `k`, for devices of the types `devices`: FP8 only where every device runs it,
/// fused attention (--attention auto: where every device runs fused kernels), the attention kernel, the
/// loss and the vector kernels of a GPU stack.
inline void apply_kernel_options(const step_options& o, train::training_knobs& k,
                                 const std::vector<hw::device>& devices) {
  if (k.precision == hw::precision::fp8) {
    for (const hw::device& d : devices) {
      if (hw::runs_fp8(d)) continue;
      throw input_error(fmt::format(
          "--precision fp8: device '{}' has no FP8 matrix rate (FP8 training needs FP8 tensor cores: Hopper, "
          "Ada or later, with datasheet.matrix_tflops.fp8 in a device file); give --precision bf16, or a "
          "device that runs FP8",
          d.name.view()));
    }
  }
  const bool all_fuse = std::all_of(devices.begin(), devices.end(), cost::fused_attention_runs_on);
  k.fused_attention = o.attention == "fused" || (o.attention == "auto" && all_fuse);
  k.attention_kernel = train::parse_attention_kernel(o.attention_kernel);
  if (k.attention_kernel != model::attention_kernel::standard && !k.fused_attention) {
    throw input_error(fmt::format(
        "--attention-kernel {} names a fused kernel, but attention runs unfused here (--attention {}); give "
        "--attention fused, or drop --attention-kernel",
        o.attention_kernel, o.attention));
  }
  for (const hw::device& d : devices) {
    if (cost::attention_kernel_runs_on(k.attention_kernel, d.sheet.arch)) continue;
    throw input_error(fmt::format(
        "--attention-kernel {}: device '{}' is {}, and FlashAttention-3 runs on Hopper only; give "
        "--attention-kernel flash2 or cudnn",
        o.attention_kernel, d.name.view(), hw::to_string(d.sheet.arch)));
  }
  k.fused_loss = o.cross_entropy == "fused";
  k.eager_vector = o.vector_kernels == "eager";
  for (const hw::device& d : devices) {
    if (!k.fused_loss && !k.eager_vector) break;
    if (d.kind == hw::device_kind::datasheet) continue;
    throw input_error(fmt::format(
        "{}: device '{}' is an accelerator design, whose vector ops phaze costs on its vector cores, not a "
        "GPU software stack's kernels; drop {}",
        k.fused_loss ? "--cross-entropy fused" : "--vector-kernels eager", d.name.view(),
        k.fused_loss ? "--cross-entropy" : "--vector-kernels"));
  }
}

/// `--overlap LIST` on `k`: grad, param, tp, pp and ep, or none; any other entry is an input_error.
inline void apply_overlaps(std::string_view overlap, train::training_knobs& k) {
  k.overlap_grad_reduce = k.overlap_param_gather = k.tp_comm_overlap = k.overlap_p2p = false;
  k.overlap_expert_comm = false;
  std::string_view rest = overlap;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (item == "grad") {
      k.overlap_grad_reduce = true;
    } else if (item == "param") {
      k.overlap_param_gather = true;
    } else if (item == "tp") {
      k.tp_comm_overlap = true;
    } else if (item == "pp") {
      k.overlap_p2p = true;
    } else if (item == "ep") {
      k.overlap_expert_comm = true;
    } else if (item != "none") {
      throw input_error(fmt::format(
          "--overlap: unknown entry '{}'; give a comma-separated list of grad, param, tp, pp and ep, or none",
          item));
    }
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
}

/// Sets the knobs `o` names on `k` for a run on devices of the types `devices` (apply_kernel_options, the
/// memory and host settings, the data-parallel layout, calibration, the experts' dispatch, apply_overlaps).
inline void apply_step_options(const step_options& o, train::training_knobs& k,
                               const std::vector<hw::device>& devices) {
  apply_kernel_options(o, k, devices);
  if (!(o.memory_headroom >= 0.0 && o.memory_headroom < 1.0)) train::rules::memory_headroom_must_lie_in_0_1();
  k.memory_headroom = o.memory_headroom;
  if (std::isnan(o.host_overhead_us)) {
    const bool gpus = std::all_of(devices.begin(), devices.end(),
                                  [](const hw::device& d) { return d.kind == hw::device_kind::datasheet; });
    k.host_overhead = gpus ? train::eager_host_per_op : 0.0;
  } else {
    if (!(o.host_overhead_us >= 0.0 && o.host_overhead_us <= 1000.0))
      train::rules::host_overhead_must_lie_in_0_1ms();
    k.host_overhead = o.host_overhead_us * 1e-6;
  }
  k.vocab_padding = o.vocab_padding;
  k.grad_reduce_in_bf16 = o.grad_reduce_in_bf16;
  k.gradient_accumulation_fusion = !o.no_gradient_accumulation_fusion;
  k.foreach_optimizer = o.optimizer_kernels == "foreach";
  for (const hw::device& d : devices) {
    if (k.gradient_accumulation_fusion && !k.foreach_optimizer) break;
    if (d.kind == hw::device_kind::datasheet) continue;
    throw input_error(fmt::format(
        "{}: device '{}' is an accelerator design, not a GPU software stack; drop {}",
        k.foreach_optimizer ? "--optimizer-kernels foreach" : "--no-gradient-accumulation-fusion",
        d.name.view(), k.foreach_optimizer ? "--optimizer-kernels" : "--no-gradient-accumulation-fusion"));
  }
  k.fp8_param_gather = o.fp8_param_gather;
  k.fsdp = o.fsdp;
  k.shard_gradients = o.shard_gradients;
  k.fsdp_shard = o.fsdp_shard;
  k.fsdp_reshard_after_forward = train::parse_fsdp_reshard(o.fsdp_reshard);
  k.optimizer_dtype = train::parse_optimizer_dtype(o.optimizer_dtype);
  k.embedding_in_pipeline_split = o.embedding_in_pipeline_split;
  k.loss_in_pipeline_split = o.loss_in_pipeline_split;
  if (!o.calibration.empty()) k = train::calibrated(k, calibration_of(o));
  k.dispatcher = train::parse_moe_dispatcher(o.moe_dispatcher);
  k.unfused_permutation = o.moe_permutation == "unfused";
  apply_overlaps(o.overlap, k);
}

/// A schedule cache of the scheduler `--solver` names (solver.cpp: the only file of the program, besides
/// `phaze schedule`, that includes the ILP).
sched::schedule_cache schedule_cache_for(const std::string& solver);

/// The scheduler `--solver` names.
sched::any_scheduler scheduler_for(const std::string& solver);

/// The placer `--placer chain|downset|brute` names, for a model's tables under the step model
/// (plan_command.cpp).
place::any_placer<place::cost_table, place::step_policy> model_placer_for(const std::string& name);

/// Where layer times came from, in words: "ILP schedules, proven optimal" or "list schedules (gap at most
/// 1.2%)".
inline std::string schedules_text(std::string_view scheduler, double gap) {
  const char* kind = scheduler == "ilp" ? "ILP" : scheduler == "list" ? "list" : "";
  std::string name = *kind != '\0' ? std::string{kind} : std::string{scheduler};
  // The schedulers call a schedule optimal within 1e-9 of its lower bound (sched/scheduler.hpp); a gap below
  // that is rounding.
  if (gap <= 1e-9) return fmt::format("{} schedules, proven optimal", name);
  return fmt::format("{} schedules, within {:.2g}% of optimal", name, 100.0 * gap);
}

/// Where a command runs: `--cluster FILE`, or `--device DEV --devices N [--devices-per-node G]`.
struct cluster_choice {
  std::string device;
  int devices = 0;
  int devices_per_node = 0;  ///< 0: the device's own
  std::string file;
};

/// Adds --device, --devices, --devices-per-node and --cluster (cluster_command.cpp).
void add_cluster_options(CLI::App& app, cluster_choice& choice);

/// The cluster the options name and a label for reports ("64 x a100-80gb", or the cluster file's name);
/// input_error when neither or both ways are given (cluster_command.cpp).
struct chosen_cluster {
  cluster::cluster value;
  std::string label;
};
chosen_cluster resolve_cluster(const cluster_choice& choice, std::string_view command);

/// The program's arguments as main() received them (argv[0] first): a search prints the command that resumes
/// it when it is interrupted.
inline std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}

/// `text` as one word of a POSIX shell: unchanged when it holds only safe characters, else in single quotes.
inline std::string shell_quoted(std::string_view text) {
  const bool safe = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view{"-_./=:,+@%"}.find(c) != std::string_view::npos;
  });
  if (safe) return std::string{text};
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return out + "'";
}

/// Prints one JSON document on stdout, the only thing a `--format json` command writes there, its schema
/// name and version first (io/schema.hpp).
inline void print_json(const io::schema& schema, const nlohmann::ordered_json& value) {
  fmt::print("{}\n", io::dump_json(io::with_schema(schema, value)));
}

/// Prints already formatted text on stdout.
inline void print_text(const std::string& text) {
  fmt::print("{}", text);
}

// The commands, one file each.
command add_models_command(CLI::App& root);
command add_describe_command(CLI::App& root);
command add_devices_command(CLI::App& root);
command add_cluster_command(CLI::App& root);
command add_schedule_command(CLI::App& root);
command add_estimate_command(CLI::App& root);
command add_calibrate_command(CLI::App& root);
command add_plan_command(CLI::App& root);
command add_search_command(CLI::App& root);

}  // namespace phaze::cli
