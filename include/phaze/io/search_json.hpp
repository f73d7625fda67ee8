/// @file
/// JSON of the co-search (docs/search.md): search specs (the JSON form of the C++ space DSL and the knobs),
/// one design result per line of results.jsonl (written and read back for --resume and for MPI exchange),
/// and best.json.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "phaze/core/error.hpp"
#include "phaze/core/limits.hpp"
#include "phaze/core/names.hpp"
#include "phaze/hw/area.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/space.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/io/device_json.hpp"
#include "phaze/io/estimate_report.hpp"
#include "phaze/io/model_source.hpp"
#include "phaze/io/schema.hpp"
#include "phaze/search/result.hpp"
#include "phaze/search/spec.hpp"
#include "phaze/train/knob_space.hpp"
#include "phaze/train/knobs.hpp"
#include "phaze/train/memory.hpp"

namespace phaze::io {

namespace detail::search_json {
inline constexpr double mib = 1024.0 * 1024.0;
inline constexpr double gib = 1024.0 * 1024.0 * 1024.0;
/// The largest chip area a spec may give: 1e6 mm2, twenty times a whole 300-mm wafer's usable die (46,225
/// mm2).
inline constexpr double most_area_mm2 = 1e6;

[[noreturn]] inline void bad(const std::string& where, const std::string& what) {
  throw input_error("search spec: " + where + ": " + what);
}

/// Rejects keys outside `allowed`, suggesting the closest.
inline void check_keys(const nlohmann::json& j, const std::vector<std::string>& allowed,
                       const std::string& where) {
  if (!j.is_object()) bad(where, "must be a JSON object");
  for (const auto& item : j.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) != allowed.end()) continue;
    const auto close = closest_names(item.key(), allowed);
    bad(where, "unknown key '" + item.key() + "'" +
                   (close.empty() ? "; allowed: " + quoted_list(allowed)
                                  : "; did you mean " + quoted_list(close) + "?"));
  }
}

/// A space dimension: {"pow2": [lo, hi]}, {"one_of": [...]}, {"same_as": "other"} or a single number.
struct dimension_key {
  std::string_view key;
  hw::axis axis;
  double scale;  ///< JSON unit in the dimension's base unit (MiB / GiB for sizes)
  double most;   ///< the largest value a spec may give, in the JSON unit (docs/limits.md)
};
// The largest values: 65,536 cores of 4096 x 4096 cells, 1 TiB of global buffer and 64 TiB of HBM, each far
// beyond any chip (a TPUv4 core is 128 x 128; the largest HBM stacks hold 288 GB).
inline constexpr std::array<dimension_key, 7> dimensions{
    {{"tensor_cores", hw::axis::tensor_cores, 1.0, 65536},
     {"tc_width", hw::axis::tc_width, 1.0, 4096},
     {"tc_depth", hw::axis::tc_depth, 1.0, 4096},
     {"vector_cores", hw::axis::vector_cores, 1.0, 65536},
     {"vc_width", hw::axis::vc_width, 1.0, 4096},
     {"global_buffer_mib", hw::axis::global_buffer, mib, 1048576},
     {"hbm_gib", hw::axis::hbm, gib, 65536}}};

/// A whole number in [1, most] at `where`.
inline std::int64_t whole(const nlohmann::json& v, const std::string& where, std::int64_t most) {
  if (const std::string problem = device_file::whole_number_problem(v, 1, most); !problem.empty())
    bad(where, problem + ", got " + v.dump());
  return device_file::whole_number_value(v);
}

inline double number(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number()) bad(where, "must be a number, got " + v.dump());
  return v.get<double>();
}

/// A number in (0, most] at `where`.
inline double positive(const nlohmann::json& v, const std::string& where, double most) {
  const double x = number(v, where);
  if (!std::isfinite(x) || x <= 0.0 || x > most) {
    bad(where, "must be above 0 and at most " + std::to_string(static_cast<long long>(most)) +
                   " (docs/limits.md), got " + v.dump());
  }
  return x;
}

