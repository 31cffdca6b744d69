"""A tiled Pallas matmul with a 3-D grid (row tiles, column tiles, K steps), as a PyTorch op on tpu.

    python examples/kernels/matmul.py [--m 256 --k 512 --n 256 --block 64 --block-k 128]

Grid step (i, j, k) multiplies the (i, k) tile of x by the (k, j) tile of y and adds it into the
(i, j) output tile, which stays the same block for every k: the first k step zeroes it, and the
float32 output is the accumulator. On the CPU plugin Pallas runs it in interpret mode; the result
is checked against `x @ y` on tpu.
"""

import argparse

import jax
import jax.numpy as jnp
import torch
from jax.experimental import pallas as pl

import torchtpu  # noqa: F401  (registers "tpu")
from torchtpu.kernels import jax_op


def _matmul_kernel(x_ref, y_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def matmul_jax(x, y, block_m=64, block_n=64, block_k=64):
    """The JAX function: (m, k) @ (k, n) -> float32 (m, n); the blocks divide their dimensions."""
    (m, k), (k2, n) = x.shape, y.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: {x.shape} @ {y.shape}")
    blocks = {"block_m": (block_m, m), "block_n": (block_n, n), "block_k": (block_k, k)}
    for name, (block, dim) in blocks.items():
        if dim % block:
            raise ValueError(f"{name}={block} does not divide {dim}")
    return pl.pallas_call(
        _matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // block_m, n // block_n, k // block_k),
        in_specs=[pl.BlockSpec((block_m, block_k), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((block_k, block_n), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((block_m, block_n), lambda i, j, kk: (i, j)),
    )(x, y)


pallas_matmul = jax_op(matmul_jax, static_argnames=("block_m", "block_n", "block_k"))


def check(m=64, k=96, n=32, block=16, block_k=32, seed=0) -> float:
    """Max absolute difference between the kernel and `x @ y`, both on tpu."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to("tpu")
    y = torch.randn(k, n, generator=g).to("tpu")
    got = pallas_matmul(x, y, block_m=block, block_n=block, block_k=block_k)
    assert got.device.type == "tpu" and got.shape == (m, n)
    return (got - x @ y).abs().max().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--m", type=int, default=256)
    parser.add_argument("--k", type=int, default=512)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--block", type=int, default=64, help="output tile side")
    parser.add_argument("--block-k", type=int, default=128)
    args = parser.parse_args()
    err = check(args.m, args.k, args.n, args.block, args.block_k)
    grid = (args.m // args.block, args.n // args.block, args.k // args.block_k)
    print(f"Pallas matmul ({args.m}x{args.k} @ {args.k}x{args.n}, grid {grid}) on tpu: "
          f"max abs error vs x @ y {err:.2e}")
    assert err < 1e-3 * args.k ** 0.5, err


if __name__ == "__main__":
    main()
