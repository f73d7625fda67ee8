/// @file
/// Transformer architectures (GPT, BERT, OPT, Llama, GPT-NeoX) and the layers they are made of, split for
/// tensor and sequence parallelism the way Megatron-LM does.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "phaze/core/error.hpp"
#include "phaze/core/fixed_string.hpp"
#include "phaze/core/limits.hpp"
#include "phaze/model/layer.hpp"

namespace phaze::model {

enum class family : std::uint8_t { gpt, bert, opt, llama, neox };
/// The normalization of a block: LayerNorm (mean and variance, weight and bias), RMSNorm (root mean square,
/// weight) or PixelNorm (root mean square, no weights: Karras et al., ICLR 2018, as TransGAN uses it).
enum class norm_kind : std::uint8_t { layernorm, rmsnorm, pixelnorm };
/// The MLP's activation. squared_relu is relu(x)^2 (So et al. 2021, "Primer"; Nemotron-4): one fused
/// elementwise kernel, as Megatron-Core's squared_relu runs under its jit_fuser.
enum class mlp_kind : std::uint8_t { gelu, relu, swiglu, geglu, squared_relu };
/// How a model knows positions: a learned table added to the embedding, rotary embeddings of the queries and
/// keys, or ALiBi (Press et al. 2022, BLOOM): a fixed per-head linear bias added to the attention scores.
enum class position_kind : std::uint8_t { learned, rotary, alibi };

constexpr std::string_view to_string(family f) {
  switch (f) {
    case family::gpt:
      return "gpt";
    case family::bert:
      return "bert";
    case family::opt:
      return "opt";
    case family::llama:
      return "llama";
    case family::neox:
      return "gpt-neox";
  }
  return "?";
}
constexpr std::string_view to_string(norm_kind n) {
  return n == norm_kind::layernorm ? "layernorm" : n == norm_kind::rmsnorm ? "rmsnorm" : "pixelnorm";
}
constexpr std::string_view to_string(mlp_kind m) {
  switch (m) {
    case mlp_kind::gelu:
      return "gelu";
    case mlp_kind::relu:
      return "relu";
    case mlp_kind::swiglu:
      return "swiglu";
    case mlp_kind::geglu:
      return "geglu";
    case mlp_kind::squared_relu:
      return "squared_relu";
  }
  return "?";
}
constexpr std::string_view to_string(position_kind p) {
  return p == position_kind::learned ? "learned" : p == position_kind::rotary ? "rotary" : "alibi";
}

/// The architecture of a transformer language model: everything its layer graphs are built from.
/// Fields left 0 take their conventional default (kv_heads = heads, head_dim = hidden / heads,
/// max_positions = sequence).
/// The longest hybrid layer pattern a transformer_config holds (transformer_config::hybrid_pattern).
inline constexpr std::size_t max_hybrid_blocks = 254;

struct transformer_config {
  fixed_string<48> name;
  family arch = family::gpt;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  ///< grouped-query attention: fewer key/value heads than query heads
  std::int64_t head_dim = 0;
  std::int64_t ffn = 0;     ///< MLP inner width
  std::int64_t layers = 0;  ///< transformer blocks
  std::int64_t vocab = 0;
  std::int64_t sequence = 0;         ///< training sequence length
  std::int64_t max_positions = 0;    ///< rows of a learned position table
  std::int64_t position_offset = 0;  ///< extra position rows (OPT keeps 2)
  std::int64_t token_types = 0;      ///< BERT token-type (segment) embedding rows
  std::int64_t embed_dim = 0;  ///< word-embedding width when it differs from hidden (OPT-350m: projected)
  /// Learned bias entries added to every head's attention scores (a relative-position table: (2 w - 1)^2 for
  /// windows of w x w tokens, as in TransGAN and the Swin Transformer); 0 for none.
  std::int64_t score_bias = 0;
  norm_kind norm = norm_kind::layernorm;
  mlp_kind mlp = mlp_kind::gelu;
  position_kind positions = position_kind::learned;
  double rotary_fraction = 1.0;  ///< share of each head's dimensions that rotary embedding touches (NeoX)
  /// The rotary embedding's base (theta; Su et al. 2021 and Llama 2 use 10,000, Llama 3 500,000, Qwen3 and
  /// Mixtral 1,000,000): HuggingFace's rope_theta, Megatron-LM's --rotary-base. It changes no cost, only the
  /// model a launch line trains.
  double rotary_base = 10000.0;
  /// Llama 3.1's frequency scaling of the rotary embedding (HuggingFace rope_scaling of rope_type "llama3":
  /// its factor; Megatron-LM's --use-rope-scaling --rope-scaling-factor); 0: none. No cost either.
  double rope_scaling_factor = 0.0;
  bool bias = true;       ///< linear layers carry biases
  bool qkv_bias = false;  ///< the QKV projection carries a bias even when the others do not (Qwen2)
  /// Queries and keys normalized per head before the rotary embedding (Qwen3's q_norm / k_norm, OLMo 2;
  /// Megatron-LM's --qk-layernorm): one norm of the model's kind over each head's head_dim, its head_dim
  /// weights (two sets) replicated on every tensor-parallel rank.
  bool qk_norm = false;
  /// Multi-head latent attention (DeepSeek-AI, "DeepSeek-V2", arXiv 2405.04434, section 2.1; Megatron-Core's
  /// MLASelfAttention): keys and values come from a kv_lora_rank-wide latent of each token (a down
  /// projection of hidden -> kv_lora_rank + rope_head_dim, an RMSNorm, an up projection to every head's
  /// head_dim key part and v_head_dim value), queries from a q_lora_rank-wide one (or directly when 0),
  /// and every query and key head carries rope_head_dim more rotary dimensions (the key's shared by the
  /// heads). head_dim is then the non-rotary part (qk_nope_head_dim). 0: ordinary attention.
  std::int64_t kv_lora_rank = 0;
  std::int64_t q_lora_rank = 0;    ///< latent attention: the queries' latent width (0: projected directly)
  std::int64_t rope_head_dim = 0;  ///< latent attention: rotary dimensions of each query and key head
  std::int64_t v_head_dim = 0;     ///< latent attention: value width of each head (0: head_dim)
  /// Keys each query attends to (sliding-window attention, Mistral 7B v0.1); 0: every earlier key. Fused
  /// attention skips the rest; unfused attention computes the whole score matrix and masks it.
  std::int64_t attention_window = 0;
  /// With a window: every N-th block (blocks N - 1, 2 N - 1, ...) attends to every earlier key, the others
  /// slide the window (GPT-OSS and Gemma 2: N = 2; Gemma 3: N = 6); 0: every block slides it.
  std::int64_t full_attention_every = 0;
  bool tied_embeddings = true;  ///< output projection shares the input embedding matrix
  /// A norm after the word embedding (BLOOM's word_embeddings_layernorm; BERT always has one).
  bool embedding_norm = false;
  bool pre_norm = true;  ///< normalize before attention/MLP (GPT-2 onwards) rather than after (BERT)
  /// Pre-norm blocks that also normalize each sublayer's output before the residual add (Gemma 2 and 3:
  /// post_attention_layernorm and post_feedforward_layernorm): two more norms per block.
  bool sandwich_norm = false;
  /// Logit soft-capping, cap x tanh(x / cap) (Gemma 2): over the attention scores (attn_logit_softcapping; a
  /// fused kernel applies it in its tiles, FlashAttention-2's softcap) and over the output logits
  /// (final_logit_softcapping); false: none.
  bool attention_softcap = false;
  bool logit_softcap = false;
  bool final_norm = true;          ///< a norm after the last block
  bool parallel_residual = false;  ///< attention and MLP read the same input (GPT-NeoX, GPT-J)
  bool shared_norm = false;        ///< parallel residual: one norm feeds both (Falcon-7B), not one each
  bool dropout = true;             ///< dropout after attention probabilities and each sublayer
  bool causal = true;              ///< decoder (causal mask) vs encoder
  bool bert_heads = false;  ///< BERT pre-training heads: pooler + next-sentence and masked-LM transforms
  /// Mixture of experts (Mixtral, DeepSeekMoE, Qwen-MoE): routed experts per block (0: a dense MLP of ffn).
  std::int64_t experts = 0;
  std::int64_t top_k = 0;       ///< experts each token is routed to
  std::int64_t expert_ffn = 0;  ///< inner width of one routed expert (0: ffn)
  /// Inner width of the shared experts every token also passes (DeepSeekMoE, Qwen-MoE: all of them
  /// together, as one dense MLP); 0: none.
  std::int64_t shared_expert_ffn = 0;
  /// The router scores experts by a sigmoid (DeepSeek-V3) rather than a softmax: the same elementwise pass
  /// over its logits, costed alike; kept so that a launch line names it.
  bool sigmoid_router = false;
  /// The first blocks keep a dense MLP of width ffn (DeepSeekMoE's first_k_dense_replace).
  std::int64_t dense_layers = 0;
  /// Experts only every moe_every-th block (0 or 1: every block): block i (0-based) past the dense_layers
  /// carries them when i % moe_every == moe_offset, the others a dense MLP of width ffn (moe_blocks).
  /// Qwen2-MoE's decoder_sparse_step N and Llama 4's interleave_moe_layer_step N are (N, N - 1): the N-th,
  /// 2N-th, ... block; DeepSeekMoE's moe_layer_freq N is (N, 0).
  std::int64_t moe_every = 0;
  std::int64_t moe_offset = 0;
  /// Blocks listed by index that keep a dense MLP of width ffn among the expert blocks (Qwen2-MoE's and
  /// Qwen3-MoE's mlp_only_layers): bit i of the mask marks block i, for the first max_listed_blocks blocks.
  std::array<std::uint64_t, 4> dense_listed{};
  static constexpr std::int64_t max_listed_blocks = 256;
  /// Chunked local attention (Llama 4's attention_chunk_size): each query sees the keys of its own chunk of
  /// this many tokens; 0: none. phaze models training sequences of at most one chunk, where it is the
  /// causal attention over the whole sequence (validate refuses longer ones).
  std::int64_t attention_chunk = 0;
  /// Megatron-Core's --moe-expert-capacity-factor with padding: every expert processes capacity_factor x
  /// its balanced share of tokens; 0: dropless, costed at the balanced share (imbalance not modelled).
  double capacity_factor = 0.0;
  /// Multi-token prediction modules (DeepSeek-V3, section 2.2: num_nextn_predict_layers; Megatron-Core's
  /// --mtp-num-layers): each predicts one token further from the previous prediction's hidden state and the
  /// embedding of the next token (both normed, joined and projected from 2 hidden to hidden), through one
  /// more transformer block (an expert block where the model has experts) and the output projection the head
  /// already holds. Megatron-Core builds them on the last pipeline stage with the loss, so phaze builds them
  /// into the output layer: its own parameters are the block, the projection and the norms; the embedding it
  /// reads is a copy of the input layer's kept there (its gradients summed with the first stage's, as a
  /// tied embedding's are). 0: none.
  std::int64_t mtp_layers = 0;
  /// A hybrid model's blocks, one symbol each (Megatron-Core's hybrid layer pattern, HuggingFace's
  /// hybrid_override_pattern; Nemotron-H): 'M' a Mamba-2 mixer, '*' self-attention, '-' a dense MLP of ffn,
  /// 'E' the mixture of experts, each block one sublayer with its own pre-norm and residual. Empty: every
  /// block is attention and MLP (or experts). Its length is the layer count.
  fixed_string<max_hybrid_blocks + 1> hybrid_pattern{};
  /// Mamba-2 mixers (Dao and Gu, "Transformers are SSMs", arXiv 2405.21060; Megatron-Core's MambaMixer):
  /// heads of head_dim channels (d_inner = heads x head_dim), a state of mamba_state per head, B and C shared
  /// by mamba_groups groups of heads, a causal depthwise convolution of mamba_conv taps and the chunked scan
  /// over chunks of mamba_chunk tokens. Used by the 'M' blocks of hybrid_pattern.
  std::int64_t mamba_heads = 0;
  std::int64_t mamba_head_dim = 0;
  std::int64_t mamba_state = 0;
  std::int64_t mamba_groups = 0;
  std::int64_t mamba_conv = 4;
  std::int64_t mamba_chunk = 128;

