"""Trains a small decoder-only transformer, character by character, on examples/data/sonnets.txt.

    python examples/train_gpt.py                 # on "tpu", 200 steps
    python examples/train_gpt.py --device cpu    # the same run on the CPU, for comparison
    python examples/train_gpt.py --amp bf16      # mixed precision: torch.autocast in bfloat16
    python examples/train_gpt.py --amp fp16      # float16 autocast with a GradScaler
    python examples/train_gpt.py --attention tokamax   # Tokamax's attention, through jax_op

Weights are initialised and batches drawn on the CPU from one seed, so runs on different devices
see the same numbers; with --dropout 0 their losses can be compared step by step.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sonnets.txt")


def tokamax_attention(q, k, v):
    from torchtpu.tokamax import dot_product_attention

    return dot_product_attention(q, k, v, is_causal=True)


class Block(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float, attention: str = "sdpa"):
        super().__init__()
        if attention == "tokamax" and dropout:
            raise ValueError("--attention tokamax has no attention dropout: use --dropout 0")
        self.heads, self.attention = heads, attention
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width), nn.Dropout(dropout))
        self.dropout = dropout

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        if self.attention == "tokamax":
            y = tokamax_attention(q, k, v)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, width: int = 128, layers: int = 4, heads: int = 4,
                 dropout: float = 0.0, attention: str = "sdpa"):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(block, width)
        self.blocks = nn.ModuleList(Block(width, heads, dropout, attention)
                                    for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        x = self.tokens(idx) + self.positions(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def load_text():
    with open(DATA) as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return torch.tensor([index[c] for c in text], dtype=torch.long), len(chars)


def batches(data, block, batch, seed):
    g = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(len(data) - block - 1, (batch,), generator=g)
        x = torch.stack([data[s:s + block] for s in starts])
        y = torch.stack([data[s + 1:s + block + 1] for s in starts])
        yield x, y


AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def training_step(model: nn.Module, device: str, lr: float = 3e-3, compile: bool = False,
                  amp: str | None = None):
    """One step of training as a function of a batch: forward, backward and AdamW; returns the
    loss. With `compile`, the model and the optimizer step go through torch.compile (backend
    "tpu" on tpu, inductor elsewhere), the optimizer keeping its step counts on the device
    (capturable=True) so that its whole update is one compiled program. With `amp` ("bf16" or
    "fp16") the forward pass runs under torch.autocast in that dtype (weights stay float32);
    float16 also scales the loss with a GradScaler, which skips steps whose gradients overflow."""
    capturable = compile and device.startswith("tpu")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1,
                                  capturable=capturable)
    forward = model
    device_type = torch.device(device).type
    scaler = torch.amp.GradScaler(device_type) if amp == "fp16" else None

    def update():
        optimizer.step()

    if compile:
        backend = "tpu" if device.startswith("tpu") else "inductor"
        forward = torch.compile(model, backend=backend)
        update = torch.compile(update, backend=backend)

    def step(x, y):
        with torch.autocast(device_type, dtype=AMP_DTYPES.get(amp), enabled=amp is not None):
            loss = forward(x, y)
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            update()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            scaler.step(optimizer)  # optimizer.step(), unless the gradients hold an inf/NaN
            scaler.update()
        return loss

    return step


def train(device: str, steps: int, batch: int = 16, block: int = 64, width: int = 128,
          layers: int = 4, dropout: float = 0.0, lr: float = 3e-3, seed: int = 0,
          progress: bool = True, compile: bool = False, amp: str | None = None,
          attention: str = "sdpa"):
    """Returns the loss of every step."""
    data, vocab = load_text()
    torch.manual_seed(seed)
    model = GPT(vocab, block, width, layers, dropout=dropout, attention=attention).to(device)
    step_fn = training_step(model, device, lr, compile, amp)
    losses = []
    start = time.perf_counter()
    for step, (x, y) in zip(range(steps), batches(data, block, batch, seed)):
        loss = step_fn(x.to(device), y.to(device))
        losses.append(loss.item())
        if progress:
            elapsed = time.perf_counter() - start
            rate = (step + 1) * batch * block / elapsed
            done = int(30 * (step + 1) / steps)
            sys.stderr.write(f"\r[{'#' * done}{'.' * (30 - done)}] step {step + 1}/{steps} "
                             f"loss {losses[-1]:.4f} {rate:,.0f} tokens/s")
            sys.stderr.flush()
    if progress:
        sys.stderr.write("\n")
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="tpu")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--block", type=int, default=64)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--amp", choices=sorted(AMP_DTYPES),
                        help="mixed precision: autocast in this dtype (fp16 with a GradScaler)")
    parser.add_argument("--attention", choices=["sdpa", "tokamax"], default="sdpa",
                        help="tokamax: Tokamax's dot_product_attention (pip install tokamax)")
    parser.add_argument("--losses-out", help="write the per-step losses to this JSON file")
    args = parser.parse_args()
    if args.device.startswith("tpu"):
        import torchtpu  # noqa: F401  (also autoloaded by `import torch`)
    losses = train(args.device, args.steps, args.batch, args.block, args.width, args.layers,
                   args.dropout, seed=args.seed, compile=args.compile, amp=args.amp,
                   attention=args.attention)
    precision = f" ({args.amp} autocast)" if args.amp else ""
    print(f"device {args.device}{precision}: first loss {losses[0]:.4f}, "
          f"final loss {losses[-1]:.4f} (ln(vocab) = {math.log(load_text()[1]):.4f})")
    if args.device.startswith("tpu"):
        import torchtpu

        m = torchtpu.metrics()
        print(f"executables compiled {m['executables_compiled']}, loaded from the disk cache "
              f"{m['executables_loaded_from_disk']}, cpu fallback calls "
              f"{m['cpu_fallback_calls']}: {sorted(m['cpu_fallbacks'])}")
        if args.compile:
            print(f"compiled graphs {m['compiled_graphs']}, captures {m['compiled_captures']}, "
                  f"replays {m['compiled_replays']}, eager runs {m['compiled_eager_runs']}")
    if args.losses_out:
        with open(args.losses_out, "w") as f:
            json.dump(losses, f)


if __name__ == "__main__":
    main()
