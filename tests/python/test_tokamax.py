"""torchtpu.tokamax: Tokamax's attention, layer norm and ragged dot as PyTorch ops on tpu, against
PyTorch's own ops, and examples/train_gpt.py --attention tokamax against its default attention.
Skipped where the tokamax package is not installed (`make` installs it), except the error saying
so."""

import importlib.util

import pytest
import torch
import torch.nn.functional as F

import torchtpu  # noqa: F401
from torchtpu import tokamax as tk

pytest.importorskip("jax")
HAVE_TOKAMAX = importlib.util.find_spec("tokamax") is not None
needs_tokamax = pytest.mark.skipif(not HAVE_TOKAMAX, reason="the tokamax package is not installed")


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.skipif(HAVE_TOKAMAX, reason="tokamax is installed")
def test_missing_tokamax_is_named():
    with pytest.raises(ModuleNotFoundError, match="torchtpu.tokamax needs the tokamax package"):
        tk.layer_norm(torch.ones(2, 4, device="tpu"))


@needs_tokamax
@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_matches_sdpa(is_causal):
    q, k, v = (_rand(2, 4, 16, 8, seed=i) for i in range(3))
    got = tk.dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), is_causal=is_causal)
    assert got.device.type == "tpu" and got.shape == q.shape
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q, k, v,
                                                                         is_causal=is_causal))


@needs_tokamax
def test_attention_grouped_queries_and_scale():
    q, k, v = _rand(1, 4, 8, 8), _rand(1, 2, 12, 8, seed=1), _rand(1, 2, 12, 8, seed=2)
    got = tk.dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), scale=0.5)
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(
        q, k, v, scale=0.5, enable_gqa=True))


@needs_tokamax
def test_attention_gradients():
    q, k, v = (_rand(1, 2, 8, 4, seed=i).requires_grad_() for i in range(3))
    tq, tk_, tv = (t.detach().to("tpu").requires_grad_() for t in (q, k, v))
    tk.dot_product_attention(tq, tk_, tv, is_causal=True).pow(2).sum().backward()
    F.scaled_dot_product_attention(q, k, v, is_causal=True).pow(2).sum().backward()
    for ours, theirs in ((tq, q), (tk_, k), (tv, v)):
        torch.testing.assert_close(ours.grad.cpu(), theirs.grad)


@needs_tokamax
def test_layer_norm_matches_torch():
    x, w, b = _rand(3, 5, 16), _rand(16, seed=1), _rand(16, seed=2)
    got = tk.layer_norm(x.to("tpu"), w.to("tpu"), b.to("tpu"), eps=1e-5)
    torch.testing.assert_close(got.cpu(), F.layer_norm(x, (16,), w, b, 1e-5))
    torch.testing.assert_close(tk.layer_norm(x.to("tpu")).cpu(), F.layer_norm(x, (16,)))


@needs_tokamax
def test_ragged_dot_groups_rows_onto_matrices():
    lhs, rhs = _rand(10, 6), _rand(3, 6, 4, seed=1)
    sizes = torch.tensor([3, 0, 5], dtype=torch.int32)  # rows 8 and 9 belong to no group
    got = tk.ragged_dot(lhs.to("tpu"), rhs.to("tpu"), sizes.to("tpu"))
    expected = torch.cat([lhs[:3] @ rhs[0], lhs[3:8] @ rhs[2], torch.zeros(2, 4)])
    torch.testing.assert_close(got.cpu(), expected)


@needs_tokamax
def test_ragged_dot_refuses_int64_sizes():
    with pytest.raises(TypeError, match="group_sizes must be int32, got torch.int64"):
        tk.ragged_dot(torch.ones(2, 2, device="tpu"), torch.ones(1, 2, 2, device="tpu"),
                      torch.tensor([2], device="tpu"))


@needs_tokamax
def test_compiled_with_its_backward():
    torch._dynamo.reset()

    @torch.compile(backend="tpu", fullgraph=True)
    def step(x, w, b):
        return tk.layer_norm(x * 2, w, b).pow(2).sum()

    x = _rand(4, 8).to("tpu").requires_grad_()
    w, b = _rand(8, seed=1).to("tpu"), _rand(8, seed=2).to("tpu")
    step(x, w, b).backward()
    a = x.detach().cpu().requires_grad_()
    F.layer_norm(a * 2, (8,), w.cpu(), b.cpu()).pow(2).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), a.grad)


@needs_tokamax
def test_train_gpt_with_tokamax_attention_follows_the_default():
    """examples/train_gpt.py --attention tokamax: the same losses as F.scaled_dot_product_attention
    (a small model, a few steps)."""
    import os
    import sys

    from conftest import REPO

    sys.path.insert(0, os.path.join(REPO, "examples"))
    import train_gpt

    args = dict(steps=8, batch=4, block=32, width=32, layers=2, progress=False)
    default = train_gpt.train("tpu", **args)
    tokamax = train_gpt.train("tpu", attention="tokamax", **args)
    torch.testing.assert_close(tokamax, default, rtol=1e-4, atol=1e-5)
    assert tokamax[-1] < tokamax[0]
