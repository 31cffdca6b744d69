"""all_reduce and all_gather on 2 ranks: the "tpu" backend (tpu tensors, staged through gloo on
the host) beside gloo on CPU tensors, 1 KiB ... 64 MiB, measured side by side in one run.

Prints for each size the median time of each, their bus bandwidth (as nccl-tests defines it:
all_reduce moves 2(n-1)/n of the buffer per rank, all_gather (n-1)/n of the output) and the
ratio tpu / gloo, then the "tpu" backend again without the ranks' agreement on each collective
(a group made with TORCHTPU_DIST_CHECKS=0) and what the agreement adds, then what the staging
copies alone cost at the largest size.
"""

import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

KiB = 1024


def _bench(size, iters, groups, world):
    """{(op, backend): seconds} for a buffer of `size` bytes of float32. The calls take turns,
    one of each per round, so a change in the machine's load falls on all of them alike."""
    calls = {}
    for backend, (device, group) in groups.items():
        calls["all_reduce", backend], calls["all_gather", backend] = _calls(
            size // 4, device, group, world)
    for fn in calls.values():  # warm-up
        fn()
    times = {key: [] for key in calls}
    for _ in range(iters):
        for key, fn in calls.items():
            dist.barrier()
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return {key: statistics.median(t) for key, t in times.items()}


def _calls(n, device, group, world):
    x = torch.ones(n, device=device)
    gathered = torch.empty(n * world, device=device)
    sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)

    def all_reduce():
        dist.all_reduce(x, group=group)
        sync()  # the results are in the tpu tensor

    def all_gather():
        dist.all_gather_into_tensor(gathered, x, group=group)
        sync()
    return all_reduce, all_gather


def _copies(size, iters):
    """Median seconds of the staging copies alone: tpu -> pinned host, and back."""
    x = torch.ones(size // 4, device="tpu")
    host = torch.empty(size // 4, pin_memory=True)
    torch.tpu.synchronize()

    def down():
        host.copy_(x, non_blocking=True)
        torch.tpu.synchronize()

    def up():
        x.copy_(host, non_blocking=True)
        torch.tpu.synchronize()
    down(), up()
    return (statistics.median(_one(down) for _ in range(iters)),
            statistics.median(_one(up) for _ in range(iters)))


def _one(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _run(rank, world, port, sizes, iters):
    import torchtpu  # noqa: F401  (registers "tpu")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("tpu", rank=rank, world_size=world)
    os.environ["TORCHTPU_DIST_CHECKS"] = "0"  # read when a group is made
    unchecked = dist.new_group(backend="tpu")
    del os.environ["TORCHTPU_DIST_CHECKS"]
    groups = {"gloo": ("cpu", dist.new_group(backend="gloo")),
              "tpu": ("tpu", dist.distributed_c10d._get_default_group()),
              "unchecked": ("tpu", unchecked)}
    rows = [(size, _bench(size, max(5, min(iters, (1024 * KiB * iters) // size)), groups, world))
            for size in sizes]
    copies = _copies(sizes[-1], 5)
    dist.destroy_process_group()
    if rank != 0:
        return
    factor = {"all_reduce": 2 * (world - 1) / world, "all_gather": (world - 1) / world}
    print(f"{world} ranks, float32, median per call (with the copy back into tpu tensors), "
          f"bus bandwidth in GB/s  [{torch.tpu.get_device_name()}]")
    print(f"{'size':>9} {'op':<11} {'gloo ms':>9} {'GB/s':>7} {'tpu ms':>9} {'GB/s':>7} "
          f"{'tpu/gloo':>9} {'unchecked ms':>13} {'checks ms':>10}")
    for size, t in rows:
        for op in ("all_reduce", "all_gather"):
            moved = size * (world if op == "all_gather" else 1) * factor[op]
            g, d, u = t[op, "gloo"], t[op, "tpu"], t[op, "unchecked"]
            print(f"{_human(size):>9} {op:<11} {g * 1e3:9.3f} {moved / g / 1e9:7.2f} "
                  f"{d * 1e3:9.3f} {moved / d / 1e9:7.2f} {d / g:8.2f}x {u * 1e3:13.3f} "
                  f"{(d - u) * 1e3:+10.3f}")
    down, up = copies
    print(f"staging copies alone at {_human(sizes[-1])}: tpu -> pinned host {down * 1e3:.2f} ms, "
          f"pinned host -> tpu {up * 1e3:.2f} ms")


def _human(size):
    return f"{size // (1024 * KiB)} MiB" if size >= 1024 * KiB else f"{size // KiB} KiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--max-mib", type=int, default=64)
    args = parser.parse_args()
    sizes, size = [], KiB
    while size <= args.max_mib * 1024 * KiB:
        sizes.append(size)
        size *= 4
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_run, args=(2, port, sizes, args.iters), nprocs=2)


if __name__ == "__main__":
    main()
