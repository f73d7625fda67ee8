// Tests of phaze/model/zoo.hpp: every entry builds where its shape allows, lookups, and "did you mean"
// suggestions for unknown names.
#include "phaze/model/zoo.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

using namespace phaze;
namespace zoo = phaze::zoo;
using phaze::model::layer_role;
using phaze::model::layer_shape;

namespace {
std::string lookup_error(std::string_view name) {
  try {
    (void)zoo::lookup(name);
  } catch (const input_error& e) {
    CHECK(e.code() == exit_code::bad_input);
    return e.what();
  }
  FAIL("lookup of '" << name << "' did not throw");
  return {};
}
}  // namespace

TEST_CASE("zoo entries have unique names, sources and valid configurations", "[zoo]") {
  std::set<std::string_view> names;
  for (const auto& e : zoo::entries) {
    INFO(e.name);
    CHECK(names.insert(e.name).second);
    CHECK_FALSE(e.source.empty());
    CHECK(e.config.name.view() == e.name);
    CHECK_NOTHROW(model::validate(e.config));
    REQUIRE(zoo::find(e.name).has_value());
    CHECK(zoo::find(e.name)->config == e.config);
    CHECK(zoo::lookup(e.name) == zoo::get(e.name));
    CHECK(zoo::lookup(e.name).config == e.config);
  }
  CHECK(names.size() == zoo::entries.size());
  CHECK_FALSE(zoo::find("gpt4").has_value());
  CHECK_FALSE(zoo::find("").has_value());
}

TEST_CASE("named accessors return their entries", "[zoo]") {
  CHECK(zoo::bert_large() == zoo::lookup("bert-large"));
  CHECK(zoo::megatron_bert() == zoo::lookup("megatron-bert"));
  CHECK(zoo::gpt2() == zoo::lookup("gpt2"));
  CHECK(zoo::gpt2_xl() == zoo::lookup("gpt2-xl"));
  CHECK(zoo::megatron_gpt2_40() == zoo::lookup("megatron-gpt2-40"));
  CHECK(zoo::megatron_gpt2_54() == zoo::lookup("megatron-gpt2-54"));
  CHECK(zoo::megatron_gpt2_72() == zoo::lookup("megatron-gpt2-72"));
  CHECK(zoo::gpt3_175b() == zoo::lookup("gpt3-175b"));
  CHECK(zoo::opt_350m() == zoo::lookup("opt-350m"));
  CHECK(zoo::opt_1_3b() == zoo::lookup("opt-1.3b"));
  CHECK(zoo::opt_175b() == zoo::lookup("opt-175b"));
  CHECK(zoo::llama2_7b() == zoo::lookup("llama2-7b"));
  CHECK(zoo::llama2_13b() == zoo::lookup("llama2-13b"));
  CHECK(zoo::llama2_70b() == zoo::lookup("llama2-70b"));
  CHECK(zoo::llama3_8b() == zoo::lookup("llama3-8b"));
  CHECK(zoo::llama3_70b() == zoo::lookup("llama3-70b"));
  // Distinct entries are distinct models.
  CHECK_FALSE(zoo::bert_large() == zoo::megatron_bert());
  CHECK_FALSE(zoo::llama2_70b() == zoo::llama3_70b());
}

TEST_CASE("every zoo model builds for each tensor-parallel width its heads, kv heads and ffn allow",
          "[zoo]") {
  int built = 0, rejected = 0;
  for (const auto& e : zoo::entries) {
    const auto m = zoo::lookup(e.name);
    const auto& c = e.config;
    for (int tp : {1, 2, 4, 8}) {
      const bool valid = c.heads % tp == 0 && c.kv_heads_or_default() % tp == 0 && c.ffn % tp == 0;
      for (bool sp : {false, true}) {
        const layer_shape shape{1, 0, tp, sp, 2};
        INFO(e.name << " tp " << tp << " sp " << sp);
        for (std::size_t i : {std::size_t{0}, std::size_t{1}, m.size() - 1}) {
          if (valid) {
            const auto l = model::layer_at(m, i, shape);
            CHECK(l.shape == shape);
            CHECK_FALSE(l.ops.empty());
            ++built;
          } else {
            CHECK_THROWS_AS(model::layer_at(m, i, shape), input_error);
            ++rejected;
          }
        }
      }
    }
  }
  // GPT-2 (12 heads) has no 8-way split; GPT-2 XL (25 heads) has none at all; Megatron's 2.5B (20 heads)
  // no 8.
  CHECK_THROWS_WITH(model::layer_at(zoo::gpt2(), 1, {1, 0, 8, false, 2}),
                    Catch::Matchers::Contains("divide the number of attention heads"));
  CHECK_THROWS_AS(model::layer_at(zoo::gpt2_xl(), 1, {1, 0, 2, false, 2}), input_error);
  CHECK_NOTHROW(model::layer_at(zoo::megatron_gpt2_54(), 1, {1, 0, 4, true, 2}));
  CHECK(built > 0);
  // gpt2 at 8; gpt2-xl at 2, 4, 8; megatron-gpt2-54 at 8; qwen3-30b-a3b (4 key/value heads) at 8;
  // nemotron-3-nano-30b-a3b (2 key/value heads) at 4 and 8
  CHECK(rejected == 2 * 3 * (1 + 3 + 1 + 1 + 2));
}

