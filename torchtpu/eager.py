"""Eager modes: "defer_and_fuse" (default: ops are recorded and run as one fused program at the
next sync point: a read to the host, synchronize, a mode switch), "strict" (each op runs as soon as
it is called), "debug" (Strict, and each op also waits, so an error surfaces at the op that caused
it)."""

from __future__ import annotations

import contextlib

from . import _C, _config

MODES = ("strict", "debug", "defer_and_fuse")


def set_eager_mode(mode: str) -> None:
    """Selects the eager mode for every thread; pending work is flushed first."""
    if mode not in MODES:
        raise ValueError(f"eager mode must be one of {', '.join(MODES)}, not {mode!r}")
    _C._set_eager_mode(MODES.index(mode))


def get_eager_mode() -> str:
    return MODES[_C._eager_mode()]


@contextlib.contextmanager
def eager_mode(mode: str):
    """Runs the block in `mode`, then restores the previous one."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


def _from_environment() -> None:
    set_eager_mode(_config.choice("TORCHTPU_EAGER_MODE", MODES, "defer_and_fuse"))
    _C._set_defer_max_nodes(_config.bounded_int("TORCHTPU_DEFER_MAX_NODES",
                                                _C._defer_max_nodes(), 1, 1_000_000))
