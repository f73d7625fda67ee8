#!/usr/bin/env python3
"""Time whole transformer blocks, forward and backward, in FP8 and bf16 on one Hopper GPU, kernel by kernel.

Our own code, PyTorch only (docs/gpu-measurements.md, section "Whole FP8 and bf16 blocks"). It checks
phaze's block time where its parts were measured one by one: Llama 2 7B, Llama 3 8B and GPT-3 5B blocks, and one
tensor-parallel rank's share of Llama 2 70B, Llama 3 70B and GPT-3 175B blocks at tp 4, at the shapes of NeMo's
published H100 runs, built the way Transformer Engine runs them:

- every linear layer's three GEMMs in FP8 (torch._scaled_mm): forward E4M3 x E4M3 with fast accumulation,
  dgrad and wgrad E5M2 x E4M3 with split accumulation; weights cast once (TE caches them over the
  microbatches of an iteration), inputs and output gradients cast with a scale known in advance (delayed
  scaling) into FP8 and a transposed FP8 copy for the wgrad GEMM;
- attention in bf16 through cuDNN's fused kernel (scaled_dot_product_attention, causal, GQA as is);
- RMSNorm or LayerNorm, RoPE, SwiGLU or GELU, residual adds in bf16.

Two builds: `eager` (PyTorch's own kernels, one per operation) and `compiled` (the norms, RoPE, activations
and casts each compiled by torch.compile into fused kernels, as TE fuses them). `bf16` is the compiled build
with bf16 GEMMs. Each case runs forward + backward of one block on one microbatch; the median of CUDA-event
times is `wall_s`. One more run under torch.profiler sums the kernels by kind: GEMMs, attention, and the rest.

Writes into --out (default $OUT, else ./gpu-out):
  block.csv   model,build,tokens,hidden,heads,kv,ffn,tp,pass,wall_s,kernel_s,gemm_s,attention_s,other_s,kernels
  block-env.txt
Run: python3 tools/gpu/fp8_block.py --out "$OUT"   (about 3 minutes on an H100).
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
from measure import DEV, DT, environment  # noqa: E402

E4M3 = torch.float8_e4m3fn
E5M2 = torch.float8_e5m2

# name, hidden, heads, kv heads, ffn, mlp, norm, bias, sequence, microbatch, tensor-parallel width: the
# shapes of NeMo's published H100 runs. At tp > 1 the block is one rank's share (heads, kv heads and the MLP
# width divided by tp, norms over every token, no sequence parallelism) without its collectives.
SHAPES = [
    ("llama2-7b", 4096, 32, 32, 11008, "swiglu", "rms", False, 4096, 1, 1),
    ("llama3-8b", 4096, 32, 8, 14336, "swiglu", "rms", False, 8192, 1, 1),
    ("gpt3-5b", 4096, 32, 32, 16384, "gelu", "ln", True, 2048, 4, 1),
    ("llama2-70b", 8192, 64, 8, 28672, "swiglu", "rms", False, 4096, 1, 4),
    ("llama3-70b", 8192, 64, 8, 28672, "swiglu", "rms", False, 8192, 1, 4),
    ("gpt3-175b", 12288, 96, 96, 49152, "gelu", "ln", True, 2048, 1, 4),
]


def cast_pair(x, scale, dtype):
    """x (2-D) cast to FP8 with `scale`, as is and transposed (what TE's cast-transpose writes)."""
    y = (x.float() * scale).to(dtype)
    return y, y.t().contiguous()


def rope(x, cos, sin):
    """Rotate-half RoPE over the last dimension; x [b, s, heads, d], cos/sin [s, 1, d]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def swiglu(u):
    gate, up = u.chunk(2, dim=-1)
    return F.silu(gate) * up


def gelu(u):
    return F.gelu(u, approximate="tanh")


def rms_norm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, 1e-5)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


class Kernels:
    """The elementwise functions of a build: eager PyTorch, or each compiled by torch.compile."""

    def __init__(self, compiled):
        wrap = (lambda f: torch.compile(f, dynamic=False)) if compiled else (lambda f: f)
        self.cast_pair = wrap(cast_pair)
        self.rope = wrap(rope)
        self.swiglu = wrap(swiglu)
        self.gelu = wrap(gelu)
        self.rms_norm = wrap(rms_norm)
        self.layer_norm = wrap(layer_norm)
        self.inverses = {}

    def inverse(self, scale):
        """1 / scale, computed once per scale tensor (TE keeps scale and scale_inv side by side)."""
        key = scale.data_ptr()
        if key not in self.inverses:
            self.inverses[key] = (1.0 / scale).reshape(())
        return self.inverses[key]


class Fp8Linear(torch.autograd.Function):
    """y = x W^T + b with FP8 GEMMs; W arrives cast already (w8 [N, K] and w8t [K, N])."""

    @staticmethod
    def forward(ctx, x, weight, bias, w8, w8t, sx, sw, sg, kern):
        x8, x8t = kern.cast_pair(x, kern.inverse(sx), E4M3)
        y = torch._scaled_mm(x8, w8.t(), sx, sw, bias=bias, out_dtype=DT, use_fast_accum=True)
        ctx.save_for_backward(x8t, w8t, sx, sw, sg)
        ctx.kern = kern
        ctx.has_bias = bias is not None
        return y

    @staticmethod
    def backward(ctx, g):
        x8t, w8t, sx, sw, sg = ctx.saved_tensors
        g8, g8t = ctx.kern.cast_pair(g.contiguous(), ctx.kern.inverse(sg), E5M2)
        dx = torch._scaled_mm(g8, w8t.t(), sg, sw, out_dtype=DT, use_fast_accum=False)
        dw = torch._scaled_mm(g8t, x8t.t(), sg, sx, out_dtype=DT, use_fast_accum=False)
        db = g.sum(0) if ctx.has_bias else None
        return dx, dw, db, None, None, None, None, None, None


class Linear:
    def __init__(self, k_in, n_out, bias, fp8):
        self.weight = (torch.randn(n_out, k_in, device=DEV, dtype=DT) * k_in ** -0.5).requires_grad_()
        self.bias = torch.zeros(n_out, device=DEV, dtype=DT, requires_grad=True) if bias else None
        self.fp8 = fp8
        if fp8:
            amax = self.weight.detach().abs().amax().float()
            self.sw = (amax / 448.0).reshape(())
            w8 = (self.weight.detach().float() / self.sw).to(E4M3)
            self.w8, self.w8t = w8, w8.t().contiguous()
            # delayed scaling: input and gradient scales from an earlier iteration (fixed here)
            self.sx = torch.tensor(8.0 / 448.0, device=DEV)
            self.sg = torch.tensor(1e-3 / 57344.0 * 64, device=DEV)

    def __call__(self, x, kern):
        if self.fp8:
            return Fp8Linear.apply(x, self.weight, self.bias, self.w8, self.w8t, self.sx, self.sw, self.sg, kern)
        return F.linear(x, self.weight, self.bias)


class Block:
    def __init__(self, h, heads, kv, ffn, mlp, norm, bias, seq, mb, tp, fp8, kern):
        self.d = h // heads
        self.h, self.heads, self.kv = h, heads // tp, max(kv // tp, 1)
        self.mlp, self.norm, self.seq, self.mb, self.kern = mlp, norm, seq, mb, kern
        inner = self.heads * self.d
        self.qkv = Linear(h, inner + 2 * self.kv * self.d, bias, fp8)
        self.proj = Linear(inner, h, bias, fp8)
        self.fc1 = Linear(h, (2 if mlp == "swiglu" else 1) * ffn // tp, bias, fp8)
        self.fc2 = Linear(ffn // tp, h, bias, fp8)
        self.n1 = torch.ones(h, device=DEV, dtype=DT, requires_grad=True)
        self.n2 = torch.ones(h, device=DEV, dtype=DT, requires_grad=True)
        self.b1 = torch.zeros(h, device=DEV, dtype=DT, requires_grad=True) if norm == "ln" else None
        self.b2 = torch.zeros(h, device=DEV, dtype=DT, requires_grad=True) if norm == "ln" else None
        pos = torch.arange(seq, device=DEV, dtype=torch.float32)
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.d, 2, device=DEV, dtype=torch.float32) / self.d))
        ang = torch.outer(pos, inv)
        ang = torch.cat((ang, ang), dim=-1)
        self.cos = ang.cos().to(DT)[:, None, :]
        self.sin = ang.sin().to(DT)[:, None, :]

    def parameters(self):
        """Every tensor of the block that gets a gradient."""
        out = [self.n1, self.n2] + [t for t in (self.b1, self.b2) if t is not None]
        for lin in (self.qkv, self.proj, self.fc1, self.fc2):
            out += [lin.weight] + ([lin.bias] if lin.bias is not None else [])
        return out

    def normed(self, x, w, b):
        return self.kern.rms_norm(x, w) if self.norm == "rms" else self.kern.layer_norm(x, w, b)

    def __call__(self, x):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        k = self.kern
        t = x.shape[0]
        qkv = self.qkv(self.normed(x, self.n1, self.b1), k)
        q, kk, v = qkv.split([self.heads * self.d, self.kv * self.d, self.kv * self.d], dim=-1)
        shape = lambda z, n: z.reshape(self.mb, self.seq, n, self.d)  # noqa: E731
        q, kk, v = shape(q, self.heads), shape(kk, self.kv), shape(v, self.kv)
        if self.norm == "rms":  # the Llama blocks use RoPE; GPT-3 learned positions (in the embedding)
            q, kk = k.rope(q, self.cos, self.sin), k.rope(kk, self.cos, self.sin)
        q, kk, v = q.transpose(1, 2), kk.transpose(1, 2), v.transpose(1, 2)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
            try:
                o = F.scaled_dot_product_attention(q, kk, v, is_causal=True, enable_gqa=self.kv != self.heads)
            except RuntimeError:  # no fused kernel takes GQA as is: repeat the key/value heads
                r = self.heads // self.kv
                o = F.scaled_dot_product_attention(q, kk.repeat_interleave(r, 1), v.repeat_interleave(r, 1),
                                                   is_causal=True)
        o = o.transpose(1, 2).reshape(t, self.heads * self.d)
        x = x + self.proj(o, k)
        u = self.fc1(self.normed(x, self.n2, self.b2), k)
        a = k.swiglu(u) if self.mlp == "swiglu" else k.gelu(u)
        return x + self.fc2(a, k)


def kind_of(name):
    n = name.lower()
    if any(s in n for s in ("fmha", "flash", "sdpa", "attn", "attention")):
        return "attention"
    if any(s in n for s in ("gemm", "xmma", "cutlass", "nvjet", "cublas", "matmul")):
        return "gemm"
    return "other"


def profile(fn):
    from torch.profiler import ProfilerActivity, profile as prof
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    sums = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    count = 0
    for e in p.events():
        if e.device_type.name != "CUDA" or "memcpy" in e.name.lower() or "memset" in e.name.lower():
            continue
        sums[kind_of(e.name)] += e.time_range.elapsed_us() * 1e-6
        count += 1
    return sums, count


def time_it(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends))


def run_case(w, shape, build, reps, grads="write"):
    name, h, heads, kv, ffn, mlp, norm, bias, seq, mb, tp = shape
    fp8 = build != "bf16"
    kern = Kernels(compiled=build != "eager")
    block = Block(h, heads, kv, ffn, mlp, norm, bias, seq, mb, tp, fp8, kern)
    tokens = seq * mb
    x = (torch.randn(tokens, h, device=DEV, dtype=DT)).requires_grad_()
    go = torch.randn(tokens, h, device=DEV, dtype=DT) * 1e-3

    def fwd():
        with torch.no_grad():
            block(x)

    params = block.parameters() + [x]

    def fwd_bwd():
        # "write": each backward writes fresh gradients, as Megatron-Core's weight-gradient GEMMs accumulate
        # into main_grad in their epilogue (gradient accumulation fusion) with no separate add; "accumulate"
        # adds them to .grad with one elementwise kernel per tensor (6 bytes per parameter), what the
        # CSVs in tests/data/gpu/*-block.csv were recorded with.
        if grads == "write":
            for p in params:
                p.grad = None
        y = block(x)
        y.backward(go)

    for label, fn in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
        wall = time_it(fn, reps)
        sums, count = profile(fn)
        kernel = sum(sums.values())
        w.writerow([name, build, tokens, h, heads, kv, ffn, tp, label, f"{wall:.6e}", f"{kernel:.6e}",
                    f"{sums['gemm']:.6e}", f"{sums['attention']:.6e}", f"{sums['other']:.6e}", count])
        print(f"{name:10s} {build:8s} {label:8s} wall {wall * 1e3:8.3f} ms  kernels {kernel * 1e3:8.3f} ms "
              f"(gemm {sums['gemm'] * 1e3:.3f}, attention {sums['attention'] * 1e3:.3f}, "
              f"other {sums['other'] * 1e3:.3f}; {count} kernels)", flush=True)


def fp8_linear_check():
    """Relative error of one FP8 linear layer's output and input gradient against bf16's (should be ~0.05)."""
    kern = Kernels(compiled=False)
    lin = Linear(4096, 4096, False, True)
    lin.sx = torch.tensor(6.0 / 448.0, device=DEV)
    lin.sg = torch.tensor(6.0 / 57344.0, device=DEV)
    x = torch.randn(2048, 4096, device=DEV, dtype=DT, requires_grad=True)
    g = torch.randn(2048, 4096, device=DEV, dtype=DT)
    y = lin(x, kern)
    y.backward(g)
    dx8, dw8 = x.grad.clone(), lin.weight.grad.clone()
    x.grad, lin.weight.grad = None, None
    ref = F.linear(x, lin.weight)
    ref.backward(g)
    rel = lambda a, b: ((a.float() - b.float()).norm() / b.float().norm()).item()  # noqa: E731
    return rel(y, ref), rel(dx8, x.grad), rel(dw8, lin.weight.grad)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    ap.add_argument("--builds", default="eager,compiled,bf16")
    ap.add_argument("--models", default=",".join(s[0] for s in SHAPES))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=400.0)
    ap.add_argument("--grads", choices=("write", "accumulate"), default="write",
                    help="clear the gradients before each backward (write, the default) or add to them")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    import torch._dynamo
    for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 1024)
    print("fp8 linear vs bf16, relative error of y, dx, dw: %.4f %.4f %.4f" % fp8_linear_check(), flush=True)
    with open(os.path.join(args.out, "block-env.txt"), "w") as f:
        f.write("\n".join(environment()) + f"\ngrads: {args.grads}\n")
    path = os.path.join(args.out, "block.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "build", "tokens", "hidden", "heads", "kv", "ffn", "tp", "pass", "wall_s", "kernel_s",
                    "gemm_s", "attention_s", "other_s", "kernels"])
        for build in args.builds.split(","):
            for shape in SHAPES:
                if shape[0] not in args.models.split(","):
                    continue
                if time.time() - start > args.budget_s:
                    print(f"budget reached; skipping {shape[0]} {build}", flush=True)
                    continue
                try:
                    run_case(w, shape, build, args.reps, args.grads)
                except Exception as e:  # noqa: BLE001 - recorded, not fatal
                    print(f"{shape[0]} {build}: {type(e).__name__}: {e}"[:600], flush=True)
                f.flush()
                torch.cuda.empty_cache()
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
