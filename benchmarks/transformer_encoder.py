"""nn.TransformerEncoder's inference with a key padding mask on "tpu": through its nested fast
path (the default, `enable_nested_tensor=True`: the batch becomes a nested tensor, whose lengths
are read to the host) against the same encoder built with `enable_nested_tensor=False` (its layers
take the mask), and on the CPU, side by side in one process, alternating. Milliseconds a call,
each call's output read to the host, over --rounds rounds of --calls calls, in the process's
eager mode (TORCHTPU_EAGER_MODE).

    python benchmarks/transformer_encoder.py [--batch 8] [--length 128] [--width 256]
"""

import argparse
import copy
import statistics
import time

import torch

import torchtpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(args.width, 8, 4 * args.width, batch_first=True)
    lengths = torch.randint(1, args.length + 1, (args.batch,))
    padding = torch.arange(args.length)[None] >= lengths[:, None]
    x = torch.randn(args.batch, args.length, args.width)
    settings = {}
    for device in ("tpu", "cpu"):
        for nested in (True, False):
            encoder = torch.nn.TransformerEncoder(copy.deepcopy(layer), args.layers,
                                                  enable_nested_tensor=nested)
            settings[(device, nested)] = (encoder.eval().to(device), x.to(device),
                                          padding.to(device))
    times = {key: [] for key in settings}
    with torch.no_grad():
        for encoder, xs, mask in settings.values():  # warm-up: compiles
            for _ in range(3):
                encoder(xs, src_key_padding_mask=mask).cpu()
        for _ in range(args.rounds):
            for key, (encoder, xs, mask) in settings.items():
                start = time.perf_counter()
                for _ in range(args.calls):
                    encoder(xs, src_key_padding_mask=mask).cpu()
                times[key].append((time.perf_counter() - start) / args.calls * 1e3)
    for (device, nested), values in times.items():
        path = "nested fast path" if nested else "enable_nested_tensor=False"
        print(f"{device:4} {path:27} median {statistics.median(values):7.2f} ms  "
              f"(rounds: {' '.join(f'{v:.2f}' for v in values)})")
    print(f"eager mode {torchtpu.get_eager_mode()}; calls that fell back to the CPU: "
          f"{torchtpu.metrics()['cpu_fallback_calls']}")


if __name__ == "__main__":
    main()
