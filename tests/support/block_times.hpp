// phaze's time of each compute op of one layer on one GPU, forward then backward: what the tests comparing
// phaze with blocks measured on a GPU (tests/data/gpu) add up by kind.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>

#include "clusters.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/sched/layer_problem.hpp"

namespace phaze::test {

/// Calls `visit(op, seconds, forward)` for every op of `l` that computes on `d` (its collectives skipped: the
/// measured blocks ran on one GPU without them), with phaze's time of the op on all of `d`'s cores, the
/// forward pass's ops first, then the backward's. The layer's tensor-parallel group is `tp` devices of `d`.
template <class Visit>
void for_each_compute_op(const model::layer& l, const hw::device& d, int tp, Visit&& visit) {
  const auto cluster = cluster_of(d, tp);
  const auto route = cluster.ring({tp, 1}, tp);
  for (const auto which : {sched::pass::forward, sched::pass::backward}) {
    const sched::problem p = sched::layer_problem(l, d, route, which);
    const bool forward = which == sched::pass::forward;
    auto each = [&](const auto& ops) {
      REQUIRE(ops.size() == p.tasks.size());
      for (std::size_t i = 0; i < ops.size(); ++i) {
        if (model::unit_of(ops[i]) == model::unit::network) continue;
        visit(ops[i], p.tasks[i].all_cores.value(), forward);
      }
    };
    if (forward) {
      each(l.ops);
    } else {
      each(model::backward(l));
    }
  }
}

}  // namespace phaze::test
