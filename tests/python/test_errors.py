"""A user's mistakes get the exception PyTorch raises on CPU; nothing aborts."""

import pytest
import torch


def test_device_mismatch_is_the_standard_error():
    a = torch.ones(3, device="tpu")
    b = torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but "
                                           "found at least two devices, tpu:0 and cpu!"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mul(b, a)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.add(a, a, out=torch.empty(3))


def test_cpu_scalars_may_join_tpu_ops():
    a = torch.ones(3, device="tpu")
    assert (a * torch.tensor(2.0)).cpu().tolist() == [2.0, 2.0, 2.0]
    assert (torch.tensor(3) - a).cpu().tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("make", [
    lambda: torch.empty(2, dtype=torch.complex32, device="tpu"),
    lambda: torch.ones(2, dtype=torch.complex32).to("tpu"),
    lambda: torch.ones(2, dtype=torch.float8_e4m3fn).to("tpu"),
])
def test_unsupported_dtype_is_a_type_error(make):
    with pytest.raises((TypeError, RuntimeError), match="does not support dtype"):
        make()


def test_complex32_names_the_dtype():
    with pytest.raises(TypeError, match="the tpu device does not support dtype ComplexHalf"):
        torch.empty(2, dtype=torch.complex32, device="tpu")


def test_shape_mismatch():
    a, b = torch.ones(3, device="tpu"), torch.ones(4, device="tpu")
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of "
                                           r"tensor b \(4\) at non-singleton dimension 0"):
        a + b
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast "
                                           r"shape \[2, 3\]"):
        a.add_(torch.ones(2, 3, device="tpu"))


def test_casting_and_bool_rules():
    i = torch.ones(3, dtype=torch.int64, device="tpu")
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output "
                                           "type Long"):
        i.add_(0.5)
    bools = torch.ones(3, dtype=torch.bool, device="tpu")
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
        bools - bools
    with pytest.raises(RuntimeError, match="For integral input tensors, argument alpha must not be "
                                           "a floating point number"):
        torch.add(i, i, alpha=0.5)
    # (PyTorch's meta function raises this one as a ValueError; its CPU kernel as RuntimeError)
    with pytest.raises((RuntimeError, ValueError), match="div expected rounding_mode to be one of "
                                                         "None, 'trunc', or 'floor' but found"):
        torch.div(i, i, rounding_mode="up")


def test_bad_device_index():
    with pytest.raises(RuntimeError, match="invalid device index 7: there is 1 tpu device"):
        torch.ones(2, device="tpu:7")


def test_views_of_bad_geometry_raise_like_cpu():
    x = torch.ones(4, device="tpu")
    with pytest.raises(RuntimeError, match="setStorage: sizes \\[3, 3\\], strides \\[3, 1\\]"):
        x.as_strided((3, 3), (3, 1))
    with pytest.raises(RuntimeError, match="shape '\\[3\\]' is invalid for input of size 4"):
        x.view(3)
