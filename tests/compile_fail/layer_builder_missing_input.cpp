// expect-error: non-.*constexpr.* function .*rules::op_input_must_be_an_earlier_op_of_the_same_layer\(\)
// An op may only read the layer input or an op built before it.
#include <phaze/model/layer.hpp>

using namespace phaze::model;

constexpr layer broken = [] {
  layer_builder b{"mlp", layer_role::block, layer_shape{}, 1024};
  b.vector(op_kind::gelu, "gelu", tensor{3, 1024}, saves::input0);  // op 3 does not exist
  return b.build();
}();
