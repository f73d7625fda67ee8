/// @file
/// The node each device preset comes in (hw/presets.hpp): devices per node, the fast domain inside it and its
/// network interfaces, from the vendors' system datasheets. `--device NAME --devices N` builds a cluster of N
/// such devices in such nodes.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "phaze/cluster/cluster.hpp"
#include "phaze/cluster/links.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/hw/presets.hpp"

namespace phaze::cluster {

namespace detail {
using namespace phaze::literals;

// TPU v4 inter-chip interconnect per chip: the published all-reduce bandwidth of a pod, 1.1 PB/s over 4096
// chips (Google Cloud, "TPU v4" system architecture page) = 268.6 GB/s per chip. The ICI spans the pod, so
// the "network" between hosts is the same ICI: a host's 4 chips each reach it at that rate.
inline constexpr bytes_per_second tpuv4_ici = bytes_per_second{1.1e15 / 4096.0};

// Collective latency per step (alpha of the alpha-beta model): a few microseconds over NVLink/ICI and about
// ten over InfiniBand/Ethernet, the order of small-message latencies nccl-tests reports. An assumption until
// measured; it matters only for small messages.
inline constexpr seconds fast_link_latency = 5_us;
inline constexpr seconds network_latency = 10_us;

/// A node of `devices` devices with `nvlink` per device per direction inside and `nics` interfaces of `nic`
/// bandwidth each.
constexpr node_spec node(int devices, bytes_per_second nvlink, int nics, bytes_per_second nic,
                         seconds nic_latency = network_latency) {
  return {devices, {nvlink, fast_link_latency}, nics, {nic, nic_latency}};
}
}  // namespace detail

/// A device preset's node and where its numbers come from.
struct node_preset {
  std::string_view device;  ///< the device preset's name
  std::string_view source;
  node_spec node;
};

/// The node of every device preset. NVLink and network bandwidths are per direction; DGX systems give every
/// GPU its own InfiniBand interface (the rails), so their nodes have as many interfaces as GPUs.
inline constexpr std::array node_presets{
    node_preset{"tpuv4-like",
                "TPU v4 host: 4 chips; ICI 1.1 PB/s pod all-reduce / 4096 chips, across hosts too",
                detail::node(4, detail::tpuv4_ici, 4, detail::tpuv4_ici, detail::fast_link_latency)},
    node_preset{"tpuv4", "TPU v4 host: 4 chips; ICI 1.1 PB/s pod all-reduce / 4096 chips, across hosts too",
                detail::node(4, detail::tpuv4_ici, 4, detail::tpuv4_ici, detail::fast_link_latency)},
    node_preset{"a100-40gb", "DGX A100: 8 GPUs, NVLink3 300 GB/s per direction, 8 x 200 Gb/s HDR InfiniBand",
                detail::node(8, bytes_per_second{300e9}, 8, bytes_per_second{25e9})},
    node_preset{"a100-80gb",
                "DGX A100 / Selene: 8 GPUs, NVLink3 300 GB/s per direction, 8 x 200 Gb/s HDR InfiniBand "
                "(Korthikanti et al. 2022)",
                detail::node(8, bytes_per_second{300e9}, 8, bytes_per_second{25e9})},
    node_preset{"h100-sxm", "DGX H100: 8 GPUs, NVLink4 450 GB/s per direction, 8 x 400 Gb/s NDR InfiniBand",
                detail::node(8, bytes_per_second{450e9}, 8, bytes_per_second{50e9})},
    node_preset{"h100-pcie", "8 GPUs over PCIe Gen5 (64 GB/s per direction); 400 Gb/s per GPU assumed",
                detail::node(8, bytes_per_second{64e9}, 8, bytes_per_second{50e9})},
    node_preset{
        "h100-nvl",
        "8 H100 NVL over PCIe Gen5 (64 GB/s per direction; the NVLink bridges join only pairs, which the "
        "node model does not single out); 400 Gb/s per GPU assumed",
        detail::node(8, bytes_per_second{64e9}, 8, bytes_per_second{50e9})},
    node_preset{"b200", "DGX B200: 8 GPUs, NVLink5 900 GB/s per direction, 8 x 400 Gb/s ConnectX-7",
                detail::node(8, bytes_per_second{900e9}, 8, bytes_per_second{50e9})},
    node_preset{"gb200",
                "GB200 NVL72: one NVLink5 domain of 72 GPUs, 900 GB/s per direction each; 400 Gb/s network "
                "interface per GPU assumed",
                detail::node(72, bytes_per_second{900e9}, 72, bytes_per_second{50e9})},
    node_preset{"b300", "DGX B300: 8 GPUs, NVLink5 900 GB/s per direction, 8 x 800 Gb/s ConnectX-8",
                detail::node(8, bytes_per_second{900e9}, 8, bytes_per_second{100e9})},
    node_preset{"gb300",
                "GB300 NVL72: one NVLink5 domain of 72 GPUs, 900 GB/s per direction each; an 800 Gb/s "
                "ConnectX-8 per GPU",
                detail::node(72, bytes_per_second{900e9}, 72, bytes_per_second{100e9})},
    node_preset{"h200", "HGX H200: 8 GPUs, NVLink4 450 GB/s per direction, 8 x 400 Gb/s NDR",
                detail::node(8, bytes_per_second{450e9}, 8, bytes_per_second{50e9})},
    node_preset{
        "v100-16gb",
        "AWS p3.8xlarge (AMP, Li et al. 2022): 4 V100 with NVLink2 150 GB/s per direction, one 10 Gb/s "
        "network interface per node",
        detail::node(4, bytes_per_second{150e9}, 1, bytes_per_second{1.25e9})},
    node_preset{"t4",
                "AWS g4dn.12xlarge (AMP, Li et al. 2022): 4 T4 over PCIe, 50 Gb/s within the node and one 50 "
                "Gb/s network interface per node",
                detail::node(4, bytes_per_second{6.25e9}, 1, bytes_per_second{6.25e9})},
};

/// The node a device preset comes in, if `device` names one.
constexpr std::optional<node_spec> find_node_preset(std::string_view device) {
  for (const auto& p : node_presets)
    if (p.device == device) return p.node;
  return std::nullopt;
}

namespace rules {
[[noreturn]] inline void node_of_needs_a_device_preset_name() {
  throw input_error(
      "cluster::node_of: the name is not a device preset; give the node of other devices yourself");
}
}  // namespace rules

/// The node of a device preset (`node_of("a100-80gb")`); stops compilation (or throws input_error) for a
/// name that is not a preset.
constexpr node_spec node_of(std::string_view device) {
  if (const auto n = find_node_preset(device)) return *n;
  rules::node_of_needs_a_device_preset_name();
}

/// The node of PHAZE's reference design, which every design of an accelerator space keeps by default.
inline constexpr node_spec reference_node = node_of("tpuv4-like");

}  // namespace phaze::cluster

namespace phaze::cluster {

/// `count` devices of a preset in the preset's nodes: `cluster::preset_cluster("a100-80gb", 1024)`. Throws
/// input_error for a name that is not a preset.
inline cluster preset_cluster(std::string_view device, int count) {
  const auto d = hw::find_preset(device);
  if (!d) rules::node_of_needs_a_device_preset_name();
  return homogeneous(*d, count, node_of(device));
}

/// `count` copies of a preset device (found by its name) in the preset's nodes.
inline cluster preset_cluster(const hw::device& d, int count) {
  return homogeneous(d, count, node_of(d.name.view()));
}

}  // namespace phaze::cluster
