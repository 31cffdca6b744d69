"""One training step of examples/train_gpt.py's model: Strict "tpu" beside CPU eager.

Prints the median step time after warm-up for each, measured in one run, their ratio, and how many
distinct executables the tpu run had compiled by step 1 and by the last step (it must stop growing
after the first step).
"""

import argparse
import os
import statistics
import sys
import time

import torch

import torchtpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from train_gpt import GPT, batches, load_text, training_step  # noqa: E402


def step_times(device, steps, warmup, compiled_after=None, compile=False, mode=None):
    """Median seconds of a training step (after `warmup` steps) in eager mode `mode` (its eager
    ops' mode, when compiled; the current mode if None), with torch.compile if asked."""
    with torchtpu.eager_mode(mode or torchtpu.get_eager_mode()):
        return _step_times(device, steps, warmup, compiled_after, compile)


def _step_times(device, steps, warmup, compiled_after, compile):
    data, vocab = load_text()
    torch.manual_seed(0)
    model = GPT(vocab, 64).to(device)
    step_fn = training_step(model, device, compile=compile)
    times = []
    for step, (x, y) in zip(range(warmup + steps), batches(data, 64, 16, 0)):
        start = time.perf_counter()
        loss = step_fn(x.to(device), y.to(device))
        loss.item()  # waits for the step
        if step >= warmup:
            times.append(time.perf_counter() - start)
        if compiled_after is not None:
            compiled_after.append(torchtpu.metrics()["executable_cache_misses"])
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    compiled = []
    # Nothing else may run on the machine meanwhile: on 2 cores, a concurrent job slows the
    # CPU eager run by an order of magnitude.
    cpu = step_times("cpu", args.steps, args.warmup)
    tpu = step_times("tpu", args.steps, args.warmup, compiled, mode="strict")
    print(f"train_gpt step (batch 16 x 64 tokens, 4 layers, width 128), median of {args.steps} "
          f"steps after {args.warmup} warm-up")
    print(f"  cpu eager    {cpu * 1000:8.1f} ms")
    print(f"  tpu strict   {tpu * 1000:8.1f} ms   ({cpu / tpu:.2f}x cpu speed)  "
          f"[{torch.tpu.get_device_name()}]")
    print(f"  distinct executables: {compiled[0]} by step 1, {compiled[-1]} by step "
          f"{len(compiled)}")
    print(f"  cpu fallback calls: {torchtpu.metrics()['cpu_fallback_calls']}")


if __name__ == "__main__":
    main()
