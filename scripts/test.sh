#!/usr/bin/env bash
# Builds and runs all of phaze's tests on a fresh Debian 12 machine (installs missing packages first).
#   scripts/test.sh              optimized build in build/, every test
#   scripts/test.sh --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

jobs=$(nproc)
if [ "${1:-}" = "--sanitize" ]; then
  # The examples run in the optimized pass; their code paths have unit tests that run here (CI time).
  # Line tables only (-g1): sanitizer reports keep file and line, the build is faster (CI time).
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DPHAZE_SANITIZE=ON \
    -DPHAZE_BUILD_BENCHMARKS=OFF -DPHAZE_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  # Compile-fail, static and packaging tests check the compiler and CMake, not run-time behaviour: the
  # optimized run covers them. The test of the ILP's optimality on every zoo layer is a race against GLPK's
  # time limit, which a sanitizer build runs several times slower: the optimized run covers it, and the
  # ILP's own tests (tests/sched/ilp_test.cpp) run here.
  # The four end-to-end searches that run whole co-searches in several processes (threads and MPI,
  # kill and resume, Ctrl-C and resume, progress on a terminal) take 9 minutes here and test processes, not
  # memory: the optimized run covers them, and the search's own unit tests (resume, rounds, threads) run here.
  # So does the brute-force step budget on a wide graph (a time bound: 2 minutes here, 3 s optimized).
  # The JSON-field test (docs/cli.md against what each command writes: three searches and a dozen commands,
  # minutes under the sanitizers) and the determinism test (a dozen commands run twice, two minutes here)
  # check documents, not memory; the same commands run here in their own end-to-end tests. So do the
  # calibration of the published runs and the end-to-end calibration oracle (hundreds of estimates each, a
  # few seconds optimized): the calibration's unit tests and its other end-to-end tests run here. The
  # roofline invariant (a quarter of a million cost checks, 45 s here, 1 s optimized) checks numbers, not
  # memory; the cost functions it calls run here in their own tests.
  # The fourteen oracle comparisons that take 17-105 s each here (brute force over every rank permutation or
  # every split, exhaustive searches of mixed clusters and of the pruned co-search, the rankfile and
  # one-device-type end-to-end tests, the leave-one-out calibration, the design-space enumeration against
  # brute force, the cluster search's fronts against planning every composition, the mixed-cluster split
  # whose slowest stage is not the least, the ILP against exhaustive search on random DAGs, every exact placer
  # on a model against the others) check algorithms against exhaustive
  # answers, which the optimized run does; the same code runs here in the smaller tests beside them
  # (exact_ranks, chain_dp and plan --cluster on small clusters, the search's unit tests).
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan -j"$jobs" --output-on-failure \
    -E '^(compile_fail|static|consumer)\.|^unit\.Every zoo layer schedules optimally|^e2e\.phaze search (gives the same best|killed midway|stopped by SIGINT|shows progress)|^e2e\.brute force on a wide graph|^e2e\.phaze plan --cluster orders ranks and emits a rankfile|^unit\.the exact rank order of a plan equals brute force|^unit\.chain_dp on (measured asymmetric links equals brute force|a mixed cluster equals the exhaustive oracle)|^unit\.Table 5, leave one out|^e2e\.phaze plan --cluster keeps every stage on one device type|^unit\.Refined on ILP schedules, the pruned search reports|^unit\.Pruned and exhaustive searches agree|^unit\.on a mixed cluster a composite model.s plan equals an exhaustive search|^unit\.enumeration equals brute force on small spaces|^unit\.cluster search: the fronts equal those of planning every composition|^unit\.on a mixed cluster the fastest split need not have the least slowest stage|^unit\.ILP equals the exhaustive optimum on random DAGs|^e2e\.phaze plan on a model: every exact placer finds the same plans|^e2e\.the JSON fields docs/cli\.md lists|^e2e\.every JSON command prints the same bytes|^unit\.Published runs, calibrated on three of each set|^unit\.No op runs faster than its roofline|^e2e\.phaze calibrate fits runs that a known calibration timed'
else
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$jobs"
  ctest --test-dir build -j"$jobs" --output-on-failure
fi
