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
//
//   /tmp/fit_attention --kernels h100-sxm tests/data/gpu/h100-sxm-attention-kernels.csv
//
// fits the implementations measured by tools/gpu/measure_kernels.py against the preset's own (cuDNN) kernel
// at head dimension 128 (cost::kernel_speed): cuDNN's head_dim_half alone, then for each other backend its
// forward and backward factors and head_dim_half, by a grid minimizing the mean relative error of the
// forward and forward+backward times. Prints the library's current error beside each fit.
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
  std::string backend = "cudnn";
  long b = 0, heads = 0, kv_heads = 0, s_q = 0, s_kv = 0, d = 0;
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

/// The three CSV layouts by their header: measure.py's (label,backend,b,heads,s,...), measure_hopper.py's
/// (label,b,heads,s_q,s_kv,...; all cuDNN) and measure_kernels.py's (backend,b,heads,s,...). `all_backends`
/// false keeps the cuDNN rows alone.
void read(const std::string& path, std::vector<kernel>& out, bool all_backends = false) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::map<std::string, std::size_t> col;
  const auto head = split(line);
  for (std::size_t i = 0; i < head.size(); ++i) col[head[i]] = i;
  while (std::getline(in, line)) {
    const auto f = split(line);
    kernel k;
    if (col.count("backend")) k.backend = f[col["backend"]];
    if (!all_backends && k.backend != "cudnn") continue;
    k.label = col.count("label") ? f[col["label"]] : k.backend;
    k.b = std::stol(f[col["b"]]);
    k.heads = std::stol(f[col["heads"]]);
    k.kv_heads = col.count("kv_heads") ? std::stol(f[col["kv_heads"]]) : k.heads;
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
  o.in_elements = k.b * (k.heads * k.s_q + 2 * k.kv_heads * k.s_kv) * k.d;
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

/// The device's own kernel at head dimension 128 (no head-dimension term: architecture unspecified), forward
/// and backward.
struct base_time {
  double forward = 0.0;
  double backward = 0.0;
};
base_time base_of(const kernel& k, hw::device d) {
  d.sheet.arch = hw::architecture::unspecified;
  return {phaze::cost::datasheet_attention_time(op_of(k, model::op_phase::forward), d).value(),
          phaze::cost::datasheet_attention_time(op_of(k, model::op_phase::backward_data), d).value()};
}

double predicted(const kernel& k, const base_time& b, const phaze::cost::kernel_speed& s) {
  return b.forward / (s.forward * phaze::cost::head_dim_factor(s, k.d, false)) +
         (k.backward ? b.backward / (s.backward * phaze::cost::head_dim_factor(s, k.d, true)) : 0.0);
}

double mean_error(const std::vector<kernel>& ks, const std::vector<base_time>& bs,
                  const phaze::cost::kernel_speed& s, double* worst = nullptr) {
  double sum = 0.0;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const double e = std::abs(predicted(ks[i], bs[i], s) - ks[i].seconds) / ks[i].seconds;
    sum += e;
    if (worst) *worst = std::max(*worst, e);
  }
  return sum / static_cast<double>(ks.size());
}

phaze::model::attention_kernel kernel_named(const std::string& backend) {
  using phaze::model::attention_kernel;
  if (backend == "flash") return attention_kernel::flash2;
  if (backend == "flex") return attention_kernel::flex;
  if (backend == "efficient") return attention_kernel::efficient;
  return attention_kernel::cudnn;
}

