#!/usr/bin/env python3
"""Measure whole mixture-of-experts blocks on one GPU: what one expert-parallel rank runs per microbatch.

Our own code, PyTorch only (docs/gpu-measurements.md, section "Whole mixture-of-experts blocks"). Each case is
one rank's share of a published run's block, its collectives left out (one GPU): the attention sublayer on the
rank's tokens, the router over all experts, and the rank's local experts fed the rows a balanced router sends
them (tokens x top_k rows, expert e of the model computed by local expert e mod local_experts). bf16, one
microbatch of 4096 tokens, a stack of LAYERS blocks, forward and backward (weight and input gradients by
torch.autograd.grad, so no gradient accumulation kernels: as Megatron-Core's fused wgrad accumulation).

  block            RMSNorm, Q and K/V linears, per-head RMSNorm of queries and keys (Qwen3) where the case has
                   it, rotary embedding (rotate-half), causal grouped-query SDPA (cuDNN or FlashAttention-2),
                   output linear, residual; RMSNorm, router (linear to every expert, fp32 softmax, top-k,
                   renormalised probabilities, the switch load-balancing loss), permutation (stable argsort of
                   expert ids, index_select of the tokens), the sort of rows by local expert (a second
                   index_select), the experts' SwiGLU MLP, the gate-weighted inverse permutation (index_add_),
                   residual.

Experts run in four modes, each in moe-block.csv (case, mode, pass, layers, seconds, seconds_per_block):

  graph_grouped       torch._grouped_mm with device-side offsets, the whole stack captured in one CUDA graph:
                      the GPU's own time
  eager_grouped       the same, launched eagerly from Python (no device-to-host copy anywhere)
  eager_grouped_sync  the same plus one device-to-host copy of the tokens per local expert per block forward,
                      where Megatron-Core's all-to-all dispatcher synchronises (before the expert-parallel
                      all-to-all, to learn its split sizes)
  eager_loop_sync     that copy, then one GEMM per local expert from the host's split sizes (as Transformer
                      Engine's GroupedLinear launches them)

and components captured alone (moe-block-parts.csv: case, part, seconds per block, forward + backward, CUDA
graph): attention sublayer, router, permutation (both copies and the inverse), experts (grouped).
moe-block-kernels.csv: case, mode, kernels per block forward + backward (torch.profiler's CUDA events).
moe-block-profile.csv: case, kernel, calls and seconds per block of every kernel of eager_grouped's forward +
backward (torch.profiler).
moe-fp8.csv: case, gemm, variant, experts, m, n, k, seconds, tflops: the experts' forward GEMMs in bf16
(grouped) and FP8 (one torch._scaled_mm per expert, per-tensor scales; torch._scaled_grouped_mm, row-wise
scales), and the per-expert FP8 quantization of their input rows (fp8_experts below).
moe-fp8-passes.csv: the experts' GEMMs of all three passes per expert in bf16 and FP8, on one stream and on four
(fp8_expert_passes below).
Run: python3 tools/gpu/measure_moe_block.py --out "$OUT"   (about a minute on an H100).
"""
import argparse
import csv
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import DEV, DT, environment, graph_seconds, run_steps  # noqa: E402

LAYERS = 4
TOKENS = 4096

# (case, hidden, heads, kv_heads, head_dim, qk_norm, experts, local_experts, top_k, expert_ffn)
CASES = [
    ("qwen3-30b-a3b.ep16", 2048, 32, 4, 128, True, 128, 8, 8, 768),
    ("qwen3-30b-a3b.ep8", 2048, 32, 4, 128, True, 128, 16, 8, 768),
    ("gpt-oss-120b.ep8", 2880, 64, 8, 64, False, 128, 16, 4, 2880),
]


def param(*shape):
    return (torch.randn(*shape, device=DEV, dtype=DT) * shape[-1] ** -0.5).requires_grad_(True)


def ones(n):
    return torch.ones(n, device=DEV, dtype=DT, requires_grad=True)


