"""torch.tpu, torch.accelerator and the generated Tensor/Module methods."""

import os

import pytest
import torch

import torchtpu
from conftest import run_python


def test_tensors_on_tpu_are_plain_tensors():
    x = torch.arange(6.0).reshape(2, 3).to("tpu")
    assert type(x) is torch.Tensor
    assert x.device == torch.device("tpu", 0)
    assert x.is_tpu


def test_device_count_and_name_come_from_the_plugin():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() == 1  # one device per process by default
    assert torch.tpu.get_device_name() == "XLA CPU (PJRT 0.81)"
    props = torch.tpu.get_device_properties(0)
    assert props.platform == "cpu"
    assert props.pjrt_api_version == "0.81"
    assert torchtpu.plugin()["path"].endswith("xla_cpu_pjrt.so")
    # The CPU plugin reports no memory limit: its device memory is the host's.
    assert props.total_memory == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_device_properties_show_what_the_plugin_reports():
    props = torch.tpu.get_device_properties(0)
    described = torchtpu._C._device_description(0)
    assert props.id == described["id"] == 0
    assert props.process_index == 0  # one process, one client
    assert props.kind == described["kind"] != ""
    assert props.debug_string and props.to_string
    assert isinstance(props.local_hardware_id, (int, type(None)))
    assert isinstance(props.attributes, dict) and props.attributes == described["attributes"]
    for name, value in props.attributes.items():
        assert isinstance(name, str) and isinstance(value, (str, int, float, bool, list)), name
    # The CPU plugin reports no place in a slice.
    expected = props.attributes.get("coords")
    assert props.coords == (tuple(expected) if expected is not None else None)
    assert props.core_on_chip == props.attributes.get("core_on_chip")
    assert f"coords={props.coords}" in repr(props)


def test_device_properties_read_a_tpu_plugins_place(monkeypatch):
    described = dict(torchtpu._C._device_description(0))
    described["attributes"] = {"coords": [1, 0, 2], "core_on_chip": 1, "num_cores": 2}
    monkeypatch.setattr(torchtpu._C, "_device_description", lambda index: described)
    props = torch.tpu.get_device_properties(0)
    assert props.coords == (1, 0, 2) and props.core_on_chip == 1
    assert props.attributes["num_cores"] == 2
    # An attribute of another type than TPU plugins use is shown but not read as a place.
    described["attributes"] = {"coords": "1,0,2", "core_on_chip": True}
    props = torch.tpu.get_device_properties(0)
    assert props.coords is None and props.core_on_chip is None
    assert props.attributes["coords"] == "1,0,2"


def test_empty_cache_keeps_live_tensors():
    x = torch.arange(6.0, device="tpu")
    before = torch.tpu.memory_allocated()
    torch.tpu.empty_cache()
    assert torch.tpu.memory_allocated() == before
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_current_device_and_set_device():
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device("tpu:0")
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device index 3"):
        torch.tpu.set_device(3)


def test_accelerator_api_sees_tpu():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("tpu")
    assert torch.accelerator.device_count() == 1
    assert torch.accelerator.current_device_index() == 0
    x = torch.ones(3, device="tpu") * 2
    torch.accelerator.synchronize()
    torch.tpu.synchronize()
    assert x.cpu().tolist() == [2, 2, 2]


def test_generated_tensor_and_module_methods():
    t = torch.ones(2).tpu()
    assert t.device.type == "tpu"
    m = torch.nn.Linear(2, 3).tpu()
    assert all(p.device.type == "tpu" for p in m.parameters())
    assert torch.equal(m.weight.cpu(), m.weight.cpu())


def test_manual_seed_reaches_the_tpu_generator():
    torch.manual_seed(1234)
    assert torch.tpu.initial_seed() == 1234
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    torch.tpu.manual_seed(7)
    assert torch.tpu.initial_seed() == 7
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 1234
    g = torch.Generator(device="tpu")
    g.manual_seed(5)
    assert g.initial_seed() == 5 and g.device == torch.device("tpu", 0)


