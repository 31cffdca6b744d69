"""NaN, infinities, signed zeros and empty inputs through every NaN-sensitive op, against the CPU.

Each case is an op on small inputs built on a given device; it runs on the CPU and on "tpu" in
every eager mode. Where the CPU returns, "tpu" must return the same values (NaN equal to NaN, the
sign of each zero too) and dtypes; where the CPU raises, "tpu" must raise the same exception type.
The second half feeds PyTorch's own OpInfo samples of the NaN-sensitive ops, with NaN and
infinities written into their inputs.
"""

import math

import pytest
import torch
from torch.utils._pytree import tree_map

from conftest import assert_same_as_cpu
from test_opinfo import _load_op_db

nan, inf = math.nan, math.inf
F = torch.nn.functional

def _grad(fn, x):
    """fn(x) and its gradient at x."""
    x = x.detach().requires_grad_()
    y = fn(x)
    return y, torch.autograd.grad(y.sum(), x)[0]


def _read(results):
    """The results and their sums (an empty tensor's copy to the host runs no program)."""
    return [*results, *(t.sum() for t in results)]


def vec(*values, device):
    return torch.tensor(values, device=device)


def mat(rows, device):
    return torch.tensor(rows, device=device)


# Rows hold a NaN in the middle and at the end, an infinity, and ties, so the index CPU reports
# for the NaN (its first occurrence) is checked too.
ROWS = [[1.0, nan, 3.0, nan], [2.0, -inf, 2.0, 0.0], [inf, nan, -inf, 1.0]]
SPECIALS = (nan, -0.0, 0.0, inf, -inf, -2.0, 3.0)