class Block:
    """One MoE block's weights and its forward in the chosen expert mode."""

    def __init__(self, c, tokens=TOKENS, dense_ffn=0):
        (self.name, h, self.heads, self.kv, self.d, self.qk_norm, self.experts, self.local, self.k,
         self.f) = c
        self.h = h
        self.n1, self.n2 = ones(h), ones(h)
        self.wq = param(self.heads * self.d, h)
        self.wkv = param(2 * self.kv * self.d, h)
        self.wo = param(h, self.heads * self.d)
        self.qn, self.kn = ones(self.d), ones(self.d)
        self.wr = param(self.experts, h)
        # experts as [local, out, in]: _grouped_mm takes the transposed view [local, in, out]
        self.w1 = param(self.local, 2 * self.f, h)
        self.w2 = param(self.local, h, self.f)
        # the same experts as separate weights, one GEMM each (the loop mode)
        self.w1s = [param(2 * self.f, h) for _ in range(self.local)]
        self.w2s = [param(h, self.f) for _ in range(self.local)]
        # dense_ffn > 0: a dense SwiGLU MLP of that width in place of the experts (the host-time reference)
        self.dense_ffn = dense_ffn
        if dense_ffn:
            self.wd1, self.wd2 = param(2 * dense_ffn, h), param(h, dense_ffn)
        pos = torch.arange(tokens, dtype=torch.float32, device=DEV)[:, None]
        inv = 10000 ** (-torch.arange(self.d // 2, device=DEV, dtype=torch.float32) / (self.d // 2))
        ang = torch.cat((pos * inv, pos * inv), dim=-1)
        self.cos, self.sin = ang.cos().to(DT), ang.sin().to(DT)

    def params(self):
        dense = [self.wd1, self.wd2] if self.dense_ffn else []
        return [self.n1, self.n2, self.wq, self.wkv, self.wo, self.qn, self.kn, self.wr, self.w1, self.w2,
                *self.w1s, *self.w2s, *dense]

    def rope(self, t):
        t1, t2 = t[..., : self.d // 2], t[..., self.d // 2:]
        return t * self.cos + torch.cat((-t2, t1), dim=-1) * self.sin

    def attention(self, x):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        s, h = x.shape
        y = F.rms_norm(x, (h,), self.n1)
        q = F.linear(y, self.wq).view(s, self.heads, self.d)
        k, v = F.linear(y, self.wkv).view(s, 2, self.kv, self.d).unbind(1)
        if self.qk_norm:
            q, k = F.rms_norm(q, (self.d,), self.qn), F.rms_norm(k, (self.d,), self.kn)
        q, k = self.rope(q.transpose(0, 1)), self.rope(k.transpose(0, 1))
        v = v.transpose(0, 1)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                          SDPBackend.EFFICIENT_ATTENTION]):
            a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True, enable_gqa=True)[0]
        return x + F.linear(a.transpose(0, 1).reshape(s, self.heads * self.d), self.wo)

    def router(self, y):
        logits = F.linear(y, self.wr).float()
        probs = torch.softmax(logits, dim=-1)
        top, ids = torch.topk(probs, self.k, dim=-1)
        top = top / top.sum(dim=-1, keepdim=True)
        # switch load-balancing loss: experts x sum(mean probability x share of routed rows)
        hits = torch.zeros(self.experts, device=DEV, dtype=torch.float32).scatter_add_(
            0, ids.reshape(-1), torch.ones(ids.numel(), device=DEV, dtype=torch.float32))
        aux = self.experts * (probs.mean(dim=0) * (hits / ids.numel())).sum()
        return top, ids, aux

    def experts_grouped(self, rows, offs):
        g, u = torch._grouped_mm(rows, self.w1.transpose(1, 2), offs=offs).chunk(2, dim=-1)
        return torch._grouped_mm(F.silu(g) * u, self.w2.transpose(1, 2), offs=offs)

    def experts_loop(self, rows, counts):
        outs = []
        for e, part in enumerate(rows.split(counts)):
            g, u = F.linear(part, self.w1s[e]).chunk(2, dim=-1)
            outs.append(F.linear(F.silu(g) * u, self.w2s[e]))
        return torch.cat(outs)

    def dispatch_orders(self, ids):
        """Permutation 1 groups the routed rows by expert (so by destination rank), permutation 2 regroups
        the received rows by local expert (after the all-to-all); both are gathers of every row."""
        flat = ids.reshape(-1)
        order1 = torch.argsort(flat, stable=True)
        local = flat[order1] % self.local
        order2 = torch.argsort(local, stable=True)
        counts = torch.zeros(self.local, device=DEV, dtype=torch.int32).scatter_add_(
            0, local, torch.ones_like(local, dtype=torch.int32))
        return order1, order2, counts

    def moe(self, x, mode):
        s, h = x.shape
        y = F.rms_norm(x, (h,), self.n2)
        top, ids, aux = self.router(y)
        order1, order2, counts = self.dispatch_orders(ids)
        src = order1 // self.k
        rows = y.index_select(0, src).index_select(0, order2)
        if mode in ("eager_grouped_sync", "eager_loop_sync"):
            host_counts = counts.tolist()  # the dispatcher's device-to-host copy: the host waits here
        if mode == "eager_loop_sync":
            out = self.experts_loop(rows, host_counts)
        else:
            out = self.experts_grouped(rows, torch.cumsum(counts, 0, dtype=torch.int32))
        out = torch.empty_like(out).index_copy_(0, order2, out)
        gate = top.reshape(-1)[order1].to(DT)[:, None]
        combined = torch.zeros_like(y).index_add_(0, src, out * gate)
        return x + combined, aux

    def dense(self, x):
        y = F.rms_norm(x, (self.h,), self.n2)
        g, u = F.linear(y, self.wd1).chunk(2, dim=-1)
        return x + F.linear(F.silu(g) * u, self.wd2), 0.0

    def forward(self, x, mode):
        if mode.endswith("dense"):
            return self.dense(self.attention(x))
        return self.moe(self.attention(x), mode)


