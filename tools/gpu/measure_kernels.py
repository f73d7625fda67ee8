#!/usr/bin/env python3
"""Measure on one Hopper GPU how fast each fused-attention implementation runs, and what a kernel launch costs.

Our own code, PyTorch (and the Triton kernels its compiler generates) only; docs/gpu-measurements.md, section
"Attention kernels by implementation and launch costs". Writes into --out (default $OUT, else ./gpu-out):

  attention-kernels.csv  backend,b,heads,kv_heads,s,d,causal,pass,seconds,tflops
                 scaled_dot_product_attention forced onto each backend (cudnn, flash = PyTorch's FlashAttention-2,
                 efficient = the memory-efficient CUTLASS kernel, math = unfused matmul/softmax/matmul), and
                 flex = torch.compile'd flex_attention (a Triton flash-attention kernel), bf16, at head dimension
                 64 and 128, sequences 512 to 65536, 16384 tokens per call (b = 16384 / s, at least 1),
                 heads = 2048 / d (a 2048-wide layer). TFLOP/s count useful work: forward 4 b h s^2 d, forward +
                 backward 3.5 times that, halved when causal.
  attention-kernels-wide.csv  (--shapes wide) the same at head dimension 256, and at 128 with grouped-query
                 attention (kv_heads = heads / 4), sequences 1024, 4096, 16384
  launch.csv     op,mode,count,seconds_per_op
                 eager: the host's time per launch (many back-to-back launches of one tiny op from Python, then
                 one synchronize; the GPU is idle-bound, so the wall time per op is the host's cost);
                 graph: the GPU's time per tiny kernel when a CUDA graph replays them back to back.
  env-kernels.txt GPU, clocks, versions

Timing as tools/gpu/measure.py (its Timer: warm-ups, each repetition after an L2 flush, CUDA events, median).
Run: python3 tools/gpu/measure_kernels.py --out "$OUT" --budget-s 300
     python3 tools/gpu/measure_kernels.py --out "$OUT" --shapes wide --backends cudnn,flash,flex --skip-launch
"""
import argparse
import csv
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import DEV, DT, Timer, environment, graph_seconds, run_steps  # noqa: E402

SEQUENCES = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
TOKENS = 16384
WIDTH = 2048


def attention_cases(shapes="narrow"):
    """(d, query heads, key/value heads, b, s). `narrow`: head dimension 128 and 64, every sequence; `wide`: head
    dimension 256, and 128 with grouped-query attention (4 query heads per key/value head), at three sequences."""
    if shapes == "wide":
        for s in (1024, 4096, 16384):
            yield 256, WIDTH // 256, WIDTH // 256, max(1, TOKENS // s), s
            yield 128, WIDTH // 128, WIDTH // 512, max(1, TOKENS // s), s
        return
    for d in (128, 64):
        for s in SEQUENCES:
            yield d, WIDTH // d, WIDTH // d, max(1, TOKENS // s), s


def sdpa_runner(backend, q, k, v, go, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    chosen = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
              "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[backend]

    gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}

    def fwd():
        with sdpa_kernel([chosen]), torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)

    def fwd_bwd():
        with sdpa_kernel([chosen]):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
        o.backward(go)

    return fwd, fwd_bwd


_flex = {}


def flex_runner(q, k, v, go, causal, s):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    if "fn" not in _flex:
        import torch._dynamo as dynamo
        dynamo.config.cache_size_limit = 64
        if hasattr(dynamo.config, "recompile_limit"):
            dynamo.config.recompile_limit = 64
        _flex["fn"] = torch.compile(flex_attention, dynamic=False)
    fn = _flex["fn"]
    mask = None
    if causal:
        mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, B=None, H=None, Q_LEN=s, KV_LEN=s, device=DEV)

    def fwd():
        with torch.no_grad():
            fn(q, k, v, block_mask=mask)

    def fwd_bwd():
        o = fn(q, k, v, block_mask=mask)
        o.backward(go)

    return fwd, fwd_bwd


