/// @file
/// Megatron-Core's custom pipeline layout (`--pipeline-model-parallel-layout`): which layers each model chunk
/// of each pipeline stage builds, written as a string such as "Et|(tt|)*30mL".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/core/error.hpp"

namespace phaze::train {

/// The layers of one model chunk.
struct layout_chunk {
  std::int64_t blocks = 0;  ///< transformer blocks ('t')
  std::int64_t mtp = 0;     ///< multi-token prediction modules ('m')
  bool embedding = false;   ///< the input embedding ('E')
  bool loss = false;        ///< the output layer and its loss ('L')
  friend constexpr bool operator==(const layout_chunk&, const layout_chunk&) = default;
};

/// A parsed layout: `chunks[s][v]` is model chunk v of pipeline stage s. Megatron-Core lists the chunks in
/// layer order, chunk v of every stage before chunk v + 1 of any (PipelineParallelLayerLayout, Megatron-Core
/// core_r0.14.0): list entry i is chunk i / pp of stage i % pp.
struct pipeline_layout {
  std::vector<std::vector<layout_chunk>> chunks;

  [[nodiscard]] int stages() const { return static_cast<int>(chunks.size()); }
  [[nodiscard]] int chunks_per_stage() const {
    return chunks.empty() ? 0 : static_cast<int>(chunks.front().size());
  }
  /// The transformer blocks stage `s` holds over all its chunks.
  [[nodiscard]] std::int64_t stage_blocks(int s) const {
    std::int64_t n = 0;
    for (const layout_chunk& c : chunks.at(static_cast<std::size_t>(s))) n += c.blocks;
    return n;
  }
};

namespace detail {

/// The longest layout phaze expands: 2^16 layer letters and separators (a model has at most 2^14 layers).
inline constexpr std::size_t max_expanded_layout = std::size_t{1} << 16;

[[noreturn]] inline void bad_layout(std::string_view text, const std::string& why) {
  throw input_error("--pipeline-model-parallel-layout '" + std::string{text} + "': " + why +
                    " (the letters are E the embedding, t a transformer block, m a multi-token prediction "
                    "module, L the loss; | ends a model chunk; (...)*N and X*N repeat; commas are ignored)");
}

/// Expands `(...)*N` and `X*N` (nested parentheses allowed) from position `at` up to the closing
/// parenthesis or the end; appends the letters and separators to `out`.
inline void expand_layout(std::string_view text, std::size_t& at, std::string& out, int depth) {
  const auto count_after = [&](std::size_t star) -> std::int64_t {
    std::size_t i = star + 1;
    std::int64_t n = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      n = n * 10 + (text[i] - '0');
      if (n > static_cast<std::int64_t>(max_expanded_layout))
        bad_layout(text, "a repeat count above " + std::to_string(max_expanded_layout));
      ++i;
    }
    if (i == star + 1)
      bad_layout(text, "'*' at position " + std::to_string(star) + " is not followed by a count");
    at = i;
    return n;
  };
  const auto repeat = [&](const std::string& unit, std::int64_t n) {
    if (unit.size() * static_cast<std::size_t>(n) + out.size() > max_expanded_layout)
      bad_layout(text, "it expands to more than " + std::to_string(max_expanded_layout) + " letters");
    for (std::int64_t k = 0; k < n; ++k) out += unit;
  };
  while (at < text.size()) {
    const char ch = text[at];
    if (ch == ')') {
      if (depth == 0) bad_layout(text, "')' at position " + std::to_string(at) + " closes nothing");
      return;
    }
    if (ch == ',' || ch == ' ') {
      ++at;
      continue;
    }
    if (ch == '(') {
      const std::size_t open = at;
      ++at;
      std::string inner;
      expand_layout(text, at, inner, depth + 1);
      if (at >= text.size()) bad_layout(text, "'(' at position " + std::to_string(open) + " is never closed");
      ++at;  // the ')'
      if (at < text.size() && text[at] == '*') {
        repeat(inner, count_after(at));
      } else {
        repeat(inner, 1);
      }
      continue;
    }
    if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L' || ch == '|') {
      ++at;
      if (at < text.size() && text[at] == '*') {
        if (ch == '|') {
          repeat("|", count_after(at));
        } else {
          repeat(std::string(1, ch), count_after(at));
        }
      } else {
        repeat(std::string(1, ch), 1);
      }
      continue;
    }
    bad_layout(text,
               "'" + std::string(1, ch) + "' at position " + std::to_string(at) + " is not a layer letter");
  }
}

}  // namespace detail

