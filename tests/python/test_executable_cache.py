"""The in-process executable cache: one compile per program structure (Strict mode)."""

import pytest
import torch
from conftest import run_python

import torchtpu

pytestmark = pytest.mark.usefixtures("strict_mode")


def compiled():
    return torchtpu.metrics()["executables_compiled"]


def test_repeated_op_compiles_once():
    x = torch.randn(8, 8).to("tpu")
    y = torch.randn(8, 8).to("tpu")
    x + y
    before = torchtpu.metrics()
    for _ in range(5):
        x + y
    after = torchtpu.metrics()
    assert after["executables_compiled"] == before["executables_compiled"]
    assert after["executable_cache_hits"] == before["executable_cache_hits"] + 5


def test_scalar_values_do_not_recompile():
    x = torch.randn(16).to("tpu")
    x * 0.5
    start = compiled()
    results = [(x * s).cpu() for s in [0.25, 0.125, 3.0, -1.0]]
    assert compiled() == start  # a learning-rate-like scalar is an argument, not a constant
    for r, s in zip(results, [0.25, 0.125, 3.0, -1.0]):
        torch.testing.assert_close(r, x.cpu() * s)


def test_new_shapes_and_dtypes_are_new_programs():
    start = torchtpu.metrics()["executable_cache_misses"]
    torch.ones(7, device="tpu") + torch.ones(7, device="tpu")
    torch.ones(7, dtype=torch.float64, device="tpu") * 2
    assert torchtpu.metrics()["executable_cache_misses"] >= start + 2


FILLS = [(torch.float32, 0.0), (torch.float32, -2.5), (torch.float64, float("nan")),
         (torch.float16, float("-inf")), (torch.bfloat16, 1.5), (torch.int64, -7),
         (torch.uint8, 255), (torch.bool, True), (torch.complex64, 1 - 2j)]


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
def test_fills_of_varying_shapes_compile_two_programs_then_none(mode):
    """A fill of a new storage that runs by itself (torch.full, zeros, ones; the zeros autograd
    makes for an unused output) compiles for the first two shapes of its element type and rank;
    from the third shape on it is made on the host, so a loop over sizes compiles nothing."""
    with torchtpu.eager_mode(mode):
        for dtype, value in FILLS:
            start, host = compiled(), torchtpu.metrics()["host_fills"]
            for n in range(8):
                got = torch.full((n, 3), value, dtype=dtype, device="tpu").cpu()
                torch.testing.assert_close(got, torch.full((n, 3), value, dtype=dtype),
                                           equal_nan=True, rtol=0, atol=0)
            assert compiled() - start <= 2, dtype
            # n = 0 has no contents to make; at most two of the others compiled
            assert torchtpu.metrics()["host_fills"] - host >= 5, dtype


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_fill_made_on_the_host_behaves_as_any_contents(mode):
    """Written in place, through views, read back, and filled again: as on the CPU."""
    with torchtpu.eager_mode(mode):
        for n in range(2, 10):
            want = torch.zeros(n, 4)
            got = torch.zeros(n, 4, device="tpu")
            for t in (want, got):
                t.add_(1)
                t[1:].mul_(3)
                t.t()[2].fill_(-1)
            torch.testing.assert_close(got.cpu(), want)
            ones = torch.ones(n, device="tpu", dtype=torch.int32)
            torch.testing.assert_close((ones.cumsum(0) * ones).cpu(), torch.arange(1, n + 1))
            part = torch.empty(n, device="tpu")
            part[: n // 2].fill_(2)  # not the whole storage: a program, as before
            torch.testing.assert_close(part[: n // 2].cpu(), torch.full((n // 2,), 2.0))
            x = torch.randn(n).to("tpu")
            x.fill_(5)  # a storage with contents
            torch.testing.assert_close(x.cpu(), torch.full((n,), 5.0))


def _max_mappings():
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


@pytest.mark.skipif(not (_max_mappings() or 0) or _max_mappings() > 300_000,
                    reason="needs /proc/sys/vm/max_map_count, at most 300,000")
def test_a_compile_near_the_mappings_cap_raises_instead_of_aborting():
    """With the process's memory mappings near vm.max_map_count (here taken by the test), a
    compile would abort the process inside the plugin: it raises a RuntimeError instead, after
    dropping older cached programs, and the process goes on."""
    r = run_python("""
        import ctypes, torch, torchtpu
        torchtpu.set_eager_mode("strict")
        x = torch.ones(64, device="tpu")
        libc = ctypes.CDLL(None)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        most = int(open("/proc/sys/vm/max_map_count").read())
        for i in range(most * 93 // 100):  # protections alternate, so they do not merge
            libc.mmap(None, 4096, 1 if i % 2 else 3, 0x22, -1, 0)
        raised = None
        for n in range(1, 40):
            try:
                (x[:n] * 3).cpu()
            except RuntimeError as e:
                raised = str(e)
                break
        print("raised" if raised and "memory mappings" in raised else f"not raised: {raised}")
        print((x[:5] * 3).tolist())  # the process goes on
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.split("\n")
    assert lines[0] == "raised", r.stdout
    assert lines[1] == "[3.0, 3.0, 3.0, 3.0, 3.0]", r.stdout
