"""DTensor and tensor parallelism on tpu: 4 real processes on a 2-D init_device_mesh("tpu", (2, 2)).

One group of ranks runs every check in sequence (starting processes is the slow part), the last
being two steps of examples/train_llama.py (FSDP2 + tensor parallel); each check compares against
the same computation on the CPU in the rank itself.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from ranks import assert_passed, run_checks, spawn
from torch import nn

import torchtpu

WORLD = 4
STEPS = 10
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def _mesh():
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("tpu", (2, 2), mesh_dim_names=("dp", "tp"))


def _same(got, expected, exact=True):
    got = got.full_tensor() if hasattr(got, "full_tensor") else got
    assert got.device.type == "tpu", got.device
    got = got.cpu()
    if exact:
        assert torch.equal(got, expected), f"{got}\n!=\n{expected}"
    else:
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------------------------
# DTensor: placement, redistribution (each one a different collective), ops


def _distribute(mesh, rank):
    from torch.distributed.tensor import Shard, distribute_tensor

    full = torch.randn(8, 6, generator=torch.Generator().manual_seed(1))
    d = distribute_tensor(full.to("tpu"), mesh, [Shard(0), Shard(1)])
    dp, tp = mesh.get_coordinate()
    local = d.to_local()
    assert local.device.type == "tpu"
    assert torch.equal(local.cpu(), full[4 * dp:4 * dp + 4, 3 * tp:3 * tp + 3])
    _same(d, full)
    uneven = torch.arange(15.0).view(5, 3)  # 5 rows over 2 ranks: 3 and 2
    u = distribute_tensor(uneven.to("tpu"), mesh, [Shard(0), Shard(0)])
    _same(u, uneven)


def _partial(mesh, placements):
    """A DTensor whose Partial dims hold rank-dependent pieces; returns it and its CPU value."""
    from torch.distributed.tensor import DTensor

    base = torch.randn(4, 6, generator=torch.Generator().manual_seed(2))
    dp, tp = mesh.get_coordinate()

    def piece(dp, tp):
        return base * (1 + dp) + tp

    d = DTensor.from_local(piece(dp, tp).to("tpu"), mesh, placements)
    rows = (0, 1) if placements[0].is_partial() else (dp,)
    return d, sum(piece(i, 0) + piece(i, 1) for i in rows)


def _redistribute(mesh, rank):
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    full = torch.randn(8, 6, generator=torch.Generator().manual_seed(3))
    d = distribute_tensor(full.to("tpu"), mesh, [Shard(0), Shard(1)])
    tp = mesh.get_coordinate()[1]
    # Shard -> Replicate (all_gather), Replicate -> Shard (a local slice)
    r = d.redistribute(mesh, [Replicate(), Replicate()])
    assert torch.equal(r.to_local().cpu(), full)
    s = r.redistribute(mesh, [Replicate(), Shard(1)])
    assert torch.equal(s.to_local().cpu(), full[:, 3 * tp:3 * tp + 3])
    # Shard(0) -> Shard(1) on one mesh dim (all_to_all)
    t = distribute_tensor(full.to("tpu"), mesh, [Replicate(), Shard(0)])
    t1 = t.redistribute(mesh, [Replicate(), Shard(1)])
    assert torch.equal(t1.to_local().cpu(), full[:, 3 * tp:3 * tp + 3])
    # Partial -> Replicate (all_reduce), Partial -> Shard (reduce_scatter), both mesh dims
    p, expected = _partial(mesh, [Replicate(), Partial()])
    _same(p.redistribute(mesh, [Replicate(), Replicate()]), expected)
    p, expected = _partial(mesh, [Replicate(), Partial()])
    ps = p.redistribute(mesh, [Replicate(), Shard(0)])
    assert torch.equal(ps.to_local().cpu(), expected[2 * tp:2 * tp + 2])
    p, expected = _partial(mesh, [Partial(), Partial()])  # two all_reduces: any order
    _same(p.redistribute(mesh, [Replicate(), Replicate()]), expected, exact=False)
    # Partial(avg)
    a = torch.randn(4, 6, generator=torch.Generator().manual_seed(4))
    from torch.distributed.tensor import DTensor

    pa = DTensor.from_local((a * (1 + tp)).to("tpu"), mesh, [Replicate(), Partial("avg")])
    _same(pa.redistribute(mesh, [Replicate(), Replicate()]), a * 1.5, exact=False)


def _ops(mesh, rank):
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(8, 6, generator=g), torch.randn(6, 4, generator=g)
    da = distribute_tensor(a.to("tpu"), mesh, [Shard(0), Shard(1)])
    db = distribute_tensor(b.to("tpu"), mesh, [Replicate(), Shard(0)])
    mm = da @ db  # row shards x contraction shards: Shard(0), Partial(sum)
    assert mm.placements[1].is_partial(), mm.placements
    _same(mm, a @ b, exact=False)
    _same(da.sum(), a.sum(), exact=False)
    _same(da.sum(dim=1), a.sum(dim=1), exact=False)
    _same(torch.softmax(da, dim=0), torch.softmax(a, dim=0), exact=False)
    _same(da * 2 + 1, a * 2 + 1)
    _same(torch.tanh(da).t(), torch.tanh(a).t(), exact=False)
    _same(da.reshape(8, 2, 3).amax(dim=-1), a.reshape(8, 2, 3).amax(dim=-1))
    dr = distribute_tensor(a.to("tpu"), mesh, [Replicate(), Replicate()])
    _same(F.gelu(dr) - dr.mean(), F.gelu(a) - a.mean(), exact=False)


# ----------------------------------------------------------------------------------------------
# Tensor parallelism: an attention + MLP block, TP over "tp", data parallel over "dp"


class Block(nn.Module):
    def __init__(self, dim=16, heads=4, hidden=32):
        super().__init__()
        self.head_dim = dim // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.w1, self.w2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        b, s, _ = x.shape

        def heads(t):  # -1: a tensor-parallel rank holds only its own heads
            return t.view(b, s, -1, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(att.transpose(1, 2).reshape(b, s, -1))
        return x + self.w2(F.gelu(self.w1(x)))


def _data(steps=STEPS):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(4, 8, 16, generator=g), torch.randn(4, 8, 16, generator=g))
            for _ in range(steps)]


def _reference_losses(model, data):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x, y in data:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def _tensor_parallel(mesh, rank):
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    torch.manual_seed(0)
    reference = Block()
    model = Block().to("tpu")
    model.load_state_dict(reference.state_dict())
    parallelize_module(model, mesh["tp"], {
        "wq": ColwiseParallel(), "wk": ColwiseParallel(), "wv": ColwiseParallel(),
        "wo": RowwiseParallel(), "w1": ColwiseParallel(), "w2": RowwiseParallel()})
    assert model.wq.weight.to_local().shape == (8, 16)
    dp_group = mesh["dp"].get_group()
    dp = mesh.get_coordinate()[0]
    data = _data()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x, y in data:
        half = slice(2 * dp, 2 * dp + 2)
        loss = F.mse_loss(model(x[half].to("tpu")), y[half].to("tpu"))
        loss.backward()
        for p in model.parameters():  # data parallel over "dp": average the local shards
            dist.all_reduce(p.grad.to_local(), op=dist.ReduceOp.AVG, group=dp_group)
        opt.step()
        opt.zero_grad()
        loss = loss.detach()
        dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=dp_group)
        losses.append(loss.item())
    expected = _reference_losses(reference, data)
    torch.testing.assert_close(losses, expected, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0], losses
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.full_tensor().cpu(), reference.get_parameter(name).detach(),
                                   rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")


def _train_llama(mesh, rank):
    """examples/train_llama.py's FSDP2 + tensor-parallel run against its one-process CPU run."""
    sys.path.insert(0, EXAMPLES)
    import train_llama

    losses = train_llama.train("tpu", 2, mesh_shape=(2, 2))
    torch.testing.assert_close(losses, train_llama.train("cpu", 2), rtol=1e-4, atol=1e-5)


