"""Strict vs DeferAndFuse vs CPU eager, side by side in one run, medians after warm-up:
(a) a chain of 150 elementwise ops on a 2048x2048 float32 tensor (50 x (+1, *2, -1));
(b) one training step of examples/train_gpt.py's model.
"""

import argparse
import os
import sys

import torch

import torchtpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eager_step import step_times  # noqa: E402
from timing import median_s  # noqa: E402


def chain_time(device, repeats, warmup=2):
    x = torch.randn(2048, 2048).to(device)

    def run():
        y = x
        for _ in range(50):
            y = ((y + 1) * 2) - 1
        y[0, 0].item()  # waits for the chain (and runs it, deferred)

    return median_s(run, repeats, warmup)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    rows = {}
    for name, device, mode in [("cpu eager", "cpu", "strict"), ("tpu strict", "tpu", "strict"),
                               ("tpu defer_and_fuse", "tpu", "defer_and_fuse")]:
        with torchtpu.eager_mode(mode):
            rows[name] = (chain_time(device, args.repeats), step_times(device, args.steps, 3))
    print(f"medians; [{torch.tpu.get_device_name()}]")
    print(f"{'':20} {'(a) 150-op chain':>18} {'(b) train step':>16}")
    for name, (a, b) in rows.items():
        print(f"{name:20} {a * 1000:15.1f} ms {b * 1000:13.1f} ms")
    s, d, c = rows["tpu strict"], rows["tpu defer_and_fuse"], rows["cpu eager"]
    print(f"defer_and_fuse vs strict: (a) {s[0] / d[0]:.1f}x  (b) {s[1] / d[1]:.2f}x")
    print(f"defer_and_fuse vs cpu:    (a) {c[0] / d[0]:.1f}x  (b) {c[1] / d[1]:.2f}x")
    m = torchtpu.metrics()
    print(f"deferred flushes {m['deferred_flushes']}, nodes per flush "
          f"{m['deferred_nodes'] / max(m['deferred_flushes'], 1):.0f}")


if __name__ == "__main__":
    main()
