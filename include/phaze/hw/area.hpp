/// @file
/// Die area and access energy of PHAZE's systolic accelerator template at one technology node (7 nm, the
/// TPU v4's), calibrated so the TPUv4-like reference covers the published TPU v4 die. docs/space.md derives
/// every constant; the comments below cite the source of each and say which are assumptions.
#pragma once

#include <compare>
#include <cstdint>
#include <string_view>

#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"

namespace phaze::hw {

/// An area on the die, in square millimetres (a quantity: adding it to bytes or energy does not compile).
using area = quantity<dimension{.millimetre = 2}>;

/// An amount of energy, in joules.
using energy = quantity<dimension{.joule = 1}>;

/// Named conversions for printing.
constexpr double in_pj(energy e) {
  return e.value() * 1e12;
}
constexpr double in_um2(area a) {
  return a.value() * 1e6;
}

}  // namespace phaze::hw

namespace phaze::literals {
// clang-format off
constexpr hw::area operator""_mm2(long double v) { return hw::area{static_cast<double>(v)}; }
constexpr hw::area operator""_mm2(unsigned long long v) { return hw::area{static_cast<double>(v)}; }
constexpr hw::area operator""_um2(long double v) { return hw::area{static_cast<double>(v) * 1e-6}; }
constexpr hw::area operator""_um2(unsigned long long v) { return hw::area{static_cast<double>(v) * 1e-6}; }
constexpr hw::energy operator""_pJ(long double v) { return hw::energy{static_cast<double>(v) * 1e-12}; }
constexpr hw::energy operator""_pJ(unsigned long long v) { return hw::energy{static_cast<double>(v) * 1e-12}; }
// clang-format on
}  // namespace phaze::literals

