// libFuzzer harness for every reader of a user's file (tests/fuzz/readers.hpp). The reader is chosen by the
// environment variable PHAZE_FUZZ_READER (scripts/fuzz.sh runs each over its corpus in tests/fuzz/corpus).
// Built by scripts/fuzz.sh with clang++ -fsanitize=fuzzer,address,undefined.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include <unistd.h>

#include "readers.hpp"

namespace {
std::string reader;
std::filesystem::path scratch;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* name = std::getenv("PHAZE_FUZZ_READER");
  for (const auto r : phaze::fuzz::readers) {
    if (name != nullptr && r == name) reader = name;
  }
  if (reader.empty()) {
    std::fprintf(stderr, "set PHAZE_FUZZ_READER to one of:");
    for (const auto r : phaze::fuzz::readers)
      std::fprintf(stderr, " %.*s", static_cast<int>(r.size()), r.data());
    std::fprintf(stderr, "\n");
    std::exit(2);
  }
  scratch = std::filesystem::temp_directory_path() / ("phaze-fuzz-" + std::to_string(::getpid()));
  std::filesystem::create_directories(scratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  phaze::fuzz::read_as(reader, std::string_view{reinterpret_cast<const char*>(data), size}, scratch);
  return 0;
}
