#!/usr/bin/env python3
"""Prints the markdown tables of docs/gpu-measurements.md from the CSVs measure.py wrote.

  python3 tools/gpu/summarize.py tests/data/gpu/h100-sxm [tests/data/gpu/h100-sxm-run2]
"""
import csv
import statistics
import sys


def rows(prefix, what):
    with open(f"{prefix}-{what}.csv", newline="") as f:
        return list(csv.DictReader(f))


def main():
    prefix = sys.argv[1]
    g = rows(prefix, "gemm")
    tf = {r["label"]: float(r["tflops"]) for r in g}
    print(f"### GEMMs ({prefix})\n")
    best = max(g, key=lambda r: float(r["tflops"]))
    print(f"Fastest: {best['label']} {best['m']}x{best['n']}x{best['k']}: {float(best['tflops']):.0f} TFLOP/s "
          f"({float(best['tflops']) / 989:.2f} of 989)\n")
    big = [float(r["tflops"]) for r in g
           if int(r["batch"]) == 1 and 2.0 * int(r["m"]) * int(r["n"]) * int(r["k"]) >= 1e12]
    print(f"GEMMs of >= 1 TFLOP: {len(big)}, median {statistics.median(big):.0f} TFLOP/s "
          f"({statistics.median(big) / 989:.2f} of 989), range {min(big):.0f}-{max(big):.0f}\n")
    for model in ("gpt3", "llama2-7b"):
        print(f"{model} block GEMMs, TFLOP/s (fwd / dX / dW):\n")
        print("| b | t | QKV | attention out | MLP up | MLP down |\n|---|---|---|---|---|---|")
        for b in (1, 2, 4):
            for t in (1, 2, 4, 8):
                cells = []
                for op in ("qkv", "attn_out", "mlp_up", "mlp_down"):
                    cells.append(" / ".join(f"{tf[f'{model}.b{b}.t{t}.{op}.{p}']:.0f}" for p in ("fwd", "dx", "dw")))
                print(f"| {b} | {t} | " + " | ".join(cells) + " |")
        print()
    print("k sweep (m = n = 8192), TFLOP/s:\n")
    ks = [r for r in g if r["label"] == "ksweep"]
    print("| " + " | ".join(r["k"] for r in ks) + " |\n|" + "---|" * len(ks))
    print("| " + " | ".join(f"{float(r['tflops']):.0f}" for r in ks) + " |\n")
    print("Few rows (n = k = 12288; n = 36864, k = 12288), microseconds and TFLOP/s:\n")
    print("| m | n=12288 us | TFLOP/s | n=36864 us | TFLOP/s |\n|---|---|---|---|---|")
    a = [r for r in g if r["label"] == "smallm.n12288"]
    b = [r for r in g if r["label"] == "smallm.n36864"]
    for x, y in zip(a, b):
        print(f"| {x['m']} | {float(x['seconds']) * 1e6:.0f} | {float(x['tflops']):.0f} | "
              f"{float(y['seconds']) * 1e6:.0f} | {float(y['tflops']):.0f} |")
    print()
    print("Square GEMMs, TFLOP/s: " + ", ".join(f"{r['m']}: {float(r['tflops']):.0f}" for r in g if r["label"] == "square"))
    print()
    print("Attention batched GEMMs (GPT-3, b*96/t GEMMs of s=2048, d=128), TFLOP/s:\n")
    print("| b | t | QK^T | AV | dP = dO V^T | dV = P^T dO |\n|---|---|---|---|---|---|")
    for bb in (1, 2, 4):
        for t in (1, 2, 4, 8):
            print(f"| {bb} | {t} | " + " | ".join(f"{tf[f'gpt3.b{bb}.t{t}.{o}']:.0f}" for o in ("qk", "av", "dp", "dv")) + " |")
    print()
    at = rows(prefix, "attention")
    print("scaled_dot_product_attention (GPT-3 heads 96/t, s 2048, d 128), TFLOP/s of useful work "
          "(fwd 4bhs^2d, fwd+bwd 3.5x that; causal half):\n")
    print("| b | t | causal | flash fwd | flash fwd+bwd | cudnn fwd | cudnn fwd+bwd | efficient fwd | efficient fwd+bwd |")
    print("|---|---|---|---|---|---|---|---|---|")
    idx = {(r["label"], r["backend"], r["causal"], r["pass"]): r for r in at}
    for bb in (1, 2, 4):
        for t in (1, 2, 4, 8):
            for c in ("0", "1"):
                lab = f"gpt3.b{bb}.t{t}"
                cells = []
                for be in ("flash", "cudnn", "efficient"):
                    for p in ("fwd", "fwd+bwd"):
                        r = idx.get((lab, be, c, p))
                        cells.append(f"{float(r['tflops']):.0f}" if r else "-")
                print(f"| {bb} | {t} | {'yes' if c == '1' else 'no'} | " + " | ".join(cells) + " |")
    print()
    print("Memory-bound ops, GB/s (bytes = inputs read once + outputs written once):\n")
    print("| op | elements | GB/s |\n|---|---|---|")
    for r in rows(prefix, "membound"):
        print(f"| {r['op']} | {int(r['elements']):,} | {float(r['gbps']):.0f} |")
    print()
    if len(sys.argv) > 2:
        g2 = {r["label"] + r["m"] + r["n"] + r["k"]: float(r["seconds"]) for r in rows(sys.argv[2], "gemm")}
        d = [abs(g2[r["label"] + r["m"] + r["n"] + r["k"]] - float(r["seconds"])) / float(r["seconds"]) for r in g]
        d.sort()
        print(f"Run-to-run (second run vs first, {len(d)} GEMMs): median {100 * statistics.median(d):.1f}%, "
              f"90th percentile {100 * d[int(0.9 * len(d))]:.1f}%, max {100 * d[-1]:.1f}%\n")


if __name__ == "__main__":
    main()
