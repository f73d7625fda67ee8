// Running the `phaze` program from end-to-end tests: its exit status, stdout and stderr, and its JSON output.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

namespace phaze::e2e {

namespace fs = std::filesystem;

struct run_result {
  int status = -1;  ///< exit code, or -1 when the program did not exit normally
  std::string out;
  std::string err;
};

/// A fresh path in the temporary directory (tests may run in parallel processes).
inline fs::path temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  return fs::temp_directory_path() /
         ("phaze_e2e_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + stem);
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline fs::path write_temp(const std::string& stem, const std::string& text) {
  const fs::path path = temp_path(stem);
  std::ofstream(path) << text;
  return path;
}

/// Runs `phaze ARGS` through the shell (ARGS is passed as written) and captures what it prints.
inline run_result run_phaze(const std::string& args) {
  const fs::path err_path = temp_path("stderr.txt");
  const std::string command =
      std::string{"'"} + PHAZE_EXECUTABLE + "' " + args + " 2>'" + err_path.string() + "'";
  run_result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err_path);
  fs::remove(err_path);
  return r;
}

/// Runs a command that must succeed with `--format json` and returns the one JSON value it printed
/// (parse() throws if stdout holds anything besides one JSON value).
inline nlohmann::json run_json(const std::string& args) {
  const auto r = run_phaze(args + " --format json");
  INFO("phaze " << args << "\nstderr: " << r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace phaze::e2e
