"""Which eager mode should be the default: each workload in Strict, DeferAndFuse and compiled
(torch.compile, backend "tpu"), side by side in one run, medians after warm-up, and each mode's
time over the best one's (target for the default: at most 1.25x the best on every workload).

Workloads: the train-GPT step (examples/train_gpt.py), models nothing was tuned for (a small CNN
and an MLP-mixer, a training step each with AdamW), and a latency-bound loop (greedy decoding
with the GPT over a sliding 64-token window, one token read to the host per step).

    python benchmarks/default_mode.py [--steps 20] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from torch import nn

import torchtpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from timing import median_s  # noqa: E402
from train_gpt import GPT, batches, load_text, training_step  # noqa: E402

MODES = ("strict", "defer_and_fuse", "compiled")


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()

        def stage(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.MaxPool2d(2))

        self.features = nn.Sequential(stage(3, 32), stage(32, 64), stage(64, 64))
        self.head = nn.Linear(64 * 4 * 4, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class MixerBlock(nn.Module):
    def __init__(self, tokens, width):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(),
                                       nn.Linear(2 * tokens, tokens))
        self.channel_mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                         nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class MlpMixer(nn.Module):
    def __init__(self, patch=4, width=128, depth=4, classes=10):
        super().__init__()
        self.embed = nn.Conv2d(3, width, patch, stride=patch)
        self.blocks = nn.Sequential(*[MixerBlock((32 // patch) ** 2, width) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.blocks(x)).mean(1))


def image_step(model, compile):
    """A training step of an image classifier on 32x32 images; returns the loss."""
    model = model.to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=compile)
    forward = torch.compile(model, backend="tpu") if compile else model
    update = torch.compile(opt.step, backend="tpu") if compile else opt.step
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 3, 32, 32, generator=g).to("tpu")
    y = torch.randint(0, 10, (16,), generator=g).to("tpu")

    def step():
        loss = nn.functional.cross_entropy(forward(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        update()
        return loss.item()

    return step


def gpt_train_step(compile):
    data, vocab = load_text()
    torch.manual_seed(0)
    model = GPT(vocab, 64).to("tpu")
    step_fn = training_step(model, "tpu", compile=compile)
    stream = batches(data, 64, 16, 0)

    def step():
        x, y = next(stream)
        return step_fn(x.to("tpu"), y.to("tpu")).item()

    return step


def decode_step(compile):
    """One token of greedy decoding: the GPT's logits at the window's last position, argmax,
    read to the host (as generate() does to test for the end), appended to the window."""
    data, vocab = load_text()
    torch.manual_seed(0)
    model = GPT(vocab, 64).to("tpu").eval()
    forward = torch.compile(model, backend="tpu") if compile else model
    window = data[:64].view(1, 64).to("tpu")

    def step():
        nonlocal window
        with torch.no_grad():
            logits = forward(window)
            token = logits[:, -1].argmax(-1, keepdim=True)
            window = torch.cat([window[:, 1:], token], dim=1)
        return token.item()

    return step


WORKLOADS = {
    "train_gpt": gpt_train_step,
    "cnn": lambda compile: image_step(SmallCNN(), compile),
    "mlp_mixer": lambda compile: image_step(MlpMixer(), compile),
    "decode": decode_step,
}


def median_ms(make, mode, steps, warmup):
    with torchtpu.eager_mode("strict" if mode == "compiled" else mode):
        torch.manual_seed(0)
        return median_s(make(mode == "compiled"), steps, warmup) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    figures = {}
    print(f"median ms per step of {args.steps} after {args.warmup} warm-up; "
          f"[{torch.tpu.get_device_name()}]; (x best)")
    print(f"{'':12}" + "".join(f"{m:>24}" for m in MODES))
    for name in args.workloads.split(","):
        row = {m: median_ms(WORKLOADS[name], m, args.steps, args.warmup) for m in MODES}
        best = min(row.values())
        figures[name] = row
        print(f"{name:12}" + "".join(f"{row[m]:15.2f} ({row[m] / best:4.2f}x)" for m in MODES))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
