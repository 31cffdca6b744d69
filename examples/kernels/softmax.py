"""A Pallas softmax over the last axis, one block of rows per grid step, as a PyTorch op on tpu.

    python examples/kernels/softmax.py [--rows 256 --cols 512 --block-rows 32]

Each grid step loads `block_rows` whole rows, so max, exp, sum and divide happen on one block held
at once (fused: no intermediate goes back to memory). On the CPU plugin Pallas runs it in interpret
mode; the result is checked against `torch.softmax` on tpu.
"""

import argparse

import jax
import jax.numpy as jnp
import torch
from jax.experimental import pallas as pl

import torchtpu  # noqa: F401  (registers "tpu")
from torchtpu.kernels import jax_op


def _softmax_kernel(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)


def softmax_jax(x, block_rows=8):
    """The JAX function: a 2-D `x`, whose row count `block_rows` divides."""
    rows, cols = x.shape
    if rows % block_rows:
        raise ValueError(f"block_rows={block_rows} does not divide the {rows} rows")
    block = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))
    return pl.pallas_call(_softmax_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(rows // block_rows,), in_specs=[block], out_specs=block)(x)


pallas_softmax = jax_op(softmax_jax, static_argnames=("block_rows",))


def torch_reference(x):
    return torch.softmax(x, dim=-1)


def check(rows=64, cols=128, block_rows=8, seed=0) -> float:
    """Max absolute difference between the kernel and `torch.softmax`, both on tpu."""
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)).to("tpu") * 3
    got = pallas_softmax(x, block_rows=block_rows)
    assert got.device.type == "tpu" and got.shape == x.shape
    return (got - torch_reference(x)).abs().max().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=512)
    parser.add_argument("--block-rows", type=int, default=32)
    args = parser.parse_args()
    err = check(args.rows, args.cols, args.block_rows)
    print(f"Pallas softmax ({args.rows}x{args.cols}, {args.rows // args.block_rows} row blocks) "
          f"on tpu: max abs error vs torch.softmax {err:.2e}")
    assert err < 1e-6, err


if __name__ == "__main__":
    main()
