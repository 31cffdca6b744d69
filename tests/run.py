"""Runs the Python test suite as independent pytest jobs, as many at once as the machine has cores.

One pytest process keeps about one core busy (XLA's compiles and torch's dispatch take turns), so
on a 2-core CI machine two jobs side by side halve the wall time. The jobs:

- the OpInfo suite in Strict mode (every dtype), in OPINFO_SHARDS shards (its TORCHTPU_OPINFO_SHARD);
- the OpInfo suite again in DeferAndFuse and in Debug, float32 only, each mode taking half of
  OpInfo's ops (so every op runs in Strict and in one of the two; the whole of both took 25 min of
  the suite's 2-core time);
- the other op suites (OP_SUITES) in Strict, and the quick ones (DEBUG_OP_SUITES) in Debug (Debug
  runs Strict's per-op programs, with a wait and checks after each op), and the runtime's suites
  (RUNTIME_SUITES) in Strict;
  their tests that run in each eager mode themselves (the each_eager_mode fixture) are skipped
  there (TORCHTPU_TESTS_OF_ONE_MODE), as the job below runs them;
- every test file but OpInfo in the environment's eager mode (DeferAndFuse, the default, unless
  TORCHTPU_EAGER_MODE says otherwise), one job per file; test_opinfo_variants.py (OpInfo's ops
  in place, non-contiguous, with out=, ...) runs there only.

The jobs share one compile cache folder (TORCHTPU_CACHE_DIR, made for the run unless set), as the
processes of one machine do: Debug runs the same per-op programs as Strict, so its op suites,
which start once the Strict OpInfo shards are done, load most of them instead of compiling them
again (a compile is about 75 % of an OpInfo test's time). Tests of the cache itself use folders
of their own; a test run alone still gets a cold cache of its own (conftest.py).

Each job's output goes to a log; a line per job says how it ended and how long it took, and a
failed job's whole output is printed. The exit status is 1 if any job failed. Usage:

    python tests/run.py [-j N] [-k SUBSTRING]     (-k: only the jobs whose name contains it)
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python")
# Op suites besides OpInfo, quick: they run in every eager mode.
OP_SUITES = ["test_tensors.py", "test_elementwise.py", "test_nn.py", "test_ops.py",
             "test_random.py", "test_optim.py"]
# Debug runs Strict's programs with a wait and checks after each op: the quick op suites in it (the
# nn modules' and optimizers' suites, the longest, run in Strict and DeferAndFuse).
DEBUG_OP_SUITES = [f for f in OP_SUITES if f not in ("test_nn.py", "test_optim.py")]
# The runtime's behaviour (streams, device-side asserts, errors, pinned memory, processes) again
# in Strict, where the op, not a sync point, runs the work.
RUNTIME_SUITES = ["test_streams.py", "test_device_asserts.py", "test_errors.py",
                  "test_pinned_memory.py", "test_processes.py"]
OPINFO_SHARDS = 3
# Files that run longest go first, so no long job starts last (seconds on a 2-core machine).
LONG_FILES = ["test_models.py", "test_opinfo_variants.py", "test_opinfo_compiled.py",
              "test_compile_cache_faults.py", "test_compile_cache.py", "test_compile_warm_start.py",
              "test_dtensor.py", "test_cpu_verdict.py", "test_train_gpt.py", "test_compile.py",
              "test_distributed.py", "test_parallel.py", "test_pipelining.py", "test_ops.py",
              "test_nn.py", "test_linalg.py"]
JOB_TIMEOUT_S = 30 * 60


def jobs():
    """(name, environment overrides, pytest arguments), longest first."""
    result = [(f"strict opinfo {i}/{OPINFO_SHARDS}",
               {"TORCHTPU_EAGER_MODE": "strict", "TORCHTPU_OPINFO_SHARD": f"{i}/{OPINFO_SHARDS}"},
               ["test_opinfo.py"]) for i in range(OPINFO_SHARDS)]
    one_mode = {"TORCHTPU_TESTS_OF_ONE_MODE": "1"}
    for half, mode in enumerate(("defer_and_fuse", "debug")):  # debug after the Strict shards
        result.append((f"{mode} {'op suites' if mode == 'debug' else 'opinfo'}",
                       {"TORCHTPU_EAGER_MODE": mode, "TORCHTPU_OPINFO_DTYPES": "float32",
                        "TORCHTPU_OPINFO_SHARD": f"{half}/2", **one_mode},
                       ["test_opinfo.py"] + (DEBUG_OP_SUITES if mode == "debug" else [])))
    result.append(("strict op and runtime suites", {"TORCHTPU_EAGER_MODE": "strict", **one_mode},
                   OP_SUITES + RUNTIME_SUITES))
    files = sorted(f for f in os.listdir(TESTS)
                   if f.startswith("test_") and f.endswith(".py") and f != "test_opinfo.py")
    files.sort(key=lambda f: LONG_FILES.index(f) if f in LONG_FILES else len(LONG_FILES))
    result += [(f[:-3], {}, [f]) for f in files]
    return result


def run_job(name, env_overrides, files, log_dir):
    env = dict(os.environ, **env_overrides)
    log = os.path.join(log_dir, name.replace(" ", "_").replace("/", "-") + ".log")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           *(os.path.join(TESTS, f) for f in files)]
    start = time.monotonic()
    with open(log, "w") as out:
        try:
            rc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False,
                                timeout=JOB_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            rc = f"timed out after {JOB_TIMEOUT_S} s"
    with open(log) as f:
        text = f.read()
    return rc, time.monotonic() - start, text


def summary_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip("= ") if lines else "(no output)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", type=int, default=os.cpu_count() or 1, help="jobs at once")
    parser.add_argument("-k", default="", help="only the jobs whose name contains this")
    args = parser.parse_args()
    pending = [j for j in jobs() if args.k in j[0]]
    log_dir = tempfile.mkdtemp(prefix="torchtpu-tests-")
    os.environ.setdefault("TORCHTPU_CACHE_DIR", os.path.join(log_dir, "compile-cache"))
    print(f"{len(pending)} pytest jobs, {args.j} at once; logs in {log_dir}", flush=True)
    lock = threading.Lock()
    failed = []
    start = time.monotonic()

    def worker():
        while True:
            with lock:
                if not pending:
                    return
                name, env, files = pending.pop(0)
            rc, seconds, text = run_job(name, env, files, log_dir)
            with lock:
                status = "ok" if rc == 0 else "FAILED"
                print(f"[{status}] {name} ({seconds:.0f} s): {summary_line(text)}", flush=True)
                if rc != 0:
                    failed.append(name)
                    print(text, flush=True)

    threads = [threading.Thread(target=worker) for _ in range(max(1, args.j))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = time.monotonic() - start
    if failed:
        print(f"{len(failed)} jobs failed ({total:.0f} s): {', '.join(failed)}", flush=True)
        return 1
    print(f"all jobs passed ({total:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