inline void read_dimension(hw::space& s, const dimension_key& d, const nlohmann::json& v) {
  const std::string where = "space." + std::string{d.key};
  if (v.is_number()) {
    s.set_values(d.axis, {positive(v, where, d.most) * d.scale});
    return;
  }
  check_keys(v, {"pow2", "one_of", "same_as"}, where);
  if (v.size() != 1) bad(where, "give exactly one of pow2, one_of or same_as");
  if (v.contains("pow2")) {
    const auto& b = v.at("pow2");
    if (!b.is_array() || b.size() != 2) bad(where, "pow2 takes [lo, hi]");
    s.set_pow2(d.axis, positive(b[0], where, d.most) * d.scale, positive(b[1], where, d.most) * d.scale);
  } else if (v.contains("one_of")) {
    const auto& list = v.at("one_of");
    if (!list.is_array() || list.empty()) bad(where, "one_of takes a non-empty list of numbers");
    if (list.size() > hw::space::max_values) bad(where, "one_of takes at most 64 values");
    hw::space::values_type values;
    for (const auto& x : list) values.push_back(positive(x, where, d.most) * d.scale);
    s.set_values(d.axis, values);
  } else {
    const auto& target = v.at("same_as");
    if (!target.is_string()) bad(where, "same_as takes a dimension name");
    for (const auto& other : dimensions) {
      if (other.key == target.get<std::string>()) {
        s.set_same_as(d.axis, other.axis);
        return;
      }
    }
    bad(where, "same_as names no dimension: " + target.dump());
  }
}

inline model::recompute parse_mode(const nlohmann::json& v) {
  if (!v.is_string()) bad("knobs.recompute", "takes names: none, selective, full");
  return train::parse_recompute(v.get<std::string>());
}

/// A whole number of a results.jsonl record within T's range: a JSON integer (never a float, which a
/// record never holds and whose conversion would be undefined beyond the range); input_error naming `field`
/// otherwise.
template <class T>
T whole_number(const nlohmann::json& v, std::string_view field) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (i >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
        (i < 0 || static_cast<std::uint64_t>(i) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())))
      return static_cast<T>(i);
  }
  throw input_error(std::string{field} + " must be a whole number from " +
                    std::to_string(std::numeric_limits<T>::min()) + " to " +
                    std::to_string(std::numeric_limits<T>::max()) + ", got " + v.dump());
}
}  // namespace detail::search_json

/// A space from its JSON form (docs/search.md): dimensions as {"pow2": [lo, hi]}, {"one_of": [...]},
/// {"same_as": "dim"} or a number; "area_budget_mm2", "min_area_mm2", "exempt_single_core". Omitted
/// dimensions keep the tpuv4-like reference's value; an omitted budget is the reference's area.
/// "phaze-default" (a string) is PHAZE's published space.
inline hw::space space_from_json(const nlohmann::json& j) {
  namespace sj = detail::search_json;
  if (j.is_string()) {
    if (j.get<std::string>() == "phaze-default") return hw::phaze_default_space;
    sj::bad("space", "the only named space is \"phaze-default\"; give an object for another");
  }
  std::vector<std::string> keys{"area_budget_mm2", "min_area_mm2", "exempt_single_core"};
  for (const auto& d : sj::dimensions) keys.emplace_back(d.key);
  sj::check_keys(j, keys, "space");
  hw::space s{hw::tpuv4_like};
  s.set_area_budget(hw::area_of(hw::tpuv4_like));
  // Plain dimensions first, so same_as can tie to them in any key order.
  for (const bool tied : {false, true}) {
    for (const auto& d : sj::dimensions) {
      if (!j.contains(d.key)) continue;
      const auto& v = j.at(std::string{d.key});
      if ((v.is_object() && v.contains("same_as")) == tied) sj::read_dimension(s, d, v);
    }
  }
  if (j.contains("area_budget_mm2"))
    s.set_area_budget(
        hw::area{sj::positive(j.at("area_budget_mm2"), "space.area_budget_mm2", sj::most_area_mm2)});
  if (j.contains("min_area_mm2"))
    s.set_min_area(hw::area{sj::positive(j.at("min_area_mm2"), "space.min_area_mm2", sj::most_area_mm2)});
  if (j.contains("exempt_single_core")) {
    if (!j.at("exempt_single_core").is_boolean())
      sj::bad("space.exempt_single_core", "must be true or false");
    s.set_exempt_single_core(j.at("exempt_single_core").get<bool>());
  }
  return s;
}

