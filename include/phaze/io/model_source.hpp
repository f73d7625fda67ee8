/// @file
/// Resolves the MODEL argument of the command line: a zoo name, or a path to a HuggingFace config.json.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "phaze/core/error.hpp"
#include "phaze/model/hf_config.hpp"
#include "phaze/model/model.hpp"
#include "phaze/model/zoo.hpp"

namespace phaze::io {

/// Reads and parses a JSON file; a missing file or malformed JSON is an input_error naming the file.
inline nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw input_error("cannot open '" + path.string() + "': check the path and its permissions");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw input_error("'" + path.string() + "' is not valid JSON: " + e.what());
  }
}

/// True when the argument names a file rather than a zoo entry (it has a path separator or a .json suffix,
/// or a file of that name exists).
inline bool looks_like_path(std::string_view arg) {
  return arg.find('/') != std::string_view::npos || arg.ends_with(".json") ||
         std::filesystem::exists(std::filesystem::path{std::string{arg}});
}

/// The model named by a command-line argument: a zoo name, or a path to a HuggingFace config.json.
inline model::model load_model(std::string_view arg) {
  if (zoo::has(arg)) return zoo::lookup(arg);
  if (!looks_like_path(arg)) return zoo::lookup(arg);  // throws, suggesting the closest zoo names
  const std::filesystem::path path{std::string{arg}};
  const auto json = read_json_file(path);
  try {
    // A file called config.json is named after its folder (HuggingFace's layout); any other after its stem.
    const auto fallback =
        path.filename() == "config.json" ? path.parent_path().filename().string() : path.stem().string();
    return model::from_hf_config(json, fallback);
  } catch (const input_error& e) {
    throw input_error("'" + path.string() + "': " + e.what());
  }
}

}  // namespace phaze::io
