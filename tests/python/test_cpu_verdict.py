"""Argument checks as strict as the CPU's, with its exception types: out= tensors of a dtype the
CPU refuses, operands of different floating dtypes in products and convolutions, and the calls
PyTorch's Python meta functions refuse with another exception type (ValueError for clamp()
without bounds). Every case runs in every eager mode, but OpInfo's out= ops, each in one of
them, in turn.
"""

import pytest
import torch
from torch.utils._pytree import tree_map

from conftest import assert_same_as_cpu

import torchtpu
from test_opinfo import _load_op_db

F = torch.nn.functional
def ones(*shape, device, dtype=torch.float32):
    return torch.ones(*shape, device=device, dtype=dtype)


def arange(*shape, device):
    return torch.arange(float(torch.Size(shape).numel()), device=device).reshape(shape)


f64 = torch.float64
CASES = {
    # out= tensors of a dtype the CPU refuses (the Python metas accept any safe cast).
    "nonzero_out_float": lambda d: torch.nonzero(ones(3, device=d), out=torch.empty(0, device=d)),
    "nonzero_out_long": lambda d: torch.nonzero(
        ones(3, device=d), out=torch.empty(0, device=d, dtype=torch.long)),
    "all_out_float": lambda d: torch.all(ones(2, device=d), out=torch.empty((), device=d)),
    "any_out_float": lambda d: torch.any(ones(2, device=d), out=torch.empty((), device=d)),
    "any_dim_out_long": lambda d: torch.any(
        ones(2, 2, device=d), 0, out=torch.empty(2, device=d, dtype=torch.long)),
    "all_out_uint8": lambda d: torch.all(
        ones(2, device=d), out=torch.empty((), device=d, dtype=torch.uint8)),
    "amax_out_double": lambda d: torch.amax(
        ones(2, device=d), 0, out=torch.empty((), device=d, dtype=f64)),
    "neg_out_double": lambda d: torch.neg(ones(2, device=d), out=torch.empty(2, device=d, dtype=f64)),
    "exp_out_double": lambda d: torch.exp(ones(2, device=d), out=torch.empty(2, device=d, dtype=f64)),
    "add_out_long": lambda d: torch.add(
        ones(2, device=d), 1, out=torch.empty(2, device=d, dtype=torch.long)),
    "eq_out_long": lambda d: torch.eq(
        ones(2, device=d), 1, out=torch.empty(2, device=d, dtype=torch.long)),
    # A comparison's or logical op's bool result casts into any output, in place too.
    "eq_inplace_long_self": lambda d: torch.tensor([1, 2], device=d).eq_(
        torch.tensor([1.5, 2.0], device=d)),
    "lt_inplace_long_self_scalar": lambda d: torch.tensor([1, 2], device=d).lt_(1.5),
    "logical_and_inplace_long_self": lambda d: torch.tensor([1, 2], device=d).logical_and_(
        torch.tensor([0.5, 0.0], device=d)),
    "add_inplace_long_self_float": lambda d: torch.tensor([1, 2], device=d).add_(
        torch.tensor([0.5, 0.0], device=d)),
    "argmax_out_float": lambda d: torch.argmax(ones(2, device=d), out=torch.empty((), device=d)),
    "sum_out_long": lambda d: torch.sum(
        ones(2, device=d), 0, out=torch.empty((), device=d, dtype=torch.long)),
    "mm_out_double": lambda d: torch.mm(
        ones(2, 2, device=d), ones(2, 2, device=d), out=torch.empty(2, 2, device=d, dtype=f64)),
    "sort_out_long_values": lambda d: torch.sort(
        ones(2, device=d), out=(torch.empty(2, device=d, dtype=torch.long),
                                torch.empty(2, device=d, dtype=torch.long))),
    # Products and convolutions of different floating dtypes.
    "matmul_f32_f64": lambda d: ones(2, 2, device=d) @ ones(2, 2, device=d, dtype=f64),
    "mm_f32_f64": lambda d: torch.mm(ones(2, 2, device=d), ones(2, 2, device=d, dtype=f64)),
    "bmm_f32_f64": lambda d: torch.bmm(ones(1, 2, 2, device=d), ones(1, 2, 2, device=d, dtype=f64)),
    "matmul_3d_f32_f64": lambda d: torch.matmul(ones(3, 2, 2, device=d),
                                                ones(2, 2, device=d, dtype=f64)),
    "mv_f32_f64": lambda d: torch.mv(ones(2, 2, device=d), ones(2, device=d, dtype=f64)),
    "dot_f32_f64": lambda d: torch.dot(ones(2, device=d), ones(2, device=d, dtype=f64)),
    "addmm_mat2_f64": lambda d: torch.addmm(ones(2, 2, device=d), ones(2, 2, device=d),
                                            ones(2, 2, device=d, dtype=f64)),
    "addmm_self_f64": lambda d: torch.addmm(ones(2, 2, device=d, dtype=f64), ones(2, 2, device=d),
                                            ones(2, 2, device=d)),
    "baddbmm_f32_f64": lambda d: torch.baddbmm(ones(1, 2, 2, device=d), ones(1, 2, 2, device=d),
                                               ones(1, 2, 2, device=d, dtype=f64)),
    "addmv_f32_f64": lambda d: torch.addmv(ones(2, device=d), ones(2, 2, device=d),
                                           ones(2, device=d, dtype=f64)),
    "linear_weight_f64": lambda d: F.linear(ones(2, 2, device=d), ones(2, 2, device=d, dtype=f64)),
    "linear_bias_f64": lambda d: F.linear(ones(2, 2, device=d), ones(2, 2, device=d),
                                          ones(2, device=d, dtype=f64)),
    "conv2d_weight_f64": lambda d: F.conv2d(ones(1, 1, 3, 3, device=d),
                                            ones(1, 1, 2, 2, device=d, dtype=f64)),
    "conv1d_input_f64": lambda d: F.conv1d(ones(1, 1, 3, device=d, dtype=f64),
                                           ones(1, 1, 2, device=d)),
    "conv2d_bias_f64": lambda d: F.conv2d(ones(1, 1, 3, 3, device=d), ones(1, 1, 2, 2, device=d),
                                          ones(1, device=d, dtype=f64)),
    "mm_f16_f32": lambda d: torch.mm(ones(2, 2, device=d, dtype=torch.half), ones(2, 2, device=d)),
    "mul_f32_f64_promotes": lambda d: ones(2, device=d) * ones(2, device=d, dtype=f64),
    "mm_empty": lambda d: torch.mm(ones(0, 2, device=d), ones(2, 3, device=d)),
    # Calls whose meta function raises another exception type than the CPU.
    "clamp_without_bounds": lambda d: torch.clamp(ones(2, device=d)),
    "clamp_inplace_without_bounds": lambda d: ones(2, device=d).clamp_(),
    "div_bad_rounding_mode": lambda d: torch.div(ones(2, device=d), 2, rounding_mode="bad"),
    "div_tensor_bad_rounding_mode": lambda d: torch.div(ones(2, device=d), ones(2, device=d),
                                                        rounding_mode="bad"),
    "sum_dim_out_of_range": lambda d: ones(2, device=d).sum(3),
    # Meta functions that accept what the CPU refuses.
    "bucketize_2d_boundaries": lambda d: torch.bucketize(ones(3, device=d), ones(2, 2, device=d)),
    "complex_of_two_dtypes": lambda d: torch.complex(ones(2, device=d),
                                                     ones(2, device=d, dtype=f64)),
    "masked_scatter_uint8_mask": lambda d: ones(3, device=d).masked_scatter(
        ones(3, device=d, dtype=torch.uint8), ones(3, device=d)),
    # out= tensors that are an input, or overlap one or themselves: the CPU judges them as they
    # alias (ldexp_ runs as ldexp.out(self, self, other)).
    "ldexp_inplace_broadcast": lambda d: ones(2, 1, device=d).ldexp_(ones(2, device=d)),
    "cat_out_is_an_input": lambda d: (lambda a: torch.cat([a, a], out=a))(ones(2, 3, device=d)),
    "index_select_expanded_out": lambda d: torch.index_select(
        ones(3, 6, device=d), 1, torch.tensor([0, 1], device=d),
        out=torch.empty(2, 1, device=d).expand(2, 6)),
    "masked_select_out_is_self": lambda d: (lambda a: torch.masked_select(
        a, torch.ones(3, dtype=torch.bool, device=d), out=a))(ones(3, device=d)),
    "masked_select_out": lambda d: torch.masked_select(
        torch.arange(4.0, device=d), torch.arange(4, device=d) > 1, out=torch.empty(0, device=d)),
    # Arguments that share memory through other views: each op's own rule, as the CPU applies it.
    "cat_out_a_view_of_an_input": lambda d: (lambda a: torch.cat([a, a], out=a.view(-1)))(
        arange(2, 3, device=d)),
    "add_out_the_transpose_of_an_input": lambda d: (lambda a: torch.add(
        a, ones(2, 3, device=d), out=a.t()))(arange(2, 3, device=d)),
    "index_select_out_a_view_of_self": lambda d: (lambda a: torch.index_select(
        a, 0, torch.tensor([1, 0], device=d), out=a.view(2, 3)))(arange(2, 3, device=d)),
    "gather_out_a_view_of_self": lambda d: (lambda a: torch.gather(
        a, 1, torch.zeros(2, 3, dtype=torch.long, device=d), out=a.view(2, 3)))(
        arange(2, 3, device=d)),
    "index_add_inplace_source_is_self": lambda d: (lambda a: a.index_add_(
        0, torch.tensor([2, 0, 1], device=d), a))(arange(3, 3, device=d)),
    "index_put_inplace_values_a_view_of_self": lambda d: (lambda a: a.index_put_(
        (torch.tensor([2, 0, 1], device=d),), a.view(3, 3)))(arange(3, 3, device=d)),
    "scatter_inplace_src_is_self": lambda d: (lambda a: a.scatter_(
        0, torch.zeros(3, 3, dtype=torch.long, device=d), a))(arange(3, 3, device=d)),
    "copy_shifted_onto_itself": lambda d: (lambda a: (a[1:].copy_(a[:-1]), a)[1])(
        arange(6, device=d)),
    "copy_transpose_onto_itself": lambda d: (lambda a: a.copy_(a.t()))(arange(3, 3, device=d)),
    "copy_another_view_onto_itself": lambda d: (lambda a: a.copy_(a.view(3, 3)))(
        arange(3, 3, device=d)),
    "masked_fill_inplace_value_an_element_of_self": lambda d: (lambda a: a.masked_fill_(
        a > 3, a[0, 1]))(arange(3, 3, device=d)),
    "masked_fill_inplace_long_self_float_value": lambda d: torch.zeros(
        3, dtype=torch.long, device=d).masked_fill_(arange(3, device=d) > 0,
                                                    torch.tensor(1.5, device=d)),
    # As on CUDA, a 0-d CPU value is read as a number.
    "masked_fill_inplace_cpu_value": lambda d: ones(3, device=d).masked_fill_(
        arange(3, device=d) > 0, torch.tensor(2.5)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_cpu(case, each_eager_mode):
    assert_same_as_cpu(CASES[case])


def test_an_overlap_is_judged_at_each_call(each_eager_mode):
    """A call of one signature with and without arguments that share memory: the CPU's verdict on
    the first is not taken for the second."""
    a, idx = torch.arange(6.0, device="tpu").reshape(2, 3), torch.tensor([1, 0], device="tpu")
    torch.index_select(a, 0, idx, out=torch.empty(2, 3, device="tpu"))
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.index_select(a, 0, idx, out=a.view(2, 3))
    b = torch.arange(9.0, device="tpu").reshape(3, 3)
    b.masked_fill_(b > 3, torch.tensor(-1.0, device="tpu"))
    b.masked_fill_(b > 3, b[0, 1])  # the CPU reads a 0-d value before it writes
    c = torch.eye(3, dtype=torch.bool, device="tpu")
    c.masked_fill_(c > 0, True)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        c.masked_fill_(c.t(), True)  # the mask overlaps what is written
    b = torch.arange(9.0, device="tpu").reshape(3, 3)
    b.copy_(torch.ones(3, 3, device="tpu").t())
    with pytest.raises(RuntimeError, match="unsupported operation"):
        b.copy_(b.t())


def test_messages_are_the_cpu_ones():
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        torch.ones(2, 2, device="tpu") @ torch.ones(2, 2, device="tpu", dtype=f64)
    with pytest.raises(RuntimeError, match="all only supports bool tensor for result"):
        torch.all(torch.ones(2, device="tpu"), out=torch.empty((), device="tpu"))
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        torch.clamp(torch.ones(2, device="tpu"))
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        torch.ones(0, device="tpu").max()
    with pytest.raises(RuntimeError, match="nonzero: Expected out tensor to have scalar type Long"):
        torch.nonzero(torch.ones(2, device="tpu"), out=torch.empty(0, device="tpu"))


def test_an_accepted_out_call_writes_on_the_device(fallback_error):
    out = torch.empty(2, device="tpu", dtype=f64)
    torch.exp(torch.zeros(2, device="tpu"), out=out)
    assert out.device.type == "tpu" and torch.equal(out.cpu(), torch.ones(2, dtype=f64))


def out_ops():
    """OpInfos whose out= overload the tpu kernels serve (not the CPU fallback)."""
    for op in _load_op_db():
        if not op.supports_out or op.variant_test_name:
            continue
        packet = getattr(torch.ops.aten, (op.aten_name or op.name).split(".")[0], None)
        if packet is None:
            continue
        overloads = [getattr(packet, name) for name in packet.overloads()]
        if any(any(a.is_out for a in o._schema.arguments) and
               torch._C._dispatch_has_kernel_for_dispatch_key(o.name(), "PrivateUse1")
               for o in overloads):
            yield pytest.param(op, id=op.name)


def call_with_out(op, sample, device, dtype):
    move = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    inp, args, kwargs = tree_map(move, sample.input), tree_map(move, sample.args), tree_map(
        move, sample.kwargs)
    result = op.op(inp, *args, **kwargs)
    if isinstance(result, torch.Tensor):
        out = torch.empty(0, device=device, dtype=dtype)
    else:  # values and indices: the first one of `dtype`
        out = tuple(torch.empty(0, device=device, dtype=dtype if k == 0 else r.dtype)
                    for k, r in enumerate(result))
    return op.op(inp, *args, **kwargs, out=out)


def _in_turn(params, modes=("strict", "debug", "defer_and_fuse")):
    """Each op in one eager mode, the modes in turn: the checks come before a mode's own work."""
    for index, param in enumerate(params):
        mode = modes[index % len(modes)]
        yield pytest.param(param.values[0], mode, id=f"{mode}-{param.id}")


@pytest.mark.parametrize("op, mode", list(_in_turn(out_ops())))
def test_out_dtype_checks_match_cpu(op, mode):
    with torchtpu.eager_mode(mode):
        _check_out_dtypes(op)


def _check_out_dtypes(op):
    samples = list(op.sample_inputs("cpu", torch.float32))[:2]
    for sample in samples:
        try:
            result = op.op(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # noqa: BLE001  (a sample the op refuses is not about out=)
            continue
        if not isinstance(result, (torch.Tensor, tuple)):
            continue
        # Whether it raises, and what: a float32 result cast into another dtype may round
        # differently (test_opinfo.py compares the values).
        for dtype in (torch.float64, torch.int64, torch.bool, torch.float16):
            assert_same_as_cpu(lambda d: call_with_out(op, sample, d, dtype),  # noqa: B023
                               values=False)
