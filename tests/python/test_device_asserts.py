"""Index values are checked on the device in every mode, as CUDA's device-side asserts are: an
index out of range raises PyTorch's CPU error (its type, and a message naming the op and the
caller's line) at the next synchronization, and in-range indices, negative ones included where
PyTorch allows them, give CPU's values. torch.tpu.synchronize() waits for every launch."""

import os

import pytest
import torch
import torch.nn.functional as F
from conftest import run_python

import torchtpu

MODES = ["strict", "debug", "defer_and_fuse"]


def _rows(i):  # an index of shape (n, 3) for ops that index dimension 0 of a (4, 3) tensor
    return i.view(-1, 1).expand(-1, 3).contiguous()


# name -> (fn(x, i) on a (4, 3) float tensor x and an index tensor i, index values to try)
CASES = {
    "index_select": (lambda x, i: x.index_select(0, i), [[1, 7], [-1], [1, 3]]),
    "index_select_dim1": (lambda x, i: x.index_select(1, i), [[3], [0, 2]]),
    "gather": (lambda x, i: x.gather(0, _rows(i)), [[1, 7], [-1], [3, 0]]),
    "scatter_value": (lambda x, i: x.clone().scatter_(0, _rows(i), 1.0), [[4], [-2], [0, 3]]),
    "scatter_src": (lambda x, i: x.clone().scatter_(0, _rows(i), torch.ones_like(_rows(i), dtype=x.dtype)),
                    [[9], [2]]),
    "scatter_add": (lambda x, i: x.clone().scatter_add_(0, _rows(i), torch.ones_like(_rows(i), dtype=x.dtype)),
                    [[5, 1], [-1], [1, 1]]),
    "index": (lambda x, i: x[i], [[7], [-5], [-4, 3]]),
    "index_dim1": (lambda x, i: x[:, i], [[3], [-4], [-3, 2]]),
    "index_put": (lambda x, i: x.clone().index_put_((i,), torch.tensor(1.0, device=x.device)),
                  [[4], [-5], [-4, 0]]),
    "index_put_accumulate": (lambda x, i: x.clone().index_put_((i,), torch.tensor(1.0, device=x.device),
                                                               accumulate=True),
                             [[4], [1, 1, -1]]),
    "embedding": (lambda x, i: F.embedding(i, x), [[1, 4], [-1], [0, 3]]),
    "one_hot": (lambda x, i: F.one_hot(i, 4), [[4], [0, 3]]),
    "cross_entropy": (lambda x, i: F.cross_entropy(x[:len(i)], i), [[0, 3], [0, -1], [0, 2]]),
    "cross_entropy_ignored": (lambda x, i: F.cross_entropy(x[:len(i)], i, ignore_index=5),
                              [[0, 5], [0, 6], [-100, 1]]),
    "index_add": (lambda x, i: x.clone().index_add_(0, i, torch.ones(len(i), 3, device=x.device)),
                  [[4], [-1], [2, 2]]),
    "index_add_dim1": (lambda x, i: x.index_add(1, i, torch.ones(4, len(i), device=x.device)),
                       [[3], [0, 2]]),
    "index_copy": (lambda x, i: x.clone().index_copy_(0, i, torch.ones(len(i), 3, device=x.device)),
                   [[4], [-1], [3]]),
    "index_fill": (lambda x, i: x.index_fill(0, i, 2.0), [[4], [-5], [-4, 3]]),
    "index_fill_dim1": (lambda x, i: x.clone().index_fill_(1, i, -1.0), [[3], [-3, 2]]),
    "index_reduce": (lambda x, i: x.index_reduce(0, i, torch.ones(len(i), 3, device=x.device),
                                                 "amax"), [[4], [-1], [0, 0]]),
    "scatter_reduce": (lambda x, i: x.scatter_reduce(0, _rows(i), torch.ones_like(_rows(i),
                                                     dtype=x.dtype), "prod"), [[4], [-1], [3]]),
    "take": (lambda x, i: x.take(i), [[12], [-13], [-12, 11]]),
    "put": (lambda x, i: x.clone().put_(i, torch.ones(len(i), device=x.device)),
            [[12], [-13], [-12, 11]]),
    "put_accumulate": (lambda x, i: x.clone().put_(i, torch.ones(len(i), device=x.device), True),
                       [[12], [5, 5]]),
    "searchsorted_sorter": (lambda x, i: torch.searchsorted(x[0], x[1] - 2, sorter=i),
                            [[0, 1, 3], [0, 1, -1], [0, 1, 2]]),
    # Not an index: the count of true mask elements against the source's size.
    "masked_scatter": (lambda x, i: x.masked_scatter(x > 9, torch.ones(len(i), device=x.device)),
                       [[0], [0, 0], [0, 0, 0]]),
}


