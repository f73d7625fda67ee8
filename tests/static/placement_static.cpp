// Compile-time layer cost tables and placement (place/constant_tables.hpp): the compiler builds GPT-2's
// tables on A100s and V100s and places it with the chain DP under the training-step objective, as
// `phaze plan` does at run time (tests/place/constant_tables_test.cpp holds the two equal). Compiling this
// file is the test.
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/constant_tables.hpp>

namespace {
using namespace phaze;

constexpr hw::device a100 = *hw::find_preset("a100-80gb");
constexpr cluster::node_spec dgx = cluster::node_of("a100-80gb");

constexpr train::training_knobs knobs = [] {
  train::training_knobs k;
  k.global_batch = 64;
  k.microbatch = 2;
  k.recompute = model::recompute::selective;
  return k;
}();

// GPT-2's table at tp 2: embedding, 12 blocks, head.
constexpr auto table = place::constant_table<16>(zoo::gpt2(), a100, dgx, knobs, 2);
static_assert(table.nodes.size() == 14 && table.edges.size() == 13);
static_assert(table.nodes[1] == table.nodes[12], "every block costs the same");
static_assert(table.nodes[1].backward > table.nodes[1].forward, "backward runs the dX and dW GEMMs");
static_assert(table.nodes[1].recompute < table.nodes[1].forward,
              "selective recomputation: the attention core");

// Placed by the chain DP at compile time on 8 GPUs.
constexpr auto plan =
    place::constant_placement<16, 16>(zoo::gpt2(), a100, dgx, 8, knobs, std::array{1, 2, 4});
static_assert(plan.feasible);
static_assert(plan.devices_used() == 8, "every device is used");
static_assert(plan.time_per_batch.value() > 0.0);

// On eight V100-16GB at 32 sequences per microbatch without recomputation a replica does not fit one GPU's
// memory: the compiler finds tp 2 over a pipeline of 4 stages, every stage within its memory.
constexpr hw::device v100 = *hw::find_preset("v100-16gb");
constexpr train::training_knobs wide_knobs = [] {
  train::training_knobs k;
  k.global_batch = 256;
  k.microbatch = 32;
  k.recompute = model::recompute::none;
  return k;
}();
constexpr auto pipelined = place::constant_placement<16, 16>(zoo::gpt2(), v100, cluster::node_of("v100-16gb"),
                                                             8, wide_knobs, std::array{1, 2});
static_assert(pipelined.feasible);
static_assert(pipelined.tp == 2 && pipelined.pp == 4 && pipelined.dp == 1);
static_assert(pipelined.first_node.size() == 4 && pipelined.first_node[0] == 0);
static_assert(pipelined.peak_memory <= train::usable_memory(v100, wide_knobs), "every stage fits");
}  // namespace
