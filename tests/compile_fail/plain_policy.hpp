// Every member PlacementPolicy requires, for the compile-fail snippets that test what a policy adds to
// them: derive from plain_policy and add (or misspell) the rest.
#pragma once

#include <phaze/place/objective.hpp>

struct plain_policy {
  static constexpr bool allreduce_of_largest_stage = false;
  template <class Node>
  double work_s(const phaze::place::placement_settings&, const Node& n) const {
    return n.forward.value() + n.backward.value();
  }
  double stage_time_s(const phaze::place::placement_settings&, const phaze::place::stage_load& l,
                      const phaze::place::stage_context&) const {
    return l.work_s;
  }
  double stage_cost_s(const phaze::place::placement_settings&, const phaze::place::stage_load& l,
                      const phaze::place::stage_context&) const {
    return l.work_s;
  }
  double allreduce_s(const phaze::place::placement_settings&, double,
                     const phaze::place::stage_context&) const {
    return 0.0;
  }
  double batch_time_s(const phaze::place::placement_settings&, double cost, double,
                      const phaze::place::stage_context&) const {
    return cost;
  }
  double stage_memory(const phaze::place::placement_settings&, const phaze::place::stage_load& l, int,
                      const phaze::place::stage_context&) const {
    return l.parameter_bytes;
  }
  double microbatches_in_flight(const phaze::place::placement_settings&, int,
                                const phaze::place::stage_context&) const {
    return 1.0;
  }
};
