#!/usr/bin/env bash
# Fuzzes every reader of a user's file (tests/fuzz/readers.hpp) with libFuzzer, under AddressSanitizer and
# UndefinedBehaviorSanitizer: builds build-fuzz/readers_fuzz with clang, then runs each reader for SECONDS
# (default 15) from its seeds (the example and test files of its kind, and tests/fuzz/corpus/READER). A crash,
# an exception other than phaze's input errors, a leak, an input that takes over 10 s or 2 GiB stops it; the
# input is saved in build-fuzz/crashes/READER/ (copy it to tests/fuzz/regressions/READER/ once fixed: the unit
# tests replay every file there).
#   scripts/fuzz.sh [SECONDS [READER...]]      readers: model_config device search_spec layer_table cluster
#                                              cluster_space nccl_tests results calibration
#                                              calibration_runs training_log
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

seconds=${1:-15}
[ $# -gt 0 ] && shift
readers=("$@")
[ ${#readers[@]} -eq 0 ] &&
  readers=(model_config device search_spec layer_table cluster cluster_space nccl_tests results calibration
    calibration_runs training_log)

mkdir -p build-fuzz
binary=build-fuzz/readers_fuzz
newest=$(find include tests/fuzz \( -name '*.hpp' -o -name '*.cpp' \) -newer "$binary" 2>/dev/null | head -1 || true)
if [ ! -x "$binary" ] || [ -n "$newest" ]; then
  echo "phaze fuzz: building $binary (clang, libFuzzer, ASan + UBSan)" >&2
  clang++ -std=c++20 -O1 -g1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Iinclude tests/fuzz/readers_fuzz.cpp -o "$binary" \
    -llemon -lglpk -lfmt -ltbb
fi

seeds_of() {
  case "$1" in
    model_config) echo tests/data/hf ;;
    device) echo tests/data/devices ;;
    search_spec) echo docs/examples ;;
    layer_table) echo tests/data/layer_tables ;;
    cluster) echo tests/data/clusters ;;
    cluster_space) echo examples/clusters ;;
    nccl_tests) echo tests/data/nccl_tests ;;
    results | calibration | calibration_runs | training_log) echo ;;
  esac
}

# A dictionary of the JSON keys and values the seeds use, so that mutations build fields phaze knows.
dictionary() {
  {
    printf '%s\n' '"{"' '"}"' '"["' '"]"' '":"' '","' '"null"' '"true"' '"1e308"' '"-1"' '"\\n"'
    if [ $# -gt 0 ]; then
      # Seeds without a quoted word (training logs) give grep nothing to print: not an error.
      { find "$@" -type f -exec grep -oh '"[A-Za-z_0-9.-]\{1,40\}"' {} + || true; } | sort -u | head -2000 |
        sed 's/"/\\"/g; s/.*/"&"/'
    fi
  } >"build-fuzz/$reader.dict"
}

status=0
for reader in "${readers[@]}"; do
  work=build-fuzz/corpus/$reader
  crashes=build-fuzz/crashes/$reader
  mkdir -p "$work" "$crashes"
  dirs=("$work")
  seeds=$(seeds_of "$reader")
  [ -n "$seeds" ] && dirs+=("$seeds")
  [ -d "tests/fuzz/corpus/$reader" ] && dirs+=("tests/fuzz/corpus/$reader")
  [ -d "tests/fuzz/regressions/$reader" ] && dirs+=("tests/fuzz/regressions/$reader")
  dictionary "${dirs[@]:1}"
  log=build-fuzz/$reader.log
  if PHAZE_FUZZ_READER=$reader ASAN_OPTIONS=detect_leaks=1 "$binary" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -dict="build-fuzz/$reader.dict" \
    -artifact_prefix="$crashes/" "${dirs[@]}" \
    >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "phaze fuzz: $reader: $runs inputs in ${seconds} s, no failure"
  else
    echo "phaze fuzz: $reader FAILED; the input is in $crashes/, the log in $log:" >&2
    grep -E 'ERROR|SUMMARY|terminate|what\(\)' "$log" | head -20 >&2
    status=1
  fi
done
exit $status
