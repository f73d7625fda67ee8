/// @file
/// The schema name and version every JSON document phaze writes starts with, so a program reading one knows
/// what it holds and which revision of its fields (docs/cli.md lists each document's fields and their units).
#pragma once

#include <string_view>

#include <string>

#include <nlohmann/json.hpp>

namespace phaze::io {

/// A JSON document's kind and the revision of its fields: `"schema": name, "version": version`. A version
/// goes up when a field is removed or changes meaning; added fields keep it.
struct schema {
  std::string_view name;
  int version = 1;
};

/// The documents, one per command's `--format json` and per file written.
namespace schemas {
inline constexpr schema models{"phaze.models", 1};                          ///< phaze models
inline constexpr schema model_description{"phaze.model-description", 1};    ///< phaze describe
inline constexpr schema devices{"phaze.devices", 1};                        ///< phaze devices
inline constexpr schema device_description{"phaze.device-description", 1};  ///< phaze devices DEV
inline constexpr schema device{"phaze.device", 1};          ///< a device file (best-device.json, definition)
inline constexpr schema schedule{"phaze.schedule", 2};      ///< phaze schedule
inline constexpr schema estimate{"phaze.estimate", 1};      ///< phaze estimate
inline constexpr schema plan{"phaze.plan", 1};              ///< phaze plan
inline constexpr schema table_plan{"phaze.table-plan", 1};  ///< phaze plan --layer-table
inline constexpr schema megatron_launch{"phaze.megatron-launch", 1};  ///< phaze plan --emit megatron
inline constexpr schema search_best{"phaze.search-best", 1};      ///< best.json, phaze search --format json
inline constexpr schema search_run{"phaze.search-run", 1};        ///< spec.json of a search folder
inline constexpr schema search_result{"phaze.search-result", 1};  ///< a line of results.jsonl
inline constexpr schema cluster_description{"phaze.cluster-description", 1};  ///< phaze cluster FILE
inline constexpr schema cluster_front{"phaze.cluster-front", 1};  ///< front.json of search --cluster-space
}  // namespace schemas

/// `body` with `"schema"` and `"version"` put first.
inline nlohmann::ordered_json with_schema(const schema& s, const nlohmann::ordered_json& body) {
  nlohmann::ordered_json out;
  out["schema"] = std::string{s.name};
  out["version"] = s.version;
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "schema" && it.key() != "version") out[it.key()] = it.value();
  }
  return out;
}

/// The text of a JSON document phaze writes (indented by `indent` spaces; -1: one line). A string that is not
/// valid UTF-8 (a file name in another encoding, say) has its bad bytes replaced by U+FFFD instead of making
/// the output fail.
inline std::string dump_json(const nlohmann::ordered_json& value, int indent = 2) {
  return value.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace phaze::io
