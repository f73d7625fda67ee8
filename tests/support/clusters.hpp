// Clusters for tests: n devices of a preset in the preset's nodes, or of any other device (a design of
// PHAZE's template) in the reference design's nodes; and the fp16 knobs the mixed-cluster tests train with.
#pragma once

#include <phaze/cluster/cluster.hpp>
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/device.hpp>
#include <phaze/train/knobs.hpp>

#include <cstdint>

namespace phaze::test {

/// The node `d` comes in: its preset's, or the reference design's.
inline cluster::node_spec node_of(const hw::device& d) {
  return cluster::find_node_preset(d.name.view()).value_or(cluster::reference_node);
}

/// `n` devices `d` in their nodes.
inline cluster::cluster cluster_of(const hw::device& d, int n) {
  return cluster::homogeneous(d, n, node_of(d));
}

/// As many devices `d` as plan `p` uses.
inline cluster::cluster cluster_of(const hw::device& d, const train::parallelism& p) {
  return cluster_of(d, static_cast<int>(p.devices()));
}

/// fp16 training (AMP's and the V100/T4 presets' format) of `global_batch` sequences in microbatches of
/// `microbatch`, the other knobs at their defaults.
inline train::training_knobs fp16_knobs(std::int64_t global_batch, std::int64_t microbatch) {
  train::training_knobs k;
  k.global_batch = global_batch;
  k.microbatch = microbatch;
  k.precision = hw::precision::fp16;
  return k;
}

/// The route of a tensor-parallel group of `tp` devices `d`.
inline cluster::route tp_route(const hw::device& d, int tp) {
  return cluster::tensor_parallel_route(node_of(d), tp);
}

}  // namespace phaze::test
