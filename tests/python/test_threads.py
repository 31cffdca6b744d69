"""Threads that dispatch tpu ops at the same time: the first calls of a new signature (which run
PyTorch's meta function and fill the kernel's caches) race each other here on purpose. Under
DeferAndFuse they record into one pending program, which one thread runs while the others' tensors
die: a storage dying then must not reach the program being destroyed (it crashed 1 run in 2)."""

import threading

import pytest
import torch

import torchtpu


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_threads_calling_new_signatures_at_once_all_get_their_results(mode):
    with torchtpu.eager_mode(mode):
        check_threads_calling_new_signatures_at_once()


def check_threads_calling_new_signatures_at_once():
    errors, results = [], {}

    def run(barrier, shape, n):
        try:
            x = torch.full(shape, 0.5, device="tpu")
            barrier.wait()  # every thread's first call of these shapes starts together
            results[(shape, n)] = ((x @ x.t()).tanh().sum() + x.mean()).item()
        except Exception as e:  # noqa: BLE001  (a failure in a thread is what this test looks for)
            errors.append(repr(e))

    for k in range(1, 21):
        shape = (k, k + 2)
        barrier = threading.Barrier(4)
        threads = [threading.Thread(target=run, args=(barrier, shape, n)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    for (shape, _), value in results.items():
        x = torch.full(shape, 0.5)
        expected = ((x @ x.t()).tanh().sum() + x.mean()).item()
        assert abs(value - expected) <= 1e-4 * max(1.0, abs(expected))
    assert len(results) == 80
