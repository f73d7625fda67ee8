#!/usr/bin/env python3
"""Measure a Mamba-2 mixer's kernels on one GPU as Megatron-Core runs them (docs/gpu-measurements.md, section
"Mamba-2 mixers").

Our own code around mamba_ssm's Triton kernels (state-spaces/mamba; not part of this project: give the folder
that holds its `mamba_ssm` package with --mamba; only its Triton SSD and gated-norm kernels are imported, none
of its compiled extensions). One microbatch of 8192 tokens, bf16, the mixer of one rank (tp 1) of Nemotron 3
Nano (hidden 2688; 64 heads of 64, state 128, 8 groups) and of Nemotron-H 8B (hidden 4096; 128 heads of 64),
chunks of 128 tokens. Timed with CUDA events after warm-ups (the first calls autotune the Triton kernels),
median of 10, forward alone and forward + backward (gradients by torch.autograd.grad: no accumulation):

  scan        mamba_chunk_scan_combined: the chunked state-space scan (x, dt with its bias and softplus, A, B,
              C, D), what mamba_split_conv1d_scan_combined runs after its convolution
  gated_norm  rmsnorm_fn with z (the output gated by SiLU(z), then RMSNorm per group), Megatron-Core's norm
  in_proj     the input projection (hidden -> 2 d_inner + 2 groups x state + heads), cuBLAS
  out_proj    the output projection (d_inner -> hidden), cuBLAS
  conv1d      the causal depthwise convolution of x, B and C with SiLU as plain PyTorch (F.conv1d; the
              causal-conv1d package's kernel, which Megatron-Core runs, is not imported)

--cases picks the cases and their order (also each at tp 2: half the heads and groups), --parts scan skips the
projections and the convolution. Writes mamba.csv: case, part, pass, tokens, seconds.
Run: python3 tools/gpu/measure_mamba.py --mamba .mamba --out "$OUT"
"""
import argparse
import csv
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import DEV, DT, environment, run_steps  # noqa: E402

TOKENS = 8192
CHUNK = 128
# (case, hidden, heads, head_dim, state, groups, conv taps): one rank at tp 1, and at tp 2 (half the heads and
# groups)
CASES = [("nemotron-3-nano", 2688, 64, 64, 128, 8, 4), ("nemotron-h-8b", 4096, 128, 64, 128, 8, 4),
         ("nemotron-3-nano.tp2", 2688, 32, 64, 128, 4, 4), ("nemotron-h-8b.tp2", 4096, 64, 64, 128, 4, 4)]


def timed(fn, warmup=5, reps=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(times)


def run(out, cases, parts):
    from mamba_ssm.ops.triton.layernorm_gated import rmsnorm_fn
    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined

    rows = []
    for name, h, heads, p, n, g, k in sorted((c for c in CASES if c[0] in cases), key=lambda c: cases.index(c[0])):
        torch.manual_seed(0)
        inner = heads * p
        b = 1

        def leaf(*shape, scale=1.0, dtype=DT):
            return (torch.randn(*shape, device=DEV, dtype=dtype) * scale).requires_grad_(True)

        x = leaf(b, TOKENS, heads, p)
        dt = leaf(b, TOKENS, heads)
        dt_bias = leaf(heads, dtype=torch.float32)
        a = (-torch.rand(heads, device=DEV) - 0.5).requires_grad_(True)
        bm = leaf(b, TOKENS, g, n, scale=0.1)
        cm = leaf(b, TOKENS, g, n, scale=0.1)
        d = leaf(heads, dtype=torch.float32)

        def scan():
            return mamba_chunk_scan_combined(x, dt, a, bm, cm, CHUNK, D=d, dt_bias=dt_bias, dt_softplus=True)

        y0 = scan()
        gy = torch.randn_like(y0)
        rows.append((name, "scan", "fwd", timed(lambda: scan())))
        scan_inputs = [x, dt, dt_bias, a, bm, cm, d]
        rows.append((name, "scan", "fwd+bwd", timed(lambda: torch.autograd.grad(scan(), scan_inputs, gy))))

        yn = leaf(b * TOKENS, inner)
        z = leaf(b * TOKENS, inner)
        w = leaf(inner)
        gn = torch.randn(b * TOKENS, inner, device=DEV, dtype=DT)

        def norm():
            return rmsnorm_fn(yn, w, None, z=z, eps=1e-5, group_size=inner // g, norm_before_gate=False)

        rows.append((name, "gated_norm", "fwd", timed(lambda: norm())))
        rows.append((name, "gated_norm", "fwd+bwd", timed(lambda: torch.autograd.grad(norm(), [yn, z, w], gn))))

        if "proj" not in parts:
            for r in rows[-4:]:
                print(f"{r[0]:20s} {r[1]:11s} {r[2]:8s} {r[3] * 1e3:8.3f} ms", flush=True)
            write(out, rows)
            continue
        hin = leaf(b * TOKENS, h)
        w_in = leaf(2 * inner + 2 * g * n + heads, h, scale=h ** -0.5)
        g_in = torch.randn(b * TOKENS, 2 * inner + 2 * g * n + heads, device=DEV, dtype=DT)
        rows.append((name, "in_proj", "fwd", timed(lambda: F.linear(hin, w_in))))
        rows.append((name, "in_proj", "fwd+bwd",
                     timed(lambda: torch.autograd.grad(F.linear(hin, w_in), [hin, w_in], g_in))))
        w_out = leaf(h, inner, scale=inner ** -0.5)
        g_out = torch.randn(b * TOKENS, h, device=DEV, dtype=DT)
        rows.append((name, "out_proj", "fwd", timed(lambda: F.linear(yn, w_out))))
        rows.append((name, "out_proj", "fwd+bwd",
                     timed(lambda: torch.autograd.grad(F.linear(yn, w_out), [yn, w_out], g_out))))

        channels = inner + 2 * g * n
        xc = leaf(b, channels, TOKENS)
        wc = leaf(channels, 1, k)
        bc = leaf(channels)
        g_c = torch.randn(b, channels, TOKENS, device=DEV, dtype=DT)

        def conv():
            return F.silu(F.conv1d(xc, wc, bc, padding=k - 1, groups=channels)[..., :TOKENS])

        rows.append((name, "conv1d", "fwd", timed(lambda: conv())))
        rows.append((name, "conv1d", "fwd+bwd", timed(lambda: torch.autograd.grad(conv(), [xc, wc, bc], g_c))))
        for r in rows[-10:]:
            print(f"{r[0]:20s} {r[1]:11s} {r[2]:8s} {r[3] * 1e3:8.3f} ms", flush=True)
        write(out, rows)


def write(out, rows):
    with open(os.path.join(out, "mamba.csv"), "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["case", "part", "pass", "tokens", "seconds"])
        for r in rows:
            wr.writerow([r[0], r[1], r[2], TOKENS, f"{r[3]:.6e}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    ap.add_argument("--mamba", required=True, help="the folder holding mamba_ssm's package")
    ap.add_argument("--cases", default="nemotron-3-nano,nemotron-h-8b",
                    help="comma-separated, in the order run: " + ", ".join(c[0] for c in CASES))
    ap.add_argument("--parts", default="scan,proj", help="scan (the scan and the gated norm), proj (the rest)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.mamba))
    os.makedirs(args.out, exist_ok=True)
    env = environment()
    print("\n".join(env), flush=True)
    order = args.cases.split(",")
    run_steps([("mamba", lambda: run(args.out, order, args.parts))], env, os.path.join(args.out, "env-mamba.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
