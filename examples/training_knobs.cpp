// Training knobs written in the DSL and checked at compile time against the model they train: the knob
// lists a co-search tries (docs/dsl.md), the settings it visits in order, and one fixed run's knobs checked
// as a plan (Korthikanti et al. 2022, Table 5: GPT-3 175B on 64 GPUs at tp 8, pp 8, 3 chunks per device).
#include <phaze/model/zoo.hpp>
#include <phaze/search/spec.hpp>
#include <phaze/train/dsl.hpp>
#include <phaze/train/knob_settings.hpp>

#include <cstdio>
#include <string>

namespace dsl = phaze::dsl;

// [dsl-training-example]
constexpr auto knobs = dsl::training_for(
    phaze::zoo::gpt3_175b(), dsl::devices = 1024, dsl::global_batch = 1536, dsl::microbatch = dsl::pow2(1, 8),
    dsl::recompute = dsl::one_of(phaze::selective, phaze::full), dsl::tensor_parallel = dsl::pow2(2, 8),
    dsl::schedule = phaze::gpipe, dsl::distributed_optimizer = true);
static_assert(knobs.knobs.microbatches.size() == 4 && knobs.knobs.tensor_parallel.size() == 3);

// A run fixed in every knob gives its training_knobs, ready for train::validate and the step model.
constexpr phaze::train::training_knobs table5 = phaze::train::fixed_knobs(
    dsl::training_for(phaze::zoo::gpt3_175b(), dsl::devices = 64, dsl::global_batch = 64, dsl::microbatch = 1,
                      dsl::recompute = phaze::selective, dsl::sequence_parallel = true,
                      dsl::tensor_parallel = 8, dsl::schedule = phaze::interleaved, dsl::virtual_stages = 3));
// [dsl-training-example]

int main() {
  const auto settings = phaze::train::knob_settings(knobs.knobs, knobs.global_batch);
  std::printf("%zu knob settings per design, first: microbatch %lld, %s recomputation%s\n", settings.size(),
              static_cast<long long>(settings.front().microbatch),
              std::string{phaze::model::to_string(settings.front().recompute)}.c_str(),
              settings.front().sequence_parallel ? ", sequence parallel" : "");
  // The co-search spec of these knobs (search::run(spec, {}) would search PHAZE's space with them).
  const phaze::search::spec s =
      phaze::search::spec_of(phaze::zoo::gpt3_175b(), phaze::hw::phaze_default_space, knobs);
  phaze::search::validate(s);
  phaze::train::validate(phaze::zoo::gpt3_175b(), phaze::train::parallelism{8, 8, 1}, table5, 64);
  std::printf("spec: %d devices, global batch %lld; Table 5's run: microbatch %lld, %d chunks per device\n",
              s.devices, static_cast<long long>(s.global_batch), static_cast<long long>(table5.microbatch),
              table5.virtual_stages);
  return settings.size() == 4 * 2 * 2 ? 0 : 1;
}
