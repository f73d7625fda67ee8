// A co-search written as a C++ program: the model and the accelerator space are compile-time-checked DSL
// values (a misspelled option or a lo > hi range does not compile), the search runs through the library
// (docs/search.md) and prints the best design against PHAZE's TPUv4-like reference.
#include <phaze/hw/space.hpp>
#include <phaze/model/dsl.hpp>
#include <phaze/search/baselines.hpp>
#include <phaze/search/engine.hpp>

#include <cstdio>

namespace dsl = phaze::dsl;
using namespace phaze::literals;

// [readme-search-example]
constexpr auto model = dsl::transformer(dsl::name = "gpt-760m", dsl::hidden = 1536, dsl::heads = 16,
                                        dsl::layers = 24, dsl::vocab = 50304, dsl::sequence = 2048);

constexpr auto space = dsl::accelerator_space(
    dsl::tensor_cores = dsl::pow2(2, 16), dsl::tc_width = dsl::pow2(64, 256),
    dsl::tc_depth = dsl::same_as(dsl::tc_width), dsl::vector_cores = dsl::pow2(1, 8),
    dsl::vc_width = dsl::same_as(dsl::tc_width), dsl::global_buffer = dsl::pow2(16_MiB, 64_MiB),
    dsl::hbm = dsl::one_of(32_GiB), dsl::area_budget = phaze::hw::area_of(phaze::hw::tpuv4_like),
    dsl::min_area = 300_mm2);
static_assert(space.count() > 0, "the area budget leaves designs to search");
// [readme-search-example]

int main() {
  phaze::search::spec s{.model = model, .devices = 64, .global_batch = 512, .space = space};
  s.knobs.microbatches = {1, 2, 4};
  const phaze::search::summary result = phaze::search::run(s, {});
  const auto& best = result.best;
  // search::run's first baseline: PHAZE's TPUv4-like reference with its best plan under the same knobs.
  const auto& reference = result.baselines.front().result;
  const auto& d = best.device.systolic;
  std::printf("%s on %d accelerators: %llu designs, %llu evaluated, %llu pruned by the sound bound\n",
              model.config.name.str().c_str(), s.devices, static_cast<unsigned long long>(result.designs),
              static_cast<unsigned long long>(result.evaluated),
              static_cast<unsigned long long>(result.pruned));
  std::printf(
      "best: %d x %dx%d tensor cores, %d x %d vector lanes, %.0f MiB GLB, %.0f mm2: tp %d pp %d dp %d, "
      "microbatch %lld, %.1f samples/s (%.2fx the TPUv4-like's %.1f)\n",
      d.num_tc, d.tc_width, d.tc_depth, d.num_vc, d.vc_width, phaze::in_mib(d.glb), best.die_area.value(),
      best.parallel.tp, best.parallel.pp, best.parallel.dp, static_cast<long long>(best.knobs.microbatch),
      best.samples_per_s, best.samples_per_s / reference.samples_per_s, reference.samples_per_s);
  return best.samples_per_s > 0 ? 0 : 1;
}
