"""Complex tensors on "tpu" against the CPU, in every eager mode: conjugate and negative views as
operands of the products PyTorch leaves them to (csrc/aten/lowered_kernel.cc), the ops that order
values (which PyTorch refuses for complex ones: the CPU's verdict, csrc/aten/cpu_verdict.cc), and
the variance, whose lowering once kept only the real part."""

import pytest
import torch
from conftest import assert_same_as_cpu

pytestmark = pytest.mark.usefixtures("each_eager_mode")


def _values(device, seed=0):
    g = torch.Generator().manual_seed(seed)
    a, b = (torch.randn(3, 3, dtype=torch.complex64, generator=g) for _ in range(2))
    v = torch.randn(3, dtype=torch.complex64, generator=g)
    return a.to(device), b.to(device), v.to(device)


# Products whose kernels PyTorch gives conjugate and negative views as they are (the views fall
# through its Conjugate and Negative dispatch keys): each with a lazy view as an operand.
PRODUCTS = {
    "mm": lambda a, b, v, lazy: torch.mm(lazy(a), b),
    "mm_right": lambda a, b, v, lazy: torch.mm(a, lazy(b)),
    "matmul": lambda a, b, v, lazy: lazy(a) @ b,
    "matmul_vector": lambda a, b, v, lazy: lazy(v) @ a,
    "bmm": lambda a, b, v, lazy: torch.bmm(lazy(a[None]), b[None]),
    "addmm": lambda a, b, v, lazy: torch.addmm(lazy(a), a, lazy(b)),
    "baddbmm": lambda a, b, v, lazy: torch.baddbmm(a[None], lazy(a[None]), b[None]),
    "dot": lambda a, b, v, lazy: torch.dot(lazy(v), v),
    "vdot": lambda a, b, v, lazy: torch.vdot(v, lazy(v)),
    "mv": lambda a, b, v, lazy: torch.mv(lazy(a), v),
    "addmv": lambda a, b, v, lazy: torch.addmv(v, lazy(a), lazy(v)),
    "addr": lambda a, b, v, lazy: torch.addr(a, lazy(v), v),
    "outer": lambda a, b, v, lazy: torch.outer(lazy(v), v),
    "einsum": lambda a, b, v, lazy: torch.einsum("ij,jk->ik", lazy(a), b),
    "tensordot": lambda a, b, v, lazy: torch.tensordot(lazy(a), b, 1),
    "matrix_power": lambda a, b, v, lazy: torch.linalg.matrix_power(lazy(a), 2),
}
LAZY = {"conj": torch.conj, "neg": torch._neg_view, "adjoint": lambda t: t.mH}


@pytest.mark.parametrize("lazy", LAZY)
@pytest.mark.parametrize("product", PRODUCTS)
def test_lazy_views_as_operands_of_products(product, lazy):
    if lazy == "adjoint" and product in ("matmul_vector", "dot", "vdot", "addr", "outer"):
        pytest.skip("mH takes a matrix")
    assert_same_as_cpu(lambda d: PRODUCTS[product](*_values(d), LAZY[lazy]).resolve_conj())


def test_hermitian_products_of_real_tensors_through_a_negative_view():
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    assert_same_as_cpu(lambda d: torch._neg_view(x.to(d)) @ x.to(d).T)


def test_covariance_is_hermitian():
    assert_same_as_cpu(lambda d: (torch.cov(_values(d)[0]), torch.corrcoef(_values(d)[1])))


def test_writing_a_product_through_a_conjugate_view_is_refused():
    a, b, _ = _values("tpu")
    out = torch.zeros(3, 3, dtype=torch.complex64, device="tpu")
    with pytest.raises(NotImplementedError, match="conjugate or negative view"):
        torch.mm(a, b, out=out.conj())


