"""A flash-attention style Pallas kernel as a PyTorch op on tpu, eager and inside torch.compile.

    python examples/kernels/flash_attention.py [--batch 2 --heads 4 --seq 256 --dim 64 --block 64]

q, k, v are (batch, heads, seq, dim), PyTorch's scaled_dot_product_attention layout. One grid step
takes one block of queries and walks the keys block by block with an online softmax (a running max
and sum rescale what was accumulated so far), so the (seq, seq) score matrix never exists; with
`causal` the walk stops at the query block's diagonal. Checked against
`F.scaled_dot_product_attention` on tpu.

The backward: JAX cannot reverse-differentiate a `pallas_call` (jax.vjp fails with "Linearization
failed to produce known values"; only forward-mode jvp works), so the op is given a backward with
`jax_op(..., backward=...)`: JAX's vjp of the same attention written with plain jnp (which does
build the score matrix). `check_compiled` runs forward and backward in
`torch.compile(backend="tpu")`.
"""

import argparse
import functools

import jax
import jax.numpy as jnp
import torch
import torch.nn.functional as F
from jax import lax
from jax.experimental import pallas as pl

import torchtpu  # noqa: F401  (registers "tpu")
from torchtpu.kernels import jax_op

_MASKED = -1e30  # finite, so a fully masked block gives exp(-huge) = 0 rather than a NaN


def _attention_kernel(q_ref, k_ref, v_ref, o_ref, *, block_k, causal, scale):
    block_q, dim = q_ref.shape
    first_query = pl.program_id(2) * block_q
    q = q_ref[...].astype(jnp.float32) * scale

    def visit(j, carry):  # key block j: fold its scores into the running max, sum and output
        running_max, running_sum, acc = carry
        keys = pl.ds(j * block_k, block_k)
        s = q @ k_ref[keys, :].astype(jnp.float32).T
        if causal:
            rows = first_query + lax.broadcasted_iota(jnp.int32, s.shape, 0)
            cols = j * block_k + lax.broadcasted_iota(jnp.int32, s.shape, 1)
            s = jnp.where(rows >= cols, s, _MASKED)
        new_max = jnp.maximum(running_max, s.max(axis=-1))
        p = jnp.exp(s - new_max[:, None])
        rescale = jnp.exp(running_max - new_max)
        acc = rescale[:, None] * acc + p @ v_ref[keys, :].astype(jnp.float32)
        return new_max, rescale * running_sum + p.sum(axis=-1), acc

    seq = k_ref.shape[0]
    blocks = (first_query + block_q + block_k - 1) // block_k if causal else seq // block_k
    start = (jnp.full((block_q,), -jnp.inf, jnp.float32), jnp.zeros((block_q,), jnp.float32),
             jnp.zeros((block_q, dim), jnp.float32))
    _, total, acc = lax.fori_loop(0, blocks, visit, start)
    o_ref[...] = (acc / total[:, None]).astype(o_ref.dtype)


def attention_jax(q, k, v, causal=False, block_q=16, block_k=16):
    """The Pallas function: grid (batch, heads, query blocks); each step sees all of k and v of
    its head and loops over their blocks."""
    batch, heads, seq, dim = q.shape
    if seq % block_q or seq % block_k:
        raise ValueError(f"block_q={block_q} and block_k={block_k} must divide seq={seq}")
    kernel = functools.partial(_attention_kernel, block_k=block_k, causal=causal,
                               scale=dim ** -0.5)
    query_block = pl.BlockSpec((None, None, block_q, dim), lambda b, h, i: (b, h, i, 0))
    whole_head = pl.BlockSpec((None, None, seq, dim), lambda b, h, i: (b, h, 0, 0))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
                          grid=(batch, heads, seq // block_q),
                          in_specs=[query_block, whole_head, whole_head],
                          out_specs=query_block)(q, k, v)


def reference_jax(q, k, v, causal=False):
    """The same attention in plain jnp, which JAX can differentiate."""
    s = (q @ jnp.swapaxes(k, -1, -2)).astype(jnp.float32) * q.shape[-1] ** -0.5
    if causal:
        seq = q.shape[-2]
        s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, _MASKED)
    return (jax.nn.softmax(s, axis=-1) @ v.astype(jnp.float32)).astype(q.dtype)


@jax_op(static_argnames=("causal",))
def attention_vjp(q, k, v, grad, causal=False):
    _, pull = jax.vjp(functools.partial(reference_jax, causal=causal), q, k, v)
    return pull(grad)


def _backward(q, k, v, grad, causal, block_q, block_k):
    return attention_vjp(q, k, v, grad, causal=causal)


flash_attention = jax_op(attention_jax, static_argnames=("causal", "block_q", "block_k"),
                         backward=_backward)


def torch_reference(q, k, v, causal=False):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _inputs(batch, heads, seq, dim, seed, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, seq, dim, generator=g).to("tpu").requires_grad_(requires_grad)
            for _ in range(3)]


def check(batch=1, heads=2, seq=32, dim=16, block=16, causal=True, seed=0) -> float:
    """Max absolute difference between the kernel and scaled_dot_product_attention on tpu."""
    q, k, v = _inputs(batch, heads, seq, dim, seed)
    got = flash_attention(q, k, v, causal=causal, block_q=block, block_k=block)
    assert got.device.type == "tpu" and got.shape == q.shape
    return (got - torch_reference(q, k, v, causal)).abs().max().item()


def check_compiled(batch=1, heads=2, seq=32, dim=16, block=16, causal=True, seed=0):
    """A training-style step, `(attention(q, k, v) * w).sum()` and its backward, compiled with
    the "tpu" backend, against the same step with scaled_dot_product_attention run eagerly.
    Returns (loss error, max gradient error over q, k and v)."""

    @torch.compile(backend="tpu", fullgraph=True)
    def step(q, k, v, w):
        out = flash_attention(q, k, v, causal=causal, block_q=block, block_k=block)
        return (out * w).sum()

    q, k, v = _inputs(batch, heads, seq, dim, seed, requires_grad=True)
    w = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed + 1)).to("tpu")
    loss = step(q, k, v, w)
    grads = torch.autograd.grad(loss, (q, k, v))
    ref_loss = (torch_reference(q, k, v, causal) * w).sum()
    ref_grads = torch.autograd.grad(ref_loss, (q, k, v))
    grad_err = max((a - b).abs().max().item() for a, b in zip(grads, ref_grads))
    return abs(loss.item() - ref_loss.item()), grad_err


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--block", type=int, default=64)
    args = parser.parse_args()
    shape = (args.batch, args.heads, args.seq, args.dim)
    for causal in (False, True):
        err = check(*shape, args.block, causal)
        print(f"Pallas flash attention {list(shape)}, blocks of {args.block}, causal={causal}: "
              f"max abs error vs scaled_dot_product_attention {err:.2e}")
        assert err < 1e-4, err
    loss_err, grad_err = check_compiled(*shape, args.block, causal=True)
    print(f"  in torch.compile(backend='tpu') with its backward (jnp vjp): loss error "
          f"{loss_err:.2e}, max gradient error {grad_err:.2e}")
    assert grad_err < 1e-4, grad_err


if __name__ == "__main__":
    main()
