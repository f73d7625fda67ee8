#!/usr/bin/env python3
"""Measure the host's time per transformer block in eager PyTorch, where the GPU work is negligible.

Our own code, PyTorch only (docs/gpu-measurements.md, section "The host's time per op, on blocks it was not
derived from"). Blocks so small (hidden 256, 128 tokens, microbatch 1) that every kernel is far shorter than its
launch: the time of a forward + backward pass over a stack of them is the host's. Two architectures, each as
plain PyTorch modules under bf16 autocast with fp32 parameters:

  gpt    pre-LayerNorm, QKV and output linears with biases, causal SDPA with dropout 0.1, dropout + residual,
         LayerNorm, GELU-tanh MLP of 4h with biases, dropout + residual (tools/gpu/train_step.py's block)
  llama  RMSNorm, Q/K/V and output linears without biases, rotary embedding applied with plain tensor ops,
         causal SDPA with grouped-query heads (4 query heads per key/value head), residual, RMSNorm, SwiGLU MLP
         (gate and up linears, SiLU, product, down linear), residual

and, for each, the same stack captured in a CUDA graph (forward + backward replayed; the GPU's own time).
Writes host-overhead.csv: arch,mode,layers,hidden,seq,seconds_per_pass,seconds_per_block (median of 20).
Run: python3 tools/gpu/host_overhead.py --out "$OUT"
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
from measure import DEV, environment, graph_seconds, run_steps  # noqa: E402

HIDDEN, HEADS, SEQ, LAYERS = 256, 4, 128, 24


class GptBlock(torch.nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
        self.qkv, self.out = torch.nn.Linear(h, 3 * h), torch.nn.Linear(h, h)
        self.fc1, self.fc2 = torch.nn.Linear(h, 4 * h), torch.nn.Linear(4 * h, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
        x = x + F.dropout(self.out(a.transpose(1, 2).reshape(b, s, h)), 0.1)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh")), 0.1)


class LlamaBlock(torch.nn.Module):
    def __init__(self, h, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, h // heads
        self.n1, self.n2 = torch.nn.Parameter(torch.ones(h)), torch.nn.Parameter(torch.ones(h))
        self.q = torch.nn.Linear(h, h, bias=False)
        self.kv = torch.nn.Linear(h, 2 * kv_heads * self.d, bias=False)
        self.o = torch.nn.Linear(h, h, bias=False)
        self.gate_up = torch.nn.Linear(h, 2 * 4 * h, bias=False)
        self.down = torch.nn.Linear(4 * h, h, bias=False)

    def rope(self, t, cos, sin):
        t1, t2 = t[..., : self.d // 2], t[..., self.d // 2:]
        return torch.cat((t1 * cos - t2 * sin, t1 * sin + t2 * cos), dim=-1)

    def forward(self, x, cos, sin):
        b, s, h = x.shape
        y = F.rms_norm(x, (h,), self.n1)
        q = self.q(y).view(b, s, self.heads, self.d).transpose(1, 2)
        k, v = self.kv(y).view(b, s, 2, self.kv_heads, self.d).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, h))
        g, u = self.gate_up(F.rms_norm(x, (h,), self.n2)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Stack(torch.nn.Module):
    def __init__(self, arch):
        super().__init__()
        self.arch = arch
        if arch == "gpt":
            self.blocks = torch.nn.ModuleList(GptBlock(HIDDEN, HEADS) for _ in range(LAYERS))
        else:
            self.blocks = torch.nn.ModuleList(LlamaBlock(HIDDEN, HEADS, HEADS // 4 or 1) for _ in range(LAYERS))
        d = HIDDEN // HEADS
        pos = torch.arange(SEQ, dtype=torch.float32)[:, None] / (10000 ** (torch.arange(d // 2) / (d // 2)))
        self.register_buffer("cos", pos.cos())
        self.register_buffer("sin", pos.sin())

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x) if self.arch == "gpt" else blk(x, self.cos, self.sin)
        return x


def one_pass(model, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = model(x)
    y.float().sum().backward()


def run(out):
    rows = []
    for arch in ("gpt", "llama"):
        torch.manual_seed(0)
        model = Stack(arch).to(DEV)
        x = torch.randn(1, SEQ, HIDDEN, device=DEV, requires_grad=True)
        for _ in range(5):
            one_pass(model, x)
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            one_pass(model, x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        eager = statistics.median(times)
        rows.append((arch, "eager", eager))
        # The GPU's own time: the same forward + backward replayed from a CUDA graph (no dropout in the
        # captured GPT stack would change the kernels; dropout's RNG is graph-safe in PyTorch).
        graph_s = float("nan")
        try:
            model.zero_grad(set_to_none=False)
            graph_s = graph_seconds(lambda: one_pass(model, x), replays=20)
        except Exception as e:  # noqa: BLE001 - the eager number stands on its own
            print(f"{arch} graph capture: {type(e).__name__}: {e}"[:300], flush=True)
        rows.append((arch, "graph", graph_s))
        print(f"{arch}: eager {eager * 1e3:.2f} ms per forward+backward ({eager / LAYERS * 1e6:.0f} us per block), "
              f"CUDA graph {graph_s * 1e3:.3f} ms", flush=True)
    with open(os.path.join(out, "host-overhead.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arch", "mode", "layers", "hidden", "seq", "seconds_per_pass", "seconds_per_block"])
        for arch, mode, sec in rows:
            w.writerow([arch, mode, LAYERS, HIDDEN, SEQ, f"{sec:.6e}", f"{sec / LAYERS:.6e}"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = environment()
    print("\n".join(env), flush=True)
    run_steps([("host", lambda: run(args.out))], env, os.path.join(args.out, "env-host.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