/// The knobs of a search spec from JSON (docs/search.md): {"microbatches": [1, 2, 4], "recompute": ["none",
/// "full"], "sequence_parallel": [false, true], "tensor_parallel": [1, 2, 4], "optimizer": "adam",
/// "distributed_optimizer": false, "schedule": "interleaved", "virtual_stages": 2}, every key optional (the
/// defaults are train::knob_space's). The same train::knob_space `dsl::training` builds in C++.
inline train::knob_space knobs_from_json(const nlohmann::json& k) {
  namespace sj = detail::search_json;
  sj::check_keys(k,
                 {"microbatches", "recompute", "sequence_parallel", "tensor_parallel", "optimizer",
                  "distributed_optimizer", "schedule", "virtual_stages"},
                 "knobs");
  train::knob_space out;
  // A list of at most `list.capacity()` values, each read by `read`.
  auto read_list = [&](const char* key, auto& list, auto read) {
    if (!k.contains(key)) return;
    const auto& v = k.at(key);
    const std::string where = std::string{"knobs."} + key;
    if (!v.is_array() || v.empty()) sj::bad(where, "must be a non-empty list");
    if (v.size() > list.capacity())
      sj::bad(where, "takes at most " + std::to_string(list.capacity()) + " values, each once");
    list.clear();
    for (const auto& x : v) list.push_back(read(x, where));
  };
  read_list("microbatches", out.microbatches, [](const nlohmann::json& x, const std::string& where) {
    return sj::whole(x, where, limits::max_global_batch);
  });
  read_list("recompute", out.recompute,
            [](const nlohmann::json& x, const std::string&) { return sj::parse_mode(x); });
  read_list("sequence_parallel", out.sequence_parallel,
            [](const nlohmann::json& x, const std::string& where) {
              if (!x.is_boolean()) sj::bad(where, "takes true and/or false");
              return x.get<bool>();
            });
  read_list("tensor_parallel", out.tensor_parallel, [](const nlohmann::json& x, const std::string& where) {
    return static_cast<int>(sj::whole(x, where, limits::max_devices));
  });
  if (k.contains("optimizer")) {
    if (!k.at("optimizer").is_string()) sj::bad("knobs.optimizer", "adam or sgd");
    out.opt = train::parse_optimizer(k.at("optimizer").get<std::string>());
  }
  if (k.contains("distributed_optimizer")) {
    if (!k.at("distributed_optimizer").is_boolean()) sj::bad("knobs.distributed_optimizer", "true or false");
    out.distributed_optimizer = k.at("distributed_optimizer").get<bool>();
  }
  if (k.contains("schedule")) {
    if (!k.at("schedule").is_string()) sj::bad("knobs.schedule", "1f1b, gpipe or interleaved");
    out.schedule = train::parse_pipeline_schedule(k.at("schedule").get<std::string>());
  }
  if (k.contains("virtual_stages")) {
    out.virtual_stages = static_cast<int>(sj::whole(k.at("virtual_stages"), "knobs.virtual_stages", 1024));
  }
  train::validate(out);
  return out;
}

/// A whole search spec from JSON: {"model", "devices", "global_batch", "sequence", "vocab", "space",
/// "knobs" (knobs_from_json)}. Every key but "model" is optional (PHAZE's setting).
inline search::spec spec_from_json(const nlohmann::json& j) {
  namespace sj = detail::search_json;
  sj::check_keys(j, {"model", "devices", "global_batch", "sequence", "vocab", "space", "knobs"}, "top level");
  search::spec s;
  if (!j.contains("model") || !j.at("model").is_string())
    sj::bad("model", "give a zoo name or a config.json path");
  s.model = load_model(j.at("model").get<std::string>());
  auto integer = [&](const char* key, auto& field, std::int64_t most) {
    if (!j.contains(key)) return;
    field = static_cast<std::remove_reference_t<decltype(field)>>(sj::whole(j.at(key), key, most));
  };
  integer("devices", s.devices, limits::max_devices);
  integer("global_batch", s.global_batch, limits::max_global_batch);
  integer("sequence", s.sequence, limits::max_sequence);
  std::int64_t vocab = 0;
  integer("vocab", vocab, limits::max_vocab);
  if (vocab > 0) s.model = model::with_vocab(s.model, vocab);
  if (j.contains("space")) s.space = space_from_json(j.at("space"));
  if (j.contains("knobs")) s.knobs = knobs_from_json(j.at("knobs"));
  search::validate(s);
  return s;
}

