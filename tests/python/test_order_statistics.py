"""Sorting-based statistics, scans, searches and value-dependent results on "tpu" against the CPU,
with no CPU fallback: the cases OpInfo's samples do not reach (NaN, ties, empty slices, negative
dims, non-contiguous inputs), in every eager mode."""

import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("fallback_error")

MODES = ["strict", "debug", "defer_and_fuse"]
NAN, INF = float("nan"), float("inf")

WITH_NAN = torch.tensor([[3.0, NAN, 1.0, 2.0, 1.0], [NAN, NAN, NAN, NAN, NAN],
                         [2.0, 2.0, 5.0, 5.0, -1.0]])
TIES = torch.tensor([[1.0, 3, 1, 3, 1, 3, 0, 0, 0, 0], [NAN, NAN, NAN, 1, 1, 5, 5, 5, 7, 7]])
G = torch.Generator().manual_seed(0)
R = torch.randn(4, 6, generator=G)



def flushed(d, result):
    """`result` (a tensor or a pair) and an op with a non-empty result after it."""
    first = result[0] if isinstance(result, tuple) else result
    return first, torch.arange(3.0).to(d) * 2


def values_and_indices(result, rows):
    """All values, and the indices of `rows` only."""
    return result.values, result.indices[rows]


CASES = {
    "median_nan": lambda d: WITH_NAN.to(d).median(),
    "median_dim_nan": lambda d: WITH_NAN.to(d).median(1),
    "median_dim_negative_keepdim": lambda d: R.to(d).median(-2, keepdim=True),
    "median_int": lambda d: torch.tensor([[3, 1, 2, 4], [5, 5, 0, 1]]).to(d).median(1),
    "median_empty": lambda d: torch.zeros(0).to(d).median(),
    "median_noncontiguous": lambda d: R.to(d).t().median(1),
    "nanmedian": lambda d: WITH_NAN.to(d).nanmedian(),
    # An all-NaN row's index is wherever the CPU's nth_element leaves a NaN: not compared.
    "nanmedian_dim": lambda d: values_and_indices(WITH_NAN.to(d).nanmedian(1), [0, 2]),
    # Among equal values (and NaNs) the CPU's quickselect picks any index: row 0 has none.
    "kthvalue_nan": lambda d: values_and_indices(WITH_NAN.to(d).kthvalue(4, 1), [0]),
    "kthvalue_dim0": lambda d: R.to(d).kthvalue(2, 0, keepdim=True),
    "mode_ties_and_nan": lambda d: TIES.to(d).mode(1),
    "mode_dim0": lambda d: torch.tensor([[1, 2], [1, 3], [2, 3]]).to(d).mode(0),
    "cummax_nan_ties": lambda d: torch.cummax(TIES.to(d), 1),
    "cummin_nan": lambda d: torch.cummin(WITH_NAN.to(d), -1),
    "cummax_int": lambda d: torch.cummax(torch.tensor([[2, 1, 2, 5], [0, 0, -1, 0]]).to(d), 1),
    "cumprod_zeros": lambda d: torch.cumprod(torch.tensor([[2.0, 0.0, 3.0], [1.0, -2, 4]]).to(d), 1),
    "cumprod_int_dtype": lambda d: torch.cumprod(torch.tensor([1, 2, 3, 4]).to(d), 0,
                                                 dtype=torch.float64),
    "logcumsumexp_infinities": lambda d: torch.logcumsumexp(
        torch.tensor([-INF, -INF, 0.0, INF, 1.0, NAN]).to(d), 0),
    "logcumsumexp_large": lambda d: torch.logcumsumexp((R * 100).to(d), 1),
    "searchsorted": lambda d: torch.searchsorted(torch.tensor([1.0, 2, 2, 2, 3]).to(d),
                                                 torch.tensor([[2.0, 0], [3.5, 2.5]]).to(d)),
    "searchsorted_right_nan": lambda d: torch.searchsorted(
        torch.tensor([1.0, 2, NAN]).to(d), torch.tensor([NAN, 2.0, 3.0]).to(d), right=True),
    "searchsorted_side_int32": lambda d: torch.searchsorted(
        torch.tensor([1, 2, 2, 3]).to(d), torch.tensor([2, 4]).to(d), side="right", out_int32=True),
    "searchsorted_rows_sorter": lambda d: torch.searchsorted(
        torch.tensor([[3.0, 1, 2], [9, 7, 8]]).to(d), torch.tensor([[2.0], [7.5]]).to(d),
        sorter=torch.tensor([[1, 2, 0], [1, 2, 0]]).to(d)),
    "searchsorted_scalar": lambda d: torch.searchsorted(torch.tensor([0.1, 0.2, 0.3]).to(d), 0.2),
    "bucketize": lambda d: torch.bucketize(torch.tensor([[0.5, 2.0], [9.0, -1.0]]).to(d),
                                           torch.tensor([0.0, 1.0, 2.0]).to(d), right=True),
    "bucketize_scalar": lambda d: torch.bucketize(3, torch.tensor([1, 3, 5]).to(d)),
    "histc": lambda d: torch.histc(torch.tensor([1.0, 2, 1, 4, 9, -1]).to(d), 4, 0, 4),
    "histc_data_range": lambda d: torch.histc(torch.tensor([1.0, 2, 1, 4, 3.5]).to(d), 3),
    "histc_one_value": lambda d: torch.histc(torch.tensor([2.0, 2.0]).to(d), 5),
    "unique": lambda d: torch.unique(torch.tensor([3.0, 1, NAN, 2, 1, NAN]).to(d),
                                     return_inverse=True, return_counts=True),
    "unique_2d_inverse": lambda d: torch.unique(torch.tensor([[3, 1], [1, 5]]).to(d),
                                                return_inverse=True),
    "unique_empty": lambda d: torch.unique(torch.zeros(0, 2).to(d), return_inverse=True,
                                           return_counts=True),
    "unique_bool": lambda d: torch.unique(torch.tensor([True, False, True]).to(d),
                                          return_counts=True),
    "unique_consecutive": lambda d: torch.unique_consecutive(
        torch.tensor([3.0, 3, NAN, NAN, 1, 1, 3]).to(d), return_inverse=True, return_counts=True),
    "nan_to_num": lambda d: torch.nan_to_num(torch.tensor([NAN, INF, -INF, 1.5]).to(d)),
    "nan_to_num_given": lambda d: torch.nan_to_num(torch.tensor([NAN, INF, -INF]).to(d), 1.0,
                                                   posinf=2.0),
    "nan_to_num_half": lambda d: torch.nan_to_num(torch.tensor([INF, -INF]).half().to(d)),
    "nansum_dim": lambda d: torch.nansum(WITH_NAN.to(d), 1),
    "count_nonzero_dims": lambda d: torch.count_nonzero(torch.tensor([[0, 1], [2, 0]]).to(d),
                                                        dim=(0, -1)),
    "aminmax_nan": lambda d: torch.aminmax(WITH_NAN.to(d), dim=1),
    "trace_int": lambda d: torch.trace(torch.arange(12).view(3, 4).to(d)),
    "renorm": lambda d: torch.renorm(R.to(d), 1, 0, 2.0),
    # Empty inputs, each followed by an op with a result: DeferAndFuse compiles them together.
    "median_no_rows": lambda d: flushed(d, torch.zeros(0, 5).to(d).median(1)),
    "mode_no_rows": lambda d: flushed(d, torch.zeros(0, 3).to(d).mode(1)),
    "kthvalue_no_rows": lambda d: flushed(d, torch.zeros(0, 3).to(d).kthvalue(1, 1)),
    "searchsorted_empty_sorter": lambda d: flushed(d, torch.searchsorted(
        torch.zeros(2, 0).to(d), torch.ones(2, 1).to(d),
        sorter=torch.zeros(2, 0, dtype=torch.long).to(d))),
}


def outcome(fn, device):
    r = fn(device)
    return [t.cpu() for t in r] if isinstance(r, tuple) else r.cpu()


@pytest.mark.parametrize("name,mode", [(n, m) for m in MODES for n in CASES])
def test_gives_the_cpus_values(name, mode):
    with torchtpu.eager_mode(mode):
        got = outcome(CASES[name], "tpu")
    torch.testing.assert_close(got, outcome(CASES[name], "cpu"), equal_nan=True)


def test_unique_waits_once_for_its_size():
    x = torch.tensor([3, 1, 3, 2]).to("tpu")
    with torchtpu.eager_mode("defer_and_fuse"):
        values, counts = torch.unique(x * 2, return_counts=True)
        assert values.shape == (3,)
        torch.testing.assert_close(values.cpu(), torch.tensor([2, 4, 6]))
        torch.testing.assert_close(counts.cpu(), torch.tensor([1, 1, 2]))
