#!/usr/bin/env python3
"""Measure on one Hopper GPU what phaze's FP8, long-sequence attention and overlap models assume.

Our own code, PyTorch and Triton only (docs/gpu-measurements.md, section "FP8 GEMMs, long-sequence attention
and compute/communication overlap"). Writes into --out (default $OUT, else ./gpu-out):

  fp8-gemm.csv   label,m,n,k,variant,seconds,tflops
                 every shape three times in the same run: bf16 (torch.matmul, A[m,k] B[n,k]^T), fp8 with fast
                 accumulation (torch._scaled_mm, e4m3 x e4m3 -> bf16, Transformer Engine's forward setting) and
                 fp8 with split accumulation (TE's setting for the two backward GEMMs)
  quantize.csv   op,elements,bytes,seconds,gbps
                 bf16 -> e4m3 scaled cast, and cast + transposed copy (two PyTorch kernels), amax
  attention-long.csv  label,b,heads,s_q,s_kv,d,causal,pass,seconds,tflops  (cuDNN SDPA, bf16)
  overlap.csv    case,ctas,compute_alone_s,comm_alone_s,compute_overlapped_s,comm_overlapped_s,makespan_s,
                 comm_gbps_alone
                 backward GEMMs of a Llama-3-8B block on one stream while a persistent Triton reduce kernel
                 (c = a + b over fp32 40M-element gradient buckets, Megatron's bucket size) runs on another
                 stream on a fixed number of CTAs (NCCL's channels are CTAs that stream memory)
  env-hopper.txt GPU, clocks, versions

Timing as tools/gpu/measure.py (its Timer: warm-ups, each repetition after an L2 flush, CUDA events, median).
Run: python3 tools/gpu/measure_hopper.py --out "$OUT"   (about 2 minutes on an H100 or H200).
"""
import argparse
import csv
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import DEV, DT, Timer, environment, randn, run_steps, write_bandwidth_csv  # noqa: E402

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0


def to_fp8(x):
    """Per-tensor scaled cast as TE's delayed/current scaling does: scale = 448 / amax."""
    scale = E4M3_MAX / x.abs().amax().float().clamp(min=1e-12)
    return (x.float() * scale).to(E4M3), (1.0 / scale).reshape(())