def test_compiled_hermitian_products_capture_and_replay():
    # vdot of a conjugate view returns a conjugate view of its result: a replay of the captured
    # program must give its output that view again (it once returned the unconjugated buffer).
    def fn(a, b, v):
        return a.mH @ b, torch.vdot(v, v.conj()), torch._neg_view(a) @ b

    f = torch.compile(fn, backend="tpu")
    expected = [t.resolve_conj().resolve_neg() for t in fn(*_values("cpu"))]
    for _ in range(3):  # the capture, then replays
        for e, g in zip(expected, f(*_values("tpu"))):
            torch.testing.assert_close(g.cpu().resolve_conj().resolve_neg(), e)


# Ops that order values: PyTorch refuses complex inputs to them (NotImplementedError or
# RuntimeError, op by op), and "tpu" must refuse them the same way rather than pick an order.
ORDERING = {
    "sort": lambda x: x.sort(), "argsort": lambda x: x.argsort(), "msort": torch.msort,
    "topk": lambda x: x.topk(2), "median": lambda x: x.median(), "nanmedian": torch.nanmedian,
    "kthvalue": lambda x: x.kthvalue(1), "max": lambda x: x.max(), "max_dim": lambda x: x.max(0),
    "amax": lambda x: x.amax(-1), "aminmax": torch.aminmax, "cummax": lambda x: x.cummax(0),
    "argmax": lambda x: x.argmax(), "clamp": lambda x: x.clamp(0, 1),
    "maximum": lambda x: torch.maximum(x, x), "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: x.log_softmax(-1), "unique": torch.unique,
    "searchsorted": lambda x: torch.searchsorted(x, x), "lt": lambda x: x < x,
    "nansum": torch.nansum, "nanmean": torch.nanmean, "relu": torch.relu,
    "sign": torch.sign, "floor": torch.floor, "isin": lambda x: torch.isin(x, x),
}


@pytest.mark.parametrize("op", ORDERING)
def test_ops_that_order_values_refuse_complex_as_the_cpu_does(op):
    assert_same_as_cpu(lambda d: ORDERING[op](_values(d)[0]), values=False)


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("kwargs", [{}, {"dim": 0}, {"dim": 1, "correction": 0, "keepdim": True}])
def test_variance_of_complex_values(name, kwargs):
    fn = getattr(torch, name)
    assert_same_as_cpu(lambda d: fn(_values(d)[0] * 3 + 1j, **kwargs))


def test_logsumexp_and_logaddexp_of_complex_values():
    assert_same_as_cpu(lambda d: (torch.logsumexp(_values(d)[0], 1),
                                  torch.logaddexp(_values(d)[0], _values(d)[1])))


def test_logaddexp_of_complex_values_with_nan_and_infinite_parts(fallback_error):
    """On the device (was: the CPU), as the CPU computes it: by the operand with the larger real
    part, NaN in a part of either operand NaN in both, equal infinite real parts the second
    operand (-inf) or log(exp(x) + exp(y)) (+inf); every pair of 35 values."""
    inf, nan = float("inf"), float("nan")
    values = [complex(a, b) for a in (0.0, -1.0, 2.5, inf, -inf, nan, 100.0)
              for b in (0.0, 1.0, -2.0, inf, nan)]

    def pairs(d):
        x = torch.tensor([v for v in values for _ in values], dtype=torch.complex128)
        y = torch.tensor([w for _ in values for w in values], dtype=torch.complex128)
        return torch.view_as_real(torch.logaddexp(x.to(d), y.to(d)))
    assert_same_as_cpu(pairs)


@pytest.mark.parametrize("dim", [0, 1])
def test_logcumsumexp_of_complex_values(fallback_error, dim):
    """On the device (was: the CPU): random values, and rows with NaN, +inf and -inf real parts
    (a prefix of -inf real parts is -inf + 0i, the CPU's running start)."""
    inf, nan = float("inf"), float("nan")
    torch.manual_seed(0)
    rows = torch.tensor([[1 + 1j, complex(-inf, 0), 2 - 1j, 3j],
                         [complex(inf, 0), 1j, complex(inf, 1), 2],
                         [complex(nan, 0), 1, 2, 3],
                         [complex(-inf, 1), complex(-inf, 2), 3j, complex(-inf, 5)]],
                        dtype=torch.complex128)
    for z in (torch.randn(3, 40, dtype=torch.complex128) * 5, rows):
        expected = torch.logcumsumexp(z, dim)
        got = torch.logcumsumexp(z.to("tpu"), dim).cpu()
        torch.testing.assert_close(got, expected, equal_nan=True, rtol=1e-12, atol=1e-12)


