"""Start to the first compiled training step of examples/train_gpt.py's model (forward, backward
and AdamW, the model and the optimizer step compiled), in fresh processes:

  bare        `import torch, torchtpu`, the data and the model on the device, no step: the part
              of every run that is not compilation;
  cold        an empty TORCHTPU_CACHE_DIR: Dynamo, AOTAutograd, captures and XLA compilation;
  warm (executables only)   the same folder again, with PyTorch's AOTAutograd cache turned off
              (TORCHINDUCTOR_AUTOGRAD_CACHE=0): how a warm process started before the AOTAutograd
              results were saved;
  warm        the same folder again: executables and AOTAutograd results loaded, Dynamo traced.

Each time is from the parent starting the process to the child printing the end of its step (or
of the model's construction), the median of --repeats runs. The compile-related part of a run is
its time minus the bare one; the target is a warm part at most 1/5 of the cold part.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = f"""
import json, os, sys, time
sys.path.insert(0, {os.path.join(HERE, "..", "examples")!r})
import torch, torchtpu
from torch._dynamo.utils import counters
from train_gpt import GPT, batches, load_text, training_step
data, vocab = load_text()
torch.manual_seed(0)
model = GPT(vocab, 64).to("tpu")
step = training_step(model, "tpu", compile=True)
x, y = next(batches(data, 64, 16, 0))
x, y = x.to("tpu"), y.to("tpu")
torch.tpu.synchronize()
if os.environ["WARM_START_BARE"] == "1":
    print(json.dumps({{"end": time.time()}}))
    sys.exit(0)
loss = step(x, y).item()
end = time.time()
m = torchtpu.metrics()
print(json.dumps({{"end": end, "loss": loss, "aot": dict(counters["aot_autograd"]),
                  "compiled": m["executables_compiled"],
                  "loaded": m["executables_loaded_from_disk"]}}))
"""


def run(cache: str, bare: bool = False, **env) -> tuple[float, dict]:
    """Seconds from starting the process to the end of its first step, and what it printed."""
    env = dict(os.environ, TORCHTPU_CACHE_DIR=cache, WARM_START_BARE=str(int(bare)), **env)
    start = time.time()
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       timeout=1800, check=False)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return out["end"] - start, out


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times = {"bare": [], "cold": [], "warm (executables only)": [], "warm": []}
    last = {}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="torchtpu-warm-start-") as cache:
            times["bare"].append(run(cache, bare=True)[0])
            for name, env in (("cold", {}), ("warm (executables only)",
                                             {"TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}),
                              ("warm", {})):
                seconds, last[name] = run(cache, **env)
                times[name].append(seconds)
    median = {name: statistics.median(t) for name, t in times.items()}
    bare = median["bare"]
    cold_part = median["cold"] - bare
    print(f"start to the end of the first compiled train_gpt step (batch 16 x 64 tokens, 4 layers, "
          f"width 128), median of {args.repeats}")
    print(f"  {'bare import + model':26} {bare:6.2f} s")
    for name in ("cold", "warm (executables only)", "warm"):
        part = median[name] - bare
        out = last[name]
        print(f"  {name:26} {median[name]:6.2f} s   compile-related {part:6.2f} s "
              f"({part / cold_part:.2f} of cold)   executables compiled {out['compiled']}, "
              f"loaded {out['loaded']}; AOTAutograd cache "
              f"{ {k: v for k, v in out['aot'].items() if k.startswith('autograd_cache')} }")
    if len({last[name]["loss"] for name in last}) != 1:
        print(f"  the first losses differ: { {name: last[name]['loss'] for name in last} }")
    ratio = (median["warm"] - bare) / cold_part
    print(f"  warm / cold compile-related part {ratio:.2f} (target at most 0.20: "
          f"{'met' if ratio <= 0.2 else 'not met'})")


if __name__ == "__main__":
    main()
