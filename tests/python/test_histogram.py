"""histc, histogram and histogramdd on "tpu" against the CPU, with no CPU fallback: the cases
OpInfo's samples do not reach (NaN, values outside the range or on its last edge, weights,
density, empty inputs, a one-value range, 0-d and non-contiguous inputs), in every eager mode, and
the CPU's errors for bad arguments and for a range of the data that is not finite."""

import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("fallback_error")

MODES = ["strict", "debug", "defer_and_fuse"]
NAN, INF = float("nan"), float("inf")

X = torch.tensor([0.5, 2.0, -1.0, 4.0, NAN, 3.999, 1.0, 0.0, 9.0])
W = torch.tensor([1.0, -2.0, 0.5, 3.0, 7.0, 1.5, 2.0, -0.25, 4.0])
P = torch.tensor([[0.0, 1.0], [0.5, 0.25], [1.0, 1.0], [0.75, NAN], [2.0, 0.5], [0.25, 0.75]])
EDGES = torch.tensor([-1.0, 0.0, 0.5, 2.0, 4.0])


def hist(result):
    return tuple(result) if isinstance(result, tuple) else result


CASES = {
    # Values outside the range and NaN are not counted; 4.0, the last edge, is in the last bin.
    "range_outside_nan_last_edge": lambda d: torch.histogram(X.to(d), 4, range=(0.0, 4.0)),
    "weights_density": lambda d: torch.histogram(X.to(d), 3, range=(-1.0, 4.0), weight=W.to(d),
                                                 density=True),
    "data_range": lambda d: torch.histogram(X[~X.isnan()].to(d), 5),
    "one_value": lambda d: torch.histogram(torch.full((4,), 2.5).to(d), 3),
    "empty": lambda d: torch.histogram(torch.zeros(0).to(d), 2),
    "empty_density": lambda d: torch.histogram(torch.zeros(0, 3).to(d), 2, density=True),
    "zero_dim_weight": lambda d: torch.histogram(torch.tensor(1.5).to(d), 2,
                                                 weight=torch.tensor(3.0).to(d)),
    "noncontiguous_float64": lambda d: torch.histogram(
        torch.arange(12.0, dtype=torch.float64).view(3, 4).t().to(d), 3),
    "edges_on_values": lambda d: torch.histogram(X.to(d), EDGES.to(d), weight=W.to(d)),
    "edges_density": lambda d: torch.histogram(X.to(d), EDGES.to(d), density=True),
    "out_view": lambda d: histogram_into_view(d),
    "dd_counts_range": lambda d: torch.histogramdd(P.to(d), [2, 3], range=[0.0, 1.0, 0.0, 1.0]),
    "dd_weights_density": lambda d: torch.histogramdd(P[:3].to(d), [2, 2],
                                                      weight=torch.tensor([1.0, 2, 3]).to(d),
                                                      density=True),
    "dd_edges": lambda d: torch.histogramdd(P.to(d), [EDGES.to(d), torch.tensor([0.0, 1]).to(d)],
                                            weight=torch.arange(6.0).to(d)),
    "dd_three_dims": lambda d: torch.histogramdd(torch.arange(24.0).view(2, 4, 3).to(d), 2,
                                                 weight=torch.arange(8.0).view(2, 4).to(d)),
    "dd_no_points": lambda d: torch.histogramdd(torch.zeros(0, 2).to(d), [2, 1]),
    "histc_outside_nan": lambda d: torch.histc(X.to(d), 4, 0, 4),
    "histc_empty": lambda d: torch.histc(torch.zeros(0).to(d), 3),
    "histc_infinities_range_given": lambda d: torch.histc(
        torch.tensor([1.0, -INF, INF, NAN, 2.5]).to(d), 3, 0, 3),
}


def histogram_into_view(d):
    counts = torch.full((2, 3), -1.0).to(d)
    edges = torch.empty(0).to(d)
    torch.histogram(X.to(d), 3, range=(0.0, 3.0), out=(counts[1], edges))
    return counts, edges


def outcome(fn, device):
    result = fn(device)
    if isinstance(result, torch.Tensor):
        return [result.cpu()]
    flat = []
    for r in result:
        flat.extend(t.cpu() for t in (r if isinstance(r, (tuple, list)) else [r]))
    return flat


@pytest.mark.parametrize("name,mode", [(n, m) for m in MODES for n in CASES])
def test_gives_the_cpus_values(name, mode):
    with torchtpu.eager_mode(mode):
        got = outcome(CASES[name], "tpu")
    expected = outcome(CASES[name], "cpu")
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, equal_nan=True)


