// Placement on clusters of mixed device types (AMP's heterogeneous clusters): chain_dp under step_policy
// costs each stage on its own devices and equals an exhaustive oracle (every split of the layers into stages,
// each timed by train::estimate_step on the true cluster); its plan is never slower, on the true cluster,
// than the best plan found under a homogeneous assumption; a stage over two device types runs at the slower
// one's pace and fits the smaller memory; every stage fits its own devices' memory.
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/downset_dp.hpp>
#include <phaze/place/model_placement.hpp>
#include <phaze/place/plan_search.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"
#include "../support/splits.hpp"

#include <cstddef>
#include <limits>
#include <optional>
#include <random>
#include <utility>
#include <vector>

using namespace phaze;

namespace {
using phaze::test::fp16_knobs;

cluster::cluster mixed(std::initializer_list<std::pair<const char*, int>> groups) {
  std::vector<cluster::device_group> gs;
  for (const auto& [name, count] : groups)
    gs.push_back({*hw::find_preset(name), count, cluster::node_of(name)});
  return cluster::cluster{gs};
}

/// The fastest fitting plan of (tp, pp, dp) by exhaustion: every split of the embedding, the blocks and the
/// head into pp non-empty contiguous stages, each timed by estimate_step on cluster `c`; nullopt when nothing
/// fits.
std::optional<double> oracle(const model::model& m, const cluster::cluster& c, const train::parallelism& p,
                             const train::training_knobs& k, const sched::schedule_cache& cache) {
  std::optional<double> best;
  phaze::test::for_each_split(m.size(), static_cast<std::size_t>(p.pp), [&](const auto& cuts) {
    const train::step_estimate e =
        train::estimate_step(m, c, p, k, cache, phaze::test::stages_of(cuts, m.size()));
    if (e.fits && (!best || e.time_per_batch.value() < *best)) best = e.time_per_batch.value();
  });
  return best;
}
}  // namespace

TEST_CASE("chain_dp on a mixed cluster equals the exhaustive oracle over splits", "[place][heterogeneous]") {
  const model::model m = model::with_sequence(zoo::get("gpt2"), 512);
  const sched::schedule_cache cache;
  const std::vector<cluster::cluster> clusters{
      mixed({{"v100-16gb", 4}, {"t4", 4}}),
      mixed({{"t4", 4}, {"v100-16gb", 4}}),
      mixed({{"a100-80gb", 4}, {"t4", 4}}),
      mixed({{"t4", 2}, {"v100-16gb", 4}, {"t4", 2}}),
  };
  int compared = 0;
  for (const auto& c : clusters) {
    for (const std::int64_t mb : {1, 2}) {
      const auto k = fp16_knobs(32, mb);
      for (const int tp : {1, 2}) {
        const auto placed = place::place_model(m, c, k, {tp}, cache);
        // The best over every (pp, dp) that uses all 8 devices.
        std::optional<double> best;
        for (int pp = 1; pp * tp <= 8; ++pp) {
          if (8 % (pp * tp) != 0) continue;
          const train::parallelism p{tp, pp, 8 / (pp * tp)};
          if (k.global_batch / k.microbatch % p.dp != 0) continue;
          if (const auto o = oracle(m, c, p, k, cache); o && (!best || *o < *best)) best = *o;
        }
        INFO("cluster " << c.groups().front().device.name.view() << "+... mb " << mb << " tp " << tp);
        REQUIRE(placed.placed.feasible == best.has_value());
        if (!best) continue;
        CHECK(placed.estimate.time_per_batch.value() == Approx(*best).epsilon(1e-9));
        // The placer's own time is the estimate's: one step model.
        CHECK(placed.placed.time_per_batch.value() ==
              Approx(placed.estimate.time_per_batch.value()).epsilon(1e-9));
        CHECK(placed.estimate.fits);
        for (const auto& st : placed.estimate.stages) CHECK(st.memory <= st.capacity);
        ++compared;
      }
    }
  }
  CHECK(compared >= 12);
}

