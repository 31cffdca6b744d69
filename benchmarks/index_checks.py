"""The cost of the device-side index checks: one training step of examples/train_gpt.py's model
(its embedding and cross-entropy are checked) with the checks on and off, side by side in one run,
in Strict, DeferAndFuse and compiled. Rounds alternate on/off so that a slower stretch of a noisy
machine hits both; each figure is the median over all rounds.
"""

import argparse
import os
import statistics
import sys

import torch

import torchtpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eager_step import step_times


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"train_gpt step, medians of {args.rounds} rounds of {args.steps} steps, checks on vs "
          f"off  [{torch.tpu.get_device_name()}]")
    for name, mode, compiled in [("strict", "strict", False),
                                 ("defer_and_fuse", "defer_and_fuse", False),
                                 ("compiled", "strict", True)]:
        times = {True: [], False: []}
        with torchtpu.eager_mode(mode):
            for _ in range(args.rounds):
                for checks in (True, False):
                    torchtpu._C._set_index_checks(checks)
                    times[checks].append(step_times("tpu", args.steps, 2, compile=compiled))
        torchtpu._C._set_index_checks(True)
        on, off = statistics.median(times[True]), statistics.median(times[False])
        print(f"  {name:15} on {on * 1000:7.1f} ms   off {off * 1000:7.1f} ms   "
              f"cost {100 * (on / off - 1):+.1f} %")


if __name__ == "__main__":
    main()
