/// @file
/// A fixed-capacity vector usable in constant expressions, so model graphs can be `constexpr` values.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace phaze {

namespace detail {
/// Called (never at compile time) when a static_vector overflows; in a constant expression the call
/// itself is the diagnostic.
[[noreturn]] inline void static_vector_capacity_exceeded_raise_its_capacity() {
  throw std::length_error("phaze::static_vector: capacity exceeded");
}
[[noreturn]] inline void static_vector_index_out_of_range() {
  throw std::out_of_range("phaze::static_vector: index out of range");
}
}  // namespace detail

/// A vector of at most `Capacity` elements stored inline. `T` must be default-constructible.
template <class T, std::size_t Capacity>
class static_vector {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  constexpr static_vector() = default;
  constexpr static_vector(std::initializer_list<T> init) {
    for (const T& v : init) push_back(v);
  }
  /// The elements of another range (a std::vector read from a command line, say); more than `Capacity`
  /// elements is an error.
  template <class Range>
  requires(!std::is_same_v<std::remove_cvref_t<Range>, static_vector> && requires(const Range& r) {
    { *std::begin(r) } -> std::convertible_to<T>;
    std::end(r);
  }) constexpr static_vector(const Range& r) {  // NOLINT(google-explicit-constructor): a vector converts
    for (const auto& v : r) push_back(static_cast<T>(v));
  }

  /// The elements as a std::vector, for code that grows its own lists from a fixed one.
  operator std::vector<T>() const {  // NOLINT(google-explicit-constructor): converts like a vector
    return std::vector<T>(begin(), end());
  }

  constexpr void push_back(const T& v) {
    if (size_ >= Capacity) detail::static_vector_capacity_exceeded_raise_its_capacity();
    data_[size_++] = v;
  }
  constexpr void pop_back() {
    if (size_ == 0) detail::static_vector_index_out_of_range();
    --size_;
  }
  constexpr void clear() { size_ = 0; }

  [[nodiscard]] constexpr std::size_t size() const { return size_; }
  [[nodiscard]] static constexpr std::size_t capacity() { return Capacity; }
  [[nodiscard]] constexpr bool empty() const { return size_ == 0; }

  constexpr T& operator[](std::size_t i) { return data_[i]; }
  constexpr const T& operator[](std::size_t i) const { return data_[i]; }
  constexpr T& at(std::size_t i) {
    if (i >= size_) detail::static_vector_index_out_of_range();
    return data_[i];
  }
  constexpr const T& at(std::size_t i) const {
    if (i >= size_) detail::static_vector_index_out_of_range();
    return data_[i];
  }
  constexpr T& front() { return data_[0]; }
  constexpr const T& front() const { return data_[0]; }
  constexpr T& back() { return data_[size_ - 1]; }
  constexpr const T& back() const { return data_[size_ - 1]; }

  constexpr T* begin() { return data_.data(); }
  constexpr T* end() { return data_.data() + size_; }
  constexpr const T* begin() const { return data_.data(); }
  constexpr const T* end() const { return data_.data() + size_; }

  friend constexpr bool operator==(const static_vector& a, const static_vector& b) {
    if (a.size_ != b.size_) return false;
    for (std::size_t i = 0; i < a.size_; ++i)
      if (!(a.data_[i] == b.data_[i])) return false;
    return true;
  }

 private:
  std::array<T, Capacity> data_{};
  std::size_t size_ = 0;
};

}  // namespace phaze
