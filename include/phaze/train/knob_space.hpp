/// @file
/// What a training run may choose among. `train::knob_space` holds the knob lists a co-search tries for every
/// design (microbatch sizes, recomputation modes, sequence parallelism, tensor-parallel widths) and the knobs
/// it keeps fixed; `train::training_space` adds the batch, sequence and device count the run trains with
/// (what `dsl::training` builds, train/dsl.hpp). Both are constexpr values, and `train::validate` checks them
/// with rules named after each mistake.
#pragma once

#include <cstddef>
#include <cstdint>

#include "phaze/core/error.hpp"
#include "phaze/core/static_vector.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::train {

/// The knobs tried for every design: every combination of the lists (in `train::knob_settings` order:
/// microbatch outermost, then recomputation, then sequence parallelism). Tensor-parallel widths are the
/// powers of two that divide the model and fit in a node unless `tensor_parallel` lists them. The defaults
/// are PHAZE's setting (docs/search.md).
struct knob_space {
  static_vector<std::int64_t, 64> microbatches{1, 2, 4, 8};
  static_vector<model::recompute, 8> recompute{model::recompute::none, model::recompute::selective,
                                               model::recompute::full};
  static_vector<bool, 4> sequence_parallel{false, true};
  static_vector<int, 64> tensor_parallel;  ///< empty: every admissible width
  hw::precision precision = hw::precision::bf16;
  optimizer opt = optimizer::adam;
  pipeline_schedule schedule = pipeline_schedule::one_f_one_b;
  bool distributed_optimizer = false;
  int virtual_stages = 1;  ///< model chunks per device (more than 1 with the interleaved schedule only)
  friend constexpr bool operator==(const knob_space&, const knob_space&) = default;
};

/// A training run with some of its knobs left open: the global batch (sequences per iteration), the sequence
/// length, the devices it runs on, and the knob lists. `dsl::training(...)` builds one.
struct training_space {
  std::int64_t global_batch = 0;  ///< required (validate rejects 0)
  std::int64_t sequence = 0;      ///< 0: the model's own
  int devices = 0;                ///< 0: not fixed (the checks then try any data-parallel degree)
  knob_space knobs{};
  friend constexpr bool operator==(const training_space&, const training_space&) = default;
};

/// One point of a knob space: the knobs a co-search varies for a design.
struct knob_setting {
  std::int64_t microbatch = 1;
  model::recompute recompute = model::recompute::none;
  bool sequence_parallel = false;
  friend constexpr bool operator==(const knob_setting&, const knob_setting&) = default;
};

/// The training knobs of one setting of a knob space: the setting's microbatch, recomputation and sequence
/// parallelism, and the space's fixed knobs (precision, optimizer, schedule, virtual stages, distributed
/// optimizer). `sequence` 0 trains at the model's own length.
inline constexpr auto knobs_of = [](const knob_space& space, const knob_setting& setting,
                                    std::int64_t global_batch, std::int64_t sequence = 0) constexpr {
  training_knobs k;
  k.global_batch = global_batch;
  k.microbatch = setting.microbatch;
  k.sequence = sequence;
  k.precision = space.precision;
  k.opt = space.opt;
  k.recompute = setting.recompute;
  k.sequence_parallel = setting.sequence_parallel;
  k.distributed_optimizer = space.distributed_optimizer;
  k.schedule = space.schedule;
  k.virtual_stages = space.virtual_stages;
  return k;
};

