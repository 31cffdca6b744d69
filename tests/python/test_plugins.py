"""Choosing and loading the PJRT plugin, and the errors a user sees when that fails."""

import os

import pytest

from conftest import BUILD_DIR, run_python

PROBE = """
import torch
try:
    torch.ones(1, device="tpu")
    print("ok", torch.tpu.get_device_name())
except Exception as e:
    print(type(e).__name__ + ":", e)
print("count", torch.tpu.device_count(), torch.tpu.is_available())
"""


def probe(**env):
    r = run_python(PROBE, **env)
    assert r.returncode == 0, r.stderr  # never a crash
    return r.stdout


def test_explicit_plugin_path_wins():
    import torchtpu

    out = probe(TORCHTPU_PJRT_PLUGIN=torchtpu.plugin()["path"], TORCHTPU_PLATFORM="tpu")
    assert "ok XLA CPU (PJRT 0.81)" in out


def test_bad_plugin_path_is_one_clear_error():
    out = probe(TORCHTPU_PJRT_PLUGIN="/no/such/plugin.so")
    assert "RuntimeError: torchtpu: cannot load the PJRT plugin '/no/such/plugin.so'" in out
    assert "pip install xla-cpu-pjrt==0.0.1" in out
    assert "count 0 False" in out  # device_count never throws


def test_plugin_with_a_newer_major_version_is_refused():
    out = probe(TORCHTPU_PJRT_PLUGIN=os.path.join(BUILD_DIR, "libfake_pjrt_major.so"))
    assert "implements PJRT C API 1.0, whose major version differs from the 0.81" in out
    assert "count 0 False" in out


def test_plugin_too_new_for_the_header_names_the_refused_struct():
    out = probe(TORCHTPU_PJRT_PLUGIN=os.path.join(BUILD_DIR, "libfake_pjrt_minor.so"))
    assert "torchtpu was built against PJRT C API 0.81, older than the plugin's 0.115" in out
    assert "refused PJRT_Client_Create" in out


def test_unknown_platform_is_a_clear_error():
    out = probe(TORCHTPU_PLATFORM="quantum")
    assert "TORCHTPU_PLATFORM must be one of auto, cpu, cuda, tpu, not 'quantum'" in out


def test_platform_without_an_installed_plugin_says_what_to_install():
    out = probe(TORCHTPU_PLATFORM="tpu")
    assert "no PJRT plugin found for TORCHTPU_PLATFORM=tpu" in out
    assert "pip install libtpu" in out


@pytest.mark.parametrize("value", ["0", "two"])
def test_bad_num_devices_is_rejected(value):
    out = probe(TORCHTPU_NUM_DEVICES=value)
    assert "TORCHTPU_NUM_DEVICES must be a positive integer, not" in out
    assert "count 0 False" in out


def test_absurd_num_devices_is_refused_not_waited_for():
    out = probe(TORCHTPU_NUM_DEVICES="100000")
    assert "TORCHTPU_NUM_DEVICES must be at most 128 (PyTorch numbers devices with an int8), " \
           "not '100000'" in out
    assert "count 0 False" in out


def test_auto_picks_the_cpu_plugin_here():
    out = probe(TORCHTPU_PLATFORM="auto", TORCHTPU_PJRT_PLUGIN=None)
    assert "ok XLA CPU (PJRT 0.81)" in out
