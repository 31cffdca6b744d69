"""torch.compile(backend="tpu") beside eager, side by side in one run:

(1) one training step of examples/train_gpt.py's model (forward, backward, AdamW; compiled runs
    compile the model and the optimizer step): tpu compiled, tpu Strict eager, CPU eager, and CPU
    with torch.compile's default inductor backend; medians after warm-up;
(2) the time from process start to the end of the first compiled training step, with a cold
    persistent cache (an empty TORCHTPU_CACHE_DIR) and then warm (the same folder again).
"""

import argparse
import os
import sys
import tempfile

import torch

import torchtpu

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from eager_step import step_times
from warm_start import run as start_to_first_step


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--no-inductor", action="store_true",
                        help="skip the CPU inductor run (its first compile takes minutes here)")
    args = parser.parse_args()
    rows = {}
    rows["tpu compiled"] = step_times("tpu", args.steps, args.warmup, compile=True, mode="strict")
    rows["tpu strict eager"] = step_times("tpu", args.steps, args.warmup, mode="strict")
    rows["cpu eager"] = step_times("cpu", args.steps, args.warmup)
    if not args.no_inductor:
        rows["cpu inductor"] = step_times("cpu", args.steps, args.warmup, compile=True)
    m = torchtpu.metrics()
    print(f"(1) train_gpt step (batch 16 x 64 tokens, 4 layers, width 128), median of "
          f"{args.steps} steps after {args.warmup} warm-up  [{torch.tpu.get_device_name()}]")
    for name, t in rows.items():
        print(f"  {name:18} {t * 1000:8.1f} ms")
    compiled = rows["tpu compiled"]
    print(f"  compiled vs strict {rows['tpu strict eager'] / compiled:.2f}x, vs cpu eager "
          f"{rows['cpu eager'] / compiled:.2f}x"
          + (f", vs cpu inductor {rows['cpu inductor'] / compiled:.2f}x"
             if "cpu inductor" in rows else ""))
    print(f"  compiled graphs {m['compiled_graphs']}, replays {m['compiled_replays']}, "
          f"eager runs {m['compiled_eager_runs']}")
    with tempfile.TemporaryDirectory(prefix="torchtpu-bench-cache-") as cache:
        cold, cold_out = start_to_first_step(cache)
        warm, warm_out = start_to_first_step(cache)
    print("(2) process start to the end of the first compiled training step "
          "(benchmarks/warm_start.py details it)")
    for name, seconds, out in (("cold", cold, cold_out), ("warm", warm, warm_out)):
        print(f"  {name} cache {seconds:7.2f} s   (executables compiled {out['compiled']}, "
              f"loaded {out['loaded']})")
    print(f"  warm / cold {warm / cold:.2f}")


if __name__ == "__main__":
    main()