TEST_CASE("on a mixed cluster the fastest split need not have the least slowest stage",
          "[place][heterogeneous]") {
  // The pipeline is (m - 1) t_max + sum_i t_i, and on mixed device types the sum depends on the split (a
  // block costs more on a T4 than on a V100): minimizing the slowest stage alone, exact on one device type,
  // misses the best split here; chain_dp (caps on t_max, each with the least sum) finds it.
  const model::model m = model::with_sequence(zoo::get("gpt2"), 512);
  const sched::schedule_cache cache;
  const cluster::cluster c = mixed({{"v100-16gb", 4}, {"t4", 4}});
  int sum_mattered = 0;
  // Few microbatches (global batch 8) weigh the sum most.
  for (const auto& [batch, mb] : {std::pair<std::int64_t, std::int64_t>{32, 1}, {32, 2}, {8, 1}, {8, 2}}) {
    const auto k = fp16_knobs(batch, mb);
    for (const int pp : {2, 4, 8}) {
      const train::parallelism p{1, pp, 8 / pp};
      if (k.global_batch / k.microbatch % p.dp != 0) continue;
      const int nodes = static_cast<int>(m.config.layers) + 2;
      double fastest = std::numeric_limits<double>::infinity();
      double fastest_slowest_stage = 0.0;
      double least_slowest_stage = std::numeric_limits<double>::infinity();
      std::vector<int> cuts(static_cast<std::size_t>(pp - 1));
      auto recurse = [&](auto&& self, int stage, int from) -> void {
        if (stage == pp - 1) {
          std::vector<train::stage_layers> split;
          int start = 0;
          for (int i = 0; i < pp; ++i) {
            const int end = i + 1 < pp ? cuts[static_cast<std::size_t>(i)] : nodes;
            split.push_back(
                {std::max(0, std::min(end, nodes - 1) - std::max(start, 1)), start == 0, end == nodes});
            start = end;
          }
          const auto e = train::estimate_step(m, c, p, k, cache, split);
          if (!e.fits) return;
          double slowest = 0.0;
          for (const auto& st : e.stages) slowest = std::max(slowest, st.per_microbatch().value());
          least_slowest_stage = std::min(least_slowest_stage, slowest);
          if (e.time_per_batch.value() < fastest) {
            fastest = e.time_per_batch.value();
            fastest_slowest_stage = slowest;
          }
          return;
        }
        for (int cut = from + 1; cut <= nodes - (pp - 1 - stage); ++cut) {
          cuts[static_cast<std::size_t>(stage)] = cut;
          self(self, stage + 1, cut);
        }
      };
      recurse(recurse, 0, 0);
      if (!(fastest < std::numeric_limits<double>::infinity())) continue;
      place::placement_request fixed;
      fixed.pp = pp;
      const auto placed = place::place_model(m, c, k, {1}, cache, fixed);
      INFO("batch " << batch << " mb " << mb << " pp " << pp);
      REQUIRE(placed.placed.feasible);
      CHECK(placed.estimate.time_per_batch.value() == Approx(fastest).epsilon(1e-9));
      if (fastest_slowest_stage > least_slowest_stage * (1 + 1e-9)) ++sum_mattered;
    }
  }
  CHECK(sum_mattered >= 1);
}

TEST_CASE("a mixed cluster's plan is never slower than the plan of a homogeneous assumption",
          "[place][heterogeneous]") {
  // Seeded: clusters of two types in random group orders and sizes (multiples of 2), planned knowing the
  // types and planned as if every device were the first group's type; both plans timed on the true cluster.
  const model::model m = model::with_sequence(zoo::get("gpt2"), 512);
  const sched::schedule_cache cache;
  std::mt19937 rng(20261123);
  const std::vector<const char*> types{"t4", "v100-16gb", "a100-40gb"};
  int timed = 0;
  int unrunnable = 0;
  for (int trial = 0; trial < 16; ++trial) {
    const char* a = types[rng() % types.size()];
    const char* b = types[rng() % types.size()];
    const int na = 2 * static_cast<int>(1 + rng() % 3);
    const cluster::cluster truth = mixed({{a, na}, {b, 8 - na}});
    const cluster::cluster assumed = mixed({{a, 8}});
    const auto k = fp16_knobs(32, 1 + static_cast<std::int64_t>(rng() % 2));
    const auto aware = place::place_model(m, truth, k, {1}, cache);
    const auto oblivious = place::place_model(m, assumed, k, {1}, cache);
    INFO(a << " x" << na << " + " << b << " x" << 8 - na);
    REQUIRE(aware.placed.feasible);
    if (!oblivious.placed.feasible) continue;
    // The oblivious plan on the true cluster: one that does not fit the memory of its true devices cannot
    // run as planned; otherwise it is timed there.
    const train::step_estimate e =
        train::estimate_step(m, truth, oblivious.parallel, k, cache, oblivious.split);
    if (!e.fits) {
      ++unrunnable;
      continue;
    }
    CHECK(aware.estimate.time_per_batch.value() <= e.time_per_batch.value() * (1 + 1e-12));
    ++timed;
  }
  CHECK(timed >= 3);
  CHECK(timed + unrunnable >= 12);
}

namespace {
/// A cluster of the given groups all in one kind of node (`node_of` the first type): device types that
/// differ only in the devices, so a stage's time and memory are what its device types make them.
cluster::cluster same_nodes(std::initializer_list<std::pair<const char*, int>> groups, const char* node) {
  std::vector<cluster::device_group> gs;
  for (const auto& [name, count] : groups)
    gs.push_back({*hw::find_preset(name), count, cluster::node_of(node)});
  return cluster::cluster{gs};
}
}  // namespace

