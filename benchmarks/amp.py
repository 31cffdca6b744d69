"""Mixed precision: one training step of examples/train_gpt.py's model in float32 beside the same
step under torch.autocast in bfloat16, on "tpu" (Strict, DeferAndFuse, torch.compile) and on the
CPU (eager), measured side by side in one run.

Prints the median step time after warm-up of each configuration and the bf16 / float32 speed
ratio per configuration. On the CPU plugin bfloat16 need not be faster (XLA's CPU backend widens
most bf16 math to float32); on a GPU plugin the bf16 step should be well ahead.
"""

import argparse
import os
import statistics
import sys
import time

import torch

import torchtpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from train_gpt import GPT, batches, load_text, training_step

CONFIGS = [  # (label, device, eager mode, compile)
    ("tpu strict", "tpu", "strict", False),
    ("tpu defer_and_fuse", "tpu", "defer_and_fuse", False),
    ("tpu compiled", "tpu", "strict", True),
    ("cpu eager", "cpu", None, False),
]


def step_time(device, mode, compile, amp, steps, warmup, width, layers):
    """Median seconds of a training step (after `warmup` steps) and the last loss."""
    data, vocab = load_text()
    torch.manual_seed(0)
    model = GPT(vocab, 64, width, layers).to(device)
    step_fn = training_step(model, device, compile=compile, amp=amp)
    times = []
    with torchtpu.eager_mode(mode or torchtpu.get_eager_mode()):
        for step, (x, y) in zip(range(warmup + steps), batches(data, 64, 16, 0)):
            start = time.perf_counter()
            loss = step_fn(x.to(device), y.to(device)).item()  # waits for the step
            if step >= warmup:
                times.append(time.perf_counter() - start)
    return statistics.median(times), loss


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--only", help="comma-separated labels of the configurations to run")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    print(f"train_gpt step (batch 16 x 64 tokens, {args.layers} layers, width {args.width}), "
          f"median of {args.steps} steps after {args.warmup} warm-up  "
          f"[{torch.tpu.get_device_name()}]")
    print(f"  {'':20s} {'float32':>10s} {'bf16 autocast':>14s}   bf16 speed vs float32")
    for label, device, mode, compile in CONFIGS:
        if only and label not in only:
            continue
        f32, _ = step_time(device, mode, compile, None, args.steps, args.warmup, args.width,
                           args.layers)
        bf16, _ = step_time(device, mode, compile, "bf16", args.steps, args.warmup, args.width,
                            args.layers)
        print(f"  {label:20s} {f32 * 1000:8.1f} ms {bf16 * 1000:11.1f} ms   {f32 / bf16:.2f}x",
              flush=True)
    m = torchtpu.metrics()
    print(f"  cpu fallback calls: {m['cpu_fallback_calls']} {sorted(m['cpu_fallbacks'])}")


if __name__ == "__main__":
    main()
