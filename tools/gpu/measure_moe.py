#!/usr/bin/env python3
"""Measure on one GPU what phaze's mixture-of-experts model assumes (docs/gpu-measurements.md).

Our own code, PyTorch only. Writes into --out (default $OUT, else ./gpu-out):

  moe-gemm.csv     label,experts,m,n,k,variant,seconds,tflops
                   the grouped expert GEMMs of Qwen3-30B-A3B (128 experts of 768, 8 per rank at ep 16, 4096
                   token slots each) and Mixtral 8x7B (8 experts of 14336, 1 or 2 per rank), forward, dgrad and
                   wgrad shapes, each as one batched GEMM (torch.bmm: what a balanced grouped GEMM does) and,
                   where this PyTorch has it, torch._grouped_mm over the same groups
  moe-permute.csv  label,rows,width,top_k,bytes,seconds,gbps
                   the token permutation (index_select of tokens x top_k rows of h bf16 values) and its inverse
                   weighted sum (index_add), bytes = rows read once + rows written once

Timing as tools/gpu/measure.py (its Timer: warm-ups, each repetition after an L2 flush, CUDA events, median).
Run: python3 tools/gpu/measure_moe.py --out "$OUT"   (under a minute on an H100).
"""
import argparse
import csv
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import DEV, DT, Timer, environment, randn, smi  # noqa: E402


def gemm_cases():
    # (label, experts on the rank, token slots per expert, hidden, expert ffn, gated)
    models = [("qwen3-30b-a3b.ep16", 8, 4096, 2048, 768, True),
              ("qwen3-30b-a3b.ep8", 16, 2048, 2048, 768, True),
              ("mixtral-8x7b.ep8", 1, 8192, 4096, 14336, True),
              ("mixtral-8x7b.ep4", 2, 8192, 4096, 14336, True)]
    for label, e, m, h, f, gated in models:
        up = (2 if gated else 1) * f
        # forward up, forward down; dgrad and wgrad of up (the down ones are the transposed shapes)
        yield f"{label}.up.fwd", e, m, up, h
        yield f"{label}.down.fwd", e, m, h, f
        yield f"{label}.up.dx", e, m, h, up
        yield f"{label}.up.dw", e, up, h, m


def run_gemms(timer, out):
    rows = []
    grouped = hasattr(torch, "_grouped_mm")
    for label, e, m, n, k in gemm_cases():
        a = randn(e, m, k)
        b = randn(e, n, k)
        sec = timer(lambda: torch.bmm(a, b.transpose(1, 2)))
        rows.append((label, e, m, n, k, "bmm", sec))
        if grouped:
            try:
                a2 = a.reshape(e * m, k)
                bt = b.transpose(1, 2)  # [e, k, n], column-major per group as _grouped_mm wants
                offs = torch.arange(m, e * m + 1, m, device=DEV, dtype=torch.int32)
                sec = timer(lambda: torch._grouped_mm(a2, bt, offs=offs))
                rows.append((label, e, m, n, k, "grouped_mm", sec))
            except Exception as ex:  # noqa: BLE001 - recorded, not fatal
                print(f"_grouped_mm {label}: {type(ex).__name__}: {ex}"[:200], flush=True)
        del a, b
    with open(os.path.join(out, "moe-gemm.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["label", "experts", "m", "n", "k", "variant", "seconds", "tflops"])
        for label, e, m, n, k, v, sec in rows:
            w.writerow([label, e, m, n, k, v, f"{sec:.6e}", f"{2.0 * e * m * n * k / sec / 1e12:.2f}"])
    return rows


def run_permute(timer, out):
    rows = []
    for label, tokens, h, top_k, experts in (("qwen3-30b-a3b", 4096, 2048, 8, 128),
                                            ("mixtral-8x7b", 4096, 4096, 2, 8)):
        x = randn(tokens, h)
        idx = torch.randint(0, experts, (tokens, top_k), device=DEV)
        order = torch.argsort(idx.reshape(-1), stable=True)
        src = order // top_k  # the token each permuted row copies
        perm = lambda: x.index_select(0, src)  # noqa: E731
        y = perm()
        slots = tokens * top_k
        rows.append((f"{label}.permute", slots, h, top_k, 2 * (slots * h * 2), timer(perm)))
        gates = torch.rand(slots, 1, device=DEV, dtype=DT)

        def unpermute():
            out_ = torch.zeros(tokens, h, device=DEV, dtype=DT)
            out_.index_add_(0, src, y * gates)
            return out_

        rows.append((f"{label}.unpermute", slots, h, top_k, 2 * (slots * h * 2) + tokens * h * 2, timer(unpermute)))
        del x, y
    with open(os.path.join(out, "moe-permute.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["label", "rows", "width", "top_k", "bytes", "seconds", "gbps"])
        for label, r, h, k, by, sec in rows:
            w.writerow([label, r, h, k, by, f"{sec:.6e}", f"{by / sec / 1e9:.1f}"])
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = environment() + [f"torch._grouped_mm available: {hasattr(torch, '_grouped_mm')}"]
    timer = Timer()
    gemms = run_gemms(timer, args.out)
    perm = run_permute(timer, args.out)
    env.append("nvidia-smi (after): " + smi("clocks.sm,power.draw,temperature.gpu"))
    with open(os.path.join(args.out, "env-moe.txt"), "w") as fh:
        fh.write("\n".join(env) + "\n")
    print("\n".join(env))
    for label, e, m, n, k, v, sec in gemms:
        print(f"{label:28s} {v:10s} {e:3d} x {m:5d} x {n:5d} x {k:5d} {2.0 * e * m * n * k / sec / 1e12:7.1f} TFLOP/s")
    for label, r, h, k, by, sec in perm:
        print(f"{label:28s} {r:7d} x {h:5d} {by / sec / 1e9:8.1f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
