"""Varying sequence lengths: a transformer's forward and backward (tests/python/test_buckets.py's
Block: embedding, causal attention, layer norm, MLP, cross-entropy; batch 2) over random lengths
in 1..--max-length, compiled with shape buckets on (TORCHTPU_SHAPE_BUCKETS=2) and off (0), and in
DeferAndFuse (eager, which buckets nothing yet). Each setting runs in a fresh process with the
compile cache off and prints: programs compiled, captures, the total wall time over the lengths,
and then, per token, the steady-state time of the bucketed program against the program compiled
for exactly that length (medians of --calls steps).

    python benchmarks/dynamic_shapes.py [--lengths 40] [--max-length 512] [--calls 10]
    python benchmarks/dynamic_shapes.py --every    # each length 1..512 once, in random order

The issue's targets, reported and not asserted: at most 10 programs per graph for lengths 1..512;
total time with buckets at least 5x lower than without; steady-state cost per token at most 1.3x
the static program's.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(setting: str, lengths: list[int], steady: list[int], calls: int) -> dict:
    import torch

    import torchtpu

    sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
    sys.path.insert(0, HERE)
    from test_buckets import Block
    from timing import median_s

    torch.manual_seed(0)
    model = Block(vocab=64, width=32).to("tpu")
    if setting == "defer_and_fuse":
        torchtpu.set_eager_mode("defer_and_fuse")
        step_model = model
    else:
        step_model = torch.compile(model, backend="tpu")

    def step(n):
        g = torch.Generator().manual_seed(n)
        idx = torch.randint(0, 64, (2, n), generator=g).to("tpu")
        loss, _ = step_model(idx, idx)
        loss.backward()
        for p in model.parameters():
            p.grad = None
        return loss.item()

    start = time.perf_counter()
    for n in lengths:
        step(n)
    total = time.perf_counter() - start
    m = torchtpu.metrics()
    result = {"programs": m["executables_compiled"], "captures": m["compiled_captures"],
              "bucketed_calls": m["compiled_bucketed_calls"], "total_s": total, "steady": {}}
    for n in steady:
        step(n)
        result["steady"][n] = median_s(lambda: step(n), calls, 3) / (2 * n)
    return result


def run(setting: str, args, lengths, steady) -> dict:
    env = dict(os.environ, TORCHTPU_CACHE="0",
               TORCHTPU_SHAPE_BUCKETS="0" if setting == "compiled, buckets off" else "2")
    code = (f"import sys; sys.path.insert(0, {HERE!r}); import dynamic_shapes as d, json; "
            f"print(json.dumps(d.worker({('defer_and_fuse' if 'Defer' in setting else 'compiled')!r}, "
            f"{lengths!r}, {steady!r}, {args.calls})))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{setting} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, default=40, help="random lengths to run")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--every", action="store_true",
                        help="each length 1..--max-length once, in random order (about 15 min)")
    args = parser.parse_args()
    rng = random.Random(0)
    if args.every:
        lengths = rng.sample(range(1, args.max_length + 1), args.max_length)
    else:
        lengths = [rng.randint(1, args.max_length) for _ in range(args.lengths)]
    steady = [n for n in (100, 333, args.max_length) if n <= args.max_length]
    print(f"forward+backward of a 1-layer transformer (width 32, batch 2) over {len(lengths)} "
          f"random lengths in 1..{args.max_length} ({len(set(lengths))} distinct)")
    results = {s: run(s, args, lengths, steady) for s in
               ("compiled, buckets on", "compiled, buckets off", "DeferAndFuse")}
    print(f"{'setting':24} {'programs':>9} {'captures':>9} {'bucketed':>9} {'total s':>9}")
    for s, r in results.items():
        print(f"{s:24} {r['programs']:9} {r['captures']:9} {r['bucketed_calls']:9} "
              f"{r['total_s']:9.1f}")
    on, off = results["compiled, buckets on"], results["compiled, buckets off"]
    print(f"total time, buckets off / on: {off['total_s'] / on['total_s']:.1f}x (target >= 5x)")
    print("steady state, us per token: bucketed program vs the program for exactly that length "
          "(target <= 1.3x)")
    for n in steady:
        b, e = on["steady"][str(n)], off["steady"][str(n)]
        print(f"  length {n:4}: {b * 1e6:8.1f} vs {e * 1e6:8.1f} ({b / e:.2f}x)")


if __name__ == "__main__":
    main()
