// Compile-time layer cost tables and placement (place/constant_tables.hpp) equal the run-time ones: the
// tables model_tables builds from layer schedules, and place_model's placement on them under the
// training-step objective (what `phaze plan` runs).
#include <phaze/cluster/presets.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/chain_dp.hpp>
#include <phaze/place/constant_tables.hpp>
#include <phaze/place/model_placement.hpp>
#include <phaze/place/plan_search.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>
#include <vector>

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
// Evaluated by the compiler (constexpr variables), then compared with the run-time placements below: GPT-2
// on eight A100s (one stage), and on eight V100-16GB at 32 sequences per microbatch without recomputation,
// which needs a pipeline (tp 2, pp 4).
constexpr auto compiled =
    place::constant_placement<16, 16>(zoo::gpt2(), a100, dgx, 8, gpt2_knobs, std::array{1, 2, 4});
static_assert(compiled.feasible && compiled.devices_used() == 8);
constexpr hw::device v100 = *hw::find_preset("v100-16gb");
constexpr auto pipelined_knobs = knobs(256, 32, model::recompute::none, false);
constexpr auto pipelined = place::constant_placement<16, 16>(zoo::gpt2(), v100, cluster::node_of("v100-16gb"),
                                                             8, pipelined_knobs, std::array{1, 2});
static_assert(pipelined.feasible && pipelined.pp == 4);

/// `fixed` equals place_model's plan on the same homogeneous cluster: degrees, stages, time and memory.
template <std::size_t Stages>
void check_equal(const place::fixed_plan<Stages>& fixed, const place::model_placement& run_time) {
  REQUIRE(run_time.placed.feasible == fixed.feasible);
  if (!fixed.feasible) return;
  CHECK(fixed.tp == run_time.placed.tp);
  CHECK(fixed.pp == run_time.placed.pp);
  CHECK(fixed.dp == run_time.placed.dp);
  REQUIRE(fixed.first_node.size() == run_time.placed.stages.size());
  for (std::size_t i = 0; i < run_time.placed.stages.size(); ++i)
    CHECK(fixed.first_node[i] == run_time.placed.stages[i].nodes.front());
  // Layer times are sums of the same op costs in another order: equal to rounding.
  CHECK(fixed.time_per_batch.value() == Approx(run_time.placed.time_per_batch.value()).epsilon(1e-9));
  CHECK(fixed.time_per_batch.value() == Approx(run_time.estimate.time_per_batch.value()).epsilon(1e-9));
  CHECK(fixed.peak_memory.value() == Approx(run_time.placed.peak_memory.value()).epsilon(1e-9));
}
}  // namespace

/// The planning service's best plan (`phaze plan`'s first) with the knobs `k` fixed, over `widths`.
train::step_estimate planned(const hw::device& d, const cluster::node_spec& node, int devices,
                             const train::training_knobs& k, std::vector<int> widths) {
  place::plan_choices choices;
  choices.tensor_parallel = std::move(widths);
  choices.microbatches = {k.microbatch};
  choices.recompute = {k.recompute};
  choices.sequence_parallel = {k.sequence_parallel};
  choices.keep = 1;
  const auto found = place::search_plans(zoo::gpt2(), cluster::homogeneous(d, devices, node), k, choices,
                                         sched::schedule_cache{});
  REQUIRE(found.feasible.size() == 1);
  return found.feasible.front().estimate;
}

