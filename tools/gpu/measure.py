#!/usr/bin/env python3
"""Measure on one GPU what phaze's datasheet cost model assumes (docs/gpu-measurements.md).

Writes into the folder given by --out (default $OUT, else ./gpu-out):
  gemm.csv       label,m,n,k,batch,seconds,tflops        C[m,n] = A[m,k] B[k,n], `batch` independent GEMMs
  attention.csv  label,backend,b,heads,s,d,causal,pass,seconds,tflops
  membound.csv   op,elements,bytes,seconds,gbps           bytes = each input read once + each output written
  env.txt        GPU, driver, clocks before/after, torch version

Timing: bf16 operands drawn from a normal distribution (never zeros), warm-ups first, then every repetition
timed alone with CUDA events after a 256 MiB write that evicts the 50 MiB L2, the median over repetitions.
Run: python3 tools/gpu/measure.py --out "$OUT"   (about 45 s on an H100 or H200).
"""
import argparse
import csv
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

DT = torch.bfloat16
DEV = "cuda"


def smi(query):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:  # noqa: BLE001 - best effort, recorded as text
        return f"nvidia-smi failed: {e}"


def environment():
    """The lines every measurement's env file starts with: date, versions, the GPU and its state."""
    props = torch.cuda.get_device_properties(0)
    return [f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
            f"torch: {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()}",
            f"device: {props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.1f} GiB, "
            f"L2 {getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MiB, cc {props.major}.{props.minor}",
            "nvidia-smi (before): " + smi("name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,"
                                          "power.draw,power.limit,temperature.gpu")]


def write_bandwidth_csv(path, rows):
    """Memory-bound kernels as op,elements,bytes,seconds,gbps from (op, elements, bytes, seconds) rows."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["op", "elements", "bytes", "seconds", "gbps"])
        for op, n, by, sec in rows:
            w.writerow([op, n, by, f"{sec:.6e}", f"{by / sec / 1e9:.1f}"])


def run_steps(steps, env, env_path):
    """Runs the (name, callable) steps in order. A step that fails is recorded in `env` and the next one runs,
    so one broken part keeps what the others measured; after each, the GPU's clock, power and temperature are
    appended and `env` is written to env_path."""
    for name, fn in steps:
        t0 = time.time()
        try:
            fn()
            env.append(f"{name}: {time.time() - t0:.0f} s")
        except Exception as e:  # noqa: BLE001 - keep what the other parts measured
            env.append(f"{name}: FAILED after {time.time() - t0:.0f} s: {type(e).__name__}: {e}"[:400])
        env.append(f"nvidia-smi (after {name}): " + smi("clocks.sm,power.draw,temperature.gpu"))
        print(env[-2], "|", env[-1], flush=True)
        with open(env_path, "w") as f:
            f.write("\n".join(env) + "\n")


def graph_seconds(fn, captures=1, replays=10):
    """The GPU's time of `captures` back-to-back calls of fn replayed from one CUDA graph (warmed up on a side
    stream, as capture needs), median of `replays` replays timed with CUDA events."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(captures):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(times)


class Timer:
    """Times a callable: warm-ups, then `reps` runs each after an L2 flush, median of event times."""

    def __init__(self, flush_bytes=256 << 20):
        self.flush_buf = torch.empty(flush_bytes // 4, dtype=torch.float32, device=DEV)

    def __call__(self, fn, warmup=3, min_reps=5, max_reps=30, budget_s=0.25):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        # one timed probe to choose the repetition count
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        probe = time.perf_counter() - t0
        reps = int(min(max_reps, max(min_reps, budget_s / max(probe, 1e-6))))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            self.flush_buf.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)]
        return statistics.median(times)


def randn(*shape):
    return torch.randn(*shape, dtype=DT, device=DEV)


# ------------------------------------------------------------------------------------------------ GEMMs
def linear_gemms(label, tokens, k_in, n_out):
    """The three GEMMs of a linear layer Y = X W^T (W stored [out, in] as nn.Linear does).
    Yields (label, m, n, k, fn) with C[m,n] and reduction k, operands laid out as autograd uses them."""
    x = randn(tokens, k_in)
    w = randn(n_out, k_in)
    dy = randn(tokens, n_out)
    yield f"{label}.fwd", tokens, n_out, k_in, lambda: torch.matmul(x, w.t())
    yield f"{label}.dx", tokens, k_in, n_out, lambda: torch.matmul(dy, w)
    yield f"{label}.dw", n_out, k_in, tokens, lambda: torch.matmul(dy.t(), x)


def plain_gemm(label, m, n, k):
    a = randn(m, k)
    b = randn(n, k)  # row-major [n,k] used transposed: the "TN" layout of a forward linear layer
    yield label, m, n, k, lambda: torch.matmul(a, b.t())


