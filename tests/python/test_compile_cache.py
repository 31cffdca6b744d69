"""The on-disk compile cache, across fresh processes sharing one folder."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, run_python

PROGRAM = """
import json, torch, torchtpu
x = torch.arange(12.0).reshape(3, 4).to("tpu")
y = (x * 2 + 1).sum(1).softmax(0)
print(json.dumps({"values": y.cpu().tolist(), "metrics": {k: v for k, v in
                  torchtpu.metrics().items() if k != "cpu_fallbacks"}}))
"""


def run(cache, program=PROGRAM, **env):
    r = run_python(program, TORCHTPU_CACHE_DIR=str(cache), **env)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def entries(cache):
    return sorted(p for p in os.listdir(cache) if p.endswith(".xla"))


def test_second_process_loads_everything_and_compiles_nothing(tmp_path):
    first, _ = run(tmp_path)
    second, _ = run(tmp_path)
    assert first["metrics"]["executables_compiled"] > 0
    assert first["metrics"]["disk_cache_writes"] == first["metrics"]["executables_compiled"]
    assert second["metrics"]["executables_compiled"] == 0
    assert second["metrics"]["executables_loaded_from_disk"] == \
        first["metrics"]["executables_compiled"]
    assert second["values"] == first["values"]


@pytest.mark.parametrize("damage", ["corrupt", "truncate"])
def test_bad_entries_are_recompiled_and_replaced(tmp_path, damage):
    first, _ = run(tmp_path)
    victim = os.path.join(tmp_path, entries(tmp_path)[0])
    data = open(victim, "rb").read()
    with open(victim, "wb") as f:
        if damage == "corrupt":
            f.write(data[:60] + bytes(b ^ 0xFF for b in data[60:70]) + data[70:])
        else:
            f.write(data[: len(data) // 2])
    second, stderr = run(tmp_path)
    assert "is corrupted or truncated; recompiling it" in stderr
    assert second["metrics"]["executables_compiled"] == 1
    assert second["metrics"]["disk_cache_bad_entries"] == 1
    assert second["values"] == first["values"]
    third, _ = run(tmp_path)  # the entry was replaced by a good one
    assert third["metrics"]["executables_compiled"] == 0


def test_concurrent_writers_leave_valid_entries(tmp_path):
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", PROGRAM], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outputs]
    values = {json.dumps(json.loads(o[0].strip().splitlines()[-1])["values"]) for o in outputs}
    assert len(values) == 1
    assert not [n for n in os.listdir(tmp_path) if ".tmp." in n]
    after, stderr = run(tmp_path)
    assert after["metrics"]["executables_compiled"] == 0
    assert "corrupted" not in stderr


def test_size_bound_evicts_least_recently_used(tmp_path):
    first, _ = run(tmp_path)
    sizes = [os.path.getsize(os.path.join(tmp_path, e)) for e in entries(tmp_path)]
    bound = sum(sizes) - min(sizes)  # room for all but one entry
    r = run_python("""
        import torch, torchtpu
        (torch.ones(5, device="tpu") * 3).cpu()  # a new program: the cache must drop one
    """, TORCHTPU_CACHE_DIR=str(tmp_path), TORCHTPU_CACHE_MAX_BYTES=str(bound))
    assert r.returncode == 0, r.stderr
    total = sum(os.path.getsize(os.path.join(tmp_path, e)) for e in entries(tmp_path))
    assert total <= bound


NAN_PROGRAM = """
import json, torch, torchtpu
x = torch.tensor([float("nan"), 1.0, 2.0], device="tpu")
print(json.dumps({"isnan": torch.isnan(x).cpu().tolist(), "amax": torch.amax(x).item(),
                  "loaded": torchtpu.metrics()["executables_loaded_from_disk"]}))
"""
FAST_MATH = "--xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_nans=false"


@pytest.mark.parametrize("first_flags", [FAST_MATH, None])
def test_executables_compiled_under_other_xla_flags_are_not_loaded(tmp_path, first_flags):
    # XLA reads its flags from the environment, and fast math drops NaNs: an executable compiled
    # under one set of flags must never answer for a process running under another.
    run(tmp_path, NAN_PROGRAM, XLA_FLAGS=first_flags)
    other = FAST_MATH if first_flags is None else None
    result, _ = run(tmp_path, NAN_PROGRAM, XLA_FLAGS=other)
    assert result["loaded"] == 0
    if other is None:  # PyTorch's answers
        assert result["isnan"] == [True, False, False] and result["amax"] != result["amax"]
    again, _ = run(tmp_path, NAN_PROGRAM, XLA_FLAGS=other)
    assert again["loaded"] > 0 and again["isnan"] == result["isnan"]


def test_executables_of_another_plugin_file_are_not_loaded(tmp_path):
    # A rebuilt or upgraded plugin may keep its platform version string; its file's size and
    # modification time tell it apart.
    import torchtpu

    plugin = tmp_path / "plugin.so"
    plugin.write_bytes(open(torchtpu.plugin()["path"], "rb").read())
    cache = tmp_path / "cache"
    first, _ = run(cache, TORCHTPU_PJRT_PLUGIN=str(plugin))
    second, _ = run(cache, TORCHTPU_PJRT_PLUGIN=str(plugin))
    assert second["metrics"]["executables_loaded_from_disk"] > 0
    os.utime(plugin, ns=(plugin.stat().st_atime_ns, plugin.stat().st_mtime_ns + 10**9))
    third, _ = run(cache, TORCHTPU_PJRT_PLUGIN=str(plugin))
    assert third["metrics"]["executables_loaded_from_disk"] == 0
    assert third["metrics"]["executables_compiled"] == first["metrics"]["executables_compiled"]
    assert third["values"] == first["values"]


def test_cache_can_be_turned_off(tmp_path):
    out, _ = run(tmp_path, TORCHTPU_CACHE="0")
    assert "disk_cache_dir" not in out["metrics"]
    assert entries(tmp_path) == []


def test_command_line_stats_clear_prune(tmp_path):
    run(tmp_path)
    run(tmp_path)
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path))

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "torchtpu.cache", *args], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout

    n = len(entries(tmp_path))
    stats = cli("stats")
    assert f"{n} entries" in stats and "hit rate 50.0%" in stats
    assert "evicted" in cli("prune", "--max-bytes", "0")
    assert entries(tmp_path) == []
    run(tmp_path)
    assert f"removed {n} entries" in cli("clear")
    assert entries(tmp_path) == []
