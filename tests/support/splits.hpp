// Every split of a chain of layer nodes into pipeline stages, for the exhaustive oracles of the placement
// tests: the cut points, and the same split as the train::stage_layers estimate_step takes.
#pragma once

#include <phaze/train/memory.hpp>

#include <cstddef>
#include <vector>

namespace phaze::test {

/// Calls fn(cuts) for every split of `nodes` chained nodes into `stages` non-empty consecutive stages, where
/// cuts[k] is the first node of stage k + 1 (stages - 1 increasing entries between 1 and nodes - 1).
template <class Fn>
void for_each_split(std::size_t nodes, std::size_t stages, Fn&& fn) {
  if (stages == 0 || stages > nodes) return;
  std::vector<std::size_t> cuts(stages - 1);
  auto recurse = [&](auto&& self, std::size_t k, std::size_t from) -> void {
    if (k + 1 == stages) {
      fn(static_cast<const std::vector<std::size_t>&>(cuts));
      return;
    }
    // Stages k + 1 .. stages - 1 still need a node each: cut <= nodes - (stages - 1 - k).
    for (std::size_t cut = from; cut + (stages - 1 - k) <= nodes; ++cut) {
      cuts[k] = cut;
      self(self, k + 1, cut + 1);
    }
  };
  recurse(recurse, 0, 1);
}

/// The split with those cuts as each stage's layers: the input layer on the first stage, the output layer on
/// the last, the body nodes counted in between.
inline std::vector<train::stage_layers> stages_of(const std::vector<std::size_t>& cuts, std::size_t nodes) {
  std::vector<train::stage_layers> split;
  std::size_t start = 0;
  for (std::size_t s = 0; s <= cuts.size(); ++s) {
    const std::size_t end = s < cuts.size() ? cuts[s] : nodes;
    train::stage_layers l;
    l.embedding = start == 0;
    l.head = end == nodes;
    l.blocks = static_cast<std::int64_t>(end - start) - (l.embedding ? 1 : 0) - (l.head ? 1 : 0);
    split.push_back(l);
    start = end;
  }
  return split;
}

/// The same split as node sets: stage k holds nodes [cuts[k - 1], cuts[k]).
inline std::vector<std::vector<std::size_t>> node_sets_of(const std::vector<std::size_t>& cuts,
                                                          std::size_t nodes) {
  std::vector<std::vector<std::size_t>> stages;
  std::size_t start = 0;
  for (std::size_t s = 0; s <= cuts.size(); ++s) {
    const std::size_t end = s < cuts.size() ? cuts[s] : nodes;
    stages.emplace_back();
    for (std::size_t v = start; v < end; ++v) stages.back().push_back(v);
    start = end;
  }
  return stages;
}

}  // namespace phaze::test
