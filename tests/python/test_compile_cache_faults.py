"""Fault injection for the compile cache: entries swapped between programs, crafted payloads,
folders and entries other users could write, odd files, and the in-memory bound. Each run is a
fresh process sharing one cache folder."""

import json
import os
import stat
import struct

import pytest

from conftest import run_python

PROGRAM = """
import json, os, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import torch, torchtpu
    a = torch.tensor([1.0, 2.0, 3.0]).to("tpu")
    b = torch.tensor([10.0, 20.0, 40.0]).to("tpu")
    out = {"add": lambda: a + b, "sub": lambda: a - b, "sum": lambda: a.sum()}[os.environ["OP"]]()
    values = out.cpu().tolist()
print(json.dumps({"values": values, "metrics": {k: v for k, v in torchtpu.metrics().items()
                                                 if k != "cpu_fallbacks"},
                  "warnings": [[w.category.__name__, str(w.message)] for w in caught]}))
"""
EXPECTED = {"add": [11.0, 22.0, 43.0], "sub": [-9.0, -18.0, -37.0], "sum": 6.0}


def run(cache, op, **env):
    r = run_python(PROGRAM, TORCHTPU_CACHE_DIR=str(cache), OP=op, **env)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["values"] == EXPECTED[op]
    return out


def entries(cache):
    return {n for n in os.listdir(cache) if n.endswith(".xla")}


def entry_of(cache, op):
    """Runs `op` in `cache` and returns the path of the one entry it added."""
    before = entries(cache) if os.path.isdir(cache) else set()
    run(cache, op)
    (name,) = entries(cache) - before
    return os.path.join(cache, name)


def cache_warnings(out, part):
    return [m for c, m in out["warnings"] if c == "UserWarning" and part in m]


# The entry format (csrc/engine/disk_cache.cc), to craft entries that are self-consistent.
MAGIC = b"TTPUXC02"
MASK = (1 << 64) - 1


def content_hash(data: bytes) -> bytes:
    h = 1469598103934665603
    for c in data:
        h = ((h ^ c) * 1099511628211) & MASK
    m = 0x9E3779B97F4A7C15 ^ len(data)
    i = 0
    while i + 8 <= len(data):
        k = (struct.unpack_from("<Q", data, i)[0] * 0xFF51AFD7ED558CCD) & MASK
        k ^= k >> 33
        m ^= k
        m = ((((m << 27) | (m >> 37)) & MASK) * 5 + 0x52DCE729) & MASK
        i += 8
    for c in data[i:]:
        m = ((m ^ c) * 0xC4CEB9FE1A85EC53) & MASK
    m ^= m >> 33
    m = (m * 0xC4CEB9FE1A85EC53) & MASK
    m ^= m >> 29
    return b"%016x%016x" % (h, m)


def split_entry(path):
    data = open(path, "rb").read()
    assert data[:8] == MAGIC
    key_size, payload_size = struct.unpack_from("<QQ", data, 8)
    return data[56:56 + key_size], data[56 + key_size:]


def write_entry(path, key, payload):
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<QQ", len(key), len(payload)) + content_hash(key + payload)
                + key + payload)


def test_the_crafted_entry_format_matches_the_cache(tmp_path):
    path = entry_of(tmp_path, "add")
    key, payload = split_entry(path)
    original = open(path, "rb").read()
    write_entry(path, key, payload)
    assert open(path, "rb").read() == original


@pytest.mark.parametrize("other", ["sub", "sum"])  # same signature, other signature
def test_swapped_entry_is_discarded_and_the_program_recompiled(tmp_path, other):
    add = entry_of(tmp_path, "add")
    os.replace(entry_of(tmp_path, other), add)
    out = run(tmp_path, "add")  # checks that a + b is what ran
    assert cache_warnings(out, "was written for a different program (its stored key differs); "
                               "recompiling it")
    assert out["metrics"]["executables_compiled"] == 1
    assert out["metrics"]["disk_cache_bad_entries"] == 1
    again = run(tmp_path, "add")  # and replaced by a good one
    assert again["metrics"]["executables_compiled"] == 0 and not again["warnings"]


def test_crafted_entry_with_a_payload_that_cannot_run_is_recompiled(tmp_path):
    add = entry_of(tmp_path, "add")
    _, sum_payload = split_entry(entry_of(tmp_path, "sum"))
    key, _ = split_entry(add)
    write_entry(add, key, sum_payload)  # right key and checksum, another signature's executable
    out = run(tmp_path, "add")
    assert cache_warnings(out, "failed to run (")
    assert cache_warnings(out, "discarding its entry and recompiling it")
    assert out["metrics"]["executables_compiled"] == 1
    assert split_entry(add)[1] != sum_payload
    assert run(tmp_path, "add")["metrics"]["executables_compiled"] == 0


