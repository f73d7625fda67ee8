// Compile-time tests of phaze/model: published parameter counts, Korthikanti et al.'s activation closed form,
// a layer built with layer_builder in a constant expression, and the DSL. Compiling is the test.
#include <phaze/phaze.hpp>

#include <cstdint>

namespace {
using namespace phaze;
using namespace phaze::model;
namespace dsl = phaze::dsl;

// --- parameter counts (HF model cards / reference implementations, tied embeddings counted once) ---------
static_assert(parameter_count(zoo::llama2_7b()) == 6'738'415'616);
static_assert(parameter_count(zoo::llama2_13b()) == 13'015'864'320);
static_assert(parameter_count(zoo::llama2_70b()) == 68'976'648'192);
static_assert(parameter_count(zoo::llama3_8b()) == 8'030'261'248);
static_assert(parameter_count(zoo::llama3_70b()) == 70'553'706'496);
static_assert(parameter_count(zoo::gpt2()) == 124'439'808);
static_assert(parameter_count(zoo::gpt2_xl()) == 1'557'611'200);
static_assert(parameter_count(zoo::opt_350m()) == 331'196'416);
static_assert(parameter_count(zoo::opt_1_3b()) == 1'315'758'080);
// BERT-Large: HF BertModel (with pooler) 335,141,888 plus the pre-training heads (MLM transform h*h + h,
// its layernorm 2h, decoder bias V, next-sentence classifier 2h + 2), h = 1024, V = 30522.
static_assert(parameter_count(zoo::bert_large()) ==
              335'141'888 + (1024 * 1024 + 1024) + 2 * 1024 + 30522 + (2 * 1024 + 2));
// GPT-3 175B: 174.6e9 (Brown et al. 2020, Table 2.1), within 0.5%.
constexpr auto gpt3_params = static_cast<double>(parameter_count(zoo::gpt3_175b()));
static_assert(gpt3_params > 174.6e9 * 0.995 && gpt3_params < 174.6e9 * 1.005);

// --- Korthikanti et al. 2022 closed form: GPT-3 175B, t = 8, sequence parallelism --------------------------
// sbh/t (34 + 5as/h) bytes per layer; s = 2048, b = 1, h = 12288, a = 96, t = 8. Integer arithmetic: exact.
constexpr std::int64_t s = 2048, b = 1, h = 12288, a = 96, t = 8;
constexpr layer gpt3_block_tp8_sp = block_layer(zoo::gpt3_175b().config, layer_shape{b, 0, t, true, 2});
static_assert(activation_bytes(gpt3_block_tp8_sp, recompute::none) ==
              bytes{static_cast<double>(34 * s * b * h / t + 5 * a * s * s * b / t)});
static_assert(activation_bytes(gpt3_block_tp8_sp, recompute::selective) ==
              bytes{static_cast<double>(34 * s * b * h / t)});
static_assert(activation_bytes(gpt3_block_tp8_sp, recompute::full) ==
              bytes{static_cast<double>(2 * s * b * h / t)});
// Without sequence parallelism: sbh (10 + 24/t + 5as/(ht)).
constexpr layer gpt3_block_tp8 = block_layer(zoo::gpt3_175b().config, layer_shape{b, 0, t, false, 2});
static_assert(activation_bytes(gpt3_block_tp8, recompute::none) ==
              bytes{static_cast<double>(s * b * h * 10 + 24 * s * b * h / t + 5 * a * s * s * b / t)});
static_assert(backward_matmul_flops(gpt3_block_tp8) == 2.0 * forward_matmul_flops(gpt3_block_tp8));

// --- a layer built op by op in a constant expression --------------------------------------------------
constexpr std::int64_t tokens = 128, width = 64;
constexpr layer mlp = [] {
  layer_builder lb{"mlp", layer_role::block, layer_shape{}, tokens * width};
  auto up = lb.matmul("fc1", lb.input(), {1, tokens, width, 4 * width}, tp_split::column, true);
  auto act = lb.vector(op_kind::gelu, "gelu", up, saves::input0);
  auto down = lb.matmul("fc2", act, {1, tokens, 4 * width, width}, tp_split::row);
  lb.add_residual("residual", lb.input(), down);
  return lb.build();
}();
static_assert(mlp.ops.size() == 4);
static_assert(mlp.ops[3].inputs.size() == 2 && mlp.ops[3].inputs[0] == layer_input &&
              mlp.ops[3].inputs[1] == 2);
static_assert(layer_params(mlp) == 8 * width * width + 4 * width);
static_assert(forward_matmul_flops(mlp) == flops{2.0 * 2 * tokens * width * 4 * width});
static_assert(backward_matmul_flops(mlp) == 2.0 * forward_matmul_flops(mlp));
static_assert(backward(mlp).size() == 6);  // residual, fc2 (dx, dw), gelu, fc1 (dx, dw)
// Kept for backward: the input (fc1), fc1's output (gelu) and gelu's output (fc2), fp16.
static_assert(activation_bytes(mlp, recompute::none) ==
              bytes{2.0 * (tokens * width + 2 * tokens * 4 * width)});
static_assert(activation_bytes(mlp, recompute::full) == bytes{2.0 * tokens * width});
static_assert(boundary_bytes(mlp) == bytes{2.0 * tokens * width});

// --- the DSL --------------------------------------------------------------------------------------------
constexpr auto llama = dsl::transformer(
    dsl::hidden = 4096, dsl::heads = 32, dsl::ffn = 11008, dsl::layers = 32, dsl::vocab = 32000,
    dsl::sequence = 4096, dsl::norm = phaze::rmsnorm, dsl::mlp = phaze::swiglu,
    dsl::positions = phaze::rotary, dsl::bias = false, dsl::tied_embeddings = false, dsl::dropout = false);
static_assert(parameter_count(llama) == parameter_count(zoo::llama2_7b()));
static_assert(dsl::shape() == layer_shape{});
static_assert(dsl::layer(llama, dsl::shape(dsl::tp = 8)) ==
              block_layer(zoo::llama2_7b().config, layer_shape{1, 0, 8, false, 2}));
static_assert(distinct_layers(zoo::gpt3_175b()).size() == 3);
static_assert(distinct_layers(zoo::gpt3_175b())[1].count == 96);
static_assert(zoo::find("megatron-1t").has_value() && !zoo::find("megatron-2t").has_value());
}  // namespace
