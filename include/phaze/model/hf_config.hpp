/// @file
/// Builds a phaze model from a HuggingFace `config.json` (the model types of hf_model_types).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "phaze/core/error.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"

namespace phaze::model {

/// The HuggingFace `model_type` values from_hf_config understands.
inline constexpr std::array<std::string_view, 24> hf_model_types{
    "gpt2",     "opt",         "bloom",       "llama",   "mistral",  "qwen2",   "qwen3",       "phi3",
    "gemma",    "nemotron",    "falcon",      "bert",    "gpt_neox", "mixtral", "qwen2_moe",   "qwen3_moe",
    "deepseek", "deepseek_v2", "deepseek_v3", "gpt_oss", "gemma2",   "llama4",  "llama4_text", "nemotron_h"};

/// The sequence BLOOM trained at (BigScience, "BLOOM: A 176B-Parameter Open-Access Multilingual Language
/// Model", 2022, Table 3: 2048): its config has no position count (ALiBi needs none).
inline constexpr std::int64_t hf_bloom_training_sequence = 2048;

/// The training sequence an imported model gets when its context is longer and none is asked for: 8,192
/// tokens, the sequence Llama 3 pretrains at before its long-context stage (Llama 3 paper, Dubey et al. 2024,
/// section 3.4). A config's max_position_embeddings is what the model can attend over, not what it trains at
/// (Llama 3.1: 131,072); `--seq` trains at any other.
inline constexpr std::int64_t hf_default_training_sequence = 8192;

namespace detail::hf {

/// Largest size accepted for any config field. Real configs stay far below it (the largest vocabularies are
/// ~256k, the longest contexts ~1M); the bound keeps products such as hidden * ffn * layers inside int64.
inline constexpr std::int64_t max_size = std::int64_t{1} << 24;

/// A JSON value as it appears in the file, shortened for an error message.
inline std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

[[noreturn]] inline void field_error(std::string_view field, const std::string& problem) {
  throw input_error("config.json field '" + std::string{field} + "' " + problem);
}

/// Reads one HuggingFace config object, naming each field it rejects.
class reader {
 public:
  reader(const nlohmann::json& config, std::string model_type)
      : json_(config), type_(std::move(model_type)) {}

  /// The value of `field`, or nullptr when it is absent or null.
  [[nodiscard]] const nlohmann::json* get(std::string_view field) const {
    const auto it = json_.find(field);
    if (it == json_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  /// A positive size (at most max_size); absent or null gives nullopt.
  [[nodiscard]] std::optional<std::int64_t> size(std::string_view field) const {
    const auto* v = get(field);
    if (v == nullptr) return std::nullopt;
    std::int64_t n = 0;
    bool integral = false;
    if (v->is_number_integer() && !v->is_number_unsigned()) {
      n = v->get<std::int64_t>();
      integral = true;
    } else if (v->is_number_unsigned()) {
      const auto u = v->get<std::uint64_t>();
      n = u > static_cast<std::uint64_t>(max_size) ? max_size + 1 : static_cast<std::int64_t>(u);
      integral = true;
    } else if (v->is_number_float()) {
      // Some tools write integers as 4096.0; accept those, reject fractions.
      const double d = v->get<double>();
      integral = std::isfinite(d) && std::floor(d) == d;
      if (integral)
        n = d > static_cast<double>(max_size) ? max_size + 1 : d < 0.0 ? -1 : static_cast<std::int64_t>(d);
    }
    if (!integral || n <= 0) field_error(field, "must be a positive integer, got " + shown(*v));
    if (n > max_size) {
      field_error(field,
                  "is " + shown(*v) + ", larger than phaze accepts (" + std::to_string(max_size) + ")");
    }
    return n;
  }

  /// A positive size that must be present.
  [[nodiscard]] std::int64_t required_size(std::string_view field) const {
    if (const auto n = size(field)) return *n;
    missing(field);
  }

  /// The first of two alternative spellings that is present (GPT-2's n_positions / n_ctx).
  [[nodiscard]] std::int64_t required_size(std::string_view field, std::string_view alternative) const {
    if (const auto n = size(field)) return *n;
    if (const auto n = size(alternative)) return *n;
    missing(field);
  }

  [[nodiscard]] bool flag(std::string_view field, bool fallback) const {
    const auto* v = get(field);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) field_error(field, "must be true or false, got " + shown(*v));
    return v->get<bool>();
  }

  [[nodiscard]] double number(std::string_view field, double fallback) const {
    const auto* v = get(field);
    if (v == nullptr) return fallback;
    if (!v->is_number()) field_error(field, "must be a number, got " + shown(*v));
    return v->get<double>();
  }

  [[nodiscard]] std::optional<std::string> text(std::string_view field) const {
    const auto* v = get(field);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) field_error(field, "must be a string, got " + shown(*v));
    return v->get<std::string>();
  }

  /// True when any of the dropout probabilities is positive (each defaulting to `fallback`).
  [[nodiscard]] bool any_dropout(std::initializer_list<std::string_view> fields, double fallback) const {
    bool any = false;
    for (const auto f : fields) {
      const double p = number(f, fallback);
      if (!(p >= 0.0 && p < 1.0)) field_error(f, "must be a probability in [0, 1), got " + shown(*get(f)));
      any = any || p > 0.0;
    }
    return any;
  }

  /// The activation of a two-matrix MLP: any GELU variant, or ReLU.
  [[nodiscard]] mlp_kind activation(std::string_view field, std::string_view fallback) const {
    const std::string act = text(field).value_or(std::string{fallback});
    if (act.starts_with("gelu")) return mlp_kind::gelu;
    if (act == "relu") return mlp_kind::relu;
    field_error(field, "is \"" + act + "\"; phaze models model_type '" + type_ +
                           "' with a gelu or relu MLP only (e.g. \"gelu\", \"gelu_new\", \"relu\")");
  }