def fwd_bwd(blocks, x, mode, backward=True):
    aux_total = 0.0
    y = x
    for b in blocks:
        y, aux = b.forward(y, mode)
        aux_total = aux_total + aux
    loss = y.float().sum() * 1e-3 + 1e-2 * aux_total
    if backward:
        params = [p for b in blocks for p in b.params()]
        torch.autograd.grad(loss, [x] + params, allow_unused=True)
    return loss


def eager_seconds(fn, reps=15):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def graph_or_nan(fn, label, tries=1):
    """graph_seconds(fn), or nan when its capture fails `tries` times (each failure printed): the other
    numbers stand on their own. A capture invalidated by an earlier one can take a second try."""
    for attempt in range(tries):
        try:
            torch.cuda.synchronize()
            return graph_seconds(fn, replays=10)
        except Exception as e:  # noqa: BLE001
            print(f"{label} graph (try {attempt + 1}): {type(e).__name__}: {e}"[:300], flush=True)
    return float("nan")


def kernel_profile(fn):
    """Each CUDA kernel's name, calls and summed time in one call of fn (torch.profiler); the calls summed are
    the kernels (and memsets) it launches."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    table = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        calls, us = table.get(e.name, (0, 0.0))
        table[e.name] = (calls + 1, us + e.time_range.elapsed_us())
    return table


def run_case(c, out_rows, part_rows, kernel_rows, profile_rows):
    torch.manual_seed(0)
    blocks = [Block(c) for _ in range(LAYERS)]
    name = c[0]
    x = (torch.randn(TOKENS, c[1], device=DEV, dtype=DT)).requires_grad_(True)
    for mode in ("eager_grouped", "eager_grouped_sync", "eager_loop_sync"):
        for passes, bwd in (("fwd+bwd", True), ("fwd", False)):
            sec = eager_seconds(lambda: fwd_bwd(blocks, x, mode, bwd))
            out_rows.append((name, mode, passes, LAYERS, sec))
            print(f"{name:22s} {mode:20s} {passes:8s} {sec / LAYERS * 1e3:8.3f} ms per block", flush=True)
        table = kernel_profile(lambda: fwd_bwd(blocks, x, mode, True))
        kernel_rows.append((name, mode, sum(calls for calls, _ in table.values()) / LAYERS))
        if mode == "eager_grouped":
            for kname, (calls, us) in sorted(table.items(), key=lambda kv: -kv[1][1]):
                profile_rows.append((name, kname[:120], calls / LAYERS, us * 1e-6 / LAYERS))
    for passes, bwd in (("fwd+bwd", True), ("fwd", False)):
        sec = graph_or_nan(lambda: fwd_bwd(blocks, x, "graph_grouped", bwd), name)
        out_rows.append((name, "graph_grouped", passes, LAYERS, sec))
        print(f"{name:22s} {'graph_grouped':20s} {passes:8s} {sec / LAYERS * 1e3:8.3f} ms per block", flush=True)

    # the components alone, forward + backward, each captured in a CUDA graph (one block's weights)
    b = blocks[0]
    y0 = F.rms_norm(x.detach(), (c[1],), b.n2).detach().requires_grad_(True)
    top0, ids0, _ = b.router(y0)
    order1, order2, counts0 = b.dispatch_orders(ids0)
    src0 = order1 // b.k
    offs0 = torch.cumsum(counts0, 0, dtype=torch.int32)
    rows0 = y0.detach().index_select(0, src0).index_select(0, order2).detach().requires_grad_(True)
    gate0 = top0.detach().reshape(-1)[order1].to(DT)[:, None]

    def attention_part():
        o = b.attention(x)
        torch.autograd.grad(o.float().sum(), [x, b.n1, b.wq, b.wkv, b.wo, b.qn, b.kn], allow_unused=True)

    def router_part():
        top, _, aux = b.router(y0)
        torch.autograd.grad(top.sum() + aux, [y0, b.wr])

    def permutation_part():
        r = y0.index_select(0, src0).index_select(0, order2)
        back = torch.empty_like(r).index_copy_(0, order2, r)
        o = torch.zeros_like(y0).index_add_(0, src0, back * gate0)
        torch.autograd.grad(o.float().sum(), [y0])

    def experts_part():
        o = b.experts_grouped(rows0, offs0)
        torch.autograd.grad(o.float().sum(), [rows0, b.w1, b.w2])

    for part, fn in (("attention", attention_part), ("router", router_part),
                     ("permutation", permutation_part), ("experts", experts_part)):
        sec = graph_or_nan(fn, f"{name} {part}", tries=2)
        part_rows.append((name, part, sec))
        print(f"{name:22s} part {part:12s} {sec * 1e3:8.3f} ms (graph, fwd+bwd)", flush=True)
    del blocks
    torch.cuda.empty_cache()


def run(out):
    out_rows, part_rows, kernel_rows, profile_rows = [], [], [], []
    for c in CASES:
        try:
            run_case(c, out_rows, part_rows, kernel_rows, profile_rows)
        except Exception as e:  # noqa: BLE001 - keep the other cases
            print(f"{c[0]}: FAILED {type(e).__name__}: {e}"[:400], flush=True)
        # written after every case, so a later failure keeps what was measured
        with open(os.path.join(out, "moe-block.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["case", "mode", "pass", "layers", "tokens", "seconds", "seconds_per_block"])
            for name, mode, passes, layers, sec in out_rows:
                w.writerow([name, mode, passes, layers, TOKENS, f"{sec:.6e}", f"{sec / layers:.6e}"])
        with open(os.path.join(out, "moe-block-parts.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["case", "part", "tokens", "seconds"])
            for name, part, sec in part_rows:
                w.writerow([name, part, TOKENS, f"{sec:.6e}"])
        with open(os.path.join(out, "moe-block-profile.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["case", "kernel", "calls_per_block", "seconds_per_block"])
            for name, kname, calls, sec in profile_rows:
                w.writerow([name, kname, f"{calls:.2f}", f"{sec:.6e}"])
        with open(os.path.join(out, "moe-block-kernels.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["case", "mode", "kernels_per_block"])
            for name, mode, n in kernel_rows:
                w.writerow([name, mode, f"{n:.1f}"])


HOST_TOKENS = 128


def host_time(out):
    """The host's time per block: the same blocks at HOST_TOKENS tokens, so small that the host paces every
    kernel, eager and (where no device-to-host copy stops a capture) as one CUDA graph, beside a dense block
    of the same attention and a SwiGLU MLP of the experts' width x top_k (the reference whose host time
    phaze's per-op constant describes). moe-block-host.csv: case, mode, tokens, layers, eager seconds per
    block, graph seconds per block, kernels per block (forward + backward)."""
    rows = []
    for c in CASES:
        name, f, k = c[0], c[9], c[8]
        torch.manual_seed(0)
        blocks = [Block(c, tokens=HOST_TOKENS, dense_ffn=f * k) for _ in range(LAYERS)]
        x = torch.randn(HOST_TOKENS, c[1], device=DEV, dtype=DT).requires_grad_(True)
        for mode in ("eager_dense", "eager_grouped", "eager_grouped_sync", "eager_loop_sync"):
            fn = lambda: fwd_bwd(blocks, x, mode, True)  # noqa: E731
            eager = eager_seconds(fn, reps=20)
            graph = float("nan")
            if "sync" not in mode:
                graph = graph_or_nan(lambda: fwd_bwd(blocks, x, mode.replace("eager", "graph"), True),
                                     f"{name} {mode}")
            kernels = sum(calls for calls, _ in kernel_profile(fn).values()) / LAYERS
            rows.append((name, mode, eager / LAYERS, graph / LAYERS, kernels))
            print(f"{name:22s} host {mode:20s} eager {eager / LAYERS * 1e3:7.3f} ms/block  graph "
                  f"{graph / LAYERS * 1e3:7.3f} ms/block  {kernels:6.1f} kernels/block", flush=True)
        del blocks
        torch.cuda.empty_cache()
        with open(os.path.join(out, "moe-block-host.csv"), "w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(["case", "mode", "tokens", "layers", "eager_seconds_per_block", "graph_seconds_per_block",
                         "kernels_per_block"])
            for r in rows:
                wr.writerow([r[0], r[1], HOST_TOKENS, LAYERS, f"{r[2]:.6e}", f"{r[3]:.6e}", f"{r[4]:.1f}"])


def fp8_experts(out):
    """The experts' forward GEMMs of each case (up: rows x hidden -> 2 x ffn, down: rows x ffn -> hidden) in
    bf16 (torch._grouped_mm) and FP8 E4M3: one torch._scaled_mm per local expert with per-tensor scales (the
    way Transformer Engine's GroupedLinear runs FP8 with current scaling: one GEMM per expert) and
    torch._scaled_grouped_mm with row-wise scales; and the per-tensor quantization of each expert's rows
    (amax, scale, cast). Each captured in a CUDA graph: the GPU's time."""
    rows_out = []
    f8 = torch.float8_e4m3fn
    for (name, h, _heads, _kv, _d, _qk, _experts, local, k, f) in CASES:
        m_total = TOKENS * k
        m = m_total // local
        offs = torch.arange(m, m_total + 1, m, device=DEV, dtype=torch.int32)
        for gemm, kk, nn in (("up", h, 2 * f), ("down", f, h)):
            a = torch.randn(m_total, kk, device=DEV, dtype=DT)
            w = torch.randn(local, nn, kk, device=DEV, dtype=DT)
            flops = 2.0 * m_total * kk * nn
            a8, w8 = a.to(f8), w.to(f8)
            one = torch.ones((), device=DEV, dtype=torch.float32)
            parts = a8.split(m)
            variants = [
                ("bf16_grouped", lambda: torch._grouped_mm(a, w.transpose(1, 2), offs=offs)),
                ("fp8_per_expert", lambda: [torch._scaled_mm(parts[e], w8[e].t(), scale_a=one, scale_b=one,
                                                             out_dtype=DT) for e in range(local)]),
                ("fp8_grouped_rowwise", lambda: torch._scaled_grouped_mm(
                    a8, w8.transpose(1, 2), torch.ones(m_total, device=DEV, dtype=torch.float32),
                    torch.ones(local, nn, device=DEV, dtype=torch.float32), offs=offs, out_dtype=DT)),
                ("fp8_quantize_per_expert", lambda: [(p * (448.0 / p.abs().amax().clamp(min=1e-12))).to(f8)
                                                     for p in a.split(m)]),
            ]
            for variant, fn in variants:
                sec = graph_or_nan(fn, f"{name} {gemm} {variant}")
                tflops = flops / sec / 1e12 if "quantize" not in variant else float("nan")
                rows_out.append((name, gemm, variant, local, m, nn, kk, sec, tflops))
                print(f"{name:22s} {gemm:5s} {variant:24s} {sec * 1e3:8.3f} ms {tflops:7.1f} TFLOP/s", flush=True)
            del a, w, a8, w8
        with open(os.path.join(out, "moe-fp8.csv"), "w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(["case", "gemm", "variant", "experts", "m", "n", "k", "seconds", "tflops"])
            for r in rows_out:
                wr.writerow([*r[:7], f"{r[7]:.6e}", f"{r[8]:.1f}"])


def fp8_expert_passes(out):
    """The experts' GEMMs of all three passes as Transformer Engine runs them in FP8 (one GEMM per local expert;
    forward with fast accumulation, data and weight gradients with split accumulation) against bf16 GEMMs of
    the same shapes, one expert after another on one stream and spread over four streams (TE's GroupedLinear
    uses a pool of streams). Shapes per local expert (M, N, K): forward up (m, 2f, h) and down (m, h, f); data
    gradients (m, h, 2f) and (m, f, h); weight gradients (2f, h, m) and (h, f, m). Each in a CUDA graph.
    moe-fp8-passes.csv: case, gemm, variant, experts, m, n, k, seconds, tflops."""
    rows_out = []
    f8 = torch.float8_e4m3fn
    one = torch.ones((), device=DEV, dtype=torch.float32)
    streams = [torch.cuda.Stream() for _ in range(4)]

    def spread(calls, multi):
        if not multi:
            for c in calls:
                c()
            return
        cur = torch.cuda.current_stream()
        for st in streams:
            st.wait_stream(cur)
        for i, c in enumerate(calls):
            with torch.cuda.stream(streams[i % len(streams)]):
                c()
        for st in streams:
            cur.wait_stream(st)

    for (name, h, _heads, _kv, _d, _qk, _experts, local, k, f) in CASES:
        m = TOKENS * k // local
        for gemm, mm, nn, kk, fast in (("fwd.up", m, 2 * f, h, True), ("fwd.down", m, h, f, True),
                                       ("dgrad.up", m, h, 2 * f, False), ("dgrad.down", m, f, h, False),
                                       ("wgrad.up", 2 * f, h, m, False), ("wgrad.down", h, f, m, False)):
            a = [torch.randn(mm, kk, device=DEV, dtype=DT) for _ in range(local)]
            b = [torch.randn(nn, kk, device=DEV, dtype=DT) for _ in range(local)]
            a8 = [t.to(f8) for t in a]
            b8 = [t.to(f8) for t in b]
            flops = 2.0 * local * mm * nn * kk
            bf16 = [lambda e=e: torch.mm(a[e], b[e].t()) for e in range(local)]
            fp8 = [lambda e=e: torch._scaled_mm(a8[e], b8[e].t(), scale_a=one, scale_b=one, out_dtype=DT,
                                                use_fast_accum=fast) for e in range(local)]
            for variant, calls, multi in (("bf16", bf16, False), ("bf16_streams", bf16, True),
                                          ("fp8", fp8, False), ("fp8_streams", fp8, True)):
                sec = graph_or_nan(lambda: spread(calls, multi), f"{name} {gemm} {variant}")
                rows_out.append((name, gemm, variant, local, mm, nn, kk, sec, flops / sec / 1e12))
                print(f"{name:22s} {gemm:10s} {variant:13s} {sec * 1e3:8.3f} ms {flops / sec / 1e12:7.1f} TFLOP/s",
                      flush=True)
            del a, b, a8, b8
        with open(os.path.join(out, "moe-fp8-passes.csv"), "w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(["case", "gemm", "variant", "experts", "m", "n", "k", "seconds", "tflops"])
            for r in rows_out:
                wr.writerow([*r[:7], f"{r[7]:.6e}", f"{r[8]:.1f}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    ap.add_argument("--parts", default="block,fp8,host,passes",
                    help="comma-separated: block, fp8, host, passes")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = environment() + [f"torch._grouped_mm available: {hasattr(torch, '_grouped_mm')}",
                           f"cpu: {os.cpu_count()} cores"]
    print("\n".join(env), flush=True)
    steps = {"block": ("moe-block", lambda: run(args.out)), "fp8": ("moe-fp8", lambda: fp8_experts(args.out)),
             "host": ("moe-host", lambda: host_time(args.out)),
             "passes": ("moe-fp8-passes", lambda: fp8_expert_passes(args.out))}
    run_steps([steps[p] for p in args.parts.split(",")], env,
              os.path.join(args.out, "env-moe-block.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
