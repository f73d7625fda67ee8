#!/usr/bin/env python3
"""Time whole training iterations of Megatron-Core's own GPT model on one GPU.

Our code; the model, its layers, the schedule, the gradient buffers and the distributed optimizer are
Megatron-Core's (a source checkout given by --megatron; docs/gpu-measurements.md names the commit). Nothing of
Megatron-LM's training script runs: this builds `GPTModel` with Megatron-Core's local layer spec (no Transformer
Engine, no Apex on the machine: torch norms, unfused attention with a torch softmax, eager rotary embedding and
activations, one GEMM per expert for mixture-of-experts layers), wraps it in Megatron-Core's
`DistributedDataParallel` (fp32 gradient buffer) and `get_megatron_optimizer` (distributed optimizer, fp32
master weights; torch's AdamW since neither fused Adam is installed), and runs `get_forward_backward_func()`
(no pipeline) over the microbatches, then `optimizer.step()`, as Megatron-LM's `train_step` does.

Per case: 3 warm-up iterations, then 6 timed (CUDA events around the forward-backward part and the optimizer
step, a host clock around the whole, a synchronize after each), the peak memory over the timed iterations,
and one more iteration under torch.profiler: kernels counted and summed by class, and the GPU's busy time
(the union of kernel intervals) against the iteration's wall time, which tells a host-bound iteration from a
GPU-bound one.

Writes megatron-step.csv (one row per case; peak memory counted from what the case allocated, not what earlier
cases left), megatron-step-kernels.csv (kernel classes per case), megatron-step-top.csv (the 40 longest kernels
by name and the 25 operators with the most host time, per case) and megatron-step-env.txt. With the case
name attention-ops in --cases, megatron-attention-ops.csv: every operator of one forward and backward of the
local core attention alone, with its input shapes and GPU time. Run: python3 tools/gpu/megatron_step.py --megatron DIR --out "$OUT"
"""
import argparse
import csv
import gc
import os
import statistics
import sys
import time
import traceback
from functools import partial

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import environment, run_steps  # noqa: E402

# The three shapes: one Llama 2 7B block stack (SwiGLU, RMSNorm, rotary), GPT-2 XL as Megatron-LM's GPT
# (LayerNorm, GELU, biases, learned positions, tied embedding, dropout 0.1) and Qwen3-30B-A3B's blocks with 16
# experts of top 8, which hands each expert the tokens / 2 rows per microbatch that one rank's local experts
# get at expert-parallel size 8 of its 128 experts.
CASES = {
    "llama2-7b-8l": dict(kind="llama", layers=8, hidden=4096, heads=32, groups=32, kv=128, ffn=11008,
                         vocab=32000, seq=4096, mb=1, mbs=4, rope=10000),
    "gpt2-xl": dict(kind="gpt", layers=48, hidden=1600, heads=25, groups=25, kv=64, ffn=6400,
                    vocab=50304, seq=1024, mb=8, mbs=4),
    "qwen3-moe-4l": dict(kind="qwen3_moe", layers=4, hidden=2048, heads=32, groups=4, kv=128, ffn=6144,
                         moe_ffn=768, experts=16, topk=8, vocab=151936, seq=4096, mb=1, mbs=4, rope=1000000),
}
# Variants: the microbatch count (what a step costs once, against what each microbatch costs), a microbatch of
# one sequence where the host may set the pace, and full recomputation (Megatron-Core's uniform method, one
# block per checkpoint).
CASES["llama2-7b-8l-m1"] = dict(CASES["llama2-7b-8l"], mbs=1)
CASES["llama2-7b-8l-m8"] = dict(CASES["llama2-7b-8l"], mbs=8)
CASES["llama2-7b-8l-full"] = dict(CASES["llama2-7b-8l"], recompute=True)
CASES["gpt2-xl-mb1"] = dict(CASES["gpt2-xl"], mb=1)
# The same blocks with the core attention replaced by PyTorch's fused SDPA (our module below): what is left is
# Megatron-Core's local norms, rotary embedding, activations, residuals, loss, router and dispatcher.
CASES["llama2-7b-8l-sdpa"] = dict(CASES["llama2-7b-8l"], sdpa=True)
CASES["qwen3-moe-4l-sdpa"] = dict(CASES["qwen3-moe-4l"], sdpa=True)


