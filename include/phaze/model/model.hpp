/// @file
/// A model: an architecture and the graph of its layers (embedding, blocks, head), with the totals users ask
/// for first: parameters, FLOPs per token and per iteration, activation memory per layer.
#pragma once

#include <cstdint>

#include "phaze/core/quantity.hpp"
#include "phaze/core/static_vector.hpp"
#include "phaze/model/layer.hpp"
#include "phaze/model/transformer.hpp"

namespace phaze::model {

/// Most layer nodes in a model graph (megatron-1T has 128 blocks, plus embedding and head).
inline constexpr std::size_t max_model_layers = 256;

/// An edge of the layer graph: the output of `from` feeds `to`.
struct layer_edge {
  std::int16_t from = 0;
  std::int16_t to = 0;
  friend constexpr bool operator==(const layer_edge&, const layer_edge&) = default;
};

/// A model: its architecture and its layer graph. Nodes are layer roles; two nodes with the same role are
/// the same layer (identical blocks), which is what lets a scheduler solve a block once.
struct model {
  transformer_config config;
  static_vector<layer_role, max_model_layers> nodes;
  static_vector<layer_edge, max_model_layers> edges;

  [[nodiscard]] constexpr std::size_t size() const { return nodes.size(); }
  friend constexpr bool operator==(const model&, const model&) = default;
};

namespace rules {
[[noreturn]] inline void model_has_too_many_layers_raise_max_model_layers() {
  throw input_error("the model has more layers than phaze::model::max_model_layers allows");
}
}  // namespace rules

/// The model graph of a transformer: embedding -> blocks -> head, a chain.
inline constexpr auto make_model = [](const transformer_config& c) constexpr -> model {
  validate(c);
  if (c.layers + 2 > static_cast<std::int64_t>(max_model_layers))
    rules::model_has_too_many_layers_raise_max_model_layers();
  model m;
  m.config = c;
  m.nodes.push_back(layer_role::embedding);
  for (std::int64_t i = 0; i < c.layers; ++i) m.nodes.push_back(layer_role::block);
  m.nodes.push_back(layer_role::head);
  for (std::size_t i = 0; i + 1 < m.nodes.size(); ++i) {
    m.edges.push_back({static_cast<std::int16_t>(i), static_cast<std::int16_t>(i + 1)});
  }
  return m;
};

/// The layer at node `i`, built for `shape`.
inline constexpr auto layer_at =
    [](const model& m, std::size_t i, const layer_shape& shape) constexpr -> layer {
  return make_layer(m.config, m.nodes.at(i), shape);
};

/// A distinct layer of a model and how many nodes repeat it.
struct distinct_layer {
  layer_role role = layer_role::block;
  std::int16_t first_node = 0;
  std::int64_t count = 0;
};

/// The distinct layers of a model, in order of first appearance (a GPT has three: embedding, block, head).
inline constexpr auto distinct_layers = [](const model& m) constexpr -> static_vector<distinct_layer, 8> {
  static_vector<distinct_layer, 8> out;
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    bool seen = false;
    for (auto& d : out) {
      if (d.role == m.nodes[i]) {
        ++d.count;
        seen = true;
      }
    }
    if (!seen) out.push_back({m.nodes[i], static_cast<std::int16_t>(i), 1});
  }
  return out;
};

/// Totals of a model for one microbatch of a given shape, summed over its layers (each distinct layer built
/// once and multiplied by its count).
struct model_totals {
  std::int64_t params = 0;    ///< per tensor-parallel rank, tied weights counted once
  flops forward_matmul{0.0};  ///< model FLOPs of the forward pass
  flops backward_matmul{0.0};
  flops forward_vector{0.0};
  flops backward_vector{0.0};
};

inline constexpr auto totals = [](const model& m, const layer_shape& shape) constexpr -> model_totals {
  model_totals t;
  for (const auto& d : distinct_layers(m)) {
    const layer l = layer_at(m, static_cast<std::size_t>(d.first_node), shape);
    const auto n = static_cast<double>(d.count);
    t.params += layer_params(l) * d.count;
    t.forward_matmul += forward_matmul_flops(l) * n;
    t.forward_vector += forward_vector_flops(l) * n;
    const auto bwd = backward(l);
    t.backward_matmul += sum_flops(bwd, unit::tensor) * n;
    t.backward_vector += sum_flops(bwd, unit::vector) * n;
  }
  return t;
};

/// Parameters of the whole model (no parallelism, tied weights counted once).
inline constexpr auto parameter_count = [](const model& m) constexpr -> std::int64_t {
  return totals(m, layer_shape{1, m.config.sequence, 1, false, 2}).params;
};

/// Model FLOPs (matrix work, forward + backward, no recomputation) of one training iteration over
/// `global_batch` sequences: the quantity Narayanan et al. (SC'21) write as 72 B s l h^2 (1 + s/6h + V/12lh).
inline constexpr auto training_flops_per_iteration =
    [](const model& m, std::int64_t global_batch) constexpr -> flops {
  const auto t = totals(m, layer_shape{1, m.config.sequence, 1, false, 2});
  return (t.forward_matmul + t.backward_matmul) * static_cast<double>(global_batch);
};

/// A copy of `m` trained at another sequence length (learned position tables grow to cover it).
inline constexpr auto with_sequence = [](model m, std::int64_t sequence) constexpr -> model {
  m.config.sequence = sequence;
  if (m.config.positions == position_kind::learned && m.config.max_positions < sequence) {
    m.config.max_positions = sequence;
  }
  validate(m.config);
  return m;
};

/// A copy of `m` with another vocabulary size.
inline constexpr auto with_vocab = [](model m, std::int64_t vocab) constexpr -> model {
  m.config.vocab = vocab;
  validate(m.config);
  return m;
};

}  // namespace phaze::model
