"""Meta kernels for ATen random ops that PyTorch gives none (its CPU and CUDA kernels do without).

FakeTensor runs an op without a meta kernel for real, on zeros on the device, to learn its output's
shape; while torch.compile traces, that drew from the tpu generator, so a compiled call's first
draws differed from eager ones after the same seed."""

import torch

_library = torch.library.Library("aten", "IMPL")


def _sample_dirichlet(self, generator=None):
    return torch.empty_like(self)


def _binomial(count, prob, generator=None):
    return torch.empty(torch.broadcast_shapes(count.shape, prob.shape), dtype=count.dtype,
                       device=count.device)


def install() -> None:
    for name, kernel in (("_sample_dirichlet", _sample_dirichlet), ("binomial", _binomial)):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta"):
            _library.impl(name, kernel, "Meta")
