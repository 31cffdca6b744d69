"""torch.profiler with ProfilerActivity.PrivateUse1: device time per op, compiles, copies,
DeferAndFuse flushes, record_function ranges on the device, and the exported Chrome trace."""

import itertools
import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

import torchtpu

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]

# Each test that needs a compile uses shapes no other test used, so its programs miss the cache.
_fresh = itertools.count(101)


@pytest.fixture(autouse=True)
def strict_mode():
    """Names and counts below are Strict's (one program per op) unless a test says otherwise."""
    with torchtpu.eager_mode("strict"):
        yield


def fresh_size():
    return next(_fresh)


def device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def names(events):
    return [e.name for e in events]


def row(prof, name):
    rows = [r for r in prof.key_averages() if r.key == name]
    assert rows, f"{name} not in {[r.key for r in prof.key_averages()]}"
    return rows[0]


def test_privateuse1_is_a_supported_activity():
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()


def test_each_op_has_device_time():
    x = torch.randn(64, 64).to("tpu")
    x + x  # compiled before the profile
    (x * x).sum()
    torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        y = x + x
        z = (y * x).sum()
        torch.tpu.synchronize()
    for op in ["aten::add", "aten::mul", "aten::sum"]:
        r = row(prof, op)
        assert r.device_time_total > 0, op
        assert r.self_device_time_total > 0, op
    programs = [e for e in device_events(prof) if e.name.startswith("program ")]
    assert set(names(programs)) == {"program aten::add", "program aten::mul", "program aten::sum"}
    assert all(e.time_range.elapsed_us() > 0 for e in programs)
    del z


def test_compile_is_a_range_on_first_run_only():
    n = fresh_size()
    x = torch.randn(n, 3).to("tpu")
    with profile(activities=ACTIVITIES) as first:
        torch.tanh(x)
        torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as second:
        torch.tanh(x)
        torch.tpu.synchronize()
    compiles = [e for e in first.events() if e.name == "compile"]
    assert len(compiles) == 1
    assert compiles[0].device_type == DeviceType.CPU
    assert compiles[0].time_range.elapsed_us() > 0
    # It runs inside the op that needed it.
    tanh = next(e for e in first.events() if e.name == "aten::tanh")
    assert tanh.time_range.start <= compiles[0].time_range.start
    assert compiles[0].time_range.end <= tanh.time_range.end
    assert "compile" not in names(second.events())
    assert row(second, "aten::tanh").device_time_total > 0


def test_copies_show_up():
    host = torch.randn(1000)
    with profile(activities=ACTIVITIES) as prof:
        x = host.to("tpu")
        back = x.cpu()
    events = device_events(prof)
    assert "copy host to device" in names(events)
    assert "copy device to host" in names(events)
    assert row(prof, "aten::_to_copy").device_time_total > 0
    assert torch.equal(back, host)


def test_defer_and_fuse_flush_is_a_range_with_its_node_count():
    n = fresh_size()
    x = torch.randn(n).to("tpu")
    with torchtpu.eager_mode("defer_and_fuse"), profile(activities=ACTIVITIES) as prof:
        y = (x + 1) * 2 - x
        y.cpu()
    flushes = [e for e in prof.events() if e.name.startswith("DeferAndFuse flush (")]
    assert len(flushes) == 1
    nodes = int(flushes[0].name.split("(")[1].split()[0])
    assert nodes >= 3  # the three ops at least
    fused = [e for e in device_events(prof) if e.name == f"fused program ({nodes} nodes)"]
    assert len(fused) == 1 and fused[0].time_range.elapsed_us() > 0
    assert "compile" in names(prof.events())  # a new program: compiled inside the flush
    # Deferred ops launch nothing of their own.
    assert not [e for e in device_events(prof) if e.name == "program aten::add"]