A = torch.arange(6.0)
ERRORS = {
    "int_input": (NotImplementedError, lambda d: torch.histogram(torch.arange(3).to(d), 2)),
    "bins_zero": (RuntimeError, lambda d: torch.histogram(A.to(d), 0)),
    "range_reversed": (RuntimeError, lambda d: torch.histogram(A.to(d), 2, range=(3.0, 1.0))),
    "range_length": (RuntimeError, lambda d: torch.ops.aten.histogram(A.to(d), 2,
                                                                      range=[0.0, 1, 2])),
    "weight_dtype": (RuntimeError, lambda d: torch.histogram(A.to(d), 2,
                                                             weight=A.double().to(d))),
    "weight_shape": (RuntimeError, lambda d: torch.histogram(A.to(d), 2, weight=A[:4].to(d))),
    "edges_2d": (RuntimeError, lambda d: torch.histogram(A.to(d), torch.ones(2, 2).to(d))),
    "edges_one": (RuntimeError, lambda d: torch.histogram(A.to(d), torch.ones(1).to(d))),
    "edges_dtype": (RuntimeError, lambda d: torch.histogram(A.to(d), A.double().to(d))),
    "out_dtype": (RuntimeError, lambda d: torch.histogram(
        A.to(d), 2, out=(torch.empty(0, dtype=torch.float64).to(d), torch.empty(0).to(d)))),
    "dd_one_dim": (RuntimeError, lambda d: torch.ops.aten._histogramdd_from_bin_cts(A.to(d), [2])),
    "dd_bins_length": (RuntimeError, lambda d: torch.ops.aten._histogramdd_bin_edges(
        A.view(3, 2).to(d), [2])),
    "dd_range_nan": (RuntimeError, lambda d: torch.histogramdd(A.view(3, 2).to(d), [2, 2],
                                                               range=[0.0, NAN, 0, 1])),
    "dd_weight_shape": (RuntimeError, lambda d: torch.histogramdd(A.view(3, 2).to(d), [2, 2],
                                                                  weight=A.to(d))),
    "histc_range_inf": (RuntimeError, lambda d: torch.histc(A.to(d), 3, 0, INF)),
}


@pytest.mark.parametrize("name", ERRORS)
def test_raises_the_cpus_error(name):
    kind, fn = ERRORS[name]
    with pytest.raises(kind) as on_cpu:
        fn("cpu")
    message = str(on_cpu.value).split("\n")[0].replace("_cpu", "_tpu")
    with pytest.raises(kind) as on_tpu:
        fn("tpu")
    assert str(on_tpu.value).split("\n")[0] == message


# A range of the data holding NaN or an infinity: the CPU names the range it found; the device-side
# check knows a NaN's ([nan, nan]) but not an infinity's other end. Each pair: fn, the CPU's error,
# tpu's.
INFINITY = r"\[min, max\] is not finite: the input holds an infinity"
NOT_FINITE = {
    "histc_nan": (lambda d: torch.histc(torch.tensor([1.0, NAN, 2.0]).to(d), 3),
                  r"torch\.histc: range of \[-?nan, -?nan\] is not finite",
                  r"torch\.histc: range of \[nan, nan\] is not finite"),
    "histc_inf": (lambda d: torch.histc(torch.tensor([1.0, -INF]).to(d), 3),
                  r"torch\.histc: range of \[-inf, 1\] is not finite",
                  r"torch\.histc: range of " + INFINITY),
    "histogram_nan": (lambda d: torch.histogram(torch.tensor([1.0, NAN]).to(d), 2),
                      r"dimension 0's range \[nan, nan\] is not finite",
                      r"aten::histogram: torch\.histogramdd: dimension 0's range \[nan, nan\]"),
    "histogram_inf": (lambda d: torch.histogram(torch.tensor([1.5, INF]).to(d), 2),
                      r"dimension 0's range \[1.5, inf\] is not finite",
                      r"torch\.histogramdd: dimension 0's range " + INFINITY),
    "histogramdd_nan_dim1": (lambda d: torch.histogramdd(torch.tensor([[1.0, NAN], [2, 3]]).to(d),
                                                         [2, 3]),
                             r"dimension 1's range \[nan, nan\] is not finite",
                             r"torch\.histogramdd: dimension 1's range \[nan, nan\]"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NOT_FINITE)
def test_a_range_of_data_not_finite_raises_at_the_next_sync(mode, name):
    fn, on_cpu, on_tpu = NOT_FINITE[name]
    with pytest.raises(RuntimeError, match=on_cpu):
        fn("cpu")
    with torchtpu.eager_mode(mode), pytest.raises(RuntimeError, match=on_tpu):
        fn("tpu")
        torch.tpu.synchronize()
