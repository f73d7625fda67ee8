#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/train/pipeline_layout.hpp"

using namespace phaze;
using train::layout_chunk;

namespace {

// The oracle: Megatron-Core's own reading of a layout string (PipelineParallelLayerLayout.parse_str_to_list,
// core_r0.14.0), restated: drop commas, unroll "(...)*N" (no nested parentheses), then "X*N", then split at
// '|' into chunks of letters.
std::vector<std::string> megatron_chunks(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  const auto unroll = [](const std::string& text, const std::regex& pattern) {
    std::string out;
    auto begin = std::sregex_iterator(text.begin(), text.end(), pattern);
    std::size_t last = 0;
    for (auto it = begin; it != std::sregex_iterator(); ++it) {
      out += text.substr(last, static_cast<std::size_t>(it->position()) - last);
      for (int k = 0; k < std::stoi((*it)[2]); ++k) out += (*it)[1];
      last = static_cast<std::size_t>(it->position() + it->length());
    }
    return out + text.substr(last);
  };
  s = unroll(s, std::regex{R"(\(([^)]+)\)\*(\d+))"});
  s = unroll(s, std::regex{R"((.)\*(\d+))"});
  std::vector<std::string> chunks(1);
  for (const char c : s) {
    if (c == '|') {
      chunks.emplace_back();
    } else {
      chunks.back() += c;
    }
  }
  return chunks;
}

layout_chunk chunk_of(const std::string& letters) {
  layout_chunk c;
  for (const char l : letters) {
    c.blocks += l == 't' ? 1 : 0;
    c.mtp += l == 'm' ? 1 : 0;
    c.embedding = c.embedding || l == 'E';
    c.loss = c.loss || l == 'L';
  }
  return c;
}

}  // namespace

TEST_CASE("pipeline layouts read as Megatron-Core reads them", "[layout]") {
  // DeepSeek-V3 on H100 (Megatron-Bridge's recipe): 61 blocks over pp 8 x vp 4, the embedding with one block,
  // thirty chunks of two, the multi-token prediction module with the loss.
  const auto v3 = train::parse_pipeline_layout("Et|(tt|)*30mL", 8, 61, 1);
  REQUIRE(v3.stages() == 8);
  REQUIRE(v3.chunks_per_stage() == 4);
  // Chunk i is chunk i / 8 of stage i % 8: stage 0 holds chunks 0, 8, 16, 24 (1 + 2 + 2 + 2 blocks), stage 7
  // chunks 7, 15, 23 and the last (2 + 2 + 2 + 0).
  std::vector<std::int64_t> per_stage;
  for (int s = 0; s < 8; ++s) per_stage.push_back(v3.stage_blocks(s));
  CHECK(per_stage == std::vector<std::int64_t>{7, 8, 8, 8, 8, 8, 8, 6});
  CHECK(v3.chunks[0][0] == layout_chunk{1, 0, true, false});
  CHECK(v3.chunks[7][3] == layout_chunk{0, 1, false, true});

  // Megatron-Core's docstring example, "Ettt|(tt|)*29,m|L", gives the multi-token prediction module a chunk
  // of its own on the stage before the loss's; phaze builds the module with the loss and says so. With the
  // module beside the loss the example reads as the oracle reads it.
  CHECK_THROWS_WITH(train::parse_pipeline_layout("Ettt|(tt|)*29,m|L", 16, 61, 1),
                    Catch::Contains("put every m in the last chunk"));
  const std::string example = "Ettt|(tt|)*29,mL";
  const auto chunks = megatron_chunks(example);
  REQUIRE(chunks.size() == 31);
  const auto parsed = train::parse_pipeline_layout(example, 31, 61, 1);
  REQUIRE(parsed.chunks_per_stage() == 1);
  for (std::size_t i = 0; i < chunks.size(); ++i) CHECK(parsed.chunks[i][0] == chunk_of(chunks[i]));
}

