/// @file
/// Strong physical quantities (bytes, seconds, FLOPs and their rates) with compile-time dimension checking.
#pragma once

#include <compare>
#include <cstdint>

namespace phaze {

/// The dimension of a quantity: exponents of the three base units phaze measures in.
/// A structural type, so it can be a template argument.
struct dimension {
  int byte = 0;        ///< exponent of bytes
  int second = 0;      ///< exponent of seconds
  int flop = 0;        ///< exponent of floating-point operations
  int millimetre = 0;  ///< exponent of millimetres (die area is mm^2)
  int joule = 0;       ///< exponent of joules (energy)

  friend constexpr bool operator==(dimension, dimension) = default;
  friend constexpr dimension operator+(dimension a, dimension b) {
    return {a.byte + b.byte, a.second + b.second, a.flop + b.flop, a.millimetre + b.millimetre,
            a.joule + b.joule};
  }
  friend constexpr dimension operator-(dimension a, dimension b) {
    return {a.byte - b.byte, a.second - b.second, a.flop - b.flop, a.millimetre - b.millimetre,
            a.joule - b.joule};
  }
};

inline constexpr dimension dimensionless{};

/// A value of dimension `D`, stored as a double in the base unit (bytes, seconds, FLOPs).
/// Adding or comparing quantities of different dimensions does not compile; multiplying and dividing
/// combine dimensions, so `bytes / bytes_per_second` is `seconds`.
template <dimension D>
class quantity {
 public:
  static constexpr dimension dim = D;

  constexpr quantity() = default;
  /// Explicit: a raw number becomes a quantity only where the caller says so.
  constexpr explicit quantity(double value_in_base_unit) : value_(value_in_base_unit) {}

  /// The value in the base unit (bytes, seconds, FLOPs, or their ratios).
  [[nodiscard]] constexpr double value() const { return value_; }

  constexpr quantity& operator+=(quantity other) {
    value_ += other.value_;
    return *this;
  }
  constexpr quantity& operator-=(quantity other) {
    value_ -= other.value_;
    return *this;
  }
  constexpr quantity& operator*=(double factor) {
    value_ *= factor;
    return *this;
  }
  constexpr quantity& operator/=(double divisor) {
    value_ /= divisor;
    return *this;
  }

  friend constexpr quantity operator+(quantity a, quantity b) { return quantity{a.value_ + b.value_}; }
  friend constexpr quantity operator-(quantity a, quantity b) { return quantity{a.value_ - b.value_}; }
  friend constexpr quantity operator-(quantity a) { return quantity{-a.value_}; }
  friend constexpr quantity operator*(quantity a, double k) { return quantity{a.value_ * k}; }
  friend constexpr quantity operator*(double k, quantity a) { return quantity{k * a.value_}; }
  friend constexpr quantity operator/(quantity a, double k) { return quantity{a.value_ / k}; }
  friend constexpr bool operator==(quantity a, quantity b) = default;
  friend constexpr auto operator<=>(quantity a, quantity b) = default;

