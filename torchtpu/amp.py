"""Autocast's default dtype for "tpu": bfloat16, in every thread.

PyTorch keeps each device's autocast dtype per thread, and a new thread starts from PyTorch's own
default for PrivateUse1 devices, float16. torch.get_autocast_dtype and torch.set_autocast_dtype
are therefore wrapped: the first time a thread asks about "tpu" without having set a dtype itself,
it gets bfloat16 (and so does a `torch.autocast("tpu")` entered there). The cast policy itself is
C++ (csrc/aten/TpuAutocast.cc).
"""

from __future__ import annotations

import threading

import torch

DEFAULT_DTYPE = torch.bfloat16

_thread = threading.local()
_get_autocast_dtype = torch.get_autocast_dtype
_set_autocast_dtype = torch.set_autocast_dtype


def _is_tpu(device_type) -> bool:
    return str(device_type) == "tpu"


def _settle_thread() -> None:
    """Gives this thread the tpu default unless it has chosen a dtype already."""
    if not getattr(_thread, "settled", False):
        _thread.settled = True
        _set_autocast_dtype("tpu", DEFAULT_DTYPE)


def get_autocast_dtype(device_type):
    if _is_tpu(device_type):
        _settle_thread()
    return _get_autocast_dtype(device_type)


def set_autocast_dtype(device_type, dtype):
    if _is_tpu(device_type):
        _thread.settled = True
    return _set_autocast_dtype(device_type, dtype)


get_autocast_dtype.__doc__ = _get_autocast_dtype.__doc__
set_autocast_dtype.__doc__ = _set_autocast_dtype.__doc__


def install() -> None:
    torch.get_autocast_dtype = get_autocast_dtype
    torch.set_autocast_dtype = set_autocast_dtype
    _settle_thread()
