/// @file
/// results.jsonl read back for a resume: every line a record of the same search, checked against its design
/// and plan, a design at most once per scheduler; only a last line cut before its newline counts as torn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "phaze/core/error.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/io/search_json.hpp"
#include "phaze/search/evaluate.hpp"

namespace phaze::io {

/// Reads results.jsonl of an earlier run of the same spec into records, and keeps the lines read in `lines`.
/// Every record is checked (search::verify_record: a plan of the first pass is timed again) and a design may
/// appear once per scheduler; a line that is not a valid record is an input_error naming it, except a last
/// line without its newline, which a kill tore and which is dropped (its design is evaluated again).
inline std::vector<search::design_result> read_results_file(const std::filesystem::path& file,
                                                            const search::spec& s, const search::options& opt,
                                                            std::vector<std::string>& lines) {
  // 2^30 bytes: about a million records, far more than any space phaze enumerates (docs/limits.md).
  const bounded_text read = read_at_most(file, std::uintmax_t{1} << 30U);
  if (read.status == read_status::too_large)
    throw input_error(file.string() + " is larger than 1 GiB; it is not the results of a phaze search");
  if (read.status != read_status::ok)
    throw input_error("cannot read " + file.string() + "; delete the folder to start afresh");
  const std::string& text = read.text;
  std::vector<search::design_result> out;
  std::map<std::pair<std::uint64_t, std::string>, std::size_t> seen;  // (design, scheduler) -> line
  const hw::space::design_table designs = s.space.designs();
  std::size_t number = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t newline = text.find('\n', begin);
    const bool torn = newline == std::string::npos;
    const std::string line = text.substr(begin, torn ? std::string::npos : newline - begin);
    begin = torn ? text.size() : newline + 1;
    ++number;
    auto fail = [&](const std::string& why) -> void {
      throw input_error(
          fmt::format("{} line {}: {}; delete the folder to start afresh (or remove that line to "
                      "evaluate its design again)",
                      file.string(), number, why));
    };
    if (line.empty()) continue;
    const bool nested = json_nesting_depth(line) > 8;
    nlohmann::json j = nested ? nlohmann::json(nlohmann::json::value_t::discarded)
                              : nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      if (torn) break;  // the last line, cut by a kill before its newline
      fail("not a JSON record");
    }
    search::design_result r;
    try {
      if (!j.is_object()) throw input_error("not a JSON object");
      r = result_from_json(j, s, designs);
      search::verify_record(s, r, opt);
    } catch (const input_error& e) {
      if (torn) break;
      fail(e.what());
    }
    const auto [where, fresh] = seen.emplace(std::pair{r.index, r.scheduler}, number);
    if (!fresh)
      fail(
          fmt::format("design {} ({} schedules) is already on line {}", r.index, r.scheduler, where->second));
    out.push_back(std::move(r));
    lines.push_back(line);
  }
  return out;
}

}  // namespace phaze::io
