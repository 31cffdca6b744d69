"""Ops beyond the OpInfo sample inputs: factories, data-dependent shapes, sorting, shifts."""

import warnings

import pytest
import torch

pytestmark = pytest.mark.usefixtures("fallback_error")


def same(fn):
    expected = fn("cpu")
    got = fn("tpu")
    for e, g in zip(expected if isinstance(expected, tuple) else (expected,),
                    got if isinstance(got, tuple) else (got,)):
        if isinstance(e, torch.Tensor):
            assert g.device.type == "tpu"
            torch.testing.assert_close(g.cpu(), e, equal_nan=True)
        else:
            assert g == e


def same_outcome(fn):
    """`same`, or the CPU's exception (type and message) on tpu too."""
    try:
        fn("cpu")
    except Exception as e:  # noqa: BLE001  (whatever the CPU raises, tpu must raise)
        with pytest.raises(type(e)) as raised:
            fn("tpu")
        assert str(raised.value) == str(e)
        return
    same(fn)


X = torch.tensor([[3.0, -1.0, float("nan"), 2.0], [0.0, 5.0, -2.0, 2.0], [1.0, 1.0, 0.0, -7.0]])


@pytest.mark.parametrize("fn", [
    lambda d: torch.linspace(-1, 2, 7, device=d),
    lambda d: torch.linspace(0, 10, 5, dtype=torch.int64, device=d),
    lambda d: torch.eye(3, 5, device=d),
    lambda d: torch.arange(2.5, -3, -0.5, device=d),
    lambda d: torch.arange(10, dtype=torch.int32, device=d),
], ids=["linspace", "linspace_int", "eye", "arange_negative_step", "arange_int"])
def test_factories(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda x: x.sort(1),
    lambda x: x.sort(0, descending=True),
    lambda x: torch.sort(x, dim=1, stable=True),
    lambda x: x.argsort(1),
], ids=["sort", "sort_desc", "sort_stable", "argsort"])
def test_sorting(fn):
    same(lambda d: fn(X.to(d)))


@pytest.mark.parametrize("dim,largest", [(1, True), (0, False)])
def test_topk(dim, largest):
    # Ties may come in any order (they do on CPU too): compare values, and indices through them.
    values, indices = X.to("tpu").topk(2, dim, largest=largest)
    expected = X.topk(2, dim, largest=largest).values
    torch.testing.assert_close(values.cpu(), expected, equal_nan=True)
    torch.testing.assert_close(X.gather(dim, indices.cpu()), expected, equal_nan=True)


def test_data_dependent_shapes():
    same(lambda d: torch.nonzero(X.to(d)))
    same(lambda d: torch.nonzero(torch.zeros(3, device=d)))
    same(lambda d: X.to(d)[X.to(d) > 0])
    same(lambda d: torch.masked_select(X.to(d), torch.tensor([True, False, True, False],
                                                                  device=d)))
    same(lambda d: X.to(d)[:, torch.tensor([True, False, True, True], device=d)])


def test_boolean_mask_assignment_writes_in_place():
    for d in ["cpu", "tpu"]:
        x = X.clone().to(d)
        x[x < 0] = 0.0
        x[torch.tensor([False, True, False], device=d)] += 1
        if d == "cpu":
            expected = x
    torch.testing.assert_close(x.cpu(), expected, equal_nan=True)


def test_index_put_accumulates_duplicates():
    same(lambda d: torch.zeros(5, device=d).index_put_(
        (torch.tensor([0, 2, 2, 4], device=d),), torch.ones(4, device=d), accumulate=True))
    same(lambda d: torch.zeros(3, 4, device=d).index_put_(
        (torch.tensor([0, 2], device=d), torch.tensor([1, 3], device=d)),
        torch.tensor(5.0, device=d)))


def test_shifts():
    a = torch.tensor([1, -8, 255, 3], dtype=torch.int32)
    same(lambda d: a.to(d) << 2)
    same(lambda d: a.to(d) >> 1)
    same(lambda d: torch.bitwise_left_shift(a.to(d), torch.tensor([0, 1, 2, 3], dtype=torch.int32,
                                                                  device=d)))
    same(lambda d: torch.tensor([200, 7], dtype=torch.uint8, device=d) >> 2)


