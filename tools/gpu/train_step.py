#!/usr/bin/env python3
"""Whole training iterations of GPT-style decoders on one GPU, to check `phaze estimate` against.

Our own code, plain PyTorch (no Megatron or HuggingFace model code). The model is the shape phaze's zoo
describes for the GPT family (include/phaze/model/transformer.hpp with the zoo's defaults):

- learned token + position embeddings, embedding dropout;
- pre-LayerNorm blocks: LN -> QKV linear (bias) -> causal attention through
  torch.nn.functional.scaled_dot_product_attention (attention dropout inside it) -> output linear (bias)
  -> dropout -> residual; LN -> fc1 (4h, bias) -> GELU (tanh) -> fc2 (bias) -> dropout -> residual;
- a final LayerNorm, an LM head tied to the token embedding, cross-entropy loss;
- dropout 0.1 everywhere (GPT-2's config; phaze's zoo GPT models have dropout on).

Precision: bf16 autocast over fp32 parameters, fp32 gradients, torch.optim.AdamW(fused=True) with fp32
moments. Per parameter that holds fp32 weights (4 B) + fp32 gradients (4 B) + two fp32 moments (8 B), and
during each microbatch autocast's bf16 copy of every weight (2 B): the 18 B per parameter that phaze counts
for bf16 training with Adam (bf16 weights + fp32 gradients + fp32 master + two moments), though held
differently (Megatron keeps bf16 weights and an fp32 master copy). Matrix work runs in bf16 as in Megatron.

Recomputation "full": every block runs under torch.utils.checkpoint (use_reentrant=False); its forward is
recomputed in the backward pass (Megatron's full/uniform recomputation with one block per chunk).

One iteration = `global_batch / microbatch` microbatches of forward + backward (gradients accumulated),
then the optimizer step and zeroing the gradients. Timed with CUDA events around the whole iteration
(after a synchronize), after warm-up iterations; the median over the timed iterations is recorded.
torch.cuda.max_memory_allocated is reset before the model is built and read after the last iteration.

Writes OUT/h100-sxm-train-step.csv (model,seq,microbatch,global_batch,recompute,iteration_s,
peak_mem_bytes), OUT/h100-sxm-train-step-detail.csv (every timed iteration, the optimizer step's median,
peak reserved memory) and OUT/h100-sxm-train-step-env.txt (versions, GPU, configurations that ran out of
memory or were skipped).
"""

import argparse
import csv
import gc
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as ckpt

# phaze zoo shapes (./build/phaze models): layers, hidden, heads, ffn, vocab
MODELS = {
    "gpt2": (12, 768, 12, 3072, 50257),
    "gpt2-xl": (48, 1600, 25, 6400, 50257),
    "megatron-gpt2-54": (54, 1920, 20, 7680, 51200),
}
DROPOUT = 0.1


class Block(nn.Module):
    def __init__(self, h, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, ffn)
        self.fc2 = nn.Linear(ffn, h)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(
            qkv[0], qkv[1], qkv[2], dropout_p=DROPOUT if self.training else 0.0, is_causal=True)
        att = att.transpose(1, 2).reshape(b, s, h)
        x = x + F.dropout(self.proj(att), DROPOUT, self.training)
        y = self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x + F.dropout(y, DROPOUT, self.training)