TEST_CASE("a stage over two device types runs at its slower type's pace and fits its smaller memory",
          "[place][heterogeneous]") {
  const model::model m = model::with_sequence(zoo::get("gpt2"), 512);
  const sched::schedule_cache cache;
  const auto k = fp16_knobs(32, 2);
  const cluster::cluster half = same_nodes({{"v100-16gb", 4}, {"t4", 4}}, "t4");
  const cluster::cluster slow = same_nodes({{"t4", 8}}, "t4");
  const cluster::cluster fast = same_nodes({{"v100-16gb", 8}}, "t4");

  // One stage over every device: the T4s pace it, and the whole iteration is the all-T4 one (same links,
  // the optimizer step on the slowest memory, T4's 16 GB the capacity).
  const train::parallelism flat{1, 1, 8};
  const auto mixed_e = train::estimate_step(m, half, flat, k, cache);
  const auto slow_e = train::estimate_step(m, slow, flat, k, cache);
  const auto fast_e = train::estimate_step(m, fast, flat, k, cache);
  REQUIRE(mixed_e.stages.size() == 1);
  CHECK(mixed_e.stages[0].mixed);
  CHECK_FALSE(slow_e.stages[0].mixed);
  CHECK(half.device_at(static_cast<int>(mixed_e.stages[0].pacing_rank)).name.view() == "t4");
  CHECK(mixed_e.time_per_batch.value() == Approx(slow_e.time_per_batch.value()).epsilon(1e-12));
  CHECK(mixed_e.time_per_batch > fast_e.time_per_batch);
  CHECK(mixed_e.stages[0].capacity == std::min(train::usable_memory(*hw::find_preset("t4"), k),
                                               train::usable_memory(*hw::find_preset("v100-16gb"), k)));
  // The model FLOP utilization is over the mean peak of the devices used.
  const double mean_peak = (hw::peak_matrix_flops(*hw::find_preset("t4")).value() +
                            hw::peak_matrix_flops(*hw::find_preset("v100-16gb")).value()) /
                           2.0;
  CHECK(mixed_e.mfu == Approx(mixed_e.model_flops_per_device.value() / mean_peak).epsilon(1e-12));

  // Two stages, the second over 2 V100s and 2 T4s: each stage's time per microbatch is that of the stage
  // on its slowest type alone (the first all V100, the second all T4).
  const cluster::cluster tail = same_nodes({{"v100-16gb", 6}, {"t4", 2}}, "t4");
  const cluster::cluster split_types = same_nodes({{"v100-16gb", 4}, {"t4", 4}}, "t4");
  const train::parallelism deep{1, 2, 4};
  const auto e = train::estimate_step(m, tail, deep, k, cache);
  const auto oracle = train::estimate_step(m, split_types, deep, k, cache);
  REQUIRE(e.stages.size() == 2);
  CHECK_FALSE(e.stages[0].mixed);
  CHECK(e.stages[1].mixed);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(e.stages[i].per_microbatch().value() ==
          Approx(oracle.stages[i].per_microbatch().value()).epsilon(1e-12));
    CHECK(e.stages[i].capacity == oracle.stages[i].capacity);
  }
}

namespace {
/// The chain placer under another name, declaring what it prices or not: placers are told apart by their
/// declared capabilities, never by name.
template <bool Declares>
struct capability_probe_chain {
  [[nodiscard]] static constexpr std::string_view name() { return "renamed"; }
  template <place::CostTable Table, class Policy>
  [[nodiscard]] place::plan place(const place::placement_problem<Table>& problem, const Policy& policy,
                                  const place::placement_request& request) const {
    return place::chain_placer{}.place(problem, policy, request);
  }
};
template <>
struct capability_probe_chain<true> : capability_probe_chain<false> {
  static constexpr place::placer_capabilities capabilities = place::chain_placer::capabilities;
};
}  // namespace

TEST_CASE("only placers that declare mixed_devices place stages on a mixed cluster",
          "[place][heterogeneous]") {
  const model::model m = zoo::get("gpt2");
  const sched::schedule_cache cache;
  const auto c = mixed({{"t4", 4}, {"v100-16gb", 4}});
  CHECK_THROWS_WITH(place::place_model(m, c, fp16_knobs(32, 1), {1}, cache, {}, place::downset_placer{}),
                    Catch::Contains("placer_capabilities::mixed_devices"));
  CHECK_THROWS_WITH(
      place::place_model(m, c, fp16_knobs(32, 1), {1}, cache, {}, capability_probe_chain<false>{}),
      Catch::Contains("renamed placer does not declare"));
  const auto declared =
      place::place_model(m, c, fp16_knobs(32, 1), {1}, cache, {}, capability_probe_chain<true>{});
  const auto chain = place::place_model(m, c, fp16_knobs(32, 1), {1}, cache, {}, place::chain_placer{});
  REQUIRE(declared.placed.feasible);
  CHECK(declared.placed.time_per_batch.value() == chain.placed.time_per_batch.value());
}