def transformer_shapes(model, h, ffn, s, gated):
    for b in (1, 2, 4):
        for t in (1, 2, 4, 8):
            tok = b * s
            tag = f"{model}.b{b}.t{t}"
            yield from linear_gemms(f"{tag}.qkv", tok, h, 3 * h // t)
            yield from linear_gemms(f"{tag}.attn_out", tok, h // t, h)
            yield from linear_gemms(f"{tag}.mlp_up", tok, h, (2 if gated else 1) * ffn // t)
            yield from linear_gemms(f"{tag}.mlp_down", tok, ffn // t, h)


def sweep_shapes():
    for k in (64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384):
        yield from plain_gemm("ksweep", 8192, 8192, k)
    for m in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048):
        yield from plain_gemm("smallm.n12288", m, 12288, 12288)
        yield from plain_gemm("smallm.n36864", m, 36864, 12288)
    for m in range(128, 4097, 128):  # wave/tile quantization along m
        yield from plain_gemm("msweep", m, 8192, 8192)
    for n in range(128, 4097, 128):  # ... and along n
        yield from plain_gemm("nsweep", 8192, n, 8192)
    for sq in (1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384):
        yield from plain_gemm("square", sq, sq, sq)


def run_gemms(timer, out):
    path = os.path.join(out, "gemm.csv")
    gens = [transformer_shapes("gpt3", 12288, 4 * 12288, 2048, False),
            transformer_shapes("llama2-7b", 4096, 11008, 4096, True), sweep_shapes()]
    n = 0
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "m", "n", "k", "batch", "seconds", "tflops"])
        for gen in gens:
            for label, m, nn, k, fn in gen:
                sec = timer(fn)
                tf = 2.0 * m * nn * k / sec / 1e12
                w.writerow([label, m, nn, k, 1, f"{sec:.6e}", f"{tf:.2f}"])
                n += 1
            f.flush()
            torch.cuda.empty_cache()
        # attention score and context GEMMs as batched matmuls over b * heads (GPT-3: 96 heads / t, d 128)
        s, d = 2048, 128
        for b in (1, 2, 4):
            for t in (1, 2, 4, 8):
                bh = b * 96 // t
                q, kk, v = randn(bh, s, d), randn(bh, s, d), randn(bh, s, d)
                p = randn(bh, s, s)
                do = randn(bh, s, d)
                tag = f"gpt3.b{b}.t{t}"
                cases = [(f"{tag}.qk", s, s, d, lambda: torch.bmm(q, kk.transpose(1, 2))),
                         (f"{tag}.av", s, d, s, lambda: torch.bmm(p, v)),
                         (f"{tag}.dp", s, s, d, lambda: torch.bmm(do, v.transpose(1, 2))),
                         (f"{tag}.dv", s, d, s, lambda: torch.bmm(p.transpose(1, 2), do))]
                for label, m, nn, k, fn in cases:
                    sec = timer(fn)
                    tf = 2.0 * bh * m * nn * k / sec / 1e12
                    w.writerow([label, m, nn, k, bh, f"{sec:.6e}", f"{tf:.2f}"])
                    n += 1
                del q, kk, v, p, do
                torch.cuda.empty_cache()
    return n


# ------------------------------------------------------------------------------------------------ attention
def run_attention(timer, out):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    path = os.path.join(out, "attention.csv")
    s, d = 2048, 128
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "backend", "b", "heads", "s", "d", "causal", "pass", "seconds", "tflops"])
        for b in (1, 2, 4):
            for t in (1, 2, 4, 8):
                heads = 96 // t
                q = torch.randn(b, heads, s, d, dtype=DT, device=DEV, requires_grad=True)
                k = torch.randn(b, heads, s, d, dtype=DT, device=DEV, requires_grad=True)
                v = torch.randn(b, heads, s, d, dtype=DT, device=DEV, requires_grad=True)
                go = torch.randn(b, heads, s, d, dtype=DT, device=DEV)
                for name, be in backends:
                    for causal in (False, True):
                        # forward 2 GEMMs (QK^T, PV) of 2*s*s*d each; backward 5 (incl. recompute of QK^T)
                        full = 4.0 * b * heads * s * s * d
                        frac = 0.5 if causal else 1.0
                        try:
                            with sdpa_kernel([be]):
                                def fwd():
                                    with torch.no_grad():
                                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                                def fwd_bwd():
                                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                                    o.backward(go)

                                tf_ = timer(fwd)
                                tfb = timer(fwd_bwd)
                        except Exception as e:  # noqa: BLE001 - a backend may not support a shape
                            print(f"sdpa {name} b{b} t{t} causal={causal}: {type(e).__name__}: {e}"[:300])
                            continue
                        q.grad = k.grad = v.grad = None
                        w.writerow([f"gpt3.b{b}.t{t}", name, b, heads, s, d, int(causal), "fwd",
                                    f"{tf_:.6e}", f"{full * frac / tf_ / 1e12:.2f}"])
                        w.writerow([f"gpt3.b{b}.t{t}", name, b, heads, s, d, int(causal), "fwd+bwd",
                                    f"{tfb:.6e}", f"{3.5 * full * frac / tfb / 1e12:.2f}"])
                del q, k, v, go
                torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------ memory-bound
