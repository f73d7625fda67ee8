// Random scheduling problems for the scheduler tests: DAGs of up to a given size with random durations,
// resource kinds and core counts, reproducible from a seed.
#pragma once

#include <phaze/sched/problem.hpp>

#include <random>
#include <string>

namespace phaze::sched::testing {

struct random_problem_options {
  int max_tasks = 8;
  int max_tensor_cores = 4;
  int max_vector_cores = 3;
  int edge_one_in = 4;  ///< each earlier task is a predecessor with probability 1 / edge_one_in
};

inline problem random_problem(std::mt19937& rng, const random_problem_options& o = {}) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  problem p;
  p.tensor_cores = uniform(1, o.max_tensor_cores);
  p.vector_cores = uniform(1, o.max_vector_cores);
  const int n = uniform(1, o.max_tasks);
  for (int i = 0; i < n; ++i) {
    task t;
    t.name = std::to_string(i);  // ("t" + to_string trips GCC 12's false -Wrestrict at -O2)
    t.name.insert(t.name.begin(), 't');
    const int k = uniform(0, 9);
    t.kind = k < 5 ? resource::tensor : k < 8 ? resource::vector : k < 9 ? resource::paired : resource::none;
    const double one = uniform(1, 20);
    // Spreading over all cores is usually faster but not always (small ops pay a split overhead).
    const double speedup = 1.0 + 3.0 * uniform(0, 100) / 100.0;
    t.one_core = seconds{one};
    t.all_cores = seconds{one / speedup + uniform(0, 4)};
    for (int j = 0; j < i; ++j)
      if (uniform(1, o.edge_one_in) == 1) t.preds.push_back(j);
    p.tasks.push_back(t);
  }
  return p;
}

}  // namespace phaze::sched::testing
