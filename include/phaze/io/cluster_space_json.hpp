/// @file
/// Cluster-space files (schema "phaze.cluster-space") read into a search::cluster_space, and the fronts a
/// cluster search finds written as JSON (schema "phaze.cluster-front") and as text tables
/// (docs/cluster-search.md). A device type's "device" and "links" are read by the cluster file's own group
/// reader (io/cluster_json.hpp): a preset name, a device file or an inline device object, with its node's
/// links overridable. Reading names every field it rejects and every limit it enforces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "phaze/cluster/cluster.hpp"
#include "phaze/core/error.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/io/cluster_json.hpp"
#include "phaze/io/device_json.hpp"
#include "phaze/io/table.hpp"
#include "phaze/model/model.hpp"
#include "phaze/search/cluster_space.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::io {

/// A cluster space read from a file, with what reports say about it.
struct cluster_space_description {
  search::cluster_space value;
  std::string name;
  std::string source;                       ///< the file (and its "source" field)
  std::vector<std::string> device_sources;  ///< what each type's "device" named: a preset, a file, "inline"
};

/// Limits of a cluster-space file, each named in the message that enforces it (docs/cluster-search.md).
struct cluster_space_file_limits {
  static constexpr std::uintmax_t max_file_bytes = 1U << 20U;
  static constexpr int max_nesting = 32;
  static constexpr std::size_t max_device_types = search::cluster_space::max_device_types;
  static constexpr std::size_t max_compositions = search::cluster_space::max_compositions;
  static constexpr std::size_t max_label_chars = 40;
};