def run_membound(timer, out):
    path = os.path.join(out, "membound.csv")
    rows = []
    e = 2  # bf16 bytes
    # device-to-device copies of several sizes (bytes = read + write)
    for mib in (64, 256, 1024, 4096):
        n = (mib << 20) // e
        a, b = randn(n), torch.empty(n, dtype=DT, device=DEV)
        rows.append(("copy", n, 2 * n * e, timer(lambda: b.copy_(a))))
        del a, b
    big = (1 << 30) // 4
    a32 = torch.randn(big, device=DEV)
    rows.append(("copy.fp32", big, 2 * big * 4, timer(lambda: a32.clone())))
    rows.append(("fill", big, big * 4, timer(lambda: a32.fill_(1.0))))
    del a32
    for b in (1, 4):
        for h in (4096, 12288):
            tok = b * 2048
            n = tok * h
            tag = f".b{b}.h{h}"
            x, y = randn(tok, h), randn(tok, h)
            g, beta = randn(h), randn(h)
            rows.append(("add" + tag, n, 3 * n * e, timer(lambda: torch.add(x, y))))
            rows.append(("gelu" + tag, n, 2 * n * e, timer(lambda: F.gelu(x, approximate="tanh"))))
            rows.append(("gelu_bwd" + tag, n, 3 * n * e,
                         timer(lambda: torch.ops.aten.gelu_backward(y, x, approximate="tanh"))))
            rows.append(("layernorm" + tag, n, 2 * n * e, timer(lambda: F.layer_norm(x, (h,), g, beta))))
            xr = x.detach().requires_grad_(True)
            gr = g.detach().requires_grad_(True)
            br = beta.detach().requires_grad_(True)

            def ln_fb():
                o = F.layer_norm(xr, (h,), gr, br)
                o.backward(y)

            # forward (read x, write o) + backward (read x, dy; write dx) as the minimum
            rows.append(("layernorm_fwd_bwd" + tag, n, 5 * n * e, timer(ln_fb)))
            rows.append(("softmax" + tag, n, 2 * n * e, timer(lambda: torch.softmax(x, dim=-1))))
            rows.append(("dropout" + tag, n, 2 * n * e, timer(lambda: F.dropout(x, 0.1, training=True))))
            rows.append(("dropout_add" + tag, n, 3 * n * e,
                         timer(lambda: torch.add(F.dropout(x, 0.1, training=True), y))))
            del x, y, xr
            torch.cuda.empty_cache()
    # attention-score softmax [b*heads, s, s] (unfused attention path)
    for bh in (96, 384):
        sc = randn(bh, 2048, 2048)
        n = sc.numel()
        rows.append((f"softmax.scores.bh{bh}", n, 2 * n * e, timer(lambda: torch.softmax(sc, dim=-1))))
        del sc
    write_bandwidth_csv(path, rows)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    ap.add_argument("--only", default="gemm,attention,membound")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True  # PyTorch's default
    env = environment()
    print("\n".join(env), flush=True)
    timer = Timer()
    # sanity: bf16 GEMM agrees with a float32 reference
    a, b = randn(1024, 1024), randn(1024, 1024)
    ref = a.float() @ b.float()
    err = ((a @ b).float() - ref).norm() / ref.norm()
    env.append(f"bf16 GEMM relative error vs fp32 reference: {err.item():.2e}")
    del a, b, ref
    t0 = time.time()
    only = set(args.only.split(","))
    if "gemm" in only:
        n = run_gemms(timer, args.out)
        env.append(f"gemm shapes: {n} in {time.time() - t0:.0f} s")
        print(env[-1], flush=True)
        env.append("nvidia-smi (after GEMMs): " + smi("clocks.sm,clocks.mem,power.draw,temperature.gpu"))
    if "attention" in only:
        t1 = time.time()
        run_attention(timer, args.out)
        env.append(f"attention in {time.time() - t1:.0f} s")
        print(env[-1], flush=True)
    if "membound" in only:
        t1 = time.time()
        rows = run_membound(timer, args.out)
        env.append(f"memory-bound ops in {time.time() - t1:.0f} s")
        for op, n, by, sec in rows:
            print(f"{op:32s} {by / sec / 1e9:8.1f} GB/s")
    env.append("nvidia-smi (end): " + smi("clocks.sm,clocks.mem,power.draw,temperature.gpu"))
    with open(os.path.join(args.out, "env.txt"), "w") as f:
        f.write("\n".join(env) + "\n")
    print("\n".join(env[-4:]))
    # short summary table last (the reply carries the tail of the output)
    with open(os.path.join(args.out, "gemm.csv")) if "gemm" in only else open(os.devnull) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if r["label"].startswith(("square", "ksweep")) or r["label"].endswith("b4.t1.mlp_up.fwd"):
            print(f"{r['label']:28s} {r['m']:>6s} {r['n']:>6s} {r['k']:>6s} {float(r['tflops']):7.1f} TFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