def sdpa_attention_class():
    """Megatron-Core's DotProductAttention with its forward replaced by one causal fused SDPA call."""
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    class SdpaAttention(DotProductAttention):
        def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                    packed_seq_params=None, **kwargs):
            # [s, b, heads, d] -> [b, heads, s, d]
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=k.size(1) != q.size(1))
            return o.permute(2, 0, 1, 3).reshape(o.size(2), o.size(0), -1)

    return SdpaAttention


def setup_megatron(path):
    sys.path.insert(0, path)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    torch.cuda.set_device(0)
    torch.distributed.init_process_group(backend="nccl", world_size=1, rank=0)
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(1234)


def build(case):
    from megatron.core.distributed import (DistributedDataParallel, DistributedDataParallelConfig,
                                           finalize_model_grads)
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.enums import AttnBackend
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    gpt = case["kind"] == "gpt"
    moe = case["kind"] == "qwen3_moe"
    dropout = 0.1 if gpt else 0.0
    kwargs = dict(num_layers=case["layers"], hidden_size=case["hidden"], num_attention_heads=case["heads"],
                  num_query_groups=case["groups"], kv_channels=case["kv"], ffn_hidden_size=case["ffn"],
                  hidden_dropout=dropout, attention_dropout=dropout, bf16=True, params_dtype=torch.bfloat16,
                  pipeline_dtype=torch.bfloat16, transformer_impl="local", attention_backend=AttnBackend.local,
                  normalization="LayerNorm" if gpt else "RMSNorm", add_bias_linear=gpt,
                  gated_linear_unit=not gpt, activation_func=F.gelu if gpt else F.silu,
                  qk_layernorm=moe, layernorm_epsilon=1e-5 if gpt else 1e-6)
    if case.get("recompute"):
        kwargs.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    if moe:
        kwargs.update(num_moe_experts=case["experts"], moe_router_topk=case["topk"],
                      moe_ffn_hidden_size=case["moe_ffn"], moe_token_dispatcher_type="alltoall",
                      moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3,
                      moe_router_dtype="fp32")
    config = TransformerConfig(**kwargs)
    spec = get_gpt_layer_local_spec(num_experts=case.get("experts"), qk_layernorm=moe,
                                    normalization="LayerNorm" if gpt else "RMSNorm")
    if case.get("sdpa"):
        spec.submodules.self_attention.submodules.core_attention = sdpa_attention_class()
    model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=case["vocab"],
                     max_sequence_length=case["seq"], share_embeddings_and_output_weights=gpt,
                     position_embedding_type="learned_absolute" if gpt else "rope",
                     rotary_base=case.get("rope", 10000)).cuda()
    model = Float16Module(config, model)
    ddp_config = DistributedDataParallelConfig(grad_reduce_in_fp32=True, overlap_grad_reduce=False,
                                               use_distributed_optimizer=True)
    model = DistributedDataParallel(config=config, ddp_config=ddp_config, module=model)
    opt_config = OptimizerConfig(optimizer="adam", lr=1e-4, weight_decay=0.1, adam_beta1=0.9,
                                 adam_beta2=0.95, bf16=True, params_dtype=torch.bfloat16,
                                 use_distributed_optimizer=True, clip_grad=1.0)
    optimizer = get_megatron_optimizer(opt_config, [model])
    config.finalize_model_grads_func = finalize_model_grads
    config.no_sync_func = model.no_sync
    config.grad_scale_func = optimizer.scale_loss
    params = sum(p.numel() for p in model.parameters())
    return model, optimizer, params


def loss_func(output_tensor):
    loss = output_tensor.float().mean()
    return loss, {"lm loss": loss.detach()}


def forward_step(data_iterator, model, seq):
    tokens, labels = next(data_iterator)
    positions = torch.arange(seq, device="cuda").unsqueeze(0).expand_as(tokens)
    return model(tokens, positions, None, labels=labels), loss_func


