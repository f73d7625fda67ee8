// The invariant every prediction keeps, calibrated or not: no op runs faster than its roofline on its device
// (its executed FLOPs at the peak matrix or vector rate, its bytes at the peak memory bandwidth), and no
// training step executes FLOPs faster than the device's peak matrix rate. Checked over every zoo model,
// every datasheet preset, sequences of 512 to 131,072 tokens, every fused attention kernel the device runs
// and unfused attention, and under the most favourable calibration a file may hold.
#include <phaze/cost/attention.hpp>
#include <phaze/cost/op_cost.hpp>
#include <phaze/cost/vector.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/model/model.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/train/calibration.hpp>
#include <phaze/train/knobs.hpp>
#include <phaze/train/step.hpp>

#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <cstdint>
#include <string>
#include <vector>

using namespace phaze;

namespace {

/// Executed FLOPs of a tensor op (what the kernel runs: a causal fused kernel skips the masked half and its
/// backward recomputes the scores).
double executed_matrix_flops(const model::op& o) {
  if (o.kind == model::op_kind::fused_attention) return cost::fused_attention_executed_flops(o);
  return model::flops_of(o).value();
}

/// The roofline of an op on `d`: its work at the device's peaks, whichever binds.
seconds roofline(const model::op& o, const hw::device& d) {
  const seconds memory = (model::bytes_read(o) + model::bytes_written(o)) / d.hbm_bandwidth;
  switch (model::unit_of(o)) {
    case model::unit::tensor: {
      const hw::precision p = o.fp8 && hw::runs_fp8(d) ? hw::precision::fp8 : d.compute;
      const seconds compute = flops{executed_matrix_flops(o)} / hw::matrix_peak(d.sheet, p);
      // FP8 GEMMs read one-byte operands: their bytes are below bytes_read's (in elem_bytes).
      return o.fp8 ? compute : std::max(compute, memory);
    }
    case model::unit::vector:
      return std::max(model::flops_of(o) / hw::peak_vector_flops(d), cost::datasheet_vector_bytes(o) / d.hbm_bandwidth);
    default:
      return seconds{0.0};
  }
}

/// The most favourable calibration a file may hold: every multiplier at its least.
train::calibration fastest_calibration() {
  train::calibration c;
  for (const auto& f : train::calibration_factors())
    if (f.neutral > 0.0) c.*(f.value) = f.least;
  return c;
}

}  // namespace

TEST_CASE("No op runs faster than its roofline and no step above the peak rate", "[train][roofline]") {
  const std::vector<std::int64_t> sequences{512, 2048, 8192, 32768, 131072};
  const train::calibration fastest = fastest_calibration();
  std::size_t ops_checked = 0;
  std::size_t steps_checked = 0;
  for (const auto& preset : hw::presets) {
    if (preset.spec.kind != hw::device_kind::datasheet) continue;
    for (const bool calibrated : {false, true}) {
      const hw::device d = calibrated ? train::calibrated(preset.spec, fastest) : preset.spec;
      std::vector<std::pair<bool, model::attention_kernel>> attention{{false, model::attention_kernel::standard}};
      if (cost::fused_attention_runs_on(d)) {
        for (const auto k : train::all_attention_kernels)
          if (cost::attention_kernel_runs_on(k, d.sheet.arch)) attention.emplace_back(true, k);
      }
      for (const auto& entry : zoo::entries) {
        for (const std::int64_t s : sequences) {
          const model::model m = model::with_sequence(model::make_model(entry.config), s);
          for (const auto& [fused, kernel] : attention) {
            if (!fused && s > 8192) continue;
            if (calibrated && s != 2048 && s != 131072) continue;  // unfused attention's s x s scores: the GEMM roofline still holds
            INFO(preset.name << (calibrated ? " calibrated" : "") << ", " << entry.name << ", sequence " << s
                             << ", " << (fused ? std::string{model::to_string(kernel)} : "unfused"));
            model::layer_shape shape{};
            shape.microbatch = 1;
            shape.sequence = s;
            shape.fused_attention = fused;
            shape.kernel = kernel;
            shape.elem_bytes = 2;
            for (const auto& kind : model::distinct_layers(m)) {
              const model::layer l = model::layer_at(m, static_cast<std::size_t>(kind.first_node), shape);
              for (const auto* pass : {&l.ops}) {
                for (const model::op& o : *pass) {
                  INFO(o.name.view());
                  CHECK(cost::cost_of(o, d, {}).all_cores.value() >= roofline(o, d).value() * (1.0 - 1e-9));
                  ++ops_checked;
                }
              }
              for (const model::op& o : model::backward(l)) {
                INFO(o.name.view());
                CHECK(cost::cost_of(o, d, {}).all_cores.value() >= roofline(o, d).value() * (1.0 - 1e-9));
                ++ops_checked;
              }
            }
            // One device, one sequence: the step executes every layer's tensor FLOPs forward and backward.
            train::training_knobs k;
            k.fused_attention = fused;
            k.attention_kernel = kernel;
            k.sequence = s;
            const auto c = test::cluster_of(d, 1);
            const sched::schedule_cache cache;
            const train::step_estimate e = train::estimate_step(m, c, {1, 1, 1}, k, cache);
            double executed = 0.0;
            for (std::size_t v = 0; v < m.size(); ++v) {
              const model::layer l = model::layer_at(m, v, train::layer_shape_of(m, {1, 1, 1}, k));
              for (const model::op& o : l.ops)
                if (model::unit_of(o) == model::unit::tensor) executed += executed_matrix_flops(o);
              for (const model::op& o : model::backward(l))
                if (model::unit_of(o) == model::unit::tensor) executed += executed_matrix_flops(o);
            }
            CHECK(executed / e.time_per_batch.value() <= hw::peak_matrix_flops(d).value() * (1.0 + 1e-9));
            ++steps_checked;
          }
        }
      }
    }
  }
  CHECK(ops_checked > 10000);
  CHECK(steps_checked > 500);
}
