// Compile-time layer cost tables and placement (place/constant_tables.hpp) equal the run-time ones: the
// tables model_tables builds from layer schedules, and chain_dp's placement on them.
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/chain_dp.hpp>
#include <phaze/place/constant_tables.hpp>
#include <phaze/place/model_placement.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <string_view>

using namespace phaze;

namespace {
constexpr hw::device a100 = *hw::find_preset("a100-80gb");
constexpr cluster::node_spec dgx = cluster::node_of("a100-80gb");

constexpr train::training_knobs knobs(std::int64_t batch, std::int64_t microbatch, model::recompute mode,
                                      bool sp) {
  train::training_knobs k;
  k.global_batch = batch;
  k.microbatch = microbatch;
  k.recompute = mode;
  k.sequence_parallel = sp;
  return k;
}

constexpr auto gpt2_knobs = knobs(64, 2, model::recompute::selective, false);
// Evaluated by the compiler (a constexpr variable), then compared with the run-time placement below.
constexpr auto compiled =
    place::constant_placement<16, 16>(zoo::gpt2(), a100, dgx, 8, gpt2_knobs, std::array{1, 2, 4});
static_assert(compiled.feasible && compiled.devices_used() == 8);
}  // namespace

TEST_CASE("A compile-time placement equals the run-time placement of the same model",
          "[place][constant_tables]") {
  const auto c = cluster::preset_cluster("a100-80gb", 8);
  const auto mp = place::model_tables(zoo::gpt2(), c, gpt2_knobs, {1, 2, 4}, sched::schedule_cache{});
  const auto run_time = place::chain_dp(mp.problem).use_all_devices(true).run();
  REQUIRE(run_time.feasible);
  CHECK(compiled.tp == run_time.tp);
  CHECK(compiled.pp == run_time.pp);
  CHECK(compiled.dp == run_time.dp);
  REQUIRE(compiled.first_node.size() == run_time.stages.size());
  for (std::size_t i = 0; i < run_time.stages.size(); ++i)
    CHECK(compiled.first_node[i] == run_time.stages[i].nodes.front());
  // Layer times are sums of the same op costs in another order: equal to rounding.
  CHECK(compiled.time_per_batch.value() == Approx(run_time.time_per_batch.value()).epsilon(1e-12));
  CHECK(compiled.peak_memory.value() == Approx(run_time.peak_memory.value()).epsilon(1e-12));
}

TEST_CASE("Compile-time tables equal model_tables on GPUs, for every knob", "[place][constant_tables]") {
  int compared = 0;
  for (const char* name : {"gpt2", "llama2-7b", "gpt3-175b"}) {
    for (const char* device : {"a100-80gb", "h100-sxm", "v100-16gb"}) {
      const auto m = zoo::get(name);
      const auto d = *hw::find_preset(device);
      const auto node = cluster::node_of(device);
      const auto c = cluster::preset_cluster(device, 64);
      for (const auto mode : train::all_recompute_modes) {
        for (const bool sp : {false, true}) {
          for (const double host : {0.0, 200e-6}) {  // the host bound, which binds on gpt2's layers at 200 us
            auto k = knobs(256, 1, mode, sp);
            k.host_overhead = host;
            for (const int tp : place::admissible_widths(m, c)) {
              if (sp && tp == 1) continue;
              const auto mp = place::model_tables(m, c, k, {tp}, sched::schedule_cache{});
              const auto fixed = place::constant_table<128>(m, d, node, k, tp);  // at run time here
              const auto& table = mp.problem.tables.front();
              INFO(name << " on " << device << " tp " << tp << " " << model::to_string(mode) << " sp " << sp
                        << " host " << host);
              REQUIRE(fixed.nodes.size() == table.nodes.size());
              REQUIRE(fixed.edges.size() == table.edges.size());
              for (std::size_t i = 0; i < table.nodes.size(); ++i) {
                CHECK(fixed.nodes[i].forward.value() ==
                      Approx(table.nodes[i].forward.value()).epsilon(1e-12));
                CHECK(fixed.nodes[i].backward.value() ==
                      Approx(table.nodes[i].backward.value()).epsilon(1e-12));
                CHECK(fixed.nodes[i].recompute.value() ==
                      Approx(table.nodes[i].recompute.value()).epsilon(1e-12));
                CHECK(fixed.nodes[i].parameters == table.nodes[i].parameters);
                CHECK(fixed.nodes[i].activations == table.nodes[i].activations);
              }
              for (std::size_t e = 0; e < table.edges.size(); ++e)
                CHECK(fixed.edges[e].boundary == table.edges[e].boundary);
              // At 200 us per op the bound binds on gpt2's small blocks: a block's forward is its ops' host
              // time, in both tables.
              if (host > 0.0 && std::string_view{name} == "gpt2" && tp == 1) {
                const auto block = model::layer_at(m, 1, train::layer_shape_of(m, {1, 1, 1}, k));
                REQUIRE(block.role == model::layer_role::block);
                CHECK(table.nodes[1].forward.value() ==
                      Approx(static_cast<double>(block.ops.size()) * host).epsilon(1e-12));
              }
              ++compared;
            }
          }
        }
      }
    }
  }
  CHECK(compared > 50);
}

TEST_CASE("Compile-time tables refuse a systolic design, whose layers need a schedule",
          "[place][constant_tables]") {
  CHECK_THROWS_WITH(
      place::constant_table<16>(zoo::gpt2(), hw::tpuv4_like, cluster::reference_node, gpt2_knobs, 1),
      Catch::Contains("layer schedule"));
}