def test_crafted_entry_with_a_payload_the_plugin_refuses_is_recompiled(tmp_path):
    add = entry_of(tmp_path, "add")
    key, payload = split_entry(add)
    write_entry(add, key, payload[: len(payload) // 3])
    out = run(tmp_path, "add")
    assert cache_warnings(out, "a compile cache entry could not be loaded (")
    assert out["metrics"]["executables_compiled"] == 1
    assert run(tmp_path, "add")["metrics"]["executables_compiled"] == 0


def test_entry_of_an_earlier_format_is_replaced_without_a_warning(tmp_path):
    add = entry_of(tmp_path, "add")
    with open(add, "wb") as f:
        f.write(b"TTPUXC01" + bytes(64))  # what an earlier torchtpu wrote under this name
    out = run(tmp_path, "add")
    assert not out["warnings"]
    assert out["metrics"]["executables_compiled"] == 1
    assert open(add, "rb").read()[:8] == MAGIC


def test_folder_and_entries_are_private_whatever_the_umask(tmp_path):
    cache = tmp_path / "new" / "cache"
    r = run_python("import os; os.umask(0)\n" + PROGRAM, TORCHTPU_CACHE_DIR=str(cache), OP="add")
    assert r.returncode == 0, r.stderr[-2000:]
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    modes = {stat.S_IMODE(os.stat(os.path.join(cache, n)).st_mode) for n in os.listdir(cache)}
    assert modes == {0o600}


def test_folder_others_can_write_is_refused_with_one_warning(tmp_path):
    os.chmod(tmp_path, 0o777)
    out = run(tmp_path, "add")
    refusals = cache_warnings(out, "is writable by other users (mode 0777)")
    assert len(refusals) == 1 and "programs run uncached" in refusals[0]
    assert entries(tmp_path) == set()
    assert out["metrics"]["disk_cache_refused"] > 0


@pytest.mark.parametrize("fault", ["mode 0666", "another owner"])
def test_entry_not_private_is_refused_then_replaced(tmp_path, fault):
    add = entry_of(tmp_path, "add")
    if fault == "mode 0666":
        os.chmod(add, 0o666)
    elif os.geteuid() == 0:
        os.chown(add, 65534, 65534)
    else:
        pytest.skip("needs root to give an entry away")
    out = run(tmp_path, "add")
    assert len(cache_warnings(out, "are not loaded")) == 1
    assert out["metrics"]["executables_compiled"] == 1
    st = os.stat(add)
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o600


@pytest.mark.parametrize("odd", ["directory", "fifo", "symlink"])
def test_odd_file_as_an_entry_is_skipped_with_a_warning(tmp_path, odd):
    add = entry_of(tmp_path, "add")
    os.remove(add)
    if odd == "directory":
        os.mkdir(add)
    elif odd == "fifo":
        os.mkfifo(add)  # opening it for reading would hang the process (run_python times out)
    else:
        os.symlink(entry_of(tmp_path, "sub"), add)
    out = run(tmp_path, "add")
    wanted = "is a symbolic link" if odd == "symlink" else "is not a regular file"
    assert cache_warnings(out, wanted)
    assert out["metrics"]["executables_compiled"] == 1
    assert stat.S_ISREG(os.lstat(add).st_mode)  # replaced by a real entry


def test_memory_cache_bound_evicts_and_reports_it(tmp_path):
    r = run_python("""
        import json, torch, torchtpu
        f = torch.compile(lambda x: (x * 2).sin() + 1, backend="tpu")
        x = torch.arange(4.0).to("tpu")
        first = f(x).cpu()
        for n in range(1, 6):
            (torch.ones(n, device="tpu") * 3).cpu()
        again = f(x).cpu()  # its executable has been evicted from the cache since
        assert torch.equal(first, again)
        assert torch.allclose(first, (torch.arange(4.0) * 2).sin() + 1)
        print(json.dumps(torchtpu.metrics()))
    """, TORCHTPU_CACHE_DIR=str(tmp_path), TORCHTPU_MEMORY_CACHE_MAX_BYTES="0")
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads(r.stdout.strip().splitlines()[-1])
    assert m["memory_cache_entries"] == 1
    assert m["memory_cache_evictions"] == m["executable_cache_misses"] - 1 > 0


def test_memory_cache_bound_that_is_not_a_number_is_a_clear_error(tmp_path):
    r = run_python("""
        import torch, torchtpu
        torch.ones(2, device="tpu")
    """, TORCHTPU_CACHE_DIR=str(tmp_path), TORCHTPU_MEMORY_CACHE_MAX_BYTES="lots")
    assert r.returncode != 0
    assert "TORCHTPU_MEMORY_CACHE_MAX_BYTES must be a number of bytes, not 'lots'" in r.stderr