CASES = {
    # Reductions over everything.
    "max_nan": lambda d: vec(nan, 1.0, device=d).max(),
    "min_nan": lambda d: vec(1.0, nan, device=d).min(),
    "amax_nan": lambda d: vec(nan, 1.0, device=d).amax(),
    "amin_nan": lambda d: vec(1.0, nan, device=d).amin(),
    "max_nan_inf": lambda d: vec(nan, inf, device=d).max(),
    "max_inf_nan": lambda d: vec(inf, nan, device=d).max(),
    "min_neginf_nan": lambda d: vec(-inf, nan, device=d).min(),
    "max_all_neginf": lambda d: vec(-inf, -inf, device=d).max(),
    "min_all_inf": lambda d: vec(inf, inf, device=d).min(),
    "max_int": lambda d: vec(3, -7, 5, device=d).max(),
    "argmax_nan": lambda d: vec(1.0, nan, 3.0, nan, device=d).argmax(),
    "argmin_nan": lambda d: vec(1.0, nan, -3.0, nan, device=d).argmin(),
    "argmax_all_neginf": lambda d: vec(-inf, -inf, device=d).argmax(),
    # Reductions over a dimension, with indices.
    "max_dim": lambda d: mat(ROWS, d).max(1),
    "min_dim": lambda d: mat(ROWS, d).min(1),
    "max_dim0_keepdim": lambda d: mat(ROWS, d).max(0, keepdim=True),
    "amax_dim": lambda d: mat(ROWS, d).amax(1),
    "amin_dims": lambda d: mat(ROWS, d).amin((0, 1)),
    "argmax_dim": lambda d: mat(ROWS, d).argmax(1),
    "argmin_dim": lambda d: mat(ROWS, d).argmin(0),
    "vector_norm_inf": lambda d: torch.linalg.vector_norm(mat(ROWS, d), inf, dim=1),
    "vector_norm_neginf": lambda d: torch.linalg.vector_norm(mat(ROWS, d), -inf, dim=1),
    "logsumexp_rows": lambda d: torch.logsumexp(mat(ROWS, d), 1),
    "logsumexp_inf": lambda d: torch.logsumexp(vec(inf, 1.0, device=d), 0),
    "logsumexp_inf_neginf": lambda d: torch.logsumexp(vec(inf, -inf, device=d), 0),
    "logsumexp_all_neginf": lambda d: torch.logsumexp(vec(-inf, -inf, device=d), 0),
    "sum_nan": lambda d: mat(ROWS, d).sum(1),
    "mean_inf_neginf": lambda d: vec(inf, -inf, device=d).mean(),
    # Elementwise max and min; fmax and fmin ignore NaN.
    "maximum": lambda d: torch.maximum(vec(nan, 1.0, nan, -0.0, device=d),
                                       vec(1.0, nan, nan, 0.0, device=d)),
    "minimum": lambda d: torch.minimum(vec(nan, 1.0, nan, 2.0, device=d),
                                       vec(1.0, nan, nan, -inf, device=d)),
    "max_other": lambda d: torch.max(vec(nan, 1.0, device=d), vec(1.0, nan, device=d)),
    "min_other": lambda d: torch.min(vec(nan, 1.0, device=d), vec(1.0, nan, device=d)),
    "maximum_scalar_nan": lambda d: torch.maximum(vec(1.0, 2.0, device=d),
                                                  torch.tensor(nan, device=d)),
    "fmax": lambda d: torch.fmax(vec(nan, 1.0, nan, device=d), vec(1.0, nan, nan, device=d)),
    "fmin": lambda d: torch.fmin(vec(nan, 1.0, nan, device=d), vec(1.0, nan, nan, device=d)),
    # clamp: a NaN bound or a NaN input gives NaN.
    "clamp_nan_max": lambda d: torch.clamp(vec(1.0, 2.0, device=d), None, nan),
    "clamp_nan_min": lambda d: torch.clamp(vec(1.0, 2.0, device=d), nan, None),
    "clamp_nan_input": lambda d: torch.clamp(vec(nan, 2.0, -inf, device=d), 0.0, 1.0),
    "clamp_tensor_nan_bounds": lambda d: torch.clamp(vec(1.0, 2.0, device=d),
                                                     vec(nan, 0.0, device=d),
                                                     vec(3.0, nan, device=d)),
    "clamp_min_above_max": lambda d: torch.clamp(vec(1.0, 2.0, 3.0, device=d), 2.5, 1.5),
    "clamp_min_nan": lambda d: torch.clamp_min(vec(nan, 2.0, device=d), nan),
    "clamp_min_nan_input": lambda d: torch.clamp_min(vec(nan, 2.0, device=d), 0.0),
    "clamp_max_nan": lambda d: torch.clamp_max(vec(3.0, 2.0, device=d), nan),
    "clamp_max_nan_input": lambda d: torch.clamp_max(vec(nan, 2.0, device=d), 1.0),
    "clamp_inplace_nan": lambda d: vec(nan, 2.0, 5.0, device=d).clamp_(0.0, 3.0),
    "clamp_int": lambda d: torch.clamp(vec(-5, 0, 9, device=d), -1, 4),
    # Activations.
    "relu": lambda d: torch.relu(vec(nan, -1.0, -0.0, 1.0, device=d)),
    "relu_": lambda d: vec(nan, -1.0, inf, device=d).relu_(),
    "hardtanh": lambda d: F.hardtanh(vec(nan, -3.0, 3.0, 0.5, device=d)),
    "relu6": lambda d: F.relu6(vec(nan, -3.0, 7.0, device=d)),
    "leaky_relu": lambda d: F.leaky_relu(vec(nan, -inf, 2.0, device=d)),
    # sign of NaN is 0 on the CPU, and of -0. is +0.
    "sign": lambda d: torch.sign(vec(*SPECIALS, device=d)),
    "sign_": lambda d: vec(*SPECIALS, device=d).sign_(),
    "sgn": lambda d: torch.sgn(vec(*SPECIALS, device=d)),
    "sign_int": lambda d: torch.sign(vec(-3, 0, 4, device=d)),
    "sign_bool": lambda d: torch.sign(vec(True, False, device=d)),
    "sign_half": lambda d: torch.sign(vec(*SPECIALS, device=d).half()),
    # Ordering: NaN sorts as the largest value.
    "sort": lambda d: torch.sort(vec(3.0, nan, 1.0, -inf, nan, inf, device=d)),
    "sort_descending": lambda d: torch.sort(vec(3.0, nan, 1.0, -inf, nan, inf, device=d),
                                            descending=True),
    "sort_stable_rows": lambda d: torch.sort(mat(ROWS, d), 1, stable=True),
    "topk_largest": lambda d: torch.topk(vec(3.0, nan, 1.0, -inf, nan, inf, device=d), 3),
    "topk_smallest": lambda d: torch.topk(vec(3.0, nan, 1.0, -inf, nan, inf, device=d), 3,
                                          largest=False),
    "cummax": lambda d: torch.cummax(vec(1.0, nan, 3.0, device=d), 0),
    "cummin": lambda d: torch.cummin(vec(1.0, nan, -3.0, device=d), 0),
    "median": lambda d: torch.median(vec(1.0, nan, 3.0, device=d)),
    # Softmax and pooling propagate NaN through their max.
    "softmax_nan_row": lambda d: torch.softmax(mat([[nan, 1.0], [1.0, 2.0]], d), 1),
    "log_softmax_nan_row": lambda d: torch.log_softmax(mat([[nan, 1.0], [1.0, 2.0]], d), 1),
    "softmax_inf": lambda d: torch.softmax(mat([[inf, 1.0], [-inf, -inf]], d), 1),
    # A 0-d tensor is a row of one: NaN and inf propagate, and the gradient is 0.
    "softmax_0d": lambda d: [torch.softmax(torch.tensor(v, device=d), 0) for v in (nan, inf, 2.)],
    "log_softmax_0d": lambda d: [torch.log_softmax(torch.tensor(v, device=d), 0)
                                 for v in (nan, -inf, 2.)],
    "softmax_0d_grad": lambda d: [_grad(lambda x: f(x, 0) * 3, torch.tensor(2.0, device=d))
                                  for f in (torch.softmax, torch.log_softmax)],
    # nll skips the ignored samples: their scores (NaN, inf) never reach the loss or the
    # gradient, even when all are ignored and the mean divides by a total weight of 0.
    "nll_ignored_scores": lambda d: [
        F.nll_loss(mat([[nan, inf, 1.0], [0.5, -1.0, 2.0]], d), vec(1, 2, device=d),
                   ignore_index=1, reduction=r) for r in ("none", "sum", "mean")],
    "nll_2d_ignored_scores": lambda d: F.nll_loss(
        torch.tensor([[[[nan]], [[-inf]]], [[[1.0]], [[2.0]]]], device=d),
        torch.tensor([[[1]], [[0]]], device=d), ignore_index=1, reduction="none"),
    "cross_entropy_all_ignored_grad": lambda d: _grad(
        lambda x: F.cross_entropy(x, vec(1, 1, device=d), ignore_index=1),
        mat([[0.5, -1.2, 3.0], [2.0, 0.1, -16.0]], d)),
    "nll_ignored_grad": lambda d: _grad(
        lambda x: F.nll_loss(x, vec(1, 0, device=d), ignore_index=1, reduction="sum"),
        mat([[nan, inf, 1.0], [0.5, -1.0, 2.0]], d)),
    "max_pool2d": lambda d: F.max_pool2d(torch.tensor([[[[1.0, nan], [2.0, 3.0]]]], device=d), 2),
    "max_pool2d_indices": lambda d: F.max_pool2d(
        torch.tensor([[[[1.0, nan, 2.0], [nan, 3.0, inf]]]], device=d), 2, 1,
        return_indices=True),
    "max_pool1d": lambda d: F.max_pool1d(torch.tensor([[[1.0, nan, 2.0, 3.0]]], device=d), 2),
    # Dropout's gradient is grad * mask * scale: a dropped NaN stays NaN, a dropped -1. is -0.
    "native_dropout_backward": lambda d: torch.ops.aten.native_dropout_backward(
        vec(nan, nan, -1.0, -1.0, device=d), vec(True, False, False, True, device=d), 2.0),
    # Empty inputs: CPU raises for max/min/argmax without an identity, and for a reduction over
    # a dimension of size 0; sum, prod and mean give 0, 1 and NaN.
    "max_empty": lambda d: torch.ones(0, device=d).max(),
    "min_empty": lambda d: torch.ones(0, device=d).min(),
    "amax_empty": lambda d: torch.ones(0, device=d).amax(),
    "amin_empty": lambda d: torch.ones(0, device=d).amin(),
    "argmax_empty": lambda d: torch.ones(0, device=d).argmax(),
    "argmin_empty": lambda d: torch.ones(0, device=d).argmin(),
    "max_dim_size0": lambda d: torch.ones(2, 0, device=d).max(1),
    "min_dim_size0": lambda d: torch.ones(2, 0, device=d).min(1),
    "max_dim_other_size0": lambda d: torch.ones(0, 2, device=d).max(1),
    "amax_dim_size0": lambda d: torch.ones(2, 0, device=d).amax(1),
    "amax_dim_other_size0": lambda d: torch.ones(0, 2, device=d).amax(1),
    "argmax_dim_size0": lambda d: torch.ones(2, 0, device=d).argmax(1),
    "logsumexp_empty": lambda d: torch.logsumexp(torch.ones(0, device=d), 0),
    "softmax_empty": lambda d: torch.softmax(torch.ones(2, 0, device=d), 1),
    "sort_empty": lambda d: torch.sort(torch.ones(0, device=d)),
    "sum_empty": lambda d: torch.ones(0, device=d).sum(),
    "sum_empty_dim": lambda d: torch.ones(2, 0, device=d).sum(1),
    "prod_empty": lambda d: torch.ones(0, device=d).prod(),
    "mean_empty": lambda d: torch.ones(0, device=d).mean(),
    "var_empty": lambda d: torch.ones(0, device=d).var(),
    "all_empty": lambda d: torch.ones(0, device=d).all(),
    "any_empty": lambda d: torch.ones(0, device=d).any(),
    # A scan over a dimension of size 0 (forward and gradient, and their sums, which read
    # them): DeferAndFuse had recorded a window of no elements, a program the plugin refuses.
    **{f"{name}_empty_{'x'.join(map(str, shape))}": (
        lambda d, f=f, shape=shape: _read(_grad(lambda x: f(x) * 2, torch.ones(shape, device=d))))
       for name, f in {
           "cumsum": lambda x: torch.cumsum(x, 0), "cumprod": lambda x: torch.cumprod(x, 0),
           "logcumsumexp": lambda x: torch.logcumsumexp(x, 0),
           "cummax": lambda x: torch.cummax(x, 0)[0], "cummin": lambda x: torch.cummin(x, 0)[0],
           "cumulative_trapezoid": lambda x: torch.cumulative_trapezoid(x, x * 2, dim=0)}.items()
       for shape in [(0,), (0, 3)]},
    # Losses of no elements: their mean is NaN, their gradient empty (the meta function of
    # mse_loss_backward had divided by the size 0: ZeroDivisionError).
    **{f"{name}_empty_mean_grad": (
        lambda d, f=f: _grad(lambda x: f(x, torch.zeros_like(x)), torch.ones(0, 3, device=d)))
       for name, f in {"mse_loss": F.mse_loss, "l1_loss": F.l1_loss,
                       "smooth_l1_loss": F.smooth_l1_loss, "huber_loss": F.huber_loss}.items()},
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_cpu(case, each_eager_mode):
    assert_same_as_cpu(CASES[case])


def test_nan_reductions_stay_on_device(fallback_error):
    x = vec(nan, 1.0, device="tpu")
    assert x.max().isnan().item() and x.amin().isnan().item()
    assert torch.clamp(x, None, nan).isnan().all().item()
    assert torch.maximum(x, x.flip(0)).isnan().all().item()


# OpInfo samples of the NaN-sensitive ops, with NaN (every third element) and infinities written
# into their floating inputs.
NAN_SENSITIVE = {
    "max", "min", "amax", "amin", "argmax", "argmin", "maximum", "minimum", "fmax", "fmin",
    "clamp", "clamp_min", "clamp_max", "sort", "topk", "cummax", "cummin", "logsumexp", "sign",
    "sgn", "softmax", "log_softmax", "nn.functional.relu", "nn.functional.relu6",
    "nn.functional.hardtanh", "nn.functional.max_pool1d", "nn.functional.max_pool2d",
    "nn.functional.softmax", "linalg.vector_norm", "median", "msort", "nanmean",
    "nansum",
}
# Unstable sorts and topk order equal values (NaNs among them) as they like: values only.
TIES_UNSPECIFIED = {"sort", "topk", "msort"}


def with_nans(t):
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() < 2:
        return t
    t = t.clone()
    flat = t.view(-1)
    flat[::3] = nan
    if t.numel() > 4:
        flat[1], flat[4] = inf, -inf
    return t


def nan_samples():
    for op in _load_op_db():
        if op.name not in NAN_SENSITIVE or torch.float32 not in op.supported_dtypes("cpu"):
            continue
        for k, s in enumerate(list(op.sample_inputs("cpu", torch.float32))[:4]):
            if not isinstance(s.input, torch.Tensor) or not s.input.is_contiguous():
                continue
            name = f"{op.name}.{op.variant_test_name}.{k}".replace("..", ".")
            yield pytest.param(op, s, id=name)


@pytest.mark.parametrize("op,sample", list(nan_samples()))
def test_opinfo_nan_samples_match_cpu(op, sample, each_eager_mode):
    inp, args, kwargs = with_nans(sample.input), sample.args, sample.kwargs

    def call(device):
        move = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
        return op.op(move(inp), *tree_map(move, args), **tree_map(move, kwargs))

    stable = sample.kwargs.get("stable", False)
    assert_same_as_cpu(call, floating_only=op.name in TIES_UNSPECIFIED and not stable)
