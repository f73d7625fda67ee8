#!/usr/bin/env bash
# Builds the `phaze` program on a fresh Debian 12 machine (installs missing packages first) and runs the
# main job on a built-in default. Extra arguments replace the default command: scripts/run.sh models
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target phaze_cli
if [ $# -eq 0 ]; then
  set -- search
fi
exec ./build/phaze "$@"
