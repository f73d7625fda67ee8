#!/usr/bin/env python3
"""Measure on one GPU the rate of fused memory-bound kernels, the kind Transformer Engine and Megatron-Core run
around the GEMMs of a training step (docs/gpu-measurements.md, section "Fused memory-bound kernels").

phaze costs every memory-bound op at `memory_efficiency` (0.9) of the HBM bandwidth, the FP8 quantization
included; the unfused PyTorch kernels measured earlier (measure.py, measure_hopper.py) ran at 0.1 to 0.9 of it.
Transformer Engine fuses these ops, and this machine has no Transformer Engine, so the fused kernels here are
Triton kernels that torch.compile (TorchInductor) generates from the plain PyTorch below: one kernel (or one
reduction and one pointwise kernel) per op, what a fusing compiler achieves. Our own code, PyTorch only.

Writes into --out (default $OUT, else ./gpu-out):
  fused.csv   op,elements,bytes,seconds,gbps  (bytes: what the fused kernel must read and write, counted as
              phaze counts them; elements: of the op's main tensor)
  fused-env.txt  GPU, clocks, versions
Each op at tokens 8192 (sequence 8192, microbatch 1) and the widths of Llama 3 8B and 70B layers at tensor
parallel widths 1 and 4. Timing as measure.py (warm-ups, L2 flush before each repetition, CUDA events,
median). Run: python3 tools/gpu/measure_fused.py --out "$OUT"  (about 3 minutes: compilation dominates).
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import DEV, DT, Timer, environment, randn, smi, write_bandwidth_csv  # noqa: E402

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0


def amax(x):
    """Current scaling's first pass: the absolute maximum (reads the tensor once)."""
    return x.abs().amax()


def cast(x, scale):
    """Delayed scaling's cast: scaled e4m3 copy and the amax for the next step, one pass."""
    return (x.float() * scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3), x.abs().amax()


def cast_transpose(x, scale):
    """The cast plus the transposed e4m3 copy a wgrad / dgrad GEMM reads (Hopper FP8 GEMMs are TN only)."""
    y = (x.float() * scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return y, y.t().contiguous(), x.abs().amax()


def rmsnorm_cast(x, w, scale):
    """RMSNorm whose output is cast for the next FP8 GEMM (TE's LayerNormLinear), plus the 1/rms it keeps."""
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
    y = (xf * r * w.float() * scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return y, r


def rmsnorm_backward(dy, x, w, r):
    """dx of RMSNorm from the kept input and 1/rms (the weight gradient's reduction left out)."""
    xf, dyf = x.float(), dy.float()
    g = dyf * w.float()
    dot = (g * xf).mean(-1, keepdim=True)
    return ((g - xf * r * r * dot) * r).to(DT)


def swiglu_cast(a, scale):
    """SwiGLU of the gate/up output [t, 2f] into the FP8 input of the down projection [t, f]."""
    f = a.shape[-1] // 2
    g, u = a[:, :f].float(), a[:, f:].float()
    return (torch.nn.functional.silu(g) * u * scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)


def swiglu_backward(dy, a):
    """d(gate, up) [t, 2f] from dy [t, f] and the kept gate/up output."""
    f = a.shape[-1] // 2
    g, u, d = a[:, :f].float(), a[:, f:].float(), dy.float()
    s = torch.sigmoid(g)
    dg = d * u * s * (1 + g * (1 - s))
    du = d * g * s
    return torch.cat([dg, du], dim=-1).to(DT)


def rope(x, cos, sin):
    """Rotary embedding of [t, heads, d] (half-split rotation)."""
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d].float(), x[..., d:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(DT)


def residual_add(x, y):
    return x + y


def cases(tokens):
    """(op, elements, bytes, make_args, fn) per op and width, bytes as phaze counts a fused pass."""
    widths = [  # (label, hidden per rank, ffn per rank, heads per rank)
        ("8b.t1", 4096, 14336, 32), ("8b.t4", 1024, 3584, 8), ("70b.t1", 8192, 28672, 64), ("70b.t4", 2048, 7168, 16)]
    for label, h, ffn, heads in widths:
        n_h, n_f = tokens * h, tokens * ffn
        for width_label, n, w in (("h", n_h, h), ("ffn", n_f, ffn)):
            yield f"amax.{label}.{width_label}", n, 2 * n, (lambda w=w: (randn(tokens, w),)), amax
            yield f"cast.{label}.{width_label}", n, 3 * n, (lambda w=w: (randn(tokens, w), torch.tensor(
                1.0, device=DEV))), cast
            yield f"cast_transpose.{label}.{width_label}", n, 4 * n, (lambda w=w: (randn(tokens, w), torch.tensor(
                1.0, device=DEV))), cast_transpose
        yield f"rmsnorm_cast.{label}", n_h, 3 * n_h, (lambda h=h: (randn(tokens, h), randn(h), torch.tensor(
            1.0, device=DEV))), rmsnorm_cast
        yield f"rmsnorm_backward.{label}", n_h, 6 * n_h, (lambda h=h: (
            randn(tokens, h), randn(tokens, h), randn(h), torch.rand(tokens, 1, device=DEV) + 0.5)), rmsnorm_backward
        yield f"swiglu_cast.{label}", n_f, 5 * n_f, (lambda f=ffn: (randn(tokens, 2 * f), torch.tensor(
            1.0, device=DEV))), swiglu_cast
        yield f"swiglu_backward.{label}", n_f, 10 * n_f, (lambda f=ffn: (randn(tokens, f), randn(tokens, 2 * f))), \
            swiglu_backward
        yield f"rope.{label}", n_h, 4 * n_h, (lambda hd=heads: (randn(tokens, hd, 128), randn(tokens, 1, 64).float(),
                                                                 randn(tokens, 1, 64).float())), rope
        yield f"residual_add.{label}", n_h, 6 * n_h, (lambda h=h: (randn(tokens, h), randn(tokens, h))), residual_add


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--budget-s", type=float, default=400.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    env = environment()
    torch._dynamo.config.cache_size_limit = 64  # one compilation per op and shape
    timer = Timer()
    compiled = {}
    rows = []
    for op, n, by, make, fn in cases(args.tokens):
        if time.time() - start > args.budget_s:
            env.append(f"budget reached before {op}")
            break
        kernel = compiled.setdefault(fn.__name__, torch.compile(fn, dynamic=False))
        inputs = make()
        try:
            with torch.no_grad():
                sec = timer(lambda: kernel(*inputs))
        except Exception as e:  # noqa: BLE001 - a failed compilation is recorded, the others go on
            env.append(f"{op}: compilation failed ({type(e).__name__}: {str(e)[:200]})")
            continue
        rows.append((op, n, by, sec))
        print(f"{op:32s} {by / sec / 1e9:8.1f} GB/s", flush=True)
        write_bandwidth_csv(os.path.join(args.out, "fused.csv"), rows)
    env.append("nvidia-smi (end): " + smi("clocks.sm,clocks.mem,power.draw"))
    env.append(f"torch {torch.__version__}, compiled by TorchInductor, {time.time() - start:.0f} s")
    with open(os.path.join(args.out, "fused-env.txt"), "w") as f:
        f.write("\n".join(env) + "\n")


if __name__ == "__main__":
    main()
