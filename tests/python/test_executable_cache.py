"""The in-process executable cache: one compile per program structure (Strict mode)."""

import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("strict_mode")


def compiled():
    return torchtpu.metrics()["executables_compiled"]


def test_repeated_op_compiles_once():
    x = torch.randn(8, 8).to("tpu")
    y = torch.randn(8, 8).to("tpu")
    x + y
    before = torchtpu.metrics()
    for _ in range(5):
        x + y
    after = torchtpu.metrics()
    assert after["executables_compiled"] == before["executables_compiled"]
    assert after["executable_cache_hits"] == before["executable_cache_hits"] + 5


def test_scalar_values_do_not_recompile():
    x = torch.randn(16).to("tpu")
    x * 0.5
    start = compiled()
    results = [(x * s).cpu() for s in [0.25, 0.125, 3.0, -1.0]]
    assert compiled() == start  # a learning-rate-like scalar is an argument, not a constant
    for r, s in zip(results, [0.25, 0.125, 3.0, -1.0]):
        torch.testing.assert_close(r, x.cpu() * s)


def test_new_shapes_and_dtypes_are_new_programs():
    start = torchtpu.metrics()["executable_cache_misses"]
    torch.ones(7, device="tpu") + torch.ones(7, device="tpu")
    torch.ones(7, dtype=torch.float64, device="tpu") * 2
    assert torchtpu.metrics()["executable_cache_misses"] >= start + 2
