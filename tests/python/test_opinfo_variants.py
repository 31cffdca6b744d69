"""OpInfo's ops on "tpu" in the forms test_opinfo.py does not call: each op's in-place variant
(x.add_(y), with gradients too), and (every other op) its first sample made non-contiguous
(SampleInput.noncontiguous(): every tensor a strided view into a larger one), in float32 against the
CPU, with test_opinfo.py's comparison, tables and tolerances (the non-contiguous views are made on
each device: `.to("tpu")` of a strided view would copy it contiguously). An in-place variant whose
input cannot hold the result (a broadcast, a type change) must raise where the CPU raises. And each
op's error inputs (OpInfo's error_inputs: invalid arguments, out= tensors that overlap an input or
themselves) must raise the error OpInfo names, where the CPU raises it. And each op's in-place and
out= forms called with arguments that share memory must raise where the CPU refuses the overlap, and
give the value on separate arguments where it accepts it. And each op's first sample in one of the
dtypes test_opinfo.py does not run (uint8, int8, int16, bfloat16, float16; each for a fifth of the
ops). And each op's out= form, into empty tensors of the result's dtypes, with the values of the
functional form and without a CPU fallback the functional form does not have.

    TORCHTPU_OPINFO_SHARD="i/n"     only every n-th op, from the i-th (default "0/1")
"""

import itertools
import re
from unittest import mock

import pytest
import torch
from torch.testing._internal.common_utils import noncontiguous_like
from torch.utils._pytree import tree_map

import test_opinfo as opinfo
import torchtpu

DTYPE = torch.float32
INPLACE_SAMPLES = 4
NONCONTIGUOUS_SAMPLES = 1  # with gradients, where the op has them

pytestmark = pytest.mark.filterwarnings("ignore:torchtpu:UserWarning")

# Ops whose result depends on the input's layout, not only its values, so a non-contiguous tpu
# input and the CPU's contiguous clone of it (test_opinfo's _clone) legitimately differ.
LAYOUT_DEPENDENT = {
    "as_strided": "strides and offsets count from the storage, not from the view",
    "as_strided.partial_views": "as as_strided", "as_strided_copy": "as as_strided",
    "as_strided_scatter": "as as_strided",
    "view_as_complex": "refuses an input whose last dimension is not of stride 1",
}


class Variant:
    """An OpInfo op called through another of its functions, for _check_sample."""

    def __init__(self, op, fn):
        self.name, self.variant_test_name, self.fn = op.name, op.variant_test_name, fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def _ops(need_inplace=False, need_errors=False):
    i, n = opinfo._shard()
    ops = sorted(opinfo._load_op_db(), key=lambda op: (op.name, op.variant_test_name))
    for index, op in enumerate(ops):
        key = opinfo._key(op)
        if (index % n != i or DTYPE not in op.supported_dtypes("cpu") or key in opinfo.SKIPS
                or op.name in opinfo.SKIPS or opinfo._known(opinfo.XFAILS, op, "")
                or (need_inplace and op.inplace_variant is None)
                or (need_errors and op.error_inputs_func is None)):
            continue
        yield pytest.param(op, id=key)


_TO_TPU = opinfo._to_tpu


def _to_tpu_noncontiguous(value):
    """test_opinfo's _to_tpu, with each tensor of more than one element a strided view on tpu
    (every other element of a larger one, whose others are NaN), as noncontiguous() made it on
    the CPU."""
    moved = _TO_TPU(value)
    if not isinstance(moved, torch.Tensor) or moved.numel() <= 1:
        return moved
    made = noncontiguous_like(moved.detach())
    assert not made.is_contiguous()
    return made.requires_grad_(moved.requires_grad)


def _check(op, runs):
    """runs: (the op or a Variant, a CPU sample, with gradients, non-contiguous on tpu too)."""
    key = opinfo._key(op)
    test_id = f"{key}-float32"
    failures = []
    for n, (called, sample, grad, noncontiguous) in enumerate(runs):
        if opinfo._is_random(op, sample) or (noncontiguous and key in LAYOUT_DEPENDENT):
            continue
        try:
            if noncontiguous:
                sample = sample.noncontiguous()
                with mock.patch.object(opinfo, "_to_tpu", _to_tpu_noncontiguous):
                    opinfo._check_sample(called, sample, grad, test_id)
            else:
                opinfo._check_sample(called, sample, grad, test_id)
        except Exception as e:  # noqa: BLE001  (reading a tpu result back can raise too)
            failures.append(f"sample {n}{' (grad)' if grad else ''} {opinfo._describe(sample)}: "
                            f"{e if isinstance(e, AssertionError) else repr(e)}")
    assert not failures, f"{len(failures)} of {len(runs)} samples differ; first: {failures[0]}"


