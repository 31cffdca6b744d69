"""Is a torchtpu program slower than jax.jit because of how torchtpu runs it, or because of its
text? Runs, on the same PJRT plugin (JAX given a second client of torchtpu's plugin):

- torchtpu: `jax.nn.softmax` through `torchtpu.kernels.jax_op`, Strict, launch and wait;
- the same program's StableHLO text (written by TORCHTPU_DUMP_PROGRAMS), compiled and run by
  JAX's client of the plugin;
- `jax.jit` of the same function;

torchtpu's parameters are flat storage buffers, reshaped inside the program (see the README's
Eager modes for why not in the tensors' shapes). Not a test: prints the medians of --calls calls
for --rounds rounds, side by side.
"""

import argparse
import glob
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_s  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=512)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    dump = tempfile.mkdtemp(prefix="torchtpu-program-text-")
    os.environ["TORCHTPU_DUMP_PROGRAMS"] = dump

    import jax
    import torch
    from jax._src import xla_bridge
    from jax._src.lib import xla_client

    import torchtpu
    from torchtpu import kernels

    torchtpu.set_eager_mode("strict")  # one program per op, launched at the call

    plugin = torchtpu.plugin()
    xla_bridge.register_plugin("torchtpu_plugin", library_path=plugin["path"],
                               options=dict(plugin["options"]))
    device = jax.devices("torchtpu_plugin")[0]

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    op = kernels.jax_op(softmax, name="program_text_softmax")
    x = torch.randn(args.rows, args.cols).to("tpu")
    op(x).cpu()  # its program's text goes to the dump folder
    texts = [open(p).read() for p in glob.glob(os.path.join(dump, "*.mlir"))]
    text = next(t for t in texts if "func.call" in t)  # the program calling the module
    shape = f"{args.rows}x{args.cols}"
    signature = text[text.index("@main"):text.index("{", text.index("@main"))]
    client, devices = device.client, xla_client.DeviceList((device,))
    options = xla_client.CompileOptions()
    text_exe = client.compile_and_load(text, devices, options)
    host = x.cpu().numpy()
    x_flat = jax.device_put(host.reshape(-1), device)
    x_shaped = jax.device_put(host, device)
    jitted = jax.jit(softmax)

    def run(exe, arg):
        for out in exe.execute([arg]):
            out.block_until_ready()

    ways = {
        "torchtpu Strict": lambda: (op(x), torch.tpu.synchronize()),
        "its text via JAX": lambda: run(text_exe, x_flat),
        "jax.jit": lambda: jitted(x_shaped).block_until_ready(),
    }
    for fn in ways.values():
        fn()
    print(f"softmax {shape} float32 on {torch.tpu.get_device_name()}, ms per call (median of "
          f"{args.calls}), all on the same plugin; torchtpu's program: {signature}")
    print("".join(f"{name:>20}" for name in ways))
    for _ in range(args.rounds):
        print("".join(f"{median_s(fn, args.calls) * 1e3:20.3f}" for fn in ways.values()))


if __name__ == "__main__":
    main()