TEST_CASE("A compile-time placement equals the run-time placement of the same model",
          "[place][constant_tables]") {
  check_equal(compiled, place::place_model(zoo::gpt2(), cluster::homogeneous(a100, 8, dgx), gpt2_knobs,
                                           {1, 2, 4}, sched::schedule_cache{}));
  check_equal(pipelined,
              place::place_model(zoo::gpt2(), cluster::homogeneous(v100, 8, cluster::node_of("v100-16gb")),
                                 pipelined_knobs, {1, 2}, sched::schedule_cache{}));
  // A width that neither fits nor tiles a node (GPT-2's 12 heads at tp 12 on nodes of 8): its rings cross
  // nodes with several members in some, timed as the cluster times them.
  check_equal(place::constant_placement<16, 16>(zoo::gpt2(), a100, dgx, 24, gpt2_knobs, std::array{12}),
              place::place_model(zoo::gpt2(), cluster::homogeneous(a100, 24, dgx), gpt2_knobs, {12},
                                 sched::schedule_cache{}));
  // And the planning service's answer (place::search_plans, which `phaze plan` calls) with the same knobs.
  CHECK(compiled.time_per_batch.value() ==
        Approx(planned(a100, dgx, 8, gpt2_knobs, {1, 2, 4}).time_per_batch.value()).epsilon(1e-9));
  CHECK(
      pipelined.time_per_batch.value() ==
      Approx(planned(v100, cluster::node_of("v100-16gb"), 8, pipelined_knobs, {1, 2}).time_per_batch.value())
          .epsilon(1e-9));
}

TEST_CASE("constant_placement equals place_model for every schedule, recomputation and optimizer",
          "[place][constant_tables]") {
  // Run at run time here (the same constexpr function), over knobs the compile-time cases above leave out.
  int compared = 0;
  int pipelines = 0;
  for (const char* name : {"gpt2", "llama2-7b"}) {
    for (const char* device : {"a100-80gb", "h100-sxm", "v100-16gb"}) {
      const auto m = zoo::get(name);
      const auto d = *hw::find_preset(device);
      const auto node = cluster::node_of(device);
      for (const int devices : {8, 64}) {
        const auto c = cluster::homogeneous(d, devices, node);
        const auto widths = place::admissible_widths(m, c);
        for (const auto mode : train::all_recompute_modes) {
          for (const auto schedule :
               {train::pipeline_schedule::one_f_one_b, train::pipeline_schedule::gpipe}) {
            for (const bool zero : {false, true}) {
              auto k = knobs(512, 4, mode, false);
              k.schedule = schedule;
              k.distributed_optimizer = zero;
              k.overlap_grad_reduce = zero;
              k.overlap_param_gather = zero;
              INFO(name << " on " << devices << " " << device << ", " << model::to_string(mode)
                        << ", distributed optimizer " << zero);
              // The widths in an array of their count (gpt2: 1, 2, 4; llama2-7b: up to 8).
              const auto place_on = [&](auto fixed) {
                REQUIRE(widths.size() == fixed.size());
                std::copy(widths.begin(), widths.end(), fixed.begin());
                return place::constant_placement<64, 64>(m, d, node, devices, k, fixed);
              };
              const auto compiled_at_run_time =
                  widths.size() == 3 ? place_on(std::array<int, 3>{}) : place_on(std::array<int, 4>{});
              check_equal(compiled_at_run_time, place::place_model(m, c, k, widths, sched::schedule_cache{}));
              ++compared;
              if (compiled_at_run_time.pp > 1) ++pipelines;
            }
          }
        }
      }
    }
  }
  CHECK(compared == 144);
  CHECK(pipelines > 10);
}

TEST_CASE("constant_placement refuses what it cannot place at compile time", "[place][constant_tables]") {
  auto interleaved = gpt2_knobs;
  interleaved.schedule = train::pipeline_schedule::interleaved;
  CHECK_THROWS_WITH(
      (place::constant_placement<16, 16>(zoo::gpt2(), a100, dgx, 8, interleaved, std::array{1})),
      Catch::Contains("1F1B or GPipe"));
  auto overlap = knobs(64, 2, model::recompute::selective, true);
  overlap.tp_comm_overlap = true;
  CHECK_THROWS_WITH(place::constant_table<16>(zoo::gpt2(), a100, dgx, overlap, 2),
                    Catch::Contains("tp_comm_overlap"));
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
