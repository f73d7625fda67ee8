/// @file
/// A model's summary as a value (architecture, parameters, FLOPs per token, activation memory per block, its
/// distinct layers) and the zoo listing, with their JSON (nlohmann) and text-table (fmt) forms.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "phaze/core/quantity.hpp"
#include "phaze/io/table.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"
#include "phaze/model/zoo.hpp"

namespace phaze::io {

/// Bytes one transformer block keeps for its backward pass, one per recomputation mode.
struct activation_memory {
  bytes none{0.0};
  bytes selective{0.0};
  bytes full{0.0};
};

/// One distinct layer of a model (embedding, block, head) and how often it repeats.
struct layer_kind_summary {
  std::string name;  ///< the kind's name in the model ("block"; a composite model's own names)
  std::string role;
  std::int64_t count = 0;
  std::int64_t parameters = 0;                ///< of one such layer; weights tied to the embedding left out
  std::int64_t tied_parameters = 0;           ///< weights shared with the input embedding (counted there)
  flops forward_flops_per_token{0.0};         ///< matrix (model) FLOPs of one such layer
  flops forward_vector_flops_per_token{0.0};  ///< vector-unit FLOPs of one such layer
  std::int64_t ops = 0;                       ///< forward operators in its graph
};

/// What `phaze describe` reports about a model. FLOPs are counted for one sequence of the model's length
/// (microbatch 1, no tensor parallelism) and divided by that length; activation memory is per sequence for
/// one transformer block with 2-byte (bf16) activations.
struct model_summary {
  std::string name;
  std::string source;  ///< zoo citation or file the model came from
  std::string family;
  std::int64_t parameters = 0;  ///< tied weights counted once
  bool tied_embeddings = false;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  /// Multi-head latent attention's sizes in words ("key/value latent 512, ..."); empty without it.
  std::string latent_attention;
  /// The sliding window in words ("128 tokens; one block in 2 attends to all keys"); empty without one.
  std::string attention_window;
  /// A hybrid model's blocks in words ("52 blocks: 23 Mamba-2 (64 heads of 64, ...), 6 attention, 0 MLP, 23
  /// experts"), and its layer pattern ("MEMEM*E..."); both empty for a model that is not hybrid.
  std::string hybrid;
  std::string hybrid_pattern;
  std::int64_t ffn = 0;
  std::int64_t vocab = 0;
  std::int64_t sequence = 0;
  std::string norm;
  std::string mlp;
  std::string positions;
  flops forward_flops_per_token{0.0};   ///< matrix (model) FLOPs, as MFU counts them
  flops backward_flops_per_token{0.0};  ///< input- and weight-gradient GEMMs
  flops forward_vector_flops_per_token{0.0};
  flops backward_vector_flops_per_token{0.0};
  int activation_element_bytes = 2;
  activation_memory activation_bytes_per_layer;  ///< one block, microbatch 1, tp = 1
  int split_tp = 8;                              ///< width of the split variant below
  /// One block at tp = split_tp with sequence parallelism; empty when that width does not divide the heads,
  /// key/value heads, MLP width or sequence.
  std::optional<activation_memory> activation_bytes_per_layer_split;
  std::vector<layer_kind_summary> layer_kinds;

