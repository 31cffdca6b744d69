"""torchtpu.compile_log() and explain_compiles(): each compile says what differed from the
nearest earlier program of the same ops (an input's sizes, strides, dtype, a static attribute)
and the Python line that issued it; one warning per Python line past TORCHTPU_COMPILE_WARN_AFTER
programs compiled there; a run recorded with TORCHTPU_COMPILE_LOG, explained afterwards."""

import io
import json
import os
import subprocess
import sys
import threading

import pytest
import torch
from conftest import run_python

import torchtpu

HERE = __file__


@pytest.fixture
def log():
    """The compiles the test makes, in Strict unless it switches."""
    torchtpu._C._clear_compile_log()
    with torchtpu.eager_mode("strict"):
        yield torchtpu.compile_log


def line_of(text):
    with open(HERE) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


def test_a_new_size_names_the_input_and_the_line(log):
    x = torch.ones(2, 41, device="tpu")
    for n in (37, 38):
        (x[:, :n] * 3).cpu()  # sizes line
    last = [r for r in log() if r["ops"] == "mul"]
    assert last[0]["reason"] == "the first program of these ops"
    assert last[1]["reason"].startswith("input 0: sizes [2,38] instead of [2,37]")
    assert last[1]["where"] == f"{HERE}:{line_of('# sizes line')}"
    assert last[1]["same_ops"] == 2


def test_dtype_strides_and_static_attributes(log):
    x = torch.arange(42.0).reshape(6, 7).to("tpu")
    (x - 1).cpu()
    (x.double() - 1).cpu()
    (x.t() - 1).cpu()
    torch.roll(x, 3, 0).cpu()
    torch.roll(x, 4, 0).cpu()
    subs = [r["reason"] for r in log() if r["ops"] == "sub"]
    assert subs[1].startswith("input 0: type f64 instead of f32"), subs
    assert subs[2].startswith("input 0: sizes [7,6] instead of [6,7], strides [1,7] instead of "
                              "[7,1]"), subs
    rolls = [r["reason"] for r in log() if r["ops"] == "roll"]
    assert rolls[-1] == "roll (node 2): shifts [4] instead of [3]", rolls


def test_defer_and_fuse_programs_are_logged_at_their_sync_point(log):
    with torchtpu.eager_mode("defer_and_fuse"):
        for n in (43, 44, 45):
            x = torch.ones(3, n).to("tpu")  # an input of the fused program
            (x.softmax(-1) * 2).sum().item()  # sync line
    fused = [r for r in log() if r["ops"] == "3 ops: softmax ... sum"]
    assert len(fused) == 3, log()
    assert fused[2]["reason"].startswith("input 0: sizes [3,45] instead of [3,44]")
    assert all(r["where"] == f"{HERE}:{line_of('# sync line')}" for r in fused)


def test_explain_compiles_groups_one_varying_size(log):
    x = torch.ones(64, device="tpu")
    for n in range(46, 52):
        (x[:n] + 5).cpu()
    out = io.StringIO()
    rows = torchtpu.explain_compiles(top=3, file=out)
    assert rows[0]["ops"] == "add" and rows[0]["count"] == 5
    assert rows[0]["reason"].startswith("input 0: sizes [51] instead of [50]")
    assert "programs compiled in this process" in out.getvalue()
    assert f"add at {HERE}:" in out.getvalue()


def test_metrics_carry_the_reasons(log):
    x = torch.ones(3, 64, device="tpu")
    for n in range(53, 57):
        (x[:, :n] - 2).cpu()  # metrics line
    rows = torchtpu.metrics()["compile_reasons"]
    assert rows == torchtpu.compiles.top_reasons()
    sub = next(r for r in rows if r["ops"] == "sub" and r["count"] == 3)
    assert sub["reason"].startswith("input 0: sizes [3,56] instead of [3,55]")
    assert sub["where"] == f"{HERE}:{line_of('# metrics line')}"
    # kept until the log changes: a new compile, or the log cleared
    assert torchtpu.metrics()["compile_reasons"] == rows
    subs = [r for r in rows if r["ops"] == "sub"]
    torchtpu.metrics()["compile_reasons"][0]["count"] = -1  # a caller's copy
    assert torchtpu.metrics()["compile_reasons"] == rows
    (x[:, :52] - 2).cpu()  # a new line
    again = [r for r in torchtpu.metrics()["compile_reasons"] if r["ops"] == "sub"]
    assert [r for r in again if r["where"] == sub["where"]] == subs
    new = next(r for r in again if r["where"] == f"{HERE}:{line_of('# a new line')}")
    assert new["count"] == 1 and new["reason"].startswith("input 0: sizes [3,52] instead of")
    torchtpu._C._clear_compile_log()
    assert torchtpu.metrics()["compile_reasons"] == []


def test_a_cached_program_is_not_logged(log):
    x = torch.ones(52, device="tpu")
    (x * 7).cpu()
    before = len(log())
    (x * 8).cpu()  # the same program: Python scalars are arguments
    assert len(log()) == before


