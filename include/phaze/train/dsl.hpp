/// @file
/// The training DSL: the knobs of a training run as a `constexpr` value, checked by the compiler.
/// @code
///   namespace dsl = phaze::dsl;
///   constexpr auto knobs = dsl::training(
///       dsl::devices = 1024, dsl::global_batch = 1536,
///       dsl::microbatch = dsl::pow2(1, 8), dsl::recompute = dsl::one_of(phaze::none, phaze::full),
///       dsl::tensor_parallel = dsl::pow2(1, 8), dsl::optimizer = phaze::adam);
///   constexpr auto checked = dsl::training_for(phaze::zoo::gpt3_175b(), knobs);  // against the model too
/// @endcode
/// `dsl::training` gives a `train::training_space` (its knob lists are the `train::knob_space` a co-search
/// tries for every design; `search::spec_of` makes a spec of it), and `train::fixed_knobs` the run's
/// `train::training_knobs` when every list holds one value. A misused option (given twice, belonging to
/// another call, of another kind, `global_batch` left out) fails to compile with a message naming it; a
/// value that breaks a rule (a microbatch that no data-parallel degree fits into the batch, sequence
/// parallelism forced on without tensor parallelism, virtual stages without the interleaved schedule, a
/// width that does not split the model's heads) fails to compile with the rule's name in the diagnostic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "phaze/core/keywords.hpp"
#include "phaze/core/static_vector.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/dsl.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/train/knob_space.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze {

// Short names for the training choices, so specs read like prose.
inline constexpr auto none = model::recompute::none;
inline constexpr auto selective = model::recompute::selective;
inline constexpr auto full = model::recompute::full;
inline constexpr auto adam = train::optimizer::adam;
inline constexpr auto sgd = train::optimizer::sgd;
inline constexpr auto one_f_one_b = train::pipeline_schedule::one_f_one_b;
inline constexpr auto gpipe = train::pipeline_schedule::gpipe;
inline constexpr auto interleaved = train::pipeline_schedule::interleaved;
inline constexpr auto bf16 = hw::precision::bf16;
inline constexpr auto fp16 = hw::precision::fp16;
inline constexpr auto fp32 = hw::precision::fp32;