  /// Model FLOPs of a training step (forward and backward, no recomputation) per token.
  [[nodiscard]] flops training_flops_per_token() const {
    return forward_flops_per_token + backward_flops_per_token;
  }
};

namespace detail {
inline bool splits_evenly(const model::transformer_config& c, int tp, std::int64_t sequence) {
  return c.heads % tp == 0 && c.kv_heads_or_default() % tp == 0 && c.ffn % tp == 0 && sequence % tp == 0 &&
         c.mamba_splits_over(tp);
}

/// One block's activations; a hybrid model's (whose blocks differ) are the mean over its blocks.
inline activation_memory block_activations(const model::model& m, const model::layer_shape& shape) {
  if (!m.config.hybrid() || model::composite(m)) {
    const model::layer block = model::block_layer(m.config, shape);
    return {model::activation_bytes(block, model::recompute::none),
            model::activation_bytes(block, model::recompute::selective),
            model::activation_bytes(block, model::recompute::full)};
  }
  activation_memory sum{};
  for (std::size_t i = 1; i + 1 < m.size(); ++i) {
    const model::layer block = model::layer_at(m, i, shape);
    sum.none += model::activation_bytes(block, model::recompute::none);
    sum.selective += model::activation_bytes(block, model::recompute::selective);
    sum.full += model::activation_bytes(block, model::recompute::full);
  }
  const double blocks = static_cast<double>(m.size() - 2);
  return {sum.none / blocks, sum.selective / blocks, sum.full / blocks};
}
}  // namespace detail

/// The summary of a model; `source` says where it came from (a zoo citation or a file path).
inline constexpr auto describe = [](const model::model& m, std::string_view source = {}) -> model_summary {
  const auto& c = m.config;
  const double sequence = static_cast<double>(c.sequence);
  const model::layer_shape shape{1, c.sequence, 1, false, 2};
  const auto totals = model::totals(m, shape);

  model_summary s;
  s.name = c.name.str();
  s.source = std::string{source};
  s.family = model::composite(m) ? std::string{"composite"} : std::string{to_string(c.arch)};
  s.parameters = totals.params;
  s.tied_embeddings = c.tied_embeddings;
  s.layers = c.layers;
  s.hidden = c.hidden;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads_or_default();
  s.head_dim = c.head_dim_or_default();
  if (c.latent_attention()) {
    s.latent_attention = fmt::format(
        "key/value latent {}, query latent {}, +{} rotary per query/key head, value {}", c.kv_lora_rank,
        c.q_lora_rank > 0 ? fmt::format("{}", c.q_lora_rank) : "none", c.rope_head_dim, c.value_head_dim());
  }
  if (c.attention_window > 0) {
    s.attention_window = c.full_attention_every > 1
                             ? fmt::format("{} tokens; one block in {} attends to all keys",
                                           c.attention_window, c.full_attention_every)
                             : fmt::format("{} tokens, every block", c.attention_window);
  }
  if (c.hybrid()) {
    s.hybrid_pattern = c.hybrid_pattern.str();
    s.hybrid = fmt::format(
        "{} blocks: {} Mamba-2 ({} heads of {}, state {}, {} groups, chunks of {}), {} attention, "
        "{} MLP, {} experts",
        c.layers, c.blocks_of('M'), c.mamba_heads, c.mamba_head_dim, c.mamba_state, c.mamba_groups,
        c.mamba_chunk, c.blocks_of('*'), c.blocks_of('-'), c.blocks_of('E'));
  }
  s.ffn = c.ffn;
  s.vocab = c.vocab;
  s.sequence = c.sequence;
  s.norm = std::string{to_string(c.norm)};
  s.mlp = std::string{to_string(c.mlp)};
  s.positions = std::string{to_string(c.positions)};
  s.forward_flops_per_token = totals.forward_matmul / sequence;
  s.backward_flops_per_token = totals.backward_matmul / sequence;
  s.forward_vector_flops_per_token = totals.forward_vector / sequence;
  s.backward_vector_flops_per_token = totals.backward_vector / sequence;
  s.activation_element_bytes = shape.elem_bytes;
  s.activation_bytes_per_layer = detail::block_activations(m, shape);
  if (detail::splits_evenly(c, s.split_tp, c.sequence)) {
    s.activation_bytes_per_layer_split =
        detail::block_activations(m, model::layer_shape{1, c.sequence, s.split_tp, true, shape.elem_bytes});
  }
  for (const auto& d : model::distinct_layers(m)) {
    const model::layer l = model::layer_at(m, static_cast<std::size_t>(d.first_node), shape);
    layer_kind_summary k;
    k.name = m.kinds[d.kind].name.str();
    k.role = std::string{to_string(d.role)};
    k.count = d.count;
    k.parameters = model::layer_params(l);
    k.tied_parameters = model::layer_params(l, true) - k.parameters;
    k.forward_flops_per_token = model::forward_matmul_flops(l) / sequence;
    k.forward_vector_flops_per_token = model::forward_vector_flops(l) / sequence;
    k.ops = static_cast<std::int64_t>(l.ops.size());
    s.layer_kinds.push_back(k);
  }
  return s;
};

/// One line of `phaze models`.
struct zoo_model_summary {
  std::string name;
  std::string family;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t ffn = 0;
  std::int64_t vocab = 0;
  std::int64_t sequence = 0;
  std::int64_t parameters = 0;
  std::string source;
};

/// Every zoo entry, in zoo order.
inline constexpr auto describe_zoo = []() -> std::vector<zoo_model_summary> {
  std::vector<zoo_model_summary> out;
  for (const auto& e : zoo::entries) {
    const auto& c = e.config;
    out.push_back({std::string{e.name}, std::string{to_string(c.arch)}, c.layers, c.hidden, c.heads,
                   c.kv_heads_or_default(), c.ffn, c.vocab, c.sequence,
                   model::parameter_count(model::make_model(c)), std::string{e.source}});
  }
  // Composite models: their summary architecture (the first blocks' width, heads and sequence).
  for (const auto& e : zoo::composite_entries) {
    const model::model m = e.build();
    const auto& c = m.config;
    out.push_back({std::string{e.name}, "composite", c.layers, c.hidden, c.heads, c.kv_heads_or_default(),
                   c.ffn, c.vocab, c.sequence, model::parameter_count(m), std::string{e.source}});
  }
  return out;
};

// ---------------------------------------------------------------------------------------------------------
// JSON. Templates over the JSON type so that both nlohmann::json and nlohmann::ordered_json work.

namespace detail {
inline std::int64_t whole_bytes(bytes b) {
  return std::llround(b.value());
}

template <class Json>
Json activation_json(const activation_memory& a) {
  Json j;
  j["none"] = whole_bytes(a.none);
  j["selective"] = whole_bytes(a.selective);
  j["full"] = whole_bytes(a.full);
  return j;
}
}  // namespace detail

template <class Json>
void to_json(Json& j, const layer_kind_summary& k) {
  j = Json::object();
  j["name"] = k.name;
  j["role"] = k.role;
  j["count"] = k.count;
  j["parameters"] = k.parameters;
  j["tied_parameters"] = k.tied_parameters;
  j["forward_flops_per_token"] = k.forward_flops_per_token.value();
  j["forward_vector_flops_per_token"] = k.forward_vector_flops_per_token.value();
  j["ops"] = k.ops;
}

template <class Json>
void to_json(Json& j, const model_summary& s) {
  j = Json::object();
  j["name"] = s.name;
  j["source"] = s.source;
  j["family"] = s.family;
  j["parameters"] = s.parameters;
  j["parameters_human"] = format_count(static_cast<double>(s.parameters));
  j["tied_embeddings"] = s.tied_embeddings;
  j["layers"] = s.layers;
  j["hidden"] = s.hidden;
  j["heads"] = s.heads;
  j["kv_heads"] = s.kv_heads;
  j["head_dim"] = s.head_dim;
  j["ffn"] = s.ffn;
  j["vocab"] = s.vocab;
  j["sequence"] = s.sequence;
  j["norm"] = s.norm;
  j["mlp"] = s.mlp;
  j["positions"] = s.positions;
  j["forward_flops_per_token"] = s.forward_flops_per_token.value();
  j["backward_flops_per_token"] = s.backward_flops_per_token.value();
  j["training_flops_per_token"] = s.training_flops_per_token().value();
  j["forward_vector_flops_per_token"] = s.forward_vector_flops_per_token.value();
  j["backward_vector_flops_per_token"] = s.backward_vector_flops_per_token.value();
  j["activation_element_bytes"] = s.activation_element_bytes;
  j["activation_bytes_per_layer"] = detail::activation_json<Json>(s.activation_bytes_per_layer);
  const std::string split_key = fmt::format("activation_bytes_per_layer_tp{}_sp", s.split_tp);
  j[split_key] = s.activation_bytes_per_layer_split
                     ? detail::activation_json<Json>(*s.activation_bytes_per_layer_split)
                     : Json(nullptr);
  j["layer_kinds"] = Json::array();
  for (const auto& k : s.layer_kinds) j["layer_kinds"].push_back(Json(k));
  if (!s.hybrid_pattern.empty()) j["hybrid_pattern"] = s.hybrid_pattern;  // a hybrid's only
}

template <class Json>
void to_json(Json& j, const zoo_model_summary& z) {
  j = Json::object();
  j["name"] = z.name;
  j["family"] = z.family;
  j["layers"] = z.layers;
  j["hidden"] = z.hidden;
  j["heads"] = z.heads;
  j["kv_heads"] = z.kv_heads;
  j["ffn"] = z.ffn;
  j["vocab"] = z.vocab;
  j["sequence"] = z.sequence;
  j["parameters"] = z.parameters;
  j["parameters_human"] = format_count(static_cast<double>(z.parameters));
  j["source"] = z.source;
}

// ---------------------------------------------------------------------------------------------------------
// Text tables.

/// `phaze describe` as text: architecture, FLOPs per token, activation memory per block, distinct layers.
inline std::string to_table(const model_summary& s) {
  std::string out =
      s.source.empty() ? fmt::format("{}\n\n", s.name) : fmt::format("{}  ({})\n\n", s.name, s.source);

  text_table arch;
  arch.add_section("Architecture");
  arch.add_row({"  family", s.family});
  arch.add_row({"  parameters", fmt::format("{} ({})", format_grouped(s.parameters),
                                            format_count(static_cast<double>(s.parameters)))});
  arch.add_row({"  tied input/output embeddings", s.tied_embeddings ? "yes" : "no"});
  arch.add_row({"  layers (transformer blocks)", fmt::format("{}", s.layers)});
  arch.add_row({"  hidden size", fmt::format("{}", s.hidden)});
  arch.add_row({"  attention heads", fmt::format("{}", s.heads)});
  arch.add_row({"  key/value heads", fmt::format("{}", s.kv_heads)});
  arch.add_row({"  head dim", fmt::format("{}", s.head_dim)});
  if (!s.latent_attention.empty()) arch.add_row({"  latent attention", s.latent_attention});
  if (!s.hybrid.empty()) arch.add_row({"  hybrid", s.hybrid});
  if (!s.attention_window.empty()) arch.add_row({"  sliding window", s.attention_window});
  arch.add_row({"  MLP (ffn) size", fmt::format("{}", s.ffn)});
  arch.add_row({"  vocabulary", fmt::format("{}", s.vocab)});
  arch.add_row({"  sequence", fmt::format("{}", s.sequence)});
  arch.add_row({"  norm", s.norm});
  arch.add_row({"  MLP kind", s.mlp});
  arch.add_row({"  positions", s.positions});
  out += arch.render();

  out += fmt::format("\nFLOPs per token (sequence {}, microbatch 1)\n", s.sequence);
  text_table work{{"  pass", "matrix (model)", "vector"}, {align::left, align::right, align::right}};
  work.add_row(
      {"  forward", format_flops(s.forward_flops_per_token), format_flops(s.forward_vector_flops_per_token)});
  work.add_row({"  backward", format_flops(s.backward_flops_per_token),
                format_flops(s.backward_vector_flops_per_token)});
  work.add_row({"  training (fwd+bwd)", format_flops(s.training_flops_per_token()),
                format_flops(s.forward_vector_flops_per_token + s.backward_vector_flops_per_token)});
  out += work.render();

  out += fmt::format("\nActivation memory per block, one sequence ({}-byte activations)\n",
                     s.activation_element_bytes);
  const std::string split_header = fmt::format("tp={} + seq. parallel", s.split_tp);
  text_table acts{{"  recompute", "tp=1", split_header}, {align::left, align::right, align::right}};
  auto split_cell = [&s](bytes activation_memory::*mode) {
    return s.activation_bytes_per_layer_split ? format_bytes((*s.activation_bytes_per_layer_split).*mode)
                                              : std::string{"n/a"};
  };
  acts.add_row(
      {"  none", format_bytes(s.activation_bytes_per_layer.none), split_cell(&activation_memory::none)});
  acts.add_row({"  selective", format_bytes(s.activation_bytes_per_layer.selective),
                split_cell(&activation_memory::selective)});
  acts.add_row(
      {"  full", format_bytes(s.activation_bytes_per_layer.full), split_cell(&activation_memory::full)});
  out += acts.render();
  if (!s.activation_bytes_per_layer_split) {
    out += fmt::format(
        "  (tp={} does not divide the heads, key/value heads, MLP size, Mamba-2 heads and groups or "
        "sequence)\n",
        s.split_tp);
  }

  out += "\nLayers\n";
  text_table layers{{"  layer", "count", "params/layer", "fwd FLOPs/token", "vector FLOPs/token", "ops"},
                    {align::left, align::right, align::right, align::right, align::right, align::right}};
  for (const auto& k : s.layer_kinds) {
    std::string params = format_count(static_cast<double>(k.parameters));
    if (k.tied_parameters > 0)
      params += fmt::format(" (+{} tied)", format_count(static_cast<double>(k.tied_parameters)));
    const std::string label = k.name == k.role ? k.role : k.name + " (" + k.role + ")";
    layers.add_row({"  " + label, fmt::format("{}", k.count), params, format_flops(k.forward_flops_per_token),
                    format_flops(k.forward_vector_flops_per_token), fmt::format("{}", k.ops)});
  }
  out += layers.render();
  return out;
}

/// `phaze models` as text: one row per zoo entry.
inline std::string to_table(const std::vector<zoo_model_summary>& models) {
  text_table t{
      {"name", "family", "layers", "hidden", "heads (kv)", "ffn", "vocab", "sequence", "params", "source"},
      {align::left, align::left, align::right, align::right, align::right, align::right, align::right,
       align::right, align::right, align::left}};
  for (const auto& z : models) {
    t.add_row({z.name, z.family, fmt::format("{}", z.layers), fmt::format("{}", z.hidden),
               fmt::format("{} ({})", z.heads, z.kv_heads), fmt::format("{}", z.ffn),
               fmt::format("{}", z.vocab), fmt::format("{}", z.sequence),
               format_count(static_cast<double>(z.parameters)), z.source});
  }
  return t.render();
}

}  // namespace phaze::io
