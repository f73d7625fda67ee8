// Compile-time tests of phaze/train/dsl.hpp and phaze/train/knob_space.hpp: what dsl::training yields (its
// defaults are a search's defaults, value sets expand in order), training_for against zoo models, and the
// knobs of a fixed run. Compiling is the test.
#include <phaze/model/zoo.hpp>
#include <phaze/train/dsl.hpp>
#include <phaze/train/knob_space.hpp>

#include <cstdint>

namespace {
using namespace phaze;
namespace dsl = phaze::dsl;
using model::recompute;

// --- defaults: only the batch given, everything else is a search's default knob space ----------------------
constexpr auto defaults = dsl::training(dsl::global_batch = 4096);
static_assert(defaults.global_batch == 4096 && defaults.devices == 0 && defaults.sequence == 0);
static_assert(defaults.knobs == train::knob_space{});

// --- The DSL's rule (docs/dsl.md): value sets expand in ascending (pow2) or listed (one_of) order -------
constexpr auto knobs =
    dsl::training(dsl::devices = 1024, dsl::global_batch = 4096, dsl::microbatch = dsl::pow2(1, 8),
                  dsl::recompute = dsl::one_of(phaze::none, phaze::full),
                  dsl::tensor_parallel = dsl::pow2(1, 8), dsl::optimizer = phaze::adam);
static_assert(knobs.devices == 1024);
static_assert(knobs.knobs.microbatches == static_vector<std::int64_t, 64>{1, 2, 4, 8});
static_assert(knobs.knobs.recompute.size() == 2 && knobs.knobs.recompute[0] == recompute::none &&
              knobs.knobs.recompute[1] == recompute::full);
static_assert(knobs.knobs.tensor_parallel == static_vector<int, 64>{1, 2, 4, 8});
static_assert(knobs.knobs.sequence_parallel.size() == 2);  // default: both
static_assert(knobs.knobs.opt == train::optimizer::adam);

// The same knobs checked against GPT-3 175B (96 heads, 96 blocks): both forms give the same value.
constexpr auto gpt3_knobs = dsl::training_for(zoo::gpt3_175b(), knobs);
static_assert(gpt3_knobs == knobs);
static_assert(dsl::training_for(zoo::gpt3_175b(), dsl::devices = 1024, dsl::global_batch = 4096,
                                dsl::microbatch = dsl::pow2(1, 8),
                                dsl::recompute = dsl::one_of(phaze::none, phaze::full),
                                dsl::tensor_parallel = dsl::pow2(1, 8),
                                dsl::optimizer = phaze::adam) == knobs);

// --- every other option
// -------------------------------------------------------------------------------------
constexpr auto interleaved = dsl::training_for(
    zoo::llama2_70b(), dsl::devices = 512, dsl::global_batch = 1024, dsl::microbatch = dsl::one_of(1, 2),
    dsl::recompute = phaze::selective, dsl::sequence_parallel = true, dsl::tensor_parallel = 8,
    dsl::schedule = phaze::interleaved, dsl::virtual_stages = 5, dsl::distributed_optimizer = true,
    dsl::precision = phaze::fp16, dsl::optimizer = phaze::sgd, dsl::sequence = 2048);
static_assert(interleaved.sequence == 2048 && interleaved.devices == 512);
static_assert(interleaved.knobs.schedule == train::pipeline_schedule::interleaved);
static_assert(interleaved.knobs.virtual_stages == 5);  // 80 blocks: pp 4 (or 8, 16) x 5 chunks
static_assert(interleaved.knobs.sequence_parallel == static_vector<bool, 4>{true});
static_assert(interleaved.knobs.tensor_parallel == static_vector<int, 64>{8});
static_assert(interleaved.knobs.distributed_optimizer && interleaved.knobs.opt == train::optimizer::sgd);
static_assert(interleaved.knobs.precision == hw::precision::fp16);
static_assert(dsl::training(dsl::global_batch = 8, dsl::sequence_parallel = dsl::one_of(true, false))
                  .knobs.sequence_parallel == static_vector<bool, 4>{true, false});

// --- a fixed run: its training_knobs, as `phaze estimate` takes them ---------------------------------------
constexpr train::training_knobs fixed = train::fixed_knobs(
    dsl::training_for(zoo::gpt3_175b(), dsl::devices = 64, dsl::global_batch = 64, dsl::microbatch = 1,
                      dsl::recompute = phaze::selective, dsl::sequence_parallel = true,
                      dsl::tensor_parallel = 8, dsl::schedule = phaze::interleaved, dsl::virtual_stages = 3));
static_assert(fixed.global_batch == 64 && fixed.microbatch == 1 && fixed.recompute == recompute::selective);
static_assert(fixed.sequence_parallel && fixed.virtual_stages == 3);
// Korthikanti et al. 2022, Table 5's plan (tp 8, pp 8, dp 1) obeys every rule of a plan.
static_assert((train::validate(zoo::gpt3_175b(), train::parallelism{8, 8, 1}, fixed, 64), true));

// --- the settings a search visits come from the same value
// ---------------------------------------------------
static_assert(train::knobs_of(knobs.knobs, {2, recompute::full, true}, knobs.global_batch).microbatch == 2);
}  // namespace