class GPT(nn.Module):
    def __init__(self, layers, h, heads, ffn, vocab, seq, recompute):
        super().__init__()
        self.recompute = recompute
        self.wte = nn.Embedding(vocab, h)
        self.wpe = nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads, ffn) for _ in range(layers))
        self.ln_f = nn.LayerNorm(h)
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, targets):
        s = tokens.shape[1]
        pos = torch.arange(s, device=tokens.device)
        x = F.dropout(self.wte(tokens) + self.wpe(pos), DROPOUT, self.training)
        for blk in self.blocks:
            if self.recompute:
                x = ckpt.checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied LM head
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def run_config(name, seq, micro, global_batch, recompute, warmup, iters):
    layers, h, heads, ffn, vocab = MODELS[name]
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    with torch.device("cuda"):  # build and initialize on the GPU (CPU init of 2.5B parameters takes ~20 s)
        model = GPT(layers, h, heads, ffn, vocab, seq, recompute)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    n_micro = global_batch // micro
    # a pool of random token batches (never constant data), rotated over microbatches
    pool = [torch.randint(0, vocab, (micro, seq + 1), device="cuda") for _ in range(4)]
    times, opt_times = [], []
    step = 0
    for it in range(warmup + iters):
        torch.cuda.synchronize()
        start, mid, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
        for _ in range(n_micro):
            batch = pool[step % len(pool)]
            step += 1
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(batch[:, :-1], batch[:, 1:])
            (loss / n_micro).backward()
        mid.record()
        opt.step()
        opt.zero_grad(set_to_none=True)
        end.record()
        torch.cuda.synchronize()
        if not math.isfinite(loss.item()):
            raise RuntimeError(f"non-finite loss {loss.item()}")
        if it >= warmup:
            times.append(start.elapsed_time(end) / 1e3)
            opt_times.append(mid.elapsed_time(end) / 1e3)
    peak = torch.cuda.max_memory_allocated()
    peak_reserved = torch.cuda.max_memory_reserved()
    nparams = sum(p.numel() for p in model.parameters())
    del model, opt, pool
    return times, opt_times, peak, peak_reserved, nparams, loss.item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--prefix", default="h100-sxm-train-step")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=420.0, help="skip configurations after this")
    ap.add_argument("--models", default="gpt2,gpt2-xl,megatron-gpt2-54")
    ap.add_argument("--micro", default="1,2,4,8,16")
    ap.add_argument("--accum", type=int, default=4, help="microbatches per iteration")
    args = ap.parse_args()
    t0 = time.time()
    seq = 1024
    torch.backends.cuda.matmul.allow_tf32 = True
    prop = torch.cuda.get_device_properties(0)
    env = [
        f"torch {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()}",
        f"gpu {torch.cuda.get_device_name(0)} sms {prop.multi_processor_count} "
        f"mem {prop.total_memory} cc {prop.major}.{prop.minor}",
        f"python {sys.version.split()[0]}",
        f"precision bf16 autocast, fp32 params/grads, AdamW(fused=True) fp32 moments; dropout {DROPOUT}; "
        f"warmup {args.warmup} iters, median of {args.iters}; global_batch = {args.accum} x microbatch",
    ]
    print("\n".join(env), flush=True)
    main_path = os.path.join(args.out, args.prefix + ".csv")
    detail_path = os.path.join(args.out, args.prefix + "-detail.csv")
    with open(main_path, "w", newline="") as fm, open(detail_path, "w", newline="") as fd:
        wm, wd = csv.writer(fm), csv.writer(fd)
        wm.writerow(["model", "seq", "microbatch", "global_batch", "recompute", "iteration_s",
                     "peak_mem_bytes"])
        wd.writerow(["model", "microbatch", "global_batch", "recompute", "params", "iteration_s_all",
                     "optimizer_s_median", "peak_reserved_bytes", "last_loss", "tflops_model"])
        for name in args.models.split(","):
            for recompute in (False, True):
                for micro in (int(x) for x in args.micro.split(",")):
                    gb = args.accum * micro
                    tag = f"{name} m{micro} gb{gb} {'full' if recompute else 'none'}"
                    if time.time() - t0 > args.budget_s:
                        env.append(f"skipped (time budget): {tag}")
                        print(env[-1], flush=True)
                        continue
                    result = None
                    try:
                        result = run_config(name, seq, micro, gb, recompute, args.warmup, args.iters)
                    except torch.OutOfMemoryError:
                        pass
                    gc.collect()
                    torch.cuda.empty_cache()
                    if result is None:
                        env.append(f"out of memory: {tag}")
                        print(env[-1], flush=True)
                        break  # larger microbatches will not fit either
                    times, opt_times, peak, peak_res, n, loss = result
                    med = statistics.median(times)
                    tflops = 6 * n * gb * seq / med / 1e12  # rough 6N per token, no attention
                    wm.writerow([name, seq, micro, gb, "full" if recompute else "none", f"{med:.6f}", peak])
                    wd.writerow([name, micro, gb, "full" if recompute else "none", n,
                                 " ".join(f"{t:.6f}" for t in times), f"{statistics.median(opt_times):.6f}",
                                 peak_res, f"{loss:.4f}", f"{tflops:.1f}"])
                    fm.flush()
                    fd.flush()
                    print(f"{tag}: {med * 1e3:.2f} ms (min {min(times) * 1e3:.2f} max "
                          f"{max(times) * 1e3:.2f}), opt {statistics.median(opt_times) * 1e3:.2f} ms, "
                          f"peak {peak / 2**30:.2f} GiB, ~{tflops:.0f} TFLOP/s 6N, loss {loss:.3f}, "
                          f"t={time.time() - t0:.0f}s", flush=True)
    env.append(f"total wall {time.time() - t0:.1f} s")
    with open(os.path.join(args.out, args.prefix + "-env.txt"), "w") as f:
        f.write("\n".join(env) + "\n")
    print(env[-1])


if __name__ == "__main__":
    main()
