// Placement on clusters whose links between nodes are measured and asymmetric (Pipette's setting): chain_dp
// under the step model equals the brute-force placer (every partition) on the measured cluster, and its plan
// is never slower, timed on the measured cluster, than the plan found when the measurements are ignored
// (the link-oblivious plan of the nodes' fabric). Seeded random matrices.
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/brute_force.hpp>
#include <phaze/place/model_placement.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <random>
#include <vector>

using namespace phaze;

namespace {
/// `nodes` nodes of 4 T4s whose links between nodes (the whole node's) are drawn from [0.2, 6.25] GB/s, each
/// direction on its own, latencies from [5, 50] us.
cluster::cluster measured_t4(std::mt19937_64& rng, int nodes) {
  cluster::link_matrix m;
  m.endpoints = cluster::link_matrix::between::nodes;
  m.size = nodes;
  m.entries.resize(static_cast<std::size_t>(nodes * nodes));
  for (auto& e : m.entries) {
    const double u = static_cast<double>(rng() >> 11U) / 9007199254740992.0;
    const double v = static_cast<double>(rng() >> 11U) / 9007199254740992.0;
    e = {bytes_per_second{(0.2 + 6.05 * u) * 1e9}, seconds{(5.0 + 45.0 * v) * 1e-6}};
  }
  return cluster::cluster{{{*hw::find_preset("t4"), 4 * nodes, cluster::node_of("t4")}}, {}, m};
}

train::training_knobs knobs(std::int64_t microbatch) {
  train::training_knobs k;
  k.global_batch = 32;
  k.microbatch = microbatch;
  k.precision = hw::precision::fp16;
  return k;
}
}  // namespace

TEST_CASE("chain_dp on measured asymmetric links equals brute force and beats the link-oblivious plan",
          "[place][measured_links]") {
  // 12 blocks + embedding + head = 14 nodes: within the brute-force placer's 16.
  const model::model m = model::with_sequence(zoo::get("gpt2"), 512);
  const sched::schedule_cache cache;
  std::mt19937_64 rng(1123);
  int compared = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const int nodes = 2 + trial % 3;
    const cluster::cluster truth = measured_t4(rng, nodes);
    const cluster::cluster fabric{truth.groups()};
    const auto k = knobs(1 + trial % 2);
    for (const int tp : {1, 2}) {
      const auto chain = place::place_model(m, truth, k, {tp}, cache);
      const auto brute = place::place_model(m, truth, k, {tp}, cache, {}, place::brute_force_placer{});
      INFO("trial " << trial << " nodes " << nodes << " tp " << tp);
      REQUIRE(chain.placed.feasible == brute.placed.feasible);
      if (!chain.placed.feasible) continue;
      CHECK(chain.estimate.time_per_batch.value() ==
            Approx(brute.estimate.time_per_batch.value()).epsilon(1e-9));
      const auto oblivious = place::place_model(m, fabric, k, {tp}, cache);
      REQUIRE(oblivious.placed.feasible);
      const auto on_truth = train::estimate_step(m, truth, oblivious.parallel, k, cache, oblivious.split);
      CHECK(chain.estimate.time_per_batch.value() <= on_truth.time_per_batch.value() * (1 + 1e-12));
      ++compared;
    }
  }
  CHECK(compared >= 12);
}