def test_initialized_says_whether_the_runtime_started():
    code = ("import torch, torchtpu; print(torch.tpu._initialized); "
            "torch.ones(1, device='tpu'); print(torch.tpu._initialized)")
    assert run_python(code).stdout.split() == ["False", "True"]


# Activation checkpointing recomputes the forward in the backward with the device generator
# restored (torch.utils.checkpoint reads the device module's `_initialized`), so dropout draws the
# forward's mask again: the gradients are those of the model without checkpointing. Without it,
# the recompute had drawn new masks: silently wrong gradients.
@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_recomputes_dropout_with_the_forwards_mask(reentrant, each_eager_mode):
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5),
                                torch.nn.Linear(8, 1)).to("tpu")
    x = torch.randn(4, 8, device="tpu", requires_grad=True)
    grads = []
    for run in (model, lambda t: checkpoint(model, t, use_reentrant=reentrant)):
        model.zero_grad()
        torch.manual_seed(1)
        run(x).sum().backward()
        grads.append([p.grad.cpu() for p in model.parameters()])
    assert any((g != 0).any() and (g == 0).any() for g in grads[0])  # dropout dropped some
    for plain, recomputed in zip(*grads):
        torch.testing.assert_close(recomputed, plain)


@pytest.mark.usefixtures("strict_mode")
def test_memory_allocated_counts_written_storages():
    before = torch.tpu.memory_allocated()
    x = torch.ones(1024, device="tpu")  # 4 KiB once written
    assert torch.tpu.memory_allocated() == before + 4096
    assert torch.tpu.max_memory_allocated() >= before + 4096
    assert torch.tpu.memory_stats()["source"] == "torchtpu"  # the CPU plugin keeps none
    del x
    assert torch.tpu.memory_allocated() == before
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == before


@pytest.mark.usefixtures("strict_mode")
def test_memory_stats_has_the_keys_cuda_training_loops_read():
    x = torch.ones(1024, device="tpu")
    stats = torch.tpu.memory_stats()
    for key in ("active_bytes.all.current", "active_bytes.all.peak", "reserved_bytes.all.current",
                "reserved_bytes.all.peak"):
        assert stats[key] >= 4096, key
    assert stats["num_alloc_retries"] == 0 and stats["num_ooms"] == 0
    assert torch.tpu.memory_reserved() == torch.tpu.memory_allocated()
    assert torch.tpu.max_memory_reserved() >= torch.tpu.memory_reserved()
    del x


def test_import_torch_alone_autoloads_torchtpu():
    r = run_python("""
        import torch
        print(torch.ones(2, device="tpu").add(1).cpu().tolist(), torch.tpu.device_count())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[2.0, 2.0] 1"


def test_autoload_can_be_disabled():
    r = run_python("""
        import torch
        try:
            torch.ones(1, device="tpu")
        except RuntimeError as e:
            print("refused:", e)
    """, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.returncode == 0, r.stderr
    assert "refused" in r.stdout


def test_num_devices_and_copies_between_devices():
    r = run_python("""
        import torch
        print(torch.tpu.device_count())
        a = torch.arange(6.0, device="tpu:0").reshape(2, 3)
        b = a.t().to("tpu:1")
        print(b.device, b.cpu().tolist())
        c = torch.empty(3, 2, dtype=torch.int32, device="tpu:1").copy_(a.t())
        print(c.cpu().tolist())
        with torch.tpu.device(1):
            print(torch.zeros(1, device="tpu").device)
        print([(p.id, p.local_hardware_id) for p in map(torch.tpu.get_device_properties, (0, 1))])
    """, TORCHTPU_NUM_DEVICES="2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "2"
    assert lines[1] == "tpu:1 [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]"
    assert lines[2] == "[[0, 3], [1, 4], [2, 5]]"
    assert lines[3] == "tpu:1"
    ids = eval(lines[4])
    assert [i for i, _ in ids] == [0, 1]  # each "tpu:N" is its own PJRT device
    assert len({hw for _, hw in ids}) == 2
