/// @file
/// "Did you mean ...?": the names closest to a mistyped one, and how to list them in a message.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace phaze {

/// Levenshtein distance between two names.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

/// Up to `k` of `candidates` closest to `name`: those containing it (or contained in it) first, then by
/// edit distance; ties keep the candidates' order.
template <class Names>
std::vector<std::string> closest_names(std::string_view name, const Names& candidates, std::size_t k = 3) {
  std::vector<std::pair<std::size_t, std::string_view>> scored;  // (distance, candidate), stable-sorted
  for (const auto& candidate : candidates) {
    const std::string_view c{candidate};
    const bool contains =
        !name.empty() && (c.find(name) != std::string_view::npos || name.find(c) != std::string_view::npos);
    scored.emplace_back(contains ? 0 : edit_distance(name, c), c);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < std::min(k, scored.size()); ++i) out.emplace_back(scored[i].second);
  return out;
}

/// "'a', 'b' or 'c'".
inline std::string quoted_list(const std::vector<std::string>& names, std::string_view last_joint = " or ") {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? std::string{last_joint} : std::string{", "};
    out += "'" + names[i] + "'";
  }
  return out;
}

}  // namespace phaze