/// A cluster space from its JSON form (docs/cluster-search.md). `dir` is the folder device file paths are
/// relative to. Throws input_error naming the field; a space with more compositions than
/// cluster_space_file_limits::max_compositions within its budget is refused with what to change.
inline cluster_space_description cluster_space_from_json(const nlohmann::json& j,
                                                         const std::filesystem::path& dir = {},
                                                         std::string_view fallback_name = {}) {
  using namespace detail::cluster_file;
  using limits = cluster_space_file_limits;
  if (!j.is_object()) {
    throw input_error(
        "a cluster space must be one JSON object ({\"budget_usd\": ..., \"devices\": [...]}), got " +
        shown(j));
  }
  const section top{j, ""};
  top.check_keys(
      {"schema", "version", "name", "source", "comment", "budget_usd", "power_cap_w", "max_types", "devices"},
      "a cluster space");
  if (const auto schema = top.text("schema"); schema && *schema != "phaze.cluster-space") {
    field_error("schema", "must be \"phaze.cluster-space\", got \"" + *schema + "\"");
  }
  if (const auto* v = top.get("version")) {
    if (integer(*v, "version", 1, 1000) != 1)
      field_error("version", "must be 1 (the only version), got " + shown(*v));
  }
  cluster_space_description out;
  out.name = top.text("name").value_or(std::string{fallback_name});
  (void)top.text("comment");
  out.source = top.text("source").value_or("");
  search::cluster_space& space = out.value;

  const nlohmann::json* budget = top.get("budget_usd");
  if (budget == nullptr) field_error("budget_usd", "is missing (the most the cluster may cost, in USD)");
  space.budget_usd = positive(*budget, "budget_usd");
  if (const auto* cap = top.get("power_cap_w"))
    space.power_cap = search::watts{positive(*cap, "power_cap_w")};
  if (const auto* types = top.get("max_types"))
    space.max_types =
        static_cast<int>(integer(*types, "max_types", 1, search::cluster_space::max_types_per_cluster));

  const nlohmann::json* devices = top.get("devices");
  if (devices == nullptr || !devices->is_array() || devices->empty()) {
    field_error("devices",
                "must be a non-empty array of device types ([{\"device\": \"h100-sxm\", \"price_usd\": ..., "
                "\"power_w\": ..., \"max\": ...}])" +
                    (devices == nullptr ? std::string{", and is missing"} : ", got " + shown(*devices)));
  }
  if (devices->size() > limits::max_device_types) {
    field_error("devices", "holds " + std::to_string(devices->size()) +
                               " device types; phaze accepts at most " +
                               std::to_string(limits::max_device_types));
  }
  for (std::size_t i = 0; i < devices->size(); ++i) {
    const nlohmann::json& dj = (*devices)[i];
    const std::string path = "devices[" + std::to_string(i) + "]";
    if (!dj.is_object()) {
      field_error(path,
                  "must be an object ({\"device\": ..., \"price_usd\": ..., \"power_w\": ..., \"max\": "
                  "...}), got " +
                      shown(dj));
    }
    const section d{dj, path};
    d.check_keys({"device", "links", "label", "price_usd", "power_w", "min", "max", "step", "comment"},
                 "a device type");
    search::device_offer offer;
    std::string named;
    const device_and_node dn = group_device(d, dir, named);  // the cluster file's group reader
    offer.device = dn.device;
    offer.node = dn.node;
    out.device_sources.push_back(named);
    const nlohmann::json* price = d.get("price_usd");
    if (price == nullptr)
      field_error(d.name("price_usd"), "is missing (what one device costs, its share of the node included)");
    offer.price_usd = positive(*price, d.name("price_usd"));
    const nlohmann::json* power = d.get("power_w");
    if (power == nullptr)
      field_error(d.name("power_w"), "is missing (what one device draws, its share of the node included)");
    offer.power = search::watts{positive(*power, d.name("power_w"))};
    const nlohmann::json* most = d.get("max");
    if (most == nullptr)
      field_error(d.name("max"), "is missing (the most devices of this type a cluster holds)");
    offer.max = static_cast<int>(integer(*most, d.name("max"), 1, cluster::cluster::max_devices));
    if (const auto* least = d.get("min")) {
      offer.min = static_cast<int>(integer(*least, d.name("min"), 0, offer.max));
    }
    if (const auto* step = d.get("step")) {
      offer.step = static_cast<int>(integer(*step, d.name("step"), 1, cluster::cluster::max_devices));
    }
    if (const auto label = d.text("label")) {
      if (label->empty() || label->size() > limits::max_label_chars) {
        field_error(d.name("label"), "must be 1 to " + std::to_string(limits::max_label_chars) +
                                         " characters, got " + shown(*d.get("label")));
      }
      offer.label = *label;
    } else {
      offer.label = named != "inline" && hw::find_preset(named) ? named : offer.device.name.str();
    }
    space.devices.push_back(std::move(offer));
  }
  for (std::size_t i = 0; i < space.devices.size(); ++i) {
    for (std::size_t k = 0; k < i; ++k) {
      if (space.devices[k].label == space.devices[i].label) {
        field_error("devices[" + std::to_string(i) + "].label",
                    "repeats \"" + space.devices[i].label + "\" (devices[" + std::to_string(k) +
                        "]); give each device type its own label");
      }
    }
  }
  // Counts the compositions now, so that a space too large is refused when read.
  (void)search::compositions_of(space);
  return out;
}

/// The cluster-space file at `path`: read (size and nesting bounded), parsed and checked; every error names
/// the file and the field. A file without "name" is named after its stem.
inline cluster_space_description read_cluster_space_file(const std::filesystem::path& path) {
  using limits = cluster_space_file_limits;
  const std::string where = "cluster-space file '" + path.string() + "'";
  const nlohmann::json json =
      read_json_file(path, {"cluster-space", limits::max_file_bytes,
                            ", the most phaze reads for a cluster space", limits::max_nesting, 4});
  try {
    cluster_space_description d = cluster_space_from_json(json, path.parent_path(), path.stem().string());
    d.source = path.string() + (d.source.empty() ? std::string{} : " (" + d.source + ")");
    return d;
  } catch (const input_error& e) {
    throw input_error(where + ": " + e.what());
  }
}

namespace detail::cluster_front {
/// A point's device types (indices into the space) in rank order, first stages first: the best plan's
/// order, or the space's order when the point was not planned.
inline std::vector<std::size_t> rank_order(const search::cluster_point& p) {
  if (!p.group_order.empty()) return p.group_order;
  std::vector<std::size_t> order;
  for (std::size_t t = 0; t < p.mix.counts.size(); ++t)
    if (p.mix.counts[t] > 0) order.push_back(t);
  return order;
}

/// The labels of a point's device types in rank order.
inline std::vector<std::string> order_labels(const search::cluster_space& s, const search::cluster_point& p) {
  std::vector<std::string> out;
  for (const std::size_t t : rank_order(p)) out.push_back(s.devices[t].label);
  return out;
}

/// The device type label of each pipeline stage of an evaluated point's plan.
inline std::vector<std::string> stage_labels(const search::cluster_space& s, const search::cluster_point& p) {
  std::vector<std::string> out;
  if (!p.plan || !p.cluster) return out;
  const auto& par = p.plan->parallel;
  for (int st = 0; st < par.pp; ++st) {
    const std::size_t group = p.cluster->group_index(st * par.tp * par.dp);
    out.push_back(s.devices[p.group_order.at(group)].label);
  }
  return out;
}
}  // namespace detail::cluster_front