def _outcome(fn, device, values, dtype=torch.int64):
    x = torch.arange(12.0).reshape(4, 3).to(device)
    i = torch.tensor(values, dtype=dtype).to(device)
    try:
        return fn(x, i).cpu()
    except (IndexError, RuntimeError) as e:
        return e


def _case_ids():
    return [(name, values) for name, (_, tries) in CASES.items() for values in tries]


@pytest.mark.filterwarnings("ignore:torchtpu.*runs on the CPU")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,values", _case_ids(), ids=lambda v: str(v))
def test_index_values_give_cpus_answer_or_cpus_error(mode, name, values):
    fn = CASES[name][0]
    expected = _outcome(fn, "cpu", values)
    with torchtpu.eager_mode(mode):
        got = _outcome(fn, "tpu", values)
    if isinstance(expected, Exception):
        assert type(got) is type(expected), f"cpu raised {expected!r}, tpu gave {got!r}"
    else:
        assert not isinstance(got, Exception), f"cpu gave {expected}, tpu raised {got!r}"
        torch.testing.assert_close(got, expected)
    torch.arange(3, device="tpu").cpu()  # reported once: the next read is clean


@pytest.mark.parametrize("mode", MODES)
def test_int32_and_non_contiguous_index_tensors_are_checked(mode):
    x = torch.zeros(4, 3, device="tpu")
    with torchtpu.eager_mode(mode):
        with pytest.raises(IndexError, match="index out of range in self"):
            x.index_select(0, torch.tensor([1, 9], dtype=torch.int32, device="tpu")).cpu()
        columns = torch.tensor([[0, 9], [1, 2]], device="tpu").t()  # rows [0, 1] and [9, 2]
        assert not columns[1].is_contiguous()
        with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 4"):
            x[columns[1]].cpu()
        torch.testing.assert_close(x[columns[0]].cpu(), torch.zeros(2, 3))


def test_strict_mode_raises_at_the_next_synchronization_not_at_the_op(strict_mode):
    x = torch.arange(3.0, device="tpu")
    y = x.index_select(0, torch.tensor([0, 5], device="tpu"))  # launched; no wait
    assert y.shape == (2,)
    with pytest.raises(IndexError) as info:
        torch.tpu.synchronize()
    message = str(info.value)
    assert "aten::index_select: index out of range in self (index 5 of dimension 0 with size 3)" in message
    line = test_strict_mode_raises_at_the_next_synchronization_not_at_the_op.__code__.co_firstlineno + 2
    assert f"called at {os.path.abspath(__file__)}:{line}" in message
    assert "raised at the next synchronization" in message
    torch.tpu.synchronize()  # reported once


def test_debug_mode_raises_at_the_op_itself():
    x = torch.arange(3.0, device="tpu")
    with torchtpu.eager_mode("debug"), pytest.raises(RuntimeError,
                                                     match="aten::gather: index 3 is out of bounds"):
        x.gather(0, torch.tensor([3], device="tpu"))  # no read: the op's own wait raises


def test_defer_and_fuse_reports_the_first_failed_check_of_a_fused_program():
    x = torch.arange(3.0, device="tpu")
    with torchtpu.eager_mode("defer_and_fuse"):
        a = x.index_select(0, torch.tensor([4], device="tpu"))
        b = x[torch.tensor([-9], device="tpu")]
        with pytest.raises(IndexError, match="aten::index_select: .*index 4 of dimension 0"):
            (a + b).cpu()
        torch.testing.assert_close(x[torch.tensor([-1], device="tpu")].cpu(), torch.tensor([2.0]))


def test_a_compiled_graph_checks_its_indices_on_every_replay():
    emb = torch.nn.Embedding(10, 4).to("tpu")
    fn = torch.compile(lambda i: emb(i).sum(), backend="tpu")
    good = torch.tensor([1, 2], device="tpu")
    expected = emb.weight.detach().cpu()[[1, 2]].sum()
    torch.testing.assert_close(fn(good).cpu(), expected)
    before = torchtpu.metrics()
    with pytest.raises(IndexError, match="aten::index_select: index out of range in self "
                                         r"\(index 12 of dimension 0 with size 10\)"):
        fn(torch.tensor([1, 12], device="tpu")).cpu()
    torch.testing.assert_close(fn(good).cpu(), expected)
    after = torchtpu.metrics()
    assert after["compiled_replays"] >= before["compiled_replays"] + 2
    assert after["compiled_eager_runs"] == before["compiled_eager_runs"]