namespace dsl {

/// Training option tags (microbatch, sequence and sequence_parallel are shared with shape() and
/// transformer(), model/dsl.hpp).
namespace tags {
// clang-format off
struct global_batch { using of = training_call; };
struct recompute { using of = training_call; };
struct schedule { using of = training_call; };
struct virtual_stages { using of = training_call; };
struct optimizer { using of = training_call; };
struct distributed_optimizer { using of = training_call; };
struct precision { using of = training_call; };
struct tensor_parallel { using of = training_call; };
struct devices { using of = training_call; };
// clang-format on
}  // namespace tags

/// Sequences per iteration (required).
inline constexpr keyword<tags::global_batch, std::int64_t> global_batch{};
/// Activation recomputation: `phaze::none`, `phaze::selective`, `phaze::full`, or `one_of(...)` of them.
inline constexpr set_keyword<tags::recompute, model::recompute> recompute{};
/// The pipeline schedule: `phaze::one_f_one_b` (default), `phaze::gpipe` or `phaze::interleaved`.
inline constexpr keyword<tags::schedule, train::pipeline_schedule> schedule{};
/// Model chunks per device (interleaved schedule; default 1).
inline constexpr keyword<tags::virtual_stages, int> virtual_stages{};
/// `phaze::adam` (default) or `phaze::sgd`.
inline constexpr keyword<tags::optimizer, train::optimizer> optimizer{};
/// Optimizer state sharded over data-parallel ranks (ZeRO-1; default false).
inline constexpr keyword<tags::distributed_optimizer, bool> distributed_optimizer{};
/// The training format: `phaze::bf16` (default), `phaze::fp16` or `phaze::fp32`.
inline constexpr keyword<tags::precision, hw::precision> precision{};
/// Tensor-parallel widths: a width, `pow2(lo, hi)` or `one_of(...)` (default: every admissible width).
inline constexpr set_keyword<tags::tensor_parallel, std::int64_t> tensor_parallel{};
/// The devices the run uses (default: not fixed): the checks then look for degrees that use them all.
inline constexpr keyword<tags::devices, int> devices{};

namespace detail {
/// One check per argument, so the diagnostic's instantiation context names the offending option's tag.
template <class Arg>
constexpr void check_training_option() {
  static_assert(belongs_to<tags::training_call, Arg>,
                "phaze::dsl::training: this option does not belong to a training run (the tag above names "
                "it); give global_batch, microbatch, recompute, sequence_parallel, tensor_parallel, "
                "schedule, virtual_stages, optimizer, distributed_optimizer, precision, devices or sequence");
}

template <class... Args>
constexpr bool training_options_given_once() {
  return count_of<tags::global_batch, Args...> <= 1 && count_of<tags::microbatch, Args...> <= 1 &&
         count_of<tags::recompute, Args...> <= 1 && count_of<tags::sequence_parallel, Args...> <= 1 &&
         count_of<tags::tensor_parallel, Args...> <= 1 && count_of<tags::schedule, Args...> <= 1 &&
         count_of<tags::virtual_stages, Args...> <= 1 && count_of<tags::optimizer, Args...> <= 1 &&
         count_of<tags::distributed_optimizer, Args...> <= 1 && count_of<tags::precision, Args...> <= 1 &&
         count_of<tags::devices, Args...> <= 1 && count_of<tags::sequence, Args...> <= 1;
}

/// Whether a training() call's options are well formed (each checked by a static_assert in training()).
template <class... Args>
constexpr bool training_call_is_valid() {
  return (belongs_to<tags::training_call, Args> && ...) && training_options_given_once<Args...>() &&
         count_of<tags::global_batch, Args...> == 1;
}

/// A knob list from one value, `pow2(lo, hi)` or `one_of(...)`.
template <class T, std::size_t N, class V>
constexpr void assign_values(static_vector<T, N>& list, const V& given) {
  list.clear();
  if constexpr (is_pow2_values<V>) {
    for (auto v = given.lo; v <= given.hi; v *= 2) list.push_back(static_cast<T>(v));
  } else if constexpr (is_listed_values<V>) {
    for (const auto& v : given.values) list.push_back(static_cast<T>(v));
  } else {
    list.push_back(static_cast<T>(given));
  }
}

template <class Tag, class V>
constexpr void apply_training_option(train::training_space& t, const argument<Tag, V>& a) {
  train::knob_space& k = t.knobs;
  if constexpr (std::is_same_v<Tag, tags::global_batch>) {
    t.global_batch = a.value;
  } else if constexpr (std::is_same_v<Tag, tags::sequence>) {
    t.sequence = a.value;
  } else if constexpr (std::is_same_v<Tag, tags::devices>) {
    t.devices = a.value;
  } else if constexpr (std::is_same_v<Tag, tags::microbatch>) {
    assign_values(k.microbatches, a.value);
  } else if constexpr (std::is_same_v<Tag, tags::recompute>) {
    assign_values(k.recompute, a.value);
  } else if constexpr (std::is_same_v<Tag, tags::sequence_parallel>) {
    assign_values(k.sequence_parallel, a.value);
  } else if constexpr (std::is_same_v<Tag, tags::tensor_parallel>) {
    assign_values(k.tensor_parallel, a.value);
  } else if constexpr (std::is_same_v<Tag, tags::schedule>) {
    k.schedule = a.value;
  } else if constexpr (std::is_same_v<Tag, tags::virtual_stages>) {
    k.virtual_stages = a.value;
  } else if constexpr (std::is_same_v<Tag, tags::optimizer>) {
    k.opt = a.value;
  } else if constexpr (std::is_same_v<Tag, tags::distributed_optimizer>) {
    k.distributed_optimizer = a.value;
  } else if constexpr (std::is_same_v<Tag, tags::precision>) {
    k.precision = a.value;
  }
}
}  // namespace detail

// A per-option check, written as a macro because a static_assert message must be a literal naming the option.
#define PHAZE_DSL_TRAINING_GIVEN_ONCE(opt)                 \
  static_assert(detail::count_of<tags::opt, Args...> <= 1, \
                "phaze::dsl::training: '" #opt "' was given twice; give each option once")

/// A training run from keyword options, with the choices a co-search may make left open as lists.
/// Required: global_batch. Options (defaults: PHAZE's setting, train::knob_space):
/// microbatch (a size, pow2(lo, hi) or one_of(...); 1, 2, 4, 8), recompute (a mode or one_of(...); all
/// three), sequence_parallel (true, false or one_of(false, true); both), tensor_parallel (a width, pow2 or
/// one_of; every admissible width), schedule (one_f_one_b), virtual_stages (1), optimizer (adam),
/// distributed_optimizer (false), precision (bf16), devices (not fixed), sequence (the model's).
/// Every value is checked by train::validate: in a constant expression a broken rule stops compilation
/// with the rule's name.
template <class... Args>
requires(detail::is_argument<Args>&&...) constexpr train::training_space training(Args... args) {
  if constexpr (!(detail::belongs_to<tags::training_call, Args> && ...)) {
    (detail::check_training_option<Args>(), ...);
    return {};
  } else if constexpr (!detail::training_options_given_once<Args...>()) {
    PHAZE_DSL_TRAINING_GIVEN_ONCE(global_batch);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(microbatch);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(recompute);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(sequence_parallel);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(tensor_parallel);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(schedule);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(virtual_stages);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(optimizer);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(distributed_optimizer);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(precision);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(devices);
    PHAZE_DSL_TRAINING_GIVEN_ONCE(sequence);
    return {};
  } else if constexpr (detail::count_of<tags::global_batch, Args...> == 0) {
    static_assert(
        detail::count_of<tags::global_batch, Args...> == 1,
        "phaze::dsl::training: 'global_batch' is missing; give dsl::global_batch = B, the sequences "
        "each iteration trains on");
    return {};
  } else {
    train::training_space t;
    (detail::apply_training_option(t, args), ...);
    train::validate(t);
    return t;
  }
}

#undef PHAZE_DSL_TRAINING_GIVEN_ONCE

/// A training run of model `m` from keyword options (those of `training`), checked against the model as
/// well: every listed tensor-parallel width splits its heads, key/value heads and MLP width (and its
/// sequence when sequence parallelism is forced on), some pipeline depth of at most its blocks and
/// data-parallel degree fit each microbatch into the batch on the devices, and with the interleaved schedule
/// some pp > 2 splits its blocks into pp * virtual_stages chunks.
template <class... Args>
requires(detail::is_argument<Args>&&...) constexpr train::training_space
    training_for(const model::model& m, Args... args) {
  const train::training_space t = training(args...);
  if constexpr (detail::training_call_is_valid<Args...>()) train::validate(m, t);
  return t;
}

/// A training space checked against model `m` (see the keyword form): `training_for(model, knobs)`.
constexpr train::training_space training_for(const model::model& m, const train::training_space& t) {
  train::validate(m, t);
  return t;
}

}  // namespace dsl
}  // namespace phaze