  [[noreturn]] void missing(std::string_view field) const {
    field_error(field, "is missing (required for model_type '" + type_ + "')");
  }

  [[nodiscard]] const std::string& model_type() const { return type_; }

 private:
  const nlohmann::json& json_;
  std::string type_;
};

/// The model_type of a config: its `model_type` field, or inferred from `architectures` ("LlamaForCausalLM").
inline std::string model_type_of(const nlohmann::json& config) {
  if (const auto it = config.find("model_type"); it != config.end() && !it->is_null()) {
    if (!it->is_string()) field_error("model_type", "must be a string, got " + shown(*it));
    return it->get<std::string>();
  }
  // Class-name prefixes of the HuggingFace model classes, longest first where one prefixes another.
  constexpr std::array<std::pair<std::string_view, std::string_view>, 23> prefixes{
      {{"Llama4ForCausalLM", "llama4_text"},
       {"Llama4", "llama4"},
       {"GPTNeoX", "gpt_neox"},
       {"Bloom", "bloom"},
       {"GPT2", "gpt2"},
       {"OPT", "opt"},
       {"Llama", "llama"},
       {"Mixtral", "mixtral"},
       {"Mistral", "mistral"},
       {"Qwen2Moe", "qwen2_moe"},
       {"Qwen2", "qwen2"},
       {"Qwen3Moe", "qwen3_moe"},
       {"Qwen3", "qwen3"},
       {"Phi3", "phi3"},
       {"NemotronH", "nemotron_h"},
       {"Nemotron", "nemotron"},
       {"DeepseekV", "deepseek_v"},
       {"Deepseek", "deepseek"},
       {"Gemma2", "gemma2"},
       {"Gemma", "gemma"},
       {"GptOss", "gpt_oss"},
       {"Falcon", "falcon"},
       {"Bert", "bert"}}};
  if (const auto it = config.find("architectures"); it != config.end() && it->is_array()) {
    for (const auto& a : *it) {
      if (!a.is_string()) continue;
      const auto name = a.get<std::string>();
      // Different architectures despite the prefix.
      if (name.starts_with("GPTNeoXJapanese") || name.starts_with("Phi3Small")) continue;
      for (const auto& [prefix, type] : prefixes) {
        if (name.starts_with(prefix)) return std::string{type};
      }
    }
  }
  field_error(
      "model_type",
      "is missing and cannot be inferred from 'architectures'; add \"model_type\": one of gpt2, opt, "
      "bloom, llama, mistral, qwen2, qwen3, phi3, gemma, nemotron, falcon, bert, gpt_neox, mixtral, "
      "qwen2_moe, qwen3_moe, deepseek, deepseek_v2, deepseek_v3, gpt_oss, gemma2, llama4, llama4_text");
}

inline transformer_config gpt2(const reader& r) {
  transformer_config c;
  c.arch = family::gpt;
  c.hidden = r.required_size("n_embd");
  c.heads = r.required_size("n_head");
  c.layers = r.required_size("n_layer");
  c.vocab = r.required_size("vocab_size");
  c.sequence = r.required_size("n_positions", "n_ctx");
  c.max_positions = c.sequence;
  c.ffn = r.size("n_inner").value_or(4 * c.hidden);  // HF GPT2Config: n_inner = None means 4 * n_embd
  c.mlp = r.activation("activation_function", "gelu_new");
  c.tied_embeddings = r.flag("tie_word_embeddings", true);
  c.dropout = r.any_dropout({"resid_pdrop", "embd_pdrop", "attn_pdrop"}, 0.1);
  return c;
}

/// The fields the OPT, Llama, BERT and GPT-NeoX configs name alike: width, heads, blocks, MLP width (under
/// `ffn_field`), vocabulary and positions (the training sequence).
inline transformer_config common_fields(const reader& r, family arch, std::string_view ffn_field) {
  transformer_config c;
  c.arch = arch;
  c.hidden = r.required_size("hidden_size");
  c.heads = r.required_size("num_attention_heads");
  c.layers = r.required_size("num_hidden_layers");
  c.ffn = r.required_size(ffn_field);
  c.vocab = r.required_size("vocab_size");
  c.sequence = r.required_size("max_position_embeddings");
  return c;
}

inline transformer_config opt(const reader& r) {
  transformer_config c = common_fields(r, family::opt, "ffn_dim");
  c.max_positions = c.sequence;
  c.position_offset = 2;  // OPTLearnedPositionalEmbedding keeps two extra rows (fairseq's padding offset)
  if (const auto e = r.size("word_embed_proj_dim"); e && *e != c.hidden) c.embed_dim = *e;
  c.pre_norm = r.flag("do_layer_norm_before", true);
  // HF OPTDecoder builds final_layer_norm only for pre-norm models that do not remove it.
  c.final_norm = c.pre_norm && !r.flag("_remove_final_layer_norm", false);
  c.mlp = r.activation("activation_function", "relu");
  c.bias = r.flag("enable_bias", true);
  c.tied_embeddings = r.flag("tie_word_embeddings", true);
  c.dropout = r.any_dropout({"dropout", "attention_dropout"}, 0.1);
  return c;
}

/// BLOOM (BigScience 2022): GPT-style blocks (LayerNorm, a GELU MLP of 4h, biases) with ALiBi positions, a
/// LayerNorm after the word embedding (word_embeddings_layernorm), tied embeddings, trained at 2048 tokens.
inline transformer_config bloom(const reader& r) {
  transformer_config c;
  c.arch = family::gpt;
  c.hidden = r.required_size("n_embed", "hidden_size");  // BloomConfig lets n_embed override hidden_size
  c.heads = r.required_size("n_head", "num_attention_heads");
  c.layers = r.required_size("n_layer", "num_hidden_layers");
  c.vocab = r.required_size("vocab_size");
  c.ffn = 4 * c.hidden;
  c.sequence = hf_bloom_training_sequence;
  c.positions = position_kind::alibi;
  c.embedding_norm = true;
  c.mlp = mlp_kind::gelu;
  c.tied_embeddings = r.flag("tie_word_embeddings", true);
  c.dropout = r.any_dropout({"hidden_dropout", "attention_dropout"}, 0.0);
  return c;
}

/// The DeepSeek generations' model types: DeepSeekMoE ("deepseek"), DeepSeek-V2 and V3 (latent attention).
inline bool deepseek_type(std::string_view model_type) {
  return model_type.starts_with("deepseek");
}
inline bool latent_attention_type(std::string_view model_type) {
  return model_type == "deepseek_v2" || model_type == "deepseek_v3";
}

/// Whether from_hf_config imports a `model_type`'s experts (hf::experts): Mixtral, Qwen2-MoE, Qwen3-MoE and
/// DeepSeekMoE (with DeepSeek-V2 and V3).
inline bool carries_experts(std::string_view model_type) {
  return model_type == "mixtral" || model_type == "qwen2_moe" || model_type == "qwen3_moe" ||
         deepseek_type(model_type) || model_type == "gpt_oss" || model_type == "llama4_text";
}

/// The Qwen generations' model types.
inline bool qwen2_type(std::string_view model_type) {
  return model_type == "qwen2" || model_type == "qwen2_moe";
}
inline bool qwen3_type(std::string_view model_type) {
  return model_type == "qwen3" || model_type == "qwen3_moe";
}

/// Multi-head latent attention fields (kv_lora_rank, q_lora_rank) in a config of a model_type without it:
/// refused naming the field (phaze imports them from deepseek_v2 and deepseek_v3 configs).
inline void refuse_latent_attention(const reader& r) {
  if (latent_attention_type(r.model_type())) return;
  for (const std::string_view latent : {"kv_lora_rank", "q_lora_rank"}) {
    if (r.get(latent) != nullptr)
      field_error(latent,
                  "is set: multi-head latent attention in a model_type '" + r.model_type() +
                      "' config; phaze imports it from model_type deepseek_v2 and deepseek_v3 configs");
  }
}

/// DeepSeek-V2/V3's multi-head latent attention (transformer_config::kv_lora_rank; DeepseekV3Config):
/// kv_lora_rank, q_lora_rank (null in V2-Lite: queries projected directly), qk_nope_head_dim (each head's
/// non-rotary query and key width), qk_rope_head_dim, v_head_dim.
inline void latent_attention(const reader& r, transformer_config& c) {
  c.kv_lora_rank = r.required_size("kv_lora_rank");
  c.q_lora_rank = r.size("q_lora_rank").value_or(0);
  c.head_dim = r.required_size("qk_nope_head_dim");
  c.rope_head_dim = r.required_size("qk_rope_head_dim");
  c.v_head_dim = r.required_size("v_head_dim");
  c.kv_heads = 0;  // one key and value head per query head (num_key_value_heads, when given, is the same)
}

/// Fields whose value changes what training costs and that phaze does not model: a config that sets one is
/// refused naming it, never imported as if it were absent.
inline void refuse_unmodelled(const reader& r) {
  refuse_latent_attention(r);
  const bool moe_type = carries_experts(r.model_type()) || r.model_type() == "nemotron_h";
  for (const std::string_view experts : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    if (const auto* v = r.get(experts);
        !moe_type && v != nullptr && !(v->is_number() && v->get<double>() <= 1.0)) {
      field_error(experts, "is " + shown(*v) + ": a mixture of experts in a model_type '" + r.model_type() +
                               "' config; phaze imports experts from model_type mixtral, qwen2_moe, "
                               "qwen3_moe, deepseek (DeepSeekMoE, V2, V3), gpt_oss and llama4 configs");
    }
  }
  if (r.model_type() != "gemma2") {
    for (const std::string_view capping : {"attn_logit_softcapping", "final_logit_softcapping"}) {
      if (const auto* v = r.get(capping); v != nullptr && !(v->is_number() && v->get<double>() == 0.0))
        field_error(capping, "is " + shown(*v) + ": logit soft-capping in a model_type '" + r.model_type() +
                                 "' config; phaze models it in gemma2 configs");
    }
  }
}

/// The training sequence of a model whose positions come from rotary embeddings: its context, at most
/// hf_default_training_sequence.
inline std::int64_t rotary_training_sequence(std::int64_t context) {
  return context < hf_default_training_sequence ? context : hf_default_training_sequence;
}

/// A sliding attention window (`sliding_window`, Mistral 7B v0.1: 4096): each query sees that many keys.
inline std::int64_t sliding_window(const reader& r) {
  if (qwen2_type(r.model_type()) || qwen3_type(r.model_type())) {
    // Qwen2 and Qwen3 slide the window only over the layers from max_window_layers on: layers that differ.
    if (r.flag("use_sliding_window", false)) {
      field_error("use_sliding_window",
                  "is true: Qwen then gives only some layers a sliding window (max_window_layers), layers "
                  "of two kinds phaze does not import; set it false to cost full attention");
    }
    return 0;
  }
  return r.size("sliding_window").value_or(0);
}

/// The fields of a decoder with rotary positions and grouped key/value heads (Llama and the types built like
/// it, Nemotron): common_fields, the training sequence, key/value heads and head_dim.
inline transformer_config rotary_decoder(const reader& r) {
  transformer_config c = common_fields(r, family::llama, "intermediate_size");
  // Rotary positions have no table: the context is kept (as max_positions) only where it is longer than the
  // sequence the model trains at.
  if (c.sequence > hf_default_training_sequence) c.max_positions = c.sequence;
  c.sequence = rotary_training_sequence(c.sequence);
  c.positions = position_kind::rotary;
  c.kv_heads = r.size("num_key_value_heads").value_or(c.heads);
  // Newer configs spell head_dim out even when it is hidden / heads; keep 0 (the default) in that case.
  // transformers' Qwen3Config and Qwen3MoeConfig default it to 128 whatever hidden / heads is.
  const auto head_dim = r.size("head_dim");
  const std::optional<std::int64_t> d = head_dim                     ? head_dim
                                        : qwen3_type(r.model_type()) ? std::optional<std::int64_t>{128}
                                                                     : std::nullopt;
  if (d && (c.hidden % c.heads != 0 || *d != c.hidden / c.heads)) c.head_dim = *d;
  return c;
}

/// The share of each head rotary embedding touches, in (0, 1], from `field` (`partial_rotary_factor`,
/// GPT-NeoX's `rotary_pct`); `fallback` when absent.
inline double rotary_share(const reader& r, std::string_view field, double fallback) {
  const double f = r.number(field, fallback);
  if (!(f > 0.0 && f <= 1.0)) field_error(field, "must lie in (0, 1], got " + shown(*r.get(field)));
  return f;
}

/// The period N of `layer_types` for apply_layer_types: every N-th block full (0: none full; -1: all).
inline std::int64_t full_attention_period(const reader& r, std::int64_t layers, std::int64_t fallback) {
  const auto* types = r.get("layer_types");
  if (types == nullptr) return fallback;
  if (!types->is_array() || static_cast<std::int64_t>(types->size()) != layers)
    field_error("layer_types", "must list one attention type per layer (" + std::to_string(layers) + ")");
  std::int64_t first_full = -1;
  for (std::int64_t i = 0; i < layers; ++i) {
    const auto& t = (*types)[static_cast<std::size_t>(i)];
    if (!t.is_string() ||
        (t.get<std::string>() != "full_attention" && t.get<std::string>() != "sliding_attention"))
      field_error("layer_types", "entries must be \"full_attention\" or \"sliding_attention\"");
    if (first_full < 0 && t.get<std::string>() == "full_attention") first_full = i;
  }
  if (first_full < 0) return 0;  // every block slides the window
  const std::int64_t period = first_full + 1;
  for (std::int64_t i = 0; i < layers; ++i) {
    const bool full = (*types)[static_cast<std::size_t>(i)].get<std::string>() == "full_attention";
    if (full != (i % period == period - 1))
      field_error("layer_types",
                  "mixes full and sliding attention in a pattern other than every N-th block full, which "
                  "phaze does not build");
  }
  if (period == 1) return -1;  // every block full: no window
  return period;
}

/// Which blocks of a config with a sliding window attend to every key (`layer_types`: "full_attention" or
/// "sliding_attention" per block, transformers' GptOssConfig and Gemma 2/3 configs), set on `c`: every N-th
/// block full and the others windowed (transformer_config::full_attention_every = N; 0 when every block
/// slides), or no window at all when every block is full or the config has none. Without the field every
/// `fallback`-th block is full (both configs' default alternates, sliding first). A pattern of another shape
/// is refused naming the field.
inline void apply_layer_types(const reader& r, transformer_config& c, std::int64_t fallback) {
  const std::int64_t period = full_attention_period(r, c.layers, fallback);
  if (period < 0 || c.attention_window == 0) {
    c.attention_window = 0;
    c.full_attention_every = 0;
  } else {
    c.full_attention_every = period;
  }
}

inline transformer_config llama(const reader& r) {
  transformer_config c = rotary_decoder(r);
  c.norm = norm_kind::rmsnorm;
  c.tied_embeddings = r.flag("tie_word_embeddings", r.model_type() == "gemma" || r.model_type() == "gemma2");
  c.dropout = r.any_dropout({"attention_dropout"}, 0.0);
  c.attention_window = sliding_window(r);
  if (r.model_type() == "gemma2") {
    // Gemma 2 (Gemma Team 2024, "Gemma 2: Improving Open Language Models at a Practical Size"; transformers'
    // Gemma2Config): Gemma's GeGLU block with a norm after each sublayer too, a sliding window on every
    // other block (the first slides), and soft-capped attention scores and output logits.
    c.mlp = mlp_kind::geglu;
    c.bias = r.flag("attention_bias", false);
    c.sandwich_norm = true;
    apply_layer_types(r, c, 2);
    c.attention_softcap = r.number("attn_logit_softcapping", 50.0) > 0.0;
    c.logit_softcap = r.number("final_logit_softcapping", 30.0) > 0.0;
    return c;
  }
  if (r.model_type() == "gemma") {
    // Gemma: GeGLU MLP (gelu(gate) * up, tanh form), head_dim independent of hidden / heads, tied.
    const std::string act =
        r.text("hidden_activation").value_or(r.text("hidden_act").value_or("gelu_pytorch_tanh"));
    if (!act.starts_with("gelu")) {
      field_error("hidden_activation",
                  "is \"" + act + "\"; phaze models model_type 'gemma' with a GeGLU MLP, which needs a gelu");
    }
    c.mlp = mlp_kind::geglu;
    c.bias = r.flag("attention_bias", false);
    return c;
  }
  const std::string act = r.text("hidden_act").value_or("silu");
  if (act != "silu" && act != "swish") {
    field_error("hidden_act", "is \"" + act + "\"; phaze models model_type '" + r.model_type() +
                                  "' with a SwiGLU MLP, which needs \"silu\"");
  }
  c.mlp = mlp_kind::swiglu;
  c.bias = r.flag("attention_bias", false) || r.flag("mlp_bias", false);
  // Qwen2's QKV projection carries a bias (Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False); Qwen3
  // drops it (attention_bias, default false) and normalizes queries and keys per head instead
  // (Qwen3Attention: q_norm and k_norm, RMSNorms over head_dim, before the rotary embedding).
  c.qkv_bias = qwen2_type(r.model_type());
  c.qk_norm = qwen3_type(r.model_type());
  if (r.model_type() == "phi3") {
    // Phi-3: the Llama block with fused qkv and gate_up projections (the same GEMMs), rotary positions on
    // partial_rotary_factor of each head (Phi3Config default 1.0), dropout after the residual branches and
    // the embedding (resid_pdrop, embd_pdrop) and on the attention probabilities.
    c.rotary_fraction = rotary_share(r, "partial_rotary_factor", 1.0);
    c.dropout = r.any_dropout({"resid_pdrop", "embd_pdrop", "attention_dropout"}, 0.0);
  }
  return c;
}

/// Nemotron (NVIDIA's Nemotron-4 and Minitron, HF NemotronForCausalLM): sequential pre-norm blocks with
/// LayerNorm1p (a LayerNorm whose weight is stored minus one: a LayerNorm's cost), grouped key/value heads,
/// rotary positions on partial_rotary_factor of each head (NemotronConfig default 0.5), a two-matrix MLP with
/// squared ReLU ("relu2"; no gate), no biases, untied embeddings.
inline transformer_config nemotron(const reader& r) {
  transformer_config c = rotary_decoder(r);
  c.norm = norm_kind::layernorm;
  c.rotary_fraction = rotary_share(r, "partial_rotary_factor", 0.5);
  const std::string act = r.text("hidden_act").value_or("relu2");
  if (act == "relu2") {
    c.mlp = mlp_kind::squared_relu;
  } else if (act == "relu") {
    c.mlp = mlp_kind::relu;
  } else if (act.starts_with("gelu")) {
    c.mlp = mlp_kind::gelu;
  } else {
    field_error("hidden_act", "is \"" + act +
                                  "\"; phaze models model_type 'nemotron' with a two-matrix MLP of \"relu2\" "
                                  "(squared ReLU), \"relu\" or a gelu");
  }
  c.bias = r.flag("attention_bias", false) || r.flag("mlp_bias", false);
  c.tied_embeddings = r.flag("tie_word_embeddings", false);
  c.dropout = r.any_dropout({"attention_dropout"}, 0.0);
  c.attention_window = sliding_window(r);
  return c;
}

/// Nemotron-H and Nemotron 3 (NVIDIA 2025; transformers' NemotronHConfig, model_type "nemotron_h"): a hybrid
/// whose blocks are each one sublayer, as hybrid_override_pattern lists them ('M' a Mamba-2 mixer of
/// mamba_num_heads heads of mamba_head_dim, state ssm_state_size, n_groups groups, conv_kernel taps and
/// chunks of chunk_size; '*' attention with grouped key/value heads of head_dim (attention_head_dim in
/// Nemotron-H's configs); '-' an MLP of intermediate_size; 'E' n_routed_experts experts of
/// moe_intermediate_size, top num_experts_per_tok, sigmoid-scored, plus n_shared_experts of
/// moe_shared_expert_intermediate_size), RMSNorm, squared-ReLU MLPs (mlp_hidden_act relu2), untied
/// embeddings; mamba_num_heads defaults to 128 as in NemotronHConfig. Biases on the attention and MLP
/// (attention_bias, mlp_bias) are costed, those on the Mamba-2 projections (use_bias, mamba_proj_bias)
/// refused. Its attention blocks have no position embedding; phaze costs them with rotary embedding, one
/// memory-bound pass on those few blocks.
inline transformer_config nemotron_h(const reader& r) {
  transformer_config c = rotary_decoder(r);
  if (const auto d = r.size("attention_head_dim"); d && c.head_dim == 0 && *d != c.hidden / c.heads)
    c.head_dim = *d;
  const std::string pattern = r.text("hybrid_override_pattern").value_or("");
  if (pattern.empty())
    field_error("hybrid_override_pattern", "is missing: a nemotron_h config lists its blocks");
  if (static_cast<std::int64_t>(pattern.size()) != c.layers)
    field_error("hybrid_override_pattern", "has " + std::to_string(pattern.size()) +
                                               " symbols; it needs one per block (num_hidden_layers " +
                                               std::to_string(c.layers) + ")");
  if (pattern.size() > max_hybrid_blocks)
    field_error("hybrid_override_pattern",
                "lists more than " + std::to_string(max_hybrid_blocks) + " blocks, more than phaze builds");
  for (const char x : pattern) {
    if (x != 'M' && x != '*' && x != '-' && x != 'E')
      field_error("hybrid_override_pattern", "has '" + std::string(1, x) +
                                                 "'; phaze builds 'M' (Mamba-2), '*' (attention), '-' (MLP) "
                                                 "and 'E' (experts) blocks");
  }
  c.hybrid_pattern = std::string_view{pattern};
  c.norm = norm_kind::rmsnorm;
  const std::string act = r.text("mlp_hidden_act").value_or("relu2");
  if (act != "relu2")
    field_error("mlp_hidden_act",
                "is \"" + act + "\"; phaze models nemotron_h's MLPs with \"relu2\" (squared ReLU)");
  c.mlp = mlp_kind::squared_relu;
  c.mamba_head_dim = r.required_size("mamba_head_dim");
  c.mamba_heads = r.size("mamba_num_heads").value_or(128);  // NemotronHConfig's default
  c.mamba_state = r.required_size("ssm_state_size");
  c.mamba_groups = r.size("n_groups").value_or(8);
  c.mamba_conv = r.size("conv_kernel").value_or(4);
  c.mamba_chunk = r.size("chunk_size").value_or(128);
  if (pattern.find('E') != std::string::npos) {
    c.experts = r.required_size("n_routed_experts");
    c.top_k = r.required_size("num_experts_per_tok");
    c.expert_ffn = r.required_size("moe_intermediate_size");
    const std::int64_t shared = r.size("n_shared_experts").value_or(1);
    c.shared_expert_ffn = shared * r.size("moe_shared_expert_intermediate_size").value_or(c.expert_ffn);
    c.sigmoid_router = true;
  }
  for (const std::string_view mixer_bias : {"use_bias", "mamba_proj_bias"}) {
    if (r.flag(mixer_bias, false))
      field_error(mixer_bias, "is true: biases on the Mamba-2 projections, which phaze does not cost");
  }
  c.bias = r.flag("attention_bias", false) || r.flag("mlp_bias", false);
  c.tied_embeddings = r.flag("tie_word_embeddings", false);
  c.dropout = r.any_dropout({"attention_dropout", "hidden_dropout"}, 0.0);
  return c;
}

/// Llama 4's language model (Meta 2025, Llama 4 Scout and Maverick model cards; transformers'
/// Llama4TextConfig, the `text_config` of a Llama4Config): the Llama block with grouped key/value heads, a
/// head_dim of its own and query/key norms (use_qk_norm: weightless L2 norms, costed as the RMSNorm kernels
/// phaze's qk_norm runs, 2 x head_dim weights per block more), and experts (num_local_experts of
/// intermediate_size, top num_experts_per_tok, a sigmoid over the chosen scores, a shared expert of
/// intermediate_size) in every interleave_moe_layer_step-th block (Llama4TextDecoderLayer: the N-th, 2N-th,
/// ...; the others a dense MLP of intermediate_size_mlp). Chunked local attention (attention_chunk_size) on
/// the blocks with rotary positions; phaze trains at most one chunk (transformer_config::attention_chunk),
/// where every block attends causally over the sequence, and costs the rotary embedding on every block (the
/// NoPE blocks, no_rope_layers, skip it). The vision encoder of a multimodal Llama4Config is not costed.
inline void llama4(const reader& r, transformer_config& c) {
  c.experts = r.required_size("num_local_experts");
  c.top_k = r.required_size("num_experts_per_tok");
  c.expert_ffn = r.required_size("intermediate_size");
  c.shared_expert_ffn = c.expert_ffn;
  c.ffn = r.size("intermediate_size_mlp").value_or(16384);  // Llama4TextConfig's default
  c.sigmoid_router = true;
  c.qk_norm = r.flag("use_qk_norm", true);
  const std::int64_t step = r.size("interleave_moe_layer_step").value_or(1);
  if (step > 1) {
    c.moe_every = step;
    c.moe_offset = step - 1;
  }
  if (const auto* listed = r.get("moe_layers"); listed != nullptr && !listed->is_null()) {
    bool matches = listed->is_array();
    std::int64_t count = 0;
    for (std::int64_t i = 0; matches && i < c.layers; ++i) {
      if (!c.moe_block(i)) continue;
      matches = count < static_cast<std::int64_t>(listed->size()) && (*listed)[count].is_number_integer() &&
                (*listed)[count].get<std::int64_t>() == i;
      ++count;
    }
    if (!matches || count != static_cast<std::int64_t>(listed->size()))
      field_error("moe_layers", "lists expert blocks other than every interleave_moe_layer_step-th (" +
                                    std::to_string(step) + "), which phaze does not build");
  }
  c.attention_chunk = r.size("attention_chunk_size").value_or(8192);
  if (c.sequence > c.attention_chunk) c.sequence = c.attention_chunk;
}

/// The experts of a mixture-of-experts config (Mixtral: num_local_experts x intermediate_size; Qwen2-MoE:
/// num_experts x moe_intermediate_size plus a shared expert; DeepSeekMoE: n_routed_experts x
/// moe_intermediate_size plus n_shared_experts of it, the first first_k_dense_replace blocks dense of
/// intermediate_size). Layer patterns phaze cannot build (MoE only every few blocks, dense blocks listed by
/// index) are refused naming the field.
inline void experts(const reader& r, transformer_config& c) {
  const std::string& type = r.model_type();
  if (type == "llama4_text") {
    llama4(r, c);
    return;
  }
  if (type == "mixtral" || type == "gpt_oss") {
    c.experts = r.required_size("num_local_experts");
    c.top_k = r.required_size("num_experts_per_tok");
    return;
  }
  c.experts = r.required_size(deepseek_type(type) ? "n_routed_experts" : "num_experts");
  c.top_k = r.required_size("num_experts_per_tok");
  c.expert_ffn = r.required_size("moe_intermediate_size");
  // Qwen3-MoE: Qwen2-MoE's layout without the shared expert (Qwen3MoeSparseMoeBlock).
  // Experts every N-th block: Qwen-MoE's layer i when (i + 1) % N == 0 (Qwen2MoeDecoderLayer), DeepSeekMoE's
  // when i % N == 0 past the first dense blocks (DeepseekV3DecoderLayer).
  const std::string_view every = deepseek_type(type) ? "moe_layer_freq" : "decoder_sparse_step";
  if (const auto step = r.size(every); step && *step > 1) {
    c.moe_every = *step;
    c.moe_offset = deepseek_type(type) ? 0 : *step - 1;
  }
  if (type == "qwen2_moe" || type == "qwen3_moe") {
    // Dense blocks listed by index (Qwen2MoeDecoderLayer: a dense MLP of intermediate_size in a listed
    // block).
    if (const auto* only = r.get("mlp_only_layers"); only != nullptr && !only->is_null()) {
      if (!only->is_array()) field_error("mlp_only_layers", "must be a list of block indices");
      for (const auto& v : *only) {
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= c.layers)
          field_error("mlp_only_layers", "must list block indices from 0 to num_hidden_layers - 1");
        if (v.get<std::int64_t>() >= transformer_config::max_listed_blocks)
          field_error("mlp_only_layers", "lists a block past the 256 phaze can mark dense");
        c.list_dense(v.get<std::int64_t>());
      }
    }
    // transformers' Qwen2MoeConfig defaults the shared expert to 5632 wide (Qwen1.5-MoE-A2.7B's): a config
    // without the field has one.
    if (type == "qwen2_moe") c.shared_expert_ffn = r.size("shared_expert_intermediate_size").value_or(5632);
    return;
  }
  // deepseek
  if (const auto shared = r.size("n_shared_experts")) c.shared_expert_ffn = *shared * c.expert_ffn;
  c.dense_layers = r.size("first_k_dense_replace").value_or(0);
  // DeepSeek-V3 scores experts by a sigmoid (with a bias for load balancing and group-limited top-k:
  // n_group, topk_group): like the softmax, one elementwise pass over the router's logits, costed as one.
  const std::string score = r.text("scoring_func").value_or("softmax");
  if (score != "softmax" && score != "sigmoid")
    field_error("scoring_func", "is \"" + score + "\"; phaze models softmax and sigmoid routing");
  c.sigmoid_router = score == "sigmoid";
}

/// GPT-OSS (OpenAI 2025, gpt-oss-120b and gpt-oss-20b model card; transformers' GptOssConfig): the Llama
/// block with biases on every linear layer, experts included (attention_bias), grouped key/value heads,
/// head_dim of its own, a mixture of num_local_experts experts of intermediate_size, top num_experts_per_tok,
/// and a sliding window of `sliding_window` tokens on every other block (layer_types). Its attention sinks
/// (one learned logit per head) and the clamped SwiGLU are costed as the plain softmax and SwiGLU.
inline void gpt_oss(const reader& r, transformer_config& c) {
  c.bias = r.flag("attention_bias", true);  // GptOssAttention's and GptOssExperts' biases
  apply_layer_types(r, c, 2);
}

/// Falcon (RefinedWeb models): rotary positions, parallel attention and MLP (`parallel_attn`), multi-query
/// attention (`multi_query`: one key/value head) or grouped key/value heads (`new_decoder_architecture`,
/// `num_kv_heads`), a GELU MLP of 4h, no biases; ALiBi positions (`alibi`, Falcon-RW) in place of rotary
/// ones.
inline transformer_config falcon(const reader& r) {
  transformer_config c;
  c.arch = family::neox;
  c.hidden = r.required_size("hidden_size");
  c.heads = r.required_size("num_attention_heads", "n_head");
  c.layers = r.required_size("num_hidden_layers", "n_layer");
  c.vocab = r.required_size("vocab_size");
  c.ffn = r.size("ffn_hidden_size").value_or(4 * c.hidden);
  // Falcon's configs of 2023 have no max_position_embeddings: 2048 is FalconConfig's default.
  c.max_positions = r.size("max_position_embeddings").value_or(2048);
  c.sequence = rotary_training_sequence(c.max_positions);
  // Falcon-RW: ALiBi positions instead of rotary ones.
  c.positions = r.flag("alibi", false) ? position_kind::alibi : position_kind::rotary;
  const bool grouped = r.flag("new_decoder_architecture", false);
  if (grouped) {
    c.kv_heads = r.required_size("num_kv_heads");
  } else if (r.flag("multi_query", true)) {
    c.kv_heads = 1;
  }
  c.parallel_residual = grouped || r.flag("parallel_attn", true);
  // FalconDecoderLayer: one input_layernorm feeds attention and MLP unless the new architecture gives each
  // its own (ln_attn, ln_mlp).
  c.shared_norm = c.parallel_residual && !grouped;
  c.mlp = mlp_kind::gelu;
  c.bias = r.flag("bias", false);
  c.tied_embeddings = r.flag("tie_word_embeddings", true);
  c.dropout = r.any_dropout({"hidden_dropout", "attention_dropout"}, 0.0);
  return c;
}

inline transformer_config bert(const reader& r) {
  transformer_config c = common_fields(r, family::bert, "intermediate_size");
  c.max_positions = c.sequence;
  c.token_types = r.size("type_vocab_size").value_or(2);
  c.mlp = r.activation("hidden_act", "gelu");
  c.pre_norm = false;
  c.final_norm = false;
  c.causal = false;
  c.bert_heads = true;
  c.tied_embeddings = r.flag("tie_word_embeddings", true);
  c.dropout = r.any_dropout({"hidden_dropout_prob", "attention_probs_dropout_prob"}, 0.1);
  return c;
}

inline transformer_config gpt_neox(const reader& r) {
  transformer_config c = common_fields(r, family::neox, "intermediate_size");
  c.positions = position_kind::rotary;
  const std::string_view pct_field = r.get("rotary_pct") != nullptr ? "rotary_pct" : "partial_rotary_factor";
  c.rotary_fraction = rotary_share(r, pct_field, 0.25);  // HF GPTNeoXConfig default rotary_pct = 0.25
  c.mlp = r.activation("hidden_act", "gelu");
  c.parallel_residual = r.flag("use_parallel_residual", true);
  c.bias = r.flag("attention_bias", true);
  c.tied_embeddings = r.flag("tie_word_embeddings", false);
  c.dropout = r.any_dropout({"hidden_dropout", "attention_dropout"}, 0.0);
  return c;
}

/// The rotary embedding's base and Llama 3.1 scaling (transformer_config::rotary_base, rope_scaling_factor):
/// `rope_theta` (transformers v5: `rope_parameters.rope_theta`; GPT-NeoX: `rotary_emb_base`), defaulting as
/// transformers' config classes do (MixtralConfig 1e6, Llama4TextConfig 500,000, GptOssConfig 150,000, the
/// others 10,000), and `rope_scaling` (or `rope_parameters`) of rope_type "llama3": its factor. Other
/// scaling types (linear, dynamic, yarn, longrope) are not kept.
inline void rotary_frequencies(const reader& r, transformer_config& c) {
  const std::string_view type = r.model_type();
  const double fallback = type == "mixtral"       ? 1e6
                          : type == "llama4_text" ? 500000.0
                          : type == "gpt_oss"     ? 150000.0
                                                  : 10000.0;
  const auto* parameters = r.get("rope_parameters");
  const bool nested = parameters != nullptr && parameters->is_object();
  double base = fallback;
  std::string_view field = "rope_theta";
  if (r.get("rope_theta") != nullptr) {
    base = r.number("rope_theta", fallback);
  } else if (r.get("rotary_emb_base") != nullptr) {
    field = "rotary_emb_base";
    base = r.number(field, fallback);
  } else if (nested) {
    field = "rope_parameters.rope_theta";
    base = reader{*parameters, std::string{type}}.number("rope_theta", fallback);
  }
  if (!(base > 0.0 && base <= 1e12)) field_error(field, "must be a positive number up to 1e12");
  c.rotary_base = base;
  const auto* scaling = r.get("rope_scaling") != nullptr ? r.get("rope_scaling") : parameters;
  if (scaling == nullptr || !scaling->is_object()) return;
  const reader sr{*scaling, std::string{type}};
  const auto kind = sr.get("rope_type") != nullptr ? sr.text("rope_type") : sr.text("type");
  if (kind != "llama3") return;
  const double factor = sr.number("factor", 8.0);  // Llama 3.1's configs give 8
  if (!(factor >= 1.0 && factor <= 1e6)) field_error("rope_scaling.factor", "must lie in [1, 1e6]");
  c.rope_scaling_factor = factor;
}

/// Rules phaze's validate() would also reject, checked here first so the message names the JSON fields.
inline void check_attention(const reader& r, const transformer_config& c) {
  const bool gpt2 = r.model_type() == "gpt2";
  const std::string hidden_field = gpt2 ? "n_embd" : "hidden_size";
  const std::string heads_field = gpt2 ? "n_head" : "num_attention_heads";
  if (c.head_dim == 0 && c.hidden % c.heads != 0) {
    throw input_error("config.json fields '" + hidden_field + "' (" + std::to_string(c.hidden) + ") and '" +
                      heads_field + "' (" + std::to_string(c.heads) +
                      "): the number of attention heads must divide the hidden size, or give 'head_dim'");
  }
  if (c.kv_heads > 0 && c.heads % c.kv_heads != 0) {
    throw input_error("config.json field 'num_key_value_heads' (" + std::to_string(c.kv_heads) +
                      ") must divide '" + heads_field + "' (" + std::to_string(c.heads) + ")");
  }
}

}  // namespace detail::hf