def kernel_class(name):
    n = name.lower()
    for cls, keys in (("gemm", ("gemm", "cutlass", "xmma", "nvjet", "cublas")),
                      ("softmax", ("softmax",)),
                      ("norm", ("norm",)),
                      ("optimizer", ("multi_tensor", "adam", "foreach")),
                      ("reduce", ("reduce", "sum_kernel", "max_kernel")),
                      ("copy", ("copy", "cat", "index", "gather", "scatter", "sort", "topk")),
                      ("elementwise", ("elementwise", "vectorized", "unrolled"))):
        if any(k in n for k in keys):
            return cls
    return "other"


def busy_seconds(intervals):
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def run_case(name, case, rows, kernel_rows, top_rows):
    try:
        measure_case(name, case, rows, kernel_rows, top_rows)
    except Exception:
        traceback.print_exc()
        raise


def measure_case(name, case, rows, kernel_rows, top_rows):
    from megatron.core.pipeline_parallel import get_forward_backward_func
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    left = torch.cuda.memory_allocated()
    t0 = time.time()
    model, optimizer, params = build(case)
    print(f"{name}: built, {params / 1e9:.3f} B parameters in {time.time() - t0:.1f} s", flush=True)
    seq, mb, mbs = case["seq"], case["mb"], case["mbs"]
    batches = [(torch.randint(0, case["vocab"], (mb, seq), device="cuda"),
                torch.randint(0, case["vocab"], (mb, seq), device="cuda")) for _ in range(mbs)]
    fwd_bwd = get_forward_backward_func()
    step = partial(forward_step, seq=seq)

    def iteration(events=None):
        model.zero_grad_buffer()
        optimizer.zero_grad()
        if events:
            events[0].record()
        losses = fwd_bwd(forward_step_func=step, data_iterator=iter(batches), model=[model],
                         num_microbatches=mbs, seq_length=seq, micro_batch_size=mb, forward_only=False)
        if events:
            events[1].record()
        ok, grad_norm, _ = optimizer.step()
        if events:
            events[2].record()
        return losses, ok, grad_norm

    for _ in range(3):
        losses, ok, grad_norm = iteration()
    torch.cuda.synchronize()
    print(f"{name}: warm, loss {float(losses[-1]['lm loss']):.3f}, step ok {ok}, grad norm {grad_norm}",
          flush=True)
    torch.cuda.reset_peak_memory_stats()
    walls, fb, opt = [], [], []
    for _ in range(6):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        torch.cuda.synchronize()
        w0 = time.perf_counter()
        iteration(ev)
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - w0)
        fb.append(ev[0].elapsed_time(ev[1]) / 1e3)
        opt.append(ev[1].elapsed_time(ev[2]) / 1e3)
    peak = torch.cuda.max_memory_allocated() - left
    reserved = torch.cuda.max_memory_reserved()

    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        w0 = time.perf_counter()
        iteration()
        torch.cuda.synchronize()
        prof_wall = time.perf_counter() - w0
    intervals, classes = [], {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() > 0:
            intervals.append((e.time_range.start / 1e6, e.time_range.end / 1e6))
            c = classes.setdefault(kernel_class(e.name), [0, 0.0])
            c[0] += 1
            c[1] += e.time_range.elapsed_us() / 1e6
    busy = busy_seconds(intervals)
    kernels = len(intervals)
    for cls, (count, secs) in sorted(classes.items()):
        kernel_rows.append([name, cls, count, f"{secs:.6e}"])
    by_name = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() > 0:
            k = by_name.setdefault(e.name[:160], [0, 0.0])
            k[0] += 1
            k[1] += e.time_range.elapsed_us() / 1e6
    for kname, (count, secs) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:40]:
        top_rows.append([name, "gpu", kname, count, f"{secs:.6e}"])
    for a in sorted(prof.key_averages(), key=lambda a: -a.self_cpu_time_total)[:25]:
        top_rows.append([name, "cpu", a.key[:160], a.count, f"{a.self_cpu_time_total / 1e6:.6e}"])
    rows.append([name, case["layers"], case["hidden"], seq, mb, mbs, params,
                 f"{statistics.median(walls):.6e}", f"{statistics.median(fb):.6e}",
                 f"{statistics.median(opt):.6e}", f"{min(walls):.6e}", f"{max(walls):.6e}",
                 peak, reserved, kernels, f"{busy:.6e}", f"{prof_wall:.6e}"])
    print(f"{name}: iteration {statistics.median(walls) * 1e3:.1f} ms (forward-backward "
          f"{statistics.median(fb) * 1e3:.1f}, optimizer {statistics.median(opt) * 1e3:.1f}), peak "
          f"{peak / 2**30:.2f} GiB, {kernels} kernels, GPU busy {busy * 1e3:.1f} of {prof_wall * 1e3:.1f} ms",
          flush=True)
    del model, optimizer, batches