TEST_CASE("with_sequence and with_vocab work on zoo models", "[zoo]") {
  const auto m = model::with_vocab(model::with_sequence(zoo::lookup("gpt3-175b"), 4096), 51200);
  CHECK(m.config.sequence == 4096);
  CHECK(m.config.vocab == 51200);
  CHECK(m.config.hidden == 12288);
  const auto block = model::layer_at(m, 1, {});
  CHECK(block.input_elements == 4096 * 12288);
  const auto head = model::layer_at(m, m.size() - 1, {});
  CHECK(head.ops.back().kind == model::op_kind::cross_entropy);
  bool found = false;
  for (const auto& o : head.ops)
    if (o.name.view() == "output_projection") {
      found = true;
      CHECK(o.gemm.n == 51200);
    }
  CHECK(found);
}

TEST_CASE("unknown names throw input_error suggesting the closest zoo names", "[zoo]") {
  const std::string truncated = lookup_error("gpt3-175");
  CHECK_THAT(truncated, Catch::Matchers::Contains("unknown model 'gpt3-175'"));
  CHECK_THAT(truncated, Catch::Matchers::Contains("did you mean 'gpt3-175b'"));
  CHECK_THAT(truncated, Catch::Matchers::Contains("phaze models"));

  const std::string typo = lookup_error("lama2-7b");
  CHECK_THAT(typo, Catch::Matchers::Contains("did you mean 'llama2-7b'"));

  const std::string case_typo = lookup_error("Llama3-8B");
  CHECK_THAT(case_typo, Catch::Matchers::Contains("'llama3-8b'"));

  const std::string opt = lookup_error("opt-1.3");
  CHECK_THAT(opt, Catch::Matchers::Contains("did you mean 'opt-1.3b'"));

  // Three suggestions, joined as "'a', 'b' or 'c'".
  const auto names = zoo::closest_names("gpt2-x");
  REQUIRE(names.size() == 3);
  // "gpt2" is contained in the query and "gpt2-xl" contains it: both rank first, ties in zoo order.
  CHECK(names[0] == "gpt2");
  CHECK(names[1] == "gpt2-xl");
  const std::string three = lookup_error("gpt2-x");
  std::string joined = "'";  // built with append: GCC 12 warns falsely (-Wrestrict) on chained operator+
  joined.append(names[0]).append("', '").append(names[1]).append("' or '").append(names[2]).append("'");
  CHECK_THAT(three, Catch::Matchers::Contains(joined));
}

TEST_CASE("closest_names ranks by edit distance (brute-force check of the ranking)", "[zoo]") {
  // Oracle: a textbook recursive Levenshtein distance on short strings, memo-free.
  const auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
      for (std::size_t j = 1; j <= b.size(); ++j)
        d[i][j] =
            std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0u : 1u)});
    return d[a.size()][b.size()];
  };
  for (const std::string_view query : {"lama2-13b", "bert-larg", "megatron-22", "turing", "opt-175", "xyz"}) {
    INFO(query);
    const auto names = zoo::closest_names(query, zoo::entries.size());
    REQUIRE(names.size() == zoo::entries.size());
    // Names containing the query (or contained in it) come first; the rest are in edit-distance order.
    const auto key = [&](std::string_view n) {
      const bool contains =
          n.find(query) != std::string_view::npos || query.find(n) != std::string_view::npos;
      return contains ? std::size_t{0} : distance(query, n);
    };
    for (std::size_t i = 0; i + 1 < names.size(); ++i) CHECK(key(names[i]) <= key(names[i + 1]));
    CHECK(phaze::edit_distance(query, names[0]) == distance(query, names[0]));
  }
  CHECK(phaze::edit_distance("kitten", "sitting") == 3);
  CHECK(phaze::edit_distance("", "abc") == 3);
  CHECK(zoo::closest_names("turing", 1) == std::vector<std::string>{"turing-530b"});
}

TEST_CASE("zoo models are constant expressions", "[zoo]") {
  constexpr auto gpt3 = zoo::gpt3_175b();
  STATIC_REQUIRE(gpt3.config.hidden == 12288);
  STATIC_REQUIRE(gpt3.size() == 98);
  STATIC_REQUIRE(zoo::find("llama2-70b")->config.kv_heads == 8);
  STATIC_REQUIRE_FALSE(zoo::find("llama2-71b").has_value());
}