def test_equal_and_printing():
    x = X.to("tpu")
    assert torch.equal(x[:, :2], x[:, :2].clone())
    assert not torch.equal(x, x + 1)
    assert not torch.equal(x, x[:2])
    assert "tensor([[ 3., -1., nan,  2.]" in str(x)
    assert "device='tpu:0'" in str(x)


@pytest.mark.parametrize("values,dtype", [
    ([True, False, True], torch.bool),
    ([-1, 7, -128, 3], torch.int8),
    ([255, 1, 128], torch.uint8),
    ([2**63 - 1, -2**63, -5], torch.int64),
    ([float("nan"), -0.0, float("inf"), -float("inf"), 1e-40, -3e-45, 2.5], torch.float32),
    ([1.5, -2.25, 1e300], torch.float64),
    ([0.1, -3.0, 1e-39, float("nan")], torch.bfloat16),
    ([1e-6, -6e-8, 65504.0, -float("inf")], torch.float16),
], ids=["bool", "int8", "uint8", "int64", "float32_special", "float64", "bfloat16", "float16"])
def test_hash_tensor_gives_the_cpus_bits(values, dtype):
    x = torch.tensor(values, dtype=dtype)
    same(lambda d: torch.hash_tensor(x.to(d)))


def test_hash_tensor_dims_keepdim_empty_out_and_errors():
    x = torch.arange(-6, 6, dtype=torch.int32).reshape(3, 4)
    same(lambda d: torch.hash_tensor(x.to(d), dim=1))
    same(lambda d: torch.hash_tensor(x.t().to(d), dim=[0, 1], keepdim=True))
    same(lambda d: torch.hash_tensor(torch.zeros(0, 3, device=d), dim=1))
    same(lambda d: torch.hash_tensor(x.to(d), dim=0,
                                     out=torch.empty(0, dtype=torch.uint64, device=d)))
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        torch.hash_tensor(torch.zeros(0, 3, device="tpu"), dim=0)
    with pytest.raises(RuntimeError, match="Unknown hash_tensor mode: 1"):
        torch.hash_tensor(x.to("tpu"), mode=1)
    # (the CPU's verdict on complex operands: its message names its own kernel)
    with pytest.raises(NotImplementedError, match="\"xor_sum_(cpu|tpu)\" not implemented for "
                                                  "'ComplexFloat'"):
        torch.hash_tensor(torch.ones(2, dtype=torch.complex64, device="tpu"))


def test_an_out_that_is_an_input_is_not_resized():
    """ldexp_ runs as ldexp.out(self, self, other): an out= that is also an input cannot take the
    broadcast shape, as on the CPU, even after a call of the same shapes with a fresh out=."""
    x, y = torch.ones(5, 1, device="tpu"), torch.ones(5, device="tpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (PyTorch warns that it resized an out= with elements)
        out = torch.ldexp(x, y, out=torch.ones(5, 1, device="tpu"))  # a fresh out= is resized
    assert out.shape == (5, 5)
    with pytest.raises(RuntimeError, match=r"output with shape \[5, 1\] doesn't match the "
                                           r"broadcast shape \[5, 5\]"):
        x.ldexp_(y)
    assert torch.equal(x.cpu(), torch.ones(5, 1))


@pytest.mark.parametrize("shape", [(), (5, 1), (1, 10), (5, 10)])
def test_addr_inplace_takes_only_its_own_shape(shape):
    def addr_(d):
        return torch.ones(shape, device=d).addr_(torch.arange(5.0, device=d),
                                                 torch.arange(10.0, device=d))
    same_outcome(addr_)


@pytest.mark.parametrize("shape", [(), (1,), (10,), (5, 10), (3,)])
def test_addbmm_inplace_resizes_a_self_that_broadcasts(shape):
    """As the CPU and CUDA kernels do (addmm_ and baddbmm_ refuse such a self)."""
    b1, b2 = torch.randn(4, 5, 3), torch.randn(4, 3, 10)
    self = torch.randn(shape)
    same_outcome(lambda d: self.clone().to(d).addbmm_(b1.to(d), b2.to(d), beta=0.5))