def test_index_checks_can_be_turned_off():
    code = """
        import torch, torchtpu
        x = torch.arange(3.0, device="tpu")
        print(x.index_select(0, torch.tensor([0, 5], device="tpu")).tolist())
    """
    r = run_python(code, TORCHTPU_INDEX_CHECKS="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0.0, 2.0]"  # unchecked: XLA clamps
    r = run_python(code, TORCHTPU_INDEX_CHECKS="maybe")
    assert r.returncode != 0 and "IndexError: aten::index_select" in r.stderr
    assert "TORCHTPU_INDEX_CHECKS must be 0 or 1, not 'maybe'; using 1" in r.stderr


def test_synchronize_waits_for_launches_whose_outputs_were_dropped(strict_mode):
    x = torch.randn(256, 256, device="tpu")
    torch.tpu.synchronize()
    assert torchtpu._C._launches_in_flight(0) == 0
    for _ in range(3):
        (x @ x).relu()  # results dropped at once
    assert torchtpu._C._launches_in_flight(0) == 6
    torch.tpu.synchronize()
    assert torchtpu._C._launches_in_flight(0) == 0


# Integer division by zero: the CPU raises RuntimeError("ZeroDivisionError"); CUDA returns what
# its hardware gives (-1, 0xFFFFFFFF for int64, or the dividend: pytorch/pytorch#135330), XLA -1
# or the dividend. A made-up quotient is a silent wrong answer, so tpu raises the CPU's error,
# through a device-side check (a Python scalar 0 raises at the call).
ZERO_DIVISION = {
    "floor_divide": lambda a, b: torch.floor_divide(a, b),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc_": lambda a, b: a.clone().div_(b, rounding_mode="trunc"),
    "remainder": lambda a, b: torch.remainder(a, b),
    "remainder_scalar_self": lambda a, b: torch.remainder(5, b),
    "fmod": lambda a, b: torch.fmod(a, b),
    "floordiv_python_zero": lambda a, b: a // 0,
}


@pytest.mark.parametrize("mode", MODES)
def test_integer_division_by_zero_raises_the_cpus_error(mode):
    a, zero, nonzero = torch.tensor([7, -7, 3]), torch.tensor([2, 0, 1]), torch.tensor([2, -3, 1])
    with torchtpu.eager_mode(mode):
        for name, fn in ZERO_DIVISION.items():
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                fn(a, zero)
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                fn(a.to("tpu"), zero.to("tpu")).cpu()
            if name != "floordiv_python_zero":
                assert torch.equal(fn(a.to("tpu"), nonzero.to("tpu")).cpu(), fn(a, nonzero)), name
        # Floating division by zero is inf, on the CPU and on tpu: no check.
        expected = torch.floor_divide(a.double(), zero)
        torch.testing.assert_close(torch.floor_divide(a.double().to("tpu"), zero.to("tpu")).cpu(),
                                   expected)


@pytest.mark.parametrize("mode", MODES)
def test_assert_async_is_a_device_side_check(mode):
    """torch._assert_async (what torch._check and traced asserts become): the CPU's error and
    message, raised at the next wait as CUDA's device-side assert is, with no CPU fallback."""
    fallbacks = dict(torchtpu.metrics()["cpu_fallbacks"])
    with torchtpu.eager_mode(mode):
        x = torch.tensor(3.0, device="tpu")
        torch._assert_async(x > 1, "x must exceed 1")
        torch._assert_async(x)
        torch.tpu.synchronize()  # both held
        with pytest.raises(RuntimeError, match="x must stay below 1"):
            torch._assert_async(x < 1, "x must stay below 1")
            torch.tpu.synchronize()
        with pytest.raises(RuntimeError, match="Expected Tensor with single nonzero value"):
            torch._assert_async(torch.zeros((), dtype=torch.int64, device="tpu"))
            torch.tpu.synchronize()
        with pytest.raises(RuntimeError, match="Assertion is failed"):
            torch._assert_async(torch.tensor(False, device="tpu"), "")
            torch.tpu.synchronize()
        for bad, message in [(torch.ones(2, device="tpu"), "more than one value"),
                             (torch.ones(0, device="tpu"), "no values")]:
            with pytest.raises(RuntimeError, match=message):  # at the call, as on the CPU
                torch._assert_async(bad)
    assert torchtpu.metrics()["cpu_fallbacks"] == fallbacks


def test_assert_async_does_not_wait(strict_mode):
    x = torch.tensor(0.0, device="tpu")
    torch._assert_async(x, "raised later")  # returns: the check runs on the device
    with pytest.raises(RuntimeError, match="raised later"):
        x.cpu()
