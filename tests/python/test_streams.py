"""torch.tpu streams and events, with torch.cuda's semantics: distinct streams with a current
stream per thread, events that record the device's launches so far (query, synchronize, device
time), the stream context, record_stream, and the torch.accelerator / torch.Stream / torch.Event
calls that reach the same code."""

import threading
import time

import pytest
import torch
from conftest import run_python

import torchtpu


def long_chain(x, n):
    """n dependent 1024x1024 matmuls: work that keeps the device busy for a while."""
    for _ in range(n):
        x = (x @ x) * 1e-3
    return x


@pytest.fixture(params=["strict", "defer_and_fuse"])
def async_mode(request):
    """The eager modes that launch without waiting (Debug waits after every op)."""
    with torchtpu.eager_mode(request.param):
        yield request.param


@pytest.fixture
def big():
    x = torch.randn(1024, 1024, device="tpu")
    long_chain(x, 1)  # compiled before any timing
    torch.tpu.synchronize()
    return x


def test_current_stream_is_the_default_stream():
    s = torch.tpu.current_stream()
    assert isinstance(s, torch.tpu.Stream) and isinstance(s, torch.Stream)
    assert s == torch.tpu.default_stream() == torch.tpu.default_stream(0)
    assert s.stream_id == 0 and s.device == torch.device("tpu", 0)
    assert s.priority == 0


def test_new_streams_are_distinct_and_keep_their_priority():
    a, b = torch.tpu.Stream(), torch.tpu.Stream(priority=-1)
    assert len({a.stream_id, b.stream_id, 0}) == 3
    assert a != b and a != torch.tpu.default_stream()
    assert (a.priority, b.priority) == (0, -1)
    assert torch.tpu.Stream.priority_range() == (0, -1)
    assert torch.tpu.Stream(priority=-5).priority == -1  # clamped, as CUDA clamps
    assert torch.tpu.Stream(device="tpu:0").device == torch.device("tpu", 0)


def test_stream_context_sets_and_restores_the_current_stream():
    a, b = torch.tpu.Stream(), torch.tpu.Stream()
    with torch.tpu.stream(a):
        assert torch.tpu.current_stream() == a
        assert torch.accelerator.current_stream() == a
        with torch.tpu.stream(b):
            assert torch.tpu.current_stream() == b
        assert torch.tpu.current_stream() == a
        with torch.tpu.stream(None):
            assert torch.tpu.current_stream() == a
    assert torch.tpu.current_stream() == torch.tpu.default_stream()


def test_set_stream_and_accelerator_set_stream():
    a = torch.tpu.Stream()
    try:
        torch.tpu.set_stream(a)
        assert torch.tpu.current_stream() == a
        torch.accelerator.set_stream(torch.tpu.default_stream())
        assert torch.tpu.current_stream().stream_id == 0
        torch.accelerator.set_stream(a)
        assert torch.tpu.current_stream() == a
    finally:
        torch.tpu.set_stream(torch.tpu.default_stream())


def test_current_stream_belongs_to_the_thread():
    a = torch.tpu.Stream()
    seen = []
    with torch.tpu.stream(a):
        t = threading.Thread(target=lambda: seen.append(torch.tpu.current_stream()))
        t.start()
        t.join()
        assert torch.tpu.current_stream() == a
    assert seen == [torch.tpu.default_stream()]


def test_work_on_two_streams_ordered_by_wait_stream(each_eager_mode):
    x = torch.randn(64, 64)
    side = torch.tpu.Stream(priority=-1)
    main = torch.tpu.current_stream()
    xt = x.to("tpu")
    side.wait_stream(main)
    with torch.tpu.stream(side):
        y = long_chain(xt, 3)
        y.add_(1)
    main.wait_stream(side)
    y.record_stream(main)
    z = y * 2
    torch.testing.assert_close(z.cpu(), (long_chain(x, 3) + 1) * 2)


def test_event_query_is_false_while_its_work_runs(async_mode, big):
    done = torch.tpu.Event()
    assert done.query()  # never recorded
    y = long_chain(big, 6)
    done.record()
    assert not done.query()
    assert not torch.tpu.current_stream().query()
    done.synchronize()
    assert done.query()
    torch.tpu.synchronize()
    assert torch.tpu.current_stream().query()
    assert torch.isfinite(y).all()


def test_in_place_work_runs_without_waiting(async_mode, big):
    """An in-place op gives its storage's old buffer to the new contents (donation); letting go
    of that buffer must not wait for the program (on the CPU plugin, destroying it would)."""
    donated = torchtpu.metrics()["donated_buffers"]
    expected = big.cpu()
    for _ in range(6):
        expected = expected @ expected * 1e-3
    for _ in range(6):
        big.addmm_(big, big, beta=0.0, alpha=1e-3)
    done = torch.tpu.current_stream().record_event()
    assert not done.query()
    assert torchtpu.metrics()["donated_buffers"] > donated
    done.synchronize()
    torch.testing.assert_close(big.cpu(), expected, rtol=1e-4, atol=1e-6)


def test_debug_mode_events_are_done_when_recorded(big):
    with torchtpu.eager_mode("debug"):
        long_chain(big, 2)
        assert torch.tpu.current_stream().record_event().query()