/// "16 x h100-sxm + 8 x a100-80gb": a composition in rank order (first stages first).
inline std::string mix_text(const search::cluster_space& s, const search::cluster_point& p) {
  std::string out;
  for (const std::size_t t : detail::cluster_front::rank_order(p)) {
    if (!out.empty()) out += " + ";
    out += fmt::format("{} x {}", p.mix.counts[t], s.devices[t].label);
  }
  return out;
}

/// "tp 1, pp 2, dp 8, mb 4, none": an evaluated point's plan.
inline std::string cluster_plan_text(const search::cluster_point& p) {
  if (!p.plan) return std::string{search::to_string(p.status)};
  const auto& r = *p.plan;
  std::string recompute{model::to_string(r.knobs.recompute)};
  if (r.knobs.sequence_parallel && r.parallel.tp > 1) recompute += "+SP";
  return fmt::format("tp {}, pp {}, dp {}, mb {}, {}", r.parallel.tp, r.parallel.pp, r.parallel.dp,
                     r.knobs.microbatch, recompute);
}

/// One point of a front as JSON: its composition, numbers and best plan.
inline nlohmann::ordered_json cluster_point_json(const search::cluster_space& s,
                                                 const search::cluster_point& p,
                                                 const train::training_knobs& k) {
  nlohmann::ordered_json j;
  j["index"] = p.index;
  j["mix"] = mix_text(s, p);
  auto counts = nlohmann::ordered_json::array();
  for (std::size_t t = 0; t < p.mix.counts.size(); ++t)
    counts.push_back({{"device", s.devices[t].label}, {"count", p.mix.counts[t]}});
  j["counts"] = counts;
  j["group_order"] = detail::cluster_front::order_labels(s, p);
  j["devices"] = p.mix.devices();
  j["cost_usd"] = p.mix.cost_usd;
  j["power_w"] = p.mix.power.value();
  j["peak_matrix_flops_per_s"] = p.mix.peak.value();
  j["upper_bound_samples_per_s"] = p.upper_bound_samples_per_s;
  j["status"] = std::string{search::to_string(p.status)};
  if (!p.plan) return j;
  const place::ranked_plan& r = *p.plan;
  const train::step_estimate& e = r.estimate;
  j["throughput_samples_per_s"] = e.samples_per_s;
  j["tokens_per_s"] = e.tokens_per_s;
  j["time_per_batch_s"] = e.time_per_batch.value();
  j["mfu"] = e.mfu;
  j["peak_memory_bytes"] = e.peak_memory.value();
  j["samples_per_s_per_kusd"] = e.samples_per_s / (p.mix.cost_usd / 1000.0);
  j["samples_per_s_per_kw"] = e.samples_per_s / (p.mix.power.value() / 1000.0);
  auto blocks = nlohmann::ordered_json::array();
  for (const auto& st : r.split) blocks.push_back(st.blocks);
  j["plan"] = {{"tp", r.parallel.tp},
               {"pp", r.parallel.pp},
               {"dp", r.parallel.dp},
               {"microbatch", r.knobs.microbatch},
               {"recompute", std::string{model::to_string(r.knobs.recompute)}},
               {"sequence_parallel", r.knobs.sequence_parallel},
               {"global_batch", k.global_batch},
               {"stage_blocks", blocks},
               {"stage_devices", detail::cluster_front::stage_labels(s, p)}};
  j["scheduler"] = r.scheduler;
  j["schedule_gap"] = r.schedule_gap;
  return j;
}

