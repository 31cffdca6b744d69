"""Is a torchtpu program slower than jax.jit because of how torchtpu runs it, or because of its
text? Runs, on the same PJRT plugin (JAX given a second client of torchtpu's plugin):

- torchtpu: `jax.nn.softmax` through `torchtpu.kernels.jax_op`, Strict, launch and wait;
- the same program's StableHLO text (taken from a compiled graph's debug dump), compiled and run
  by JAX's client of the plugin;
- that text with the program's flat storage parameter and result replaced by the tensor's 2-D
  shape (no reshapes around the module);
- `jax.jit` of the same function.

Not a test: prints the medians of --calls calls for --rounds rounds, side by side.
"""

import argparse
import glob
import os
import re
import statistics
import tempfile
import time


def median_ms(fn, calls):
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=512)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    dump = tempfile.mkdtemp(prefix="torchtpu-program-text-")
    os.environ.update(TORCHTPU_COMPILE_DEBUG="1", TORCHTPU_COMPILE_DEBUG_DIR=dump)

    import jax
    import torch
    from jax._src import xla_bridge
    from jax._src.lib import xla_client

    import torchtpu
    from torchtpu import kernels

    plugin = torchtpu.plugin()
    xla_bridge.register_plugin("torchtpu_plugin", library_path=plugin["path"],
                               options=dict(plugin["options"]))
    device = jax.devices("torchtpu_plugin")[0]

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    op = kernels.jax_op(softmax, name="program_text_softmax")
    x = torch.randn(args.rows, args.cols).to("tpu")
    torch.compile(op, backend="tpu")(x).cpu()  # its program's text goes to the dump folder
    flat_text = open(sorted(glob.glob(os.path.join(dump, "*.stablehlo.mlir")))[-1]).read()
    n, shape = args.rows * args.cols, f"{args.rows}x{args.cols}"
    flat, full = f"tensor<{n}xf32>", f"tensor<{shape}xf32>"
    if flat_text.count(f'"stablehlo.reshape"') != 2:
        raise SystemExit(f"unexpected program text:\n{flat_text}")
    shaped_text = flat_text.replace(f"%arg0: {flat}) -> ({flat})", f"%arg0: {full}) -> ({full})")
    shaped_text = re.sub(r'\s*%0 = "stablehlo.reshape"\(%arg0\).*', "", shaped_text)
    shaped_text = re.sub(r'\s*%2 = "stablehlo.reshape"\(%1\).*', "", shaped_text)
    shaped_text = shaped_text.replace('"func.call"(%0)', '"func.call"(%arg0)').replace(
        f'"func.return"(%2) : ({flat})', f'"func.return"(%1) : ({full})')

    client, devices = device.client, xla_client.DeviceList((device,))
    options = xla_client.CompileOptions()
    flat_exe = client.compile_and_load(flat_text, devices, options)
    shaped_exe = client.compile_and_load(shaped_text, devices, options)
    host = x.cpu().numpy()
    x_flat, x_shaped = jax.device_put(host.reshape(-1), device), jax.device_put(host, device)
    jitted = jax.jit(softmax)

    def run(exe, arg):
        for out in exe.execute([arg]):
            out.block_until_ready()

    ways = {
        "torchtpu Strict": lambda: (op(x), torch.tpu.synchronize()),
        "its text via JAX": lambda: run(flat_exe, x_flat),
        "2-D text via JAX": lambda: run(shaped_exe, x_shaped),
        "jax.jit": lambda: jitted(x_shaped).block_until_ready(),
    }
    for fn in ways.values():
        fn()
    print(f"softmax {shape} float32 on {torch.tpu.get_device_name()}, ms per call (median of "
          f"{args.calls}), all on the same plugin:")
    print("".join(f"{name:>20}" for name in ways))
    for _ in range(args.rounds):
        print("".join(f"{median_ms(fn, args.calls):20.3f}" for fn in ways.values()))


if __name__ == "__main__":
    main()