def run_attention(timer, out, deadline, backends, shapes):
    path = os.path.join(out, "attention-kernels.csv" if shapes == "narrow" else "attention-kernels-wide.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["backend", "b", "heads", "kv_heads", "s", "d", "causal", "pass", "seconds", "tflops"])
        for backend in backends:
            for d, heads, kv_heads, b, s in attention_cases(shapes):
                causal = True
                if time.time() > deadline:
                    print(f"budget reached before {backend} d {d} s {s}", flush=True)
                    return
                if backend == "math" and b * heads * s * s * 2 > 6 << 30:  # scores, probabilities, their grads
                    continue
                if backend == "flex" and (s not in (1024, 4096, 16384) or kv_heads != heads):  # compiles anew
                    continue
                q = torch.randn(b, heads, s, d, dtype=DT, device=DEV, requires_grad=True)
                k = torch.randn(b, kv_heads, s, d, dtype=DT, device=DEV, requires_grad=True)
                v = torch.randn(b, kv_heads, s, d, dtype=DT, device=DEV, requires_grad=True)
                go = torch.randn(b, heads, s, d, dtype=DT, device=DEV)
                work = 4.0 * b * heads * s * s * d * (0.5 if causal else 1.0)
                t0 = time.time()
                try:
                    if backend == "flex":
                        fwd, fwd_bwd = flex_runner(q, k, v, go, causal, s)
                    else:
                        fwd, fwd_bwd = sdpa_runner(backend, q, k, v, go, causal)
                    tf_ = timer(fwd, min_reps=3, max_reps=10)
                    tfb = timer(fwd_bwd, min_reps=3, max_reps=10)
                except Exception as e:  # noqa: BLE001 - recorded, not fatal
                    print(f"{backend} d {d} s {s}: {type(e).__name__}: {e}"[:300], flush=True)
                    del q, k, v, go
                    torch.cuda.empty_cache()
                    continue
                w.writerow([backend, b, heads, kv_heads, s, d, int(causal), "fwd", f"{tf_:.6e}",
                            f"{work / tf_ / 1e12:.2f}"])
                w.writerow([backend, b, heads, kv_heads, s, d, int(causal), "fwd+bwd", f"{tfb:.6e}",
                            f"{3.5 * work / tfb / 1e12:.2f}"])
                f.flush()
                print(f"{backend:9s} d {d:3d} kv {kv_heads:2d}/{heads:2d} s {s:6d} b {b:2d}: fwd {work / tf_ / 1e12:6.1f} fwd+bwd "
                      f"{3.5 * work / tfb / 1e12:6.1f} TFLOP/s ({time.time() - t0:.1f} s)", flush=True)
                del q, k, v, go
                torch.cuda.empty_cache()


def run_launch(out):
    """Host time per eager launch, and GPU time per kernel in a CUDA graph, for tiny ops."""
    x = torch.zeros(1, device=DEV)
    a = torch.randn(64, 64, dtype=DT, device=DEV)
    ln_in = torch.randn(16, 768, dtype=DT, device=DEV)
    ln_w = torch.ones(768, dtype=DT, device=DEV)
    ops = {"add": lambda: x.add_(1.0), "mm64": lambda: torch.mm(a, a),
           "layer_norm": lambda: F.layer_norm(ln_in, (768,), ln_w, ln_w)}
    rows = []
    for name, fn in ops.items():
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        n = 20000
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        rows.append((name, "eager", n, (time.perf_counter() - t0) / n))
        n_graph = 1000
        rows.append((name, "graph", n_graph, graph_seconds(fn, captures=n_graph) / n_graph))
        print(f"launch {name}: eager {rows[-2][3] * 1e6:.2f} us/op, graph {rows[-1][3] * 1e6:.2f} us/kernel",
              flush=True)
    with open(os.path.join(out, "launch.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "mode", "count", "seconds_per_op"])
        for r in rows:
            w.writerow([r[0], r[1], r[2], f"{r[3]:.6e}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--backends", default="cudnn,flash,efficient,math,flex")
    ap.add_argument("--shapes", default="narrow", choices=["narrow", "wide"])
    ap.add_argument("--skip-launch", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    env = environment()
    print("\n".join(env), flush=True)
    timer = Timer()
    steps = [("launch", lambda: run_launch(args.out)),
             ("attention", lambda: run_attention(timer, args.out, start + args.budget_s, args.backends.split(","),
                                                 args.shapes))]
    if args.skip_launch:
        steps = steps[1:]
    run_steps(steps, env, os.path.join(args.out, "env-kernels.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
