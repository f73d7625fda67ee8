// The plan `phaze estimate` costs, built from its options: shared by `phaze estimate` and `phaze calibrate`,
// whose runs are lines of estimate arguments.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/step.hpp"

namespace phaze::cli {

struct estimate_options {
  std::string model;
  cluster_choice where;
  int tp = 1;
  int pp = 1;
  int dp = 0;  // 0: devices / (tp * pp * cp)
  int cp = 1;
  int ep = 1;
  int etp = 0;  // 0: tp
  std::int64_t global_batch = 1;
  std::int64_t microbatch = 1;
  std::string recompute = "none";
  int recompute_layers = 0;
  std::string recompute_method = "block";
  std::vector<std::string> recompute_modules;  // empty: the attention core
  bool sequence_parallel = false;
  run_options run;  ///< --seq, --vocab, --schedule, --vp, --optimizer, --distributed-optimizer, --precision
  std::string solver = "ilp";
  std::vector<std::int64_t> stage_blocks;  // empty: the uniform split
  std::string layout;                      // Megatron-Core's --pipeline-model-parallel-layout; empty: none
  std::string format = "table";
  step_options step;
};

/// Registers estimate's options on `parser` (MODEL, the cluster, the plan, the step options, --solver,
/// --stage-blocks, --pipeline-model-parallel-layout, --format).
void add_estimate_options(CLI::App& parser, estimate_options& o);

/// What `phaze estimate` costs: the model, the cluster (calibrated), the plan, the knobs and the stage split.
struct estimate_input {
  model::model m;
  cluster::cluster c;
  std::string cluster_label;
  train::parallelism p;
  train::training_knobs k;
  std::vector<train::stage_layers> split;
};

/// The plan the options give, checked (input_error saying what to fix otherwise).
estimate_input build_estimate(const estimate_options& o);

}  // namespace phaze::cli