def test_event_in_defer_and_fuse_launches_pending_work(big):
    with torchtpu.eager_mode("defer_and_fuse"):
        flushes = torchtpu.metrics()["deferred_flushes"]
        y = long_chain(big, 6)
        e = torch.tpu.current_stream().record_event()
        assert torchtpu.metrics()["deferred_flushes"] == flushes + 1
        assert not e.query()
        e.synchronize()
        assert e.query()
        assert torch.isfinite(y).all()


def test_event_synchronize_waits_for_the_work_before_it_only(async_mode, big):
    first = torch.tpu.Event()
    a = long_chain(big, 2)
    first.record()
    b = long_chain(a, 8)  # depends on a: starts when the first part ends
    first.synchronize()
    assert first.query()
    assert not torch.tpu.current_stream().query()
    torch.tpu.synchronize()
    assert torch.isfinite(b).all()


def test_elapsed_time_is_the_device_time_between_events(async_mode, big):
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    y = long_chain(big, 6)
    end.record()
    end.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1000
    elapsed = start.elapsed_time(end)
    assert 0.5 * wall_ms < elapsed <= wall_ms + 1
    # Two events with nothing between them: no device time.
    a, b = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    a.record()
    b.record()
    b.synchronize()
    assert 0 <= a.elapsed_time(b) < 0.1 * elapsed
    assert torch.isfinite(y).all()


def test_elapsed_time_errors(async_mode, big):
    plain = torch.tpu.Event()
    timed, other = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    timed.record()
    plain.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        timed.elapsed_time(plain)
    with pytest.raises(ValueError, match="recorded"):
        timed.elapsed_time(other)
    y = long_chain(big, 4)
    other.record()
    with pytest.raises(RuntimeError, match="completed"):
        timed.elapsed_time(other)
    torch.tpu.synchronize()
    assert timed.elapsed_time(other) > 0
    assert torch.isfinite(y).all()


def test_event_wait_and_stream_wait_event():
    s = torch.tpu.Stream()
    e = torch.tpu.Event()
    x = torch.ones(4, device="tpu") * 3
    e.record()
    e.wait(s)
    s.wait_event(e)
    e.wait()
    with torch.tpu.stream(s):
        y = x + 1
    assert s.record_event().query() in (True, False)
    s.synchronize()
    assert s.query()
    assert y.cpu().tolist() == [4, 4, 4, 4]


def test_record_stream_runs_on_the_device(fallback_error):
    x = torch.ones(8, device="tpu")
    x.record_stream(torch.tpu.Stream())
    x.record_stream(torch.tpu.current_stream())
    assert x.cpu().tolist() == [1] * 8


def test_torch_stream_event_and_accelerator_api(async_mode, big):
    s = torch.Stream("tpu")
    assert s.device_type == torch.tpu.current_stream().device_type and s.stream_id != 0
    prev = torch.accelerator.current_stream()
    assert prev == torch.tpu.default_stream()
    torch.accelerator.set_stream(s)
    try:
        e = torch.Event("tpu", enable_timing=True)
        e.record()
        y = long_chain(big, 4)
        f = s.record_event(torch.Event("tpu", enable_timing=True))
        assert not f.query()
        torch.accelerator.synchronize()
        assert f.query() and e.elapsed_time(f) > 0
        assert torch.isfinite(y).all()
    finally:
        torch.accelerator.set_stream(prev)


def test_misuse_raises_as_cuda_does():
    with pytest.raises(RuntimeError, match="invalid device index 3"):
        torch.tpu.Stream(device=3)
    with pytest.raises(ValueError, match="Expected a tpu device"):
        torch.tpu.Stream(device="cpu")
    bogus = torch.Stream(stream_id=1 << 40, device_index=0,
                         device_type=torch.tpu.current_stream().device_type)
    with pytest.raises(RuntimeError, match="invalid tpu stream id"):
        torch.tpu.set_stream(bogus)
    with pytest.raises(RuntimeError, match="invalid tpu stream id"):
        torch.tpu.Event().record(bogus)
    with pytest.raises(NotImplementedError):
        torch.tpu.Event(interprocess=True)


def test_streams_and_events_of_two_devices():
    r = run_python("""
        import pytest, torch, torchtpu
        s0, s1 = torch.tpu.Stream(0), torch.tpu.Stream(1)
        assert s1.device == torch.device("tpu", 1) and s0.stream_id != s1.stream_id
        with torch.tpu.stream(s1):
            assert torch.tpu.current_device() == 1
            assert torch.tpu.current_stream() == s1
            assert torch.tpu.current_stream(0) == torch.tpu.default_stream(0)
            y = torch.ones(3, device="tpu") + 1
        assert torch.tpu.current_device() == 0 and torch.tpu.current_stream(1).stream_id == 0
        assert y.device == torch.device("tpu", 1)
        e = torch.tpu.Event()
        e.record(s0)
        with pytest.raises(RuntimeError, match="does not match recording stream's device"):
            e.record(s1)
        e.wait(s1)  # waiting across devices is allowed, as on CUDA
        s1.synchronize()
        assert y.cpu().tolist() == [2, 2, 2]
        print("ok")
    """, TORCHTPU_NUM_DEVICES="2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok")
