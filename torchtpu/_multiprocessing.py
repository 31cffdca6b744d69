"""tpu tensors sent to another process (torch.multiprocessing's queues, a spawned process's
arguments).

CUDA shares a tensor's memory with the receiving process; a tpu storage's buffers belong to this
process's PJRT client, which no other process can reach. torch.multiprocessing would try to share
the storage as host memory and fail with "_share_fd_: only available on CPU"; this says what to do
instead. (A copy by value would break the sharing that code written for CUDA relies on, such as
Hogwild training, silently.)
"""

from __future__ import annotations

from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions


def _reduce_storage(storage):
    if storage.device.type == "tpu":
        raise RuntimeError(
            "torchtpu: a tpu tensor cannot be shared with another process (its memory belongs to "
            "this process's device client); send tensor.cpu() and move it to tpu in the receiver")
    return reductions.reduce_storage(storage)


def install() -> None:
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
