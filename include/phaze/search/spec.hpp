/// @file
/// What a co-search searches (docs/search.md): a model, a cluster of identical accelerators, a space of
/// accelerator designs (hw::space, the C++ DSL or a JSON spec of the same shape) and the training knobs tried
/// for every design. PHAZE's setting (Wang et al., ICML 2024, section 5) is `phaze_setting`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/presets.hpp"
#include "phaze/core/error.hpp"
#include "phaze/hw/space.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::search {

/// The knobs tried for every design: every combination of the lists. Tensor-parallel widths are the
/// powers of two that divide the model and fit in a node unless `tensor_parallel` lists them.
struct knob_space {
  std::vector<std::int64_t> microbatches{1, 2, 4, 8};
  std::vector<model::recompute> recompute{model::recompute::none, model::recompute::selective,
                                          model::recompute::full};
  std::vector<bool> sequence_parallel{false, true};
  std::vector<int> tensor_parallel;  ///< empty: every admissible width
  hw::precision precision = hw::precision::bf16;
  train::optimizer opt = train::optimizer::adam;
  train::pipeline_schedule schedule = train::pipeline_schedule::one_f_one_b;
  bool distributed_optimizer = false;
};

/// A whole search.
struct spec {
  model::model model;
  int devices = 1024;                                 ///< accelerators in the cluster
  cluster::node_spec node = cluster::reference_node;  ///< the node every design comes in (links, NICs)
  std::int64_t global_batch = 4096;                   ///< sequences per iteration
  std::int64_t sequence = 0;                          ///< 0: the model's own
  hw::space space = hw::phaze_default_space;
  knob_space knobs{};
};

/// The cluster of `s.devices` copies of design `d` in the spec's nodes.
inline cluster::cluster cluster_of(const spec& s, const hw::device& d) {
  return cluster::homogeneous(d, s.devices, s.node);
}

/// The model a spec trains (its sequence applied).
inline model::model model_of(const spec& s) {
  return s.sequence > 0 ? model::with_sequence(s.model, s.sequence) : s.model;
}

namespace rules {
[[noreturn]] inline void search_needs_devices_and_a_batch() {
  throw input_error("a search needs --devices and --global-batch of at least 1");
}
[[noreturn]] inline void knob_lists_must_not_be_empty() {
  throw input_error(
      "every knob list (microbatches, recompute, sequence_parallel) needs at least one value; give e.g. "
      "\"microbatches\": [1, 2, 4]");
}
[[noreturn]] inline void microbatches_must_divide_the_batch() {
  throw input_error(
      "no microbatch size in the knob list divides the global batch; give sizes that divide it");
}
[[noreturn]] inline void the_space_holds_no_design() {
  throw input_error(
      "the space holds no design: the area budget (and minimum area) exclude every point; raise the budget, "
      "lower the minimum or widen the dimensions");
}
}  // namespace rules

/// Checks a spec; throws input_error saying what to fix.
inline void validate(const spec& s) {
  if (s.devices < 1 || s.global_batch < 1) rules::search_needs_devices_and_a_batch();
  cluster::validate(s.node);
  const auto& k = s.knobs;
  if (k.microbatches.empty() || k.recompute.empty() || k.sequence_parallel.empty()) {
    rules::knob_lists_must_not_be_empty();
  }
  bool divides = false;
  for (const std::int64_t mb : k.microbatches) {
    if (mb < 1) throw input_error("microbatch sizes must be at least 1");
    divides = divides || s.global_batch % mb == 0;
  }
  if (!divides) rules::microbatches_must_divide_the_batch();
  for (const int tp : k.tensor_parallel) {
    if (tp < 1) throw input_error("tensor-parallel widths must be at least 1");
  }
  if (s.space.count() == 0) rules::the_space_holds_no_design();
}

}  // namespace phaze::search
