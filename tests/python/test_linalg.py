"""Linear algebra and FFTs on "tpu" against the CPU's LAPACK and pocketfft: accuracy on random
well-conditioned float32/float64 matrices (single and batched), PyTorch's errors on singular or
non-positive-definite inputs, info outputs, empty matrices. Every call must run on the device
(TORCHTPU_CPU_FALLBACK=error is set for the module)."""

import pytest
import torch

import torchtpu

# Largest relative error (max |tpu - cpu| / max |cpu|) allowed per dtype.
RTOL = {torch.float32: 2e-5, torch.float64: 1e-12, torch.complex128: 1e-12}


@pytest.fixture(autouse=True)
def no_fallback():
    torchtpu._C._set_cpu_fallback_policy("error")
    yield
    torchtpu._C._set_cpu_fallback_policy("warn")


def _rel(got, expected):
    wide = torch.complex128 if expected.is_complex() else torch.float64
    got, expected = got.cpu().to(wide), expected.cpu().to(wide)
    return ((got - expected).abs().max() / expected.abs().max().clamp_min(1e-30)).item()


def _spd(shape, dtype):
    a = torch.randn(shape, dtype=dtype)
    return a @ a.mH + shape[-1] * torch.eye(shape[-1], dtype=dtype)


def _general(shape, dtype):
    return torch.randn(shape, dtype=dtype) + 3 * torch.eye(shape[-1], dtype=dtype)


CASES = {
    "cholesky": lambda a, b: torch.linalg.cholesky(a["spd"]),
    "cholesky_upper": lambda a, b: torch.linalg.cholesky(a["spd"], upper=True),
    "cholesky_solve": lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a["spd"])),
    "cholesky_inverse": lambda a, b: torch.cholesky_inverse(torch.linalg.cholesky(a["spd"])),
    "solve_triangular": lambda a, b: torch.linalg.solve_triangular(
        a["general"].triu(), b, upper=True),
    "solve_triangular_right": lambda a, b: torch.linalg.solve_triangular(
        a["general"].tril(), b.mT, upper=False, left=False, unitriangular=True),
    "lu_factor": lambda a, b: torch.linalg.lu_factor(a["general"]),
    "lu": lambda a, b: torch.linalg.lu(a["general"]),
    "lu_solve_adjoint": lambda a, b: torch.linalg.lu_solve(
        *torch.linalg.lu_factor(a["general"]), b, adjoint=True),
    "lu_solve_right_adjoint": lambda a, b: torch.linalg.lu_solve(
        *torch.linalg.lu_factor(a["general"]), b.mT, left=False, adjoint=True),
    "triangular_solve_transpose": lambda a, b: torch.triangular_solve(
        b, a["general"].triu(), transpose=True),
    "cholesky_ex_not_positive_definite": lambda a, b: torch.linalg.cholesky_ex(
        a["spd"] - 100 * a["spd"].diagonal(dim1=-2, dim2=-1).abs().max()
        * torch.eye(a["spd"].shape[-1], dtype=a["spd"].dtype, device=a["spd"].device)).info,
    "solve": lambda a, b: torch.linalg.solve(a["general"], b),
    "solve_right": lambda a, b: torch.linalg.solve(a["general"], b.mT, left=False),
    "solve_vector": lambda a, b: torch.linalg.solve(a["general"], b[..., 0]),
    "inv": lambda a, b: torch.linalg.inv(a["general"]),
    "det": lambda a, b: torch.linalg.det(a["general"]),
    "slogdet": lambda a, b: torch.linalg.slogdet(a["general"]),
    "qr": lambda a, b: torch.linalg.qr(a["tall"]),
    "qr_complete": lambda a, b: torch.linalg.qr(a["tall"], mode="complete"),
    "householder_product": lambda a, b: torch.linalg.householder_product(
        *torch.geqrf(a["tall"].cpu())),
    "eigvalsh": lambda a, b: torch.linalg.eigvalsh(a["spd"]),
    "svdvals": lambda a, b: torch.linalg.svdvals(a["tall"]),
    "geqrf": lambda a, b: torch.geqrf(a["tall"]),
    "matrix_exp": lambda a, b: torch.linalg.matrix_exp(a["general"]),
    "cross": lambda a, b: torch.linalg.cross(b[..., :3, :], b[..., 1:4, :], dim=-2),
}