@pytest.mark.parametrize("op", list(_ops(need_inplace=True)))
def test_inplace_variant(op):
    """Its samples, the first made non-contiguous again, and, where the op has gradients, the
    first through a clone of its input (an in-place op on a tensor autograd records)."""
    inplace = Variant(op, op.inplace_variant)
    samples = list(itertools.islice(op.sample_inputs("cpu", DTYPE, requires_grad=False),
                                    INPLACE_SAMPLES))
    runs = [(inplace, s, False, False) for s in samples]
    runs += [(inplace, s, False, True) for s in samples[:1]]
    if op.supports_autograd:
        sample = next(iter(op.sample_inputs("cpu", DTYPE, requires_grad=True)), None)
        fn = op.inplace_variant
        if sample is not None:
            through_clone = Variant(op, lambda x, *a, **k: fn(x.clone(), *a, **k))
            runs.append((through_clone, sample, True, False))
    _check(op, runs)


@pytest.mark.parametrize("op", list(_ops())[::2])
def test_noncontiguous_samples(op):
    """Its first samples made non-contiguous; where the op has gradients, the first of them with
    gradients (that run checks its forward too). Every other op: how a strided input reaches a
    program is the runtime's, common to all ops (the in-place test makes its samples
    non-contiguous for every op)."""
    samples = op.sample_inputs("cpu", DTYPE, requires_grad=False)
    runs = [(op, s, False, True) for s in itertools.islice(samples, NONCONTIGUOUS_SAMPLES)]
    if op.supports_autograd:
        sample = next(iter(op.sample_inputs("cpu", DTYPE, requires_grad=True)), None)
        if sample is not None:
            runs[:1] = [(op, sample, True, True)]
    _check(op, runs)


def _on_cpu(sample):
    """The sample's arguments on the CPU, aliasing as they alias on tpu: one copy per base
    tensor, and each view of it the same view of that copy."""
    copies = {}

    def move(value):
        if isinstance(value, (str, torch.device)) and str(value).startswith("tpu"):
            return torch.device("cpu")
        if not isinstance(value, torch.Tensor) or value.device.type != "tpu":
            return value
        base = value if value._base is None else value._base
        if id(base) not in copies:
            copies[id(base)] = base.detach().cpu()
        if base is value:
            return copies[id(base)]
        return copies[id(base)].as_strided(value.size(), value.stride(), value.storage_offset())

    return tree_map(move, (sample.input, sample.args, sample.kwargs))


def _raised(op, inp, args, kwargs):
    """What the call raised, at the call or (a device-side check) at the sync after it."""
    _, error = opinfo._run(op, inp, args, kwargs)
    return error or opinfo._run(lambda *_: torch.tpu.synchronize(), None, (), {})[1]


@pytest.mark.parametrize("op", list(_ops(need_errors=True)))
def test_error_inputs(op):
    """Each error input the CPU refuses, tpu refuses with OpInfo's error type and message. (A few
    of OpInfo's error inputs are for other devices or for TorchScript: the CPU accepts them.)"""
    failures = []
    for n, error_input in enumerate(op.error_inputs("tpu")):
        sample = error_input.sample_input
        if _raised(op, *_on_cpu(sample)) is None:
            continue
        error = _raised(op, sample.input, sample.args, sample.kwargs)
        if not (isinstance(error, error_input.error_type)
                and re.search(error_input.error_regex, str(error))):
            failures.append(f"error input {n} {opinfo._describe(sample)}: expected "
                            f"{error_input.error_type.__name__} matching "
                            f"{error_input.error_regex!r}, got {error!r}")
    assert not failures, f"{len(failures)} error inputs differ; first: {failures[0]}"


def _aliasings(op, inp, args, kwargs, result):
    """The sample called with arguments that share memory: (name, call, the tensor the call
    writes, how it maps to the input). `result`: the op's value on separate arguments (CPU), or
    None. In-place: another argument of the input's shape is the input itself, or its transpose;
    out=: the input itself, another view of it, or its transpose."""
    square = inp.dim() >= 2 and inp.shape[-1] == inp.shape[-2]
    same = [n for n, a in enumerate(args)
            if isinstance(a, torch.Tensor) and a.shape == inp.shape and a.dtype == inp.dtype]
    calls = []
    if op.inplace_variant is not None and same:
        n = same[0]
        for name, alias in [("the input", lambda x: x), ("its transpose", lambda x: x.mT)]:
            if name == "its transpose" and not square:
                continue
            calls.append((f"in-place, argument {n + 1} {name}", op.inplace_variant,
                          lambda x, a=alias, n=n: (x, [*args[:n], a(x), *args[n + 1:]], kwargs),
                          alias))
    if (op.supports_out and isinstance(result, torch.Tensor) and result.shape == inp.shape
            and result.dtype == inp.dtype):
        for name, alias in [("the input", lambda x: x), ("a view of the input",
                                                          lambda x: x.view(x.shape)),
                            ("its transpose", lambda x: x.mT)]:
            if name == "its transpose" and not square:
                continue
            calls.append((f"out= {name}", op,
                          lambda x, a=alias: (x, args, {**kwargs, "out": a(x)}), alias))
    return calls


