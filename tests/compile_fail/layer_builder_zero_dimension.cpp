// expect-error: non-.*constexpr.* function .*phaze::model::rules::op_shapes_must_be_positive\(\)
// A GEMM with a zero dimension is a wiring mistake, caught while the layer is built at compile time.
#include <phaze/model/layer.hpp>

using namespace phaze::model;

constexpr layer broken = [] {
  layer_builder b{"mlp", layer_role::block, layer_shape{}, 1024};
  b.matmul("fc1", b.input(), {1, 0, 1024, 4096}, tp_split::column);
  return b.build();
}();
