"""Per-op host time of a cached `x + y` on small tensors: "tpu" (Strict mode) beside CPU eager.

Prints the median over N calls of the time one call takes to return, measured in one run, and the
ratio. The tpu call launches asynchronously; the last column also times a full round trip
(launch and wait) for reference.

Then the issue's measure of the per-op host path: a chain of --chain ops `z = z + y` followed by
one read to the host, per op, in Strict (each op launched) and DeferAndFuse (each op recorded,
the chain run as programs of at most 4,000 nodes, cut as it grows), the median of
--chains chains: the time to issue the chain, and the time with its read. Targets: Strict at most
6 us per op, DeferAndFuse at most 4 us.
"""

import argparse
import os
import statistics
import sys
import time

import torch

import torchtpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_s  # noqa: E402


def main():
    torchtpu.set_eager_mode("strict")  # the per-op launch (DeferAndFuse's recording: eager_modes.py)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=16, help="elements per tensor")
    parser.add_argument("--chain", type=int, default=1000, help="ops per chain")
    parser.add_argument("--chains", type=int, default=30)
    args = parser.parse_args()

    results = {}
    for device in ["cpu", "tpu"]:
        x = torch.randn(args.size).to(device)
        y = torch.randn(args.size).to(device)
        for _ in range(100):  # warm-up: compile once, fill the caches
            x + y
        torch.tpu.synchronize()
        results[device] = median_s(lambda: x + y, args.calls) * 1e9
    x = torch.randn(args.size).to("tpu")
    y = torch.randn(args.size).to("tpu")

    def round_trip():
        (x + y).cpu()

    wait_ns = median_s(round_trip, max(args.calls // 10, 100)) * 1e9
    print(f"x + y on {args.size} float32 elements, median of {args.calls} calls")
    print(f"  cpu eager        {results['cpu'] / 1000:8.2f} us")
    print(f"  tpu strict       {results['tpu'] / 1000:8.2f} us   "
          f"({results['tpu'] / results['cpu']:.1f}x cpu)  [{torch.tpu.get_device_name()}]")
    print(f"  tpu with .cpu()  {wait_ns / 1000:8.2f} us   (launch, wait, copy back)")
    m = torchtpu.metrics()
    print(f"  executables compiled: {m['executables_compiled']}, cache hits: "
          f"{m['executable_cache_hits']}")

    print(f"a chain of {args.chain} x (z = z + y) on {args.size} elements, then one read; us per "
          f"op, median of {args.chains} chains")

    def chain():
        z = x
        for _ in range(args.chain):
            z = z + y
        return z

    for mode, target in (("strict", 6), ("defer_and_fuse", 4)):
        with torchtpu.eager_mode(mode):
            for _ in range(3):
                chain().cpu()
            issued, total = [], []
            for _ in range(args.chains):
                start = time.perf_counter()
                z = chain()
                issued.append(time.perf_counter() - start)
                z.cpu()
                total.append(time.perf_counter() - start)
        per_op = [statistics.median(t) / args.chain * 1e6 for t in (issued, total)]
        print(f"  {mode:16} issued {per_op[0]:6.2f}   with the read {per_op[1]:6.2f}   "
              f"(target <= {target})")


if __name__ == "__main__":
    main()