@pytest.mark.parametrize("op", list(_ops()))
def test_aliased_arguments(op):
    """An in-place op or out= whose arguments share memory: where the CPU refuses the overlap,
    tpu raises the same error; where the CPU accepts it, tpu gives the value the op has on
    separate arguments (the CPU's own value there may depend on the order it reads and writes:
    mm(a, a, out=a), addmm_, masked_scatter_)."""
    if not (op.supports_out or op.inplace_variant is not None):
        pytest.skip("no in-place or out= form")
    failures, tried = [], 0
    known = opinfo._known(opinfo.TOLERANCES, op, "")
    tol = {"rtol": known[0], "atol": known[1]} if known else {}
    for sample in itertools.islice(op.sample_inputs("cpu", DTYPE, requires_grad=False), 3):
        inp = sample.input
        if not isinstance(inp, torch.Tensor) or inp.numel() < 2:
            continue
        cpu = opinfo._clone(inp), tree_map(opinfo._clone, sample.args), sample.kwargs
        result, _ = opinfo._run(op, *cpu)
        for name, fn, make, alias in _aliasings(op, inp, sample.args, sample.kwargs, result):
            tried += 1
            x_cpu = opinfo._clone(inp)
            _, cpu_error = opinfo._run(fn, *make(x_cpu))
            x_tpu = opinfo._to_tpu(inp)
            dev = make(x_tpu)
            dev = (dev[0], tree_map(opinfo._to_tpu, dev[1]), opinfo._tpu_kwargs(dev[2]))
            dev_error = _raised(fn, *dev)
            what = f"{name}, {opinfo._describe(sample)}"
            if cpu_error is not None:
                if type(dev_error) is not type(cpu_error) or (
                        str(cpu_error).split("\n")[0] != str(dev_error).split("\n")[0]):
                    failures.append(f"{what}: the CPU raised {cpu_error!r}, tpu {dev_error!r}")
                continue
            if dev_error is not None:
                failures.append(f"{what}: tpu raised {dev_error!r}, the CPU did not")
                continue
            # The value on separate arguments, written where the call writes.
            separate = opinfo._clone(inp)
            call_inp, call_args, call_kwargs = make(separate)
            call_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in call_args]
            if "out" in call_kwargs:
                call_kwargs = {k: v for k, v in call_kwargs.items() if k != "out"}
                alias(separate).copy_(op(call_inp.clone(), *call_args, **call_kwargs))
            else:
                fn(call_inp, *call_args, **call_kwargs)
            try:
                opinfo._compare(x_tpu, separate, f"{what}: the written input", tol)
            except AssertionError as e:
                failures.append(str(e))
    if not tried:
        pytest.skip("no sample with an argument of the input's shape, or out= of it")
    assert not failures, f"{len(failures)} of {tried} calls differ; first: {failures[0]}"


OUT_SAMPLES = 2


def _with_out(op):
    """The op called with out=: empty tensors (resized by the op) of the dtypes the functional
    form returns, on the sample's device."""
    def call(x, *args, **kwargs):
        result = op(x, *args, **kwargs)
        out = tree_map(lambda t: torch.empty(0, dtype=t.dtype, device=t.device)
                       if isinstance(t, torch.Tensor) else t, result)
        if isinstance(out, list):
            out = tuple(out)
        return op(x, *args, **kwargs, out=out)
    return Variant(op, call)


@pytest.mark.parametrize("op", list(_ops()))
def test_out_variant(op):
    if torchtpu.get_eager_mode() != "defer_and_fuse":
        pytest.skip("the default mode runs it: the modes share these kernels, and CI's time")
    if not op.supports_out:
        pytest.skip("no out= form")
    before = opinfo._fallback_counts()
    samples = itertools.islice(op.sample_inputs("cpu", DTYPE, requires_grad=False), OUT_SAMPLES)
    _check(op, [(_with_out(op), s, False, False) for s in samples])
    after = opinfo._fallback_counts()
    fell_back = sorted(k for k, v in after.items() if v > before.get(k, 0)
                       and k not in opinfo.ALLOWED_FALLBACKS)
    assert not fell_back, f"out= ran on the CPU: {fell_back}"


OTHER_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.bfloat16, torch.float16]
HALF_TOL = {torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3)}  # torch.testing's
# An integer image interpolated: the CPU rounds each pass with fixed-point weights, tpu with
# float32 ones, so a value may differ by one a pass (bicubic's larger weights: two).
INTEGER_TOL = {"nn.functional.interpolate.bilinear": 1, "nn.functional.interpolate.bicubic": 2,
               "nn.functional.upsample_bilinear": 1, "_upsample_bilinear2d_aa": 1,
               "nn.functional.interpolate.trilinear": 1, "nn.functional.interpolate.linear": 1}
