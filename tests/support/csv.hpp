// Reading the measurement CSVs of tests/data as Python's csv module writes them: a field holding a comma or a
// quote is quoted ("a, b" and "say ""x""" are read as a, b and say "x"), a trailing \r is dropped.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace phaze::testing {

/// The fields of one CSV line (a last empty field, after a trailing comma, is not one).
inline std::vector<std::string> csv_fields(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::vector<std::string> out;
  std::string f;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      f += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.push_back(f);
      f.clear();
    } else {
      f += c;
    }
  }
  if (!f.empty()) out.push_back(f);
  return out;
}

/// The rows of a CSV file by column name; the file must exist, have a header and at least one row, and every
/// row as many fields as the header.
inline std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  INFO(path);
  REQUIRE(in.good());
  std::string line;
  REQUIRE(std::getline(in, line));
  const auto header = csv_fields(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto f = csv_fields(line);
    REQUIRE(f.size() == header.size());
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < f.size(); ++i) row[header[i]] = f[i];
    rows.push_back(row);
  }
  REQUIRE_FALSE(rows.empty());
  return rows;
}

}  // namespace phaze::testing
