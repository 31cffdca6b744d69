"""The train-GPT step on "tpu" in Strict, DeferAndFuse and compiled, with its model FLOPs
utilisation: the step's FLOPs counted from the model's shapes, over the step time, over the
device's peak (from its name; unknown devices, the CPU plugin among them, get no MFU).

    python benchmarks/train_mfu.py [--width 512 --layers 8 --block 256 --batch 16] [--json F]

FLOPs per step (forward and backward, 3x the forward's matmuls): 6 x the parameters of its
matmuls x tokens, plus attention's scores and weighted values, 12 x layers x width x block per
token (the masked half of the causal scores included: the kernels compute it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

import torchtpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from train_gpt import GPT, batches, load_text, training_step  # noqa: E402

# Dense peak FLOP/s by device name, (float32 through TF32 tensor cores, bfloat16), from the
# vendors' data sheets (SXM parts).
PEAKS = {
    "H200": (494e12, 989e12),
    "H100": (494e12, 989e12),
    "A100": (156e12, 312e12),
    "L4": (60e12, 121e12),
    "v5e": (None, 197e12),
    "v5p": (None, 459e12),
    "v6e": (None, 918e12),
}


def peak_flops(device_name: str, dtype: torch.dtype) -> float | None:
    for key, (fp32, bf16) in PEAKS.items():
        if key.lower() in device_name.lower():
            return bf16 if dtype == torch.bfloat16 else fp32
    return None


def step_flops(model: GPT, batch: int, block: int) -> float:
    matmul_params = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    tokens = batch * block
    width = model.tokens.embedding_dim
    layers = len(model.blocks)
    return 6 * matmul_params * tokens + 12 * layers * width * block * tokens


def measure(mode: str, args) -> float:
    """Median seconds per step of `args.steps` after `args.warmup`."""
    data, vocab = load_text()
    torch.manual_seed(0)
    model = GPT(vocab, args.block, args.width, args.layers, heads=args.heads).to("tpu")
    compile = mode == "compiled"
    step_fn = training_step(model, "tpu", compile=compile,
                            amp="bf16" if args.dtype == "bf16" else None)
    times = []
    with torchtpu.eager_mode("strict" if compile else mode):
        for step, (x, y) in zip(range(args.warmup + args.steps),
                                batches(data, args.block, args.batch, 0)):
            start = time.perf_counter()
            step_fn(x.to("tpu"), y.to("tpu")).item()
            if step >= args.warmup:
                times.append(time.perf_counter() - start)
    return statistics.median(times), step_flops(model, args.batch, args.block)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--block", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                        help="bf16: the forward under torch.autocast(bfloat16)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    name = torch.tpu.get_device_name()
    peak = peak_flops(name, torch.bfloat16 if args.dtype == "bf16" else torch.float32)
    print(f"train_gpt step on {name}: width {args.width}, {args.layers} layers, batch "
          f"{args.batch} x {args.block} tokens, {args.dtype}; median of {args.steps} steps")
    rows = {}
    for mode in ("strict", "defer_and_fuse", "compiled"):
        seconds, flops = measure(mode, args)
        mfu = flops / seconds / peak if peak else None
        rows[mode] = {"ms": seconds * 1e3, "tflops": flops / seconds / 1e12, "mfu": mfu}
        shown = f"{mfu * 100:6.2f} %" if mfu is not None else "   n/a (no peak known)"
        print(f"  {mode:15s} {seconds * 1e3:9.2f} ms  {flops / seconds / 1e12:8.3f} TFLOP/s  "
              f"MFU {shown}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "args": vars(args), "peak": peak, "modes": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
