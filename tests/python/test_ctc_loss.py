"""The CTC loss on "tpu" against the CPU, for what OpInfo's one sample shape leaves out:
nn.CTCLoss forward and backward on a small random batch (padded and concatenated targets, every
reduction, a blank other than 0, repeated labels), impossible alignments with and without
zero_infinity, empty targets and inputs, non-contiguous inputs, and the CPU's errors."""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("fallback_error")

T, B, C = 9, 4, 5
INPUT_LENGTHS = [9, 7, 4, 0]
TARGET_LENGTHS = [4, 3, 3, 0]  # the last item: no input, no target (a loss of 0)


def _log_probs(dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return torch.randn(T, B, C, generator=g, dtype=dtype).log_softmax(2)


def _targets(blank):
    """[B, 4] labels other than `blank`, with repeats (which need a blank between them)."""
    labels = [c for c in range(C) if c != blank]
    return torch.tensor([[labels[0], labels[1], labels[1], labels[2]],
                         [labels[3], labels[3], labels[3], labels[0]],
                         [labels[2], labels[0], labels[2], labels[1]],
                         [labels[1], labels[1], labels[1], labels[1]]])


def _compare(fn, log_probs, *args, rtol=None, atol=None):
    grad_out = None
    results = []
    for device in ["cpu", "tpu"]:
        x = log_probs.detach().to(device).requires_grad_()
        moved = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
        out = fn(x, *moved)
        if grad_out is None:
            grad_out = torch.rand(out.shape, dtype=out.dtype,
                                  generator=torch.Generator().manual_seed(1)) + 0.5
        out.backward(grad_out.to(device))
        results.append((out.detach().cpu(), x.grad.cpu()))
    torch.testing.assert_close(results[1], results[0], equal_nan=True, rtol=rtol, atol=atol)
    return results[0]


@pytest.mark.parametrize("reduction, layout", [("none", "padded"), ("mean", "concatenated"),
                                               ("sum", "padded")])
def test_ctc_loss_module_matches_cpu(reduction, layout):
    blank = 2 if layout == "concatenated" else 0
    targets = _targets(blank)
    if layout == "concatenated":
        targets = torch.cat([targets[i, :n] for i, n in enumerate(TARGET_LENGTHS)])
    loss = torch.nn.CTCLoss(blank=blank, reduction=reduction)
    _compare(lambda x, t: loss(x, t, INPUT_LENGTHS, TARGET_LENGTHS), _log_probs(), targets)


def test_float32_and_length_tensors():
    lengths = torch.tensor(INPUT_LENGTHS), torch.tensor(TARGET_LENGTHS, dtype=torch.int32)
    _compare(lambda x, t, i, n: F.ctc_loss(x, t, i, n, reduction="sum"),
             _log_probs(torch.float32), _targets(0), *lengths, rtol=1e-5, atol=1e-5)


def test_length_tensor_overload():
    # _ctc_loss.Tensor (and its gradient, _ctc_loss_backward.Tensor) read the lengths once.
    lengths = torch.tensor(INPUT_LENGTHS), torch.tensor(TARGET_LENGTHS)
    _compare(lambda x, t, i, n: torch._ctc_loss(x, t, i, n, 0, True)[0], _log_probs(),
             _targets(0), *lengths)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignments(zero_infinity):
    # Item 1 needs 5 frames for [a, a, a] (blanks between repeats) and gets 4, item 2 gets 2
    # frames for 3 labels, item 3 none for 1: their losses are infinite (their gradients NaN),
    # or 0 with zero_infinity.
    lengths = [9, 4, 2, 0]
    loss, grad = _compare(lambda x, t: F.ctc_loss(x, t, lengths, [4, 3, 3, 1], reduction="none",
                                                  zero_infinity=zero_infinity),
                          _log_probs(), _targets(0))
    impossible = torch.tensor([False, True, True, True])
    if zero_infinity:
        assert (loss[impossible] == 0).all() and (grad[:, impossible] == 0).all()
    else:
        assert torch.isinf(loss[impossible]).all()


def test_non_contiguous_inputs():
    # log_probs made batch-first and transposed, as models do; targets a strided view.
    batch_first = _log_probs().transpose(0, 1).contiguous()
    wide = torch.cat([_targets(0), _targets(0)], 1)[:, ::2]
    _compare(lambda x, t: F.ctc_loss(x.transpose(0, 1), t, INPUT_LENGTHS, [2, 2, 1, 0]),
             batch_first, wide)


@pytest.mark.parametrize("kwargs, message", [
    ({"blank": C}, "blank must be in label range"),
    ({"input_lengths": [T + 1, 7, 4, 0]}, "Expected input_lengths to have value at most"),
    ({"input_lengths": [9, -1, 4, 0]}, "Expected input_lengths to have value at least 0"),
    ({"target_lengths": [4, -1, 3, 0]}, "Expected target_lengths to have value at least 0"),
    ({"target_lengths": [5, 3, 3, 0]}, "Expected tensor to have size at least 5"),
    ({"input_lengths": [9, 7, 4]}, "input_lengths must be of size batch_size"),
])
def test_errors_match_the_cpu(kwargs, message):
    args = {"input_lengths": INPUT_LENGTHS, "target_lengths": TARGET_LENGTHS, **kwargs}
    for device in ["cpu", "tpu"]:
        with pytest.raises(RuntimeError, match=message):
            F.ctc_loss(_log_probs().to(device), _targets(0).to(device), **args)
