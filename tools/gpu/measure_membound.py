#!/usr/bin/env python3
"""Memory-bound kernels of a transformer block across sizes, eager and compiled, timed from CUDA graphs.

Our own code, PyTorch only (docs/gpu-measurements.md, section "Memory-bound kernels across sizes"). For each kind
(copy, residual add, LayerNorm, RMSNorm, GELU, SwiGLU, rotary embedding; eager PyTorch, and the last four also as
the Triton kernels torch.compile generates) and each size (tokens x 4096, 2^20 to 2^28 elements, bf16): a CUDA
graph of back-to-back calls cycling over enough input buffers that they never sit in L2 (at least 256 MiB in
all), replayed five times; seconds per call is the median replay over the calls. No flush and no launch gap
between calls: what a kernel costs inside a captured or host-ahead step.

Writes membound-sizes.csv: kind,mode,elements,bytes,seconds,gbps (bytes: each input read once, each output
written once: copy, GELU and the norms 4 per element, add 6, SwiGLU 6 per output element, rotary 4).
Run: python3 tools/gpu/measure_membound.py --out "$OUT"
"""
import argparse
import csv
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import DEV, DT, environment, graph_seconds, run_steps  # noqa: E402

HIDDEN = 4096
HEAD_DIM = 128


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def kinds():
    """(name, bytes per element, make(tokens) -> (inputs builder, fn(inputs)))."""
    w = torch.ones(HIDDEN, dtype=DT, device=DEV)
    b = torch.zeros(HIDDEN, dtype=DT, device=DEV)

    def swiglu(t):
        g, u = t.chunk(2, dim=-1)
        return F.silu(g) * u

    compiled = {
        "rmsnorm": torch.compile(lambda x: F.rms_norm(x, (HIDDEN,), w), dynamic=True),
        "swiglu": torch.compile(swiglu, dynamic=True),
        "rope": torch.compile(rope, dynamic=True),
        "add": torch.compile(lambda x, r: x + r, dynamic=True),
    }
    eager = {
        "copy": (4, 1, lambda x: x.clone()),
        "add": (6, 2, lambda x, r: x + r),
        "layernorm": (4, 1, lambda x: F.layer_norm(x, (HIDDEN,), w, b)),
        "rmsnorm": (4, 1, lambda x: F.rms_norm(x, (HIDDEN,), w)),
        "gelu": (4, 1, lambda x: F.gelu(x, approximate="tanh")),
        "swiglu": (6, 1, swiglu),
        "rope": (4, 1, rope),
    }
    for name, (per, n_in, fn) in eager.items():
        yield name, "eager", per, n_in, fn
    for name, fn in compiled.items():
        per, n_in, _ = eager[name]
        yield name, "compiled", per, n_in, fn


def inputs_for(name, n_in, tokens):
    if name == "swiglu":
        return [torch.randn(tokens, 2 * HIDDEN, dtype=DT, device=DEV)]
    if name == "rope":
        return [torch.randn(tokens, HIDDEN // HEAD_DIM, HEAD_DIM, dtype=DT, device=DEV)]
    return [torch.randn(tokens, HIDDEN, dtype=DT, device=DEV) for _ in range(n_in)]


def run(out, deadline):
    rows = []
    path = os.path.join(out, "membound-sizes.csv")
    with open(path, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["kind", "mode", "elements", "bytes", "seconds", "gbps"])
        for name, mode, per, n_in, fn in kinds():
            for log_tokens in range(8, 17, 1):  # 256 .. 65536 tokens: 2^20 .. 2^28 elements
                if time.time() > deadline:
                    print(f"budget reached before {name} {mode}", flush=True)
                    return
                tokens = 1 << log_tokens
                elements = tokens * HIDDEN
                moved = per * elements
                sets = max(4, math.ceil((256 << 20) / moved))
                try:
                    bufs = [inputs_for(name, n_in, tokens) for _ in range(sets)]
                    if name == "rope":
                        pos = torch.arange(tokens, device=DEV, dtype=torch.float32)[:, None, None]
                        freq = 10000 ** (-torch.arange(HEAD_DIM // 2, device=DEV) / (HEAD_DIM // 2))
                        cos, sin = (pos * freq).cos().to(DT), (pos * freq).sin().to(DT)
                        calls = [lambda a=a: fn(a[0], cos, sin) for a in bufs]
                    else:
                        calls = [lambda a=a: fn(*a) for a in bufs]
                    for c in calls[:2]:  # compile (once per kind: dynamic shapes) and warm up
                        c()
                    state = {"i": 0}

                    def step():
                        calls[state["i"] % len(calls)]()
                        state["i"] += 1

                    per_call = graph_seconds(step, captures=len(calls), replays=5) / len(calls)
                except Exception as e:  # noqa: BLE001 - recorded, not fatal
                    print(f"{name} {mode} tokens {tokens}: {type(e).__name__}: {e}"[:300], flush=True)
                    continue
                finally:
                    torch.cuda.empty_cache()
                wr.writerow([name, mode, elements, moved, f"{per_call:.6e}", f"{moved / per_call / 1e9:.1f}"])
                f.flush()
                rows.append((name, mode, elements, moved / per_call / 1e9))
            line = " ".join(f"{e >> 20}M:{g:.0f}" for n, m, e, g in rows if n == name and m == mode)
            print(f"{name:9s} {mode:8s} GB/s by size: {line}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    ap.add_argument("--budget-s", type=float, default=150.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    env = environment()
    print("\n".join(env), flush=True)
    run_steps([("membound", lambda: run(args.out, start + args.budget_s))], env,
              os.path.join(args.out, "env-membound.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
