"""Program parameters in the tensors' shapes: where the plugin binds an argument by its bytes (the
CPU plugin does), a storage that a view reads whole enters the program in that view's shape, not
as a flat buffer reshaped inside it; TORCHTPU_SHAPED_PARAMETERS=0 keeps the flat form. Values are
the same either way, in place updates (donated buffers) and views included."""

import glob
import json
import os

import pytest
import torch
from conftest import run_python

_SCRIPT = """
import glob, json, os
import torch, torchtpu

torch.manual_seed(0)
x = torch.randn(16, 32)
w = torch.randn(32, 8)

def step(x, w):
    y = torch.softmax(x, -1) @ w
    return y.sum(0), x[:, 1:5].amax(1)

compiled = torch.compile(step, backend="tpu")
outs = [compiled(x.to("tpu"), w.to("tpu")) for _ in range(2)]
eager = step(x.to("tpu"), w.to("tpu"))
acc = torch.zeros(4, 8, device="tpu")
for _ in range(3):
    acc.add_(torch.ones(4, 8, device="tpu"))  # written in place, its buffer donated
    acc.mul_(0.5)
texts = [open(p).read() for p in sorted(glob.glob(os.path.join(os.environ["DUMP"], "*.mlir")))]
print(json.dumps({
    "compiled": [[t.cpu().tolist() for t in o] for o in outs],
    "eager": [t.cpu().tolist() for t in eager],
    "acc": acc.cpu().tolist(),
    "main": [t[t.index("@main"):t.index(")", t.index("@main"))] for t in texts],
}))
"""


def _run(tmp_path, shaped: bool) -> dict:
    dump = tmp_path / ("shaped" if shaped else "flat")
    result = run_python(_SCRIPT, DUMP=str(dump), TORCHTPU_COMPILE_DEBUG="1",
                        TORCHTPU_COMPILE_DEBUG_DIR=str(dump),
                        TORCHTPU_SHAPED_PARAMETERS=None if shaped else "0")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_parameters_take_the_tensors_shapes_with_the_same_values(tmp_path):
    shaped, flat = _run(tmp_path, True), _run(tmp_path, False)
    assert any("tensor<16x32xf32>" in m and "tensor<32x8xf32>" in m for m in shaped["main"])
    assert all("16x32" not in m and "tensor<512xf32>" in m for m in flat["main"])
    assert shaped["compiled"] == flat["compiled"]
    assert shaped["eager"] == flat["eager"] == shaped["compiled"][0]
    assert shaped["acc"] == flat["acc"] == [[0.875] * 8] * 4
