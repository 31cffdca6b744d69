"""A CI-sized subset of PyTorch's OpInfo database under torch.compile(backend="tpu"): each op's
first float32 samples, compiled, against the CPU (eager) and against eager "tpu", forward and
gradients. Each sample is called twice: the first call captures the graph's program, the second
must replay it (no graph may run eagerly).

    TORCHTPU_OPINFO_SAMPLES=k   at most k samples per op (default 3)
"""

import itertools
import os

import pytest
import test_opinfo as base
import torch
import torch._dynamo
from torch.utils._pytree import tree_flatten, tree_map

import torchtpu

pytestmark = pytest.mark.filterwarnings("ignore:torchtpu:UserWarning")

# By OpInfo key (name.variant).
OPS = ["abs", "add", "addmm", "amax", "argmax", "bmm", "cat", "cdist", "clamp", "cumprod",
       "cumsum", "div.floor_rounding", "div.no_rounding_mode", "eq", "exp", "flip", "gather",
       "index_add", "index_copy", "index_select", "isin", "kthvalue", "log", "log_softmax",
       "logsumexp", "masked_fill", "matmul", "maximum", "mean", "mm", "mul", "nan_to_num",
       "nn.functional.adaptive_avg_pool2d", "nn.functional.avg_pool2d",
       "nn.functional.binary_cross_entropy", "nn.functional.conv2d", "nn.functional.cross_entropy",
       "nn.functional.elu", "nn.functional.embedding", "nn.functional.embedding_bag",
       "nn.functional.gelu", "nn.functional.glu", "nn.functional.grid_sample",
       "nn.functional.hardswish", "nn.functional.interpolate.bilinear",
       "nn.functional.interpolate.nearest", "nn.functional.layer_norm", "nn.functional.max_pool2d",
       "nn.functional.mse_loss", "nn.functional.pad.constant", "nn.functional.pad.reflect",
       "nn.functional.relu", "nn.functional.silu", "nn.functional.smooth_l1_loss", "permute",
       "pow", "reshape", "roll", "scatter_add", "scatter_reduce.amax", "searchsorted", "sigmoid",
       "sin", "softmax", "sort", "split", "stack", "std", "sub", "sum", "tanh", "topk",
       "transpose", "tril", "var", "where", "histc", "histogram", "_segment_reduce.lengths",
       "_segment_reduce.offsets",
       # Linear algebra and FFTs (factorizations lowered as while loops and XLA expanders).
       "cholesky_solve", "linalg.cholesky_ex", "linalg.solve_ex", "linalg.inv_ex",
       "linalg.lu_factor_ex", "linalg.qr", "linalg.eigvalsh", "linalg.svdvals",
       "linalg.solve_triangular", "geqrf", "linalg.ldl_factor_ex", "linalg.ldl_solve",
       "fft.fft", "fft.rfft2", "fft.irfft"]

MAX_SAMPLES = int(os.environ.get("TORCHTPU_OPINFO_SAMPLES", "3"))


def _cases():
    by_key = {base._key(op): op for op in base._load_op_db()}
    for key in OPS:
        yield pytest.param(by_key[key], id=key)


def _check(op, sample):
    tol = {}
    if base._known(base.TOLERANCES, op, f"{base._key(op)}-float32"):
        rtol, atol, _ = base._known(base.TOLERANCES, op, f"{base._key(op)}-float32")
        tol = {"rtol": rtol, "atol": atol}
    grad = op.supports_autograd
    cpu = (tree_map(base._clone, sample.input), tree_map(base._clone, sample.args),
           tree_map(base._clone, sample.kwargs))
    expected = op(cpu[0], *cpu[1], **cpu[2])
    eager = (tree_map(base._to_tpu, sample.input), tree_map(base._to_tpu, sample.args),
             base._tpu_kwargs(sample.kwargs))
    eager_out = tree_map(base._to_cpu, op(eager[0], *eager[1], **eager[2]))
    compiled = torch.compile(lambda inp, *args, **kwargs: op(inp, *args, **kwargs),
                             backend="tpu")
    before = torchtpu._compile.stats()
    for call in range(2):
        dev = (tree_map(base._to_tpu, sample.input), tree_map(base._to_tpu, sample.args),
               base._tpu_kwargs(sample.kwargs))
        got = compiled(dev[0], *dev[1], **dev[2])
        base._compare(got, expected, f"compiled output (call {call + 1})", tol, on_tpu=True)
        base._compare(got, eager_out, f"compiled vs eager tpu (call {call + 1})", tol)
        if not grad:
            continue
        outs, exp_outs = base._float_outputs(got), base._float_outputs(expected)
        if not outs:
            continue
        sum(o.sum() for o in outs).backward()
        if call == 0:
            sum(o.sum() for o in exp_outs).backward()
        for n, (g, e) in enumerate(zip(base._inputs(*dev), base._inputs(*cpu), strict=True)):
            if e.requires_grad:
                base._compare(g.grad, e.grad, f"compiled grad of input {n}", tol)
    after = torchtpu._compile.stats()
    assert after["compiled_eager_runs"] == before["compiled_eager_runs"], "a graph ran eagerly"
    assert after["compiled_replays"] > before["compiled_replays"], "the second call did not replay"


@pytest.mark.parametrize("op", list(_cases()))
def test_compiled_op(op):
    torch._dynamo.reset()  # one lambda's code object serves every op: start each from scratch
    samples = itertools.islice(op.sample_inputs("cpu", torch.float32,
                                                requires_grad=op.supports_autograd),
                               MAX_SAMPLES)
    for sample in samples:
        if not tree_flatten((sample.input, sample.args, sample.kwargs))[0]:
            continue
        _check(op, sample)
