// Replays every input kept in tests/fuzz/regressions/READER/ through the reader the fuzzer ran it on
// (tests/fuzz/readers.hpp): inputs that once crashed phaze, hung it, or escaped as an exception other than
// an input error. Each must now be read or refused with an input_error.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../fuzz/readers.hpp"

TEST_CASE("every kept fuzzer input is read or refused with an input error", "[io][fuzz]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::path{PHAZE_SOURCE_DIR} / "tests" / "fuzz" / "regressions";
  const fs::path scratch =
      fs::temp_directory_path() / ("phaze-fuzz-regressions-" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  int replayed = 0;
  for (const auto reader : phaze::fuzz::readers) {
    const fs::path dir = root / std::string{reader};
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      std::ifstream in(entry.path(), std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      INFO(reader << ": " << entry.path().filename().string());
      CHECK_NOTHROW(phaze::fuzz::read_as(reader, bytes, scratch));
      ++replayed;
    }
  }
  fs::remove_all(scratch);
  CHECK(replayed >= 40);
}
