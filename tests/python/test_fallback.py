"""Ops without a lowering run on the CPU: correct results, one warning, a count, or an error."""

import warnings

import pytest
import torch

import torchtpu


# An op that has no tpu lowering (ALLOWED_FALLBACKS in test_opinfo.py lists them).
UNLOWERED = torch.linalg.eig


def unlowered_calls():
    return sum(n for op, n in torchtpu.metrics()["cpu_fallbacks"].items()
               if op.startswith("aten::linalg_eig"))


def test_unlowered_op_runs_on_cpu_with_one_warning_and_a_count():
    x = torch.tensor([[0.0, 1.0], [2.0, 0.5]], device="tpu")
    before = unlowered_calls()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = UNLOWERED(x)
        UNLOWERED(x)
    assert [t.device.type for t in y] == ["tpu", "tpu"]
    torch.testing.assert_close([t.cpu() for t in y], list(UNLOWERED(x.cpu())))
    messages = [str(w.message) for w in caught if "aten::linalg_eig" in str(w.message)]
    assert len(messages) <= 1  # once per op per process (none if an earlier test used eig)
    if before == 0:
        assert len(messages) == 1 and "TORCHTPU_CPU_FALLBACK=error" in messages[0]
    assert unlowered_calls() == before + 2


def test_fallback_of_out_ops_writes_back_to_tpu():
    a = torch.tensor([[2.0, 1.0], [0.0, 3.0]])
    values = torch.zeros(2, 2, dtype=torch.complex64, device="tpu")
    vectors = torch.empty(0, dtype=torch.complex64, device="tpu")
    torch.linalg.eig(a.to("tpu"), out=(values[1], vectors))  # a view: written through its base
    expected = torch.linalg.eig(a)
    assert values.cpu()[0].tolist() == [0, 0]
    torch.testing.assert_close(values.cpu()[1], expected.eigenvalues)
    torch.testing.assert_close(vectors.cpu(), expected.eigenvectors)


def test_fallback_error_policy_raises(fallback_error):
    with pytest.raises(NotImplementedError, match="aten::linalg_eig has no tpu "
                                                  "lowering, and TORCHTPU_CPU_FALLBACK=error"):
        torch.linalg.eig(torch.ones(2, 2, device="tpu"))


def test_lowered_ops_do_not_fall_back(fallback_error):
    a = torch.arange(6.0).reshape(2, 3).to("tpu")
    r = (a + a * 2 - 1) / 3
    r.t()[0].add_(1)
    assert r.cpu().shape == (2, 3)


def test_fallback_policy_is_validated():
    with pytest.raises(RuntimeError, match="TORCHTPU_CPU_FALLBACK must be 'warn' or 'error'"):
        torchtpu._C._set_cpu_fallback_policy("ignore")


def test_nested_tensors_run_on_the_cpu_and_come_back():
    """Nested tpu tensors (what nn.TransformerEncoder's inference fast path makes of a padded
    batch) copy between the devices, and their ops run through the CPU's nested kernels: the
    encoder with a padding mask had raised NotImplementedError."""
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2).eval()
    x = torch.randn(2, 5, 16)
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[1, 3:] = True
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = enc(x, src_key_padding_mask=mask)
        got = enc.to("tpu")(x.to("tpu"), src_key_padding_mask=mask.to("tpu"))
        assert got.device.type == "tpu"
        torch.testing.assert_close(got.cpu(), expected)
        a, b = torch.randn(2, 4), torch.randn(3, 4)
        nested = torch.nested.nested_tensor([a, b], device="tpu")
        assert nested.is_nested and nested.device.type == "tpu"
        padded = (nested * 2 + 1).to_padded_tensor(-1.0)
        expected = (torch.nested.nested_tensor([a, b]) * 2 + 1).to_padded_tensor(-1.0)
        torch.testing.assert_close(padded.cpu(), expected)
        assert torch.equal(nested.cpu().unbind()[1], b)
