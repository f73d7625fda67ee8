// Fits a datasheet preset's fused-attention efficiency (hw::attention_efficiency: four fractions, work_half,
// key_tiles_half) to cuDNN SDPA kernel times measured by tools/gpu/measure.py (sequence 2048, 12 to 384
// heads per kernel) and tools/gpu/measure_hopper.py (sequences 2048 to 131072, context-parallel shapes),
// using phaze's own cost function (cost::datasheet_attention_time, what cost::cost_of charges).
//
//   c++ -std=c++20 -O2 -Iinclude tools/gpu/fit_attention.cpp -o /tmp/fit_attention
//   /tmp/fit_attention h100-sxm tests/data/gpu/h100-sxm-attention.csv
//   tests/data/gpu/h100-sxm-attention-long.csv
//
// Grid over key_tiles_half (0..12 by 0.25) and work_half (0..200 by 2); for each, the forward fractions are
// fitted to the forward kernels, then the backward fractions to the forward+backward kernels, each by a
// grid (0.30..1.00 by 0.0025) minimizing the mean relative error. Prints the preset's error as it stands,
// the best values, and every kernel's error under them.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "phaze/cost/attention.hpp"
#include "phaze/hw/presets.hpp"

namespace {

namespace hw = phaze::hw;
namespace model = phaze::model;

struct kernel {
  std::string label;
  long b = 0, heads = 0, s_q = 0, s_kv = 0, d = 0;
  bool causal = false;
  bool backward = false;  // forward+backward
  double seconds = 0.0;
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) out.push_back(f);
  return out;
}

/// Both CSV layouts by their header: measure.py's (label,backend,b,heads,s,...; its cuDNN rows) and
/// measure_hopper.py's (label,b,heads,s_q,s_kv,...; all cuDNN).
void read(const std::string& path, std::vector<kernel>& out) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::map<std::string, std::size_t> col;
  const auto head = split(line);
  for (std::size_t i = 0; i < head.size(); ++i) col[head[i]] = i;
  while (std::getline(in, line)) {
    const auto f = split(line);
    if (col.count("backend") && f[col["backend"]] != "cudnn") continue;
    kernel k;
    k.label = f[col["label"]];
    k.b = std::stol(f[col["b"]]);
    k.heads = std::stol(f[col["heads"]]);
    k.s_q = std::stol(f[col.count("s") ? col["s"] : col["s_q"]]);
    k.s_kv = std::stol(f[col.count("s") ? col["s"] : col["s_kv"]]);
    k.d = std::stol(f[col["d"]]);
    k.causal = f[col["causal"]] == "1";
    k.backward = f[col["pass"]] == "fwd+bwd";
    k.seconds = std::stod(f[col["seconds"]]);
    out.push_back(k);
  }
}

model::op op_of(const kernel& k, model::op_phase phase) {
  model::op o;
  o.kind = model::op_kind::fused_attention;
  o.phase = phase;
  o.gemm = {k.b * k.heads, k.s_q, k.d, k.s_kv};
  o.causal = k.causal;
  o.elem_bytes = 2;
  o.in_elements = k.b * k.heads * (k.s_q + 2 * k.s_kv) * k.d;
  o.out_elements = k.b * k.heads * k.s_q * k.d;
  return o;
}

double predicted(const kernel& k, const hw::device& d) {
  double t = phaze::cost::datasheet_attention_time(op_of(k, model::op_phase::forward), d).value();
  if (k.backward)
    t += phaze::cost::datasheet_attention_time(op_of(k, model::op_phase::backward_data), d).value();
  return t;
}

double error(const kernel& k, const hw::device& d) {
  return std::abs(predicted(k, d) - k.seconds) / k.seconds;
}

double mean_error(const std::vector<kernel>& ks, const hw::device& d) {
  double s = 0.0;
  for (const auto& k : ks) s += error(k, d);
  return s / static_cast<double>(ks.size());
}

/// The best value of one fraction for the kernels of one class (`pick` selects them), the others fixed.
double fit_fraction(const std::vector<kernel>& ks, hw::device d, double hw::attention_efficiency::*field,
                    bool causal, bool backward) {
  std::vector<kernel> sel;
  for (const auto& k : ks)
    if (k.causal == causal && k.backward == backward) sel.push_back(k);
  double best = 1e300, arg = 0.5;
  for (double f = 0.30; f <= 1.0 + 1e-9; f += 0.0025) {
    d.sheet.attention.*field = f;
    const double e = mean_error(sel, d);
    if (e < best) best = e, arg = f;
  }
  return arg;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fit_attention PRESET CSV [CSV ...]\n");
    return 2;
  }
  const auto base = hw::find_preset(argv[1]);
  if (!base) {
    std::fprintf(stderr, "no preset %s\n", argv[1]);
    return 2;
  }
  std::vector<kernel> ks;
  for (int i = 2; i < argc; ++i) read(argv[i], ks);
  std::printf("%zu kernels; preset as it stands: mean %.2f%%\n", ks.size(), 100 * mean_error(ks, *base));
  double best = 1e300;
  hw::device arg = *base;
  for (double kt = 0.0; kt <= 12.0 + 1e-9; kt += 0.25) {
    for (double wh = 0.0; wh <= 200.0 + 1e-9; wh += 2.0) {
      hw::device d = *base;
      auto& a = d.sheet.attention;
      a.key_tiles_half = kt;
      a.work_half = wh;
      a.forward = fit_fraction(ks, d, &hw::attention_efficiency::forward, false, false);
      a.causal_forward = fit_fraction(ks, d, &hw::attention_efficiency::causal_forward, true, false);
      a.backward = fit_fraction(ks, d, &hw::attention_efficiency::backward, false, true);
      a.causal_backward = fit_fraction(ks, d, &hw::attention_efficiency::causal_backward, true, true);
      const double e = mean_error(ks, d);
      if (e < best) best = e, arg = d;
    }
  }
  const auto& a = arg.sheet.attention;
  double worst = 0.0;
  for (const auto& k : ks) {
    const double p = predicted(k, arg);
    const double e = (p - k.seconds) / k.seconds;
    worst = std::max(worst, std::abs(e));
    std::printf("%-16s b %2ld heads %3ld s %6ld/%6ld %s %-7s measured %9.3f ms predicted %9.3f ms %+6.1f%%\n",
                k.label.c_str(), k.b, k.heads, k.s_q, k.s_kv, k.causal ? "causal" : "full  ",
                k.backward ? "fwd+bwd" : "fwd", 1e3 * k.seconds, 1e3 * p, 100 * e);
  }
  std::printf(
      "best: forward %.4f backward %.4f causal_forward %.4f causal_backward %.4f work_half %.0f "
      "key_tiles_half %.2f: mean %.2f%%, max %.1f%%\n",
      a.forward, a.backward, a.causal_forward, a.causal_backward, a.work_half, a.key_tiles_half, 100 * best,
      100 * worst);
  return 0;
}