/// The fronts of a cluster search as JSON (schema "phaze.cluster-front", version 1; units in field names):
/// the model and knobs, the space, the search's counts and both fronts, each in increasing cost or power.
inline nlohmann::ordered_json cluster_front_json(const cluster_space_description& space,
                                                 const search::cluster_search_result& r,
                                                 const model::model& m, const train::training_knobs& k) {
  const search::cluster_space& s = space.value;
  nlohmann::ordered_json j;
  j["schema"] = "phaze.cluster-front";
  j["version"] = 1;
  j["model"] = m.config.name.str();
  j["global_batch"] = k.global_batch;
  j["sequence"] = train::sequence_of(m, k);
  j["precision"] = std::string{hw::to_string(k.precision)};
  auto devices = nlohmann::ordered_json::array();
  for (std::size_t t = 0; t < s.devices.size(); ++t) {
    const search::device_offer& o = s.devices[t];
    devices.push_back({{"label", o.label},
                       {"device", o.device.name.str()},
                       {"from", t < space.device_sources.size() ? space.device_sources[t] : std::string{}},
                       {"price_usd", o.price_usd},
                       {"power_w", o.power.value()},
                       {"min", o.min},
                       {"max", o.max},
                       {"step", o.count_step()},
                       {"devices_per_node", o.node.devices},
                       {"peak_matrix_flops_per_s", hw::peak_matrix_flops(o.device).value()},
                       {"hbm_bytes", o.device.hbm.value()}});
  }
  j["space"] = {
      {"name", space.name},
      {"source", space.source},
      {"budget_usd", s.budget_usd},
      {"power_cap_w", s.power_cap ? nlohmann::ordered_json(s.power_cap->value()) : nlohmann::ordered_json()},
      {"max_types", s.max_types},
      {"devices", devices}};
  j["search"] = {{"compositions", r.compositions.size()},
                 {"evaluated", r.evaluated},
                 {"infeasible", r.infeasible},
                 {"pruned", r.pruned},
                 {"unsearched", r.unsearched},
                 {"plans_evaluated", r.plans_evaluated},
                 {"scheduler", r.scheduler},
                 {"model_flops_per_sample", r.per_sample.value()}};
  auto front = [&](const std::vector<search::cluster_point>& points) {
    auto a = nlohmann::ordered_json::array();
    for (const auto& p : points) a.push_back(cluster_point_json(s, p, k));
    return a;
  };
  j["cost_front"] = front(r.cost_front);
  j["power_front"] = front(r.power_front);
  return j;
}

/// A front as a text table: composition (first stages first), cost, power, plan, blocks per stage with their
/// device, throughput, MFU and throughput per 1000 USD.
inline std::string cluster_front_table(const search::cluster_space& s,
                                       const std::vector<search::cluster_point>& front) {
  text_table t{{"#", "mix (first stages first)", "cost USD", "power kW", "plan", "blocks per stage",
                "samples/s", "MFU", "samples/s per k$"},
               {align::right, align::left, align::right, align::right, align::left, align::left, align::right,
                align::right, align::right}};
  for (const auto& p : front) {
    // Blocks per stage, the stages of each device type together: "4, 5 on a100-80gb; 3 on h100-sxm".
    std::string blocks;
    if (p.plan) {
      const auto stages = detail::cluster_front::stage_labels(s, p);
      for (std::size_t i = 0; i < p.plan->split.size(); ++i) {
        const bool new_type = i > 0 && i < stages.size() && stages[i] != stages[i - 1];
        if (i > 0 && new_type) blocks += " on " + stages[i - 1] + "; ";
        if (i > 0 && !new_type) blocks += ", ";
        blocks += fmt::format("{}", p.plan->split[i].blocks);
      }
      if (p.group_order.size() > 1 && !stages.empty()) blocks += " on " + stages.back();
    }
    const double rate = p.plan ? p.plan->estimate.samples_per_s : 0.0;
    t.add_row({std::to_string(p.index), mix_text(s, p), fmt::format("{:.0f}", p.mix.cost_usd),
               fmt::format("{:.1f}", p.mix.power.value() / 1000.0), cluster_plan_text(p), blocks,
               fmt::format("{:.2f}", rate),
               p.plan ? fmt::format("{:.1f}%", 100.0 * p.plan->estimate.mfu) : "-",
               fmt::format("{:.3f}", rate / (p.mix.cost_usd / 1000.0))});
  }
  return t.render();
}

}  // namespace phaze::io
