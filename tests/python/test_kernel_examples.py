"""examples/kernels/: each example's check at a small size, so CI runs the Pallas kernels the README
shows (in interpret mode on the CPU plugin)."""

import importlib.util
import os
import sys

import pytest

pytest.importorskip("jax")

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "examples", "kernels")


def _example(name):
    spec = importlib.util.spec_from_file_location(f"kernel_example_{name}",
                                                  os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Dynamo imports a module by name to read its globals
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def softmax():
    return _example("softmax")


@pytest.fixture(scope="module")
def matmul():
    return _example("matmul")


@pytest.fixture(scope="module")
def flash_attention():
    return _example("flash_attention")


def test_softmax_matches_torch(softmax):
    assert softmax.check(rows=32, cols=64, block_rows=8) < 1e-6


def test_softmax_refuses_a_block_that_does_not_divide(softmax):
    import torch

    with pytest.raises(RuntimeError, match="block_rows=5 does not divide the 32 rows"):
        softmax.pallas_softmax(torch.zeros(32, 8, device="tpu"), block_rows=5)


def test_matmul_accumulates_over_k_tiles(matmul):
    assert matmul.check(m=32, k=64, n=16, block=16, block_k=16) < 1e-4  # grid (2, 1, 4)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_matches_sdpa(flash_attention, causal):
    # 4 query blocks, each visiting up to 4 key blocks
    assert flash_attention.check(batch=1, heads=2, seq=32, dim=8, block=8, causal=causal) < 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_pallas_backward_matches_sdpa(flash_attention, causal):
    assert flash_attention.check_backward(batch=1, heads=2, seq=32, dim=8, block=8,
                                          causal=causal) < 1e-5


@pytest.mark.parametrize("block_q, block_k", [(8, 16), (16, 8)])
def test_flash_attention_backward_with_unequal_blocks(flash_attention, block_q, block_k):
    # the causal walks start and stop at the diagonal of blocks of two sizes
    import torch

    q, k, v = flash_attention._inputs(1, 1, 32, 8, seed=3, requires_grad=True)
    w = torch.randn(q.shape, generator=torch.Generator().manual_seed(4)).to("tpu")
    out = flash_attention.flash_attention(q, k, v, causal=True, block_q=block_q, block_k=block_k)
    grads = torch.autograd.grad((out * w).sum(), (q, k, v))
    assert flash_attention._grad_error(grads, q, k, v, w, causal=True) < 1e-5


def test_flash_attention_compiled_with_its_backward(flash_attention):
    loss_err, grad_err = flash_attention.check_compiled(batch=1, heads=1, seq=16, dim=8, block=8)
    assert loss_err < 1e-4 and grad_err < 1e-5
