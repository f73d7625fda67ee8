/// @file
/// Device presets: PHAZE's TPUv4-like reference design and real GPUs/TPUs from their datasheets.
/// Every constant cites its source; docs/cost-model.md lists them again.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"

namespace phaze::hw {

/// A preset and where its numbers come from.
struct preset {
  std::string_view name;
  std::string_view source;
  device spec;
};

namespace detail {
using namespace phaze::literals;

/// PHAZE's reference accelerator (Wang et al., ICML 2024, section 5): 8 tensor cores of 128x128, 2 vector
/// cores of 128 lanes, 128 MiB GLB, 1.05 GHz, 32 GiB HBM at 1.2 TB/s: the TPUv4 chip (Jouppi et al., ISCA
/// 2023: 2 TensorCores x 4 MXUs of 128x128, 128 MiB CMEM, 1050 MHz). Peak 2 * 8 * 128 * 128 * 1.05e9 = 275.3
/// TFLOP/s.
constexpr device tpuv4_like() {
  device d;
  d.name = "tpuv4-like";
  d.kind = device_kind::systolic;
  d.hbm = 32_GiB;
  d.hbm_bandwidth = 1200_GBps;
  d.compute = precision::bf16;
  d.systolic = {8, 128, 128, 2, 128, 128_MiB, 1050_MHz};
  return d;
}

/// A datasheet device with the fields every GPU preset sets.
constexpr device gpu(std::string_view name, bytes hbm, bytes_per_second hbm_bw, datasheet_spec sheet) {
  device d;
  d.name = name;
  d.kind = device_kind::datasheet;
  d.hbm = hbm;
  d.hbm_bandwidth = hbm_bw;
  d.compute = sheet.matrix_bf16.value() > 0 ? precision::bf16 : precision::fp16;
  d.sheet = sheet;
  return d;
}

// GEMM-efficiency starting points (docs/validation.md checks them against measured training runs):
// large-GEMM fractions of dense peak as cuBLAS reaches them (A100 ~0.80, H100 PCIe ~0.75, V100 ~0.85, T4
// ~0.60 as T4 throttles at 70 W), 128x128 output tiles (256x128 on the H100 PCIe, which was not measured)
// and a 64-element reduction half-point. HBM: ~90% of peak is what STREAM-like copies reach (measured on an
// H100 SXM: 3.03 TB/s of 3.35 = 0.90; on an H200: 4.30 of 4.8 = 0.895, docs/gpu-measurements.md). The A100
// and Hopper GEMM values are calibrated below; the rest are assumptions recorded in docs/cost-model.md.
constexpr datasheet_spec sheet(double tf32, double bf16, double fp16, double fp8, double vec,
                               double max_fraction, int tile_m, int tile_n, int sms, double k_half = 64.0) {
  datasheet_spec s;
  s.matrix_tf32 = flops_per_second{tf32 * 1e12};
  s.matrix_bf16 = flops_per_second{bf16 * 1e12};
  s.matrix_fp16 = flops_per_second{fp16 * 1e12};
  s.matrix_fp8 = flops_per_second{fp8 * 1e12};
  s.vector = flops_per_second{vec * 1e12};
  s.gemm = {max_fraction, tile_m, tile_n, sms, k_half};
  s.memory_efficiency = 0.9;
  return s;
}
// A100 GEMM efficiency, calibrated on measured training runs: the eight iterations of Korthikanti et al.
// 2022, Table 5 (GPT models of 22B to 1T parameters on Selene's A100-80GB, TP 8) through `phaze estimate`, by
// a grid search over (max_fraction, k_half) minimizing mean + max / 4 of the relative errors. On those eight
// runs: MAE 1.12%, max 2.12%; leave-one-out (fit on seven, predict the eighth): MAE 1.45%, max 2.68%
// (tests/train/step_test.cpp re-checks both). The large-GEMM fraction 0.91 (284 TFLOP/s) is what cuBLAS
// reaches on big fp16 GEMMs; the large k_half also absorbs per-kernel overheads the model does not itemize.
inline constexpr double a100_max_fraction = 0.91;
inline constexpr double a100_k_half = 768.0;

// H100 SXM and H200 GEMM efficiency, calibrated on measured GEMM times (docs/gpu-measurements.md): 449 bf16
// GEMMs each (GPT-3-175B and Llama-2-7B block GEMMs forward, dX and dW at microbatch 1/2/4 and TP 1/2/4/8,
// GPT-3 attention score/context batched GEMMs, k, m, n and square sweeps) timed with CUDA events through
// PyTorch 2.11 / cuBLAS (CUDA 13.0) by tools/gpu/measure.py, data in tests/data/gpu/, fitted by
// tools/gpu/fit_gemm.cpp: a grid search over (max_fraction, k_half) per candidate tile minimizing the mean
// relative error of cost::datasheet_gemm. GEMMs of 1 TFLOP or more ran at 619-811 TFLOP/s on the H100, median
// 701 (0.71 of 989); the H200 (at its 700 W limit, 1785 MHz after the GEMMs) ran them about 3% slower, median
// 679. 128x128 output tiles: within 0.3 points of the best mean (128x64: 5.27% vs 5.53%) with half its max
// error (32% vs 66%), and far better than 256x128 (8.2% mean, 81% max: cuBLAS picks smaller tiles for narrow
// TP-sliced GEMMs such as 4096 x 512 x 8192, so the big tile over-charges their quantization).
// H100 SXM: mean 5.53%, max 32.3% (1024^3, launch-bound) over the 449 shapes; the preset's earlier
// uncalibrated values (0.75, 256x128, k_half 64) gave mean 9.23%, max 82.1%. A second run of the same
// script on the same card: mean 5.3% with these values (tests/hw/gpu_calibration_test.cpp checks both).
inline constexpr double h100_max_fraction = 0.745;
inline constexpr double h100_k_half = 184.0;
// H200: mean 5.15%, max 36.4% (the uncalibrated values: mean 12.7%, max 100.6%).
inline constexpr double h200_max_fraction = 0.715;
inline constexpr double h200_k_half = 116.0;
// FP8 GEMMs (e4m3 x e4m3 -> bf16 through torch._scaled_mm, what Transformer Engine runs for the linear layers
// under FP8: fast accumulation forward, split accumulation for the two backward GEMMs) measured on the same
// kinds of card, 157 shapes each (the four linear layers of Llama 3 8B / 70B at sequence 8192 and GPT-3 175B
// at 2048, tensor-parallel widths 1-8, forward / dgrad / wgrad; k sweep; squares;
// tests/data/gpu/*-fp8-gemm.csv, tools/gpu/measure_hopper.py, docs/gpu-measurements.md). In the same runs
// bf16 GEMMs of the same shapes ran at a median 1.86 (H100) / 1.88 (H200) times slower, not 2: the cards sat
// at their 700 W limit and lowered their clocks under FP8 (1110-1260 MHz read after the FP8 GEMMs).
// hw::fp8_gemm_efficiency keeps the model of bf16 (k_half doubled: FP8 packs twice the elements per byte of a
// k-slice); fp8_max_fraction is the grid search's value over all 157 shapes (tools/gpu/measure_hopper.py's
// data through the fit in tests/hw/gpu_calibration_test.cpp): H100 0.7075 (mean error 4.9%; with bf16's 0.745
// it was 7.4%, too fast), H200 0.685 (5.0%; 6.9%). A published cuBLASLt 8192^3 FP8 benchmark on 16 H100 SXM
// (1599-1630 TFLOP/s; d-robotics test_gpu_scripts, reports_cublaslt_fp8_crosscheck_20260524.md) is faster
// than our card (1408).
inline constexpr double h100_fp8_max_fraction = 0.7075;
inline constexpr double h200_fp8_max_fraction = 0.685;
// FP8 quantization passes (a bf16 GEMM input scaled, cast to e4m3 and copied transposed, with its amax):
// fused Triton kernels that TorchInductor generates from the plain PyTorch of tools/gpu/measure_fused.py, at
// 8192 tokens and the widths of Llama 3 8B and 70B layers (tp 1 and 4; tests/data/gpu/*-fused.csv,
// docs/gpu-measurements.md). Median over the five shapes of 2^25 elements or more, counting the 4 bytes per
// element a fused pass moves: H100 1522 GB/s, 0.454 of 3.35 TB/s; H200 1814 GB/s, 0.378 of 4.8 TB/s. The
// other fused memory-bound kernels measured there (RMSNorm, SwiGLU, RoPE, residual add) reached a median
// 0.85 (H100) and 0.68 (H200) of the peak, memory_efficiency 0.9 on both kept. Transformer Engine's own
// kernels were not available to measure.
inline constexpr double h100_fp8_quantize_fraction = 0.454;
inline constexpr double h200_fp8_quantize_fraction = 0.378;
// Fused attention (cuDNN's fused SDPA through PyTorch 2.11, bf16, head_dim 128; GPT-3 shapes at sequence 2048
// with 12 to 384 heads per kernel, causal and not, and Llama 3 shapes at sequences 2048 to 65536 with 8 and
// 32 heads plus context-parallel shapes of 4096-8192 queries against 32768-131072 keys;
// tests/data/gpu/*-attention.csv and *-attention-long.csv, docs/gpu-measurements.md): fractions of the 989
// TFLOP/s peak for the work executed (forward, backward, causal forward, causal backward), the work units
// (128 query rows of one head) at which a kernel reaches half of them, and the key tiles per unit at which it
// reaches half (start and drain of each unit's pipeline), by tools/gpu/fit_attention.cpp minimizing the mean
// relative error over the 78 kernels of each card: H100 4.3% (max 23%), H200 4.1% (max 21%). Without the key
// tile term (fitted on sequence 2048 alone) the model was 25-68% slow at sequences of 4096 and more.
// Memory as CUDA hands it to a program (cudaDeviceProp::totalGlobalMem, what the caching allocator can fill),
// read on the cards measured here: H100 SXM 85,017,493,504 bytes (79.2 GiB; tests/data/gpu/
// h100-sxm-train-step-env.txt), H200 139.8 GiB (tests/data/gpu/h200-env.txt; nvidia-smi 143,771 MiB). The
// datasheets' "80 GB" and "141 GB" count in binary units (the H100's five 16 GiB HBM3 stacks): read as 80e9
// and 141e9 bytes they left plans about 6% less memory than the cards give a program.
// Computation slowed by an overlapped collective: the dgrad and wgrad GEMMs of a Llama 3 8B block
// ran 1.2-8.3% slower (median 5.8%) on the H100 and -3.9 to 2.8% (median 1.6%) on the H200 while a reduction
// kernel standing in for NCCL's streamed gradient buckets on 16 or 32 thread blocks beside them (eight launch
// variants; tools/gpu/measure_hopper.py, docs/gpu-measurements.md "Overlapping communication with compute on
// one GPU"). The medians; the A100 (not measured) takes the H100's.
inline constexpr double h100_overlap_slowdown = 0.058;
inline constexpr double h200_overlap_slowdown = 0.016;
inline constexpr bytes h100_sxm_memory{85017493504.0};
inline constexpr bytes h200_memory{139.8 * 1073741824.0};
inline constexpr attention_efficiency h100_attention{0.8175, 0.55, 0.7375, 0.5125, 86.0, 3.0};
inline constexpr attention_efficiency h200_attention{0.8025, 0.585, 0.7275, 0.5325, 84.0, 2.75};
constexpr device with_attention(device d, attention_efficiency a) {
  d.sheet.attention = a;
  return d;
}
constexpr device with_architecture(device d, architecture a, double overlap_slowdown = 0.0) {
  d.sheet.arch = a;
  d.sheet.overlap_slowdown = overlap_slowdown;
  return d;
}
// Fused attention on the A100: FlashAttention-2, the kernel Ampere stacks run (flash-attn 2.x, PyTorch SDPA's
// flash backend). Its forward pass reaches up to 73% of the A100's peak (230 TFLOP/s at head dimension 128
// and long sequences: Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work
// Partitioning", 2023, section 4.1); that is the forward fraction. The backward, causal forward and causal
// backward fractions keep the H100's measured ratios to its forward fraction, the work units at half
// occupancy scale with the SMs (108 of 132) and the key tiles at half rate are the H100's: the same tiling on
// the previous generation. No A100 was available to measure (docs/cost-model.md, section 7.2b).
inline constexpr double a100_flash2_forward = 0.73;
constexpr attention_efficiency a100_attention() {
  const attention_efficiency& h = h100_attention;
  const double scale = a100_flash2_forward / h.forward;
  return {a100_flash2_forward,       h.backward * scale,          h.causal_forward * scale,
          h.causal_backward * scale, h.work_half * 108.0 / 132.0, h.key_tiles_half};
}
/// An SXM A100 (GA100: 108 SMs; 312 TFLOP/s bf16/fp16 dense, 156 tf32, 19.5 fp32) with its memory, its
/// GEMM efficiency and FlashAttention-2's attention efficiency.
constexpr device ampere(std::string_view name, bytes hbm, bytes_per_second hbm_bw) {
  return with_architecture(
      with_attention(gpu(name, hbm, hbm_bw,
                         sheet(156, 312, 312, 0, 19.5, a100_max_fraction, 128, 128, 108, a100_k_half)),
                     a100_attention()),
      architecture::ampere, h100_overlap_slowdown);
}
// Hopper output tile that fits both cards' measured GEMMs best among 256x128, 128x256, 256x256, 128x128,
// 192x128, 128x64 and 64x128 once the mean and the max error are both weighed (see above).
inline constexpr int hopper_tile_m = 128;
inline constexpr int hopper_tile_n = 128;
/// An SXM Hopper (GH100: 132 SMs; 989 TFLOP/s bf16/fp16 dense, 495 tf32, 1979 fp8, 67 fp32) with its memory
/// and its calibrated GEMM and fused-attention efficiency.
constexpr device hopper(std::string_view name, bytes hbm, bytes_per_second hbm_bw, double max_fraction,
                        double k_half, double fp8_max_fraction, double fp8_quantize_fraction,
                        attention_efficiency attention, double overlap_slowdown) {
  device d = with_architecture(with_attention(gpu(name, hbm, hbm_bw,
                                                  sheet(495, 989, 989, 1979, 67, max_fraction, hopper_tile_m,
                                                        hopper_tile_n, 132, k_half)),
                                              attention),
                               architecture::hopper, overlap_slowdown);
  d.sheet.gemm.fp8_max_fraction = fp8_max_fraction;
  d.sheet.gemm.fp8_quantize_fraction = fp8_quantize_fraction;
  return d;
}

/// `d` with other datasheet rates (dense TFLOP/s: tf32, bf16 and fp16, fp8, fp32), its efficiencies kept.
constexpr device with_rates(device d, double tf32, double bf16, double fp8, double fp32) {
  d.sheet.matrix_tf32 = flops_per_second{tf32 * 1e12};
  d.sheet.matrix_bf16 = flops_per_second{bf16 * 1e12};
  d.sheet.matrix_fp16 = flops_per_second{bf16 * 1e12};
  d.sheet.matrix_fp8 = flops_per_second{fp8 * 1e12};
  d.sheet.vector = flops_per_second{fp32 * 1e12};
  return d;
}
// Blackwell (B200, GB200, and Blackwell Ultra: B300, GB300): no card was measured here. Its GEMM,
// fused-attention, FP8-quantization and overlap efficiencies are the H100 SXM's measured ones above
// (fractions of the datasheet peak), an assumption until measured (docs/devices.md); only the datasheet
// rates, memory and SM count are Blackwell's. FP4 rates are not used (phaze has no FP4 precision).
inline constexpr int blackwell_sms = 148;  // B200: 148 SMs (NVIDIA Blackwell architecture technical brief)
/// A Blackwell GPU by its datasheet (dense rates in TFLOP/s: tf32, bf16/fp16, fp8, fp32) with its memory and
/// the H100's measured efficiencies.
constexpr device blackwell(std::string_view name, bytes hbm, bytes_per_second hbm_bw, double tf32,
                           double bf16, double fp8, double fp32) {
  device d =
      with_architecture(with_attention(gpu(name, hbm, hbm_bw,
                                           sheet(tf32, bf16, bf16, fp8, fp32, h100_max_fraction,
                                                 hopper_tile_m, hopper_tile_n, blackwell_sms, h100_k_half)),
                                       h100_attention),
                        architecture::blackwell, h100_overlap_slowdown);
  d.sheet.gemm.fp8_max_fraction = h100_fp8_max_fraction;
  d.sheet.gemm.fp8_quantize_fraction = h100_fp8_quantize_fraction;
  return d;
}
/// TPU v4 by its datasheet. Its MXUs compute bf16 (and int8), not fp16. The vector rate is the real VPU's
/// (2 TensorCores x 8 sublanes x 128 lanes x 2 FLOPs per FMA x 1.05 GHz = 4.3 TFLOP/s); PHAZE's tpuv4-like
/// template models the same chip with 2 vector cores of 128 lanes (0.27 TFLOP/s), as the paper does.
constexpr device tpuv4() {
  return gpu("tpuv4", 32_GiB, 1200_GBps, sheet(0, 275, 0, 0, 4.3, 0.80, 128, 128, 8));
}
}  // namespace detail

/// Every preset. GPU numbers are dense (no structured sparsity) peaks from NVIDIA's datasheets. The node each
/// comes in (NVLink, network) is in cluster/presets.hpp.
inline constexpr std::array presets{
    preset{"tpuv4-like",
           "PHAZE (ICML 2024) reference = TPU v4 (Jouppi et al. ISCA 2023; Google Cloud TPU v4 page)",
           detail::tpuv4_like()},
    preset{"tpuv4",
           "Google Cloud TPU v4 page: 275 TFLOP/s bf16, 32 GiB HBM2 at 1200 GB/s, 1.1 PB/s pod all-reduce / "
           "4096 "
           "chips; VPU 2 cores x 8 x 128 lanes (Jouppi et al. ISCA 2023)",
           detail::tpuv4()},
    preset{
        "a100-40gb",
        "NVIDIA A100 datasheet (SXM): 312 TFLOP/s bf16/fp16, 156 tf32, 19.5 fp32, 40 GB HBM2 at 1555 GB/s, "
        "NVLink3 600 GB/s (300 per direction), 108 SMs; DGX A100: 8 x 200 Gb/s HDR per 8 GPUs",
        detail::ampere("a100-40gb", bytes{40e9}, bytes_per_second{1555e9})},
    preset{
        "a100-80gb",
        "NVIDIA A100 datasheet (SXM 80GB): 312 TFLOP/s bf16/fp16, 80 GB HBM2e at 2039 GB/s, NVLink3 300 GB/s "
        "per "
        "direction, 108 SMs; Selene/DGX A100: 8 x 200 Gb/s HDR InfiniBand per node (Korthikanti et al. 2022)",
        detail::ampere("a100-80gb", bytes{80e9}, bytes_per_second{2039e9})},
    preset{"h100-sxm",
           "NVIDIA H100 datasheet (SXM5): 989 TFLOP/s bf16/fp16 dense, 495 tf32, 1979 fp8, 67 fp32, 80 GB "
           "HBM3 at "
           "3.35 TB/s, NVLink4 900 GB/s (450 per direction), 132 SMs; DGX H100: 8 x 400 Gb/s NDR per 8 GPUs; "
           "memory as CUDA reports it on an H100 SXM (79.2 GiB)",
           detail::hopper("h100-sxm", detail::h100_sxm_memory, bytes_per_second{3.35e12},
                          detail::h100_max_fraction, detail::h100_k_half, detail::h100_fp8_max_fraction,
                          detail::h100_fp8_quantize_fraction, detail::h100_attention,
                          detail::h100_overlap_slowdown)},
    preset{"h100-pcie",
           "NVIDIA H100 datasheet (PCIe): 756 TFLOP/s bf16/fp16 dense, 378 tf32, 1513 fp8, 51 fp32, 80 GB "
           "HBM2e at "
           "2.0 TB/s, PCIe Gen5 128 GB/s (64 per direction), 114 SMs; 400 Gb/s network per GPU assumed",
           detail::with_architecture(detail::gpu("h100-pcie", bytes{80e9}, bytes_per_second{2.0e12},
                                                 detail::sheet(378, 756, 756, 1513, 51, 0.75, 256, 128, 114)),
                                     hw::architecture::hopper)},
    preset{
        "h100-nvl",
        "NVIDIA H100 datasheet (NVL): 835 TFLOP/s bf16/fp16 dense (1671 with sparsity), 418 tf32, 1671 fp8, "
        "60 fp32, 94 GB HBM3 at 3.9 TB/s, NVLink bridge 600 GB/s, PCIe Gen5 128 GB/s, 350-400 W; 132 SMs "
        "(GH100, as the SXM part) assumed; the SXM part's measured efficiencies assumed",
        detail::with_rates(detail::hopper("h100-nvl", bytes{94e9}, bytes_per_second{3.9e12},
                                          detail::h100_max_fraction, detail::h100_k_half,
                                          detail::h100_fp8_max_fraction, detail::h100_fp8_quantize_fraction,
                                          detail::h100_attention, detail::h100_overlap_slowdown),
                           418, 835, 1671, 60)},
    preset{
        "h200",
        "NVIDIA H200 datasheet (SXM): 989 TFLOP/s bf16/fp16 dense, 1979 fp8, 67 fp32, 141 GB HBM3e at 4.8 "
        "TB/s, "
        "NVLink4 900 GB/s (450 per direction), 132 SMs (GH100); 400 Gb/s NDR per GPU; memory as CUDA reports "
        "it on an H200 (139.8 GiB)",
        detail::hopper("h200", detail::h200_memory, bytes_per_second{4.8e12}, detail::h200_max_fraction,
                       detail::h200_k_half, detail::h200_fp8_max_fraction, detail::h200_fp8_quantize_fraction,
                       detail::h200_attention, detail::h200_overlap_slowdown)},
    preset{
        "b200",
        "NVIDIA HGX B200 datasheet: per GPU 2250 TFLOP/s bf16/fp16 dense (36 PFLOP/s with sparsity for 8), "
        "1125 tf32, 4500 fp8, 75 fp32, 180 GB HBM3e (1.44 TB for 8) at 7.7 TB/s (62 TB/s for 8), NVLink5 "
        "1.8 TB/s (900 GB/s per direction), 148 SMs; DGX B200: 8 x 400 Gb/s ConnectX-7 per 8 GPUs; the "
        "H100 SXM's measured efficiencies assumed (no B200 measured)",
        detail::blackwell("b200", bytes{180e9}, bytes_per_second{7.7e12}, 1125, 2250, 4500, 75)},
    preset{
        "gb200",
        "NVIDIA GB200 NVL72 datasheet: per GPU (of 72) 2500 TFLOP/s bf16/fp16 dense (360 PFLOP/s with "
        "sparsity for 72), 1250 tf32, 5000 fp8, 80 fp32, 186 GB HBM3e (13.4 TB for 72) at 8 TB/s (576 TB/s "
        "for 72), NVLink5 1.8 TB/s (900 GB/s per direction) across all 72 GPUs, 148 SMs; 400 Gb/s network "
        "per GPU assumed; the H100 SXM's measured efficiencies assumed (no GB200 measured)",
        detail::blackwell("gb200", bytes{186e9}, bytes_per_second{8.0e12}, 1250, 2500, 5000, 80)},
    preset{
        "b300",
        "NVIDIA HGX B300 (Blackwell Ultra) datasheet: per GPU 2250 TFLOP/s bf16/fp16 dense (36 PFLOP/s with "
        "sparsity for 8), 1125 tf32, 4500 fp8 (72 PFLOP/s with sparsity for 8), 75 fp32, 288 GB HBM3e (2.3 "
        "TB for 8) at 8 TB/s (NVIDIA technical blog 'Inside NVIDIA Blackwell Ultra', 2025), NVLink5 1.8 TB/s "
        "(900 GB/s per direction); DGX B300: 8 x 800 Gb/s ConnectX-8; 148 SMs taken (the blog's full chip "
        "has "
        "160, the enabled count is not published); the H100 SXM's measured efficiencies assumed (no B300 "
        "measured)",
        detail::blackwell("b300", bytes{288e9}, bytes_per_second{8.0e12}, 1125, 2250, 4500, 75)},
    preset{
        "gb300",
        "NVIDIA GB300 NVL72 datasheet: per GPU (of 72) 2500 TFLOP/s bf16/fp16 dense (360 PFLOP/s with "
        "sparsity for 72), 5000 fp8 (720 PFLOP/s with sparsity for 72), 288 GB HBM3e (20.7 TB for 72) at 8 "
        "TB/s (576 TB/s for 72), NVLink5 1.8 TB/s (900 GB/s per direction) across all 72 GPUs, ConnectX-8 "
        "800 "
        "Gb/s per GPU; tf32 1250 and fp32 80 as the GB200 (not in the GB300 datasheet read), 148 SMs taken; "
        "the H100 SXM's measured efficiencies assumed (no GB300 measured)",
        detail::blackwell("gb300", bytes{288e9}, bytes_per_second{8.0e12}, 1250, 2500, 5000, 80)},
    preset{"v100-16gb",
           "NVIDIA V100 datasheet (SXM2): 125 TFLOP/s fp16 tensor, 15.7 fp32, 16 GB HBM2 at 900 GB/s, "
           "NVLink2 300 GB/s "
           "(150 per direction), 80 SMs, no bf16; AMP's p3.8xlarge: 4 GPUs per node, 10 Gb/s between nodes",
           detail::with_architecture(detail::gpu("v100-16gb", bytes{16e9}, bytes_per_second{900e9},
                                                 detail::sheet(0, 0, 125, 0, 15.7, 0.85, 128, 128, 80)),
                                     hw::architecture::volta)},
    preset{"t4",
           "NVIDIA T4 datasheet: 65 TFLOP/s fp16 tensor, 8.1 fp32, 16 GB GDDR6 at 320 GB/s, 40 SMs, no bf16; "
           "AMP's "
           "g4dn.12xlarge: 4 GPUs per node over PCIe, 50 Gb/s within and between nodes",
           detail::with_architecture(detail::gpu("t4", bytes{16e9}, bytes_per_second{320e9},
                                                 detail::sheet(0, 0, 65, 0, 8.1, 0.60, 128, 128, 40)),
                                     hw::architecture::turing)},
};

/// PHAZE's reference design, usable in constant expressions.
inline constexpr device tpuv4_like = detail::tpuv4_like();

/// The preset with this name, if any.
constexpr std::optional<device> find_preset(std::string_view name) {
  for (const auto& p : presets)
    if (p.name == name) return p.spec;
  return std::nullopt;
}

}  // namespace phaze::hw
