// A placer a user writes (examples/greedy_placer.hpp: greedy balanced partition) run through the co-search
// and through plan search in place of the exact chain DP: same specs, same step model, one option changed.
// The exact placer is never slower; the greedy one places each knob setting in a single pass.
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/space.hpp>
#include <phaze/model/dsl.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/plan_search.hpp>
#include <phaze/search/engine.hpp>

#include <chrono>
#include <cstdio>

#include "greedy_placer.hpp"

namespace dsl = phaze::dsl;
using namespace phaze::literals;

// [docs-example]
constexpr auto model = dsl::transformer(dsl::name = "gpt-760m", dsl::hidden = 1536, dsl::heads = 16,
                                        dsl::layers = 24, dsl::vocab = 50304, dsl::sequence = 2048);
constexpr auto space = dsl::accelerator_space(
    dsl::tensor_cores = dsl::pow2(2, 16), dsl::tc_width = dsl::pow2(64, 256),
    dsl::tc_depth = dsl::same_as(dsl::tc_width), dsl::vector_cores = dsl::pow2(1, 8),
    dsl::vc_width = dsl::same_as(dsl::tc_width), dsl::global_buffer = dsl::pow2(16_MiB, 64_MiB),
    dsl::hbm = dsl::one_of(32_GiB), dsl::area_budget = phaze::hw::area_of(phaze::hw::tpuv4_like),
    dsl::min_area = 300_mm2);

phaze::search::summary search_with(phaze::place::model_placer placer) {
  phaze::search::spec s{.model = model, .devices = 64, .global_batch = 512, .space = space};
  s.knobs.microbatches = {1, 2, 4};
  phaze::search::options o;
  o.placer = std::move(placer);  // any type that models phaze::place::Placer
  return phaze::search::run(s, o);
}
// [docs-example]

int main() {
  const auto timed = [](phaze::place::model_placer placer) {
    const auto start = std::chrono::steady_clock::now();
    auto result = search_with(std::move(placer));
    return std::pair{result, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  };
  const auto [exact, exact_s] = timed(phaze::place::chain_placer{});
  const auto [greedy, greedy_s] = timed(user::greedy_placer{});
  std::printf("co-search of %s on 64 accelerators, %llu designs:\n", model.config.name.str().c_str(),
              static_cast<unsigned long long>(exact.designs));
  std::printf("  chain placer:  best %.2f samples/s, tp %d pp %d dp %d (%.2f s)\n", exact.best.samples_per_s,
              exact.best.parallel.tp, exact.best.parallel.pp, exact.best.parallel.dp, exact_s);
  std::printf("  greedy placer: best %.2f samples/s, tp %d pp %d dp %d (%.2f s)\n", greedy.best.samples_per_s,
              greedy.best.parallel.tp, greedy.best.parallel.pp, greedy.best.parallel.dp, greedy_s);

  // The same placer in plan search, on a GPU cluster: Llama-2-7B on 32 A100-80GB, global batch 128.
  phaze::train::training_knobs base;
  base.global_batch = 128;
  const auto llama = phaze::model::with_sequence(phaze::zoo::get("llama2-7b"), 4096);
  const auto cluster = phaze::cluster::preset_cluster("a100-80gb", 32);
  const phaze::sched::schedule_cache cache;
  phaze::place::plan_choices choices;  // uneven stages by the placer, as `phaze plan` (the default)
  const auto chain_plans = phaze::place::search_plans(llama, cluster, base, choices, cache);
  choices.placer = user::greedy_placer{};
  const auto greedy_plans = phaze::place::search_plans(llama, cluster, base, choices, cache);
  const auto& c = chain_plans.feasible.front();
  const auto& g = greedy_plans.feasible.front();
  std::printf(
      "plan of llama2-7b on 32 x a100-80gb: chain %.3f s per batch (tp %d pp %d), greedy %.3f s (tp %d pp "
      "%d)\n",
      c.estimate.time_per_batch.value(), c.parallel.tp, c.parallel.pp, g.estimate.time_per_batch.value(),
      g.parallel.tp, g.parallel.pp);

  // The exact placer is never beaten; both plans are what the step model gives for their splits.
  const bool exact_wins =
      exact.best.samples_per_s >= greedy.best.samples_per_s * (1 - 1e-12) &&
      c.estimate.time_per_batch.value() <= g.estimate.time_per_batch.value() * (1 + 1e-12);
  return exact_wins && greedy.best.samples_per_s > 0 ? 0 : 1;
}
