/// @file
/// The largest sizes phaze accepts from a user: every reader (command line, model configs, search specs,
/// device, cluster and layer-table files) checks against these before it narrows or multiplies a number, so
/// that no product of them (vocab x hidden, sequence^2 x heads x microbatch, ...) overflows and no command
/// runs without bound. Each bound sits far above the largest published training run (docs/limits.md).
#pragma once

#include <cstdint>

namespace phaze::limits {

/// Devices in one cluster, plan or search: 2^20 = 1,048,576, five times the largest GPU cluster announced
/// by 2026 (about 200,000 GPUs).
inline constexpr std::int64_t max_devices = std::int64_t{1} << 20;

/// Sequences in one global batch: 2^20. Published runs use a few thousand (Llama 3 405B: 16M tokens of
/// 8192, i.e. 2048 sequences; LAMB-trained BERT: 65,536).
inline constexpr std::int64_t max_global_batch = std::int64_t{1} << 20;

/// Tokens in one sequence: 2^22 = 4,194,304, four times the longest trained contexts (about 1M tokens).
inline constexpr std::int64_t max_sequence = std::int64_t{1} << 22;

/// Entries in a vocabulary: 2^24 = 16,777,216, sixty times the largest in use (256k).
inline constexpr std::int64_t max_vocab = std::int64_t{1} << 24;

/// Tokens in one microbatch (microbatch x sequence): 2^28. With at most 2^12 heads this keeps an
/// attention score count (microbatch x heads x sequence^2) below 2^62.
inline constexpr std::int64_t max_microbatch_tokens = std::int64_t{1} << 28;

/// Architecture sizes (model::validate checks them, at compile time for DSL models), far above any published
/// model (Megatron's 1T-parameter GPT: hidden 25,600, 128 layers, 160 heads): with them every product the
/// layer builders form (vocab x hidden, hidden x ffn x layers, microbatch x heads x sequence^2) stays below
/// 2^62. The layers (transformer blocks) are at most 254: a model's layer graph holds 256 nodes
/// (model::max_model_layers), the blocks with the embedding and the head; twice the deepest published
/// model's 128 (Megatron's 1T GPT; Llama 3 405B has 126, PaLM 540B 118).
inline constexpr std::int64_t max_layers = 254;
inline constexpr std::int64_t max_hidden = std::int64_t{1} << 18;
inline constexpr std::int64_t max_heads = std::int64_t{1} << 12;
inline constexpr std::int64_t max_head_dim = std::int64_t{1} << 14;
inline constexpr std::int64_t max_ffn = std::int64_t{1} << 20;  ///< dense, experts' and shared experts' MLPs
inline constexpr std::int64_t max_experts = std::int64_t{1} << 12;

/// Any other count the command line takes (--top, --threads, iterations): 2^30, so that it fits an int.
inline constexpr std::int64_t max_count = std::int64_t{1} << 30;

}  // namespace phaze::limits