def _extremes(device):
    """Complex values with infinite, NaN and huge parts (|3e38 + 3e38j| overflows float32)."""
    inf, nan = float("inf"), float("nan")
    parts = [(inf, 1), (1, -inf), (nan, inf), (-inf, nan), (nan, 0), (3e38, 3e38), (1, 2),
             (-inf, -inf), (0, 0)]
    return torch.tensor([complex(*p) for p in parts], dtype=torch.complex64).to(device)


def test_isinf_of_complex_values_tests_each_part():
    assert_same_as_cpu(lambda d: (torch.isinf(_extremes(d)), torch.isfinite(_extremes(d))))


def test_abs_of_complex_values_follows_hypot():
    """An infinite part makes the modulus inf, else a NaN part NaN (the plugin's complex abs had
    given |1 + NaN i| = sqrt(2) and |NaN i| = 0)."""
    assert_same_as_cpu(lambda d: torch.abs(_extremes(d)))


@pytest.mark.parametrize("weight", [0.3, 0.7, 0.5 + 0.2j, -2.0, torch.tensor(0.2 - 0.6j)])
def test_lerp_of_complex_values(weight):
    """Exact at both ends on either side of |weight| = 0.5, as PyTorch."""
    def fn(d):
        a, b, _ = _values(d)
        w = weight.to(d) if isinstance(weight, torch.Tensor) else weight
        return torch.lerp(a, b, w)
    assert_same_as_cpu(fn)


@pytest.mark.parametrize("p,dim", [(2, 0), (1, 1), (3.5, -1)])
def test_renorm_of_complex_values_scales_by_the_moduli(p, dim):
    assert_same_as_cpu(lambda d: torch.renorm(_values(d)[0] * 4, p, dim, 1.5))


def test_renorm_of_complex_values_with_nan_and_infinite_parts():
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[complex(1, nan), 1, 2], [complex(nan, inf), 1, 2], [0.1, 0.2j, 0.3]],
                     dtype=torch.complex64)
    assert_same_as_cpu(lambda d: torch.renorm(x.to(d), 2, 0, 1.0))


def test_logsumexp_of_complex_values_with_infinite_real_parts():
    def fn(d):
        x = _values(d)[0].clone()
        x[0] = complex(float("-inf"), 0)
        x[1, 0] = complex(float("inf"), 0.5)
        return torch.logsumexp(x, 1), torch.logsumexp(x, 0)
    assert_same_as_cpu(fn)


def _on_branch_cuts(device):
    """Points on the branch cuts of sqrt and the inverse trigonometric and hyperbolic functions,
    with both signs of zero, and points off them."""
    points = []
    for x in (-2.5, -1.5, 2.5, 0.5):
        points += [complex(x, 0.0), complex(x, -0.0)]
    for y in (-2.5, 1.5, 0.5):
        points += [complex(0.0, y), complex(-0.0, y)]
    points += [complex(0.0, 0.0), complex(-0.0, -0.0), complex(1, 2), complex(-3, -0.5)]
    return torch.tensor(points, dtype=torch.complex64).to(device)


@pytest.mark.parametrize("fn", ["sqrt", "asin", "acos", "asinh", "acosh", "atan", "atanh",
                                "log", "log2", "log10"])
def test_functions_on_their_branch_cuts_take_the_side_of_the_zeros_sign(fn):
    """A point on a branch cut with a negative zero is on the cut's lower (or left) side, as on
    the CPU (C99): XLA's sqrt(-1 - 0i) was +i, acos(-2.5 - 0i) pi - 1.57i; log10(0) was
    -inf + NaN i."""
    # Each part compared on its own (a part of -inf beside a part a rounding apart is no match
    # for a complex difference).
    assert_same_as_cpu(lambda d: torch.view_as_real(getattr(torch, fn)(_on_branch_cuts(d))))


