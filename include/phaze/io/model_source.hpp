/// @file
/// Resolves the MODEL argument of the command line: a zoo name, or a path to a HuggingFace config.json.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "phaze/core/error.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/model/hf_config.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/zoo.hpp"

namespace phaze::io {

/// True when the argument names a file rather than a zoo entry (it has a path separator or a .json suffix,
/// or a file of that name exists). A name the file system cannot even look up (too long, say) names no
/// file.
inline bool looks_like_path(std::string_view arg) {
  std::error_code ignored;
  return arg.find('/') != std::string_view::npos || arg.ends_with(".json") ||
         std::filesystem::exists(std::filesystem::path{std::string{arg}}, ignored);
}

/// The model named by a command-line argument: a zoo name, or a path to a HuggingFace config.json.
inline model::model load_model(std::string_view arg) {
  if (zoo::has(arg)) return zoo::lookup(arg);
  if (!looks_like_path(arg)) return zoo::lookup(arg);  // throws, suggesting the closest zoo names
  const std::filesystem::path path{std::string{arg}};
  const auto json = read_json_file(path, file_rules::model_config);
  try {
    // A file called config.json is named after its folder (HuggingFace's layout); any other after its stem.
    const auto fallback =
        path.filename() == "config.json" ? path.parent_path().filename().string() : path.stem().string();
    return model::from_hf_config(json, fallback);
  } catch (const input_error& e) {
    throw input_error("'" + path.string() + "': " + e.what());
  } catch (const nlohmann::json::exception& e) {  // a guard: the reader checks types before reading values
    throw input_error("'" + path.string() + "': " + e.what());
  }
}

}  // namespace phaze::io
