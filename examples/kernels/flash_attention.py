"""A flash-attention style Pallas kernel as a PyTorch op on tpu, eager and inside torch.compile.

    python examples/kernels/flash_attention.py [--batch 2 --heads 4 --seq 256 --dim 64 --block 64]

q, k, v are (batch, heads, seq, dim), PyTorch's scaled_dot_product_attention layout. One grid step
takes one block of queries and walks the keys block by block with an online softmax (a running max
and sum rescale what was accumulated so far), so the (seq, seq) score matrix never exists; with
`causal` the walk stops at the query block's diagonal. Checked against
`F.scaled_dot_product_attention` on tpu.

The backward is Pallas too. JAX cannot reverse-differentiate a `pallas_call` (jax.vjp fails with
"Linearization failed to produce known values"; only forward-mode jvp works), so the op is given
its backward with `jax_op(..., backward=...)`: FlashAttention-2's, in three kernels. The first
walks the keys again for each query block, as the forward does, to get each query's logsumexp
and D = rowsum(dO * O); the second takes one block of keys and walks the query blocks, summing dK
and dV; the third takes one block of queries and walks the key blocks, summing dQ. The softmax's
probabilities are recomputed block by block from the logsumexp, so the backward never builds the
score matrix either. `check_backward` (eager) and `check_compiled` (forward and backward in
`torch.compile(backend="tpu")`) compare the gradients with scaled_dot_product_attention's.
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


def _scores(q, k_block, first_query, first_key, causal, scale):
    """Scaled scores of a query block against a key block, masked above the diagonal if causal."""
    s = (q @ k_block.T) * scale
    if causal:
        rows = first_query + lax.broadcasted_iota(jnp.int32, s.shape, 0)
        cols = first_key + lax.broadcasted_iota(jnp.int32, s.shape, 1)
        s = jnp.where(rows >= cols, s, _MASKED)
    return s


def _attend(q_ref, k_ref, v_ref, block_k, causal, scale):
    """The query block's walk over the key blocks (up to its diagonal if causal), each folded into
    a running max, sum and output; returns them after the last block."""
    block_q, dim = q_ref.shape
    first_query = pl.program_id(2) * block_q
    q = q_ref[...].astype(jnp.float32)

    def visit(j, carry):
        running_max, running_sum, acc = carry
        keys = pl.ds(j * block_k, block_k)
        s = _scores(q, k_ref[keys, :].astype(jnp.float32), first_query, j * block_k, causal, scale)
        new_max = jnp.maximum(running_max, s.max(axis=-1))
        p = jnp.exp(s - new_max[:, None])
        rescale = jnp.exp(running_max - new_max)
        acc = rescale[:, None] * acc + p @ v_ref[keys, :].astype(jnp.float32)
        return new_max, rescale * running_sum + p.sum(axis=-1), acc

    start = (jnp.full((block_q,), -jnp.inf, jnp.float32), jnp.zeros((block_q,), jnp.float32),
             jnp.zeros((block_q, dim), jnp.float32))
    return lax.fori_loop(0, _key_blocks(first_query, block_q, block_k, k_ref.shape[0], causal),
                         visit, start)


def _key_blocks(first_query, block_q, block_k, seq, causal):
    """How many key blocks a query block starting at first_query sees."""
    return (first_query + block_q + block_k - 1) // block_k if causal else seq // block_k


def _attention_kernel(q_ref, k_ref, v_ref, o_ref, *, block_k, causal, scale):
    _, total, acc = _attend(q_ref, k_ref, v_ref, block_k, causal, scale)
    o_ref[...] = (acc / total[:, None]).astype(o_ref.dtype)


def _stats_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, d_ref, *, block_k, causal, scale):
    """One query block: its logsumexp over the keys, and D = rowsum(dO * O), the forward redone."""
    running_max, total, acc = _attend(q_ref, k_ref, v_ref, block_k, causal, scale)
    lse_ref[...] = running_max + jnp.log(total)
    d_ref[...] = (do_ref[...].astype(jnp.float32) * (acc / total[:, None])).sum(axis=-1)


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


def _dkdv_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, d_ref, dk_ref, dv_ref, *, block_q, causal,
                 scale):
    """One key block: dV = sum of P^T dO and dK = sum of dS^T Q over the query blocks that see it,
    with P = exp(S - logsumexp) and dS = P * (dO V^T - D)."""
    block_k, dim = k_ref.shape
    first_key = pl.program_id(2) * block_k
    k = k_ref[...].astype(jnp.float32)
    v = v_ref[...].astype(jnp.float32)

    def visit(i, carry):
        dk, dv = carry
        queries = pl.ds(i * block_q, block_q)
        q = q_ref[queries, :].astype(jnp.float32)
        do = do_ref[queries, :].astype(jnp.float32)
        s = _scores(q, k, i * block_q, first_key, causal, scale)
        p = jnp.exp(s - lse_ref[queries][:, None])
        ds = p * (do @ v.T - d_ref[queries][:, None])
        return dk + ds.T @ q * scale, dv + p.T @ do

    first = first_key // block_q if causal else 0  # earlier query blocks see none of these keys
    zeros = jnp.zeros((block_k, dim), jnp.float32)
    dk, dv = lax.fori_loop(first, q_ref.shape[0] // block_q, visit, (zeros, zeros))
    dk_ref[...] = dk.astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)


def _dq_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, d_ref, dq_ref, *, block_k, causal, scale):
    """One query block: dQ = sum of dS K over the key blocks it sees."""
    block_q, dim = q_ref.shape
    first_query = pl.program_id(2) * block_q
    q = q_ref[...].astype(jnp.float32)
    do = do_ref[...].astype(jnp.float32)
    lse, d = lse_ref[...], d_ref[...]

    def visit(j, dq):
        keys = pl.ds(j * block_k, block_k)
        k = k_ref[keys, :].astype(jnp.float32)
        s = _scores(q, k, first_query, j * block_k, causal, scale)
        p = jnp.exp(s - lse[:, None])
        ds = p * (do @ v_ref[keys, :].astype(jnp.float32).T - d[:, None])
        return dq + ds @ k * scale

    blocks = _key_blocks(first_query, block_q, block_k, k_ref.shape[0], causal)
    dq = lax.fori_loop(0, blocks, visit, jnp.zeros((block_q, dim), jnp.float32))
    dq_ref[...] = dq.astype(dq_ref.dtype)


def attention_backward_jax(q, k, v, grad, causal=False, block_q=16, block_k=16):
    """dQ, dK, dV of attention_jax for the output's gradient `grad`: three Pallas calls."""
    batch, heads, seq, dim = q.shape
    scale = dim ** -0.5
    query_block = pl.BlockSpec((None, None, block_q, dim), lambda b, h, i: (b, h, i, 0))
    key_block = pl.BlockSpec((None, None, block_k, dim), lambda b, h, j: (b, h, j, 0))
    whole_head = pl.BlockSpec((None, None, seq, dim), lambda b, h, i: (b, h, 0, 0))
    row_block = pl.BlockSpec((None, None, block_q), lambda b, h, i: (b, h, i))
    whole_rows = pl.BlockSpec((None, None, seq), lambda b, h, i: (b, h, 0))
    rows = jax.ShapeDtypeStruct((batch, heads, seq), jnp.float32)
    lse, d = pl.pallas_call(
        functools.partial(_stats_kernel, block_k=block_k, causal=causal, scale=scale),
        out_shape=(rows, rows), grid=(batch, heads, seq // block_q),
        in_specs=[query_block, whole_head, whole_head, query_block],
        out_specs=(row_block, row_block))(q, k, v, grad)
    like = jax.ShapeDtypeStruct(q.shape, q.dtype)
    dk, dv = pl.pallas_call(
        functools.partial(_dkdv_kernel, block_q=block_q, causal=causal, scale=scale),
        out_shape=(like, like), grid=(batch, heads, seq // block_k),
        in_specs=[whole_head, key_block, key_block, whole_head, whole_rows, whole_rows],
        out_specs=(key_block, key_block))(q, k, v, grad, lse, d)
    dq = pl.pallas_call(
        functools.partial(_dq_kernel, block_k=block_k, causal=causal, scale=scale),
        out_shape=like, grid=(batch, heads, seq // block_q),
        in_specs=[query_block, whole_head, whole_head, query_block, row_block, row_block],
        out_specs=query_block)(q, k, v, grad, lse, d)
    return dq, dk, dv


attention_grads = jax_op(attention_backward_jax, static_argnames=("causal", "block_q", "block_k"))


def _backward(q, k, v, grad, causal, block_q, block_k):
    return attention_grads(q, k, v, grad, causal=causal, block_q=block_q, block_k=block_k)


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


def _grad_error(grads, q, k, v, w, causal):
    ref_grads = torch.autograd.grad((torch_reference(q, k, v, causal) * w).sum(), (q, k, v))
    return max((a - b).abs().max().item() for a, b in zip(grads, ref_grads))


def check_backward(batch=1, heads=2, seq=32, dim=16, block=16, causal=True, seed=0) -> float:
    """Max absolute difference between the Pallas backward's gradients of `(attention * w).sum()`
    over q, k and v and scaled_dot_product_attention's, eagerly on tpu."""
    q, k, v = _inputs(batch, heads, seq, dim, seed, requires_grad=True)
    w = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed + 1)).to("tpu")
    out = flash_attention(q, k, v, causal=causal, block_q=block, block_k=block)
    return _grad_error(torch.autograd.grad((out * w).sum(), (q, k, v)), q, k, v, w, causal)


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
    return abs(loss.item() - ref_loss.item()), _grad_error(grads, q, k, v, w, causal)


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
        grad_err = check_backward(*shape, args.block, causal)
        print(f"  its Pallas backward: max gradient error {grad_err:.2e}")
        assert grad_err < 1e-4, grad_err
    loss_err, grad_err = check_compiled(*shape, args.block, causal=True)
    print(f"  in torch.compile(backend='tpu') with its backward: loss error "
          f"{loss_err:.2e}, max gradient error {grad_err:.2e}")
    assert grad_err < 1e-4, grad_err


if __name__ == "__main__":
    main()
