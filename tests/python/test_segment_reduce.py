"""segment_reduce on "tpu" against the CPU, for what OpInfo's samples leave out: empty segments,
NaN, zeros and ties (the gradients' special cases), offsets that skip elements, segments along
an inner axis of a non-contiguous tensor, and the CPU's errors for bad lengths and offsets."""

import pytest
import torch

pytestmark = pytest.mark.usefixtures("fallback_error")

REDUCTIONS = ["sum", "mean", "max", "min", "prod"]


def _data():
    # Columns: random values; a NaN; zeros (one and two in a segment); ties of the maximum.
    x = torch.randn(7, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x[1, 1] = float("nan")
    x[2, 2] = x[5, 2] = x[6, 2] = 0
    x[:, 3] = torch.tensor([1.0, 3.0, 3.0, -2.0, 3.0, 0.5, 0.5])
    return x


def _check(data, reduce, **kwargs):
    grad = torch.randn(torch.segment_reduce(data, reduce, **kwargs).shape, dtype=data.dtype,
                       generator=torch.Generator().manual_seed(1))
    results = []
    for device in ["cpu", "tpu"]:
        x = data.detach().to(device).requires_grad_()
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        out = torch.segment_reduce(x, reduce, **moved)
        out.backward(grad.to(device))
        results.append((out.detach().cpu(), x.grad.cpu()))
    torch.testing.assert_close(results[1], results[0], equal_nan=True)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_lengths_with_empty_segments_along_an_inner_axis(reduce):
    # [4, 7] transposed (non-contiguous): segments along axis 1, one length row per column.
    lengths = torch.tensor([[2, 0, 3, 2], [3, 3, 0, 1], [0, 4, 1, 2], [1, 2, 2, 2]])
    _check(_data().t(), reduce, lengths=lengths, axis=1)
    _check(_data().t(), reduce, lengths=lengths.int(), axis=-1, initial=2.0)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_offsets_skipping_elements(reduce):
    # Rows 0 and 6 lie outside every segment: no value, no gradient.
    _check(_data(), reduce, offsets=torch.tensor([1, 3, 3, 6]), initial=-1.5)


def test_unsafe_lengths_leave_the_rest_out():
    _check(_data(), "sum", lengths=torch.tensor([2, 3]), unsafe=True)


@pytest.mark.parametrize("kwargs, message", [
    ({"lengths": torch.tensor([3, -1, 5])}, "lengths contains negative value!"),
    ({"lengths": torch.tensor([3, 2, 1])}, "Expected all rows of lengths along axis to sum"),
    ({"lengths": torch.tensor([3, -1, 2]), "unsafe": True}, "Expected segment_length >= 0"),
    ({"offsets": torch.tensor([0, 4, 2, 7])}, "Expected segment_length >= 0"),
    ({"lengths": torch.tensor([3, 4]), "axis": 1}, "Expected axis to be the last dimension"),
    ({"lengths": torch.tensor([3, 4]), "indices": torch.tensor([0])}, "indices based reduction"),
], ids=["negative", "sum_mismatch", "unsafe_negative", "decreasing_offsets", "axis", "indices"])
def test_errors_match_the_cpu(kwargs, message):
    for device in ["cpu", "tpu"]:
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        with pytest.raises(RuntimeError, match=message):
            torch.segment_reduce(_data().to(device), "sum", **moved).cpu()


def test_dtype_errors_match_the_cpu():
    for device in ["cpu", "tpu"]:
        with pytest.raises(NotImplementedError, match="not implemented for 'Float'"):
            torch.segment_reduce(_data().to(device), "sum", lengths=torch.tensor([3.0, 4.0],
                                                                                device=device))
        with pytest.raises(NotImplementedError, match="not implemented for 'Int'"):
            torch.segment_reduce(_data().int().to(device), "sum",
                                 lengths=torch.tensor([3, 4], device=device))
        with pytest.raises(RuntimeError, match="reduce argument must be either"):
            torch.segment_reduce(_data().to(device), "median",
                                 lengths=torch.tensor([3, 4], device=device))


# An offset past the data's end: the CPU's kernel reads outside the data (a segmentation fault
# when the data is empty), so there is no CPU answer to match; tpu raises.
@pytest.mark.parametrize("rows", [0, 7])
def test_offsets_past_the_end_raise(rows, each_eager_mode):
    data = _data()[:rows].to("tpu")
    with pytest.raises(RuntimeError, match="offset 9 lies outside the data's"):
        torch.segment_reduce(data, "max", offsets=torch.tensor([0, 2, 9]).to("tpu")).cpu()


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_empty_data_with_empty_segments(reduce, each_eager_mode):
    _check(_data()[:0], reduce, offsets=torch.tensor([0, 0, 0]), initial=2.0)
    _check(_data()[:0], reduce, lengths=torch.tensor([0, 0]), initial=2.0)