def test_one_warning_past_the_threshold():
    code = """
        import warnings, torch, torchtpu
        torchtpu.set_eager_mode("strict")
        x = torch.ones(64, device="tpu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in range(1, 9):
                (x[:n] * 3).cpu()
        print([str(w.message) for w in caught if "compiling too often" in str(w.message)])
    """
    r = run_python(code, TORCHTPU_COMPILE_WARN_AFTER="3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("compiling too often") == 1, r.stdout
    # The line's 4 programs: mul for 3 sizes, and the cast of the scalar 3 once.
    assert "compiling too often at <string>:8: 4 programs; dimension 0 of input 0 of mul took 3 " \
        "sizes" in r.stdout, r.stdout
    r = run_python(code, TORCHTPU_COMPILE_WARN_AFTER="0")
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_a_second_line_gets_its_own_warning():
    code = """
        import warnings, torch, torchtpu
        torchtpu.set_eager_mode("strict")
        x = torch.ones(64, 8, device="tpu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in range(1, 5):
                (x[:n] * 3).cpu()
            for n in range(1, 5):
                (x[:, :n] + 3).cpu()
        print([str(w.message) for w in caught if "compiling too often" in str(w.message)])
    """
    r = run_python(code, TORCHTPU_COMPILE_WARN_AFTER="3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("compiling too often") == 2, r.stdout
    assert "at <string>:10: 4 programs; dimension 1 of input 0 of add took 4 sizes" in r.stdout


def test_many_fixed_shapes_at_one_line_are_no_warning():
    """An optimizer's foreach over parameters of 81 shapes compiles 81 programs at its line in
    Strict, once each, replayed after: no dimension takes many sizes, so no warning (the
    default threshold, 64 programs)."""
    r = run_python("""
        import warnings, torch, torchtpu
        torchtpu.set_eager_mode("strict")
        params = [torch.ones(i, j, device="tpu") for i in range(1, 10) for j in range(1, 10)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                torch._foreach_mul_(params, 0.5)
        torch.tpu.synchronize()
        assert float(params[-1][0, 0]) == 0.25
        print([str(w.message) for w in caught if "compiling too often" in str(w.message)])
        print(torchtpu.metrics()["executable_cache_misses"])
    """, TORCHTPU_COMPILE_WARN_AFTER=None, TORCHTPU_CACHE="0")
    assert r.returncode == 0, r.stderr
    warned, compiled = r.stdout.splitlines()
    assert warned == "[]", r.stdout
    assert int(compiled) > 81, r.stdout


def test_a_recorded_run_is_explained_afterwards(tmp_path):
    path = tmp_path / "compiles.jsonl"
    code = """
        import torch, torchtpu
        torchtpu.set_eager_mode("strict")
        x = torch.ones(64, device="tpu")
        for n in range(1, 6):
            (x[:n] * 3).cpu()
    """
    for _ in range(2):  # two processes append to one file
        r = run_python(code, TORCHTPU_COMPILE_LOG=str(path))
        assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in path.read_text().splitlines()]
    muls = [r for r in records if r["ops"] == "mul"]
    assert len(muls) == 10 and len({r["pid"] for r in muls}) == 2, records
    assert muls[-1]["reason"].startswith("input 0: sizes [5] instead of [4]")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(torchtpu.__file__)))
    r = subprocess.run([sys.executable, "-m", "torchtpu.cache", "explain", str(path)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"{len(records)} programs compiled in the recorded run" in r.stdout, r.stdout
    assert "8  mul at <string>:6: input 0: sizes [5] instead of [4]" in r.stdout, r.stdout
    r = subprocess.run([sys.executable, "-m", "torchtpu.cache", "explain", str(tmp_path / "none")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "cannot read the compile log" in r.stdout


def test_warning_count_setting_is_checked():
    r = run_python("import torchtpu", TORCHTPU_COMPILE_WARN_AFTER="many")
    assert r.returncode == 0 and "TORCHTPU_COMPILE_WARN_AFTER" in r.stderr


def test_each_thread_locates_its_own_compiles(log):
    def work(n):
        (torch.ones(n, 53, device="tpu") * 2).cpu()  # thread line

    threads = [threading.Thread(target=work, args=(n,)) for n in (2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = {r["where"] for r in log() if r["ops"] == "mul"}
    assert lines == {f"{HERE}:{line_of('# thread line')}"}, log()


def test_a_compiled_graphs_programs_name_a_line_of_the_caller_not_fx_code(log):
    @torch.compile(backend="tpu", dynamic=False)
    def f(x):
        return (x.cos() * 3).sum(0)

    for n in (54, 55):
        x = torch.ones(n, 3, device="tpu")
        torch.tpu.synchronize()
        f(x)
    captured = [r for r in log() if r["ops"] == "3 ops: cos ... sum"]
    assert len(captured) == 2, log()
    assert captured[1]["reason"].startswith("input 0: sizes [55,3] instead of [54,3]")
    assert all(r["where"].startswith(f"{HERE}:") for r in captured), captured
