// Tests of phaze/io/table.hpp: column alignment and the human-readable number formats.
#include "phaze/io/table.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace phaze::literals;
using phaze::io::align;
using phaze::io::text_table;

TEST_CASE("a text table aligns columns and rules off its header", "[io][table]") {
  text_table t{{"name", "params"}, {align::left, align::right}};
  t.add_row({"gpt2", "124M"});
  t.add_row({"llama2-70b", "69.0B"});
  CHECK(t.rows() == 2);
  CHECK(t.render() ==
        "name        params\n"
        "------------------\n"
        "gpt2          124M\n"
        "llama2-70b   69.0B\n");
}

TEST_CASE("a headerless table has sections, short rows and no trailing spaces", "[io][table]") {
  text_table t;
  t.add_section("Architecture");
  t.add_row({"  layers", "32"});
  t.add_row({"  norm"});
  t.add_section("More");
  t.add_row({"  hidden size", "4096"});
  CHECK(t.render() ==
        "Architecture\n"
        "  layers       32\n"
        "  norm\n"
        "\n"
        "More\n"
        "  hidden size  4096\n");
}

TEST_CASE("counts, FLOPs and bytes print with three significant digits", "[io][table]") {
  using phaze::io::format_bytes;
  using phaze::io::format_count;
  using phaze::io::format_flops;
  CHECK(format_count(0) == "0");
  CHECK(format_count(768) == "768");
  CHECK(format_count(50257) == "50.3K");
  CHECK(format_count(6738415616) == "6.74B");
  CHECK(format_count(174.6e9) == "175B");
  CHECK(format_count(999.7e6) == "1.00B");
  CHECK(format_count(1.008e12) == "1.01T");
  CHECK(format_flops(phaze::flops{0.0}) == "0 FLOP");
  CHECK(format_flops(phaze::flops{1.2e10}) == "12.0 GFLOP");
  CHECK(format_flops(phaze::flops{3.1e23}) == "310000 EFLOP");
  CHECK(format_bytes(512_B) == "512 B");
  CHECK(format_bytes(1536_B) == "1.50 KiB");
  CHECK(format_bytes(192_MiB) == "192 MiB");
  CHECK(format_bytes(3_GiB) == "3.00 GiB");
  CHECK(phaze::io::format_grouped(6738415616) == "6,738,415,616");
  CHECK(phaze::io::format_grouped(-1234) == "-1,234");
  CHECK(phaze::io::format_grouped(999) == "999");
}
