"""Tokamax's kernels as PyTorch ops on "tpu", through torchtpu.kernels.jax_op.

    from torchtpu import tokamax as tk

    out = tk.dot_product_attention(q, k, v, is_causal=True)   # F.scaled_dot_product_attention
    y = tk.layer_norm(x, weight, bias, eps=1e-5)                # F.layer_norm over the last axis
    z = tk.ragged_dot(x, experts, group_sizes)                  # rows grouped onto matrices

Tokamax (DeepMind's library of JAX/Pallas kernels, `pip install tokamax`; it needs jax>=0.9.2)
is imported at the first call. Each op takes `implementation`, tokamax's name for a kernel; the
default "xla" is its plain-XLA version, the one that runs on the CPU plugin (its Pallas kernels are
Mosaic for TPU and Triton or Mosaic for GPU). Tokamax's own default (None) picks by JAX's default
backend, which in a torchtpu process is JAX's CPU backend whatever the plugin, so pass a kernel's
name ("mosaic", "triton") explicitly to use one. Gradients are JAX's vjp of tokamax's functions.
"""

from __future__ import annotations

import torch

from .kernels import jax_op

_MISSING = ("torchtpu.tokamax needs the tokamax package (pip install tokamax; it needs "
            "jax>=0.9.2 and jaxlib>=0.9.2)")


def _tokamax():
    try:
        import tokamax
        from absl import flags
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(_MISSING) from e
    # Tokamax reads its options as absl flags and, finding them unparsed, parses sys.argv, which
    # fails on any argument absl does not know (pytest's -q, a script's own options): its
    # defaults are what is wanted, so the flags count as parsed.
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return tokamax


@jax_op(name="tokamax_attention", static_argnames=("is_causal", "scale", "implementation"))
def _attention(q, k, v, is_causal, scale, implementation):
    import jax.numpy as jnp

    def to_tokamax(t):  # PyTorch's (batch, heads, seq, dim) is tokamax's (batch, seq, heads, dim)
        return jnp.swapaxes(t, -3, -2)

    out = _tokamax().dot_product_attention(to_tokamax(q), to_tokamax(k), to_tokamax(v),
                                           scale=scale, is_causal=is_causal,
                                           implementation=implementation)
    return to_tokamax(out)


def dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                          is_causal: bool = False, scale: float | None = None,
                          implementation: str | None = "xla") -> torch.Tensor:
    """`tokamax.dot_product_attention` in F.scaled_dot_product_attention's layout: q is (batch,
    heads, seq_q, dim), k and v (batch, kv_heads, seq_kv, dim), kv_heads dividing heads (grouped
    queries as with enable_gqa=True). `scale` defaults to dim ** -0.5."""
    _tokamax()
    return _attention(q, k, v, is_causal=is_causal, scale=scale, implementation=implementation)


@jax_op(name="tokamax_layer_norm", static_argnames=("eps", "implementation"))
def _layer_norm(x, weight, bias, eps, implementation):
    return _tokamax().layer_norm(x, weight, bias, axis=-1, epsilon=eps,
                                 implementation=implementation)


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None,
               bias: torch.Tensor | None = None, *, eps: float = 1e-5,
               implementation: str | None = "xla") -> torch.Tensor:
    """`tokamax.layer_norm` over the last axis: F.layer_norm(x, x.shape[-1:], weight, bias, eps)."""
    _tokamax()
    features = x.shape[-1:]
    weight = torch.ones(features, dtype=x.dtype, device=x.device) if weight is None else weight
    bias = torch.zeros(features, dtype=x.dtype, device=x.device) if bias is None else bias
    return _layer_norm(x, weight, bias, eps=eps, implementation=implementation)


@jax_op(name="tokamax_ragged_dot", static_argnames=("implementation",))
def _ragged_dot(lhs, rhs, group_sizes, implementation):
    return _tokamax().ragged_dot(lhs, rhs, group_sizes, implementation=implementation)


def ragged_dot(lhs: torch.Tensor, rhs: torch.Tensor, group_sizes: torch.Tensor, *,
               implementation: str | None = "xla") -> torch.Tensor:
    """`tokamax.ragged_dot`, the grouped matmul of mixture-of-experts layers: lhs (m, k), rhs
    (groups, k, n), group_sizes int32 (groups,) summing to at most m; the first group_sizes[0]
    rows of lhs are multiplied by rhs[0], the next group_sizes[1] by rhs[1], and so on (rows past
    the sum give zeros)."""
    _tokamax()
    if group_sizes.dtype != torch.int32:
        raise TypeError(f"torchtpu.tokamax.ragged_dot: group_sizes must be int32, got "
                        f"{group_sizes.dtype}")
    return _ragged_dot(lhs, rhs, group_sizes, implementation=implementation)


__all__ = ["dot_product_attention", "layer_norm", "ragged_dot"]
