"""Can one program serve every length up to a bound? StableHLO's bounded dynamism on the plugin
that backs "tpu": a program whose input is padded to --bound rows and made `n` rows long at run
time (stablehlo.set_dimension_size, `n` a device argument), beside a program compiled for
exactly `n` rows, on the same plugin (JAX given a client of torchtpu's plugin, as in
benchmarks/program_text.py).

The program crosses the varying dimension the ways a model does: a contraction over it (x^T x), a
matmul keeping it (x w), a max and a softmax-style log-sum-exp over it. For each length it
prints whether the bounded program's results equal NumPy's on the first `n` rows (the plugin
must mask the padding itself) and the run time of both programs (medians of --calls), so the
cost of running at the bound instead of at `n` is measured, not assumed.

    python benchmarks/bounded_shapes.py [--bound 512] [--lengths 1,7,100,333,512]
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_s  # noqa: E402

WIDTH = 64


def program(rows: int, bounded: bool) -> str:
    """StableHLO of the test program over `rows` rows: padded rows made dynamic if `bounded`."""
    static = f"tensor<{rows}x{WIDTH}xf32>"
    t = f"tensor<?x{WIDTH}xf32, #stablehlo.bounds<{rows}, ?>>" if bounded else static
    size_arg = ", %n: tensor<i32>" if bounded else ""
    # The rows are %d: made from the padded %x at the run-time length when bounded.
    enter = (f"%d = stablehlo.set_dimension_size %x, %n, dim = 0 : ({static}, tensor<i32>) -> {t}"
             if bounded else "")
    # The row maxima broadcast back over the rows: at the run-time length when bounded.
    broadcast = (f"""%mb0 = stablehlo.broadcast_in_dim %m, dims = [1]
      : (tensor<{WIDTH}xf32>) -> {static}
  %rows = stablehlo.get_dimension_size %y, dim = 0 : ({t}) -> tensor<i32>
  %mb = stablehlo.set_dimension_size %mb0, %rows, dim = 0 : ({static}, tensor<i32>) -> {t}"""
                 if bounded else
                 f"%mb = stablehlo.broadcast_in_dim %m, dims = [1] : (tensor<{WIDTH}xf32>) -> {t}")
    square = f"tensor<{WIDTH}x{WIDTH}xf32>"
    return f"""
func.func @main(%{"x" if bounded else "d"}: {static}{size_arg}, %w: {square})
    -> ({square}, tensor<{WIDTH}xf32>, tensor<f32>) {{
  {enter}
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %g = stablehlo.dot_general %d, %d, contracting_dims = [0] x [0] : ({t}, {t}) -> {square}
  %y = stablehlo.dot_general %d, %w, contracting_dims = [1] x [0] : ({t}, {square}) -> {t}
  %m = stablehlo.reduce(%y init: %ninf) applies stablehlo.maximum across dimensions = [0]
      : ({t}, tensor<f32>) -> tensor<{WIDTH}xf32>
  {broadcast}
  %sh = stablehlo.subtract %y, %mb : {t}
  %e = stablehlo.exponential %sh : {t}
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [0]
      : ({t}, tensor<f32>) -> tensor<{WIDTH}xf32>
  %lse = stablehlo.log %s : tensor<{WIDTH}xf32>
  %tot = stablehlo.reduce(%lse init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<{WIDTH}xf32>, tensor<f32>) -> tensor<f32>
  return %g, %m, %tot : {square}, tensor<{WIDTH}xf32>, tensor<f32>
}}
"""


def reference(x: np.ndarray, w: np.ndarray):
    y = x @ w
    m = y.max(0)
    return x.T @ x, m, np.log(np.exp(y - m).sum(0)).sum()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bound", type=int, default=512)
    parser.add_argument("--lengths", default="1,7,100,333,512")
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()

    import jax
    from jax._src import xla_bridge
    from jax._src.lib import xla_client

    import torchtpu

    plugin = torchtpu.plugin()
    xla_bridge.register_plugin("torchtpu_plugin", library_path=plugin["path"],
                               options=dict(plugin["options"]))
    device = jax.devices("torchtpu_plugin")[0]
    devices = xla_client.DeviceList((device,))

    def compiled(text):
        return device.client.compile_and_load(text, devices, xla_client.CompileOptions())

    def run(exe, *arrays):
        for out in exe.execute(list(arrays)):
            out.block_until_ready()

    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.bound, WIDTH)).astype(np.float32)
    w = (rng.standard_normal((WIDTH, WIDTH)) * 0.1).astype(np.float32)
    bounded = compiled(program(args.bound, bounded=True))
    x_padded, w_device = jax.device_put(x, device), jax.device_put(w, device)
    print(f"bound {args.bound} rows x {WIDTH}, one bounded program for every length, on "
          f"{torch_device_name()}; run time in us (median of {args.calls})")
    for n in (int(v) for v in args.lengths.split(",")):
        size = jax.device_put(np.int32(n), device)
        outputs = [np.asarray(o) for o in bounded.execute([x_padded, size, w_device])]
        exact = all(np.allclose(o, r, rtol=1e-4, atol=1e-4)
                    for o, r in zip(outputs, reference(x[:n], w)))
        static = compiled(program(n, bounded=False))
        x_n = jax.device_put(x[:n].copy(), device)
        t_bounded = median_s(lambda: run(bounded, x_padded, size, w_device), args.calls, 3) * 1e6
        t_static = median_s(lambda: run(static, x_n, w_device), args.calls, 3) * 1e6
        print(f"  n={n:5}: equal to NumPy {exact}; bounded {t_bounded:8.0f}, compiled for n "
              f"{t_static:8.0f} ({t_bounded / t_static:.2f}x)")


def torch_device_name():
    import torch

    return torch.tpu.get_device_name()


if __name__ == "__main__":
    main()
