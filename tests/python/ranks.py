"""Runs one job in `world` real processes, each rank on its own tpu device, and collects the
result of every named check the job records (None when it passed, else the traceback)."""

from __future__ import annotations

import json
import os
import socket
import time
import traceback

import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(results: dict, name: str, fn, *args):
    """Runs fn(*args), recording under `name` whether it passed; returns its value (None when it
    raised, so later checks that need it fail on their own)."""
    start = time.perf_counter()
    try:
        value = fn(*args)
        results[name] = None
        return value
    except Exception:  # noqa: BLE001  (reported by the test of this check)
        results[name] = traceback.format_exc()
        return None
    finally:
        results.setdefault("seconds", {})[name] = round(time.perf_counter() - start, 2)


def run_checks(results: dict, checks: dict, *args) -> None:
    """Every check in order, each recorded under its name."""
    for name, fn in checks.items():
        check(results, name, fn, *args)


def _worker(rank, world, port, job, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK="0", WORLD_SIZE=str(world))
    import torch.distributed as dist

    results = {}
    try:
        job(rank, world, results)
    except Exception:  # noqa: BLE001
        results["job"] = traceback.format_exc()
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(results, f)
    if dist.is_initialized():
        dist.destroy_process_group()


def launch(worker, world: int, out_dir: str, *args, timeout: float = 240):
    """Runs worker(rank, world, port, *args) in `world` spawned processes (`port` a free one for
    the store) and waits up to `timeout` seconds, killing those still running. Returns each rank's
    results, read from `out_dir`/<rank>.json (None where the rank wrote none), and the exit codes."""
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, world, port, *args)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(1.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    results = []
    for r in range(world):
        path = os.path.join(out_dir, f"{r}.json")
        if not os.path.exists(path):
            results.append(None)
            continue
        with open(path) as f:
            results.append(json.load(f))
    return results, [p.exitcode for p in procs]


def finished(results: list, codes: list) -> list[dict]:
    """The results, once every rank wrote them and none reports its job failing."""
    assert all(r is not None for r in results), f"a rank died: exit codes {codes}"
    for r in results:
        assert r.get("job") is None, r["job"]
    return results


def spawn(job, world: int, out_dir: str, timeout: float = 240) -> list[dict]:
    """Each rank's results from job(rank, world, results); asserts that every rank finished."""
    results = finished(*launch(_worker, world, out_dir, job, out_dir, timeout=timeout))
    print(f"seconds per check on rank 0: {results[0].get('seconds')}")  # shown by pytest -s
    return results


def assert_passed(ranks: list[dict], name: str) -> None:
    for rank, results in enumerate(ranks):
        assert name in results, f"rank {rank} never ran {name}"
        assert results[name] is None, f"rank {rank}:\n{results[name]}"
