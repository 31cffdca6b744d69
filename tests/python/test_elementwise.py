"""add/sub/mul/div on "tpu" against CPU: promotion, broadcasting, scalars, in-place and out=."""

import itertools
import warnings

import pytest
import torch

from conftest import sample

OPS = {
    "add": lambda a, b: a + b,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=3),
    "sub": lambda a, b: a - b,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=2),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool, torch.complex64]


def nonzero(t):
    """Division operands: no integer zeros (CPU raises, as PyTorch does on any device)."""
    if not isinstance(t, torch.Tensor):
        return t if t != 0 else 1
    if t.dtype == torch.bool or t.dtype.is_floating_point or t.dtype.is_complex:
        return t
    return torch.where(t == 0, torch.ones_like(t), t)


def compare(op_name, a, b):
    op = OPS[op_name]
    if op_name.startswith("div"):
        b = nonzero(b)
    try:
        expected = op(a, b)
    except RuntimeError as e:  # the same error on tpu, then
        if "ComplexHalf" in str(e):  # XLA has no complex32: a TypeError saying so (or the same)
            with pytest.raises((TypeError, NotImplementedError)):
                op(a.to("tpu"), b)
            return
        # The same exception type; its words may be those of PyTorch's meta function.
        with pytest.raises(RuntimeError):
            op(a.to("tpu") if isinstance(a, torch.Tensor) else a,
               b.to("tpu") if isinstance(b, torch.Tensor) and b.dim() > 0 else b)
        return
    dev_a = a.to("tpu") if isinstance(a, torch.Tensor) else a
    dev_b = b.to("tpu") if isinstance(b, torch.Tensor) else b
    if expected.dtype == torch.complex32:  # XLA has no complex32
        # (Python operators turn the TypeError into "unsupported operand type(s)")
        with pytest.raises(TypeError):
            op(dev_a, dev_b)
        with pytest.raises(TypeError, match="does not support dtype ComplexHalf"):
            torch.mul(dev_a, dev_b)
        return
    got = op(dev_a, dev_b)
    assert got.device.type == "tpu"
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, equal_nan=True)


@pytest.mark.parametrize("op_name", sorted(OPS))
@pytest.mark.parametrize("dtype_a,dtype_b", [(d, d) for d in DTYPES] + [
    (torch.int64, torch.float32), (torch.bool, torch.int32), (torch.uint8, torch.int8),
    (torch.float16, torch.float32), (torch.bfloat16, torch.float16), (torch.int32, torch.float64),
    (torch.complex64, torch.float32), (torch.bool, torch.float16)])
def test_matches_cpu_with_broadcasting(op_name, dtype_a, dtype_b):
    if op_name == "div_floor" and (dtype_a.is_complex or dtype_b.is_complex):
        pytest.skip("floor division of complex numbers is an error on CPU too (checked below)")
    compare(op_name, sample((4, 1, 3), dtype_a, 1), sample((5, 1), dtype_b, 2))


@pytest.mark.parametrize("op_name", sorted(OPS))
@pytest.mark.parametrize("scalar", [2, -3, 0.5, True, 1.5 + 2j])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.float16])
def test_python_scalars(op_name, scalar, dtype):
    if isinstance(scalar, complex) and op_name == "div_floor":
        return
    if op_name.startswith("div") and scalar is True:
        scalar = 1
    compare(op_name, sample((2, 3), dtype, 3), scalar)


@pytest.mark.parametrize("op_name", ["add", "mul", "div", "sub"])
def test_cpu_zero_dim_tensor_operand(op_name):
    compare(op_name, sample((3,), torch.float32), torch.tensor(2.5))
    compare(op_name, sample((3,), torch.int32), torch.tensor(4))


@pytest.mark.parametrize("shape_a,shape_b", [((), ()), ((0,), (0,)), ((2, 0), (1,)), ((), (3,)),
                                              ((3, 1), ())])
def test_zero_size_and_zero_dim(shape_a, shape_b):
    for op_name in OPS:
        compare(op_name, sample(shape_a, torch.float32), sample(shape_b, torch.float32))


def test_float_division_by_zero_gives_inf_and_nan():
    a = torch.tensor([1.0, -1.0, 0.0])
    compare("div", a, torch.zeros(3))
    compare("div_floor", a, torch.zeros(3))
    compare("div_trunc", a, torch.zeros(3))