 private:
  double value_ = 0.0;
};

/// Product of two quantities: dimensions add. A dimensionless result is a plain double.
template <dimension A, dimension B>
constexpr auto operator*(quantity<A> a, quantity<B> b) {
  if constexpr (A + B == dimensionless) {
    return a.value() * b.value();
  } else {
    return quantity<A + B>{a.value() * b.value()};
  }
}

/// Ratio of two quantities: dimensions subtract. A dimensionless result is a plain double.
template <dimension A, dimension B>
constexpr auto operator/(quantity<A> a, quantity<B> b) {
  if constexpr (A - B == dimensionless) {
    return a.value() / b.value();
  } else {
    return quantity<A - B>{a.value() / b.value()};
  }
}

/// Inverse of a quantity: `1.0 / 2_GHz` is a cycle time in seconds.
template <dimension A>
constexpr quantity<dimensionless - A> operator/(double k, quantity<A> a) {
  return quantity<dimensionless - A>{k / a.value()};
}

using bytes = quantity<dimension{1, 0, 0}>;
using seconds = quantity<dimension{0, 1, 0}>;
using flops = quantity<dimension{0, 0, 1}>;
using bytes_per_second = quantity<dimension{1, -1, 0}>;
using flops_per_second = quantity<dimension{0, -1, 1}>;
using hertz = quantity<dimension{0, -1, 0}>;
/// Arithmetic intensity (FLOPs per byte moved), as in the roofline model.
using flops_per_byte = quantity<dimension{-1, 0, 1}>;

/// Named conversions out of the base unit, for printing.
inline constexpr double in_kib(bytes b) {
  return b.value() / 1024.0;
}
inline constexpr double in_mib(bytes b) {
  return b.value() / (1024.0 * 1024.0);
}
inline constexpr double in_gib(bytes b) {
  return b.value() / (1024.0 * 1024.0 * 1024.0);
}
inline constexpr double in_gb(bytes b) {
  return b.value() / 1e9;
}
inline constexpr double in_ms(seconds s) {
  return s.value() * 1e3;
}
inline constexpr double in_us(seconds s) {
  return s.value() * 1e6;
}
inline constexpr double in_gflops(flops f) {
  return f.value() / 1e9;
}
inline constexpr double in_tflops(flops f) {
  return f.value() / 1e12;
}
inline constexpr double in_tflop_per_s(flops_per_second f) {
  return f.value() / 1e12;
}
inline constexpr double in_gb_per_s(bytes_per_second b) {
  return b.value() / 1e9;
}

/// Literals. Binary prefixes for memory sizes (KiB, MiB, GiB, TiB), decimal ones for datasheet capacities
/// and bandwidths (KB, MB, GB, TB; GB/s, TB/s; Gb/s for network links quoted in bits).
namespace literals {
// clang-format off
constexpr bytes operator""_B(unsigned long long v) { return bytes{static_cast<double>(v)}; }
constexpr bytes operator""_KiB(unsigned long long v) { return bytes{static_cast<double>(v) * 1024.0}; }
constexpr bytes operator""_MiB(unsigned long long v) { return bytes{static_cast<double>(v) * 1048576.0}; }
constexpr bytes operator""_GiB(unsigned long long v) { return bytes{static_cast<double>(v) * 1073741824.0}; }
constexpr bytes operator""_TiB(unsigned long long v) { return bytes{static_cast<double>(v) * 1099511627776.0}; }
constexpr bytes operator""_KiB(long double v) { return bytes{static_cast<double>(v) * 1024.0}; }
constexpr bytes operator""_MiB(long double v) { return bytes{static_cast<double>(v) * 1048576.0}; }
constexpr bytes operator""_GiB(long double v) { return bytes{static_cast<double>(v) * 1073741824.0}; }
constexpr bytes operator""_KB(unsigned long long v) { return bytes{static_cast<double>(v) * 1e3}; }
constexpr bytes operator""_MB(unsigned long long v) { return bytes{static_cast<double>(v) * 1e6}; }
constexpr bytes operator""_GB(unsigned long long v) { return bytes{static_cast<double>(v) * 1e9}; }
constexpr bytes operator""_TB(unsigned long long v) { return bytes{static_cast<double>(v) * 1e12}; }
constexpr bytes operator""_GB(long double v) { return bytes{static_cast<double>(v) * 1e9}; }
constexpr bytes operator""_TB(long double v) { return bytes{static_cast<double>(v) * 1e12}; }

constexpr seconds operator""_s(unsigned long long v) { return seconds{static_cast<double>(v)}; }
constexpr seconds operator""_s(long double v) { return seconds{static_cast<double>(v)}; }
constexpr seconds operator""_ms(unsigned long long v) { return seconds{static_cast<double>(v) * 1e-3}; }
constexpr seconds operator""_ms(long double v) { return seconds{static_cast<double>(v) * 1e-3}; }
constexpr seconds operator""_us(unsigned long long v) { return seconds{static_cast<double>(v) * 1e-6}; }
constexpr seconds operator""_us(long double v) { return seconds{static_cast<double>(v) * 1e-6}; }
constexpr seconds operator""_ns(unsigned long long v) { return seconds{static_cast<double>(v) * 1e-9}; }
constexpr seconds operator""_ns(long double v) { return seconds{static_cast<double>(v) * 1e-9}; }

/// FLOP counts.
constexpr flops operator""_FLOP(unsigned long long v) { return flops{static_cast<double>(v)}; }
constexpr flops operator""_GFLOP(unsigned long long v) { return flops{static_cast<double>(v) * 1e9}; }
constexpr flops operator""_TFLOP(unsigned long long v) { return flops{static_cast<double>(v) * 1e12}; }
constexpr flops operator""_PFLOP(unsigned long long v) { return flops{static_cast<double>(v) * 1e15}; }
constexpr flops operator""_GFLOP(long double v) { return flops{static_cast<double>(v) * 1e9}; }
constexpr flops operator""_TFLOP(long double v) { return flops{static_cast<double>(v) * 1e12}; }
/// FLOP rates, written the way datasheets do ("312 TFLOPs" meaning TFLOP/s).
constexpr flops_per_second operator""_GFLOPs(unsigned long long v) { return flops_per_second{static_cast<double>(v) * 1e9}; }
constexpr flops_per_second operator""_TFLOPs(unsigned long long v) { return flops_per_second{static_cast<double>(v) * 1e12}; }
constexpr flops_per_second operator""_PFLOPs(unsigned long long v) { return flops_per_second{static_cast<double>(v) * 1e15}; }
constexpr flops_per_second operator""_TFLOPs(long double v) { return flops_per_second{static_cast<double>(v) * 1e12}; }

/// Bandwidths: bytes per second (decimal, as datasheets quote them) and bits per second for networks.
constexpr bytes_per_second operator""_GBps(unsigned long long v) { return bytes_per_second{static_cast<double>(v) * 1e9}; }
constexpr bytes_per_second operator""_GBps(long double v) { return bytes_per_second{static_cast<double>(v) * 1e9}; }
constexpr bytes_per_second operator""_TBps(unsigned long long v) { return bytes_per_second{static_cast<double>(v) * 1e12}; }
constexpr bytes_per_second operator""_TBps(long double v) { return bytes_per_second{static_cast<double>(v) * 1e12}; }
constexpr bytes_per_second operator""_Gbps(unsigned long long v) { return bytes_per_second{static_cast<double>(v) * 1e9 / 8.0}; }
constexpr bytes_per_second operator""_Gbps(long double v) { return bytes_per_second{static_cast<double>(v) * 1e9 / 8.0}; }

constexpr hertz operator""_MHz(unsigned long long v) { return hertz{static_cast<double>(v) * 1e6}; }
constexpr hertz operator""_GHz(unsigned long long v) { return hertz{static_cast<double>(v) * 1e9}; }
constexpr hertz operator""_GHz(long double v) { return hertz{static_cast<double>(v) * 1e9}; }
// clang-format on
}  // namespace literals

}  // namespace phaze