TEST_CASE("pipeline layouts equal the oracle's reading on random layouts", "[layout]") {
  std::mt19937 rng{7};
  for (int trial = 0; trial < 300; ++trial) {
    // A random layout of pp x vp chunks written with repeats the oracle also reads: "E" + chunk bodies + "L".
    const int pp = 1 + static_cast<int>(rng() % 4);
    const int vp = 1 + static_cast<int>(rng() % 3);
    const int n = pp * vp;
    std::string text = "E";
    std::int64_t blocks = 0;
    for (int c = 0; c < n; ++c) {
      const int t = static_cast<int>(rng() % 4);
      blocks += t;
      switch (rng() % 3) {
        case 0:
          text += std::string(static_cast<std::size_t>(t), 't');
          break;
        case 1:
          text += t > 0 ? "t*" + std::to_string(t) : "";
          break;
        default:
          text += t > 0 ? "(t)*" + std::to_string(t) : "";
          break;
      }
      if (c + 1 < n) text += rng() % 2 ? "|" : ",|";
    }
    text += "L";
    if (blocks == 0) continue;
    INFO(text);
    const auto chunks = megatron_chunks(text);
    REQUIRE(static_cast<int>(chunks.size()) == n);
    const auto parsed = train::parse_pipeline_layout(text, pp, blocks, 0);
    REQUIRE(parsed.stages() == pp);
    REQUIRE(parsed.chunks_per_stage() == vp);
    for (int i = 0; i < n; ++i)
      CHECK(parsed.chunks[i % pp][i / pp] == chunk_of(chunks[static_cast<std::size_t>(i)]));
  }
  // Repeated groups of chunks, as recipes write them.
  const auto grouped = train::parse_pipeline_layout("E(t|t|)*3tL", 7, 7, 0);
  for (int s = 0; s < 7; ++s) CHECK(grouped.stage_blocks(s) == 1);
  // Nested repeats (beyond Megatron-Core's reader, which unrolls one level).
  CHECK(train::parse_pipeline_layout("E((t)*2|)*3tL", 4, 7, 0).stage_blocks(3) == 1);
}

TEST_CASE("pipeline layouts refuse what Megatron-Core or phaze cannot build, saying why", "[layout]") {
  const auto refused = [](const char* text, int pp, std::int64_t blocks, std::int64_t mtp, const char* why) {
    INFO(text);
    CHECK_THROWS_WITH(train::parse_pipeline_layout(text, pp, blocks, mtp), Catch::Contains(why));
  };
  refused("Et|tx|tL", 3, 3, 0, "'x' at position 4 is not a layer letter");
  refused("Et|tt|tL", 2, 4, 0, "3 model chunks, which do not divide into 2 pipeline stages");
  refused("Et|ttL", 2, 4, 0, "places 3 transformer blocks (t) but the model has 4");
  refused("tE|tL", 2, 2, 0, "the embedding E must be the first layer");
  refused("|Et|tL", 3, 2, 0, "the embedding E must be the first layer");
  refused("Et|tL|", 3, 2, 0, "the loss L must appear once, as the last layer of the last chunk");
  refused("Et|Lt", 2, 2, 0, "nothing may follow it");
  refused("Et|tm|L", 3, 2, 1, "put every m in the last chunk");
  refused("Et|tL", 2, 2, 1, "places 0 multi-token prediction modules (m) but the model has 1");
  refused("E(t|tL", 2, 2, 0, "is never closed");
  refused("Et)|tL", 2, 2, 0, "closes nothing");
  refused("Et*|tL", 2, 2, 0, "is not followed by a count");
  refused("E(t)*99999999|tL", 2, 2, 0, "a repeat count above 65536");
  refused("E(tttttttt)*9000|tL", 2, 2, 0, "expands to more than 65536 letters");
  refused("", 1, 1, 0, "the layout is empty");
}