OTHER_DTYPE_DIFFERENCES = {
    "argsort": "ties: tpu sorts stably, the CPU's default (stable=False) sort does not",
    "sort": "as argsort",
    "complex": "complex32 (parts of float16) is not a tpu dtype: tpu raises TypeError",
    "native_batch_norm": "the saved statistics are float32 for float16/bfloat16 input, as on "
                         "CUDA and as the meta function says for tpu; the CPU keeps the input's",
    "_native_batch_norm_legit": "as native_batch_norm", "_batch_norm_with_update": "as "
    "native_batch_norm", "native_layer_norm": "as native_batch_norm",
    "view_as_complex": "as complex",
    "polygamma": "at the poles (0 and the negative integers, which int8 and int16 samples "
                 "hold) the CPU's trigamma (n = 1) gives finite values from sin(pi x)'s "
                 "rounding; tpu +inf",
    "special.polygamma": "as polygamma",
}


def _errors_against_float64(op, sample, got, expected):
    """The largest distance of tpu's and of the CPU's (first) output from the op in float64 (NaN
    where float64 has none counts as infinitely far)."""
    def wide(v):
        return v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
    reference = op(wide(sample.input), *tree_map(wide, sample.args),
                   **tree_map(wide, sample.kwargs))

    def first(r):
        return r[0] if isinstance(r, (tuple, list)) else r

    def error(r):
        e = (first(r).detach().cpu().double() - first(reference).double()).abs()
        return e.nan_to_num(float("inf"), float("inf"), float("inf")).max().item()
    return error(got), error(expected)


def _with_other_dtypes():
    """Each op with one of OTHER_DTYPES, the dtypes taken in turn (each runs for 1/5 of the
    ops)."""
    for index, param in enumerate(_ops()):
        yield pytest.param(param.values[0], [OTHER_DTYPES[index % len(OTHER_DTYPES)]],
                           id=param.id)


@pytest.mark.parametrize("op, dtypes", list(_with_other_dtypes()))
def test_other_dtypes(op, dtypes):
    """The first sample in dtypes test_opinfo.py does not run (uint8, int8, int16, bfloat16,
    float16; one per op) against the CPU, in DeferAndFuse; in float16 and bfloat16, where the
    values differ beyond torch's tolerances, tpu's must be as close to the op in float64 as the
    CPU's (tpu computes these in float32: grid_sample, conv_transpose, addbmm)."""
    if torchtpu.get_eager_mode() != "defer_and_fuse":
        pytest.skip("the default mode runs it: the modes share these lowerings, and CI's time")
    reason = OTHER_DTYPE_DIFFERENCES.get(opinfo._key(op), OTHER_DTYPE_DIFFERENCES.get(op.name))
    if reason:
        pytest.skip(reason)
    failures, tried = [], 0
    known = opinfo._known(opinfo.TOLERANCES, op, "")
    for dtype in dtypes:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        sample = next(iter(op.sample_inputs("cpu", dtype, requires_grad=False)), None)
        if sample is None or opinfo._is_random(op, sample):
            continue
        tried += 1
        # torch.testing's tolerances for the output's dtype where none is given (float outputs of
        # integer inputs).
        rtol, atol = HALF_TOL.get(dtype, (0, INTEGER_TOL.get(opinfo._key(op), 0)))
        if known:
            rtol, atol = max(rtol, known[0]), max(atol, known[1])
        given = {opinfo._key(op): (rtol, atol, dtype)} if rtol or atol else {}
        with mock.patch.dict(opinfo.TOLERANCES, given):
            try:
                opinfo._check_sample(op, sample, False, opinfo._key(op))
                continue
            except AssertionError as e:
                error = e
        if dtype in HALF_TOL and "not close" in str(error):
            dev = (opinfo._to_tpu(sample.input), tree_map(opinfo._to_tpu, sample.args),
                   opinfo._tpu_kwargs(sample.kwargs))
            got, expected = op(*dev[:1], *dev[1], **dev[2]), op(
                sample.input.clone(), *sample.args, **sample.kwargs)
            ours, cpus = _errors_against_float64(op, sample, got, expected)
            if ours <= cpus + atol:
                continue
            error = f"{error} (from float64: tpu {ours:.3g}, the CPU {cpus:.3g})"
        failures.append(f"{str(dtype)[6:]} {opinfo._describe(sample)}: {error}")
    if not tried:
        pytest.skip("no sample in these dtypes")
    assert not failures, f"{len(failures)} of {tried} dtypes differ; first: {failures[0]}"
