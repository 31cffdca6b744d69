"""torch.tpu streams and events, shaped like torch.cuda's (torch/cuda/streams.py).

PJRT gives one queue per device and orders its work by data dependencies, so streams are names
for shares of that queue (distinct ids, a priority, a current stream per thread and device) and
work on two streams is always ordered as `wait_stream` would order it. An event records the
device's launches so far (pending DeferAndFuse work is launched first): `query()` is False while
they run, `synchronize()` waits for them, and `elapsed_time` is the device time between two
events (csrc/aten/TpuStream.h, TpuEvent.h).
"""

from __future__ import annotations

from typing import Any

import torch

from . import _C
from . import device_module as _device_module

# The priorities a stream can have, lowest first, as torch.cuda.Stream.priority_range() gives
# them (csrc/aten/TpuStream.h).
_PRIORITY_RANGE = (0, -1)


def _index(device: Any) -> int:
    return _device_module._index(device)


class Stream(torch.Stream):
    """A tpu stream, like torch.cuda.Stream: `Stream(device=None, priority=0)`; a negative
    priority makes a high-priority stream."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs and "device_index" in kwargs:
            return super().__new__(cls, priority=priority, **kwargs)
        return super().__new__(cls, device=torch.device("tpu", _index(device)), priority=priority)

    @property
    def priority(self) -> int:
        return _PRIORITY_RANGE[1] if self.stream_id & 1 else _PRIORITY_RANGE[0]

    @staticmethod
    def priority_range() -> tuple:
        return _PRIORITY_RANGE

    def wait_event(self, event: torch.Event) -> None:
        """Makes future work on this stream wait for `event` (without waiting now)."""
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Makes future work on this stream wait for the work submitted to `stream` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: torch.Event | None = None) -> torch.Event:
        """Records `event` (a new Event if None) on this stream and returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __repr__(self) -> str:
        return f"<torch.tpu.Stream device={self.device} stream_id={self.stream_id}>"


class Event(torch.Event):
    """A tpu event, like torch.cuda.Event: `Event(enable_timing=False, blocking=False,
    interprocess=False)`."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False):
        if interprocess:
            raise NotImplementedError("torchtpu: interprocess events are not supported")
        return super().__new__(cls, device="tpu", enable_timing=enable_timing, blocking=blocking)

    def record(self, stream: torch.Stream | None = None) -> None:
        """Records the work submitted so far (to the current stream if `stream` is None)."""
        super().record(current_stream() if stream is None else stream)

    def wait(self, stream: torch.Stream | None = None) -> None:
        """Makes future work on `stream` (the current stream if None) wait for this event."""
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds of device time from this event to `end_event`; both must be done."""
        return _C._event_elapsed_time(self, end_event)

    def __repr__(self) -> str:
        return f"<torch.tpu.Event {'recorded' if self.event_id else 'uninitialized'}>"


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                  device_type=stream.device_type)


def current_stream(device: Any = None) -> Stream:
    """The current stream of `device` (the current device if None) on this thread."""
    return _wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device: Any = None) -> Stream:
    """The default stream of `device` (the current device if None)."""
    current = torch.accelerator.current_stream(_index(device))
    return Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def set_stream(stream: torch.Stream | None) -> None:
    """Makes `stream` current on this thread, and its device the current device, as
    torch.cuda.set_stream does. None does nothing."""
    if stream is None:
        return
    if stream.device.type != "tpu":
        raise ValueError(f"Expected a tpu stream, but got a stream on {stream.device}")
    _device_module.set_device(stream.device_index)
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` current (and its device current) inside a `with` block, like
    torch.cuda.StreamContext; the previous streams come back on exit. None does nothing."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.src_prev_stream: Stream | None = None
        self.dst_prev_stream: Stream | None = None

    def __enter__(self):
        cur = self.stream
        if cur is None:
            return None
        self.src_prev_stream = current_stream()
        # Entering a stream of another device also changes the device; that device's current
        # stream comes back on exit too.
        if self.src_prev_stream.device != cur.device:
            self.dst_prev_stream = current_stream(cur.device)
        set_stream(cur)
        return cur

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        if self.dst_prev_stream is not None:
            set_stream(self.dst_prev_stream)
        set_stream(self.src_prev_stream)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """`with torch.tpu.stream(s):` runs the block with `s` as the current stream."""
    return StreamContext(stream)
