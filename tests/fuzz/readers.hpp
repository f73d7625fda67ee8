// Every reader of a file a user names, called on arbitrary bytes: the libFuzzer harness (readers_fuzz.cpp)
// and the regression test of its crash reproducers (tests/io/fuzz_regressions_test.cpp) share it, so that a
// reproducer replays exactly what the fuzzer ran.
#pragma once

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "phaze/core/error.hpp"
#include "phaze/io/calibration_json.hpp"
#include "phaze/io/cluster_json.hpp"
#include "phaze/io/cluster_space_json.hpp"
#include "phaze/io/device_source.hpp"
#include "phaze/io/layer_table_json.hpp"
#include "phaze/io/model_source.hpp"
#include "phaze/io/nccl_tests.hpp"
#include "phaze/io/results_file.hpp"
#include "phaze/io/search_json.hpp"
#include "phaze/io/training_log.hpp"
#include "phaze/search/engine.hpp"

namespace phaze::fuzz {

/// The readers, by the name of their corpus folder (tests/fuzz/corpus/NAME).
inline constexpr std::array<std::string_view, 11> readers{
    "model_config", "device",  "search_spec", "layer_table",      "cluster",     "cluster_space",
    "nccl_tests",   "results", "calibration", "calibration_runs", "training_log"};

/// The search a results.jsonl is read against: gpt2 on 8 devices over a space of two designs (one with HBM
/// too small), so that checking a record (timing its plan again) stays cheap.
inline const search::spec& results_spec() {
  static const search::spec s = [] {
    const std::string text = R"({"model": "gpt2", "devices": 8, "global_batch": 16,
      "space": {"tensor_cores": 4, "tc_width": 64, "tc_depth": 64, "vector_cores": 2, "vc_width": 64,
                "global_buffer_mib": 16, "hbm_gib": {"one_of": [0.25, 16]}},
      "knobs": {"microbatches": [1, 2], "recompute": ["none", "full"], "tensor_parallel": [1, 2]}})";
    return io::spec_from_json(nlohmann::json::parse(text));
  }();
  return s;
}

/// Reads `bytes` as a file of kind `reader` (one of `readers`), written first to `scratch` (named as such a
/// file would be). Returns normally when the reader accepts the bytes or rejects them with an input_error;
/// any other exception, a crash or a hang is a bug.
inline void read_as(std::string_view reader, std::string_view bytes,
                    const std::filesystem::path& scratch_dir) {
  const auto file = scratch_dir / (reader == "nccl_tests"         ? "all_reduce.txt"
                                   : reader == "results"          ? "results.jsonl"
                                   : reader == "calibration_runs" ? "runs.jsonl"
                                   : reader == "training_log"     ? "train.log"
                                                                  : "input.json");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  try {
    if (reader == "model_config") {
      (void)io::load_model(file.string());
    } else if (reader == "device") {
      (void)io::read_device_file(file);
    } else if (reader == "search_spec") {
      (void)io::read_search_spec(file, {}, "gpt2");
    } else if (reader == "layer_table") {
      (void)io::read_layer_table(file.string());
    } else if (reader == "cluster") {
      (void)io::read_cluster_file(file);
    } else if (reader == "cluster_space") {
      (void)io::read_cluster_space_file(file);
    } else if (reader == "nccl_tests") {
      const auto run = io::nccl::parse(bytes, file.string(), std::nullopt);
      (void)io::nccl::fit_link(run);
    } else if (reader == "results") {
      std::vector<std::string> lines;
      (void)io::read_results_file(file, results_spec(), search::options{}, lines);
    } else if (reader == "calibration") {
      (void)io::read_calibration(file);
    } else if (reader == "calibration_runs") {
      // As phaze calibrate reads a runs file: line by line, each bounded, a pasted log read for its step
      // time (the plan's arguments go to the command line's own parser, not fuzzed here).
      std::size_t start = 0;
      while (start < bytes.size()) {
        std::size_t end = bytes.find('\n', start);
        if (end == std::string_view::npos) end = bytes.size();
        const std::string line{bytes.substr(start, end - start)};
        start = end + 1;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const io::calibration_measurement r = io::calibration_measurement_from_json(
            io::parse_json_within(line, io::file_rules::calibration_run, "line"), "line");
        if (!r.step_s) (void)io::logged_step_seconds(r.log, 4096.0, "line");
      }
    } else if (reader == "training_log") {
      (void)io::logged_step_seconds(bytes, 4096.0, "log");
    }
  } catch (const input_error&) {
  } catch (const infeasible_error&) {
  }
}

}  // namespace phaze::fuzz
