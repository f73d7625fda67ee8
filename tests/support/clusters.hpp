// Clusters for tests: n devices of a preset in the preset's nodes, or of any other device (a design of
// PHAZE's template) in the reference design's nodes.
#pragma once

#include <phaze/cluster/cluster.hpp>
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/device.hpp>
#include <phaze/train/knobs.hpp>

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

/// The route of a tensor-parallel group of `tp` devices `d`.
inline cluster::route tp_route(const hw::device& d, int tp) {
  return cluster::tensor_parallel_route(node_of(d), tp);
}

}  // namespace phaze::test