def test_floor_division_edge_cases_are_exact():
    a = torch.tensor([-7.0, 7.0, -7.0, 7.0, 5.5, -0.0, 1e-30, 3.0])
    b = torch.tensor([2.0, -2.0, -2.0, 2.0, 0.1, 3.0, -1e30, 0.3])
    got = torch.div(a.to("tpu"), b.to("tpu"), rounding_mode="floor").cpu()
    assert torch.equal(got, torch.div(a, b, rounding_mode="floor"))
    assert torch.equal(torch.signbit(got), torch.signbit(torch.div(a, b, rounding_mode="floor")))
    ia, ib = torch.tensor([-7, 7, -7, 7, 0]), torch.tensor([2, -2, -2, 2, -3])
    assert torch.equal(torch.div(ia.to("tpu"), ib.to("tpu"), rounding_mode="floor").cpu(),
                       torch.div(ia, ib, rounding_mode="floor"))


@pytest.mark.parametrize("method", ["add_", "sub_", "mul_", "div_"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_in_place(method, dtype):
    cpu = sample((3, 4), dtype, 5)
    other = nonzero(sample((4,), dtype, 6)) if method == "div_" else sample((4,), dtype, 6)
    dev = cpu.to("tpu")
    if method == "div_" and not dtype.is_floating_point:
        with pytest.raises(RuntimeError, match="result type (Float|torch.float32) can't be cast "
                                               "to the desired output type (Long|torch.int64)"):
            getattr(dev, method)(other.to("tpu"))
        return
    getattr(cpu, method)(other)
    getattr(dev, method)(other.to("tpu"))
    assert torch.equal(dev.cpu(), cpu)


def test_out_variants_resize_and_cast():
    a, b = sample((2, 3), torch.int32, 1), sample((3,), torch.int32, 2)
    for op in [torch.add, torch.sub, torch.mul]:
        out_cpu = torch.empty(0, dtype=torch.float64)
        out_dev = torch.empty(0, dtype=torch.float64, device="tpu")
        op(a, b, out=out_cpu)
        r = op(a.to("tpu"), b.to("tpu"), out=out_dev)
        assert r is out_dev
        assert out_dev.dtype == torch.float64 and torch.equal(out_dev.cpu(), out_cpu)
    out = torch.empty(2, 3, device="tpu")
    torch.div(a.to("tpu"), nonzero(b).to("tpu"), rounding_mode="floor", out=out)
    assert torch.equal(out.cpu(), torch.div(a, nonzero(b), rounding_mode="floor").float())
    with pytest.raises(RuntimeError, match="can't be cast|can't be cast because it is not safe"):
        torch.div(a.to("tpu"), b.to("tpu"), out=torch.empty(2, 3, dtype=torch.int32,
                                                              device="tpu"))


def test_out_of_a_different_shape_warns_and_resizes_like_cpu():
    a = torch.ones(2, 2, device="tpu")
    out = torch.empty(5, device="tpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.add(a, a, out=out)
    assert any("resized" in str(w.message) for w in caught)
    assert out.shape == (2, 2) and out.cpu().tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_non_contiguous_and_aliased_operands():
    cpu = torch.arange(24.0).reshape(4, 6)
    dev = cpu.to("tpu")
    assert torch.equal((dev.t()[::2] * dev.t()[1::2]).cpu(), cpu.t()[::2] * cpu.t()[1::2])
    dev.add_(dev)  # other is self
    dev.mul_(dev.view(24).view(4, 6))  # other aliases all of self
    cpu.add_(cpu)
    cpu.mul_(cpu.view(24).view(4, 6))
    assert torch.equal(dev.cpu(), cpu)
    for device in ["cpu", "tpu"]:
        x = torch.arange(5.0, device=device)
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the "
                                               "written-to tensor refer to a single memory"):
            x[1:].add_(x[:-1])  # partially overlapping
        with pytest.raises(RuntimeError, match="some elements of the input tensor"):
            x.view(5, 1).add_(x[0])


def test_autograd_through_elementwise_ops():
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = torch.tensor([0.5, -1.0, 4.0], requires_grad=True)
    da = a.detach().to("tpu").requires_grad_()
    db = b.detach().to("tpu").requires_grad_()
    ((a * b + a) / b - b).sum().backward()
    ((da * db + da) / db - db).sum().backward()
    torch.testing.assert_close(da.grad.cpu(), a.grad)
    torch.testing.assert_close(db.grad.cpu(), b.grad)


def test_mixed_dtypes_promote_like_cpu():
    for da, db in itertools.product([torch.bool, torch.uint8, torch.int16, torch.float16],
                                    repeat=2):
        compare("add", sample((3,), da), sample((3,), db))