namespace rules {
[[noreturn]] inline void knob_lists_must_not_be_empty() {
  throw input_error(
      "every knob list (microbatches, recompute, sequence_parallel) needs at least one value; give e.g. "
      "\"microbatches\": [1, 2, 4]");
}
[[noreturn]] inline void microbatch_sizes_must_be_positive() {
  throw input_error("microbatch sizes must be at least 1");
}
[[noreturn]] inline void tensor_parallel_widths_must_be_positive() {
  throw input_error("tensor-parallel widths must be at least 1");
}
[[noreturn]] inline void knob_values_must_be_distinct() {
  throw input_error(
      "a knob list gives a value twice; list each microbatch size, recomputation mode, sequence-parallel "
      "setting and tensor-parallel width once");
}
[[noreturn]] inline void microbatch_must_not_exceed_global_batch() {
  throw input_error(
      "a microbatch size is larger than the global batch; list microbatch sizes of at most the global batch");
}
[[noreturn]] inline void tensor_parallel_width_must_divide_devices() {
  throw input_error(
      "a tensor-parallel width does not divide the number of devices, so no plan can use it; list widths "
      "that divide the device count");
}
[[noreturn]] inline void sequence_parallelism_needs_tensor_parallelism() {
  throw input_error(
      "sequence parallelism is forced on, but every tensor-parallel width is 1, where it does nothing (as in "
      "Megatron-LM); list a width above 1, or let sequence parallelism be on or off");
}
[[noreturn]] inline void fixed_knobs_need_one_value_per_knob() {
  throw input_error(
      "the training run is not fixed: a knob list holds more than one value; give one microbatch size, one "
      "recomputation mode and one sequence-parallel setting");
}
}  // namespace rules