/// Parses a Megatron-Core pipeline layout for `pp` stages of a model of `blocks` transformer blocks and
/// `mtp_layers` multi-token prediction modules, with Megatron-Core's rules (validate_layer_layout): the
/// chunks divide into the stages (vp = chunks / pp), the embedding comes first and the loss last, each once,
/// and the blocks add up to the model's. phaze's own rules on top, each refused with its reason: the
/// embedding sits in stage 0's first chunk and the loss in the last stage's last chunk (phaze's stages hold
/// the input layer first and the output layer last), and the multi-token prediction modules, all of them,
/// in the loss's chunk (phaze builds them into the output layer, where Megatron-Core builds them by default).
inline pipeline_layout parse_pipeline_layout(std::string_view text, int pp, std::int64_t blocks,
                                             std::int64_t mtp_layers) {
  if (text.empty()) detail::bad_layout(text, "the layout is empty");
  if (text.size() > detail::max_expanded_layout)
    detail::bad_layout(text.substr(0, 40), "the layout is longer than 65,536 characters");
  std::string flat;
  std::size_t at = 0;
  detail::expand_layout(text, at, flat, 0);
  std::vector<layout_chunk> list(1);
  std::int64_t embeddings = 0;
  std::int64_t losses = 0;
  for (std::size_t i = 0; i < flat.size(); ++i) {
    const char ch = flat[i];
    if (ch == '|') {
      list.emplace_back();
      continue;
    }
    layout_chunk& c = list.back();
    if (losses > 0) detail::bad_layout(text, "the loss L must be the last layer; nothing may follow it");
    if (ch == 'E') {
      if (i != 0) detail::bad_layout(text, "the embedding E must be the first layer of the first chunk");
      c.embedding = true;
      ++embeddings;
    } else if (ch == 'L') {
      c.loss = true;
      ++losses;
    } else if (ch == 't') {
      ++c.blocks;
    } else {
      ++c.mtp;
    }
  }
  if (embeddings != 1) detail::bad_layout(text, "the embedding E must appear once, as the first layer");
  if (losses != 1 || !list.back().loss)
    detail::bad_layout(text, "the loss L must appear once, as the last layer of the last chunk");
  if (pp < 1 || list.size() % static_cast<std::size_t>(pp) != 0) {
    detail::bad_layout(text, "it lists " + std::to_string(list.size()) +
                                 " model chunks, which do not divide into " + std::to_string(pp) +
                                 " pipeline stages; give pp x vp chunks");
  }
  std::int64_t total_blocks = 0;
  std::int64_t total_mtp = 0;
  for (const layout_chunk& c : list) {
    total_blocks += c.blocks;
    total_mtp += c.mtp;
  }
  if (total_blocks != blocks) {
    detail::bad_layout(text, "it places " + std::to_string(total_blocks) +
                                 " transformer blocks (t) but the model has " + std::to_string(blocks));
  }
  if (total_mtp != mtp_layers) {
    detail::bad_layout(text, "it places " + std::to_string(total_mtp) +
                                 " multi-token prediction modules (m) but the model has " +
                                 std::to_string(mtp_layers) + " (give `mtp_layers` to change the model's)");
  }
  if (list.back().mtp != total_mtp) {
    detail::bad_layout(
        text,
        "phaze builds the multi-token prediction modules with the loss; put every m in the last "
        "chunk, before L");
  }
  const std::size_t vp = list.size() / static_cast<std::size_t>(pp);
  pipeline_layout layout;
  layout.chunks.assign(static_cast<std::size_t>(pp), std::vector<layout_chunk>(vp));
  for (std::size_t i = 0; i < list.size(); ++i)
    layout.chunks[i % static_cast<std::size_t>(pp)][i / static_cast<std::size_t>(pp)] = list[i];
  return layout;
}

}  // namespace phaze::train
