/// @file
/// Layer cost tables and placements the compiler computes: for a model and a datasheet device known at
/// compile time, `constant_table` builds a layer cost table as a constant expression (fixed storage, so it
/// can be kept in a `constexpr` variable), and `constant_placement` places the model on such tables with the
/// chain DP at compile time under the training-step objective (place::step_policy), as `phaze plan` and
/// place::place_model do at run time. On a datasheet device (a GPU) the layer schedule is the ops one after
/// another, so a layer's time is the sum of its ops' costs (cost::layer_costs), which is what the schedulers
/// find there; the systolic template needs a layer schedule (sched/, not constexpr): use place::model_tables
/// for it.
///
///     constexpr auto table = place::constant_table<16>(zoo::gpt2(), a100, dgx, knobs, 2);
///     constexpr auto plan = place::constant_placement<16, 4>(zoo::gpt2(), a100, dgx, 8, knobs, {1, 2, 4});
///     static_assert(plan.feasible && plan.devices_used() == 8);
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/links.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/core/static_vector.hpp"
#include "phaze/cost/op_cost.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/place/chain_dp.hpp"
#include "phaze/place/cost_table.hpp"
#include "phaze/place/objective.hpp"
#include "phaze/place/step_policy.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"

namespace phaze::place {

/// A layer cost table of at most `MaxNodes` nodes in fixed storage: a CostTable the compiler can build and
/// keep.
template <std::size_t MaxNodes>
struct fixed_cost_table {
  struct node {
    seconds forward{};
    seconds backward{};
    seconds recompute{};
    bytes parameters{};
    bytes activations{};
    friend constexpr bool operator==(const node&, const node&) = default;
  };
  struct edge {
    std::size_t from = 0;
    std::size_t to = 0;
    bytes boundary{};
    friend constexpr bool operator==(const edge&, const edge&) = default;
  };
  int tp = 1;
  static_vector<node, MaxNodes> nodes;
  static_vector<edge, MaxNodes> edges;
  friend constexpr bool operator==(const fixed_cost_table&, const fixed_cost_table&) = default;
};

namespace rules {
[[noreturn]] inline void constant_tables_need_a_datasheet_device() {
  throw input_error(
      "constant_table: a systolic design's layer times come from a layer schedule; build its tables at run "
      "time with place::model_tables");
}
[[noreturn]] inline void constant_tables_leave_out_tensor_parallel_overlap() {
  throw input_error(
      "constant_table: Transformer Engine's tensor-parallel overlap (`tp_comm_overlap`) is priced at run "
      "time only; build the tables with place::model_tables, or leave it off");
}
[[noreturn]] inline void constant_table_needs_more_nodes() {
  throw input_error(
      "constant_table: the model has more layer nodes than the table's capacity; raise MaxNodes");
}
}  // namespace rules

namespace detail {
/// The serial time of a pass (a GPU runs one kernel at a time) and of the part selective recomputation runs
/// again (the selected submodules' forward ops), each at least its ops times the host's time per op
/// (cost::host_bound).
struct serial_times {
  seconds forward{};
  seconds backward{};
  seconds recomputed{};
};

constexpr serial_times serial_times_of(const model::layer& l, const hw::device& d, const cluster::route& tp) {
  const auto costs = cost::layer_costs(l, d, tp);
  serial_times t{costs.forward_total, costs.backward_total, {}};
  seconds regather{0.0};
  std::size_t recomputed_ops = 0;
  for (std::size_t i = 0; i < l.ops.size(); ++i) {
    // What selective recomputation runs again: the submodules the shape names (the attention core by
    // default), or what torchtitan's per-op policy does not keep (model::recomputed_share).
    if (const double share = model::recomputed_share(l, l.ops[i]); share > 0.0) {
      t.recomputed += costs.forward[i].all_cores * share;
      ++recomputed_ops;
    }
    // Sequence parallelism gathers each column-parallel GEMM's input again for its weight gradient
    // (train::detail::sequence_parallel_regather).
    if (l.shape.sequence_parallel && l.shape.tp > 1 && l.ops[i].kind == model::op_kind::all_gather)
      regather += costs.forward[i].all_cores;
  }
  // As train::time_layer and the step model: the host bound on the layer's own ops, the gathers after.
  const double host = l.shape.host_per_op;
  t.forward = cost::host_bound(t.forward, costs.forward.size(), host);
  t.backward = cost::host_bound(t.backward, costs.backward.size(), host) + regather;
  if (recomputed_ops > 0) t.recomputed = cost::host_bound(t.recomputed, recomputed_ops, host);
  return t;
}
}  // namespace detail

/// The layer cost table of model `m` at tensor-parallel width `tp` on datasheet device `d` whose tensor-
/// parallel groups talk over `route`, with knobs `k` (microbatch, sequence, precision, recomputation,
/// sequence parallelism): the nodes and edges place::model_tables builds (one per layer node and cut), as a
/// constant expression.
template <std::size_t MaxNodes>
constexpr fixed_cost_table<MaxNodes> constant_table_on(const model::model& m, const hw::device& d,
                                                       const cluster::route& route,
                                                       const train::training_knobs& k, int tp) {
  if (d.kind != hw::device_kind::datasheet) rules::constant_tables_need_a_datasheet_device();
  if (k.tp_comm_overlap && k.sequence_parallel && tp > 1)
    rules::constant_tables_leave_out_tensor_parallel_overlap();
  const model::model run = k.sequence > 0 ? model::with_sequence(m, k.sequence) : m;
  if (run.size() > MaxNodes) rules::constant_table_needs_more_nodes();
  const auto built =
      train::detail::build_layers(run, train::layer_shape_of(run, train::parallelism{tp, 1, 1}, k));
  const double weight_bytes = static_cast<double>(train::activation_element_bytes(k.precision));
  using table = fixed_cost_table<MaxNodes>;
  // Each distinct layer timed once; each node holds what place::model_tables gives it.
  std::vector<detail::serial_times> times;
  for (const auto& l : built.kinds) times.push_back(detail::serial_times_of(l, d, route));
  table out;
  out.tp = tp;
  for (std::size_t v = 0; v < run.size(); ++v) {
    const detail::serial_times& t = times[run.nodes[v]];
    typename table::node n;
    n.forward = t.forward;
    n.backward = t.backward;
    if (run.role_at(v) == model::layer_role::block) {
      n.recompute = k.recompute == model::recompute::full        ? t.forward
                    : k.recompute == model::recompute::selective ? t.recomputed
                                                                 : seconds{0.0};
    }
    const train::node_range alone{v, v + 1};
    n.parameters =
        bytes{static_cast<double>(train::detail::stage_parameters(run, built, alone)) * weight_bytes};
    n.activations = train::detail::stage_activations_per_microbatch(run, built, alone, k.recompute);
    out.nodes.push_back(n);
  }
  for (std::size_t v = 0; v + 1 < run.size(); ++v)
    out.edges.push_back({v, v + 1, model::boundary_bytes(built.at(run, v))});
  return out;
}

/// constant_table_on with the route of aligned tensor-parallel groups on devices in nodes of `node`
/// (cluster::tensor_parallel_route: inside a node, or over whole nodes where the node size divides tp).
template <std::size_t MaxNodes>
constexpr fixed_cost_table<MaxNodes> constant_table(const model::model& m, const hw::device& d,
                                                    const cluster::node_spec& node,
                                                    const train::training_knobs& k, int tp) {
  return constant_table_on<MaxNodes>(m, d, cluster::tensor_parallel_route(node, tp), k, tp);
}

/// The settings of a model's placement problem, for place::model_tables and constant tables alike: `devices`
/// devices of `d` in nodes of `node`, the knobs' microbatches, precision, optimizer, schedule and
/// recomputation, and the scalar links of the generic pipeline_policy (one network interface share;
/// step_policy takes its routes from the cluster instead).
constexpr placement_settings model_settings(const hw::device& d, const cluster::node_spec& node, int devices,
                                            const train::training_knobs& k) {
  placement_settings s;
  s.devices = devices;
  s.memory_per_device = train::usable_memory(d, k);
  s.microbatches = k.global_batch / (k.microbatch > 0 ? k.microbatch : 1);
  s.weight_bytes_per_parameter = static_cast<double>(train::activation_element_bytes(k.precision));
  s.state_bytes_per_parameter = train::state_bytes_of(k).total();
  s.p2p_bandwidth = node.network_share(1);
  s.dp_bandwidth = s.p2p_bandwidth;
  s.schedule = k.schedule;
  s.recompute = k.recompute != model::recompute::none;
  return s;
}

/// A plan in fixed storage: what a compile-time placement returns (place::plan holds vectors, which cannot
/// outlive constant evaluation).
template <std::size_t MaxStages>
struct fixed_plan {
  bool feasible = false;
  int tp = 0;
  int pp = 0;
  int dp = 0;
  seconds time_per_batch{};
  bytes peak_memory{};
  static_vector<std::size_t, MaxStages> first_node;  ///< each stage's first node; stages are contiguous
  [[nodiscard]] constexpr int devices_used() const { return tp * pp * dp; }
  friend constexpr bool operator==(const fixed_plan&, const fixed_plan&) = default;
};

/// The fixed form of a plan on a chain.
template <std::size_t MaxStages>
constexpr fixed_plan<MaxStages> fixed_plan_of(const plan& p) {
  fixed_plan<MaxStages> out;
  out.feasible = p.feasible;
  if (!p.feasible) return out;
  out.tp = p.tp;
  out.pp = p.pp;
  out.dp = p.dp;
  out.time_per_batch = p.time_per_batch;
  out.peak_memory = p.peak_memory;
  for (const auto& st : p.stages) out.first_node.push_back(st.nodes.front());
  return out;
}

/// The chain DP's placement of model `m` on `devices` datasheet devices `d` in nodes of `node`, over the
/// tensor-parallel widths `widths`, under the training-step objective (place::step_policy) with every device
/// used, as place::place_model places it at run time on the same cluster (cluster::homogeneous): computed by
/// the compiler when the arguments are constants, and equal to the run-time plan's time and memory to
/// rounding (tests/place/constant_tables_test.cpp). The interleaved schedule is placed uniformly, not here.
template <std::size_t MaxNodes, std::size_t MaxStages, std::size_t Widths>
constexpr fixed_plan<MaxStages> constant_placement(const model::model& m, const hw::device& d,
                                                   const cluster::node_spec& node, int devices,
                                                   const train::training_knobs& k,
                                                   const std::array<int, Widths>& widths) {
  if (k.schedule == train::pipeline_schedule::interleaved) rules::uneven_stages_need_1f1b_or_gpipe();
  placement_problem<fixed_cost_table<MaxNodes>> problem;
  static_cast<placement_settings&>(problem) = model_settings(d, node, devices, k);
  step_policy policy;
  policy.model = train::step_model{cluster::homogeneous(d, devices, node), k};
  const model::model run = k.sequence > 0 ? model::with_sequence(m, k.sequence) : m;
  for (const int tp : widths) {
    // The tensor-parallel route of the cluster's own rings, as model_tables takes it (a width that neither
    // fits nor tiles a node crosses nodes with several members in some).
    const auto& table = problem.tables.emplace_back(
        constant_table_on<MaxNodes>(m, d, policy.model.tensor_parallel_route(tp), k, tp));
    const auto built =
        train::detail::build_layers(run, train::layer_shape_of(run, train::parallelism{tp, 1, 1}, k));
    policy.widths.push_back(width_terms_of(run, built, k, tp));
    double work = 0.0;
    for (const auto& n : table.nodes) work += (n.forward + n.backward + n.recompute).value();
    policy.model_s.push_back(work);
  }
  return fixed_plan_of<MaxStages>(chain_dp(problem, policy).with(model_request(m, k)).run());
}

}  // namespace phaze::place
