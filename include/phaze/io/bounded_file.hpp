/// @file
/// Reading a user's file without trusting it: the text read in blocks and refused beyond a size limit, the
/// nesting of a JSON text checked before a recursive parser sees it, and a JSON file read with both bounds.
/// Every reader of a file the user names goes through here, so the limits and their messages are the same.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "phaze/core/error.hpp"

namespace phaze::io {

/// What reading a file at most some bytes long gave.
enum class read_status : std::uint8_t { ok, directory, cannot_open, too_large };

struct bounded_text {
  read_status status = read_status::ok;
  std::string text;  ///< the whole file when ok
};

/// The text of the file at `path`, read in blocks; stops as soon as it holds more than `max_bytes` (a
/// device such as /dev/zero cannot make it read without end).
inline bounded_text read_at_most(const std::filesystem::path& path, std::uintmax_t max_bytes) {
  bounded_text out;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    out.status = read_status::directory;
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.status = read_status::cannot_open;
    return out;
  }
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    out.text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (out.text.size() > max_bytes) {
      out.status = read_status::too_large;
      out.text.clear();
      return out;
    }
  }
  return out;
}

/// The deepest nesting of arrays and objects in a JSON `text` (outside strings): checked before parsing, so
/// that a hostile file cannot exhaust the parser's stack.
inline int json_nesting_depth(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\') {
        ++i;
      } else if (ch == '"') {
        in_string = false;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return deepest;
}

/// The limits of one kind of JSON file and how its messages name it.
struct json_file_rules {
  std::string_view name;  ///< "cluster": messages call the file "cluster file '<path>'"
  std::uintmax_t max_bytes = 0;
  std::string_view too_large_fix;  ///< follows "is larger than N MiB": ", the most phaze reads; ..."
  int max_nesting = 0;
  int nesting_needed = 0;  ///< how deep a valid file of this kind nests
};

/// The limits of the JSON files a user names, other than cluster files (cluster_file_limits) and cluster
/// spaces: a HuggingFace config.json, a device file, a search spec and a layer table (docs/limits.md). The
/// largest real config.json files are a few kB; 16 MiB leaves room for every legitimate file and keeps a
/// hostile one from holding the memory.
namespace file_rules {
inline constexpr json_file_rules model_config{
    "model config", 16U << 20U, ", the most phaze reads; give a HuggingFace config.json", 32, 4};
inline constexpr json_file_rules device{"device", 16U << 20U,
                                        ", the most phaze reads; give a device JSON file", 32, 3};
inline constexpr json_file_rules search_spec{
    "search spec", 16U << 20U, ", the most phaze reads; give a search spec (docs/search.md)", 32, 3};
/// A search folder's spec.json, which --resume compares with the search it continues.
inline constexpr json_file_rules search_run{"search run", 16U << 20U,
                                            "; it is not a phaze search's spec.json", 8, 4};
inline constexpr json_file_rules layer_table{
    "layer table", 64U << 20U, ", the most phaze reads; give a layer table (docs/layer-table.md)", 32, 4};
}  // namespace file_rules

namespace detail::bounded_file {
[[noreturn]] inline void too_large(const std::string& where, const json_file_rules& rules) {
  throw input_error(where + " is larger than " + std::to_string(rules.max_bytes >> 20U) + " MiB" +
                    std::string{rules.too_large_fix});
}
}  // namespace detail::bounded_file

/// The text of a JSON file of the kind `rules` describe, checked against its size and nesting (before the
/// parser, which recurses, sees it) and parsed; input_error naming `where` otherwise.
inline nlohmann::json parse_json_within(std::string_view text, const json_file_rules& rules,
                                        const std::string& where) {
  if (text.size() > rules.max_bytes) detail::bounded_file::too_large(where, rules);
  if (json_nesting_depth(text) > rules.max_nesting) {
    throw input_error(where + " nests arrays or objects more than " + std::to_string(rules.max_nesting) +
                      " deep; a " + std::string{rules.name} + " file needs at most " +
                      std::to_string(rules.nesting_needed));
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw input_error(where + " is not valid JSON: " + e.what());
  }
}

/// The JSON file at `path`, read and parsed within `rules`; input_error naming the file otherwise.
inline nlohmann::json read_json_file(const std::filesystem::path& path, const json_file_rules& rules) {
  const std::string name{rules.name};
  const std::string where = name + " file '" + path.string() + "'";
  const bounded_text read = read_at_most(path, rules.max_bytes);
  switch (read.status) {
    case read_status::directory:
      throw input_error(where + " is a directory; give the path of a " + name + " JSON file");
    case read_status::cannot_open:
      throw input_error("cannot open " + where + ": check the path and its permissions");
    case read_status::too_large:
      detail::bounded_file::too_large(where, rules);
    case read_status::ok:
      break;
  }
  return parse_json_within(read.text, rules, where);
}

}  // namespace phaze::io