# (OpInfo's samples check complex64: tests/python/test_opinfo.py.)
DTYPES = [(torch.float32, ()), (torch.float64, (3,)), (torch.complex128, (3,))]


# One matrix in float32, a batch in float64 and in complex128 (the rank-2 and batched paths, both
# precisions, real and complex).
@pytest.mark.parametrize("dtype, batch", DTYPES, ids=["f32", "f64-batched", "c128-batched"])
@pytest.mark.parametrize("name", list(CASES))
def test_accuracy_against_lapack(name, dtype, batch):
    torch.manual_seed(0)
    n = 6
    mats = {"spd": _spd(batch + (n, n), dtype), "general": _general(batch + (n, n), dtype),
            "tall": torch.randn(batch + (n + 2, n), dtype=dtype)}
    rhs = torch.randn(batch + (n, 4), dtype=dtype)
    expected = CASES[name](mats, rhs)
    dev = {k: v.to("tpu") for k, v in mats.items()}

    def to_tpu(x):
        return x.to("tpu") if isinstance(x, torch.Tensor) else x
    if name == "householder_product":
        got = torch.linalg.householder_product(*map(to_tpu, torch.geqrf(mats["tall"])))
    else:
        got = CASES[name](dev, rhs.to("tpu"))
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for g, e in zip(got, expected, strict=True):
        assert g.device.type == "tpu"
        if e.dtype in (torch.int32, torch.int64):
            assert torch.equal(g.cpu(), e), name  # LU pivots: LAPACK's
        else:
            assert _rel(g, e) < RTOL[dtype], name


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_eigh_vectors_diagonalize(dtype):
    """Eigenvectors are unique up to sign (a phase, for complex ones): check A V = V diag(w) and
    V^H V = I instead."""
    a = _spd((2, 5, 5), dtype).to("tpu")
    w, v = torch.linalg.eigh(a)
    assert w.dtype == torch.float64
    assert _rel(a @ v, v * w.unsqueeze(-2)) < 1e-7
    assert _rel(v.mH @ v, torch.eye(5, dtype=dtype).expand(2, 5, 5)) < 1e-7


def test_svd_reconstructs():
    a = torch.randn(4, 7, 5)
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=False)
    assert _rel(u @ torch.diag_embed(s) @ vh, a) < 1e-5
    assert _rel(s, torch.linalg.svdvals(a)) < 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 2), (2, 1, 3), (4, 1), (3, 0), (0, 2)])
def test_svd_with_full_matrices(shape, dtype):
    """torch.linalg.svd's default, full_matrices=True, of a non-square matrix (was: on the CPU):
    U and Vh square and orthogonal, their first min(m, n) columns (rows) the singular vectors.
    The other columns are any orthonormal basis of the rest (LAPACK's is one), so compared by
    what they must satisfy."""
    a = torch.randn(shape, dtype=dtype)
    u, s, vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu")))
    cpu_u, cpu_s, cpu_vh = torch.linalg.svd(a)
    assert (u.shape, s.shape, vh.shape) == (cpu_u.shape, cpu_s.shape, cpu_vh.shape)
    assert (u.dtype, s.dtype, vh.dtype) == (cpu_u.dtype, cpu_s.dtype, cpu_vh.dtype)
    k, tol = min(shape[-2:]), 1e-7 if dtype in (torch.float64, torch.complex128) else 1e-5
    if k:
        assert _rel(u[..., :k] @ torch.diag_embed(s).to(dtype) @ vh[..., :k, :], a) < tol
        assert _rel(s, cpu_s) < tol
    for q in (u, vh):
        identity = torch.eye(q.shape[-1], dtype=dtype).expand(q.shape)
        torch.testing.assert_close(q.mH @ q, identity, atol=tol, rtol=0)


