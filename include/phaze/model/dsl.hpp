/// @file
/// The model DSL: keyword-style construction of transformer models and layer shapes as `constexpr` values.
/// @code
///   namespace dsl = phaze::dsl;
///   constexpr auto m = dsl::transformer(dsl::name = "my-7b", dsl::hidden = 4096, dsl::heads = 32,
///                                       dsl::layers = 32, dsl::ffn = 11008, dsl::vocab = 32000,
///                                       dsl::sequence = 4096, dsl::norm = phaze::rmsnorm,
///                                       dsl::mlp = phaze::swiglu, dsl::positions = phaze::rotary);
///   constexpr auto block = dsl::layer(m, dsl::shape(dsl::microbatch = 2, dsl::tp = 8));
/// @endcode
/// An option given twice or an option that does not belong to the call fails to compile with a message
/// naming the mistake; a value that breaks a rule (zero sizes, a tensor-parallel width that does not divide
/// the heads) fails to compile with the rule's name in the diagnostic.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "phaze/core/keywords.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"

namespace phaze {

// Short names for the architecture choices, so specs read like prose.
inline constexpr auto layernorm = model::norm_kind::layernorm;
inline constexpr auto rmsnorm = model::norm_kind::rmsnorm;
inline constexpr auto gelu = model::mlp_kind::gelu;
inline constexpr auto relu = model::mlp_kind::relu;
inline constexpr auto swiglu = model::mlp_kind::swiglu;
inline constexpr auto geglu = model::mlp_kind::geglu;
inline constexpr auto squared_relu = model::mlp_kind::squared_relu;
inline constexpr auto learned = model::position_kind::learned;
inline constexpr auto rotary = model::position_kind::rotary;
inline constexpr auto alibi = model::position_kind::alibi;

namespace dsl {

/// Option tags. Each knows which call it belongs to.
namespace tags {
struct transformer_call;
struct shape_call;
struct training_call;  // dsl::training (train/dsl.hpp)
// clang-format off
struct name { using of = transformer_call; };
struct arch { using of = transformer_call; };
struct hidden { using of = transformer_call; };
struct heads { using of = transformer_call; };
struct kv_heads { using of = transformer_call; };
struct head_dim { using of = transformer_call; };
struct ffn { using of = transformer_call; };
struct layers { using of = transformer_call; };
struct vocab { using of = transformer_call; };
struct sequence { using of = calls<transformer_call, training_call>; };
struct max_positions { using of = transformer_call; };
struct norm { using of = transformer_call; };
struct mlp { using of = transformer_call; };
struct positions { using of = transformer_call; };
struct bias { using of = transformer_call; };
struct tied_embeddings { using of = transformer_call; };
struct pre_norm { using of = transformer_call; };
struct parallel_residual { using of = transformer_call; };
struct dropout { using of = transformer_call; };
struct microbatch { using of = calls<shape_call, training_call>; };
struct seq_override { using of = shape_call; };
struct tp { using of = shape_call; };
struct sequence_parallel { using of = calls<shape_call, training_call>; };
struct element_bytes { using of = shape_call; };
// clang-format on
}  // namespace tags

// clang-format off
inline constexpr keyword<tags::name, std::string_view> name{};
inline constexpr keyword<tags::arch, model::family> arch{};
inline constexpr keyword<tags::hidden, std::int64_t> hidden{};
inline constexpr keyword<tags::heads, std::int64_t> heads{};
inline constexpr keyword<tags::kv_heads, std::int64_t> kv_heads{};
inline constexpr keyword<tags::head_dim, std::int64_t> head_dim{};
inline constexpr keyword<tags::ffn, std::int64_t> ffn{};
inline constexpr keyword<tags::layers, std::int64_t> layers{};
inline constexpr keyword<tags::vocab, std::int64_t> vocab{};
inline constexpr keyword<tags::sequence, std::int64_t> sequence{};
inline constexpr keyword<tags::max_positions, std::int64_t> max_positions{};
inline constexpr keyword<tags::norm, model::norm_kind> norm{};
inline constexpr keyword<tags::mlp, model::mlp_kind> mlp{};
inline constexpr keyword<tags::positions, model::position_kind> positions{};
inline constexpr keyword<tags::bias, bool> bias{};
inline constexpr keyword<tags::tied_embeddings, bool> tied_embeddings{};
inline constexpr keyword<tags::pre_norm, bool> pre_norm{};
inline constexpr keyword<tags::parallel_residual, bool> parallel_residual{};
inline constexpr keyword<tags::dropout, bool> dropout{};
inline constexpr set_keyword<tags::microbatch, std::int64_t> microbatch{};
inline constexpr keyword<tags::seq_override, std::int64_t> shape_sequence{};
inline constexpr keyword<tags::tp, int> tp{};
inline constexpr set_keyword<tags::sequence_parallel, bool> sequence_parallel{};
inline constexpr keyword<tags::element_bytes, int> element_bytes{};
// clang-format on

namespace detail {
/// One check per argument, so the diagnostic's instantiation context names the offending option's tag.
template <class Call, class Arg, class... Args>
constexpr void check_option() {
  static_assert(belongs_to<Call, Arg>,
                "phaze::dsl: this option does not belong to this call (the tag above names it); "
                "transformer() takes architecture options, shape() takes microbatch/tp/sequence_parallel, "
                "training() takes training knobs");
  static_assert(count_of<typename Arg::tag, Args...> == 1,
                "phaze::dsl: an option was given twice (the tag above names it); give each option once");
}
}  // namespace detail

/// A transformer model from keyword options. Required: hidden, heads, layers, vocab, sequence.
/// Defaults: GPT-style (learned positions, layernorm, GELU MLP of 4 x hidden, biases, tied embeddings,
/// pre-norm, dropout).
template <class... Args>
requires(detail::is_argument<Args>&&...) constexpr model::model transformer(Args... args) {
  (detail::check_option<tags::transformer_call, Args, Args...>(), ...);
  using namespace detail;
  model::transformer_config c;
  c.name = value_or<tags::name, std::string_view>("custom", args...);
  c.arch = value_or<tags::arch, model::family>(model::family::gpt, args...);
  c.hidden = value_or<tags::hidden, std::int64_t>(0, args...);
  c.heads = value_or<tags::heads, std::int64_t>(0, args...);
  c.kv_heads = value_or<tags::kv_heads, std::int64_t>(0, args...);
  c.head_dim = value_or<tags::head_dim, std::int64_t>(0, args...);
  c.ffn = value_or<tags::ffn, std::int64_t>(4 * c.hidden, args...);
  c.layers = value_or<tags::layers, std::int64_t>(0, args...);
  c.vocab = value_or<tags::vocab, std::int64_t>(0, args...);
  c.sequence = value_or<tags::sequence, std::int64_t>(0, args...);
  c.max_positions = value_or<tags::max_positions, std::int64_t>(c.sequence, args...);
  c.norm = value_or<tags::norm, model::norm_kind>(model::norm_kind::layernorm, args...);
  c.mlp = value_or<tags::mlp, model::mlp_kind>(model::mlp_kind::gelu, args...);
  c.positions = value_or<tags::positions, model::position_kind>(model::position_kind::learned, args...);
  c.bias = value_or<tags::bias, bool>(true, args...);
  c.tied_embeddings = value_or<tags::tied_embeddings, bool>(true, args...);
  c.pre_norm = value_or<tags::pre_norm, bool>(true, args...);
  c.final_norm = c.pre_norm;
  c.parallel_residual = value_or<tags::parallel_residual, bool>(false, args...);
  c.dropout = value_or<tags::dropout, bool>(true, args...);
  return model::make_model(c);
}

namespace detail {
/// Whether the option `Tag`, when given, holds one value of type `T` (not a value set).
template <class Tag, class T, class... Args>
inline constexpr bool one_value_of =
    std::is_void_v<value_type_of_t<Tag, Args...>> || std::is_same_v<value_type_of_t<Tag, Args...>, T>;
}  // namespace detail

/// A layer shape from keyword options (microbatch, shape_sequence, tp, sequence_parallel, element_bytes).
template <class... Args>
requires(detail::is_argument<Args>&&...) constexpr model::layer_shape shape(Args... args) {
  (detail::check_option<tags::shape_call, Args, Args...>(), ...);
  using namespace detail;
  static_assert(one_value_of<tags::microbatch, std::int64_t, Args...>,
                "phaze::dsl::shape: 'microbatch' takes one value; pow2(...) and one_of(...) list the sizes a "
                "training run tries (dsl::training)");
  static_assert(one_value_of<tags::sequence_parallel, bool, Args...>,
                "phaze::dsl::shape: 'sequence_parallel' takes true or false; one_of(false, true) lists the "
                "settings a training run tries (dsl::training)");
  model::layer_shape s;
  if constexpr (one_value_of<tags::microbatch, std::int64_t, Args...> &&
                one_value_of<tags::sequence_parallel, bool, Args...>) {
    s.microbatch = value_or<tags::microbatch, std::int64_t>(1, args...);
    s.sequence = value_or<tags::seq_override, std::int64_t>(0, args...);
    s.tp = value_or<tags::tp, int>(1, args...);
    s.sequence_parallel = value_or<tags::sequence_parallel, bool>(false, args...);
    s.elem_bytes = value_or<tags::element_bytes, int>(2, args...);
  }
  return s;
}

/// The transformer block of `m` for a shape, checked (a tp that does not divide the heads fails to compile);
/// a hybrid model's first block.
constexpr model::layer layer(const model::model& m, const model::layer_shape& s,
                             model::layer_role role = model::layer_role::block) {
  if (role == model::layer_role::block && m.config.hybrid()) return model::layer_at(m, 1, s);
  return model::make_layer(m.config, role, s);
}

}  // namespace dsl
}  // namespace phaze
