/// @file
/// What a co-search searches (docs/search.md): a model, a cluster of identical accelerators, a space of
/// accelerator designs (hw::space, the C++ DSL or a JSON spec of the same shape) and the training knobs tried
/// for every design. PHAZE's setting (Wang et al., ICML 2024, section 5) is `phaze_setting`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/presets.hpp"
#include "phaze/core/error.hpp"
#include "phaze/hw/space.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"
#include "phaze/train/knob_space.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::search {

/// A whole search.
struct spec {
  model::model model;
  int devices = 1024;                                 ///< accelerators in the cluster
  cluster::node_spec node = cluster::reference_node;  ///< the node every design comes in (links, NICs)
  std::int64_t global_batch = 4096;                   ///< sequences per iteration
  std::int64_t sequence = 0;                          ///< 0: the model's own
  hw::space space = hw::phaze_default_space;
  train::knob_space knobs{};  ///< the knobs tried for every design
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
  throw input_error("a search needs `devices` and `global_batch` of at least 1");
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
[[noreturn]] inline void the_co_search_cannot_place_the_interleaved_schedule() {
  throw input_error(
      "the co-search places uneven pipeline stages (the chain, downset or brute placer), and the interleaved "
      "schedule's chunks cannot be placed that way; drop \"schedule\": \"interleaved\" from the knobs, or "
      "time "
      "an interleaved plan on a design with `phaze plan --device FILE --schedule interleaved --placer "
      "uniform`");
}
}  // namespace rules

/// Checks a spec; throws input_error saying what to fix.
inline void validate(const spec& s) {
  if (s.devices < 1 || s.global_batch < 1) rules::search_needs_devices_and_a_batch();
  cluster::validate(s.node);
  train::validate(s.knobs);
  if (s.knobs.schedule == train::pipeline_schedule::interleaved)
    rules::the_co_search_cannot_place_the_interleaved_schedule();
  const auto& mbs = s.knobs.microbatches;
  if (std::none_of(mbs.begin(), mbs.end(), [&](std::int64_t mb) { return s.global_batch % mb == 0; }))
    rules::microbatches_must_divide_the_batch();
  if (s.space.count() == 0) rules::the_space_holds_no_design();
}

/// The spec that co-searches `space` for the training of `m` a training space describes (`dsl::training`):
/// its knobs, global batch and sequence, and its devices when it fixes them (else the spec's 1024).
inline spec spec_of(const model::model& m, const hw::space& space, const train::training_space& t) {
  train::validate(m, t);
  spec s;
  s.model = m;
  if (t.devices > 0) s.devices = t.devices;
  s.global_batch = t.global_batch;
  s.sequence = t.sequence;
  s.space = space;
  s.knobs = t.knobs;
  return s;
}

}  // namespace phaze::search
