// A vector op built by hand for the cost tests: its kind, pass and element counts (elem_bytes 2), as
// model::layer_builder would make it.
#pragma once

#include <phaze/model/op.hpp>

#include <cstdint>

namespace phaze::testing {

inline model::op vector_op(model::op_kind kind, model::op_phase phase, std::int64_t in, std::int64_t out,
                           std::int64_t params = 0) {
  model::op o;
  o.kind = kind;
  o.phase = phase;
  o.in_elements = in;
  o.out_elements = out;
  o.params = params;
  return o;
}

}  // namespace phaze::testing