/// The model described by a HuggingFace `config.json` (already parsed). The architecture comes from
/// `model_type` (or, when absent, from `architectures`); the training sequence length is the model's
/// maximum position count (use with_sequence for another). The name is `_name_or_path`, else
/// `fallback_name`, else the model_type. Fields phaze does not need are ignored; a missing, mistyped or
/// non-positive field, or an architecture phaze's rules reject, is an input_error naming the field.
inline constexpr auto from_hf_config = [](const nlohmann::json& config,
                                          std::string_view fallback_name = {}) -> model {
  namespace hf = detail::hf;
  try {
    if (!config.is_object()) {
      throw input_error(std::string{"config.json must hold a JSON object, got "} + config.type_name());
    }
    const std::string outer = hf::model_type_of(config);
    // A multimodal Llama 4 config holds its language model in text_config.
    const nlohmann::json* body = &config;
    if (outer == "llama4") {
      const auto text = config.find("text_config");
      if (text == config.end() || !text->is_object())
        hf::field_error("text_config",
                        "is missing or not an object: a Llama 4 config holds its language model there");
      body = &*text;
    }
    const std::string type = outer == "llama4" ? "llama4_text" : outer;
    const hf::reader r{*body, type};
    if (std::find(hf_model_types.begin(), hf_model_types.end(), type) == hf_model_types.end()) {
      hf::refuse_latent_attention(r);  // DeepSeek-V2/V3: the feature named, not only the type
      std::string supported;
      for (const auto t : hf_model_types) supported += (supported.empty() ? "" : ", ") + std::string{t};
      hf::field_error("model_type",
                      "is \"" + type + "\", which phaze cannot import; supported: " + supported);
    }
    hf::refuse_unmodelled(r);
    transformer_config c;
    if (type == "gpt2") {
      c = hf::gpt2(r);
    } else if (type == "bloom") {
      c = hf::bloom(r);
    } else if (type == "opt") {
      c = hf::opt(r);
    } else if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" || type == "phi3" ||
               type == "gemma" || type == "gemma2") {
      c = hf::llama(r);
    } else if (type == "nemotron") {
      c = hf::nemotron(r);
    } else if (type == "nemotron_h") {
      c = hf::nemotron_h(r);
    } else if (hf::carries_experts(type)) {
      c = hf::llama(r);
      hf::experts(r, c);
      if (hf::latent_attention_type(type)) hf::latent_attention(r, c);
      // DeepSeek-V3's multi-token prediction modules (transformer_config::mtp_layers).
      if (hf::deepseek_type(type)) c.mtp_layers = r.size("num_nextn_predict_layers").value_or(0);
      if (type == "gpt_oss") hf::gpt_oss(r, c);
    } else if (type == "falcon") {
      c = hf::falcon(r);
    } else if (type == "bert") {
      c = hf::bert(r);
    } else {
      c = hf::gpt_neox(r);  // the last of hf_model_types: any type outside them was refused above
    }
    hf::check_attention(r, c);
    if (c.positions == position_kind::rotary) hf::rotary_frequencies(r, c);

    const auto name_or_path = hf::reader{config, outer}.text("_name_or_path");
    if (name_or_path && !name_or_path->empty()) {
      c.name = std::string_view{*name_or_path};
    } else if (!fallback_name.empty()) {
      c.name = fallback_name;
    } else {
      c.name = std::string_view{type};
    }
    try {
      return make_model(c);
    } catch (const input_error& e) {
      throw input_error(std::string{"config.json describes a model phaze cannot build: "} + e.what());
    }
  } catch (const nlohmann::json::exception& e) {
    // Every access above checks types first; this only guards against a case missed.
    throw input_error(std::string{"config.json could not be read: "} + e.what());
  }
};

}  // namespace phaze::model
