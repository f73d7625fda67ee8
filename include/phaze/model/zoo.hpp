/// @file
/// The model zoo: the published architectures phaze knows by name, each with its training sequence length and
/// vocabulary (both can be overridden with with_sequence / with_vocab).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/core/names.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"
#include "phaze/model/transgan.hpp"

namespace phaze::zoo {

using model::family;
using model::mlp_kind;
using model::norm_kind;
using model::position_kind;
using model::transformer_config;

/// A named architecture and where its numbers come from.
struct entry {
  std::string_view name;
  std::string_view source;  ///< the paper or model card the configuration is taken from
  transformer_config config;
};

namespace detail {
// clang-format off
constexpr transformer_config gpt(std::string_view name, std::int64_t h, std::int64_t heads, std::int64_t layers,
                                 std::int64_t vocab, std::int64_t seq) {
  return {.name = name, .arch = family::gpt, .hidden = h, .heads = heads, .ffn = 4 * h, .layers = layers,
          .vocab = vocab, .sequence = seq, .max_positions = seq};
}
constexpr transformer_config bert(std::string_view name, std::int64_t h, std::int64_t heads, std::int64_t layers,
                                  std::int64_t vocab, bool pre_norm) {
  return {.name = name, .arch = family::bert, .hidden = h, .heads = heads, .ffn = 4 * h, .layers = layers,
          .vocab = vocab, .sequence = 512, .max_positions = 512, .token_types = 2, .pre_norm = pre_norm,
          .final_norm = pre_norm, .causal = false, .bert_heads = true};
}
constexpr transformer_config opt(std::string_view name, std::int64_t h, std::int64_t heads, std::int64_t layers) {
  return {.name = name, .arch = family::opt, .hidden = h, .heads = heads, .ffn = 4 * h, .layers = layers,
          .vocab = 50272, .sequence = 2048, .max_positions = 2048, .position_offset = 2, .mlp = mlp_kind::relu};
}
constexpr transformer_config llama(std::string_view name, std::int64_t h, std::int64_t heads, std::int64_t kv,
                                   std::int64_t ffn, std::int64_t layers, std::int64_t vocab, std::int64_t seq) {
  return {.name = name, .arch = family::llama, .hidden = h, .heads = heads, .kv_heads = kv, .ffn = ffn,
          .layers = layers, .vocab = vocab, .sequence = seq, .norm = norm_kind::rmsnorm, .mlp = mlp_kind::swiglu,
          .positions = position_kind::rotary, .bias = false, .tied_embeddings = false, .dropout = false};
}
/// `c` with rotary embedding of base `theta` (the HuggingFace config's rope_theta).
constexpr transformer_config with_rotary_base(transformer_config c, double theta) {
  c.rotary_base = theta;
  return c;
}
/// Mixtral-style mixture of experts: a Llama/Mistral block whose MLP is `experts` SwiGLU experts of ffn,
/// top_k of them per token; rotary base 1,000,000 (Mixtral's and Qwen3's rope_theta).
constexpr transformer_config mixtral(std::string_view name, std::int64_t h, std::int64_t heads, std::int64_t kv,
                                     std::int64_t ffn, std::int64_t layers, std::int64_t vocab, std::int64_t seq,
                                     std::int64_t experts, std::int64_t top_k) {
  auto c = with_rotary_base(llama(name, h, heads, kv, ffn, layers, vocab, seq), 1e6);
  c.experts = experts;
  c.top_k = top_k;
  return c;
}
/// Qwen3's mixture of experts: Mixtral's block with a head dimension of 128 whatever hidden / heads is, and
/// queries and keys normalized per head.
constexpr transformer_config qwen3_moe(std::string_view name, std::int64_t h, std::int64_t heads,
                                       std::int64_t kv, std::int64_t expert_ffn, std::int64_t layers,
                                       std::int64_t vocab, std::int64_t seq, std::int64_t experts,
                                       std::int64_t top_k) {
  auto c = mixtral(name, h, heads, kv, expert_ffn, layers, vocab, seq, experts, top_k);
  c.head_dim = 128;
  c.qk_norm = true;
  return c;
}
/// Qwen3's dense model: the Llama block with a head dimension of 128, per-head query/key norms and rotary
/// base 1,000,000.
constexpr transformer_config qwen3(std::string_view name, std::int64_t h, std::int64_t heads, std::int64_t kv,
                                   std::int64_t ffn, std::int64_t layers, std::int64_t vocab, std::int64_t seq) {
  auto c = with_rotary_base(llama(name, h, heads, kv, ffn, layers, vocab, seq), 1e6);
  c.head_dim = 128;
  c.qk_norm = true;
  return c;
}
/// Nemotron-4: sequential blocks, LayerNorm, grouped-query attention, rotary positions on half of each head,
/// a squared-ReLU MLP, no biases, untied embeddings, no dropout.
constexpr transformer_config nemotron4(std::string_view name, std::int64_t h, std::int64_t heads,
                                       std::int64_t kv, std::int64_t ffn, std::int64_t layers) {
  auto c = llama(name, h, heads, kv, ffn, layers, 256000, 4096);
  c.norm = norm_kind::layernorm;
  c.mlp = mlp_kind::squared_relu;
  c.rotary_fraction = 0.5;
  return c;
}
/// Nemotron-H and Nemotron 3 (transformers' NemotronHConfig): a hybrid of Mamba-2 mixers (`mamba_heads`
/// heads of 64, state 128, 8 groups, 4 taps, chunks of 128), attention, squared-ReLU MLPs and experts, one per
/// block as `pattern` lists them; RMSNorm, untied embeddings, a 131,072 vocabulary, no dropout.
constexpr transformer_config nemotron_h(std::string_view name, std::int64_t h, std::int64_t heads,
                                        std::int64_t kv, std::int64_t ffn, std::string_view pattern,
                                        std::int64_t mamba_heads) {
  auto c = llama(name, h, heads, kv, ffn, static_cast<std::int64_t>(pattern.size()), 131072, 8192);
  c.mlp = mlp_kind::squared_relu;
  c.head_dim = h / heads == 128 ? 0 : 128;
  c.hybrid_pattern = pattern;
  c.mamba_heads = mamba_heads;
  c.mamba_head_dim = 64;
  c.mamba_state = 128;
  c.mamba_groups = 8;
  return c;
}
constexpr transformer_config nemotron_3_nano() {
  auto c = nemotron_h("nemotron-3-nano-30b-a3b", 2688, 32, 2, 1856,
                      "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", 64);
  c.experts = 128;
  c.top_k = 6;
  c.expert_ffn = 1856;
  c.shared_expert_ffn = 3712;
  c.sigmoid_router = true;
  return c;
}
constexpr transformer_config bloom_176b() {
  auto c = gpt("bloom-176b", 14336, 112, 70, 250880, 2048);
  c.max_positions = 0;
  c.positions = position_kind::alibi;
  c.embedding_norm = true;
  c.dropout = false;
  return c;
}
constexpr transformer_config opt_350m() {
  auto c = opt("opt-350m", 1024, 16, 24);
  c.embed_dim = 512;      // word embeddings are 512 wide, projected in and out (HF OPTConfig word_embed_proj_dim)
  c.pre_norm = false;     // do_layer_norm_before = False for this size only
  c.final_norm = false;
  return c;
}
// clang-format on
}  // namespace detail

/// Every zoo entry. Megatron vocabularies are padded to 51,200 (Shoeybi et al. 2019, section 5).
inline constexpr std::array entries{
    entry{"bert-large", "Devlin et al. 2019; HF bert-large-uncased",
          detail::bert("bert-large", 1024, 16, 24, 30522, false)},
    entry{"megatron-bert", "PHAZE's Megatron BERT-Large (Shoeybi et al. 2019), vocab padded to 30592",
          detail::bert("megatron-bert", 1024, 16, 24, 30592, true)},
    entry{"gpt2", "Radford et al. 2019; HF gpt2", detail::gpt("gpt2", 768, 12, 12, 50257, 1024)},
    entry{"gpt2-xl", "Radford et al. 2019; HF gpt2-xl", detail::gpt("gpt2-xl", 1600, 25, 48, 50257, 1024)},
    entry{"megatron-gpt2-40", "Shoeybi et al. 2019 Table 1 (1.2B)",
          detail::gpt("megatron-gpt2-40", 1536, 16, 40, 51200, 1024)},
    entry{"megatron-gpt2-54", "Shoeybi et al. 2019 Table 1 (2.5B)",
          detail::gpt("megatron-gpt2-54", 1920, 20, 54, 51200, 1024)},
    entry{"megatron-gpt2-72", "Shoeybi et al. 2019 Table 1 (8.3B)",
          detail::gpt("megatron-gpt2-72", 3072, 32, 72, 51200, 1024)},
    entry{"gpt3-175b", "Brown et al. 2020 Table 2.1", detail::gpt("gpt3-175b", 12288, 96, 96, 50257, 2048)},
    entry{"megatron-22b", "Korthikanti et al. 2022 Table 3",
          detail::gpt("megatron-22b", 6144, 64, 48, 51200, 2048)},
    entry{"turing-530b", "Korthikanti et al. 2022 Table 3",
          detail::gpt("turing-530b", 20480, 128, 105, 51200, 2048)},
    entry{"megatron-1t", "Korthikanti et al. 2022 Table 3",
          detail::gpt("megatron-1t", 25600, 160, 128, 51200, 2048)},
    entry{"bloom-176b",
          "BigScience 2022 (BLOOM, Table 3: 70 layers, hidden 14336, 112 heads, ALiBi, embedding LayerNorm, "
          "250,880 vocabulary, sequence 2048); HF bigscience/bloom (176,247,271,424 parameters), no dropout",
          detail::bloom_176b()},
    entry{"opt-350m", "Zhang et al. 2022; HF facebook/opt-350m", detail::opt_350m()},
    entry{"opt-1.3b", "Zhang et al. 2022; HF facebook/opt-1.3b", detail::opt("opt-1.3b", 2048, 32, 24)},
    entry{"opt-175b", "Zhang et al. 2022 Table 1", detail::opt("opt-175b", 12288, 96, 96)},
    entry{"llama2-7b", "Touvron et al. 2023; HF meta-llama/Llama-2-7b-hf",
          detail::llama("llama2-7b", 4096, 32, 32, 11008, 32, 32000, 4096)},
    entry{"llama2-13b", "Touvron et al. 2023; HF meta-llama/Llama-2-13b-hf",
          detail::llama("llama2-13b", 5120, 40, 40, 13824, 40, 32000, 4096)},
    entry{"llama2-70b", "Touvron et al. 2023; HF meta-llama/Llama-2-70b-hf (grouped-query attention)",
          detail::llama("llama2-70b", 8192, 64, 8, 28672, 80, 32000, 4096)},
    entry{
        "llama3-8b", "Meta 2024; HF meta-llama/Meta-Llama-3-8B (rope_theta 500,000)",
        detail::with_rotary_base(detail::llama("llama3-8b", 4096, 32, 8, 14336, 32, 128256, 8192), 500000.0)},
    entry{"llama3-70b", "Meta 2024; HF meta-llama/Meta-Llama-3-70B (rope_theta 500,000)",
          detail::with_rotary_base(detail::llama("llama3-70b", 8192, 64, 8, 28672, 80, 128256, 8192),
                                   500000.0)},
    entry{
        "mixtral-8x7b",
        "Jiang et al. 2024 (Mixtral of Experts); HF mistralai/Mixtral-8x7B-v0.1, trained here at 4096 tokens",
        detail::mixtral("mixtral-8x7b", 4096, 32, 8, 14336, 32, 32000, 4096, 8, 2)},
    entry{"qwen3-8b",
          "Qwen team 2025 (Qwen3 technical report: 4,096-token pre-training stages); HF Qwen/Qwen3-8B "
          "(head_dim "
          "128, q/k norms)",
          detail::qwen3("qwen3-8b", 4096, 32, 8, 12288, 36, 151936, 4096)},
    entry{
        "qwen3-30b-a3b",
        "Qwen team 2025 (Qwen3); HF Qwen/Qwen3-30B-A3B (128 experts of 768, top 8, head_dim 128, q/k norms), "
        "trained here at 4096 tokens",
        detail::qwen3_moe("qwen3-30b-a3b", 2048, 32, 4, 768, 48, 151936, 4096, 128, 8)},
    entry{"nemotron4-15b",
          "Parmar et al. 2024 (Nemotron-4 15B Technical Report, Table 1: 32 layers, hidden 6144, 48 heads, 8 "
          "KV "
          "heads, squared ReLU, RoPE, 256,000 vocabulary, sequence 4096); MLP 4 x hidden, rotary on half of "
          "each head as NeMo's Nemotron-4 configs",
          detail::nemotron4("nemotron4-15b", 6144, 48, 8, 24576, 32)},
    entry{"nemotron4-340b",
          "NVIDIA 2024 (Nemotron-4 340B Technical Report, Table 1: 96 layers, hidden 18432, 96 heads, 8 KV "
          "heads, MLP 73728, squared ReLU, RoPE, sequence 4096); 256,000 vocabulary",
          detail::nemotron4("nemotron4-340b", 18432, 96, 8, 73728, 96)},
    entry{
        "nemotron-h-8b",
        "NVIDIA 2025 (Nemotron-H); HF nvidia/Nemotron-H-8B-Base-8K: 52 blocks, 24 Mamba-2 (128 heads of 64, "
        "state 128, 8 groups), 24 squared-ReLU MLPs of 21504, 4 attention (32 heads, 8 KV), hidden 4096",
        detail::nemotron_h("nemotron-h-8b", 4096, 32, 8, 21504,
                           "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", 128)},
    entry{
        "nemotron-3-nano-30b-a3b",
        "NVIDIA 2025 (Nemotron 3 Nano, 31.6B parameters); HF nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16: 52 "
        "blocks, 23 Mamba-2 (64 heads of 64), 23 expert blocks (128 of 1856, top 6, a shared one of 3712), 6 "
        "attention (32 heads of 128, 2 KV), hidden 2688",
        detail::nemotron_3_nano()},
};

/// A zoo model built from layers of its own (model::composite) rather than one transformer architecture.
struct composite_entry {
  std::string_view name;
  std::string_view source;
  model::model (*build)();
};

/// Every composite zoo entry.
inline constexpr std::array composite_entries{
    composite_entry{"transgan",
                    "Jiang et al. 2021 (TransGAN); the generator AMP trained (Li et al. 2022, het_model.py)",
                    +[]() -> model::model { return model::transgan_generator(); }},
};

/// The composite zoo entry with this name, if any.
constexpr std::optional<composite_entry> find_composite(std::string_view name) {
  for (const auto& e : composite_entries)
    if (e.name == name) return e;
  return std::nullopt;
}

/// Whether the zoo has a model of this name (a transformer or a composite model).
constexpr bool has(std::string_view name);

/// The zoo entry with this name, if any.
constexpr std::optional<entry> find(std::string_view name) {
  for (const auto& e : entries)
    if (e.name == name) return e;
  return std::nullopt;
}

/// The model with this zoo name, or a compile error / input_error naming the mistake.
namespace rules {
[[noreturn]] inline void unknown_zoo_model_name_see_phaze_models() {
  throw input_error("unknown zoo model name; run `phaze models` for the list");
}
}  // namespace rules

constexpr bool has(std::string_view name) {
  return find(name).has_value() || find_composite(name).has_value();
}

constexpr model::model get(std::string_view name) {
  if (const auto c = find_composite(name)) return c->build();
  const auto e = find(name);
  if (!e) rules::unknown_zoo_model_name_see_phaze_models();
  return model::make_model(e->config);
}

// Named accessors, usable in constant expressions.
constexpr model::model bert_large() {
  return get("bert-large");
}
constexpr model::model megatron_bert() {
  return get("megatron-bert");
}
constexpr model::model gpt2() {
  return get("gpt2");
}
constexpr model::model gpt2_xl() {
  return get("gpt2-xl");
}
constexpr model::model megatron_gpt2_40() {
  return get("megatron-gpt2-40");
}
constexpr model::model megatron_gpt2_54() {
  return get("megatron-gpt2-54");
}
constexpr model::model megatron_gpt2_72() {
  return get("megatron-gpt2-72");
}
constexpr model::model gpt3_175b() {
  return get("gpt3-175b");
}
constexpr model::model opt_350m() {
  return get("opt-350m");
}
constexpr model::model opt_1_3b() {
  return get("opt-1.3b");
}
constexpr model::model opt_175b() {
  return get("opt-175b");
}
constexpr model::model llama2_7b() {
  return get("llama2-7b");
}
constexpr model::model llama2_13b() {
  return get("llama2-13b");
}
constexpr model::model llama2_70b() {
  return get("llama2-70b");
}
constexpr model::model llama3_8b() {
  return get("llama3-8b");
}
constexpr model::model llama3_70b() {
  return get("llama3-70b");
}
constexpr model::model transgan() {
  return model::transgan_generator();
}

/// Up to `k` zoo names closest to `name` (names containing `name` first, then by edit distance, ties in zoo
/// order).
inline std::vector<std::string> closest_names(std::string_view name, std::size_t k = 3) {
  std::vector<std::string_view> names;
  for (const auto& e : entries) names.push_back(e.name);
  for (const auto& e : composite_entries) names.push_back(e.name);
  return phaze::closest_names(name, names, k);
}

/// The model with this zoo name; an unknown name throws input_error suggesting the closest names.
inline model::model lookup(std::string_view name) {
  if (const auto c = find_composite(name)) return c->build();
  if (const auto e = find(name)) return model::make_model(e->config);
  std::string message = "unknown model '" + std::string{name} + "'; did you mean " +
                        quoted_list(closest_names(name)) +
                        "? Run `phaze models` for the list, or pass a path to a HuggingFace config.json";
  throw input_error(message);
}

}  // namespace phaze::zoo