def profile_attention(out):
    """One forward and backward of Megatron-Core's local DotProductAttention alone (Llama 2 7B's 32 heads of
    128, sequence 4096, microbatch 1): every operator with its input shapes and the GPU time of the kernels it
    launched, so each pass over the scores can be named."""
    from megatron.core.transformer.dot_product_attention import DotProductAttention
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.transformer_config import TransformerConfig
    from torch.profiler import ProfilerActivity, profile
    c = CASES["llama2-7b-8l"]
    config = TransformerConfig(num_layers=1, hidden_size=c["hidden"], num_attention_heads=c["heads"],
                               kv_channels=c["kv"], ffn_hidden_size=c["ffn"], attention_dropout=0.0,
                               bf16=True, params_dtype=torch.bfloat16, transformer_impl="local")
    attn = DotProductAttention(config, layer_number=1, attn_mask_type=AttnMaskType.causal,
                               attention_type="self").cuda()
    q, k, v = (torch.randn(c["seq"], 1, c["heads"], c["kv"], device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))

    def once():
        o = attn(q, k, v, None)
        o.backward(torch.ones_like(o))

    for _ in range(2):
        once()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        once()
        torch.cuda.synchronize()
    rows = []
    for a in prof.key_averages(group_by_input_shape=True):
        gpu = getattr(a, "self_device_time_total", getattr(a, "self_cuda_time_total", 0.0))
        if gpu > 0:
            rows.append([a.key[:120], str(a.input_shapes)[:200], a.count, f"{gpu / 1e6:.6e}"])
    rows.sort(key=lambda r: -float(r[3]))
    with open(os.path.join(out, "megatron-attention-ops.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["operator", "input_shapes", "calls", "self_gpu_seconds"])
        w.writerows(rows)
    for r in rows[:30]:
        print("attention op:", *r, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megatron", required=True, help="a Megatron-LM source checkout (holds megatron/core)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = environment()
    env_path = os.path.join(args.out, "megatron-step-env.txt")
    rows, kernel_rows, top_rows = [], [], []
    def setup():
        try:
            setup_megatron(args.megatron)
        except Exception:
            traceback.print_exc()
            raise

    steps = [("setup", setup)]
    steps += [(n, partial(run_case, n, CASES[n], rows, kernel_rows, top_rows)) for n in args.cases.split(",")
              if n != "attention-ops"]
    if "attention-ops" in args.cases.split(","):
        steps.append(("attention-ops", partial(profile_attention, args.out)))
    try:
        run_steps(steps, env, env_path)
    finally:
        with open(os.path.join(args.out, "megatron-step.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["case", "layers", "hidden", "seq", "microbatch", "microbatches", "parameters",
                        "iteration_s", "forward_backward_s", "optimizer_s", "iteration_min_s",
                        "iteration_max_s", "peak_allocated_bytes", "peak_reserved_bytes", "kernels",
                        "profiled_gpu_busy_s", "profiled_wall_s"])
            w.writerows(rows)
        with open(os.path.join(args.out, "megatron-step-kernels.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["case", "class", "kernels", "seconds"])
            w.writerows(kernel_rows)
        with open(os.path.join(args.out, "megatron-step-top.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["case", "side", "name", "calls", "seconds"])
            w.writerows(top_rows)


if __name__ == "__main__":
    main()