/// The search spec file at `path` (docs/search.md), read within file_rules::search_spec; `model` replaces its
/// "model" when not empty, and a spec without one searches for `default_model`. Every error is an input_error
/// naming the file.
inline search::spec read_search_spec(const std::filesystem::path& path, std::string_view model,
                                     std::string_view default_model) {
  nlohmann::json j = read_json_file(path, file_rules::search_spec);
  const std::string where = "search spec file '" + path.string() + "'";
  if (!j.is_object()) {
    throw input_error(where + " must hold a JSON object ({\"model\": ..., \"space\": ...}), got " +
                      std::string{j.type_name()} + "; see docs/search.md");
  }
  if (!model.empty()) j["model"] = std::string{model};
  if (!j.contains("model")) j["model"] = std::string{default_model};
  try {
    return spec_from_json(j);
  } catch (const input_error& e) {
    throw input_error(where + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {  // a guard: the reader checks types before reading values
    throw input_error(where + ": " + e.what());
  }
}

/// The canonical JSON of a spec: what a resume compares to make sure it continues the same search.
inline nlohmann::ordered_json spec_to_json(const search::spec& s) {
  nlohmann::ordered_json space;
  for (const auto& d : detail::search_json::dimensions) {
    if (const auto tied = s.space.same_as(d.axis)) {
      for (const auto& other : detail::search_json::dimensions)
        if (other.axis == *tied) space[std::string{d.key}] = {{"same_as", std::string{other.key}}};
      continue;
    }
    auto values = nlohmann::ordered_json::array();
    for (const double v : s.space.values(d.axis)) values.push_back(v / d.scale);
    space[std::string{d.key}] = {{"one_of", values}};
  }
  space["area_budget_mm2"] = s.space.area_budget().value();
  space["min_area_mm2"] = s.space.min_area().value();
  space["exempt_single_core"] = s.space.exempts_single_core();
  auto modes = nlohmann::ordered_json::array();
  for (const auto m : s.knobs.recompute) modes.push_back(std::string{model::to_string(m)});
  const auto& k = s.knobs;
  nlohmann::ordered_json knobs{
      {"microbatches", std::vector<std::int64_t>(k.microbatches.begin(), k.microbatches.end())},
      {"recompute", modes},
      {"sequence_parallel", std::vector<bool>(k.sequence_parallel.begin(), k.sequence_parallel.end())},
      {"tensor_parallel", std::vector<int>(k.tensor_parallel.begin(), k.tensor_parallel.end())},
      {"optimizer", std::string{train::to_string(k.opt)}},
      {"distributed_optimizer", k.distributed_optimizer}};
  // Written only when not the default, so the spec.json of a search run before these keys existed still
  // matches on --resume.
  if (k.schedule != train::pipeline_schedule::one_f_one_b)
    knobs["schedule"] = std::string{train::to_string(k.schedule)};
  if (k.virtual_stages != 1) knobs["virtual_stages"] = k.virtual_stages;
  const auto& c = s.model.config;
  return {{"model", std::string{c.name.view()}},
          {"layers", c.layers},
          {"hidden", c.hidden},
          {"heads", c.heads},
          {"kv_heads", c.kv_heads_or_default()},
          {"ffn", c.ffn},
          {"vocab", c.vocab},
          {"tied_embeddings", c.tied_embeddings},
          {"parameters", model::parameter_count(s.model)},
          {"devices", s.devices},
          {"global_batch", s.global_batch},
          {"sequence", s.sequence > 0 ? s.sequence : s.model.config.sequence},
          {"space", space},
          {"knobs", knobs}};
}

/// A systolic design's parameters.
inline nlohmann::ordered_json design_json(const hw::device& d) {
  const auto& s = d.systolic;
  return {{"tensor_cores", s.num_tc},
          {"tc_width", s.tc_width},
          {"tc_depth", s.tc_depth},
          {"vector_cores", s.num_vc},
          {"vc_width", s.vc_width},
          {"global_buffer_mib", s.glb.value() / detail::search_json::mib},
          {"hbm_gib", d.hbm.value() / detail::search_json::gib},
          {"clock_ghz", s.clock.value() / 1e9}};
}

/// One line of results.jsonl: the design (by index and parameters), what happened, and its best plan.
inline nlohmann::ordered_json result_json(const search::design_result& r) {
  nlohmann::ordered_json j{{"index", r.index},
                           {"status", std::string{search::to_string(r.status)}},
                           {"design", design_json(r.device)},
                           {"area_mm2", r.die_area.value()},
                           {"upper_bound_samples_per_s", r.upper_bound_samples_per_s},
                           {"configurations", r.configurations}};
  if (r.status == search::outcome::infeasible)
    j["smallest_memory_need_bytes"] = r.smallest_memory_need.value();
  if (r.status != search::outcome::evaluated) return j;
  auto blocks = nlohmann::ordered_json::array();
  for (const auto& s : r.split) blocks.push_back(s.blocks);
  j["throughput_samples_per_s"] = r.samples_per_s;
  j["scheduler"] = r.scheduler;
  j["schedule_gap"] = r.schedule_gap;
  j["time_per_batch_s"] = r.estimate.time_per_batch.value();
  j["mfu"] = r.estimate.mfu;
  j["peak_memory_bytes"] = r.estimate.peak_memory.value();
  j["energy_per_sample_j"] = r.energy_per_sample.value();
  j["plan"] = {{"tp", r.parallel.tp},
               {"pp", r.parallel.pp},
               {"dp", r.parallel.dp},
               {"microbatch", r.knobs.microbatch},
               {"recompute", std::string{model::to_string(r.knobs.recompute)}},
               {"sequence_parallel", r.knobs.sequence_parallel},
               {"stage_blocks", blocks}};
  return j;
}

/// A results.jsonl line back into a design result of `s`, whose designs by index are `designs`
/// (s.space.designs(): made once for every line of a file; the estimate is left for
/// search::restore_estimate; the throughput and energy are read back exactly). Throws input_error on a
/// malformed line or a design that does not match the space.
inline search::design_result result_from_json(const nlohmann::json& j, const search::spec& s,
                                              const hw::space::design_table& designs) {
  try {
    search::design_result r;
    using detail::search_json::whole_number;
    r.index = whole_number<std::uint64_t>(j.at("index"), "index");
    if (r.index >= designs.size()) throw input_error("design index out of the space");
    r.device = designs[r.index];
    if (nlohmann::json(design_json(r.device)) != nlohmann::json(j.at("design"))) {
      throw input_error("design differs from the space's");
    }
    r.die_area = hw::area{j.at("area_mm2").get<double>()};
    r.upper_bound_samples_per_s = j.at("upper_bound_samples_per_s").get<double>();
    if (const auto c = j.find("configurations"); c != j.end())
      r.configurations = whole_number<std::uint64_t>(*c, "configurations");
    const std::string status = j.at("status").get<std::string>();
    if (status == "pruned") {
      r.status = search::outcome::pruned;
      return r;
    }
    if (status == "infeasible") {
      r.status = search::outcome::infeasible;
      r.smallest_memory_need = bytes{j.at("smallest_memory_need_bytes").get<double>()};
      return r;
    }
    if (status != "evaluated") throw input_error("unknown status '" + status + "'");
    r.status = search::outcome::evaluated;
    r.samples_per_s = j.at("throughput_samples_per_s").get<double>();
    r.scheduler = j.value("scheduler", std::string{"list"});
    if (r.scheduler != "list" && r.scheduler != "ilp")
      throw input_error("unknown scheduler '" + r.scheduler + "'");
    r.schedule_gap = j.value("schedule_gap", 0.0);
    if (!(r.schedule_gap >= 0.0 && r.schedule_gap < 1.0))
      throw input_error("schedule_gap must lie in [0, 1)");
    r.energy_per_sample = hw::energy{j.at("energy_per_sample_j").get<double>()};
    const auto& p = j.at("plan");
    r.parallel = {whole_number<int>(p.at("tp"), "plan.tp"), whole_number<int>(p.at("pp"), "plan.pp"),
                  whole_number<int>(p.at("dp"), "plan.dp")};
    r.knobs =
        train::knobs_of(s.knobs,
                        train::knob_setting{whole_number<std::int64_t>(p.at("microbatch"), "plan.microbatch"),
                                            train::parse_recompute(p.at("recompute").get<std::string>()),
                                            p.at("sequence_parallel").get<bool>()},
                        s.global_batch);
    // The plan must be one the search could have made: the degrees use the cluster, the knobs are the
    // spec's, the split covers the model (checked as `phaze estimate` checks a plan).
    const model::model run = s.sequence > 0 ? model::with_sequence(s.model, s.sequence) : s.model;
    train::validate(run, r.parallel, r.knobs, s.devices);
    const auto& mbs = s.knobs.microbatches;
    if (std::find(mbs.begin(), mbs.end(), r.knobs.microbatch) == mbs.end()) {
      throw input_error("microbatch not in the spec's list");
    }
    const nlohmann::json& stage_blocks = p.at("stage_blocks");
    if (!stage_blocks.is_array()) throw input_error("plan.stage_blocks must list whole numbers");
    std::vector<std::int64_t> blocks;
    for (const auto& b : stage_blocks) blocks.push_back(whole_number<std::int64_t>(b, "plan.stage_blocks"));
    r.split = train::split_of_blocks(run, blocks, r.parallel.pp);
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw input_error(std::string{"malformed result: "} + e.what());
  }
}

/// result_from_json for one line: the space's designs enumerated for it alone.
inline search::design_result result_from_json(const nlohmann::json& j, const search::spec& s) {
  return result_from_json(j, s, s.space.designs());
}

/// The `phaze estimate` command that times a search's best plan again on its design written as a device file
/// (`device_file`, best-device.json): every knob the search fixed is spelled out (the search's step, memory
/// headroom and vocabulary padding are not `estimate`'s defaults), so it prints the time best.json holds.
/// MODEL is the model's name: a zoo name, or for a HuggingFace config the name phaze gave it (give the
/// config's path instead).
inline std::string best_estimate_command(const search::spec& s, const search::summary& sum,
                                         const std::string& device_file) {
  const auto& b = sum.best;
  const auto& k = b.knobs;
  const auto& c = search::model_of(s).config;
  std::string cmd = "phaze estimate " + std::string{c.name.view()} + " --device " + device_file +
                    " --devices " + std::to_string(s.devices) + " --tp " + std::to_string(b.parallel.tp) +
                    " --pp " + std::to_string(b.parallel.pp) + " --dp " + std::to_string(b.parallel.dp);
  if (b.parallel.cp > 1) cmd += " --cp " + std::to_string(b.parallel.cp);
  if (b.parallel.ep > 1) cmd += " --ep " + std::to_string(b.parallel.ep);
  cmd += " --global-batch " + std::to_string(s.global_batch) + " --microbatch " +
         std::to_string(k.microbatch) + " --seq " + std::to_string(c.sequence) + " --vocab " +
         std::to_string(c.vocab) + " --recompute " + std::string{model::to_string(k.recompute)};
  if (k.recompute_layers > 0) cmd += " --recompute-layers " + std::to_string(k.recompute_layers);
  if (k.recompute_by != train::recompute_method::block)
    cmd += " --recompute-method " + std::string{train::to_string(k.recompute_by)};
  cmd += " --schedule " + std::string{train::to_string(k.schedule)};
  if (k.virtual_stages > 1) cmd += " --vp " + std::to_string(k.virtual_stages);
  if (k.sequence_parallel) cmd += " --sequence-parallel";
  cmd += " --optimizer " + std::string{train::to_string(k.opt)};
  if (k.distributed_optimizer) cmd += " --distributed-optimizer";
  cmd += " --precision " + std::string{hw::to_string(k.precision)} + " --attention " +
         (k.fused_attention ? "fused" : "unfused");
  std::string overlap;
  for (const auto& name : overlap_names(k, b.parallel.ep)) overlap += (overlap.empty() ? "" : ",") + name;
  cmd += " --overlap " + (overlap.empty() ? std::string{"none"} : overlap);
  std::array<char, 32> headroom{};
  std::snprintf(headroom.data(), headroom.size(), "%g", k.memory_headroom);
  std::array<char, 32> host{};
  std::snprintf(host.data(), host.size(), "%g", k.host_overhead * 1e6);
  cmd += " --memory-headroom " + std::string{headroom.data()} + " --host-overhead " +
         std::string{host.data()} + " --vocab-padding " + std::to_string(k.vocab_padding);
  if (k.grad_reduce_in_bf16) cmd += " --grad-reduce-in-bf16";
  if (!k.gradient_accumulation_fusion) cmd += " --no-gradient-accumulation-fusion";
  if (k.foreach_optimizer) cmd += " --optimizer-kernels foreach";
  if (k.fp8_param_gather) cmd += " --fp8-param-gather";
  if (k.fused_loss) cmd += " --cross-entropy fused";
  if (k.eager_vector) cmd += " --vector-kernels eager";
  if (k.dispatcher != train::moe_dispatcher::all_to_all)
    cmd += " --moe-dispatcher " + std::string{train::to_string(k.dispatcher)};
  if (k.unfused_permutation) cmd += " --moe-permutation unfused";
  if (!b.split.empty()) {
    std::string blocks;
    for (const auto& st : b.split) blocks += (blocks.empty() ? "" : ",") + std::to_string(st.blocks);
    cmd += " --stage-blocks " + blocks;
  }
  return cmd;
}

/// best.json: the best design, its plan and metrics (the fields of `phaze plan`), and `baselines` (name ->
/// design, plan, throughput_samples_per_s), the Pareto front's size and the search's counts.
inline nlohmann::ordered_json best_json(const search::spec& s, const search::summary& sum) {
  const model::model run = search::model_of(s);
  const auto& b = sum.best;
  nlohmann::ordered_json j =
      estimate_json(run, search::cluster_of(s, b.device), b.parallel, b.knobs, b.estimate);
  j["scheduler"] = b.scheduler;
  j["schedule_gap"] = b.schedule_gap;
  j["design_index"] = b.index;
  j["design"] = design_json(b.device);
  j["area_mm2"] = b.die_area.value();
  j["energy_per_sample_j"] = b.energy_per_sample.value();
  auto blocks = nlohmann::ordered_json::array();
  for (const auto& st : b.split) blocks.push_back(st.blocks);
  j["plan"]["stage_blocks"] = blocks;
  nlohmann::ordered_json base = nlohmann::ordered_json::object();
  for (const auto& x : sum.baselines) {
    nlohmann::ordered_json e = result_json(x.result);
    e.erase("index");
    e["description"] = x.description;
    e["throughput_samples_per_s"] = x.result.samples_per_s;
    e["best_over_baseline"] = x.result.samples_per_s > 0 ? b.samples_per_s / x.result.samples_per_s : 0.0;
    base[x.name] = e;
  }
  j["baselines"] = base;
  j["estimate_command"] = best_estimate_command(s, sum, "best-device.json");
  j["search"] = {{"designs", sum.designs},
                 {"evaluated", sum.evaluated},
                 {"pruned", sum.pruned},
                 {"infeasible", sum.infeasible},
                 {"pareto_designs", sum.pareto.size()},
                 {"space", sum.space},
                 {"scheduler", sum.scheduler},
                 {"refined", sum.refined}};
  return with_schema(schemas::search_best, j);
}

/// best-device.json: the best design of a search as a device file (docs/devices.md) in the spec's node, named
/// `design-INDEX` after its place in the space's enumeration, with a `source` saying where it came from, so
/// `phaze devices`, `phaze estimate --device` and `phaze plan --device` read it back as the same device.
inline nlohmann::ordered_json best_device_json(const search::spec& s, const search::summary& sum) {
  hw::device d = sum.best.device;
  d.name = fixed_string<32>{"design-" + std::to_string(sum.best.index)};
  nlohmann::ordered_json j = device_to_json(d, s.node);
  nlohmann::ordered_json out = with_schema(schemas::device, {});
  for (auto it = j.begin(); it != j.end(); ++it) {
    out[it.key()] = it.value();
    if (it.key() == "name") {
      out["source"] = "phaze search: the best design for " + sum.model + " on " +
                      std::to_string(sum.devices) + " devices, global batch " +
                      std::to_string(sum.global_batch) + " (" + sum.space + ")";
    }
  }
  return out;
}

}  // namespace phaze::io
