/// @file
/// A short string stored inline, for names inside `constexpr` model values.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace phaze {

/// A string of at most `N - 1` characters held by value; longer input is truncated (names are labels,
/// never keys that must round-trip).
template <std::size_t N>
class fixed_string {
 public:
  constexpr fixed_string() = default;
  constexpr fixed_string(std::string_view s) {  // NOLINT: implicit on purpose, names read naturally
    size_ = utf8_prefix(s, N - 1);
    for (std::size_t i = 0; i < size_; ++i) chars_[i] = s[i];
  }
  constexpr fixed_string(const char* s) : fixed_string(std::string_view{s}) {}  // NOLINT
  /// The concatenation of `a` and `b` (truncated to the capacity).
  constexpr fixed_string(std::string_view a, std::string_view b) : fixed_string(a) {
    const std::size_t take = utf8_prefix(b, N - 1 - size_);
    for (std::size_t i = 0; i < take; ++i) chars_[size_++] = b[i];
  }

  [[nodiscard]] constexpr std::string_view view() const { return {chars_.data(), size_}; }
  [[nodiscard]] std::string str() const { return std::string{view()}; }
  /// The characters followed by a NUL, for C APIs (printf's %s): always terminated, as the storage keeps
  /// one byte past the longest name.
  [[nodiscard]] constexpr const char* c_str() const { return chars_.data(); }
  [[nodiscard]] constexpr std::size_t size() const { return size_; }
  [[nodiscard]] constexpr bool empty() const { return size_ == 0; }
  constexpr operator std::string_view() const { return view(); }  // NOLINT

  friend constexpr bool operator==(const fixed_string& a, const fixed_string& b) {
    return a.view() == b.view();
  }

 private:
  /// The length of the longest prefix of `s` of at most `most` bytes that does not end inside a UTF-8
  /// character (a cut never splits one, so a truncated name stays valid UTF-8).
  static constexpr std::size_t utf8_prefix(std::string_view s, std::size_t most) {
    if (s.size() <= most) return s.size();
    std::size_t n = most;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0U) == 0x80U) --n;
    return n;
  }

  std::array<char, N> chars_{};
  std::size_t size_ = 0;
};

}  // namespace phaze