_PARTS = [0.0, -0.0, 1.0, -2.5, float("inf"), float("-inf"), float("nan"), 3e38]

_UNARY = ["log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "exp", "exp2", "expm1",
          "sigmoid", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh",
          "acosh", "atanh", "sgn"]


def _with_a_nan_part(device, dtype):
    """Every complex number with a NaN in one or both parts, the other part from _PARTS."""
    nan = float("nan")
    points = [complex(nan, p) for p in _PARTS] + [complex(p, nan) for p in _PARTS if p == p]
    return torch.tensor(points, dtype=dtype).to(device)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("fn", _UNARY + ["square"])
def test_functions_of_values_with_a_nan_part_give_the_cpus_nans_and_infinities(fn, dtype):
    """NaN in both parts but where C99 (and so the CPU) says otherwise: XLA's expansions dropped
    the NaN (log(1 + NaN i) had a real part of 0.35, atan(1 + NaN i) one of pi/2, square(NaN i)
    was 0) or made one up (exp(-inf + NaN i) is 0, sqrt(NaN + inf i) inf + inf i)."""
    assert_same_as_cpu(
        lambda d: torch.view_as_real(getattr(torch, fn)(_with_a_nan_part(d, dtype))))


def _with_a_zero_part(device, dtype):
    """Every complex number with a zero part (either sign) and the other part not NaN, and finite
    ones after them to make 64 (all in the CPU's vectorized loop)."""
    others = [0.0, -0.0, 0.5, -0.5, 1.0, -2.5, 3.0, -3.0, 20.0, -20.0, 1e5, float("inf"),
              float("-inf")]
    points = [complex(x, y) for x in others for y in (0.0, -0.0)]
    points += [complex(y, x) for x in others for y in (0.0, -0.0)]
    points += [complex(0.25 * k, -k) for k in range(1, 65 - len(points))]
    return torch.tensor(points, dtype=dtype).to(device)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("fn", _UNARY)
def test_functions_of_values_with_a_zero_part_give_the_cpus_signs_of_zero(fn, dtype):
    """A part of the result that is a product with a zero factor is a zero with the product's
    sign, as on the CPU: exp(1 - 0i) was e + 0i (the CPU's e - 0i), cos(0) 1 + 0i (1 - 0i),
    reciprocal(-0 + 2i) -0 - 0.5i (0 - 0.5i); and where the other factor overflowed it was NaN:
    sin(1e5 i) in float32 was NaN + inf i, the CPU's 0 + inf i."""
    def results(d):
        return torch.view_as_real(getattr(torch, fn)(_with_a_zero_part(d, dtype)))
    if fn == "acos" and dtype == torch.complex128:
        # The CPU's complex128 acos(x + 0i) is acos(x) + 0i, its complex64 one (and C99's)
        # acos(x) - 0i; the device gives C99's in both: only the values are compared here.
        torch.testing.assert_close(results("tpu").cpu(), results("cpu"), equal_nan=True)
        return
    assert_same_as_cpu(results)


def _with_an_infinite_part(device, dtype):
    """Every complex number with an infinite part and no NaN, the other part from _PARTS, and
    finite ones after them to make 32 (the CPU's vectorized loop then takes them all: its scalar
    tail divides sgn's parts by a complex modulus, where the vectorized body divides each part)."""
    parts = [p for p in _PARTS if p == p]
    points = [complex(x, y) for x in parts for y in parts if abs(x) == float("inf") or
              abs(y) == float("inf")]
    points += [complex(0.5 * k, -k) for k in range(1, 33 - len(points))]
    return torch.tensor(points, dtype=dtype).to(device)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("fn", _UNARY)
