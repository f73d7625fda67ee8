/// @file
/// A composite model: the TransGAN generator AMP trained as its heterogeneous-model workload (Li et al.,
/// NeurIPS 2022), layer for layer as its DeepSpeed pipeline ran it: 56 layer entries, two kinds of
/// transformer block (12 of width 1024 over the 81 tokens of a 9 x 9 grid, 12 of width 16 inside 256 windows
/// of 18 x 18 = 324 tokens of a 288 x 288 image) and the resizes, reshapes and position embeddings between
/// them (docs/validation-amp.md lists every entry).
#pragma once

#include <cstdint>

#include "phaze/model/layer.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/transformer.hpp"

namespace phaze::model {

namespace detail::transgan {

/// A TransGAN block (Jiang, Chang and Wang, NeurIPS 2021; `ParallelTransformerBlock` of AMP's Megatron-LM
/// copy, megatron/model/trans_gan_gen.py): pre-norm with PixelNorm, 4 heads, a GELU MLP of 4 d, biases,
/// no dropout, full (non-causal) attention inside a window of w x w tokens with a learned relative-position
/// bias of (2 w - 1)^2 entries per head. Not modelled: the attention's noise term (one learned scalar per
/// block, and an element-wise add).
constexpr transformer_config block(std::int64_t width, std::int64_t window) {
  transformer_config c;
  c.name = "transgan-block";
  c.hidden = width;
  c.heads = 4;
  c.ffn = 4 * width;
  c.layers = 12;
  c.vocab = 1;
  c.sequence = window * window;
  c.max_positions = window * window;
  c.score_bias = (2 * window - 1) * (2 * window - 1);
  c.norm = norm_kind::pixelnorm;
  c.tied_embeddings = false;
  c.final_norm = false;
  c.dropout = false;
  c.causal = false;
  return c;
}

constexpr layer_spec dense(const char* name, layer_role role, std::int64_t rows, std::int64_t in,
                           std::int64_t out) {
  return {.name = name,
          .role = role,
          .recipe = layer_recipe::dense,
          .rows = rows,
          .in = in,
          .out = out,
          .bias = true};
}
constexpr layer_spec pointwise(const char* name, std::int64_t in, std::int64_t out, std::int64_t params = 0) {
  return {.name = name,
          .role = layer_role::adapter,
          .recipe = layer_recipe::pointwise,
          .in = in,
          .out = out,
          .params = params};
}
constexpr layer_spec view(const char* name, std::int64_t elements) {
  return {.name = name,
          .role = layer_role::adapter,
          .recipe = layer_recipe::view,
          .in = elements,
          .out = elements};
}
constexpr layer_spec blocks(const char* name, const transformer_config& c, std::int64_t sequences) {
  return {.name = name,
          .role = layer_role::block,
          .recipe = layer_recipe::transformer,
          .own_architecture = true,
          .architecture = c,
          .sequences = sequences};
}

}  // namespace detail::transgan

/// AMP's TransGAN generator (AMP's het_model.py and examples/ds_pretrain_transgan_pipe.sh: latent 512,
/// gf_dim 1024, bottom width 9, depth 12,0,0,0,0,12, generator window 18; Jiang et al.'s TransGAN): the 56
/// entries of AMP's layer list, whose cut points index them.
/// - 0: a linear layer from the 512-wide latent to a 9 x 9 grid of width 1024;
/// - 1-2: a view to 81 tokens, the 81 x 1024 position embedding added;
/// - 3-14: 12 blocks of width 1024 over the 81 tokens (window 9);
/// - 15-22: a copy (interpolation by 1), nearest upsampling to 18 x 18, its position embedding, an identity,
///   upsampling to 36 x 36, its position embedding, a pixel shuffle to 72 x 72 x 256 and its embedding;
/// - 23-40: the window partitions and reverses of the two resolutions without blocks (depth 0), pixel
///   shuffles to 144 x 144 x 64 and 288 x 288 x 16 with their position embeddings, the partition into 256
///   windows of 18 x 18;
/// - 41-52: 12 blocks of width 16 inside each of the 256 windows of 324 tokens (window 18);
/// - 53-55: the window reverse and a 1 x 1 convolution to three colour channels.
/// Elements per sample: 82,944 (9 x 9 x 1024), 331,776 (18 x 18 x 1024), 1,327,104 from 36 x 36 x 1024 on.
inline constexpr auto transgan_generator = []() constexpr -> model {
  using namespace detail::transgan;
  constexpr std::int64_t grid = 9 * 9 * 1024;      // 82,944
  constexpr std::int64_t grid18 = 18 * 18 * 1024;  // 331,776
  constexpr std::int64_t image = 36 * 36 * 1024;   // 1,327,104 (72^2 x 256, 144^2 x 64, 288^2 x 16 alike)
  transformer_config summary = block(1024, 9);
  summary.name = "transgan";
  summary.layers = 24;
  enum : std::uint8_t {
    latent,
    view_grid,
    position_grid,
    block_1024,
    copy_grid,
    upsample_18,
    position_18,
    view_18,
    upsample_36,
    position_image,
    copy_image,
    view_image,
    block_16,
    to_rgb
  };
  return make_chain_model(
      summary,
      {dense("latent_to_grid", layer_role::embedding, 1, 512, grid), view("view_grid", grid),
       pointwise("position_9x9", grid, grid, grid), blocks("block_1024_w9", block(1024, 9), 1),
       pointwise("interpolate_9x9", grid, grid), pointwise("upsample_18x18", grid, grid18),
       pointwise("position_18x18", grid18, grid18, grid18), view("identity_18x18", grid18),
       pointwise("upsample_36x36", grid18, image), pointwise("position_image", image, image, image),
       pointwise("shuffle_or_window", image, image), view("view_image", image),
       blocks("block_16_w18", block(16, 18), 256), dense("to_rgb", layer_role::head, 288 * 288, 16, 3)},
      {latent,     view_grid,      position_grid,  block_1024,  block_1024, block_1024,  block_1024,
       block_1024, block_1024,     block_1024,     block_1024,  block_1024, block_1024,  block_1024,
       block_1024, copy_grid,      upsample_18,    position_18, view_18,    upsample_36, position_image,
       copy_image, position_image, view_image,     copy_image,  view_image, view_image,  view_image,
       copy_image, copy_image,     position_image, view_image,  copy_image, view_image,  view_image,
       copy_image, copy_image,     position_image, view_image,  copy_image, view_image,  block_16,
       block_16,   block_16,       block_16,       block_16,    block_16,   block_16,    block_16,
       block_16,   block_16,       block_16,       block_16,    view_image, copy_image,  to_rgb});
};

}  // namespace phaze::model
