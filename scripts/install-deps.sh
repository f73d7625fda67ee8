#!/usr/bin/env bash
# Installs the Debian packages phaze builds with when any is missing.
# Idempotent and quiet when everything is present. Needs root (or sudo) only when it installs.
set -euo pipefail

packages=(
  build-essential cmake clang-format
  libboost-dev librange-v3-dev liblemon-dev libglpk-dev catch2 libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libtbb-dev libopenmpi-dev openmpi-bin libtinyxml2-dev
  chromium  # the tests open the HTML reports in headless Chromium (tests/docs/reports_in_browser.sh)
  clang libclang-rt-14-dev  # libFuzzer and its sanitizers (scripts/fuzz.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "phaze: installing missing Debian packages: ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "phaze: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq >/dev/null
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