def test_singular_inverse_raises_linalg_error():
    a = torch.ones(3, 3, device="tpu")
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.linalg.inv(a)
    _, info = torch.linalg.inv_ex(a)
    assert info.item() == torch.linalg.inv_ex(torch.ones(3, 3))[1].item() == 2


def test_solve_singular_raises_linalg_error():
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.solve(torch.zeros(2, 3, 3, device="tpu"), torch.ones(2, 3, 1, device="tpu"))


def test_cholesky_not_positive_definite():
    a = torch.tensor([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(torch.linalg.LinAlgError, match="order 2 is not positive-definite"):
        torch.linalg.cholesky(a.to("tpu"))
    _, info = torch.linalg.cholesky_ex(a.to("tpu"))
    assert info.item() == torch.linalg.cholesky_ex(a)[1].item() == 2


NOT_PD = torch.tensor([[[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                       [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]])
SINGULAR = torch.tensor([[[2.0, 1.0], [1.0, 3.0]], [[1.0, 2.0], [2.0, 4.0]]])
FACTOR = torch.tensor([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 0.0], [1.0, 2.0]]])
# Kernels that check their factorization's info (PyTorch's _linalg_check_errors): name ->
# (fn, a batch whose elements fail at different places, so the message names the first).
CHECKED = {
    "cholesky": (lambda a: torch.cholesky(a, upper=True), NOT_PD),
    "cholesky_out": (lambda a: torch.cholesky(a, out=torch.empty_like(a)), NOT_PD),
    "cholesky_ex": (lambda a: torch.linalg.cholesky_ex(a, check_errors=True), NOT_PD),
    "inv_ex": (lambda a: torch.linalg.inv_ex(a, check_errors=True), SINGULAR),
    "solve_ex": (lambda a: torch.linalg.solve_ex(a, a[..., :1], check_errors=True), SINGULAR),
    "lu_factor_ex": (lambda a: torch.linalg.lu_factor_ex(a, check_errors=True), SINGULAR),
    "cholesky_inverse": (lambda a: torch.cholesky_inverse(a, upper=True), FACTOR),
}


def _error(fn, a):
    try:
        fn(a)
        if a.device.type == "tpu":
            torch.tpu.synchronize()
    except Exception as e:  # noqa: BLE001  (the error is what is compared)
        return e
    return None


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
@pytest.mark.parametrize("name", list(CHECKED))
def test_failed_factorizations_raise_the_cpus_error_at_the_call(name, mode):
    """A matrix that is not positive-definite, or singular, raises the CPU's LinAlgError (or
    RuntimeError) with its message, which names the first failing batch element and where it
    failed; a good matrix of the same shapes first, so no cached CPU verdict can stand in."""
    fn, bad = CHECKED[name]
    good = torch.eye(bad.shape[-1]).expand_as(bad).clone()
    expected = _error(fn, bad)
    assert expected is not None, name
    with torchtpu.eager_mode(mode):
        assert _error(fn, good.to("tpu")) is None
        got = _error(fn, bad.to("tpu"))
        assert type(got) is type(expected) and str(got) == str(expected), (got, expected)
        got = _error(fn, bad[1].to("tpu"))  # one matrix: no batch element in the message
        assert str(got) == str(_error(fn, bad[1])), got


def test_ex_factorizations_return_info_without_raising():
    for fn, bad in [(torch.linalg.cholesky_ex, NOT_PD), (torch.linalg.inv_ex, SINGULAR),
                    (torch.linalg.lu_factor_ex, SINGULAR)]:
        assert torch.equal(fn(bad.to("tpu")).info.cpu(), fn(bad).info)


def test_compiled_cholesky_raises_on_a_matrix_that_is_not_positive_definite():
    fn = torch.compile(lambda a: torch.cholesky(a) * 2, backend="tpu")
    torch.testing.assert_close(fn(torch.eye(3, device="tpu")).cpu(), 2 * torch.eye(3))
    with pytest.raises(torch.linalg.LinAlgError, match="leading minor of order 2"):
        fn(NOT_PD[0].to("tpu"))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_det_and_slogdet_gradients_for_either_layout(compiled, dtype):
    """PyTorch's backward solves with the LU the forward returned, which for a contiguous real
    A is the LU of A^T: tpu must return that one too (and A's own for a transposed A)."""
    a = _general((2, 5, 5), dtype)
    fns = {"det": torch.linalg.det, "slogdet": lambda x: torch.linalg.slogdet(x)[1]}
    for name, fn in fns.items():
        run = torch.compile(fn, backend="tpu") if compiled else fn
        for layout in [lambda x: x, lambda x: x.mT.contiguous().mT]:
            grads = []
            for device, f in [("cpu", fn), ("tpu", run)]:
                x = layout(a.to(device)).detach().requires_grad_()
                y = f(x)
                (y.abs() if y.is_complex() else y).sum().backward()
                grads.append(x.grad.cpu())
            assert _rel(grads[1], grads[0]) < 1e-12, name


# Scalar losses of complex factorizations, each invariant to the phase freedom of eigenvectors
# and singular vectors (the gradient of a loss that depends on the phase is ill-defined).
COMPLEX_GRADIENTS = {
    "solve": (lambda a, s, b: torch.linalg.solve(a, b).abs().sum(), 1e-12),
    "cholesky": (lambda a, s, b: torch.linalg.cholesky(s).abs().sum(), 1e-12),
    "inv": (lambda a, s, b: torch.linalg.inv(a).real.sum(), 1e-12),
    "qr": (lambda a, s, b: torch.linalg.qr(a)[1].abs().sum(), 1e-12),
    "matrix_exp": (lambda a, s, b: torch.linalg.matrix_exp(a * 0.3).abs().sum(), 1e-12),
    "eigh": (lambda a, s, b: (torch.linalg.eigh(s)[1][..., 0, :].abs() ** 2
                              * torch.arange(4.0, device=s.device)).sum(), 1e-6),
    "svd": (lambda a, s, b: (lambda u, sv, vh: (u @ torch.diag_embed(sv).to(a.dtype) @ vh)
                             .real.sum())(*torch.linalg.svd(a, full_matrices=False)), 1e-7),
    "lstsq": (lambda a, s, b: torch.linalg.lstsq(a, b).solution.abs().sum(), 1e-6),
}


@pytest.mark.parametrize("name", list(COMPLEX_GRADIENTS))
def test_gradients_of_complex_factorizations(name):
    """Backward through complex factorizations on the device, against the CPU's (complex128)."""
    torch.manual_seed(0)
    fn, tol = COMPLEX_GRADIENTS[name]
    a = torch.randn(3, 4, 4, dtype=torch.complex128)
    inputs = (a, _spd((3, 4, 4), torch.complex128), torch.randn(3, 4, 2, dtype=torch.complex128))
    grads = []
    for device in ("cpu", "tpu"):
        xs = [x.to(device).detach().requires_grad_() for x in inputs]
        fn(*xs).backward()
        grads.append([None if x.grad is None else x.grad.cpu() for x in xs])
    for g, e in zip(grads[1], grads[0], strict=True):
        assert (g is None) == (e is None), name
        if e is not None:
            assert _rel(g, e) < tol, name


def test_singular_det_and_slogdet():
    a = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    assert torch.linalg.det(a.to("tpu")).item() == 0
    sign, logabs = torch.linalg.slogdet(a.to("tpu"))
    assert sign.item() == 0 and logabs.item() == float("-inf")


def test_empty_matrices():
    e = torch.zeros(2, 0, 0, device="tpu")
    assert torch.linalg.inv(e).shape == (2, 0, 0)
    assert torch.linalg.det(e).cpu().tolist() == [1.0, 1.0]
    assert torch.linalg.cholesky(e).shape == (2, 0, 0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_matrix_exp_across_norms_in_one_batch(dtype):
    """1-norms from 1e-3 (no squaring) to ~400 (7 squarings) in one batch, and an empty batch."""
    torch.manual_seed(0)
    a = torch.randn(3, 4, 4, dtype=dtype) * torch.tensor([1e-3, 1.0, 100.0],
                                                         dtype=torch.float64)[:, None, None]
    got, expected = torch.linalg.matrix_exp(a.to("tpu")).cpu(), torch.linalg.matrix_exp(a)
    for g, e in zip(got, expected, strict=True):
        assert _rel(g, e) < 1e-12
    assert torch.linalg.matrix_exp(torch.zeros(2, 0, 0, device="tpu")).shape == (2, 0, 0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_lstsq_drivers(dtype):
    """A vector right-hand side (gels), a wide A (the least-norm solution), and a batch of a
    rank-deficient and a full-rank tall A with a broadcast right-hand side (gelsd then returns no
    residuals): shapes, dtypes, ranks and values as LAPACK's. (OpInfo's first samples cover gels
    on tall, square and wide matrices.)"""
    torch.manual_seed(0)
    a = torch.randn(2, 5, 3, dtype=dtype)
    deficient = a.clone()
    deficient[..., 2] = deficient[..., 1]
    cases = [("gels", a, torch.randn(2, 5, dtype=dtype)),
             ("gelss", a.mT, torch.randn(2, 3, 2, dtype=dtype)),
             ("gelsd", torch.stack([deficient[0], a[1]]), torch.randn(1, 5, 2, dtype=dtype))]
    for driver, x, y in cases:
        got = torch.linalg.lstsq(x.to("tpu"), y.to("tpu"), driver=driver)
        expected = torch.linalg.lstsq(x, y, driver=driver)
        for g, e in zip(got, expected, strict=True):
            assert g.device.type == "tpu" and g.shape == e.shape and g.dtype == e.dtype, driver
            if e.numel():
                assert _rel(g, e) < (1e-7 if driver != "gels" else 1e-12), driver


def test_lstsq_errors():
    a, b, c = (torch.ones(shape, device="tpu") for shape in [(4, 3), (4, 2), (5, 2)])
    with pytest.raises(RuntimeError, match="parameter `driver` should be one of"):
        torch.linalg.lstsq(a, b, driver="foo")
    with pytest.raises(RuntimeError, match="input.size\\(-2\\) should match other.size\\(-2\\)"):
        torch.linalg.lstsq(a, c)
    with pytest.raises(RuntimeError, match="Expected input and other to have the same dtype"):
        torch.linalg.lstsq(a, torch.ones(4, 2, dtype=torch.float64, device="tpu"))


@pytest.mark.parametrize("dtype, hermitian", [(torch.float64, False), (torch.complex128, False),
                                              (torch.complex128, True)],
                         ids=["real", "complex-symmetric", "complex-hermitian"])
def test_ldl_pivots_as_lapack(dtype, hermitian):
    """Indefinite matrices, so 2x2 pivots and interchanges (OpInfo's are positive-definite), a
    batch whose matrices step through different pivot sizes, and zero columns (info): factors and
    solutions close to LAPACK's, pivots and info equal. Complex ones symmetric (LDL^T, LAPACK's
    zsytrf) and Hermitian (LDL^H, zhetrf: their diagonal's imaginary parts ignored)."""
    torch.manual_seed(0)
    a = torch.randn(4, 6, 6, dtype=dtype)
    a = a + (a.mH if hermitian else a.mT)
    a[1] = 0
    a[1, 0, 1] = a[1, 1, 0] = 1.0  # a 2x2 pivot, then zero columns
    a[2, :, 0] = a[2, 0, :] = 0  # a zero first column: info 1
    if hermitian:
        a.diagonal(dim1=-2, dim2=-1).imag.uniform_()  # not read
    ld, pivots, info = torch.linalg.ldl_factor_ex(a.to("tpu"), hermitian=hermitian)
    expected = torch.linalg.ldl_factor_ex(a, hermitian=hermitian)
    assert (pivots.cpu() < 0).any()
    assert (expected.pivots != torch.arange(1, 7, dtype=torch.int32)).any()
    assert torch.equal(pivots.cpu(), expected.pivots) and torch.equal(info.cpu(), expected.info)
    assert _rel(ld, expected.LD) < 1e-12
    b = torch.randn(6, 2, dtype=dtype)
    solvable = [0, 3]
    x = torch.linalg.ldl_solve(ld[solvable], pivots[solvable], b.to("tpu"), hermitian=hermitian)
    cpu = torch.linalg.ldl_solve(expected.LD[solvable], expected.pivots[solvable], b,
                                 hermitian=hermitian)
    assert _rel(x, cpu) < 1e-12


NAN = float("nan")


@pytest.mark.parametrize("column", [[1, NAN, 3, 2], [NAN, 1, 3, 2], [1, 2, NAN, 5], [0, NAN, 0, 0],
                                    [0.01, 4, NAN, 3]], ids=str)
def test_pivots_of_a_column_with_a_nan_as_lapack(column):
    """A NaN in the first column: the pivot LAPACK chooses, always a row of the matrix (before,
    the pivot was one past the last row, so LU took none and LDL reported n + 1). The CPU's LU
    takes a NaN only as the column's first element and else the largest number after it (the
    reference BLAS's idamax); its LDL takes the first NaN below the diagonal (MAX(x, NaN) is NaN,
    MAX(NaN, x) x) and pivots past a NaN on the diagonal. After the first step the matrix holds
    NaNs, and only its first pivot is compared."""
    a = torch.eye(4, dtype=torch.float64) * 0.5
    a[:, 0] = torch.tensor(column, dtype=torch.float64)
    assert torch.equal(torch.linalg.lu_factor_ex(a.to("tpu")).pivots.cpu()[0],
                       torch.linalg.lu_factor_ex(a).pivots[0])
    a[0, 1:] = a[1:, 0]
    a[0, 0] = column[0] or 0.01
    got = torch.linalg.ldl_factor_ex(a.to("tpu")).pivots.cpu()
    assert ((got.abs() >= 1) & (got.abs() <= 4)).all(), got
    assert got[0] == torch.linalg.ldl_factor_ex(a).pivots[0]


def test_noncontiguous_inputs():
    a = _general((6, 6), torch.float64)
    b = torch.randn(6, 6, dtype=torch.float64)
    assert _rel(torch.linalg.solve(a.to("tpu").mT, b.to("tpu")[:, ::2]),
                torch.linalg.solve(a.mT, b[:, ::2])) < 1e-12


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_fft_norms_and_dims(norm):
    x = torch.randn(3, 4, 10, dtype=torch.float64)
    c = torch.randn(3, 4, 6, dtype=torch.complex128)
    xt, ct = x.to("tpu"), c.to("tpu")
    checks = [
        (torch.fft.fft(xt, norm=norm), torch.fft.fft(x, norm=norm)),
        (torch.fft.ifft(ct, dim=0, norm=norm), torch.fft.ifft(c, dim=0, norm=norm)),
        (torch.fft.fftn(ct, dim=(0, 2), norm=norm), torch.fft.fftn(c, dim=(0, 2), norm=norm)),
        (torch.fft.rfft(xt, n=7, dim=1, norm=norm), torch.fft.rfft(x, n=7, dim=1, norm=norm)),
        (torch.fft.rfftn(xt, norm=norm), torch.fft.rfftn(x, norm=norm)),
        (torch.fft.irfft(ct, n=9, norm=norm), torch.fft.irfft(c, n=9, norm=norm)),
        (torch.fft.irfftn(ct, s=(4, 10), norm=norm), torch.fft.irfftn(c, s=(4, 10), norm=norm)),
    ]
    for got, expected in checks:
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert _rel(got, expected) < 1e-12
