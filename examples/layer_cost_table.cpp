// The cost of every op of a GPT-3 175B block on PHAZE's TPUv4-like accelerator, computed at compile time
// for one sequence of 2048 tokens at tensor-parallel widths 1 and 8, checked by the compiler against the
// hardware's physical limits, and printed at run time.
#include <phaze/cluster/presets.hpp>
#include <phaze/cost/op_cost.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>

#include <cstdio>
#include <string_view>

namespace model = phaze::model;
namespace cost = phaze::cost;
namespace hw = phaze::hw;
namespace cluster = phaze::cluster;

// [docs-example]
constexpr auto gpt3 = phaze::zoo::find("gpt3-175b") -> config;
constexpr hw::device tpu = hw::tpuv4_like;

constexpr model::layer block_tp1 = model::block_layer(gpt3, {.microbatch = 1, .tp = 1});
constexpr model::layer block_tp8 = model::block_layer(gpt3, {.microbatch = 1, .tp = 8});
// Tensor-parallel collectives run over the TPU v4 host's links (4 chips per host, ICI between hosts).
constexpr cost::layer_cost_table costs_tp1 =
    cost::layer_costs(block_tp1, tpu, cluster::tensor_parallel_route(cluster::reference_node, 1));
constexpr cost::layer_cost_table costs_tp8 =
    cost::layer_costs(block_tp8, tpu, cluster::tensor_parallel_route(cluster::reference_node, 8));
// [docs-example]

/// No op runs faster than the device's peak rate for its unit or than HBM can feed it.
constexpr bool within_physical_limits(const model::layer& l, const cost::layer_cost_table& t) {
  auto check = [](const model::op& o, const cost::op_cost& c) {
    const auto u = model::unit_of(o);
    if (u != model::unit::tensor && u != model::unit::vector) return c.all_cores <= c.one_core;
    const auto peak = u == model::unit::tensor ? hw::peak_matrix_flops(tpu) : hw::peak_vector_flops(tpu);
    return c.all_cores >= model::flops_of(o) / peak &&
           c.all_cores >= (model::bytes_read(o) + model::bytes_written(o)) / tpu.hbm_bandwidth &&
           c.all_cores <= c.one_core;
  };
  for (std::size_t i = 0; i < l.ops.size(); ++i)
    if (!check(l.ops[i], t.forward[i])) return false;
  const auto bwd = model::backward(l);
  for (std::size_t i = 0; i < bwd.size(); ++i)
    if (!check(bwd[i], t.backward[i])) return false;
  return true;
}

/// Sum of the all-cores times of the GEMMs of a pass.
template <class Ops, class Costs>
constexpr double gemm_seconds(const Ops& ops, const Costs& costs) {
  double total = 0.0;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (model::unit_of(ops[i]) == model::unit::tensor) total += costs[i].all_cores.value();
  return total;
}

constexpr double backward_over_forward(const model::layer& l, const cost::layer_cost_table& t) {
  return gemm_seconds(model::backward(l), t.backward) / gemm_seconds(l.ops, t.forward);
}

/// The index of the op with this name.
constexpr std::size_t index_of(const model::layer& l, std::string_view name) {
  for (std::size_t i = 0; i < l.ops.size(); ++i)
    if (l.ops[i].name.view() == name) return i;
  return l.ops.size();
}

/// Share of the matrix peak an op reaches on all cores.
constexpr double peak_share(const model::op& o, const cost::op_cost& c) {
  return model::flops_of(o) / c.all_cores / hw::peak_matrix_flops(tpu);
}

static_assert(within_physical_limits(block_tp1, costs_tp1));
static_assert(within_physical_limits(block_tp8, costs_tp8));
// The QKV projection divides across the 8 tensor cores: faster than on one, and above half of peak.
constexpr std::size_t qkv = index_of(block_tp1, "qkv");
static_assert(costs_tp1.forward[qkv].all_cores <= costs_tp1.forward[qkv].one_core);
static_assert(peak_share(block_tp1.ops[qkv], costs_tp1.forward[qkv]) > 0.5);
// The backward pass does twice the forward's matrix FLOPs (dX and dW); its GEMMs take about twice as long.
static_assert(backward_over_forward(block_tp1, costs_tp1) > 1.8 &&
              backward_over_forward(block_tp1, costs_tp1) < 2.2);
static_assert(backward_over_forward(block_tp8, costs_tp8) > 1.8 &&
              backward_over_forward(block_tp8, costs_tp8) < 2.4);
// Tensor parallelism over 8 devices cuts the block's serial time by more than 4x (collectives included).
static_assert(costs_tp1.total() > costs_tp8.total() * 4.0);

namespace {

void print_row(const model::op& o, const cost::op_cost& c) {
  const bool tensor = model::unit_of(o) == model::unit::tensor;
  const std::string_view name = o.name.view(), pass = model::to_string(o.phase),
                         unit = model::to_string(model::unit_of(o));
  std::printf("  %-20.*s %-15.*s %-7.*s %10.2f %12.1f %12.1f", static_cast<int>(name.size()), name.data(),
              static_cast<int>(pass.size()), pass.data(), static_cast<int>(unit.size()), unit.data(),
              phaze::in_gflops(model::flops_of(o)), phaze::in_us(c.one_core), phaze::in_us(c.all_cores));
  if (tensor) std::printf("  %5.1f%%", 100.0 * peak_share(o, c));
  std::printf("\n");
}

void print_table(const char* title, const model::layer& l, const cost::layer_cost_table& t) {
  std::printf("%s\n  %-20s %-15s %-7s %10s %12s %12s  %s\n", title, "op", "pass", "unit", "GFLOP",
              "1 core (us)", "all (us)", "of peak");
  for (std::size_t i = 0; i < l.ops.size(); ++i) print_row(l.ops[i], t.forward[i]);
  const auto bwd = model::backward(l);
  for (std::size_t i = 0; i < bwd.size(); ++i) print_row(bwd[i], t.backward[i]);
  std::printf(
      "  forward %.3f ms, backward %.3f ms (all-cores costs one after another); backward/forward GEMM "
      "time %.2f\n\n",
      phaze::in_ms(t.forward_total), phaze::in_ms(t.backward_total), backward_over_forward(l, t));
}

}  // namespace

int main() {
  const std::string_view device = tpu.name.view();
  std::printf("GPT-3 175B block, 1 x 2048 tokens, on %.*s (%.1f TFLOP/s matrix peak, %.0f GB/s HBM)\n\n",
              static_cast<int>(device.size()), device.data(),
              phaze::in_tflop_per_s(hw::peak_matrix_flops(tpu)), phaze::in_gb_per_s(tpu.hbm_bandwidth));
  print_table("tensor-parallel width 1", block_tp1, costs_tp1);
  print_table("tensor-parallel width 8 (per rank)", block_tp8, costs_tp8);
  return 0;
}
