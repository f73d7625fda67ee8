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

/// `knob_settings(space)`: every (microbatch, recomputation, sequence parallelism) of `space`, the last
/// varying fastest, as a vector. `knob_settings(space, global_batch)`: only the microbatch sizes that divide
/// the global batch (the settings a search can run).
struct knob_settings_fn {
  [[nodiscard]] std::vector<knob_setting> operator()(const knob_space& space) const {
    return settings(space, [](std::int64_t) { return true; });
  }
  [[nodiscard]] std::vector<knob_setting> operator()(const knob_space& space,
                                                     std::int64_t global_batch) const {
    return settings(space, [global_batch](std::int64_t mb) { return mb > 0 && global_batch % mb == 0; });
  }

 private:
  template <class Keep>
  static std::vector<knob_setting> settings(const knob_space& space, Keep keep_microbatch) {
    // cartesian_product varies its last range fastest: the order of the nested loops it replaces.
    return ranges::views::cartesian_product(space.microbatches | ranges::views::filter(keep_microbatch),
                                            space.recompute, space.sequence_parallel) |
           ranges::views::transform([](const auto& point) {
             const auto& [microbatch, recompute, sequence_parallel] = point;
             return knob_setting{microbatch, recompute, sequence_parallel};
           }) |
           ranges::to<std::vector>();
  }
};
inline constexpr knob_settings_fn knob_settings{};

}  // namespace phaze::train