namespace phaze::hw {

/// Where bytes move, for access energy.
enum class memory_level : std::uint8_t {
  global_buffer,  ///< the on-chip GLB (SRAM)
  hbm,            ///< device memory
  link,           ///< a link to another device (ICI, NVLink, network)
};

constexpr std::string_view to_string(memory_level l) {
  switch (l) {
    case memory_level::global_buffer:
      return "global_buffer";
    case memory_level::hbm:
      return "hbm";
    case memory_level::link:
      return "link";
  }
  return "?";
}

/// Per-unit area and energy of one technology node. Block areas are those of laid-out blocks; the
/// top-level wiring between blocks is `integration_factor`; `memory_interfaces`, `chip_io` and
/// `other_fixed` do not change with the design.
struct technology {
  std::string_view name;
  // --- area ---
  area mac;                   ///< one MAC of a systolic array with its operand and partial-sum registers
  area tensor_core_overhead;  ///< per tensor core: array control, operand/result FIFOs, interconnect port
  area vector_lane;           ///< one lane of a vector core: ALUs, registers, its slice of vector memory
  area vector_core_overhead;  ///< per vector core: scalar unit, instruction memory, sequencer, DMA
  area sram_per_mib;          ///< global buffer SRAM, per MiB
  /// Die area per unit of block area: the top-level on-chip interconnect, DMA paths, clock and power grid
  /// and routing channels grow with the blocks they serve.
  double integration_factor = 1.0;
  area memory_interfaces;  ///< HBM PHYs and memory controllers
  area chip_io;            ///< inter-chip links, host interface, management
  area other_fixed;        ///< blocks the template does not vary (TPU v4's SparseCores)
  // --- energy ---
  energy mac_op;     ///< one bf16 multiply with fp32 accumulate
  energy vector_op;  ///< one fp32 fused multiply-add in a vector lane
  energy glb_byte;   ///< per byte read or written in the global buffer
  energy hbm_byte;   ///< per byte read or written in HBM
  energy link_byte;  ///< per byte sent to another device
  friend constexpr bool operator==(const technology&, const technology&) = default;
};

/// TSMC N7, the TPU v4's node, calibrated on the TPUv4-like reference (docs/space.md shows the arithmetic).
///
/// Area (mm²):
/// - mac = 1400 um², tensor_core_overhead = 2.0 mm²: a 128x128 MXU of 25 mm², read from the TPUv4i
///   floorplan (7 nm; four MXUs take about 100 mm²: Jouppi et al., ISCA 2021) as 16384 MACs x 1400 um²
///   (22.9 mm²) plus 2.0 mm² of array control. Cross-check: the TPUv1 MXU is 24% of a < 331 mm² 28 nm die
///   (Jouppi et al., ISCA 2017), 1212 um² per int8 MAC; a bf16 MAC with fp32 accumulate is several int8 MACs
///   and 7 nm logic is several times denser, so the same order.
/// - sram_per_mib = 0.45 mm²: TSMC N7's high-density 6T cell is 0.027 um² (Chang et al., ISSCC 2017), 8 Mibit
///   x 0.027 um² = 0.2265 mm² of cells per MiB; assuming a 50% array efficiency (decoders, sense
///   amplifiers, redundancy, banking) gives 0.453 mm². Bounds: the cells alone (0.23) and ISSCC 2017's
///   whole 256 Mbit test chip, 42.6 mm² / 32 MiB = 1.33 mm²/MiB with pads and test logic.
/// - vector_lane = 0.12 mm² (assumption): a TPU v4 lane is 8 sublanes x 2 fp32 ALUs, 8 x 32 32-bit
///   registers and 128 KiB of VMEM (16 MiB per core / 128 lanes, as in TPUv4i's 16 MiB VMEM + 128 MiB
///   CMEM = 144 MiB: Jouppi et al. 2021): 16 x 2500 um² (an fp32 FMA at ~1.8 bf16 MACs) + 8 Kibit of
///   registers at ~3 um²/bit (0.025) + 0.125 MiB x 0.45 (0.056) = 0.121 mm².
/// - vector_core_overhead = 3.0 mm² (assumption): scalar unit, instruction memory, sequencer, DMA engines
///   and the cross-lane (transpose/permute) unit of one core.
/// - memory_interfaces = 40 mm² (assumption): 4 HBM2 stacks (TPU v4 package: Jouppi et al., ISCA 2023)
///   x 10 mm² of PHY and controller, the order of commercial 7 nm HBM2 PHY IP.
/// - chip_io = 30 mm² (assumption): 6 ICI links of the 3D torus, PCIe Gen3 x16, management.
/// - other_fixed = 30 mm²: SparseCores, "about 5% of die area" (Jouppi et al., ISCA 2023), of 600 mm².
/// - integration_factor = 1.70 (calibrated): the TPU v4 die is < 600 mm² (Jouppi et al., ISCA 2023,
///   7 nm). The reference's blocks add up to 8 x (16384 x 0.0014 + 2.0) + 2 x (128 x 0.12 + 3.0) + 128 x
///   0.45 = 199.50 + 36.72 + 57.60 = 293.82 mm²; (600 - 100 fixed) / 293.82 = 1.7017, rounded to 1.70.
///   The reference then covers 293.82 x 1.70 + 100 = 599.5 mm².
///
/// Energy, from the 7 nm operation energies of Jouppi et al., ISCA 2021, Table 2 (their update of
/// Horowitz's 45 nm table):
/// - mac_op = 0.72 pJ: fp16 multiply 0.34 pJ (bf16's 8-bit mantissa needs less; an upper bound) + fp32 add
///   0.38 pJ.
/// - vector_op = 1.69 pJ: fp32 multiply 1.31 pJ + fp32 add 0.38 pJ.
/// - glb_byte = 0.94 pJ: 7.5 pJ per 64-bit access of a small SRAM array, / 8 bytes. A large GLB is built
///   from such banks; the wire from bank to core is not counted (an underestimate).
/// - hbm_byte = 31.25 pJ: 250 pJ per 64-bit HBM2 access (low end of the table's 250-450 pJ), / 8 bytes.
/// - link_byte = 40 pJ (assumption): 5 pJ/bit for a board-level SerDes link with its PHY logic; the analog
///   transmitter and receiver alone draw about 1 pJ/bit at 40-56 Gb/s (Razavi, "Low-power techniques
///   for wireline systems", 2021).
inline constexpr technology tsmc_n7{
    .name = "tsmc-n7 (TPU v4 calibration)",
    .mac = area{1400e-6},
    .tensor_core_overhead = area{2.0},
    .vector_lane = area{0.12},
    .vector_core_overhead = area{3.0},
    .sram_per_mib = area{0.45},
    .integration_factor = 1.70,
    .memory_interfaces = area{40.0},
    .chip_io = area{30.0},
    .other_fixed = area{30.0},
    .mac_op = energy{(0.34 + 0.38) * 1e-12},
    .vector_op = energy{(1.31 + 0.38) * 1e-12},
    .glb_byte = energy{7.5e-12 / 8.0},
    .hbm_byte = energy{250e-12 / 8.0},
    .link_byte = energy{5e-12 * 8.0},
};

/// The published die the calibration targets: TPU v4, < 600 mm² at 7 nm (Jouppi et al., ISCA 2023).
inline constexpr area tpuv4_die_bound{600.0};

/// Where the area of a design goes.
struct area_breakdown {
  area tensor_cores;       ///< MAC arrays and per-core overhead (block area)
  area vector_cores;       ///< lanes and per-core overhead (block area)
  area global_buffer;      ///< GLB SRAM (block area)
  area integration;        ///< top-level wiring: (integration_factor - 1) x the blocks above
  area memory_interfaces;  ///< HBM PHYs and controllers
  area chip_io;            ///< inter-chip links and host interface
  area other_fixed;        ///< fixed blocks (SparseCores)
  [[nodiscard]] constexpr area blocks() const { return tensor_cores + vector_cores + global_buffer; }
  [[nodiscard]] constexpr area fixed() const { return memory_interfaces + chip_io + other_fixed; }
  [[nodiscard]] constexpr area total() const { return blocks() + integration + fixed(); }
  friend constexpr bool operator==(const area_breakdown&, const area_breakdown&) = default;
};

namespace rules {
[[noreturn]] inline void area_model_needs_a_systolic_design() {
  throw input_error("the area model covers PHAZE's systolic template only, not datasheet devices");
}
}  // namespace rules

namespace detail {
struct area_breakdown_fn {
  /// The area of a systolic design. Monotone (non-decreasing) in every count, width and size.
  constexpr area_breakdown operator()(const systolic_design& s, const technology& t = tsmc_n7) const {
    area_breakdown b;
    const double macs_per_core = static_cast<double>(s.tc_width) * static_cast<double>(s.tc_depth);
    b.tensor_cores = static_cast<double>(s.num_tc) * (macs_per_core * t.mac + t.tensor_core_overhead);
    b.vector_cores = static_cast<double>(s.num_vc) *
                     (static_cast<double>(s.vc_width) * t.vector_lane + t.vector_core_overhead);
    b.global_buffer = in_mib(s.glb) * t.sram_per_mib;
    b.integration = (t.integration_factor - 1.0) * b.blocks();
    b.memory_interfaces = t.memory_interfaces;
    b.chip_io = t.chip_io;
    b.other_fixed = t.other_fixed;
    return b;
  }
  constexpr area_breakdown operator()(const device& d, const technology& t = tsmc_n7) const {
    if (d.kind != device_kind::systolic) rules::area_model_needs_a_systolic_design();
    return (*this)(d.systolic, t);
  }
};

struct area_of_fn {
  /// Die area of a systolic design (HBM capacity, clock and links do not change it).
  constexpr area operator()(const systolic_design& s, const technology& t = tsmc_n7) const {
    return area_breakdown_fn{}(s, t).total();
  }
  constexpr area operator()(const device& d, const technology& t = tsmc_n7) const {
    return area_breakdown_fn{}(d, t).total();
  }
};
}  // namespace detail

/// Where the die area of a design goes: `hw::area_breakdown_of(hw::tpuv4_like).global_buffer`.
inline constexpr detail::area_breakdown_fn area_breakdown_of{};
/// Die area of a design: `hw::area_of(hw::tpuv4_like)` is about 600 mm².
inline constexpr detail::area_of_fn area_of{};

// --- energy ----------------------------------------------------------------------------------------------

/// Energy of one MAC (bf16 x bf16 + fp32) at 7 nm.
inline constexpr energy energy_per_mac = tsmc_n7.mac_op;
/// Energy of one vector-lane operation (fp32 FMA) at 7 nm.
inline constexpr energy energy_per_vector_op = tsmc_n7.vector_op;

/// Energy per byte moved at a level of the memory hierarchy.
constexpr energy energy_per_byte(memory_level l, const technology& t = tsmc_n7) {
  switch (l) {
    case memory_level::global_buffer:
      return t.glb_byte;
    case memory_level::hbm:
      return t.hbm_byte;
    case memory_level::link:
      return t.link_byte;
  }
  return t.hbm_byte;
}

/// What a piece of work does, for its energy: operation counts and bytes moved per level.
struct activity {
  double macs = 0.0;
  double vector_ops = 0.0;
  bytes glb{0.0};
  bytes hbm{0.0};
  bytes link{0.0};
};

/// Dynamic energy of an activity: counts times per-event energies (no static/leakage power).
constexpr energy energy_of(const activity& a, const technology& t = tsmc_n7) {
  return a.macs * t.mac_op + a.vector_ops * t.vector_op + a.glb.value() * t.glb_byte +
         a.hbm.value() * t.hbm_byte + a.link.value() * t.link_byte;
}

/// Energy of `count` MACs, or of `b` bytes moved at a level.
constexpr energy mac_energy(double count, const technology& t = tsmc_n7) {
  return count * t.mac_op;
}
constexpr energy access_energy(memory_level l, bytes b, const technology& t = tsmc_n7) {
  return b.value() * energy_per_byte(l, t);
}

}  // namespace phaze::hw
