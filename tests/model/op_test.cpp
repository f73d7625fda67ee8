// Tests of phaze/model/op.hpp: unit classification, FLOP and byte counts derived from an op's shapes.
#include "phaze/model/op.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <string_view>

using namespace phaze;
using namespace phaze::model;

namespace {
// op_kind::matmul .. op_kind::fused_attention, the last kind.
constexpr int op_kind_count = static_cast<int>(op_kind::fused_attention) + 1;

op make(op_kind kind, std::int64_t in, std::int64_t out, std::int64_t params = 0, int elem_bytes = 2) {
  op o;
  o.kind = kind;
  o.in_elements = in;
  o.out_elements = out;
  o.params = params;
  o.elem_bytes = elem_bytes;
  return o;
}
}  // namespace

TEST_CASE("every op kind runs on the unit its work needs", "[op]") {
  int tensor_ops = 0, network_ops = 0, no_work = 0, vector_ops = 0;
  std::set<std::string_view> names;
  for (int k = 0; k < op_kind_count; ++k) {
    const auto kind = static_cast<op_kind>(k);
    const auto name = to_string(kind);
    CHECK(name != "?");
    names.insert(name);
    const unit u = unit_of(make(kind, 1, 1));
    switch (u) {
      case unit::tensor:
        ++tensor_ops;
        break;
      case unit::network:
        ++network_ops;
        break;
      case unit::none:
        ++no_work;
        break;
      case unit::vector:
        ++vector_ops;
        break;
    }
    const bool gemm =
        kind == op_kind::matmul || kind == op_kind::batched_matmul || kind == op_kind::fused_attention;
    const bool collective =
        kind == op_kind::all_reduce || kind == op_kind::reduce_scatter || kind == op_kind::all_gather;
    CHECK((u == unit::tensor) == gemm);
    CHECK((u == unit::network) == collective);
    CHECK((u == unit::none) == (kind == op_kind::tp_copy || kind == op_kind::view));
  }
  CHECK(names.size() == op_kind_count);  // names are distinct
  CHECK(op_kind_count == 22);
  CHECK(tensor_ops == 3);
  CHECK(network_ops == 3);
  CHECK(no_work == 2);
  CHECK(vector_ops == op_kind_count - 8);
  CHECK(to_string(unit::tensor) == "tensor");
  CHECK(to_string(unit::network) == "network");
  CHECK(to_string(op_phase::backward_weight) == "backward_weight");
  CHECK(to_string(op_phase::backward_data) == "backward_data");
  CHECK(to_string(op_phase::forward) == "forward");
}

TEST_CASE("a GEMM costs 2*batch*m*k*n FLOPs and moves both operands and its result", "[op]") {
  // Brute force: count the multiply-adds of the triple loop of C[b][m][n] += A[b][m][k] * B[b][k][n].
  const gemm_dims g{3, 5, 7, 11};
  std::int64_t multiply_adds = 0;
  for (std::int64_t b = 0; b < g.batch; ++b)
    for (std::int64_t i = 0; i < g.m; ++i)
      for (std::int64_t j = 0; j < g.n; ++j)
        for (std::int64_t p = 0; p < g.k; ++p) ++multiply_adds;
  for (op_kind kind : {op_kind::matmul, op_kind::batched_matmul}) {
    op o = make(kind, g.batch * g.m * g.k, g.batch * g.m * g.n);
    o.gemm = g;
    CHECK(flops_of(o) == flops{2.0 * static_cast<double>(multiply_adds)});
    // The phase does not change a GEMM's cost.
    o.phase = op_phase::backward_weight;
    CHECK(flops_of(o) == flops{2.0 * static_cast<double>(multiply_adds)});
    CHECK(bytes_read(o) == bytes{2.0 * 3 * (5 * 7 + 7 * 11)});
    CHECK(bytes_written(o) == bytes{2.0 * 3 * 5 * 11});
    o.elem_bytes = 4;
    CHECK(bytes_read(o) == bytes{4.0 * 3 * (5 * 7 + 7 * 11)});
  }
  // The GPT-3 QKV projection for one 2048-token sequence: 2 * 2048 * 12288 * 36864 FLOPs.
  op qkv = make(op_kind::matmul, 2048 * 12288, 2048 * 36864, 12288 * 36864 + 36864);
  qkv.gemm = {1, 2048, 12288, 36864};
  CHECK(flops_of(qkv).value() == 2.0 * 2048.0 * 12288.0 * 36864.0);
  CHECK(param_bytes(qkv) == bytes{2.0 * (12288.0 * 36864.0 + 36864.0)});
}