namespace detail {
template <class T, std::size_t N>
constexpr bool all_distinct(const static_vector<T, N>& list) {
  for (std::size_t i = 0; i < list.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (list[i] == list[j]) return false;
  return true;
}

/// The architecture a training space is checked against, if any (a pointer to it would not be a constant
/// expression in GCC 12 when the model is a temporary).
struct model_if_known {
  bool known = false;
  model::transformer_config config{};
};

/// Whether tensor-parallel width `tp` can run at all: it divides the devices (when fixed) and the model's
/// heads, key/value heads, MLP width and Mamba-2 heads and groups (when the model is known).
constexpr bool width_can_run(const training_space& t, const model_if_known& m, std::int64_t tp) {
  if (t.devices > 0 && t.devices % tp != 0) return false;
  const auto& c = m.config;
  return !m.known || (c.heads % tp == 0 && c.kv_heads_or_default() % tp == 0 && c.ffn % tp == 0 &&
                      c.mamba_splits_over(tp));
}

/// Whether `ok(tp, pp, dp)` holds for some degrees a run of `t` could use: tp among the listed widths (every
/// width that can run when none is listed), tp * pp * dp = devices, pp at most the model's blocks. Without
/// a device count the data-parallel degree is 1 (the least a batch must divide) and pp runs up to the
/// model's blocks (only pp = 1 without a model).
template <class Ok>
constexpr bool some_degrees(const training_space& t, const model_if_known& m, Ok ok) {
  const std::int64_t blocks = m.config.layers;
  const auto try_width = [&](std::int64_t tp) {
    if (!width_can_run(t, m, tp)) return false;
    const std::int64_t rest = t.devices > 0 ? t.devices / tp : (m.known ? blocks : 1);
    for (std::int64_t pp = 1; pp <= rest; ++pp) {
      if (m.known && pp > blocks) break;
      if (t.devices > 0 && rest % pp != 0) continue;
      if (ok(tp, pp, t.devices > 0 ? rest / pp : std::int64_t{1})) return true;
    }
    return false;
  };
  if (!t.knobs.tensor_parallel.empty()) {
    for (const int tp : t.knobs.tensor_parallel)
      if (try_width(tp)) return true;
    return false;
  }
  const std::int64_t widest = t.devices > 0 ? t.devices : (m.known ? m.config.heads : 1);
  for (std::int64_t tp = 1; tp <= widest; ++tp)
    if (try_width(tp)) return true;
  return false;
}

/// Whether every value of a list is `v`.
template <class T, std::size_t N>
constexpr bool all_equal_to(const static_vector<T, N>& list, const T& v) {
  for (const T& x : list)
    if (!(x == v)) return false;
  return true;
}

/// The checks of a training space, against the model's architecture when it is known.
constexpr void check_training_space(const training_space& t, const model_if_known& m) {
  const knob_space& k = t.knobs;
  validate(k);
  if (t.global_batch <= 0) rules::global_batch_must_be_positive();
  if (t.sequence < 0) rules::sequence_must_not_be_negative();
  if (t.devices < 0) rules::device_count_must_be_positive();
  const bool sp_forced = all_equal_to(k.sequence_parallel, true);
  if (m.known) {
    // Every listed width must split the model (heads, key/value heads, MLP width; the sequence when
    // sequence parallelism is forced on): the model's own rules name the mistake.
    for (const int tp : k.tensor_parallel) {
      model::validate_shape(m.config, model::layer_shape{k.microbatches[0], t.sequence, tp, sp_forced,
                                                         train::activation_element_bytes(k.precision)});
    }
  }
  if (t.devices > 0) {
    for (const int tp : k.tensor_parallel)
      if (t.devices % tp != 0) rules::tensor_parallel_width_must_divide_devices();
  }
  if (sp_forced && !k.tensor_parallel.empty() && all_equal_to(k.tensor_parallel, 1))
    rules::sequence_parallelism_needs_tensor_parallelism();
  for (const std::int64_t mb : k.microbatches) {
    if (mb > t.global_batch) rules::microbatch_must_not_exceed_global_batch();
    const bool divides = some_degrees(
        t, m, [&](std::int64_t, std::int64_t, std::int64_t dp) { return t.global_batch % (mb * dp) == 0; });
    if (!divides) rules::global_batch_must_be_divisible_by_microbatch_times_dp();
  }
  if (k.schedule == pipeline_schedule::interleaved && (t.devices > 0 || m.known)) {
    const bool deep = some_degrees(t, m, [](std::int64_t, std::int64_t pp, std::int64_t) { return pp > 2; });
    if (!deep) rules::interleaved_schedule_needs_more_than_two_pipeline_stages();
    if (m.known) {
      const bool even = some_degrees(t, m, [&](std::int64_t, std::int64_t pp, std::int64_t) {
        return pp > 2 && m.config.layers % (pp * k.virtual_stages) == 0;
      });
      if (!even) rules::interleaved_schedule_needs_blocks_divisible_by_pp_times_v();
    }
  }
}
}  // namespace detail

constexpr void validate_fn::operator()(const knob_space& k) const {
  if (k.microbatches.empty() || k.recompute.empty() || k.sequence_parallel.empty()) {
    rules::knob_lists_must_not_be_empty();
  }
  for (const std::int64_t mb : k.microbatches)
    if (mb < 1) rules::microbatch_sizes_must_be_positive();
  for (const int tp : k.tensor_parallel)
    if (tp < 1) rules::tensor_parallel_widths_must_be_positive();
  if (!detail::all_distinct(k.microbatches) || !detail::all_distinct(k.recompute) ||
      !detail::all_distinct(k.sequence_parallel) || !detail::all_distinct(k.tensor_parallel)) {
    rules::knob_values_must_be_distinct();
  }
  if (!is_training_precision(k.precision)) rules::precision_must_be_bf16_fp16_fp32_or_fp8();
  if (k.virtual_stages <= 0) rules::virtual_stages_must_be_positive();
  if (k.schedule != pipeline_schedule::interleaved && k.virtual_stages > 1)
    rules::virtual_stages_need_the_interleaved_schedule();
  if (k.schedule == pipeline_schedule::interleaved && k.virtual_stages < 2)
    rules::interleaved_schedule_needs_at_least_two_virtual_stages();
}

constexpr void validate_fn::operator()(const training_space& t) const {
  detail::check_training_space(t, detail::model_if_known{});
}

constexpr void validate_fn::operator()(const model::model& m, const training_space& t) const {
  detail::check_training_space(t, detail::model_if_known{true, m.config});
}

/// The one training run a training space allows when each of its lists holds one value (a run fixed with
/// `dsl::training`): its knobs. The tensor-parallel width, when one is listed, is `t.knobs.tensor_parallel`.
inline constexpr auto fixed_knobs = [](const training_space& t) constexpr -> training_knobs {
  validate(t);
  const knob_space& k = t.knobs;
  if (k.microbatches.size() != 1 || k.recompute.size() != 1 || k.sequence_parallel.size() != 1)
    rules::fixed_knobs_need_one_value_per_knob();
  return knobs_of(k, knob_setting{k.microbatches[0], k.recompute[0], k.sequence_parallel[0]}, t.global_batch,
                  t.sequence);
};

}  // namespace phaze::train
