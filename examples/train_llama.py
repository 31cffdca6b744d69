"""Trains a small Llama (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention) with FSDP2
and tensor parallelism over a 2-D device mesh, on examples/data/sonnets.txt character by character.

    torchrun --nproc_per_node 4 examples/train_llama.py                 # tpu, mesh (dp=2, tp=2)
    torchrun --nproc_per_node 4 examples/train_llama.py --device cpu    # the same run on CPU/gloo
    python examples/train_llama.py --device cpu                         # one process, no mesh

The mesh's "tp" dimension splits every attention and feed-forward block (ColwiseParallel for the
q/k/v and gate/up projections, RowwiseParallel for the output and down projections: each rank holds
its own heads, query and key/value alike); its "dp" dimension shards every parameter with
fully_shard (FSDP2) and gives each rank its own part of the batch. Weights are initialised and
batches drawn on the CPU from one seed before anything is distributed, so every layout (and the
single process) trains the same numbers and their losses can be compared step by step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_gpt import batches, load_text


def rotary(x, positions, theta=10000.0):
    """Rotary position embedding of x (batch, heads, seq, head_dim), in real arithmetic: each
    pair (x[i], x[i + head_dim/2]) turns by position * theta^(-2i/head_dim)."""
    half = x.shape[-1] // 2
    freqs = theta ** (-torch.arange(half, dtype=torch.float32, device=x.device) / half)
    angles = positions.to(torch.float32)[:, None] * freqs[None, :]
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.head_dim, self.groups = dim // heads, heads // kv_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape

        def heads(t):  # -1: under tensor parallelism a rank holds only its own heads
            return t.view(b, s, -1, self.head_dim).transpose(1, 2)

        positions = torch.arange(s, device=x.device)
        q, k, v = heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x))
        q, k = rotary(q, positions), rotary(k, positions)
        # Grouped-query attention: each key/value head serves `groups` query heads.
        k, v = k.repeat_interleave(self.groups, dim=1), v.repeat_interleave(self.groups, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.attention_norm, self.ffn_norm = nn.RMSNorm(dim, eps=1e-5), nn.RMSNorm(dim, eps=1e-5)
        self.attention = Attention(dim, heads, kv_heads)
        self.feed_forward = FeedForward(dim, hidden)

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab, dim=64, layers=2, heads=4, kv_heads=2, hidden=128):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = nn.RMSNorm(dim, eps=1e-5)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, targets):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def parallelize(model: Llama, mesh) -> None:
    """Tensor parallelism over mesh["tp"], then FSDP2 over mesh["dp"] (each block its own unit)."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    plan = {"attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),
            "feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel()}
    for layer in model.layers:
        parallelize_module(layer, mesh["tp"], plan)
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])


def train(device: str, steps: int, batch: int = 8, block: int = 32, lr: float = 3e-3,
          seed: int = 0, mesh_shape: tuple[int, int] | None = None) -> list[float]:
    """The loss of every step (the mean over the whole batch). With `mesh_shape` (dp, tp) the
    default process group must exist; without it the model trains in this one process."""
    data, vocab = load_text()
    torch.manual_seed(seed)
    model = Llama(vocab).to(device)
    rows, dp_group = slice(None), None
    if mesh_shape is not None:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(torch.device(device).type, mesh_shape,
                                mesh_dim_names=("dp", "tp"))
        parallelize(model, mesh)
        dp, share = mesh.get_coordinate()[0], batch // mesh_shape[0]
        rows, dp_group = slice(dp * share, (dp + 1) * share), mesh["dp"].get_group()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    losses = []
    for _, (x, y) in zip(range(steps), batches(data, block, batch, seed)):
        loss = model(x[rows].to(device), y[rows].to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss = loss.detach()
        if dp_group is not None:  # each dp rank's loss is the mean of its part of the batch
            dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=dp_group)
        losses.append(loss.item())
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="tpu")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--block", type=int, default=32)
    parser.add_argument("--tp", type=int, default=2, help="the tensor-parallel degree")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--losses-out", help="rank 0 writes the per-step losses to this JSON file")
    args = parser.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    mesh_shape = None
    if "RANK" in os.environ:  # under torchrun
        if world % args.tp:
            parser.error(f"--tp {args.tp} does not divide the world size {world}")
        if args.device.startswith("tpu"):
            import torchtpu  # noqa: F401  (the c10d backend "tpu")
        dist.init_process_group("gloo" if args.device == "cpu" else "tpu")
        mesh_shape = (world // args.tp, args.tp)
    losses = train(args.device, args.steps, args.batch, args.block, seed=args.seed,
                   mesh_shape=mesh_shape)
    rank = dist.get_rank() if dist.is_initialized() else 0
    if rank == 0:
        for step, loss in enumerate(losses):
            print(f"step {step + 1} loss {loss:.6f}")
        if args.losses_out:
            with open(args.losses_out, "w") as f:
                json.dump(losses, f)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
