#!/usr/bin/env python3
"""Fits seconds = bytes / rate + fixed to each kernel of a membound-sizes.csv (tools/gpu/measure_membound.py).

Least squares on the relative error (each size weighted by 1 / measured seconds, so small kernels count as much as
large ones). Prints, per kernel and build, the rate (GB/s and share of the device's HBM peak), the fixed time per
kernel and the worst relative error of the fitted line. Our own code, the standard library only.

  python3 tools/gpu/fit_membound.py tests/data/gpu/h100-sxm-membound-sizes.csv 3350
  python3 tools/gpu/fit_membound.py tests/data/gpu/h200-membound-sizes.csv 4800
"""
import csv
import sys


def fit(points):
    """(bytes, seconds) -> (rate in bytes/s, fixed seconds, worst relative error), weighted least squares."""
    # minimise sum ((b / r + c - t) / t)^2 over x = 1 / r and c: a 2x2 linear system.
    sxx = sxc = scc = sxt = sct = 0.0
    for b, t in points:
        w = 1.0 / (t * t)
        sxx += w * b * b
        sxc += w * b
        scc += w
        sxt += w * b * t
        sct += w * t
    det = sxx * scc - sxc * sxc
    x = (sxt * scc - sxc * sct) / det
    c = (sxx * sct - sxc * sxt) / det
    worst = max(abs(b * x + c - t) / t for b, t in points)
    return 1.0 / x, c, worst


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: fit_membound.py FILE.csv PEAK_GB_PER_S", file=sys.stderr)
        return 2
    peak = float(sys.argv[2]) * 1e9
    groups = {}
    with open(sys.argv[1]) as f:
        for r in csv.DictReader(f):
            groups.setdefault((r["kind"], r["mode"]), []).append((float(r["bytes"]), float(r["seconds"])))
    print(f"{'kernel':10s} {'build':9s} {'rate GB/s':>9s} {'of peak':>8s} {'fixed us':>9s} {'worst':>7s}")
    for (kind, mode), points in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rate, fixed, worst = fit(points)
        print(f"{kind:10s} {mode:9s} {rate / 1e9:9.0f} {rate / peak:8.2f} {fixed * 1e6:9.2f} {100 * worst:6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
