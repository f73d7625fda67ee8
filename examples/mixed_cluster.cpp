// A cluster of two device types, written in C++, planned by the planning service every command uses
// (place::search_plans): GPT-2 XL on 16 H100 and 16 A100 in their DGX nodes, uneven stages by the chain DP,
// every tensor-parallel width (GPT-2 XL's 25 heads admit tp 1 only), microbatch and recomputation mode. It
// prints the best plans and, for the best, which device type runs each stage and how many blocks it holds:
// the faster H100 stages take more blocks. Exits 1 when no plan fits or the stages do not use both types.
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/plan_search.hpp>

#include <cstdio>
#include <string>
#include <vector>

// [docs-example]
int main() {
  namespace place = phaze::place;
  const phaze::hw::device h100 = *phaze::hw::find_preset("h100-sxm");
  const phaze::hw::device a100 = *phaze::hw::find_preset("a100-80gb");
  // Device groups in rank order (the first group takes the first ranks, so the first pipeline stages).
  const phaze::cluster::cluster mixed{{
      {h100, 16, phaze::cluster::node_of("h100-sxm")},
      {a100, 16, phaze::cluster::node_of("a100-80gb")},
  }};
  phaze::train::training_knobs base;  // what is not searched
  base.global_batch = 256;
  base.fused_attention = true;  // FlashAttention: both types run it
  // Uneven stages by the chain DP, every width and knob setting, on list schedules (no `refine`: on
  // datasheet GPUs they are already optimal).
  place::plan_choices choices;
  const place::plan_search_result found =
      place::search_plans(phaze::zoo::gpt2_xl(), mixed, base, choices, phaze::sched::schedule_cache{});
  std::printf("%zu plans evaluated, %zu fit\n", found.evaluated, found.feasible.size());
  if (found.feasible.empty()) return 1;
  for (std::size_t i = 0; i < found.feasible.size() && i < 3; ++i) {
    const place::ranked_plan& p = found.feasible[i];
    std::printf("#%zu tp %d, pp %d, dp %d, microbatch %lld, %s recomputation: %.3f s per batch\n", i + 1,
                p.parallel.tp, p.parallel.pp, p.parallel.dp, static_cast<long long>(p.knobs.microbatch),
                std::string{phaze::model::to_string(p.knobs.recompute)}.c_str(),
                p.estimate.time_per_batch.value());
  }
  // Stage k's ranks are k * tp * dp onwards (Megatron-LM's order): the device type of its first rank.
  const place::ranked_plan& best = found.feasible.front();
  bool both = false;
  for (std::size_t k = 0; k < best.split.size(); ++k) {
    const int rank = static_cast<int>(k) * best.parallel.tp * best.parallel.dp;
    const bool on_h100 = rank < 16;
    both = both || !on_h100;
    std::printf("stage %zu on %s: %lld blocks%s%s\n", k, on_h100 ? "h100-sxm" : "a100-80gb",
                static_cast<long long>(best.split[k].blocks), best.split[k].embedding ? " + embedding" : "",
                best.split[k].head ? " + head" : "");
  }
  return best.split.size() > 1 && !both ? 1 : 0;
}
// [docs-example]
