"""A DistributedDataParallel training step of examples/train_gpt.py's model on 2 ranks: "tpu"
(the c10d backend tpu) beside the CPU (gloo), and beside the single-rank tpu step of the same
per-rank batch.

    python benchmarks/ddp_step.py [--steps 10] [--warmup 3] [--batch 16]

Prints the median step time after warm-up of each, measured in one run, and the ratios; the
target is a 2-rank tpu DDP step within 1.3x the single-rank tpu step. The single-rank step runs
on rank 0 while rank 1 waits; the two ranks of a DDP step share the machine's cores, so on a
machine with few cores the ratio also measures how the ranks' device work shares them.
"""

import argparse
import contextlib
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from train_gpt import GPT, batches, load_text, training_step


def step_time(device, model, rank, args, context=contextlib.nullcontext):
    """Median seconds of a training step of `model` (a GPT or its DDP wrapper) after warm-up,
    each step inside `context()`; each rank draws its own batches."""
    data, _ = load_text()
    step_fn = training_step(model, device)
    times = []
    for i, (x, y) in zip(range(args.warmup + args.steps), batches(data, 64, args.batch, rank)):
        start = time.perf_counter()
        with context():
            step_fn(x.to(device), y.to(device)).item()  # waits for the step
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def gpt(device):
    _, vocab = load_text()
    torch.manual_seed(0)
    return GPT(vocab, 64).to(device)


def rank_main(rank, world, port, args):
    from torch.nn.parallel import DistributedDataParallel as DDP
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("tpu", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    times = {}
    if rank == 0:
        times["single-rank tpu"] = step_time("tpu", gpt("tpu"), rank, args)
    dist.barrier(group=gloo)
    times["DDP tpu (c10d tpu)"] = step_time("tpu", DDP(gpt("tpu")), rank, args)
    dist.barrier(group=gloo)
    ddp = DDP(gpt("tpu"))  # where the time goes: the same 2 ranks computing, reducing nothing
    times["DDP tpu, no_sync"] = step_time("tpu", ddp, rank, args, ddp.no_sync)
    dist.barrier(group=gloo)
    times["DDP cpu (gloo)"] = step_time("cpu", DDP(gpt("cpu"), process_group=gloo), rank, args)
    slowest = [None] * world
    dist.all_gather_object(slowest, times, group=gloo)
    if rank == 0:
        report({k: max(t[k] for t in slowest if k in t) for k in times}, world, args)
    dist.destroy_process_group()


def report(times, world, args):
    params = sum(p.numel() for p in gpt("cpu").parameters())
    print(f"DDP step of train_gpt's model ({params / 1e6:.2f} M parameters, batch {args.batch} "
          f"x 64 per rank, {world} ranks; median of {args.steps} steps, slowest rank)")
    for name, t in times.items():
        print(f"  {name:<22} {t * 1e3:8.1f} ms")
    single = times["single-rank tpu"]
    ddp = times["DDP tpu (c10d tpu)"]
    print(f"  DDP tpu / single-rank tpu: {ddp / single:.2f}x (target <= 1.30x)")
    print(f"  DDP tpu / DDP cpu (gloo):  {ddp / times['DDP cpu (gloo)']:.2f}x")
    print(f"  of the DDP tpu step, the 2 ranks' compute (no_sync) is "
          f"{times['DDP tpu, no_sync'] / single:.2f}x the single-rank step and the gradient "
          f"all_reduces add {(ddp - times['DDP tpu, no_sync']) * 1e3:.1f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(2, port, args), nprocs=2)


if __name__ == "__main__":
    main()
