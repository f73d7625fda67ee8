/// @file
/// What a placement policy and a placer are (`PlacementPolicy`, `Placer`, beside `CostTable` of
/// place/cost_table.hpp), what a caller asks of a placer (`placement_request`), and the sentences a compiler
/// prints when a type misses a requirement (`explain_placement_policy`, `explain_placer`): one message that
/// names the missing member and how to add it, at the call that used the type.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "phaze/place/cost_table.hpp"

namespace phaze::place {

struct stage_load;
struct stage_context;
struct plan;
struct pipeline_policy;

/// What a caller asks of a placer besides the problem and the policy: the choices it fixes (tp, pp, dp), the
/// deepest pipeline, whether every device must be used, and a cutoff (only plans faster than `cutoff_s` are
/// of interest: a search's incumbent; when none is, the placer returns an infeasible plan with above_cutoff).
struct placement_request {
  int tp = 0;  ///< 0: free
  int pp = 0;
  int dp = 0;
  int max_pp = 0;                ///< deepest pipeline tried (0: the node count)
  bool use_all_devices = false;  ///< only tp * pp * dp == devices, as Megatron-LM runs them
  double cutoff_s = std::numeric_limits<double>::infinity();
  /// When no plan fits, search the smallest memory per device any candidate needs (what the callers' messages
  /// quote). Off, a placer may return above_cutoff at once instead, as when nothing beats a cutoff: a caller
  /// that only needs the need when nothing fits anywhere asks again.
  bool memory_need = true;
};

namespace detail::concepts {
template <class P>
concept says_whether_allreduce_counts = requires {
  { P::allreduce_of_largest_stage } -> std::convertible_to<bool>;
};
template <class P, class Node>
concept has_work = requires(const P& p, const placement_settings& s, const Node& n) {
  { p.work_s(s, n) } -> std::convertible_to<double>;
};
template <class P>
concept has_stage_time = requires(const P& p, const placement_settings& s, const stage_load& l,
                                  const stage_context& c) {
  { p.stage_time_s(s, l, c) } -> std::convertible_to<double>;
};
template <class P>
concept has_stage_cost = requires(const P& p, const placement_settings& s, const stage_load& l,
                                  const stage_context& c) {
  { p.stage_cost_s(s, l, c) } -> std::convertible_to<double>;
};
template <class P>
concept has_allreduce = requires(const P& p, const placement_settings& s, double bytes,
                                 const stage_context& c) {
  { p.allreduce_s(s, bytes, c) } -> std::convertible_to<double>;
};
template <class P>
concept has_batch_time = requires(const P& p, const placement_settings& s, double cost, double bytes,
                                  const stage_context& c) {
  { p.batch_time_s(s, cost, bytes, c) } -> std::convertible_to<double>;
};
template <class P>
concept has_stage_memory = requires(const P& p, const placement_settings& s, const stage_load& l, int stage,
                                    const stage_context& c) {
  { p.stage_memory(s, l, stage, c) } -> std::convertible_to<double>;
};
template <class P>
concept has_in_flight = requires(const P& p, const placement_settings& s, int stage, const stage_context& c) {
  { p.microbatches_in_flight(s, stage, c) } -> std::convertible_to<double>;
};
template <class P>
concept has_pipeline = requires(const P& p, const placement_settings& s, const stage_context& c) {
  { p.pipeline_s(s, 0.0, 0.0, c) } -> std::convertible_to<double>;
};
template <class P>
concept has_cut = requires(const P& p, const placement_settings& s, const stage_context& c) {
  { p.cut_s(s, 0.0, c) } -> std::convertible_to<double>;
};
template <class P>
concept has_stage_table = requires(const P& p, std::size_t ti, int stage, const stage_context& c) {
  { p.stage_table(ti, stage, c) } -> std::convertible_to<std::size_t>;
};
template <class P>
concept has_stage_capacity = requires(const P& p, const placement_settings& s, int stage,
                                      const stage_context& c) {
  { p.stage_capacity(s, stage, c) } -> std::convertible_to<double>;
};
template <class P>
concept has_configures = requires(const P& p, std::size_t ti) {
  { p.configures(ti) } -> std::convertible_to<bool>;
};
}  // namespace detail::concepts

/// What a placement policy prices beyond PlacementPolicy's members, each with members of its own. A policy
/// declares it with `static constexpr policy_capabilities capabilities{...}`; the placers use those members
/// only where it is declared, and explain_placement_policy stops compilation when a declared member is
/// missing or a member is present but not declared, so a misspelt or forgotten member cannot silently give
/// the answer of a policy without it.
struct policy_capabilities {
  /// `pipeline_s(settings, slowest_stage_s, stage_time_sum_s, context)`: the pipeline is not set by the
  /// slowest stage alone (UnevenPipelinePolicy).
  bool uneven_pipeline = false;
  /// `cut_s(settings, cut_bytes, context)`: what one pipeline cut adds to the stages beside it, priced by its
  /// bytes (CutPricingPolicy; needs uneven_pipeline).
  bool prices_cuts = false;
  /// `stage_table(ti, stage, context)`, `stage_capacity(settings, stage, context)` and `configures(ti)`: each
  /// stage costed on its own devices' table and memory, on a cluster of several device types
  /// (MixedDevicePolicy).
  bool mixed_devices = false;
};

/// The policy capabilities `P` declares; none when it declares none.
template <class P>
constexpr policy_capabilities policy_capabilities_of() {
  if constexpr (requires {
                  { P::capabilities } -> std::convertible_to<policy_capabilities>;
                }) {
    return P::capabilities;
  } else {
    return {};
  }
}

/// A placement policy whose pipeline is not set by the slowest stage alone: it declares
/// policy_capabilities::uneven_pipeline and has `pipeline_s` (place/objective.hpp says what it must satisfy).
template <class P>
concept UnevenPipelinePolicy = policy_capabilities_of<P>()
.uneven_pipeline&& detail::concepts::has_pipeline<P>;

/// An UnevenPipelinePolicy that prices each cut by its bytes: it declares policy_capabilities::prices_cuts
/// and has `cut_s`.
template <class P>
concept CutPricingPolicy = UnevenPipelinePolicy<P> && policy_capabilities_of<P>()
.prices_cuts&& detail::concepts::has_cut<P>;

/// A placement policy for clusters of several device types: it declares policy_capabilities::mixed_devices
/// and has `stage_table`, `stage_capacity` and `configures` (place/objective.hpp: stage_table_of).
template <class P>
concept MixedDevicePolicy = policy_capabilities_of<P>()
.mixed_devices&& detail::concepts::has_stage_table<P>&& detail::concepts::has_stage_capacity<P>&&
    detail::concepts::has_configures<P>;

/// A placement policy: how a stage's load becomes its time, cost and memory, and how stage costs and the
/// largest stage's parameters become the time per batch (docs/layer-table.md, place/objective.hpp). Members:
/// `allreduce_of_largest_stage` (static bool), `work_s(settings, node)`, `stage_time_s(settings, load,
/// context)`, `stage_cost_s(settings, load, context)`, `allreduce_s(settings, parameter_bytes, context)`,
/// `batch_time_s(settings, largest_cost, largest_parameter_bytes, context)`, `stage_memory(settings, load,
/// stage, context)` and `microbatches_in_flight(settings, stage, context)`. Stage cost and memory must not
/// decrease when a stage gains nodes and must be linear in the load (the placers prune and bound on it).
/// pipeline_policy, bottleneck_policy and step_policy are ones.
template <class P, class Node = cost_node>
concept PlacementPolicy = std::copy_constructible<P> && detail::concepts::says_whether_allreduce_counts<P> &&
    detail::concepts::has_work<P, Node> && detail::concepts::has_stage_time<P> &&
    detail::concepts::has_stage_cost<P> && detail::concepts::has_allreduce<P> &&
    detail::concepts::has_batch_time<P> && detail::concepts::has_stage_memory<P> &&
    detail::concepts::has_in_flight<P>;

/// Stops compilation with one sentence when what policy `P` declares (policy_capabilities) and the members it
/// has disagree: a declared capability whose member is missing, or a member of a capability not declared.
template <class P>
consteval void explain_policy_capabilities() {
  using namespace detail::concepts;
  constexpr policy_capabilities declared = policy_capabilities_of<P>();
  if constexpr (declared.uneven_pipeline && !has_pipeline<P>) {
    static_assert(
        has_pipeline<P>,
        "phaze::place::PlacementPolicy: the policy declares policy_capabilities::uneven_pipeline but "
        "'pipeline_s(settings, slowest_stage_s, stage_time_sum_s, context)' is missing; add `double "
        "pipeline_s(const placement_settings&, double, double, const stage_context&) const`");
  } else if constexpr (!declared.uneven_pipeline && has_pipeline<P>) {
    static_assert(declared.uneven_pipeline,
                  "phaze::place::PlacementPolicy: the policy has 'pipeline_s' but does not declare it; add "
                  "`static constexpr policy_capabilities capabilities{.uneven_pipeline = true};`");
  } else if constexpr (declared.prices_cuts && !(has_cut<P> && declared.uneven_pipeline)) {
    static_assert(has_cut<P> && declared.uneven_pipeline,
                  "phaze::place::PlacementPolicy: the policy declares policy_capabilities::prices_cuts but "
                  "'cut_s(settings, cut_bytes, context)' is missing or uneven_pipeline is not declared; add "
                  "`double cut_s(const placement_settings&, double, const stage_context&) const` and both");
  } else if constexpr (!declared.prices_cuts && has_cut<P>) {
    static_assert(declared.prices_cuts,
                  "phaze::place::PlacementPolicy: the policy has 'cut_s' but does not declare it; add "
                  "`.prices_cuts = true` (with `.uneven_pipeline = true`) to its policy_capabilities");
  } else if constexpr (declared.mixed_devices &&
                       !(has_stage_table<P> && has_stage_capacity<P> && has_configures<P>)) {
    static_assert(has_stage_table<P> && has_stage_capacity<P> && has_configures<P>,
                  "phaze::place::PlacementPolicy: the policy declares policy_capabilities::mixed_devices but "
                  "one of 'stage_table(ti, stage, context)', 'stage_capacity(settings, stage, context)' and "
                  "'configures(ti)' is missing; add all three (place::step_policy has them)");
  } else if constexpr (!declared.mixed_devices &&
                       (has_stage_table<P> || has_stage_capacity<P> || has_configures<P>)) {
    static_assert(declared.mixed_devices,
                  "phaze::place::PlacementPolicy: the policy has 'stage_table', 'stage_capacity' or "
                  "'configures' but does not declare them; add `.mixed_devices = true` to its "
                  "policy_capabilities, with all three members");
  }
}

/// Stops compilation with one sentence naming the first requirement of PlacementPolicy that `P` misses, or a
/// disagreement between the policy_capabilities it declares and its members; true when it meets them all.
/// The placers call it when they are made with a policy.
template <class P, class Node = cost_node>
consteval bool explain_placement_policy() {
  using namespace detail::concepts;
  if constexpr (!std::copy_constructible<P>) {
    static_assert(std::copy_constructible<P>,
                  "phaze::place::PlacementPolicy: the policy must be copyable (every placer keeps a copy)");
  } else if constexpr (!says_whether_allreduce_counts<P>) {
    static_assert(
        says_whether_allreduce_counts<P>,
        "phaze::place::PlacementPolicy: 'allreduce_of_largest_stage' is missing; add `static constexpr "
        "bool allreduce_of_largest_stage = true;` when batch_time_s adds the largest stage's all-reduce");
  } else if constexpr (!has_work<P, Node>) {
    static_assert(
        has_work<P, Node>,
        "phaze::place::PlacementPolicy: 'work_s(settings, node)' is missing; add `template <class Node> "
        "double work_s(const placement_settings&, const Node&) const` (one microbatch of one node)");
  } else if constexpr (!has_stage_time<P>) {
    static_assert(
        has_stage_time<P>,
        "phaze::place::PlacementPolicy: 'stage_time_s(settings, load, context)' is missing; add `double "
        "stage_time_s(const placement_settings&, const stage_load&, const stage_context&) const`");
  } else if constexpr (!has_stage_cost<P>) {
    static_assert(
        has_stage_cost<P>,
        "phaze::place::PlacementPolicy: 'stage_cost_s(settings, load, context)' is missing; add `double "
        "stage_cost_s(const placement_settings&, const stage_load&, const stage_context&) const`");
  } else if constexpr (!has_allreduce<P>) {
    static_assert(
        has_allreduce<P>,
        "phaze::place::PlacementPolicy: 'allreduce_s(settings, parameter_bytes, context)' is missing; "
        "add `double allreduce_s(const placement_settings&, double, const stage_context&) const`");
  } else if constexpr (!has_batch_time<P>) {
    static_assert(
        has_batch_time<P>,
        "phaze::place::PlacementPolicy: 'batch_time_s(settings, largest_cost, largest_parameter_bytes, "
        "context)' is missing; add `double batch_time_s(const placement_settings&, double, double, const "
        "stage_context&) const`");
  } else if constexpr (!has_stage_memory<P>) {
    static_assert(
        has_stage_memory<P>,
        "phaze::place::PlacementPolicy: 'stage_memory(settings, load, stage, context)' is missing; add "
        "`double stage_memory(const placement_settings&, const stage_load&, int, const stage_context&) "
        "const` (bytes per device)");
  } else if constexpr (!has_in_flight<P>) {
    static_assert(
        has_in_flight<P>,
        "phaze::place::PlacementPolicy: 'microbatches_in_flight(settings, stage, context)' is missing; add "
        "`double microbatches_in_flight(const placement_settings&, int, const stage_context&) const`");
  } else {
    explain_policy_capabilities<P>();
  }
  return PlacementPolicy<P, Node>;
}

/// What a placer prices beyond a chain of one device type whose cuts all carry the same bytes. A placer says
/// so with `static constexpr placer_capabilities capabilities{...}`; one that does not is taken to price
/// neither, and the callers that need a capability refuse it by name (place::place_model).
struct placer_capabilities {
  bool cuts_by_size = false;   ///< prices every pipeline cut with its own bytes (a composite model's differ)
  bool mixed_devices = false;  ///< costs each stage on its own devices' table and memory (several types)
};

/// A placer that declares its capabilities (placer_capabilities).
template <class P>
concept DeclaresCapabilities = requires {
  { P::capabilities } -> std::convertible_to<placer_capabilities>;
};

/// The capabilities `P` declares; none when it declares none.
template <class P>
constexpr placer_capabilities capabilities_of() {
  if constexpr (DeclaresCapabilities<P>) {
    return P::capabilities;
  } else {
    return {};
  }
}

namespace detail::concepts {
template <class P>
concept names_itself = requires(const P& p) {
  { p.name() } -> std::convertible_to<std::string_view>;
};
template <class P, class Table, class Policy>
concept places = requires(const P& p, const placement_problem<Table>& problem, const Policy& policy,
                          const placement_request& r) {
  { p.place(problem, policy, r) } -> std::same_as<plan>;
};
}  // namespace detail::concepts

/// A placer: a copyable value with `name()` and `place(problem, policy, request) -> plan`, the best plan of a
/// placement problem under a policy that honours the request (fixed degrees, cutoff), or an infeasible plan
/// saying why none fits. chain_placer, downset_placer, brute_force_placer and uniform_placer are ones;
/// search::options and `phaze plan` take any (examples/custom_placer.cpp writes one).
template <class P, class Table = cost_table, class Policy = pipeline_policy>
concept Placer = std::copy_constructible<P> && detail::concepts::names_itself<P> &&
    detail::concepts::places<P, Table, Policy>;

/// Stops compilation with one sentence naming the first requirement of Placer that `P` misses (for tables of
/// `Table` under `Policy`); true when it meets them all.
template <class P, class Table = cost_table, class Policy = pipeline_policy>
consteval bool explain_placer() {
  using namespace detail::concepts;
  if constexpr (!std::copy_constructible<P>) {
    static_assert(std::copy_constructible<P>, "phaze::place::Placer: the placer must be copyable");
  } else if constexpr (!names_itself<P>) {
    static_assert(
        names_itself<P>,
        "phaze::place::Placer: 'p.name()' is missing; add `std::string_view name() const` returning a "
        "short name such as \"greedy\"");
  } else if constexpr (!places<P, Table, Policy>) {
    static_assert(
        places<P, Table, Policy>,
        "phaze::place::Placer: 'p.place(problem, policy, request)' returning place::plan is missing for "
        "this table and policy; add `template <CostTable T, PlacementPolicy P> plan place(const "
        "placement_problem<T>&, const P&, const placement_request&) const`");
  }
  return Placer<P, Table, Policy>;
}

}  // namespace phaze::place
