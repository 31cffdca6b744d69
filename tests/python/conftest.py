import os
import subprocess
import sys
import textwrap

import tempfile

import pytest

# A compile cache per test session (shared with the subprocesses it starts), cold unless
# tests/run.py gave the whole run one.
os.environ.setdefault("TORCHTPU_CACHE_DIR", tempfile.mkdtemp(prefix="torchtpu-test-cache-"))

# Small integer ops whose shapes keep changing at a line run on the host (csrc/aten/host_ops.cc):
# a test looping over sizes would then compare PyTorch's CPU kernels with themselves. The suite
# tests the device's programs, with them off (and in the processes it starts); the `host_ops`
# fixture turns them on.
os.environ.setdefault("TORCHTPU_HOST_OPS", "0")

import torch  # noqa: E402

import torchtpu  # noqa: E402, F401  (registers "tpu")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


class OpLog(TorchDispatchMode):
    """Records the name of each ATen op dispatched while it is active ("aten.add.Tensor")."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("TORCHTPU_BUILD_DIR", os.path.join(REPO, "build"))

# The dtypes torch and XLA share (issue scope), with complex on top.
ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool,
              torch.complex64]


def run_python(code: str, **env_overrides) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (plugin choice happens once per process)."""
    env = dict(os.environ)
    for key, value in env_overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=300)


def sample(shape, dtype, seed=0):
    """Deterministic CPU values of `dtype` covering negatives, zeros and fractions."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 4).to(dtype)
    low = 0 if dtype == torch.uint8 else -20
    return torch.randint(low, 20, shape, generator=g).to(dtype)


@pytest.fixture
def fallback_error():
    torchtpu._C._set_cpu_fallback_policy("error")
    yield
    torchtpu._C._set_cpu_fallback_policy("warn")


@pytest.fixture
def host_ops():
    """Small integer work whose shapes keep changing runs on the host, as it does by default."""
    torchtpu._C._set_host_ops(True)
    yield
    torchtpu._C._set_host_ops(os.environ["TORCHTPU_HOST_OPS"] != "0")


@pytest.fixture(params=["strict", "debug", "defer_and_fuse"])
def each_eager_mode(request):
    """Runs the test once in each eager mode (skipped in tests/run.py's jobs of one mode, as its
    job in the default mode runs it in each)."""
    if os.environ.get("TORCHTPU_TESTS_OF_ONE_MODE") == "1":
        pytest.skip("runs in each eager mode in its file's own job")
    with torchtpu.eager_mode(request.param):
        yield request.param


def _outcome(fn, device):
    """("ok", the flattened results on the CPU) or ("raised", the exception type)."""
    from torch.utils._pytree import tree_flatten
    try:
        result = fn(device)
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return "raised", type(e)
    flat = tree_flatten(tuple(result) if isinstance(result, tuple) else result)[0]
    return "ok", [t.cpu() if isinstance(t, torch.Tensor) else t for t in flat]


def assert_same_as_cpu(fn, values=True, floating_only=False):
    """fn(device) on "cpu" and on "tpu": the same exception type where the CPU raises, else the
    same dtypes, shapes and values (NaN equal to NaN, and the sign of each zero). `values=False`
    compares only whether and what it raises; `floating_only` skips integer results (indices of
    ties an op may order as it likes)."""
    expected, got = _outcome(fn, "cpu"), _outcome(fn, "tpu")
    assert expected[0] == got[0], f"cpu: {expected}, tpu: {got}"
    if expected[0] == "raised":
        assert got[1] is expected[1], f"cpu raised {expected[1]}, tpu {got[1]}"
        return
    if not values:
        return
    assert len(got[1]) == len(expected[1])
    for e, g in zip(expected[1], got[1]):
        if not isinstance(e, torch.Tensor):
            assert g == e
            continue
        if floating_only and not e.is_floating_point():
            continue
        assert g.dtype == e.dtype and g.shape == e.shape, (e, g)
        torch.testing.assert_close(g, e, equal_nan=True, rtol=1e-6, atol=1e-6)
        if e.is_floating_point():
            assert torch.equal(torch.signbit(g) & ~g.isnan(), torch.signbit(e) & ~e.isnan()), (e, g)


@pytest.fixture
def strict_mode():
    """For tests of Strict mode's own behaviour (one program per op)."""
    with torchtpu.eager_mode("strict"):
        yield
