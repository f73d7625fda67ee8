// expect-error: phaze::place::PlacementPolicy: 'stage_memory\(settings, load, stage, context\)' is missing
// A policy without a memory model: the placers cannot reject stages that do not fit.
#include <phaze/place/chain_dp.hpp>

struct time_only : phaze::place::pipeline_policy {
  static void stage_memory() = delete;  // hides pipeline_policy's
};

phaze::place::plan place(const phaze::place::placement_problem<>& problem) {
  return phaze::place::chain_dp(problem, time_only{}).run();
}
