// Fits a datasheet preset's GEMM-efficiency model (max_fraction, k_half, output tile) to GEMM times
// measured by tools/gpu/measure.py, using phaze's own cost function (cost::datasheet_gemm, which
// cost::cost_of uses for matmul and batched_matmul ops on datasheet devices).
//
//   c++ -std=c++20 -O2 -Iinclude tools/gpu/fit_gemm.cpp -o /tmp/fit_gemm
//   /tmp/fit_gemm tests/data/gpu/h100-sxm-gemm.csv h100-sxm [label-prefix-to-exclude ...]
//
// Prints the preset's error as it stands, the best (max_fraction, k_half) for each candidate tile by a grid
// search minimizing the mean relative error |predicted - measured| / measured, and per-group errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "phaze/cost/gemm.hpp"
#include "phaze/hw/presets.hpp"

namespace {

struct sample {
  std::string label;
  phaze::model::gemm_dims dims;
  double seconds = 0.0;
};

std::vector<sample> read_csv(const std::string& path, const std::vector<std::string>& excluded) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // label,m,n,k,batch,seconds,tflops
  std::vector<sample> out;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string f[7];
    for (auto& x : f) std::getline(ss, x, ',');
    sample s;
    s.label = f[0];
    s.dims = {std::stoll(f[4]), std::stoll(f[1]), std::stoll(f[3]), std::stoll(f[2])};  // batch, m, k, n
    s.seconds = std::stod(f[5]);
    bool skip = false;
    for (const auto& e : excluded) skip = skip || s.label.rfind(e, 0) == 0;
    if (!skip) out.push_back(s);
  }
  return out;
}

struct error_stats {
  double mean = 0.0;
  double max = 0.0;
  std::string worst;
};

error_stats errors(const std::vector<sample>& data, const phaze::hw::device& d) {
  error_stats e;
  for (const auto& s : data) {
    const double p = phaze::cost::datasheet_gemm(s.dims, d).value();
    const double r = std::abs(p - s.seconds) / s.seconds;
    e.mean += r;
    if (r > e.max) {
      e.max = r;
      e.worst = s.label + " " + std::to_string(s.dims.m) + "x" + std::to_string(s.dims.n) + "x" +
                std::to_string(s.dims.k);
    }
  }
  e.mean /= static_cast<double>(data.size());
  return e;
}

std::string group_of(const std::string& label) {
  // gpt3.b1.t8.qkv.fwd -> gpt3 qkv.fwd style groups are too fine; use the model / sweep name and the pass
  const auto first = label.find('.');
  const std::string head = label.substr(0, first);
  const auto last = label.rfind('.');
  if (head == "gpt3" || head == "llama2-7b") return head + " " + label.substr(last + 1);
  return head;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fit_gemm GEMM.csv PRESET [EXCLUDED_LABEL_PREFIX...]\n");
    return 2;
  }
  const std::vector<std::string> excluded(argv + 3, argv + argc);
  const auto data = read_csv(argv[1], excluded);
  const auto base = phaze::hw::find_preset(argv[2]);
  if (!base || data.empty()) return 2;
  const auto now = errors(data, *base);
  std::printf(
      "%zu shapes; preset as it stands (max_fraction %.3f, tile %dx%d, k_half %.0f): mean %.2f%%, max "
      "%.1f%% (%s)\n",
      data.size(), base->sheet.gemm.max_fraction, base->sheet.gemm.tile_m, base->sheet.gemm.tile_n,
      base->sheet.gemm.k_half, 100 * now.mean, 100 * now.max, now.worst.c_str());
  const int tiles[][2] = {{128, 128}, {128, 256}, {256, 128}, {256, 256}, {128, 64}, {64, 128}, {192, 128}};
  phaze::hw::device best = *base;
  double best_mean = 1e9;
  for (const auto& t : tiles) {
    phaze::hw::device d = *base;
    d.sheet.gemm.tile_m = t[0];
    d.sheet.gemm.tile_n = t[1];
    double tile_best = 1e9, bf = 0, bk = 0;
    for (double f = 0.50; f <= 1.0001; f += 0.0025) {
      for (double k = 0; k <= 1024; k += 4) {
        d.sheet.gemm.max_fraction = f;
        d.sheet.gemm.k_half = k;
        const double m = errors(data, d).mean;
        if (m < tile_best) tile_best = m, bf = f, bk = k;
      }
    }
    d.sheet.gemm.max_fraction = bf;
    d.sheet.gemm.k_half = bk;
    const auto e = errors(data, d);
    std::printf("tile %3dx%-3d: max_fraction %.4f k_half %4.0f -> mean %.2f%%, max %.1f%% (%s)\n", t[0], t[1],
                bf, bk, 100 * e.mean, 100 * e.max, e.worst.c_str());
    if (e.mean < best_mean) best_mean = e.mean, best = d;
  }
  std::printf("best: tile %dx%d max_fraction %.4f k_half %.0f\n", best.sheet.gemm.tile_m,
              best.sheet.gemm.tile_n, best.sheet.gemm.max_fraction, best.sheet.gemm.k_half);
  // Per-group errors of the best fit and of the preset as it stands.
  std::map<std::string, std::vector<sample>> groups;
  for (const auto& s : data) groups[group_of(s.label)].push_back(s);
  std::printf("%-20s %5s %16s %16s\n", "group", "n", "now mean/max %", "fit mean/max %");
  for (const auto& [g, v] : groups) {
    const auto a = errors(v, *base);
    const auto b = errors(v, best);
    std::printf("%-20s %5zu %7.1f/%-8.1f %7.1f/%-8.1f\n", g.c_str(), v.size(), 100 * a.mean, 100 * a.max,
                100 * b.mean, 100 * b.max);
  }
  return 0;
}