def test_functions_of_values_with_an_infinite_part_give_the_cpus_values(fn, dtype):
    """Where C99 (and so the CPU) gives a value, not NaN: XLA's expansions multiplied a zero by
    an infinity (cos(inf i) was inf + NaN i, the CPU's inf - 0i; sinh(inf i) NaN + NaN i, the
    CPU's 0 + NaN i; exp(-inf + inf i) NaN + NaN i, the CPU's 0), and exp2 of a complex scaled
    it by a complex log 2 (exp2(inf) was NaN + NaN i)."""
    assert_same_as_cpu(
        lambda d: torch.view_as_real(getattr(torch, fn)(_with_an_infinite_part(d, dtype))))


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2, 1, 0, 2.5, 2 + 0j])
def test_complex_powers_of_the_exponents_the_cpu_computes_exactly(exponent):
    """z ** 2 is z * z, z ** 0.5 sqrt(z), z ** -1 1 / z, ... as on the CPU: exp(2 log z) made
    (NaN i) ** 2 zero and (1 + 2i) ** 2 inexact."""
    def powers(d):
        z = torch.tensor([1 + 2j, -3 - 0.5j, 0.25j, -2.0, 0j], dtype=torch.complex128)
        z = torch.cat([z, _with_a_nan_part("cpu", torch.complex128)[:1]])
        if exponent in (2, 3, 1, 2 + 0j):  # exact products: the same bits as the CPU's
            return torch.view_as_real(torch.pow(z.to(d), exponent))
        return torch.view_as_real(torch.pow(z[:-2].to(d), exponent))
    assert_same_as_cpu(powers)


def test_complex_powers_of_complex_tensors_are_exp_of_y_log_x():
    """A tensor exponent (pow.Tensor_Tensor) is exp(y log x) with C99's product, as the CPU's
    cpow, at every pair of a grid with zero parts: 0 ** (1 + i) is 0 (was NaN), 0 ** 0 NaN (was
    1), and 2 + 0i is no special case there (the CPU's (1 + 2i) ** (2 + 0i) is inexact too)."""
    parts = [0.0, -0.0, 1.0, -2.5, 0.5, 3.0]
    values = [complex(a, b) for a in parts for b in parts]

    def powers(d):
        x = torch.tensor([v for v in values for _ in values], dtype=torch.complex128)
        y = torch.tensor([w for _ in values for w in values], dtype=torch.complex128)
        return torch.view_as_real(torch.pow(x.to(d), y.to(d)))
    assert_same_as_cpu(powers)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("start, end, steps, base", [
    (0, 2, 5, 10.0), (1 + 2j, -3 + 0.5j, 7, 2.0), (-2 + 1j, 2 - 1j, 2, 0.5), (1, 5, 6, -3.0),
    (1 + 1j, 3, 4, 0.0), (0j, 1j, 3, 1.0), (0.5j, 3j, 1, 10.0), (1 - 1j, 2, 1, -2.0),
    (0, 1, 0, 10.0)], ids=str)
def test_complex_logspace_as_the_cpu(start, end, steps, base, dtype):
    """Complex logspace runs on the device (it ran on the CPU), as PyTorch's kernel computes it:
    the exponents from each end in the output type, base ** exponent as its complex pow, and a
    single step base ** start in complex128 (a polar form for a positive base); a negative or
    zero base included. Into out= too."""
    def spaced(d):
        out = torch.empty(0, dtype=dtype, device=d)
        torch.logspace(start, end, steps, base, out=out)
        return (torch.view_as_real(torch.logspace(start, end, steps, base, dtype=dtype, device=d)),
                torch.view_as_real(out))
    assert_same_as_cpu(spaced)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_division_scales_as_the_cpu_does(dtype):
    """Smith's division, as the CPU's: XLA's gave 0 for 0 / (inf + inf i), which is NaN, and
    inf + NaN i for -1 / (-0 + 0i), which is -inf + NaN i."""
    big = 3e38 if dtype == torch.complex128 else 1e30
    def quotients(d):
        x = torch.tensor([1 + 1j, 2 - 3j, 1j, 0j, 1 + 1j, -1.0, 1 + 1j], dtype=dtype)
        inf = float("inf")
        y = torch.tensor([complex(big, big), complex(big, -1), complex(1, big), complex(inf, inf),
                          0j, complex(-0.0, 0.0), 1e-20 + 1e-20j], dtype=dtype)
        return torch.view_as_real(x.to(d) / y.to(d)), torch.view_as_real(torch.reciprocal(y.to(d)))
    assert_same_as_cpu(quotients)
