/// @file
/// Every setting of a knob space, in the order a co-search visits them: microbatch outermost, then
/// recomputation, then sequence parallelism (the nested loops of the search, as one list).
/// @code
///   for (const train::knob_setting& setting : train::knob_settings(s.knobs, s.global_batch)) { ... }
/// @endcode
#pragma once

#include <cstdint>
#include <tuple>
#include <vector>

#include <range/v3/range/conversion.hpp>
#include <range/v3/view/cartesian_product.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/transform.hpp>

#include "phaze/train/knob_space.hpp"

namespace phaze::train {

/// Whether sequence parallelism set to `sequence_parallel` runs at tensor-parallel width `tp`: on, it needs
/// tp > 1 (without tensor parallelism it does nothing, as in Megatron-LM), unless the caller forced it (the
/// only setting a user allowed: the plan's rules then say what it does). The one place every planner (the
/// co-search, `phaze plan`, the baselines) applies this rule.
constexpr bool sequence_parallel_runs(bool sequence_parallel, int tp, bool forced = false) {
  return !sequence_parallel || tp > 1 || forced;
}

/// `knob_settings(space)`: every (microbatch, recomputation, sequence parallelism) of `space`, the last
/// varying fastest, as a vector. `knob_settings(space, global_batch)`: only the microbatch sizes that divide
/// the global batch (the settings a search can run). `knob_settings(microbatches, recompute,
/// sequence_parallel)`: the same over three lists (`phaze plan`'s choices, place::plan_choices). Every
/// planner enumerates its knob settings here, in this order.
struct knob_settings_fn {
  [[nodiscard]] std::vector<knob_setting> operator()(const knob_space& space) const {
    return settings(space.microbatches, space.recompute, space.sequence_parallel,
                    [](std::int64_t) { return true; });
  }
  [[nodiscard]] std::vector<knob_setting> operator()(const knob_space& space,
                                                     std::int64_t global_batch) const {
    return settings(space.microbatches, space.recompute, space.sequence_parallel,
                    [global_batch](std::int64_t mb) { return mb > 0 && global_batch % mb == 0; });
  }
  [[nodiscard]] std::vector<knob_setting> operator()(const std::vector<std::int64_t>& microbatches,
                                                     const std::vector<model::recompute>& recompute,
                                                     const std::vector<bool>& sequence_parallel) const {
    return settings(microbatches, recompute, sequence_parallel, [](std::int64_t) { return true; });
  }

 private:
  template <class Microbatches, class Recompute, class Parallel, class Keep>
  static std::vector<knob_setting> settings(const Microbatches& microbatches, const Recompute& recompute,
                                            const Parallel& sequence_parallel, Keep keep_microbatch) {
    // cartesian_product varies its last range fastest: the order of the nested loops it replaces.
    return ranges::views::cartesian_product(microbatches | ranges::views::filter(keep_microbatch), recompute,
                                            sequence_parallel) |
           ranges::views::transform([](const auto& point) {
             const auto& [microbatch, mode, parallel] = point;
             return knob_setting{microbatch, mode, static_cast<bool>(parallel)};
           }) |
           ranges::to<std::vector>();
  }
};
inline constexpr knob_settings_fn knob_settings{};

}  // namespace phaze::train
