"""torch.tpu: the device module, shaped like torch.cuda."""

from __future__ import annotations

import os
from typing import Any

import torch

from . import _C
from .streams import (  # noqa: F401
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)


def _index(device: Any = None) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"Expected a tpu device, but got: {device}")
    return current_device() if device.index is None else device.index


def init() -> None:
    """Starts the PJRT runtime now instead of at the first tpu operation."""
    _C._start()


def is_initialized() -> bool:
    return _C._started()


def __getattr__(name: str) -> Any:
    # `_initialized`, as torch.cuda has it: torch.utils.checkpoint saves and restores a device's
    # generator around a recomputed forward only where its module says it is initialized.
    if name == "_initialized":
        return _C._started()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _is_in_bad_fork() -> bool:
    """True in the child of a fork made after the runtime started: tpu cannot be used there."""
    return _C._is_in_bad_fork()


def device_count() -> int:
    return _C._device_count()


def is_available() -> bool:
    return device_count() > 0


def current_device() -> int:
    return _C._current_device()


def set_device(device: Any) -> None:
    index = _index(device)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that makes `device` current, like torch.cuda.device."""

    def __init__(self, device: Any):
        self.index = _index(device)
        self.previous = -1

    def __enter__(self):
        self.previous = current_device()
        set_device(self.index)

    def __exit__(self, *exc):
        set_device(self.previous)
        return False


def synchronize(device: Any = None) -> None:
    """Waits until all work launched on the device has finished."""
    _C._synchronize(_index(device))


def get_device_name(device: Any = None) -> str:
    _index(device)
    return _C._device_name()


def _optional(attributes: dict, name: str, kind: type, convert=None):
    """A plugin attribute of the expected type, else None (plugins differ in what they report)."""
    value = attributes.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        return None
    return convert(value) if convert else value


class _DeviceProperties:
    def __init__(self, index: int):
        stats = _C._memory_stats(index)
        description = _C._device_description(index)
        self.name = _C._device_name()
        self.platform = _C._platform_name()
        self.platform_version = _C._platform_version()
        self.kind = description["kind"]
        self.pjrt_api_version = _C._pjrt_api_version()
        self.plugin = _C._plugin_path()
        self.total_memory = stats.get("bytes_limit")
        if self.total_memory is None and self.platform == "cpu":
            # The CPU plugin reports no limit; its buffers are host memory. Recipes divide by
            # total_memory (TorchTitan's memory monitor), as they may with CUDA's.
            self.total_memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        # What the plugin says about this device: PJRT ids, strings, and its own attributes.
        self.id = description["id"]
        self.process_index = description["process_index"]
        self.local_hardware_id = description["local_hardware_id"]
        self.debug_string = description["debug_string"]
        self.to_string = description["to_string"]
        self.attributes = description["attributes"]
        # Where the device sits in its slice (TPU plugins report both; None elsewhere).
        self.coords = _optional(self.attributes, "coords", list, tuple)
        self.core_on_chip = _optional(self.attributes, "core_on_chip", int)

    def __repr__(self) -> str:
        return (f"_TpuDeviceProperties(name={self.name!r}, platform={self.platform!r}, "
                f"kind={self.kind!r}, pjrt_api_version={self.pjrt_api_version!r}, "
                f"total_memory={self.total_memory}, id={self.id}, "
                f"process_index={self.process_index}, coords={self.coords}, "
                f"core_on_chip={self.core_on_chip}, attributes={self.attributes!r})")


def get_device_properties(device: Any = None) -> _DeviceProperties:
    index = _index(device)
    if not 0 <= index < device_count():
        raise AssertionError(f"Invalid device id {index}")
    return _DeviceProperties(index)


# Random numbers: one default generator per device, as torch.cuda.default_generators.
class _DefaultGenerators:
    def __getitem__(self, index: int) -> torch.Generator:
        return _C._default_generator(index)

    def __len__(self) -> int:
        return device_count()

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def manual_seed(seed: int) -> None:
    default_generators[current_device()].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for generator in default_generators:
        generator.manual_seed(int(seed))


def seed() -> None:
    default_generators[current_device()].seed()


def seed_all() -> None:
    for generator in default_generators:
        generator.seed()


def initial_seed() -> int:
    return default_generators[current_device()].initial_seed()


def get_rng_state(device: Any = None) -> torch.Tensor:
    return default_generators[_index(device)].get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
    default_generators[_index(device)].set_state(new_state)


def get_rng_state_all() -> list:
    return [g.get_state() for g in default_generators]


def set_rng_state_all(new_states) -> None:
    for generator, state in zip(default_generators, new_states):
        generator.set_state(state)


# Memory: PJRT's allocator statistics where the plugin keeps them, else the bytes held by tpu
# storages (the CPU plugin keeps none); memory_stats()["source"] says which.
def memory_stats(device: Any = None) -> dict:
    """The allocated bytes, and the other keys of torch.cuda.memory_stats that training loops
    read (TorchTitan's memory monitor among them): torchtpu keeps no pool of its own, so active
    and reserved bytes are the allocated ones, and it never retries an allocation."""
    stats = dict(_C._memory_stats(_index(device)))
    current = stats["allocated_bytes.all.current"]
    peak = stats.setdefault("allocated_bytes.all.peak", current)
    for kind in ("active_bytes", "reserved_bytes"):
        stats.setdefault(f"{kind}.all.current", current)
        stats.setdefault(f"{kind}.all.peak", peak)
    stats.setdefault("num_alloc_retries", 0)
    stats.setdefault("num_ooms", 0)
    return stats


def memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Any = None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    """Nothing to release: torchtpu keeps no pool of freed device memory (a storage's PJRT
    buffer is freed with it). Present because scripts written for CUDA call it."""


def get_amp_supported_dtype() -> list:
    return [torch.float16, torch.bfloat16]


from . import amp as _amp  # autocast: bfloat16 by default for "tpu", in every thread

_amp.install()