  [[nodiscard]] constexpr std::int64_t kv_heads_or_default() const { return kv_heads > 0 ? kv_heads : heads; }
  [[nodiscard]] constexpr std::int64_t head_dim_or_default() const {
    return head_dim > 0 ? head_dim : (heads > 0 ? hidden / heads : 0);
  }
  [[nodiscard]] constexpr bool latent_attention() const { return kv_lora_rank > 0; }
  /// Width of each query and key head: head_dim, plus the rotary part under latent attention.
  [[nodiscard]] constexpr std::int64_t qk_head_dim() const { return head_dim_or_default() + rope_head_dim; }
  /// Width of each value head (and of each head's share of the attention output).
  [[nodiscard]] constexpr std::int64_t value_head_dim() const {
    return v_head_dim > 0 ? v_head_dim : head_dim_or_default();
  }
  [[nodiscard]] constexpr std::int64_t position_rows() const {
    return (max_positions > 0 ? max_positions : sequence) + position_offset;
  }
  [[nodiscard]] constexpr std::int64_t embed_dim_or_default() const {
    return embed_dim > 0 ? embed_dim : hidden;
  }
  [[nodiscard]] constexpr std::int64_t expert_ffn_or_default() const {
    return expert_ffn > 0 ? expert_ffn : ffn;
  }
  /// The same architecture with a dense MLP of ffn in every block (DeepSeekMoE's first blocks).
  [[nodiscard]] constexpr transformer_config without_experts() const {
    transformer_config c = *this;
    c.experts = c.top_k = c.shared_expert_ffn = c.dense_layers = c.moe_every = c.moe_offset = 0;
    c.dense_listed = {};
    if (c.hybrid()) {  // the expert blocks of a hybrid pattern become dense MLP blocks
      std::array<char, max_hybrid_blocks> dense{};
      const std::string_view p = c.hybrid_pattern.view();
      for (std::size_t i = 0; i < p.size(); ++i) dense[i] = p[i] == 'E' ? '-' : p[i];
      c.hybrid_pattern = std::string_view{dense.data(), p.size()};
    }
    return c;
  }
  /// Whether block `i` is listed as dense (dense_listed).
  [[nodiscard]] constexpr bool listed_dense(std::int64_t i) const {
    return i >= 0 && i < max_listed_blocks &&
           ((dense_listed[static_cast<std::size_t>(i / 64)] >> (i % 64)) & 1U) != 0;
  }
  /// Lists block `i` (0 <= i < max_listed_blocks) as dense (dense_listed).
  constexpr void list_dense(std::int64_t i) {
    dense_listed[static_cast<std::size_t>(i / 64)] |= std::uint64_t{1} << (i % 64);
  }
  /// Whether some block is listed as dense.
  [[nodiscard]] constexpr bool lists_dense() const {
    for (const std::uint64_t w : dense_listed)
      if (w != 0) return true;
    return false;
  }
  /// Whether block `i` (0-based) carries the experts (dense_layers, moe_every, dense_listed): false without
  /// experts.
  [[nodiscard]] constexpr bool moe_block(std::int64_t i) const {
    if (hybrid()) return experts > 0 && block_symbol(i) == 'E';
    if (experts == 0 || i < dense_layers || listed_dense(i)) return false;
    return moe_every <= 1 || i % moe_every == moe_offset;
  }
  /// Whether the model is a hybrid of single-sublayer blocks (hybrid_pattern).
  [[nodiscard]] constexpr bool hybrid() const { return !hybrid_pattern.empty(); }
  /// The symbol of block `i` in hybrid_pattern ('M', '*', '-' or 'E'); 0 for a model that is not hybrid.
  [[nodiscard]] constexpr char block_symbol(std::int64_t i) const {
    return hybrid() && i >= 0 && static_cast<std::size_t>(i) < hybrid_pattern.size()
               ? hybrid_pattern.view()[static_cast<std::size_t>(i)]
               : '\0';
  }
  /// How many blocks of hybrid_pattern carry `symbol`.
  [[nodiscard]] constexpr std::int64_t blocks_of(char symbol) const {
    std::int64_t n = 0;
    for (const char x : hybrid_pattern.view()) n += x == symbol ? 1 : 0;
    return n;
  }
  /// Whether `tp` tensor-parallel ranks split its Mamba-2 mixers (their heads and groups); true without.
  [[nodiscard]] constexpr bool mamba_splits_over(std::int64_t tp) const {
    return blocks_of('M') == 0 || (mamba_heads % tp == 0 && mamba_groups % tp == 0);
  }
  /// Channels of a Mamba-2 mixer's inner width (mamba_heads x mamba_head_dim).
  [[nodiscard]] constexpr std::int64_t mamba_inner() const { return mamba_heads * mamba_head_dim; }
  /// The factor token slots are padded by: capacity_factor, or 1 when dropless (0).
  [[nodiscard]] constexpr double capacity_factor_or_one() const {
    return capacity_factor > 0.0 ? capacity_factor : 1.0;
  }
  friend constexpr bool operator==(const transformer_config&, const transformer_config&) = default;
};

namespace rules {
[[noreturn]] inline void hidden_size_must_be_positive() {
  throw input_error("hidden size must be positive; give the model width (e.g. hidden = 4096)");
}
[[noreturn]] inline void attention_heads_must_be_positive() {
  throw input_error("number of attention heads must be positive");
}
[[noreturn]] inline void layer_count_must_be_positive() {
  throw input_error("number of transformer layers must be positive");
}
[[noreturn]] inline void context_parallel_size_must_be_positive() {
  throw input_error("the context-parallel size must be at least 1; give `cp` N with N >= 1");
}
[[noreturn]] inline void context_parallelism_needs_sequence_divisible_by_2_cp() {
  throw input_error(
      "context parallelism splits each sequence into 2 * cp chunks (two per rank, balancing the causal "
      "mask); "
      "give a `sequence` divisible by 2 * cp, or a smaller `cp`");
}
[[noreturn]] inline void context_parallelism_needs_fused_attention() {
  throw input_error(
      "context parallelism runs ring attention over fused attention kernels (Transformer Engine); give "
      "`fused_attention` (or auto on GPUs that run it), or `cp` 1");
}
[[noreturn]] inline void vocabulary_padding_must_be_positive() {
  throw input_error(
      "the vocabulary padding multiple must be at least 1 (Megatron-LM's --make-vocab-size-divisible-by; 1: "
      "no padding beyond a multiple of tp); give `vocab_padding` N with N >= 1");
}
[[noreturn]] inline void vocabulary_size_must_be_positive() {
  throw input_error("vocabulary size must be positive");
}
[[noreturn]] inline void sequence_length_must_be_positive() {
  throw input_error("sequence length must be positive");
}
[[noreturn]] inline void ffn_size_must_be_positive() {
  throw input_error("MLP (ffn) size must be positive");
}
[[noreturn]] inline void microbatch_must_be_positive() {
  throw input_error("microbatch size must be positive");
}
[[noreturn]] inline void tensor_parallel_width_must_be_positive() {
  throw input_error("tensor-parallel width must be at least 1");
}
[[noreturn]] inline void attention_heads_must_divide_hidden_size_or_give_head_dim() {
  throw input_error(
      "the number of attention heads does not divide the hidden size; give head_dim explicitly");
}
[[noreturn]] inline void latent_attention_sizes_must_not_be_negative() {
  throw input_error(
      "latent attention sizes (kv_lora_rank, q_lora_rank, rope_head_dim, v_head_dim) must not be negative");
}
[[noreturn]] inline void latent_attention_needs_kv_lora_rank() {
  throw input_error(
      "q_lora_rank, rope_head_dim and v_head_dim describe multi-head latent attention, which needs a "
      "kv_lora_rank above 0; give one, or leave them 0");
}
[[noreturn]] inline void latent_attention_has_one_key_value_head_per_query_head() {
  throw input_error(
      "multi-head latent attention gives every query head its own key and value head: leave kv_heads 0 "
      "(or equal to heads)");
}
[[noreturn]] inline void full_attention_every_needs_a_window_and_two_or_more() {
  throw input_error(
      "full_attention_every N (every N-th block attends to all keys, the others slide the window) needs an "
      "attention window and N >= 2; give 0 for every block alike");
}
[[noreturn]] inline void expert_tensor_parallel_size_must_divide_tp() {
  throw input_error(
      "the expert tensor-parallel size (`etp`) must be a divisor of the tensor-parallel width (1 up to tp): "
      "the experts' GEMMs split over a part of each tensor-parallel group");
}
[[noreturn]] inline void kv_heads_must_divide_attention_heads() {
  throw input_error("key/value heads must divide the attention heads (grouped-query attention)");
}
[[noreturn]] inline void tensor_parallel_width_must_divide_attention_heads() {
  throw input_error(
      "tensor-parallel width must divide the number of attention heads; choose a tp that divides it");
}
[[noreturn]] inline void tensor_parallel_width_must_divide_kv_heads() {
  throw input_error("tensor-parallel width must divide the number of key/value heads; choose a smaller tp");
}
[[noreturn]] inline void tensor_parallel_width_must_divide_ffn_size() {
  throw input_error("tensor-parallel width must divide the MLP (ffn) size; choose a tp that divides it");
}
[[noreturn]] inline void sequence_parallelism_needs_sequence_divisible_by_tp() {
  throw input_error(
      "with sequence parallelism the sequence length must be divisible by the tensor-parallel width");
}
[[noreturn]] inline void score_bias_must_not_be_negative() {
  throw input_error("the attention score bias has a negative number of entries; give 0 or more");
}
[[noreturn]] inline void attention_window_must_not_be_negative() {
  throw input_error("the attention window is negative; give 0 (every key) or the keys each query sees");
}
[[noreturn]] inline void rotary_fraction_must_be_in_0_1() {
  throw input_error("rotary fraction must lie in (0, 1]");
}
[[noreturn]] inline void rotary_base_and_scaling_must_be_positive() {
  throw input_error(
      "the rotary embedding's base (rotary_base) must lie in (0, 1e12] and its Llama 3 scaling factor "
      "(rope_scaling_factor) must be 0 (none) or in [1, 1e6]");
}
[[noreturn]] inline void experts_need_top_k_between_1_and_experts() {
  throw input_error(
      "a mixture-of-experts model routes each token to top_k experts with 1 <= top_k <= experts; give both "
      "(HuggingFace: num_local_experts / n_routed_experts / num_experts and num_experts_per_tok)");
}
[[noreturn]] inline void expert_sizes_must_not_be_negative() {
  throw input_error(
      "experts, expert_ffn, shared_expert_ffn, dense_layers and capacity_factor must not be negative");
}
[[noreturn]] inline void chunked_attention_beyond_one_chunk(std::int64_t chunk) {
  if (chunk < 0)
    throw input_error("attention_chunk (Llama 4's attention_chunk_size) must not be negative; 0: no chunks");
  throw input_error(
      "the model attends within chunks of " + std::to_string(chunk) +
      " tokens (Llama 4's attention_chunk_size), and phaze models a training sequence of at most "
      "one chunk, where that is causal attention over the whole sequence; give `sequence` " +
      std::to_string(chunk) + " or less");
}
[[noreturn]] inline void moe_every_needs_an_offset_below_it() {
  throw input_error(
      "moe_every N (experts only every N-th block) needs experts > 0 and an offset 0 <= moe_offset < N "
      "(HuggingFace: decoder_sparse_step, interleave_moe_layer_step or moe_layer_freq), and at least one "
      "block with experts");
}
[[noreturn]] inline void listed_dense_blocks_must_leave_a_moe_block() {
  throw input_error(
      "blocks listed as dense (Qwen-MoE's mlp_only_layers) need experts > 0 and must leave at least one "
      "block with experts");
}
[[noreturn]] inline void dense_layers_must_leave_a_moe_block() {
  throw input_error(
      "dense_layers (DeepSeek's first_k_dense_replace) must be smaller than the number of layers, and needs "
      "experts > 0");
}
[[noreturn]] inline void mtp_layers_out_of_range() {
  throw input_error(
      "multi-token prediction (mtp_layers, HuggingFace num_nextn_predict_layers, Megatron --mtp-num-layers) "
      "takes 0 or 1 module (phaze builds one, as DeepSeek-V3 trains with), on a causal decoder without BERT "
      "heads");
}
[[noreturn]] inline void expert_parallel_size_must_be_positive() {
  throw input_error("the expert-parallel size must be at least 1; give `ep` N with N >= 1");
}
[[noreturn]] inline void expert_parallelism_needs_a_mixture_of_experts_model() {
  throw input_error(
      "`ep` above 1 needs a mixture-of-experts model (experts > 0); give `ep` 1 for a dense one");
}
[[noreturn]] inline void expert_parallel_size_must_divide_experts() {
  throw input_error(
      "the expert-parallel size must divide the number of routed experts (each rank holds experts / ep); "
      "choose an ep that divides it");
}
[[noreturn]] inline void tensor_parallel_width_must_divide_expert_ffn() {
  throw input_error(
      "tensor-parallel width must divide the experts' MLP width (expert_ffn) and the shared experts'; choose "
      "a tp that divides them");
}
[[noreturn]] inline void mixture_of_experts_with_tp_needs_sequence_parallelism() {
  throw input_error(
      "a mixture-of-experts block with tensor parallelism needs sequence parallelism (Megatron-Core requires "
      "it); add `sequence_parallel` or use tp 1");
}
[[noreturn]] inline void hybrid_pattern_must_name_every_block() {
  throw input_error(
      "a hybrid layer pattern (HuggingFace hybrid_override_pattern, Megatron --hybrid-layer-pattern) gives "
      "one "
      "symbol per block: 'M' (Mamba-2), '*' (attention), '-' (MLP) or 'E' (experts), as many as the layers; "
      "check the pattern and num_hidden_layers");
}
[[noreturn]] inline void hybrid_experts_need_a_mixture_of_experts_config() {
  throw input_error(
      "the hybrid layer pattern has 'E' (mixture-of-experts) blocks but the model has no experts (or experts "
      "but no 'E' block); give n_routed_experts and num_experts_per_tok, or fix the pattern");
}
[[noreturn]] inline void mamba_blocks_need_their_sizes() {
  throw input_error(
      "'M' (Mamba-2) blocks need mamba_num_heads, mamba_head_dim, ssm_state_size and n_groups above 0, "
      "groups dividing the heads, and a convolution width and chunk size of at least 1");
}
[[noreturn]] inline void hybrid_blocks_take_no_block_options() {
  throw input_error(
      "a hybrid model's blocks are set by its layer pattern: dense_layers, moe_every, listed dense blocks, "
      "parallel residual, post-norm, sandwich norms and multi-token prediction do not apply to it");
}
[[noreturn]] inline void tensor_parallel_width_must_divide_mamba_heads_and_groups() {
  throw input_error(
      "tensor-parallel width must divide the Mamba-2 heads and groups (mamba_num_heads, n_groups); choose a "
      "tp that divides both");
}
[[noreturn]] inline void mamba_blocks_take_no_context_parallelism() {
  throw input_error(
      "phaze does not model context parallelism over Mamba-2 blocks (Megatron-Core exchanges their channels "
      "by all-to-all); give `cp` 1");
}
/// A size above its limit (limits.hpp, docs/limits.md): `field` names it, `most` is the limit.
[[noreturn]] inline void model_size_above_its_limit(const char* field, std::int64_t value,
                                                    std::int64_t most) {
  throw input_error(std::string{field} + " is " + std::to_string(value) + ", above " + std::to_string(most) +
                    ", the largest phaze accepts (docs/limits.md); check the model's configuration");
}
[[noreturn]] inline void microbatch_tokens_above_their_limit(std::int64_t microbatch, std::int64_t sequence) {
  throw input_error(
      "a microbatch of " + std::to_string(microbatch) + " sequences of " + std::to_string(sequence) +
      " tokens is above " + std::to_string(limits::max_microbatch_tokens) +
      " tokens, the largest phaze accepts (docs/limits.md); choose a smaller microbatch or sequence");
}
}  // namespace rules

/// Checks an architecture; a broken rule stops compilation (constant evaluation) or throws input_error.
inline constexpr auto validate = [](const transformer_config& c) constexpr {
  if (c.hidden <= 0) rules::hidden_size_must_be_positive();
  if (c.heads <= 0) rules::attention_heads_must_be_positive();
  if (c.layers <= 0) rules::layer_count_must_be_positive();
  if (c.vocab <= 0) rules::vocabulary_size_must_be_positive();
  if (c.sequence <= 0) rules::sequence_length_must_be_positive();
  if (c.ffn <= 0) rules::ffn_size_must_be_positive();
  if (c.head_dim <= 0 && c.hidden % c.heads != 0)
    rules::attention_heads_must_divide_hidden_size_or_give_head_dim();
  if (c.kv_heads < 0 || (c.kv_heads > 0 && c.heads % c.kv_heads != 0))
    rules::kv_heads_must_divide_attention_heads();
  if (!(c.rotary_fraction > 0.0 && c.rotary_fraction <= 1.0)) rules::rotary_fraction_must_be_in_0_1();
  if (!(c.rotary_base > 0.0 && c.rotary_base <= 1e12) ||
      !(c.rope_scaling_factor == 0.0 || (c.rope_scaling_factor >= 1.0 && c.rope_scaling_factor <= 1e6)))
    rules::rotary_base_and_scaling_must_be_positive();
  if (c.score_bias < 0) rules::score_bias_must_not_be_negative();
  if (c.attention_window < 0) rules::attention_window_must_not_be_negative();
  if (c.full_attention_every < 0 || c.full_attention_every == 1 ||
      (c.full_attention_every > 0 && c.attention_window == 0))
    rules::full_attention_every_needs_a_window_and_two_or_more();
  if (c.experts < 0 || c.expert_ffn < 0 || c.shared_expert_ffn < 0 || c.dense_layers < 0 ||
      !(c.capacity_factor >= 0.0))
    rules::expert_sizes_must_not_be_negative();
  if (c.experts > 0 && (c.top_k < 1 || c.top_k > c.experts))
    rules::experts_need_top_k_between_1_and_experts();
  if (c.dense_layers > 0 && (c.experts == 0 || c.dense_layers >= c.layers))
    rules::dense_layers_must_leave_a_moe_block();
  if (c.moe_every < 0 || c.moe_offset < 0 || (c.moe_every <= 1 && c.moe_offset != 0) ||
      (c.moe_every > 1 && (c.experts == 0 || c.moe_offset >= c.moe_every))) {
    rules::moe_every_needs_an_offset_below_it();
  }
  if (c.attention_chunk < 0 || (c.attention_chunk > 0 && c.sequence > c.attention_chunk))
    rules::chunked_attention_beyond_one_chunk(c.attention_chunk);
  if (c.lists_dense() && c.experts == 0) rules::listed_dense_blocks_must_leave_a_moe_block();
  if (c.moe_every > 1 || c.lists_dense()) {
    bool any = false;
    for (std::int64_t i = 0; i < c.layers && !any; ++i) any = c.moe_block(i);
    if (!any && c.lists_dense()) rules::listed_dense_blocks_must_leave_a_moe_block();
    if (!any) rules::moe_every_needs_an_offset_below_it();
  }
  if (c.mtp_layers < 0 || c.mtp_layers > 1 || (c.mtp_layers > 0 && (!c.causal || c.bert_heads)))
    rules::mtp_layers_out_of_range();
  if (c.hybrid()) {
    if (static_cast<std::int64_t>(c.hybrid_pattern.size()) != c.layers)
      rules::hybrid_pattern_must_name_every_block();
    for (const char x : c.hybrid_pattern.view())
      if (x != 'M' && x != '*' && x != '-' && x != 'E') rules::hybrid_pattern_must_name_every_block();
    if ((c.blocks_of('E') > 0) != (c.experts > 0)) rules::hybrid_experts_need_a_mixture_of_experts_config();
    if (c.dense_layers > 0 || c.moe_every > 1 || c.lists_dense() || c.parallel_residual || !c.pre_norm ||
        c.sandwich_norm || c.mtp_layers > 0)
      rules::hybrid_blocks_take_no_block_options();
  }
  if (c.blocks_of('M') > 0 &&
      (c.mamba_heads <= 0 || c.mamba_head_dim <= 0 || c.mamba_state <= 0 || c.mamba_groups <= 0 ||
       c.mamba_heads % c.mamba_groups != 0 || c.mamba_conv < 1 || c.mamba_chunk < 1))
    rules::mamba_blocks_need_their_sizes();
  if (c.kv_lora_rank < 0 || c.q_lora_rank < 0 || c.rope_head_dim < 0 || c.v_head_dim < 0)
    rules::latent_attention_sizes_must_not_be_negative();
  if (!c.latent_attention() && (c.q_lora_rank > 0 || c.rope_head_dim > 0 || c.v_head_dim > 0))
    rules::latent_attention_needs_kv_lora_rank();
  if (c.latent_attention() && c.kv_heads_or_default() != c.heads)
    rules::latent_attention_has_one_key_value_head_per_query_head();
  using namespace limits;
  struct size_limit {
    const char* what;
    std::int64_t value;
    std::int64_t most;
  };
  const size_limit sizes[] = {{"the layer count", c.layers, max_layers},
                              {"the hidden size", c.hidden, max_hidden},
                              {"the attention head count", c.heads, max_heads},
                              {"the head dimension", c.head_dim, max_head_dim},
                              {"the rotary head dimension", c.rope_head_dim, max_head_dim},
                              {"the value head dimension", c.v_head_dim, max_head_dim},
                              {"the Mamba-2 head count", c.mamba_heads, max_heads},
                              {"the Mamba-2 head dimension", c.mamba_head_dim, max_head_dim},
                              {"the Mamba-2 state size", c.mamba_state, max_head_dim},
                              {"the Mamba-2 convolution width", c.mamba_conv, max_head_dim},
                              {"the Mamba-2 chunk size", c.mamba_chunk, max_sequence},
                              {"the key/value latent width", c.kv_lora_rank, max_hidden},
                              {"the query latent width", c.q_lora_rank, max_hidden},
                              {"the MLP (ffn) size", c.ffn, max_ffn},
                              {"the experts' MLP size", c.expert_ffn, max_ffn},
                              {"the shared experts' MLP size", c.shared_expert_ffn, max_ffn},
                              {"the expert count", c.experts, max_experts},
                              {"the vocabulary", c.vocab, max_vocab},
                              {"the sequence length", c.sequence, max_sequence}};
  for (const size_limit& l : sizes)
    if (l.value > l.most) rules::model_size_above_its_limit(l.what, l.value, l.most);
};

/// Checks that an architecture can be split by the given shape (tensor-parallel width, sequence parallelism).
inline constexpr auto validate_shape = [](const transformer_config& c, const layer_shape& s) constexpr {
  validate(c);
  if (s.microbatch <= 0) rules::microbatch_must_be_positive();
  if (s.tp <= 0) rules::tensor_parallel_width_must_be_positive();
  if (s.sequence < 0) rules::sequence_length_must_be_positive();
  if (c.heads % s.tp != 0) rules::tensor_parallel_width_must_divide_attention_heads();
  if (c.kv_heads_or_default() % s.tp != 0) rules::tensor_parallel_width_must_divide_kv_heads();
  if (c.ffn % s.tp != 0) rules::tensor_parallel_width_must_divide_ffn_size();
  const std::int64_t seq = s.sequence > 0 ? s.sequence : c.sequence;
  if (seq > limits::max_sequence)
    rules::model_size_above_its_limit("the sequence length", seq, limits::max_sequence);
  if (s.microbatch > limits::max_microbatch_tokens / seq)
    rules::microbatch_tokens_above_their_limit(s.microbatch, seq);
  if (s.cp <= 0) rules::context_parallel_size_must_be_positive();
  if (s.vocab_multiple <= 0) rules::vocabulary_padding_must_be_positive();
  if (s.cp > 1 && seq % (2 * s.cp) != 0) rules::context_parallelism_needs_sequence_divisible_by_2_cp();
  if (s.cp > 1 && !s.fused_attention) rules::context_parallelism_needs_fused_attention();
  if (s.sequence_parallel && (seq / s.cp) % s.tp != 0)
    rules::sequence_parallelism_needs_sequence_divisible_by_tp();
  if (s.ep <= 0) rules::expert_parallel_size_must_be_positive();
  if (s.ep > 1 && c.experts == 0) rules::expert_parallelism_needs_a_mixture_of_experts_model();
  if (s.etp < 0 || (s.etp > 0 && s.tp % s.etp != 0)) rules::expert_tensor_parallel_size_must_divide_tp();
  if (c.blocks_of('M') > 0) {
    if (!c.mamba_splits_over(s.tp)) rules::tensor_parallel_width_must_divide_mamba_heads_and_groups();
    if (s.cp > 1) rules::mamba_blocks_take_no_context_parallelism();
  }
  if (c.experts > 0) {
    if (c.experts % s.ep != 0) rules::expert_parallel_size_must_divide_experts();
    if (c.expert_ffn_or_default() % s.expert_tp() != 0 || c.shared_expert_ffn % s.tp != 0)
      rules::tensor_parallel_width_must_divide_expert_ffn();
  }
};

namespace detail {

/// Sizes shared by the three layer builders.
struct split_sizes {
  std::int64_t b, s, keys, t, tokens, local_tokens, h, vocab_multiple, ep;
  std::int64_t et;  ///< expert tensor-parallel ranks (layer_shape::expert_tp)
  bool sp, tp;
};

constexpr split_sizes sizes_of(const transformer_config& c, const layer_shape& shape) {
  validate_shape(c, shape);
  split_sizes z{};
  z.b = shape.microbatch;
  z.s = (shape.sequence > 0 ? shape.sequence : c.sequence) / shape.cp;  // this rank's share under CP
  z.keys = z.s * shape.cp;
  z.t = shape.tp;
  z.tokens = z.b * z.s;
  z.sp = shape.sequence_parallel && shape.tp > 1;
  z.tp = shape.tp > 1;
  z.local_tokens = z.sp ? z.tokens / z.t : z.tokens;
  z.h = c.hidden;
  z.vocab_multiple = shape.vocab_multiple;
  z.ep = shape.ep;
  z.et = shape.expert_tp();
  return z;
}

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

/// Vocabulary rows per tensor-parallel rank: the vocabulary padded as Megatron-LM pads it
/// (_vocab_size_with_padding: up to a multiple of make_vocab_size_divisible_by * tp), split over the ranks.
constexpr std::int64_t vocab_rows_per_rank(std::int64_t vocab, const split_sizes& z) {
  const std::int64_t multiple = std::max<std::int64_t>(z.vocab_multiple, 1) * z.t;
  return ceil_div(vocab, multiple) * multiple / z.t;
}

/// Enters a tensor-parallel region: all-gather of the sequence shards (sequence parallelism) or the
/// identity whose backward all-reduces (Megatron's "f").
constexpr tensor enter_tp(layer_builder& b, const split_sizes& z, tensor x, std::string_view name) {
  if (!z.tp) return x;
  if (z.sp) return b.collective(op_kind::all_gather, name, x, static_cast<int>(z.t), z.tokens * z.h);
  return b.collective(op_kind::tp_copy, name, x, static_cast<int>(z.t), x.elements);
}

/// Leaves a tensor-parallel region: reduce-scatter into sequence shards or all-reduce ("g").
constexpr tensor leave_tp(layer_builder& b, const split_sizes& z, tensor x, std::string_view name) {
  if (!z.tp) return x;
  if (z.sp)
    return b.collective(op_kind::reduce_scatter, name, x, static_cast<int>(z.t), z.local_tokens * z.h);
  return b.collective(op_kind::all_reduce, name, x, static_cast<int>(z.t), x.elements);
}

constexpr tp_split token_split(const split_sizes& z) {
  return z.sp ? tp_split::sequence : tp_split::replicated;
}

constexpr tensor norm(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor x,
                      std::string_view name) {
  // PixelNorm costs what an RMSNorm does, without its weight.
  const op_kind kind = c.norm == norm_kind::layernorm ? op_kind::layernorm : op_kind::rmsnorm;
  const std::int64_t params = c.norm == norm_kind::layernorm ? 2 * z.h
                              : c.norm == norm_kind::rmsnorm ? z.h
                                                             : 0;
  return b.vector(kind, name, x, saves::input0, token_split(z), params);
}

constexpr tensor sublayer_dropout(layer_builder& b, const transformer_config& c, const split_sizes& z,
                                  tensor x, std::string_view name) {
  if (!c.dropout) return x;
  return b.vector(op_kind::dropout, name, x, saves::mask, token_split(z));
}

/// Self-attention: QKV projection (column-parallel), scores, softmax, dropout, context, output projection
/// (row-parallel). Returns the output after the closing collective, before dropout.
/// The queries, keys and values of multi-head latent attention (transformer_config::kv_lora_rank), as
/// Megatron-Core's MLASelfAttention computes them: the down projections (hidden -> q_lora_rank and hidden ->
/// kv_lora_rank + rope_head_dim) replicated on every tensor-parallel rank (parallel_mode "duplicated"), an
/// RMSNorm over each latent, the column-parallel up projections (to a x (head_dim + rope_head_dim) query
/// dimensions and a x (head_dim + v_head_dim) key and value ones), and the rotary parts joined to every
/// head (one copy pass writing a x (2 (head_dim + rope_head_dim) + v_head_dim) per token).
constexpr tensor latent_qkv(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor in) {
  const std::int64_t a = c.heads / z.t;
  const std::int64_t d = c.head_dim_or_default();
  const std::int64_t dqk = c.qk_head_dim();
  const std::int64_t dv = c.value_head_dim();
  tensor q{};
  if (c.q_lora_rank > 0) {
    tensor latent = b.matmul("q_down", in, {1, z.tokens, z.h, c.q_lora_rank}, tp_split::replicated, false);
    latent = b.vector(op_kind::rmsnorm, "q_norm", latent, saves::input0, tp_split::replicated, c.q_lora_rank);
    const std::uint8_t outside = b.enter_module(recompute_module::mla_up_proj);
    q = b.matmul("q_up", latent, {1, z.tokens, c.q_lora_rank, a * dqk}, tp_split::column, false);
    b.leave_module(outside);
  } else {
    q = b.matmul("q", in, {1, z.tokens, z.h, a * dqk}, tp_split::column, false);
  }
  tensor latent = b.matmul("kv_down", in, {1, z.tokens, z.h, c.kv_lora_rank + c.rope_head_dim},
                           tp_split::replicated, false);
  latent = b.vector(op_kind::rmsnorm, "kv_norm", latent, saves::input0, tp_split::replicated, c.kv_lora_rank);
  // Megatron-Core's "mla_up_proj" submodule: the up projections and the joining of the rotary parts.
  const std::uint8_t outside = b.enter_module(recompute_module::mla_up_proj);
  const tensor kv =
      b.matmul("kv_up", latent, {1, z.tokens, c.kv_lora_rank, a * (d + dv)}, tp_split::column, false);
  const tensor joined = b.concat("qkv_join", q, kv, z.tokens * a * (2 * dqk + dv), tp_split::heads);
  b.leave_module(outside);
  return joined;
}

constexpr tensor attention(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor x) {
  const std::int64_t a = c.heads / z.t;
  const std::int64_t kv = c.kv_heads_or_default() / z.t;
  const std::int64_t d = c.head_dim_or_default();
  // Query and key width, value width (they differ under latent attention).
  const std::int64_t dqk = c.qk_head_dim();
  const std::int64_t dv = c.value_head_dim();
  tensor in = enter_tp(b, z, x, "attn_enter");
  tensor qkv = c.latent_attention() ? latent_qkv(b, c, z, in)
                                    : b.matmul("qkv", in, {1, z.tokens, z.h, (a + 2 * kv) * d},
                                               tp_split::column, c.bias || c.qkv_bias);
  if (c.qk_norm) {
    // Costed as one kernel over the QKV output (the values pass through: kv / (a + 2 kv) of the elements
    // more than the two norms touch), keeping its input for the backward pass as a norm does.
    qkv = b.vector(c.norm == norm_kind::layernorm ? op_kind::layernorm : op_kind::rmsnorm, "qk_norm", qkv,
                   saves::input0, tp_split::heads, (c.norm == norm_kind::layernorm ? 4 : 2) * d);
  }
  if (c.positions == position_kind::rotary) {
    // Under latent attention the rotary embedding is part of the "mla_up_proj" submodule.
    const std::uint8_t outside = b.enter_module(c.latent_attention() ? recompute_module::mla_up_proj : 0);
    qkv = b.vector(op_kind::rotary, "rotary", qkv, saves::nothing, tp_split::heads);
    b.leave_module(outside);
  }
  if (b.shape().fused_attention && c.score_bias == 0) {
    // One kernel; its dropout regenerates the mask from the random state instead of storing it.
    // Under latent attention the score GEMM runs at dqk and the context GEMM at dv: their mean carries the
    // FLOPs of both.
    const tensor context = b.fused_attention("attention", qkv, z.b * a, z.s, (dqk + dv) / 2, c.causal,
                                             c.attention_window, z.keys, dv);
    tensor proj = b.matmul("attn_out", context, {1, z.tokens, a * dv, z.h}, tp_split::row, false);
    if (c.bias)
      proj =
          b.vector(op_kind::residual_add, "attn_out_bias", proj, saves::nothing, tp_split::replicated, z.h);
    return leave_tp(b, z, proj, "attn_exit");
  }
  tensor scores =
      b.batched_matmul("scores", qkv, qkv, {z.b * a, z.s, dqk, z.s}, saves::input0 | saves::input1);
  if (c.score_bias > 0) {
    // Each head's bias entries are gathered into an s x s table and added (the gather is not costed).
    scores = b.vector(op_kind::residual_add, "score_bias", scores, saves::nothing, tp_split::heads,
                      c.score_bias * a, 0, true);
  }
  if (c.attention_softcap) {
    // Soft-capping: one elementwise pass over the scores (tanh), its input kept for the backward pass.
    scores = b.vector(op_kind::gelu, "score_softcap", scores, saves::input0, tp_split::heads, 0, 0, true);
  }
  if (c.positions == position_kind::alibi) {
    // ALiBi's bias (a fixed slope per head times the key distance) added to the scores: one pass over them.
    // Fused kernels (FlashAttention-2's alibi_slopes, cuDNN's ALiBi bias) add it in their tiles at no
    // memory traffic, so the fused path above has no op for it.
    scores = b.vector(op_kind::residual_add, "alibi", scores, saves::nothing, tp_split::heads, 0, 0, true);
  }
  tensor probs = b.vector(op_kind::softmax, "softmax", scores, saves::output, tp_split::heads, 0, 0, true);
  if (c.dropout)
    probs = b.vector(op_kind::dropout, "attn_dropout", probs, saves::mask, tp_split::heads, 0, 0, true);
  tensor context =
      b.batched_matmul("context", probs, qkv, {z.b * a, z.s, z.s, dv}, saves::input0 | saves::input1);
  tensor proj = b.matmul("attn_out", context, {1, z.tokens, a * dv, z.h}, tp_split::row, false);
  if (c.bias)
    proj = b.vector(op_kind::residual_add, "attn_out_bias", proj, saves::nothing, tp_split::replicated, z.h);
  return leave_tp(b, z, proj, "attn_exit");
}

/// MLP: up (and gate) projection (column-parallel), activation, down projection (row-parallel); of width
/// `width` (0: the model's ffn).
constexpr tensor mlp(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor x,
                     std::int64_t width = 0) {
  const std::int64_t f = (width > 0 ? width : c.ffn) / z.t;
  tensor in = enter_tp(b, z, x, "mlp_enter");
  tensor act{};
  if (c.mlp == mlp_kind::swiglu || c.mlp == mlp_kind::geglu) {
    tensor up = b.matmul("gate_up", in, {1, z.tokens, z.h, 2 * f}, tp_split::column, c.bias);
    const bool silu = c.mlp == mlp_kind::swiglu;
    act = b.vector(silu ? op_kind::swiglu : op_kind::geglu, silu ? "swiglu" : "geglu", up, saves::input0,
                   tp_split::column, 0, z.tokens * f);
  } else {
    tensor up = b.matmul("fc1", in, {1, z.tokens, z.h, f}, tp_split::column, c.bias);
    // Squared ReLU is one fused elementwise kernel of a ReLU's traffic (mlp_kind::squared_relu).
    act = b.vector(c.mlp == mlp_kind::gelu ? op_kind::gelu : op_kind::relu,
                   c.mlp == mlp_kind::gelu   ? "gelu"
                   : c.mlp == mlp_kind::relu ? "relu"
                                             : "squared_relu",
                   up, saves::input0, tp_split::column);
  }
  tensor down = b.matmul("fc2", act, {1, z.tokens, f, z.h}, tp_split::row, false);
  if (c.bias)
    down = b.vector(op_kind::residual_add, "fc2_bias", down, saves::nothing, tp_split::replicated, z.h);
  return leave_tp(b, z, down, "mlp_exit");
}

/// Token slots each expert of a rank processes per microbatch: the tokens of the rank's expert
/// tensor-parallel group (the tensor-parallel group's tokens, sequence-gathered, when etp = tp; etp of the
/// ranks' sequence shards otherwise) times top_k, over the experts, for each of the ep ranks sending to it
/// (balanced routing), times the capacity factor when one pads to it.
constexpr std::int64_t tokens_per_expert(const transformer_config& c, const split_sizes& z) {
  const double cf = c.capacity_factor_or_one();
  const std::int64_t group_tokens = z.sp ? z.local_tokens * z.et : z.tokens;
  const double slots = static_cast<double>(group_tokens) * static_cast<double>(c.top_k) *
                       static_cast<double>(z.ep) / static_cast<double>(c.experts) * cf;
  const auto whole = static_cast<std::int64_t>(slots);
  return std::max<std::int64_t>(1, static_cast<double>(whole) < slots ? whole + 1 : whole);
}

/// A mixture-of-experts MLP as Megatron-Core runs it with the all-to-all token dispatcher (Fedus et al.,
/// "Switch Transformers", 2021; Jiang et al., "Mixtral of Experts", 2024; Megatron-Core's moe_layer.py and
/// token_dispatcher.py): a router GEMM (h -> experts, bf16) and top-k softmax over the rank's tokens; the
/// routed copies permuted into expert order; an all-to-all over the ep ranks (dispatch); under tensor
/// parallelism (sequence-parallel) an all-gather of them over the expert tensor-parallel ranks (etp: tp
/// unless MoE parallel folding gives another); each rank's experts / ep experts as grouped GEMMs (up/gate,
/// activation, down; split over etp like a dense MLP over tp); the reduce-scatter back;
/// the all-to-all back (combine); the weighted sum of each token's top_k outputs (unpermute). With more than
/// one expert per rank the received rows come grouped by the rank that sent them, and the all-to-all
/// dispatcher sorts them by local expert after the dispatch and its gather, and back before the
/// reduce-scatter and the combine (sort_chunks_by_idxs: a copy each way); DeepEP's and HybridEP's dispatch
/// hands them over grouped (layer_shape::grouped_dispatch). Unfused (layer_shape::unfused_permutation), the
/// permutation gathers rows by index, and the unpermutation scales each row by its gate and adds the rows to
/// their tokens by index (op:: permutation). Shared experts (DeepSeekMoE, Qwen-MoE) run beside it as a dense
/// MLP and are added.
constexpr tensor moe(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor x) {
  const std::int64_t k = c.top_k;
  const std::int64_t f = c.expert_ffn_or_default() / z.et;
  const std::int64_t local_experts = c.experts / z.ep;
  const double cf = c.capacity_factor_or_one();
  const std::int64_t m = tokens_per_expert(c, z);
  // Token slots a rank sends in the dispatch: its tokens x top_k (x the capacity factor when padded).
  const auto sent = static_cast<std::int64_t>(static_cast<double>(z.local_tokens * k) * cf + 0.5);
  const tp_split split = token_split(z);
  const tensor logits =
      b.matmul("router", x, {1, z.local_tokens, z.h, c.experts}, split, c.bias, false, /*bf16_only=*/true);
  const tensor gates = b.vector(op_kind::softmax, "router_topk", logits, saves::output, split);
  const bool unfused = b.shape().unfused_permutation;
  tensor routed = b.vector(op_kind::copy, "permute", x, saves::nothing, split, 0, sent * z.h);
  if (unfused) b.mark_permutation(index_kernel::select);
  // The received (and gathered) rows, grouped by sending rank, sorted by local expert: the all-to-all
  // dispatcher's dispatch_postprocess whenever a rank holds more than one expert; the flex dispatcher's
  // exchange hands them over grouped.
  const bool sorts = local_experts > 1 && !(b.shape().grouped_dispatch && z.ep > 1);
  if (z.ep > 1)
    routed = b.collective(op_kind::all_to_all, "dispatch", routed, static_cast<int>(z.ep), routed.elements);
  // Into the experts' tensor-parallel region: the etp ranks' token shards gathered (sequence parallelism,
  // which Megatron-Core requires with MoE; train::validate), or, with the tokens replicated, the identity.
  // With etp 1 each rank's experts work on its own tokens.
  if (z.et > 1) {
    routed = z.sp ? b.collective(op_kind::all_gather, "experts_enter", routed, static_cast<int>(z.et),
                                 local_experts * m * z.h)
                  : b.collective(op_kind::tp_copy, "experts_enter", routed, static_cast<int>(z.et),
                                 routed.elements);
  }
  if (sorts) routed = b.vector(op_kind::copy, "sort_chunks", routed, saves::nothing, split);
  const bool gated = c.mlp == mlp_kind::swiglu || c.mlp == mlp_kind::geglu;
  const tensor up = b.expert_matmul("expert_up", routed, {local_experts, m, z.h, (gated ? 2 : 1) * f},
                                    tp_split::column, c.bias);
  tensor act{};
  const std::uint8_t outside_act = b.enter_module(recompute_module::moe_act);
  if (gated) {
    const bool silu = c.mlp == mlp_kind::swiglu;
    act = b.vector(silu ? op_kind::swiglu : op_kind::geglu, silu ? "expert_swiglu" : "expert_geglu", up,
                   saves::input0, tp_split::column, 0, local_experts * m * f);
  } else {
    act = b.vector(c.mlp == mlp_kind::gelu ? op_kind::gelu : op_kind::relu, "expert_act", up, saves::input0,
                   tp_split::column);  // squared ReLU: one kernel of a ReLU's traffic, as in mlp()
  }
  b.leave_module(outside_act);
  tensor down = b.expert_matmul("expert_down", act, {local_experts, m, f, z.h}, tp_split::row, c.bias);
  if (sorts) down = b.vector(op_kind::copy, "unsort_chunks", down, saves::nothing, split);
  if (z.et > 1) {
    down =
        z.sp ? b.collective(op_kind::reduce_scatter, "experts_exit", down, static_cast<int>(z.et), sent * z.h)
             : b.collective(op_kind::all_reduce, "experts_exit", down, static_cast<int>(z.et), down.elements);
  }
  if (z.ep > 1) down = b.collective(op_kind::all_to_all, "combine", down, static_cast<int>(z.ep), sent * z.h);
  // Unfused: each row scaled by its gate (a pass over the rows), then added to its token by index.
  if (unfused) down = b.vector(op_kind::residual_add, "unpermute_scale", down, saves::nothing, split);
  // The weighted sum of each token's top_k expert outputs, by the router's gates.
  tensor out =
      b.vector(op_kind::residual_add, "unpermute", down, saves::nothing, split, 0, z.local_tokens * z.h);
  if (unfused) b.mark_permutation(index_kernel::scatter_add);
  out = b.add_residual("gate_weights", out, gates, split);
  if (c.shared_expert_ffn > 0) {
    const std::uint8_t outside = b.enter_module(recompute_module::shared_experts);
    const tensor shared = mlp(b, c, z, x, c.shared_expert_ffn);
    b.leave_module(outside);
    out = b.add_residual("shared_add", out, shared, split);
  }
  return out;
}

/// A Mamba-2 mixer (Dao and Gu, "Transformers are SSMs", arXiv 2405.21060, sections 6-7), as Megatron-Core's
/// MambaMixer runs it over mamba_ssm's fused kernel (mamba_split_conv1d_scan_combined): a column-parallel
/// input projection to z, x, B, C and dt (2 d_inner + 2 groups x state + heads per token; tensor
/// parallelism splits the heads and the groups); the causal depthwise convolution of x, B and C with SiLU;
/// the chunked state-space scan (SSD) over chunks of Q = mamba_chunk tokens, as four batched GEMMs per
/// chunk: the groups' C B^T scores (Q x state x Q), the heads' masked scores times x (Q x Q x head_dim), the
/// chunk's states B^T x (state x Q x head_dim), the states passed from chunk to chunk (a pass over them) and
/// read out by C (Q x state x head_dim), the two outputs summed; the output gated by SiLU(z) and normed per
/// group over d_inner (rmsnorm_fn keeps the ungated output; z is kept with the projection's output); the
/// row-parallel output projection. A chunk longer than the sequence holds all of it. Parameters besides the
/// projections: the convolution's taps and bias, A, D and the dt bias per head, the norm's weight.
constexpr tensor mamba(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor x) {
  const std::int64_t heads = c.mamba_heads / z.t;
  const std::int64_t groups = c.mamba_groups / z.t;
  const std::int64_t p = c.mamba_head_dim;
  const std::int64_t n = c.mamba_state;
  const std::int64_t q = std::min(c.mamba_chunk, z.s);  // a chunk longer than the sequence holds all of it
  const std::int64_t inner = heads * p;
  const std::int64_t conv_channels = inner + 2 * groups * n;
  const std::int64_t chunks = z.b * ((z.s + q - 1) / q);
  tensor in = enter_tp(b, z, x, "mixer_enter");
  const tensor projected = b.matmul(
      "mixer_in_proj", in, {1, z.tokens, z.h, 2 * inner + 2 * groups * n + heads}, tp_split::column, false);
  const tensor xbc = b.vector(op_kind::silu, "mixer_conv1d", projected, saves::input0, tp_split::column,
                              conv_channels * (c.mamba_conv + 1) + 3 * heads, z.tokens * conv_channels);
  const tensor scores =
      b.batched_matmul("ssd_scores", xbc, xbc, {chunks * groups, q, n, q}, saves::nothing, false);
  b.mark_mamba(mamba_kernel::scan, z.tokens, 0.2);
  const tensor diagonal =
      b.batched_matmul("ssd_diagonal", scores, xbc, {chunks * heads, q, q, p}, saves::nothing, false);
  b.mark_mamba(mamba_kernel::scan, z.tokens, 0.2);
  tensor states = b.batched_matmul("ssd_states", xbc, xbc, {chunks * heads, n, q, p}, saves::nothing, false);
  b.mark_mamba(mamba_kernel::scan, z.tokens, 0.2);
  states = b.vector(op_kind::residual_add, "ssd_state_passing", states, saves::nothing, tp_split::heads);
  b.mark_mamba(mamba_kernel::scan, z.tokens, 0.1);
  const tensor carried =
      b.batched_matmul("ssd_carried", xbc, states, {chunks * heads, q, n, p}, saves::nothing, false);
  b.mark_mamba(mamba_kernel::scan, z.tokens, 0.2);
  const tensor y = b.add_residual("ssd_sum", diagonal, carried, tp_split::heads);
  b.mark_mamba(mamba_kernel::scan, z.tokens, 0.1);
  const tensor gated =
      b.vector(op_kind::swiglu, "mixer_gate", y, saves::input0, tp_split::column, 0, z.tokens * inner);
  b.mark_mamba(mamba_kernel::gated_norm, z.tokens, 0.5);
  const tensor normed =
      b.vector(op_kind::rmsnorm, "mixer_gated_norm", gated, saves::nothing, tp_split::column, inner);
  b.mark_mamba(mamba_kernel::gated_norm, z.tokens, 0.5);
  const tensor out = b.matmul("mixer_out_proj", normed, {1, z.tokens, inner, z.h}, tp_split::row, false);
  return leave_tp(b, z, out, "mixer_exit");
}

/// A block's MLP: its experts when the model has them, else the dense MLP (Megatron-Core's "moe" and "mlp"
/// submodules).
constexpr tensor feed_forward(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor x) {
  const std::uint8_t outside = b.enter_module(c.experts > 0 ? recompute_module::moe : recompute_module::mlp);
  const tensor out = c.experts > 0 ? moe(b, c, z, x) : mlp(b, c, z, x);
  b.leave_module(outside);
  return out;
}

/// A block's norm before attention or before its MLP (Megatron-Core's "layernorm" submodule: input_layernorm
/// and pre_mlp_layernorm).
constexpr tensor block_norm(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor x,
                            std::string_view name) {
  const std::uint8_t outside = b.enter_module(recompute_module::layernorm);
  const tensor out = norm(b, c, z, x, name);
  b.leave_module(outside);
  return out;
}

/// The ops of one transformer block over `x`; returns its output.
constexpr tensor block_body(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor x) {
  if (c.parallel_residual) {
    const tensor n1 = block_norm(b, c, z, x, "attn_norm");
    const tensor n2 = c.shared_norm ? n1 : block_norm(b, c, z, x, "mlp_norm");
    const tensor att = detail::sublayer_dropout(b, c, z, detail::attention(b, c, z, n1), "attn_out_dropout");
    const tensor mlp =
        detail::sublayer_dropout(b, c, z, detail::feed_forward(b, c, z, n2), "mlp_out_dropout");
    const tensor r1 = b.add_residual("attn_residual", x, att, detail::token_split(z));
    return b.add_residual("mlp_residual", r1, mlp, detail::token_split(z));
  }
  if (c.pre_norm) {
    const tensor n1 = block_norm(b, c, z, x, "attn_norm");
    tensor att = detail::attention(b, c, z, n1);
    if (c.sandwich_norm) att = detail::norm(b, c, z, att, "attn_post_norm");
    att = detail::sublayer_dropout(b, c, z, att, "attn_out_dropout");
    const tensor r1 = b.add_residual("attn_residual", x, att, detail::token_split(z));
    const tensor n2 = block_norm(b, c, z, r1, "mlp_norm");
    tensor mlp = detail::feed_forward(b, c, z, n2);
    if (c.sandwich_norm) mlp = detail::norm(b, c, z, mlp, "mlp_post_norm");
    mlp = detail::sublayer_dropout(b, c, z, mlp, "mlp_out_dropout");
    return b.add_residual("mlp_residual", r1, mlp, detail::token_split(z));
  }
  const tensor att = detail::sublayer_dropout(b, c, z, detail::attention(b, c, z, x), "attn_out_dropout");
  const tensor r1 = b.add_residual("attn_residual", x, att, detail::token_split(z));
  const tensor n1 = block_norm(b, c, z, r1, "attn_norm");
  const tensor mlp = detail::sublayer_dropout(b, c, z, detail::feed_forward(b, c, z, n1), "mlp_out_dropout");
  const tensor r2 = b.add_residual("mlp_residual", n1, mlp, detail::token_split(z));
  return block_norm(b, c, z, r2, "mlp_norm");
}

/// One block of a hybrid model (transformer_config::hybrid_pattern; Megatron-Core's hybrid stack): its
/// pre-norm, its one sublayer ('M' the Mamba-2 mixer, '*' attention, '-' or 'E' the MLP or the experts, as
/// `c` has them) and the residual add.
constexpr tensor hybrid_block_body(layer_builder& b, const transformer_config& c, const split_sizes& z,
                                   tensor x, char symbol) {
  const bool mixer = symbol == 'M';
  const bool attends = symbol == '*';
  const std::string_view prefix = mixer ? "mixer" : attends ? "attn" : "mlp";
  const tensor n = block_norm(b, c, z, x, fixed_string<24>{prefix, "_norm"}.view());
  const tensor y = mixer     ? detail::mamba(b, c, z, n)
                   : attends ? detail::attention(b, c, z, n)
                             : detail::feed_forward(b, c, z, n);
  const tensor out = detail::sublayer_dropout(b, c, z, y, fixed_string<24>{prefix, "_out_dropout"}.view());
  return b.add_residual(fixed_string<24>{prefix, "_residual"}.view(), x, out, detail::token_split(z));
}

/// The word embedding: a vocabulary-parallel lookup, then all-reduced (or reduce-scattered under sequence
/// parallelism) over the tensor-parallel ranks. `tied_copy`: a copy of the input layer's table
/// (layer_builder::embedding).
constexpr tensor word_embedding(layer_builder& b, const transformer_config& c, const split_sizes& z,
                                std::string_view name, bool tied_copy = false) {
  const std::int64_t e = c.embed_dim_or_default();
  tensor x = b.embedding(name, z.tokens, vocab_rows_per_rank(c.vocab, z), e,
                         z.tp ? tp_split::vocab : tp_split::replicated, tied_copy);
  if (z.tp) {
    const std::string_view exit = tied_copy ? "mtp_embedding_exit" : "embedding_exit";
    x = z.sp ? b.collective(op_kind::reduce_scatter, exit, x, static_cast<int>(z.t), z.local_tokens * e)
             : b.collective(op_kind::all_reduce, exit, x, static_cast<int>(z.t), x.elements);
  }
  return x;
}

/// The vocabulary-parallel output projection of `x` (tied to the word embedding when the model ties them;
/// `shared`: the weights of the head's own projection, layer_builder::shared_matmul), soft-capping, and the
/// cross-entropy loss.
constexpr void logits_and_loss(layer_builder& b, const transformer_config& c, const split_sizes& z, tensor x,
                               bool shared = false) {
  const std::int64_t e = c.embed_dim_or_default();
  const tensor in = enter_tp(b, z, x, shared ? "mtp_head_enter" : "head_enter");
  const std::int64_t rows = vocab_rows_per_rank(c.vocab, z);
  const tp_split split = z.tp ? tp_split::vocab : tp_split::replicated;
  tensor logits =
      shared ? b.shared_matmul("mtp_output_proj", in, {1, z.tokens, e, rows}, split)
             : b.matmul("output_projection", in, {1, z.tokens, e, rows}, split, false, c.tied_embeddings);
  if (c.bert_heads)
    logits = b.vector(op_kind::residual_add, "output_bias", logits, saves::nothing, split, rows);
  if (c.logit_softcap) {
    // cap x tanh(logits / cap): one elementwise pass over the logits, its input kept for the backward pass.
    logits =
        b.vector(op_kind::gelu, shared ? "mtp_logit_softcap" : "logit_softcap", logits, saves::input0, split);
  }
  b.vector(op_kind::cross_entropy, shared ? "mtp_cross_entropy" : "cross_entropy", logits, saves::input0,
           split, 0, z.tokens);
}

/// DeepSeek-V3's multi-token prediction modules (transformer_config::mtp_layers) after the head, from the
/// main model's last hidden state `h`: per module, the next token's embedding (the kept copy) and `h` each
/// normed, joined (2 hidden wide) and projected to hidden, one transformer block, the final norm and the
/// shared output projection with its loss.
constexpr void multi_token_prediction(layer_builder& b, const transformer_config& c, const split_sizes& z,
                                      tensor h) {
  for (std::int64_t i = 0; i < c.mtp_layers; ++i) {
    const tensor e = norm(b, c, z, word_embedding(b, c, z, "mtp_embedding", true), "mtp_enorm");
    const tensor hn = norm(b, c, z, h, "mtp_hnorm");
    const tensor joined = b.concat("mtp_join", e, hn, 2 * z.local_tokens * z.h, token_split(z));
    const tensor x = b.matmul("mtp_projection", joined, {1, z.local_tokens, 2 * z.h, z.h}, token_split(z));
    h = block_body(b, c, z, x);
    logits_and_loss(b, c, z, c.final_norm ? norm(b, c, z, h, "mtp_final_norm") : h, true);
  }
}

/// Marks what torchtitan's per-op selective checkpointing keeps of each matmul of block `l` (op::
/// op_policy_saved; kept_by_op_policy): the policy counts the block's bias-free matrix multiplications
/// (aten.mm; a linear layer with a bias runs aten.addmm, which it neither counts nor keeps) in the order the
/// block runs them and keeps the outputs of the first, third, fifth, ... (torchtitan's _apply_op_sac: "every
/// second mm" recomputed). A fused projection counts as the separate ones torchtitan's models (and Hugging
/// Face's Llama family) run: the QKV projection as the query, key and value projections, in that order, and
/// the gated MLP's as the gate and the up projection (w1 before w3).
constexpr void keep_by_op_policy(layer& l, const transformer_config& c) {
  const auto q = static_cast<double>(c.heads);
  const auto kv = static_cast<double>(c.kv_heads_or_default());
  int counted = 0;
  for (op& o : l.ops) {
    if (o.kind != op_kind::matmul) continue;
    const bool qkv = o.name.view() == "qkv";
    if (c.bias || (qkv && c.qkv_bias)) continue;  // aten.addmm: not on the policy's list
    std::array<double, 3> parts{1.0, 0.0, 0.0};
    if (qkv) parts = {q, kv, kv};
    if (o.name.view() == "gate_up") parts = {1.0, 1.0, 0.0};
    double kept = 0.0;
    double all = 0.0;
    for (const double part : parts) {
      if (part == 0.0) continue;
      all += part;
      if (++counted % 2 == 1) kept += part;
    }
    o.op_policy_saved = kept / all;
  }
}

}  // namespace detail

/// One transformer block. Pre-norm (GPT-2 onwards), post-norm (BERT, OPT-350m) or parallel residual
/// (GPT-NeoX). Biases of row-parallel projections are added after the closing collective, as Megatron does.
/// `symbol`: a hybrid model's block of one sublayer (transformer_config::hybrid_pattern); 0: attention and
/// MLP.
inline constexpr auto block_layer =
    [](const transformer_config& c, const layer_shape& shape, char symbol = '\0') constexpr -> layer {
  const auto z = detail::sizes_of(c, shape);
  layer_builder b{"block", layer_role::block, shape, z.local_tokens * z.h};
  if (symbol != '\0') {
    detail::hybrid_block_body(b, c, z, b.input(), symbol);
  } else {
    detail::block_body(b, c, z, b.input());
  }
  layer l = b.build();
  if ((shape.recompute_modules & recompute_module::op) != 0) detail::keep_by_op_policy(l, c);
  return l;
};

/// The input layer: word embedding (vocabulary-parallel, then all-reduced or reduce-scattered), position
/// and token-type embeddings, an optional projection (OPT-350m), an optional norm (BERT) and dropout.
inline constexpr auto embedding_layer =
    [](const transformer_config& c, const layer_shape& shape) constexpr -> layer {
  const auto z = detail::sizes_of(c, shape);
  const std::int64_t e = c.embed_dim_or_default();
  layer_builder b{"embedding", layer_role::embedding, shape, 0};
  tensor x = detail::word_embedding(b, c, z, "word_embedding");
  if (e != z.h) x = b.matmul("project_in", x, {1, z.local_tokens, e, z.h}, detail::token_split(z), false);
  if (c.positions == position_kind::learned) {
    const tensor p = b.embedding("position_embedding", z.local_tokens, c.position_rows(), z.h);
    x = b.add_residual("add_positions", x, p, detail::token_split(z));
  }
  if (c.token_types > 0) {
    const tensor tt = b.embedding("token_type_embedding", z.local_tokens, c.token_types, z.h);
    x = b.add_residual("add_token_types", x, tt, detail::token_split(z));
  }
  if (c.arch == family::bert || c.embedding_norm) x = detail::norm(b, c, z, x, "embedding_norm");
  if (c.dropout) x = b.vector(op_kind::dropout, "embedding_dropout", x, saves::mask, detail::token_split(z));
  return b.build();
};

/// The output layer: final norm, BERT's pre-training transforms and pooler, the vocabulary-parallel output
/// projection (tied to the word embedding when the model ties them) and the cross-entropy loss.
inline constexpr auto head_layer =
    [](const transformer_config& c, const layer_shape& shape) constexpr -> layer {
  const auto z = detail::sizes_of(c, shape);
  const std::int64_t e = c.embed_dim_or_default();
  layer_builder b{"head", layer_role::head, shape, z.local_tokens * z.h};
  tensor x = b.input();
  if (c.final_norm) x = detail::norm(b, c, z, x, "final_norm");
  if (c.bert_heads) {
    // Pooler over the first token of each sequence, then the two-way next-sentence classifier.
    const tensor pooled = b.matmul("pooler", x, {1, z.b, z.h, z.h}, tp_split::replicated, true);
    b.matmul("next_sentence", pooled, {1, z.b, z.h, 2}, tp_split::replicated, true);
    // Masked-LM transform: dense + gelu + layernorm before the tied decoder.
    const tensor t =
        b.matmul("mlm_transform", x, {1, z.local_tokens, z.h, z.h}, detail::token_split(z), true);
    const tensor g = b.vector(op_kind::gelu, "mlm_gelu", t, saves::input0, detail::token_split(z));
    x = detail::norm(b, c, z, g, "mlm_norm");
  }
  if (e != z.h) x = b.matmul("project_out", x, {1, z.local_tokens, z.h, e}, detail::token_split(z), false);
  detail::logits_and_loss(b, c, z, x);
  detail::multi_token_prediction(b, c, z, b.input());
  return b.build();
};

/// The layer with the given role.
inline constexpr auto make_layer =
    [](const transformer_config& c, layer_role role, const layer_shape& shape, char symbol = '\0') constexpr {
  switch (role) {
    case layer_role::embedding:
      return embedding_layer(c, shape);
    case layer_role::head:
      return head_layer(c, shape);
    default:
      return block_layer(c, shape, symbol);
  }
};

}  // namespace phaze::model