/// Fits one backend's forward and backward factors and head_dim_half on kernels `ks`; prints every kernel and
/// the fit against the library's current values `now`.
phaze::cost::kernel_speed fit_main(const std::string& backend, const std::vector<kernel>& ks,
                                   const hw::device& device, const phaze::cost::kernel_speed& now) {
  std::vector<base_time> bs;
  for (const auto& k : ks) bs.push_back(base_of(k, device));
  double worst_now = 0.0;
  const double e_now = mean_error(ks, bs, now, &worst_now);
  phaze::cost::kernel_speed best_s = now;
  double best = 1e300;
  const bool own = backend == "cudnn";
  for (double hh = 0.0; hh <= 200.0 + 1e-9; hh += own ? 1.0 : 2.0)
    for (double ff = own ? 1.0 : 0.10; ff <= 1.0 + 1e-9; ff += 0.005)
      for (double fb = own ? 1.0 : 0.10; fb <= 1.0 + 1e-9; fb += 0.005) {
        const phaze::cost::kernel_speed s{ff, fb, hh};
        const double e = mean_error(ks, bs, s);
        if (e < best) best = e, best_s = s;
      }
  double worst = 0.0;
  mean_error(ks, bs, best_s, &worst);
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const auto& k = ks[i];
    const double p = predicted(k, bs[i], best_s);
    std::printf(
        "%-9s d %3ld s %6ld b %2ld %-7s measured %9.3f ms fitted %9.3f ms %+6.1f%%  library %+6.1f%%\n",
        backend.c_str(), k.d, k.s_q, k.b, k.backward ? "fwd+bwd" : "fwd", 1e3 * k.seconds, 1e3 * p,
        100 * (p - k.seconds) / k.seconds, 100 * (predicted(k, bs[i], now) - k.seconds) / k.seconds);
  }
  std::printf(
      "%s: %zu kernels; library now (forward %.3f backward %.3f head_dim_half %.0f) mean %.2f%% max "
      "%.1f%%; best forward %.3f backward %.3f head_dim_half %.0f: mean %.2f%%, max %.1f%%\n",
      backend.c_str(), ks.size(), now.forward, now.backward, now.head_dim_half, 100 * e_now, 100 * worst_now,
      best_s.forward, best_s.backward, best_s.head_dim_half, 100 * best, 100 * worst);
  return best_s;
}

int fit_kernels(const hw::device& device, const std::vector<kernel>& all) {
  std::map<std::string, std::vector<kernel>> by_backend;
  for (const auto& k : all)
    if (k.backend != "math") by_backend[k.backend].push_back(k);
  for (auto& [backend, every] : by_backend) {
    // The factors and head_dim_half from the full-head kernels at head dimension <= 128; wide_backward from
    // those above 128; grouped-query kernels are only checked.
    std::vector<kernel> ks, wide, grouped;
    for (const auto& k : every) (k.kv_heads != k.heads ? grouped : k.d > 128 ? wide : ks).push_back(k);
    const auto now = phaze::cost::attention_kernel_speed(kernel_named(backend), device.sheet.arch);
    phaze::cost::kernel_speed best_s = now;
    if (!ks.empty()) best_s = fit_main(backend, ks, device, now);
    auto report = [&](const char* what, const std::vector<kernel>& rows, phaze::cost::kernel_speed s) {
      std::vector<base_time> rb;
      for (const auto& k : rows) rb.push_back(base_of(k, device));
      double w = 0.0;
      const double e = mean_error(rows, rb, s, &w);
      for (std::size_t r = 0; r < rows.size(); ++r)
        std::printf(
            "  %-9s d %3ld heads %2ld/%2ld s %6ld %-7s measured %9.3f ms predicted %9.3f ms %+6.1f%%\n",
            backend.c_str(), rows[r].d, rows[r].heads, rows[r].kv_heads, rows[r].s_q,
            rows[r].backward ? "fwd+bwd" : "fwd", 1e3 * rows[r].seconds, 1e3 * predicted(rows[r], rb[r], s),
            100 * (predicted(rows[r], rb[r], s) - rows[r].seconds) / rows[r].seconds);
      std::printf("  %s, %zu kernels: mean %.2f%%, max %.1f%%\n", what, rows.size(), 100 * e, 100 * w);
      return rb;
    };
    if (!wide.empty()) {
      const auto rb = report("head dimension above 128, library now", wide, now);
      double wb = 1e300;
      phaze::cost::kernel_speed ws = now;
      for (double f = 0.20; f <= 1.20 + 1e-9; f += 0.01) {
        ws.wide_backward = f;
        const double e = mean_error(wide, rb, ws);
        if (e < wb) wb = e, best_s.wide_backward = f;
      }
      ws.wide_backward = best_s.wide_backward;
      report("head dimension above 128, best", wide, ws);
      std::printf("  best wide_backward %.2f (library now %.2f)\n", best_s.wide_backward, now.wide_backward);
    }
    if (!grouped.empty()) report("grouped-query kernels, library now", grouped, now);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string{argv[1]} == "--kernels") {
    const auto base = hw::find_preset(argv[2]);
    if (!base) {
      std::fprintf(stderr, "no preset %s\n", argv[2]);
      return 2;
    }
    std::vector<kernel> ks;
    for (int i = 3; i < argc; ++i) read(argv[i], ks, true);
    return fit_kernels(*base, ks);
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: fit_attention [--kernels] PRESET CSV [CSV ...]\n");
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