def test_cpu_only_profile_records_no_device_events():
    x = torch.randn(8).to("tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x + x).cpu()
    assert device_events(prof) == []
    assert "aten::add" in names(prof.events())


def chrome_trace(prof, tmp_path):
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        return json.load(f)["traceEvents"]


def test_chrome_trace_has_the_device_on_its_own_track(tmp_path):
    x = torch.randn(32).to("tpu")
    x.sin()
    torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        x.sin().cpu()
    events = chrome_trace(prof, tmp_path)
    cpu_op = next(e for e in events if e.get("name") == "aten::sin" and e.get("ph") == "X")
    kernel = next(e for e in events if e.get("name") == "program aten::sin")
    assert kernel["ph"] == "X" and kernel["dur"] > 0
    assert kernel["pid"] != cpu_op["pid"]
    process_names = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    assert process_names[kernel["pid"]] == "tpu:0"
    # The device event is linked to the op that launched it.
    assert kernel["args"]["External id"] == cpu_op["args"]["External id"]
    copies = [e for e in events if e.get("name") == "copy device to host"]
    assert copies and copies[0]["pid"] == kernel["pid"] and copies[0]["tid"] != kernel["tid"]


def test_record_function_encloses_its_device_work(tmp_path):
    x = torch.randn(16, 16).to("tpu")
    (x @ x).relu()
    torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        with record_function("my_block"):
            y = (x @ x).relu()
        z = y + 1
        torch.tpu.synchronize()
    events = chrome_trace(prof, tmp_path)
    block = [
        e for e in events if e.get("name") == "my_block" and e.get("cat") == "gpu_user_annotation"
    ]
    assert len(block) == 1
    start, end = block[0]["ts"], block[0]["ts"] + block[0]["dur"]
    inside = [e for e in events if e.get("name") in ("program aten::mm", "program aten::relu")]
    assert len(inside) == 2
    for e in inside:
        assert e["pid"] == block[0]["pid"]
        assert start <= e["ts"] and e["ts"] + e["dur"] <= end
    after = next(e for e in events if e.get("name") == "program aten::add")
    assert after["ts"] >= end
    # And on the host, the range encloses the ops.
    host = next(
        e for e in events if e.get("name") == "my_block" and e.get("cat") == "user_annotation"
    )
    mm = next(e for e in events if e.get("name") == "aten::mm" and e.get("ph") == "X")
    assert host["ts"] <= mm["ts"] and mm["ts"] + mm["dur"] <= host["ts"] + host["dur"]
    del z


def test_profiles_do_not_leak_into_each_other():
    x = torch.randn(8).to("tpu")
    with profile(activities=ACTIVITIES) as first:
        (x + x).cpu()
    with profile(activities=ACTIVITIES) as second:
        (x - x).cpu()
    assert "program aten::add" in names(device_events(first))
    assert "program aten::add" not in names(device_events(second))
    assert "program aten::sub" in names(device_events(second))


@pytest.mark.parametrize("mode", ["debug"])
def test_debug_mode_ops_have_device_time(mode):
    x = torch.randn(8).to("tpu")
    with torchtpu.eager_mode(mode):
        x.exp()
        with profile(activities=ACTIVITIES) as prof:
            x.exp()
    assert row(prof, "aten::exp").device_time_total > 0


def test_nested_record_functions_each_enclose_their_device_work(tmp_path):
    x = torch.randn(8).to("tpu")
    x.exp(), x.cos()
    torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        with record_function("outer"):
            with record_function("inner"):
                x.exp()
            x.cos()
        torch.tpu.synchronize()
    events = chrome_trace(prof, tmp_path)

    def device_span(name):
        (e,) = [
            e for e in events if e.get("name") == name and e.get("cat") == "gpu_user_annotation"
        ]
        return e["ts"], e["ts"] + e["dur"]

    def program(name):
        e = next(e for e in events if e.get("name") == name)
        return e["ts"], e["ts"] + e["dur"]

    outer, inner = device_span("outer"), device_span("inner")
    exp, cos = program("program aten::exp"), program("program aten::cos")
    assert outer[0] <= exp[0] and cos[1] <= outer[1]
    assert inner[0] <= exp[0] and exp[1] <= inner[1]
    assert inner[1] <= cos[1] and not (inner[0] <= cos[0] and cos[1] <= inner[1])


def test_backward_ops_on_the_autograd_thread_have_device_time():
    w = torch.randn(16, 16).to("tpu").requires_grad_()
    x = torch.randn(4, 16).to("tpu")
    (x @ w).sum().backward()
    torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        (x @ w).sum().backward()
        torch.tpu.synchronize()
    backward = [e for e in prof.events() if e.name == "MmBackward0"]
    assert backward
    mm = [e for e in prof.events() if e.name == "aten::mm" and e.thread == backward[0].thread]
    assert mm and sum(e.device_time_total for e in mm) > 0
    assert mm[0].thread != next(e for e in prof.events() if e.name == "aten::sum").thread