def _random(mesh, rank):
    """DTensor's random ops (init, dropout) through PyTorch's RNG tracker, which moves the tpu
    generator's (seed, offset) state per shard: shards differ, replicas agree, a seed repeats."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    def draw():
        torch.manual_seed(3)
        d = distribute_tensor(torch.empty(8, 6, device="tpu"), mesh, [Shard(0), Replicate()])
        torch.nn.init.normal_(d)
        kept = F.dropout(d, 0.5)
        return d.to_local().cpu(), kept.to_local().cpu()

    local, kept = draw()
    assert torch.equal(draw()[0], local)
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, (mesh.get_coordinate(), local, torch.tpu.get_rng_state()))
    for coord, other, state in everyone:
        same_shard = coord[0] == mesh.get_coordinate()[0]
        assert torch.equal(other, local) == same_shard, (coord, other, local)
        assert torch.equal(state, everyone[0][2])  # every rank's generator moved alike
    assert 0.5 < local.std() < 1.5
    assert torch.all((kept == 0) | torch.isclose(kept, 2 * local)), kept


def _no_fallback(mesh, rank):
    assert torchtpu.metrics()["cpu_fallbacks"] == {}, torchtpu.metrics()["cpu_fallbacks"]


CHECKS = {"distribute": _distribute, "redistribute": _redistribute, "ops": _ops,
          "tensor_parallel": _tensor_parallel, "train_llama": _train_llama, "random": _random,
          "no_fallback": _no_fallback}


def _job(rank, world, results):
    dist.init_process_group("tpu")
    mesh = _mesh()
    run_checks(results, CHECKS, mesh, rank)


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    return spawn(_job, WORLD, str(tmp_path_factory.mktemp("dtensor")))


@pytest.mark.parametrize("name", list(CHECKS))
def test_dtensor(four_ranks, name):
    assert_passed(four_ranks, name)
