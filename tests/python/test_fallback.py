"""Ops without a lowering run on the CPU: correct results, one warning, a count, or an error."""

import warnings

import pytest
import torch

import torchtpu


# Ops that have no tpu lowering (and are unlikely to get one soon).
UNLOWERED = torch.special.bessel_j0


def unlowered_calls():
    return sum(n for op, n in torchtpu.metrics()["cpu_fallbacks"].items()
               if op.startswith("aten::special_bessel_j0"))


def test_unlowered_op_runs_on_cpu_with_one_warning_and_a_count():
    x = torch.tensor([0.0, 1.0, 2.0], device="tpu")
    before = unlowered_calls()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = UNLOWERED(x)
        UNLOWERED(x)
    assert y.device.type == "tpu"
    torch.testing.assert_close(y.cpu(), UNLOWERED(x.cpu()))
    messages = [str(w.message) for w in caught if "aten::special_bessel_j0" in str(w.message)]
    assert len(messages) <= 1  # once per op per process (none if an earlier test used exp)
    if before == 0:
        assert len(messages) == 1 and "TORCHTPU_CPU_FALLBACK=error" in messages[0]
    assert unlowered_calls() == before + 2


def test_fallback_of_in_place_and_out_ops_writes_back_to_tpu():
    x = torch.tensor([-1.25, 2.5, -3.75], device="tpu")
    alias = x.view(3, 1)
    x.frac_()
    assert alias.cpu().flatten().tolist() == [-0.25, 0.5, -0.75]
    out = torch.empty(0, device="tpu")
    torch.special.bessel_j0(x, out=out)
    torch.testing.assert_close(out.cpu(), torch.special.bessel_j0(x.cpu()))


def test_fallback_error_policy_raises(fallback_error):
    with pytest.raises(NotImplementedError, match="aten::special_bessel_j1(.out)? has no tpu "
                                                  "lowering, and TORCHTPU_CPU_FALLBACK=error"):
        torch.special.bessel_j1(torch.ones(2, device="tpu"))


def test_lowered_ops_do_not_fall_back(fallback_error):
    a = torch.arange(6.0).reshape(2, 3).to("tpu")
    r = (a + a * 2 - 1) / 3
    r.t()[0].add_(1)
    assert r.cpu().shape == (2, 3)


def test_fallback_policy_is_validated():
    with pytest.raises(RuntimeError, match="TORCHTPU_CPU_FALLBACK must be 'warn' or 'error'"):
        torchtpu._C._set_cpu_fallback_policy("ignore")