def block_shapes():
    """(label, m, n, k) of the four linear layers' forward, dgrad and wgrad GEMMs, all as TN GEMMs."""
    models = [  # name, hidden, qkv width (GQA), ffn, gated, sequence
        ("llama3-8b", 4096, 4096 + 2 * 8 * 128, 14336, True, 8192),
        ("llama3-70b", 8192, 8192 + 2 * 8 * 128, 28672, True, 8192),
        ("gpt3-175b", 12288, 3 * 12288, 4 * 12288, False, 2048),
    ]
    for name, h, qkv, ffn, gated, s in models:
        for t in (1, 2, 4, 8):
            tok = s  # microbatch 1
            layers = [("qkv", h, qkv // t), ("attn_out", h // t, h), ("mlp_up", h, (2 if gated else 1) * ffn // t),
                      ("mlp_down", ffn // t, h)]
            for lname, k_in, n_out in layers:
                tag = f"{name}.t{t}.{lname}"
                yield f"{tag}.fwd", tok, n_out, k_in
                yield f"{tag}.dx", tok, k_in, n_out
                yield f"{tag}.dw", n_out, k_in, tok
    for k in (128, 256, 512, 1024, 2048, 4096, 8192, 16384):
        yield "ksweep", 8192, 8192, k
    for sq in (1024, 2048, 4096, 8192, 16384):
        yield "square", sq, sq, sq


def run_fp8_gemms(timer, out):
    path = os.path.join(out, "fp8-gemm.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "m", "n", "k", "variant", "seconds", "tflops"])
        for label, m, n, k in block_shapes():
            a, b = randn(m, k), randn(n, k)
            a8, sa = to_fp8(a)
            b8, sb = to_fp8(b)
            cases = [("bf16", lambda: torch.matmul(a, b.t())),
                     ("fp8_fast", lambda: torch._scaled_mm(a8, b8.t(), sa, sb, out_dtype=DT, use_fast_accum=True)),
                     ("fp8_split", lambda: torch._scaled_mm(a8, b8.t(), sa, sb, out_dtype=DT,
                                                            use_fast_accum=False))]
            for variant, fn in cases:
                sec = timer(fn)
                w.writerow([label, m, n, k, variant, f"{sec:.6e}", f"{2.0 * m * n * k / sec / 1e12:.2f}"])
            del a, b, a8, b8
        f.flush()
    torch.cuda.empty_cache()


def fp8_check():
    a, b = randn(2048, 4096), randn(3072, 4096)
    a8, sa = to_fp8(a)
    b8, sb = to_fp8(b)
    got = torch._scaled_mm(a8, b8.t(), sa, sb, out_dtype=torch.float32).double()
    ref = a.double() @ b.double().t()
    return ((got - ref).norm() / ref.norm()).item()


def run_quantize(timer, out):
    path = os.path.join(out, "quantize.csv")
    rows = []
    for tokens, h in ((8192, 4096), (8192, 8192), (16384, 14336)):
        x = randn(tokens, h)
        n = x.numel()
        scale = torch.tensor(E4M3_MAX / 8.0, device=DEV)
        rows.append((f"amax.{tokens}x{h}", n, 2 * n, timer(lambda: x.abs().amax())))
        rows.append((f"cast.{tokens}x{h}", n, 3 * n, timer(lambda: (x * scale).to(E4M3))))

        def cast_t():
            y = (x * scale).to(E4M3)
            return y.t().contiguous()

        # what TE's fused cast-transpose must move: read 2 B, write 1 B twice = 4 B per element
        rows.append((f"cast+transpose.{tokens}x{h}", n, 4 * n, timer(cast_t)))
        del x
    write_bandwidth_csv(path, rows)
    return rows


def run_long_attention(timer, out):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    path = os.path.join(out, "attention-long.csv")
    d = 128
    cases = []
    for heads in (32, 8):  # Llama 3 8B query heads at tp 1 and tp 4
        for s in (2048, 4096, 8192, 16384, 32768, 65536):
            b = max(1, 16384 // s)
            cases.append((f"causal.h{heads}", b, heads, s, s, True))
    # a context-parallel rank: s/C queries against all s keys (no mask: the ring's off-diagonal steps)
    for s_kv, cp in ((32768, 8), (65536, 8), (131072, 16)):
        cases.append((f"cp{cp}.offdiag", 1, 32, s_kv // cp, s_kv, False))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "b", "heads", "s_q", "s_kv", "d", "causal", "pass", "seconds", "tflops"])
        for label, b, heads, sq, skv, causal in cases:
            q = torch.randn(b, heads, sq, d, dtype=DT, device=DEV, requires_grad=True)
            k = torch.randn(b, heads, skv, d, dtype=DT, device=DEV, requires_grad=True)
            v = torch.randn(b, heads, skv, d, dtype=DT, device=DEV, requires_grad=True)
            go = torch.randn(b, heads, sq, d, dtype=DT, device=DEV)
            work = 4.0 * b * heads * sq * skv * d * (0.5 if causal else 1.0)
            try:
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    def fwd():
                        with torch.no_grad():
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                    def fwd_bwd():
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        o.backward(go)

                    tf_ = timer(fwd, min_reps=3, max_reps=10)
                    tfb = timer(fwd_bwd, min_reps=3, max_reps=10)
            except Exception as e:  # noqa: BLE001 - recorded, not fatal
                print(f"sdpa {label} s {sq}/{skv}: {type(e).__name__}: {e}"[:300], flush=True)
                continue
            w.writerow([label, b, heads, sq, skv, d, int(causal), "fwd", f"{tf_:.6e}", f"{work / tf_ / 1e12:.2f}"])
            w.writerow([label, b, heads, sq, skv, d, int(causal), "fwd+bwd", f"{tfb:.6e}",
                        f"{3.5 * work / tfb / 1e12:.2f}"])
            f.flush()
            del q, k, v, go
            torch.cuda.empty_cache()


def run_overlap(out):
    import triton
    import triton.language as tl

    @triton.jit
    def reduce_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        step = tl.num_programs(0) * BLOCK
        for start in range(pid * BLOCK, n, step):
            offs = start + tl.arange(0, BLOCK)
            m = offs < n
            x = tl.load(a_ptr + offs, mask=m)
            y = tl.load(b_ptr + offs, mask=m)
            tl.store(c_ptr + offs, x + y, mask=m)

    n = 40_000_000  # Megatron's default DDP bucket: 40M fp32 gradient elements
    ga = torch.randn(n, device=DEV)
    gb = torch.randn(n, device=DEV)
    gc = torch.empty(n, device=DEV)

    def comm(ctas):
        reduce_kernel[(ctas,)](ga, gb, gc, n, BLOCK=4096, num_warps=8)

    # backward GEMMs of one Llama-3-8B block, microbatch 1 x 8192 tokens, tp 1 (dgrad and wgrad of 4 linears)
    tok, h, qkv, ffn = 8192, 4096, 6144, 14336
    gemms = []
    for k_in, n_out in ((h, qkv), (h, h), (h, 2 * ffn), (ffn, h)):
        x, wt, dy = randn(tok, k_in), randn(n_out, k_in), randn(tok, n_out)
        gemms.append((x, wt, dy))

    def compute():
        for x, wt, dy in gemms:
            torch.matmul(dy, wt)
            torch.matmul(dy.t(), x)

    s_comp = torch.cuda.Stream()
    s_comm_lo = torch.cuda.Stream()
    s_comm_hi = torch.cuda.Stream(priority=-1)  # NCCL and TE put communication on high-priority streams
    mode = {"comm_first": False, "s_comm": s_comm_lo}

    def timed(fn_comp, reps_comp, fn_comm, reps_comm):
        s_comm = mode["s_comm"]
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end_c = torch.cuda.Event(enable_timing=True)
        end_m = torch.cuda.Event(enable_timing=True)
        start.record()
        s_comp.wait_event(start)
        s_comm.wait_event(start)
        def launch_comp():
            with torch.cuda.stream(s_comp):
                for _ in range(reps_comp):
                    fn_comp()
                end_c.record(s_comp)

        def launch_comm():
            with torch.cuda.stream(s_comm):
                for _ in range(reps_comm):
                    fn_comm()
                end_m.record(s_comm)

        if mode["comm_first"]:
            launch_comm()
            launch_comp()
        else:
            launch_comp()
            launch_comm()
        torch.cuda.synchronize()
        return start.elapsed_time(end_c) * 1e-3, start.elapsed_time(end_m) * 1e-3

    rows = []
    for _ in range(3):
        compute()
        comm(32)
    torch.cuda.synchronize()
    reps_comp = 8
    variants = [("compute-first", False, s_comm_lo), ("comm-first", True, s_comm_lo),
                ("compute-first.comm-high-priority", False, s_comm_hi), ("comm-first.comm-high-priority", True,
                                                                         s_comm_hi)]
    for (vname, first, stream), ctas in [(v, c) for v in variants for c in (16, 32, 132)]:
        mode["comm_first"], mode["s_comm"] = first, stream
        comm(ctas)
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        tc = med([timed(compute, reps_comp, lambda: None, 0)[0] for _ in range(3)])
        one = med([timed(lambda: None, 0, lambda: comm(ctas), 4)[1] / 4 for _ in range(3)])
        reps_comm = max(1, round(tc / one))
        tm = med([timed(lambda: None, 0, lambda: comm(ctas), reps_comm)[1] for _ in range(3)])
        both = [timed(compute, reps_comp, lambda: comm(ctas), reps_comm) for _ in range(3)]
        oc = med([b[0] for b in both])
        om = med([b[1] for b in both])
        rows.append((f"llama3-8b.block.bwd+reduce40M.{vname}", ctas, tc, tm, oc, om, max(oc, om), 12.0 * n / one / 1e9))
        print(f"overlap {vname:34s} ctas {ctas:3d}: compute {tc * 1e3:7.2f} ms alone, {oc * 1e3:7.2f} overlapped; "
              f"reduce {tm * 1e3:7.2f} ms alone ({12.0 * n / one / 1e9:6.0f} GB/s), {om * 1e3:7.2f} overlapped",
              flush=True)
    with open(os.path.join(out, "overlap.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "ctas", "compute_alone_s", "comm_alone_s", "compute_overlapped_s", "comm_overlapped_s",
                    "makespan_s", "comm_gbps_alone"])
        for r in rows:
            w.writerow([r[0], r[1]] + [f"{v:.6e}" for v in r[2:7]] + [f"{r[7]:.1f}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    ap.add_argument("--only", default="fp8,quantize,attention,overlap")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = environment()
    print("\n".join(env), flush=True)
    env.append(f"fp8 e4m3 GEMM relative error vs float64 reference: {fp8_check():.2e}")
    print(env[-1], flush=True)
    timer = Timer()
    only = set(args.only.split(","))
    steps = [("fp8", lambda: run_fp8_gemms(timer, args.out)), ("quantize", lambda: run_quantize(timer, args.out)),
             ("attention", lambda: run_long_attention(timer, args.out)), ("overlap", lambda: run_overlap(args.out))]
    run_steps([(name, fn) for name, fn in steps if name in only], env, os.path.join(args.out, "env-hopper.txt"))
    # summary last
    p = os.path.join(args.out, "fp8-gemm.csv")
    if os.path.exists(p):
        with open(p) as f:
            rows = list(csv.DictReader(f))
        by = {}
        for r in rows:
            by.setdefault((r["label"], r["m"], r["n"], r["k"]), {})[r["variant"]] = float(r["tflops"])
        ratios = sorted(v["fp8_fast"] / v["bf16"] for v in by.values() if "bf16" in v and "fp8_fast" in v)
        if ratios:
            print(f"fp8_fast / bf16 over {len(ratios)} shapes: median {ratios[len(ratios) // 2]:.2f}, "
                  f"range {ratios[0]:.2f}-{ratios[-1]:.2f}")
        for key, v in by.items():
            if key[0] in ("square", "ksweep") or key[0].startswith("llama3-70b.t4"):
                print(f"{key[0]:28s} {key[1]:>6s} {key[2]:>6s} {key[3]:>6s} "
                      + " ".join(f"{n}={t:7.1f}" for n, t in v.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
