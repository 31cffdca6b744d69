"""TORCHTPU_* settings read at import: a bad value warns and the default is used, since
`import torch` itself loads torchtpu and must never fail."""

import pytest

from conftest import run_python
from torchtpu import _config


def test_choice_takes_a_known_value(monkeypatch):
    monkeypatch.setenv("TORCHTPU_X", " Error ")
    assert _config.choice("TORCHTPU_X", ("warn", "error"), "warn") == "error"


def test_choice_warns_and_defaults_on_an_unknown_value(monkeypatch):
    monkeypatch.setenv("TORCHTPU_X", "bogus")
    with pytest.warns(UserWarning, match="TORCHTPU_X must be one of warn, error, not 'bogus'; "
                                         "using warn"):
        assert _config.choice("TORCHTPU_X", ("warn", "error"), "warn") == "warn"


@pytest.mark.parametrize("text,value", [("1", True), ("on", True), ("0", False), ("OFF", False)])
def test_flag_reads_on_and_off(monkeypatch, text, value):
    monkeypatch.setenv("TORCHTPU_X", text)
    assert _config.flag("TORCHTPU_X", not value) is value


def test_flag_warns_and_defaults_on_an_unknown_value(monkeypatch):
    monkeypatch.setenv("TORCHTPU_X", "maybe")
    with pytest.warns(UserWarning, match="TORCHTPU_X must be 0 or 1, not 'maybe'; using 1"):
        assert _config.flag("TORCHTPU_X", True) is True


@pytest.mark.parametrize("text", ["abc", "0", "-3", "1e3", "10000000000"])
def test_bounded_int_warns_and_defaults_outside_its_range(monkeypatch, text):
    monkeypatch.setenv("TORCHTPU_X", text)
    with pytest.warns(UserWarning, match=f"TORCHTPU_X must be an integer from 1 to 100, not "
                                         f"'{text}'; using 7"):
        assert _config.bounded_int("TORCHTPU_X", 7, 1, 100) == 7


def test_bounded_int_takes_a_value_in_range(monkeypatch):
    monkeypatch.setenv("TORCHTPU_X", " 42 ")
    assert _config.bounded_int("TORCHTPU_X", 7, 1, 100) == 42


CHECK = """
import torch, torchtpu
print(torch.ones(2, device="tpu").sum().item(), torchtpu._C._defer_max_nodes())
"""


def test_bad_cpu_fallback_policy_keeps_import_working():
    r = run_python(CHECK, TORCHTPU_CPU_FALLBACK="bogus")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "2.0"
    assert "TORCHTPU_CPU_FALLBACK must be one of warn, error, not 'bogus'; using warn" in r.stderr


@pytest.mark.parametrize("text,nodes", [("77", "77"), ("lots", "4000")])
def test_defer_max_nodes_is_read_at_import(text, nodes):
    r = run_python(CHECK, TORCHTPU_DEFER_MAX_NODES=text)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2.0", nodes]
    assert ("TORCHTPU_DEFER_MAX_NODES must be" in r.stderr) == (text == "lots")


def test_unwritable_cache_folder_warns_and_exits_cleanly():
    r = run_python(CHECK, TORCHTPU_CACHE_DIR="/proc/no-such-folder")
    assert r.returncode == 0, r.stderr
    assert "/proc/no-such-folder" in r.stderr and "programs run uncached" in r.stderr
    assert "Traceback" not in r.stderr
