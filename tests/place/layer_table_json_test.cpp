// Tests include/phaze/io/layer_table_json.hpp (kept with the placers it feeds, tests/place/).
#include "phaze/io/layer_table_json.hpp"

#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "phaze/core/error.hpp"
#include "phaze/place/brute_force.hpp"
#include "phaze/place/chain_dp.hpp"
#include "phaze/place/downset_dp.hpp"
#include "phaze/place/uniform.hpp"

using namespace phaze;
using namespace phaze::place;

namespace {
const std::string data_dir = std::string{PHAZE_TEST_DATA_DIR} + "/layer_tables/";

void require_same(const placement_problem<>& a, const placement_problem<>& b) {
  CHECK(a.devices == b.devices);
  CHECK(a.memory_per_device == b.memory_per_device);
  CHECK(a.microbatches == b.microbatches);
  CHECK(a.weight_bytes_per_parameter == b.weight_bytes_per_parameter);
  CHECK(a.state_bytes_per_parameter == b.state_bytes_per_parameter);
  CHECK(a.p2p_bandwidth == b.p2p_bandwidth);
  CHECK(a.dp_bandwidth == b.dp_bandwidth);
  CHECK(a.schedule == b.schedule);
  CHECK(a.recompute == b.recompute);
  REQUIRE(a.tables.size() == b.tables.size());
  for (std::size_t t = 0; t < a.tables.size(); ++t) {
    CHECK(a.tables[t].tp == b.tables[t].tp);
    REQUIRE(a.tables[t].nodes.size() == b.tables[t].nodes.size());
    for (std::size_t v = 0; v < a.tables[t].nodes.size(); ++v) {
      const auto& x = a.tables[t].nodes[v];
      const auto& y = b.tables[t].nodes[v];
      CHECK(x.name == y.name);
      CHECK(x.forward == y.forward);
      CHECK(x.backward == y.backward);
      CHECK(x.recompute == y.recompute);
      CHECK(x.parameters == y.parameters);
      CHECK(x.activations == y.activations);
      CHECK(x.tensor_parallel == y.tensor_parallel);
    }
    REQUIRE(a.tables[t].edges.size() == b.tables[t].edges.size());
    for (std::size_t e = 0; e < a.tables[t].edges.size(); ++e) {
      CHECK(a.tables[t].edges[e].from == b.tables[t].edges[e].from);
      CHECK(a.tables[t].edges[e].to == b.tables[t].edges[e].to);
      CHECK(a.tables[t].edges[e].boundary == b.tables[t].edges[e].boundary);
    }
  }
}

/// The example chain with one field replaced (a JSON pointer) or removed (null value).
std::string message_for(const std::string& pointer, const nlohmann::json& value) {
  auto json = io::layer_table_to_json(io::read_layer_table(data_dir + "gpt_small_chain.json"));
  if (value.is_null()) {
    json.at(nlohmann::json::json_pointer(pointer).parent_pointer())
        .erase(nlohmann::json::json_pointer(pointer).back());
  } else {
    json[nlohmann::json::json_pointer(pointer)] = value;
  }
  try {
    (void)io::layer_table_from_json(json);
  } catch (const input_error& e) {
    return e.what();
  }
  return "accepted";
}
}  // namespace

TEST_CASE("layer tables round-trip through JSON", "[place]") {
  for (const char* file : {"gpt_small_chain.json", "two_branch_dag.json"}) {
    INFO(file);
    const auto p = io::read_layer_table(data_dir + file);
    const auto again = io::layer_table_from_json(io::layer_table_to_json(p));
    require_same(p, again);
    const auto from_text = io::parse_layer_table(io::layer_table_to_json(p).dump(1));
    require_same(p, from_text);
  }
}

TEST_CASE("the example tables are placed, and placers agree on them", "[place]") {
  const auto chain = io::read_layer_table(data_dir + "gpt_small_chain.json");
  REQUIRE(is_chain(chain.tables[0]));
  const plan oracle = brute_force(chain).run();
  REQUIRE(oracle.feasible);
  CHECK(chain_dp(chain).run().time_per_batch.value() == Approx(oracle.time_per_batch.value()).epsilon(1e-12));
  CHECK(downset_dp(chain).run().time_per_batch.value() ==
        Approx(oracle.time_per_batch.value()).epsilon(1e-12));
  CHECK(uniform(chain).run().time_per_batch >= oracle.time_per_batch * (1 - 1e-12));

  const auto dag = io::read_layer_table(data_dir + "two_branch_dag.json");
  REQUIRE_FALSE(is_chain(dag.tables[0]));
  const plan dag_oracle = brute_force(dag).run();
  REQUIRE(dag_oracle.feasible);
  CHECK(downset_dp(dag).run().time_per_batch.value() ==
        Approx(dag_oracle.time_per_batch.value()).epsilon(1e-12));
  CHECK_THROWS_WITH(chain_dp(dag).run(), Catch::Contains("downset_dp"));
}

TEST_CASE("bad layer tables are rejected with the field named", "[place]") {
  using Catch::Contains;
  CHECK(message_for("/devices", 8) == "accepted");
  CHECK_THAT(message_for("/devices", 0), Contains("'devices'") && Contains("at least 1"));
  CHECK_THAT(message_for("/microbatches", 2.5), Contains("'microbatches'"));
  CHECK_THAT(message_for("/memory_per_device_bytes", nullptr),
             Contains("'memory_per_device_bytes' is missing"));
  CHECK_THAT(message_for("/memory_per_device_bytes", -1), Contains("positive"));
  CHECK_THAT(message_for("/schedule", "pipedream"), Contains("'schedule'") && Contains("gpipe"));
  CHECK_THAT(message_for("/recompute", "yes"), Contains("'recompute'") && Contains("true or false"));
  CHECK_THAT(message_for("/tables", nlohmann::json::array()), Contains("'tables' is empty"));
  CHECK_THAT(message_for("/tables/1/tp", 1),
             Contains("'tables[1].tp'") && Contains("one table per TP width"));
  CHECK_THAT(message_for("/tables/0/nodes/2/forward_s", "fast"), Contains("'tables[0].nodes[2].forward_s'"));
  CHECK_THAT(message_for("/tables/0/nodes/2/forward_ms", 1),
             Contains("'tables[0].nodes[2].forward_ms'") && Contains("did you mean 'forward_s'"));
  CHECK_THAT(message_for("/tables/0/nodes/3/parameter_bytes", nullptr),
             Contains("'tables[0].nodes[3].parameter_bytes' is missing"));
  CHECK_THAT(message_for("/tables/0/edges/1/to", 99),
             Contains("'tables[0].edges[1].to'") && Contains("nodes"));
  CHECK_THAT(message_for("/tables/0/edges/1/from", 5),
             Contains("'tables[0].edges[1].from'") && Contains("topological"));
  CHECK_THAT(message_for("/tables/0/edges/0/boundary_bytes", -3),
             Contains("'tables[0].edges[0].boundary_bytes'"));
  CHECK_THAT(message_for("/version", 2), Contains("'version'"));
  CHECK_THAT(message_for("/format", "onnx"), Contains("'format'"));
  CHECK_THAT(message_for("/hbm_gib", 80), Contains("'hbm_gib' is not a field"));
  CHECK_THROWS_WITH(io::parse_layer_table("{\"devices\": "), Contains("not valid JSON"));
  CHECK_THROWS_WITH(io::read_layer_table(data_dir + "missing.json"), Contains("cannot open"));
}
