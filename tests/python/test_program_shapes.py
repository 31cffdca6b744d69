"""A tensor updated in place, then read by ops that XLA's CPU backend hands to its libraries (XNNPACK
dots, convolutions): every read sees the new values, in each eager mode and compiled.

An in-place update gives the tensor's old buffer to its new contents (donation), so the next
program gets an argument at the same address with other bytes. Programs used to take a storage
read whole as a parameter in the view's shape; XLA's CPU backend then fed that parameter straight
to an XNNPACK dot, which reused what it had prepared from the old contents at that address:
`x @ w` after `w.mul_(0.9)` was off by 10 (1024x512 @ 512x128), silently, in the default mode.
Parameters are flat storage buffers again; these cases keep it so."""

import pytest
import torch
import torch.nn.functional as F

import torchtpu

MODES = ["strict", "debug", "defer_and_fuse", "compile"]


def _matmul(x, w):  # w the right-hand side as it is
    return x @ w


def _linear_backward(x, w):  # the input's gradient reads w whole: dX = dY @ W
    x = x.detach().requires_grad_()
    (F.linear(x, w.t()) ** 2).sum().backward()
    return x.grad


def _bmm(x, w):
    return torch.bmm(x.view(4, 256, 512), w.expand(4, 512, 128))


def _conv(x, w):
    return F.conv2d(x[:32].reshape(8, 4, 32, 16), w.reshape(128, 4, 8, 16))  # w whole


CASES = {"matmul": _matmul, "linear_backward": _linear_backward, "bmm": _bmm, "conv2d": _conv}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_reads_after_an_in_place_update_see_the_new_values(case, mode):
    torch.manual_seed(0)
    x_cpu, w_cpu = torch.randn(1024, 512), torch.randn(512, 128)
    fn = CASES[case]
    run = torch.compile(fn, backend="tpu") if mode == "compile" else fn
    with torchtpu.eager_mode("strict" if mode == "compile" else mode):
        x, w = x_cpu.to("tpu"), w_cpu.to("tpu")
        donated = torchtpu.metrics()["donated_buffers"]
        for step in range(3):
            got = run(x, w).cpu()
            torch.testing.assert_close(got, fn(x_cpu, w_cpu), rtol=1e-4, atol=1e-3,
                                       msg=lambda m: f"step {step}: {m}")
            w.mul_(0.9)  # in place: the same buffer, new contents
            w_cpu.mul_(0.9)
        torch.tpu.synchronize()
    assert torchtpu.metrics()["donated_buffers"] > donated  # the updates reused the buffer
