"""OpInfo's ops on "tpu" in the forms test_opinfo.py does not call: each op's in-place variant
(x.add_(y), with gradients too), and its samples made non-contiguous (SampleInput.noncontiguous(): every tensor a
strided view into a larger one), in float32 against the CPU, with test_opinfo.py's comparison,
tables and tolerances. An in-place variant whose input cannot hold the result (a broadcast, a
type change) must raise as the CPU raises.

    TORCHTPU_OPINFO_SHARD="i/n"     only every n-th op, from the i-th (default "0/1")
"""

import itertools

import pytest
import torch

import test_opinfo as opinfo

DTYPE = torch.float32
INPLACE_SAMPLES = 4
NONCONTIGUOUS_SAMPLES = 2  # and one more with gradients, where the op has them

pytestmark = pytest.mark.filterwarnings("ignore:torchtpu:UserWarning")


class Variant:
    """An OpInfo op called through another of its functions, for _check_sample."""

    def __init__(self, op, fn):
        self.name, self.variant_test_name, self.fn = op.name, op.variant_test_name, fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def _ops(need_inplace):
    i, n = opinfo._shard()
    ops = sorted(opinfo._load_op_db(), key=lambda op: (op.name, op.variant_test_name))
    for index, op in enumerate(ops):
        key = opinfo._key(op)
        if (index % n != i or DTYPE not in op.supported_dtypes("cpu") or key in opinfo.SKIPS
                or op.name in opinfo.SKIPS or opinfo._known(opinfo.XFAILS, op, "")
                or (need_inplace and op.inplace_variant is None)):
            continue
        yield pytest.param(op, id=key)


def _check(op, runs):
    test_id = f"{opinfo._key(op)}-float32"
    failures = []
    for n, (called, sample, grad) in enumerate(runs):
        if opinfo._is_random(op, sample):
            continue
        try:
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
    runs = [(inplace, s, False) for s in samples]
    runs += [(inplace, s.noncontiguous(), False) for s in samples[:1]]
    if op.supports_autograd:
        sample = next(iter(op.sample_inputs("cpu", DTYPE, requires_grad=True)), None)
        fn = op.inplace_variant
        if sample is not None:
            runs.append((Variant(op, lambda x, *a, **k: fn(x.clone(), *a, **k)), sample, True))
    _check(op, runs)


@pytest.mark.parametrize("op", list(_ops(need_inplace=False)))
def test_noncontiguous_samples(op):
    samples = op.sample_inputs("cpu", DTYPE, requires_grad=False)
    runs = [(op, s.noncontiguous(), False)
            for s in itertools.islice(samples, NONCONTIGUOUS_SAMPLES)]
    if op.supports_autograd:
        sample = next(iter(op.sample_inputs("cpu", DTYPE, requires_grad=True)), None)
        if sample is not None:
            runs.append((op, sample.noncontiguous(), True))
    _check(op, runs)
