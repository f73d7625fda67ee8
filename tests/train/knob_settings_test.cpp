// Tests of phaze/train/knob_settings.hpp: the settings come in the order of the co-search's nested loops
// (microbatch, then recomputation, then sequence parallelism), on several knob spaces, with and without the
// global batch's filter.
#include "phaze/train/knob_settings.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using namespace phaze;
using model::recompute;

namespace {
/// The oracle: the nested loops the search ran before knob_settings existed.
std::vector<train::knob_setting> nested_loops(const train::knob_space& k, std::int64_t global_batch = 0) {
  std::vector<train::knob_setting> out;
  for (const std::int64_t mb : k.microbatches) {
    if (global_batch > 0 && global_batch % mb != 0) continue;
    for (const recompute mode : k.recompute)
      for (const bool sp : k.sequence_parallel) out.push_back({mb, mode, sp});
  }
  return out;
}
}  // namespace

TEST_CASE("knob_settings lists every setting in the search's loop order", "[train]") {
  const train::knob_space defaults{};
  const auto all = train::knob_settings(defaults);
  REQUIRE(all.size() == 4 * 3 * 2);
  CHECK(all == nested_loops(defaults));
  CHECK(all.front() == train::knob_setting{1, recompute::none, false});
  CHECK(all[1] == train::knob_setting{1, recompute::none, true});  // sequence parallelism varies fastest
  CHECK(all[2] == train::knob_setting{1, recompute::selective, false});
  CHECK(all[6] == train::knob_setting{2, recompute::none, false});  // microbatch varies slowest
  CHECK(all.back() == train::knob_setting{8, recompute::full, true});

  train::knob_space odd;
  odd.microbatches = {8, 3, 1};  // listed order, not sorted
  odd.recompute = {recompute::full, recompute::none};
  odd.sequence_parallel = {true};
  CHECK(train::knob_settings(odd) == nested_loops(odd));
  CHECK(train::knob_settings(odd).front() == train::knob_setting{8, recompute::full, true});

  train::knob_space one;
  one.microbatches = {2};
  one.recompute = {recompute::selective};
  one.sequence_parallel = {false};
  CHECK(train::knob_settings(one) == std::vector<train::knob_setting>{{2, recompute::selective, false}});
}

TEST_CASE("knob_settings with a global batch keeps the microbatches that divide it", "[train]") {
  train::knob_space k;
  k.microbatches = {1, 2, 3, 4, 8};
  for (const std::int64_t batch : {12, 16, 7, 24}) {
    INFO("global batch " << batch);
    CHECK(train::knob_settings(k, batch) == nested_loops(k, batch));
  }
  CHECK(train::knob_settings(k, 7).size() == 1 * 3 * 2);  // only microbatch 1 divides 7
}
