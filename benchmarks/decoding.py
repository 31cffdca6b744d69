"""Decoding's steady state with host ops on and off: transformers' generate() with a static KV
cache on the small Llama of examples/generate.py, in DeferAndFuse, at lengths whose programs are
already compiled (two warm-up calls first). Each setting runs in a fresh process, alternating, so
that both see the same machine; per token: milliseconds, DeferAndFuse's flushes (programs run)
and host ops. Then the cost of reading to the host (`.cpu()` of a few elements and of larger
tensors, `.item()` of a value an op made on the host), which every token's stopping test pays.

    python benchmarks/decoding.py [--tokens 40] [--calls 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def steady_state(tokens: int, calls: int) -> dict:
    """In this process: ms, flushes and host ops per token over `calls` generate() calls."""
    import time

    import torch

    import torchtpu
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    from generate import small_llama

    model = small_llama().to("tpu")
    prompt = torch.randint(2, 64, (1, 5), generator=torch.Generator().manual_seed(2)).to("tpu")
    options = dict(do_sample=False, attention_mask=torch.ones_like(prompt),
                   cache_implementation="static")
    with torchtpu.eager_mode("defer_and_fuse"):
        for _ in range(2):
            model.generate(prompt, max_new_tokens=tokens, **options)
        before = torchtpu.metrics()
        start = time.perf_counter()
        for _ in range(calls):
            model.generate(prompt, max_new_tokens=tokens, **options).cpu()
        seconds = time.perf_counter() - start
        after = torchtpu.metrics()
    n = calls * tokens
    return {"ms": seconds / n * 1e3,
            "flushes": (after["deferred_flushes"] - before["deferred_flushes"]) / n,
            "host_ops": (after["host_ops"] - before["host_ops"]) / n}


def reads() -> None:
    import torch

    import torchtpu
    from timing import median_s

    held = torch.arange(5, device="tpu")  # made on the host
    print(f"{'read to the host':34}{'us':>10}")
    print(f"{'.item() of a value held on host':34}{median_s(lambda: held[0].item(), 2000, 200) * 1e6:10.1f}")
    for numel in (5, 1 << 20, 1 << 24):
        x = torch.ones(numel, device="tpu") * 2
        torch.tpu.synchronize()
        calls = 20 if numel > 1 << 20 else 2000
        label = f".cpu() of {numel * 4:,} bytes"
        print(f"{label:34}{median_s(x.cpu, calls, 2) * 1e6:10.1f}")
    print(f"[{torch.tpu.get_device_name()}; metrics: {torchtpu.metrics()['host_ops']} host ops]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", choices=("0", "1"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(steady_state(args.tokens, args.calls)))
        return
    print(f"generate(), static cache, DeferAndFuse, {args.calls} calls of {args.tokens} tokens "
          f"after two warm-ups, per token")
    print(f"{'TORCHTPU_HOST_OPS':18}{'ms':>8}{'flushes':>10}{'host ops':>10}")
    for _ in range(args.rounds):
        for setting in ("1", "0"):
            env = dict(os.environ, TORCHTPU_HOST_OPS=setting, HF_HUB_OFFLINE="1")
            r = subprocess.run([sys.executable, __file__, "--one", setting, "--tokens",
                                str(args.tokens), "--calls", str(args.calls)],
                               env=env, capture_output=True, text=True, check=True)
            row = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"{setting:18}{row['ms']:8.3f}{row['flushes']:10.2f}{row['host_ops']:10.2f}")
    sys.path.insert(0, HERE)
    reads()


if __name__ == "__main__":
    main()