TEST_CASE("vector ops cost a fixed count per output element, twice that backward", "[op]") {
  struct expected {
    op_kind kind;
    double per_element;  // the formula counts documented in op.hpp
  };
  for (auto [kind, per_element] :
       {expected{op_kind::softmax, 5}, expected{op_kind::layernorm, 8}, expected{op_kind::rmsnorm, 5},
        expected{op_kind::gelu, 8}, expected{op_kind::relu, 1}, expected{op_kind::silu, 4},
        expected{op_kind::swiglu, 5}, expected{op_kind::dropout, 2}, expected{op_kind::residual_add, 1},
        expected{op_kind::rotary, 3}, expected{op_kind::cross_entropy, 6}}) {
    op o = make(kind, 1000, 1000);
    CHECK(unit_of(o) == unit::vector);
    CHECK(flops_of(o) == flops{per_element * 1000.0});
    o.phase = op_phase::backward_data;
    CHECK(flops_of(o) == flops{2.0 * per_element * 1000.0});
  }
  // No arithmetic: lookups, markers and collectives.
  for (op_kind kind : {op_kind::embedding, op_kind::tp_copy, op_kind::all_reduce, op_kind::reduce_scatter,
                       op_kind::all_gather}) {
    CHECK(flops_of(make(kind, 100, 100, 10)) == flops{0.0});
  }
}

TEST_CASE("vector ops read inputs and parameters and write outputs, dropout adds a byte mask", "[op]") {
  const op ln = make(op_kind::layernorm, 4096, 4096, 2 * 64);
  CHECK(bytes_read(ln) == bytes{2.0 * (4096 + 128)});
  CHECK(bytes_written(ln) == bytes{2.0 * 4096});
  CHECK(output_bytes(ln) == bytes{2.0 * 4096});
  CHECK(param_bytes(ln) == bytes{2.0 * 128});

  op drop = make(op_kind::dropout, 4096, 4096);
  CHECK(bytes_written(drop) == bytes{3.0 * 4096});  // fp16 value + one-byte mask
  drop.phase = op_phase::backward_data;
  CHECK(bytes_written(drop) == bytes{2.0 * 4096});  // the gradient has no mask

  // An embedding lookup reads the gathered rows, not the whole table.
  const op emb = make(op_kind::embedding, 0, 2048 * 1024, 50000 * 1024);
  CHECK(bytes_read(emb) == bytes{2.0 * 2048 * 1024});
  CHECK(param_bytes(emb) == bytes{2.0 * 50000 * 1024});
}

TEST_CASE("a collective carries the unsharded tensor, other ops carry nothing over the network", "[op]") {
  // An all-gather over 8 ranks turns 256 local elements into 2048; a reduce-scatter the reverse.
  CHECK(collective_bytes(make(op_kind::all_gather, 256, 2048)) == bytes{2.0 * 2048});
  CHECK(collective_bytes(make(op_kind::reduce_scatter, 2048, 256)) == bytes{2.0 * 2048});
  CHECK(collective_bytes(make(op_kind::all_reduce, 2048, 2048, 0, 4)) == bytes{4.0 * 2048});
  CHECK(collective_bytes(make(op_kind::tp_copy, 2048, 2048)) == bytes{0.0});
  CHECK(collective_bytes(make(op_kind::gelu, 2048, 2048)) == bytes{0.0});
}

TEST_CASE("op cost functions are usable in constant expressions", "[op]") {
  constexpr op o = [] {
    op x;
    x.kind = op_kind::matmul;
    x.gemm = {1, 4, 8, 16};
    x.out_elements = 64;
    return x;
  }();
  STATIC_REQUIRE(flops_of(o) == flops{2.0 * 4 * 8 * 16});
  STATIC_REQUIRE(unit_of(o) == unit::tensor);
  STATIC_REQUIRE(bytes_written(o) == bytes{2.0 * 64});
}
