/// @file
/// What a co-search produces (docs/search.md): one record per accelerator design of the space (its best plan
/// over every knob setting, or why it has none), the baselines, and the summary the reports are written from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "phaze/hw/area.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"
#include "phaze/train/step.hpp"

namespace phaze::search {

/// What happened to a design.
enum class outcome : std::uint8_t {
  evaluated,   ///< placed: `parallel`, `knobs`, `split` and `estimate` hold its best plan
  pruned,      ///< skipped: its throughput upper bound cannot reach the Pareto front found before it
  infeasible,  ///< no knob setting and placement fits its memory
};

constexpr std::string_view to_string(outcome o) {
  switch (o) {
    case outcome::evaluated:
      return "evaluated";
    case outcome::pruned:
      return "pruned";
    case outcome::infeasible:
      return "infeasible";
  }
  return "?";
}

/// One accelerator design and its best training plan.
struct design_result {
  std::uint64_t index = 0;  ///< position in the space's enumeration order (baselines: not in the space)
  hw::device device{};
  hw::area die_area{0.0};
  outcome status = outcome::evaluated;
  double upper_bound_samples_per_s = 0.0;  ///< from peak compute and the model's FLOPs (sound)
  // The best plan (status == evaluated):
  train::parallelism parallel{};
  train::training_knobs knobs{};
  std::vector<train::stage_layers> split;
  train::step_estimate estimate{};
  double samples_per_s = 0.0;         ///< estimate.samples_per_s, 0 unless evaluated
  hw::energy energy_per_sample{0.0};  ///< dynamic energy of one training sample over all devices
  bytes smallest_memory_need{0.0};    ///< infeasible: the leanest plan's peak memory per device
  std::uint64_t configurations = 0;   ///< (tensor-parallel width, knob setting) items placed for this design
  /// The scheduler the layer times of the plan came from ("list"; "ilp" once the search refined it).
  std::string scheduler = "list";
  /// The largest relative gap of the schedules behind the plan (0: all proven optimal). For list schedules it
  /// bounds how much a better schedule could speed the design up: at most by 1 / (1 - schedule_gap).
  double schedule_gap = 0.0;
};

/// A reference point the report compares the best design against.
struct baseline {
  std::string name;         ///< "tpuv4-like", "spotlight-style", "megatron-uniform"
  std::string description;  ///< one sentence: how it was chosen
  design_result result;
};

/// A finished search, as the reports read it.
struct summary {
  std::string model;              ///< model name
  int devices = 0;                ///< accelerators in the cluster
  std::int64_t global_batch = 0;  ///< sequences per iteration
  std::int64_t sequence = 0;      ///< tokens per sequence
  std::int64_t vocab = 0;         ///< the model's vocabulary (tokens)
  /// The precision every plan trains in (the knob space's).
  hw::precision precision = hw::precision::bf16;
  std::string space;                 ///< one line describing the searched space and knobs
  std::uint64_t designs = 0;         ///< designs in the space (after the area filter)
  std::uint64_t evaluated = 0;       ///< designs placed
  std::uint64_t pruned = 0;          ///< designs skipped by the sound bound
  std::uint64_t infeasible = 0;      ///< designs where nothing fits
  std::uint64_t configurations = 0;  ///< (design, tensor-parallel width, knob setting) items placed
  std::uint64_t refined = 0;         ///< designs whose plans were refined with the reported scheduler
  std::string scheduler = "list";    ///< the scheduler the reported numbers come from
  double seconds = 0.0;              ///< wall time of this run (a resumed run: of the last part)
  int threads = 1;
  int processes = 1;
  design_result best;                 ///< the highest throughput (ties: the lower index)
  std::vector<design_result> top;     ///< the best designs, best first
  std::vector<design_result> pareto;  ///< throughput vs die area front, by ascending area
  std::vector<baseline> baselines;
};

}  // namespace phaze::search
