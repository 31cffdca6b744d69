"""examples/train_gpt.py on "tpu" (no CPU fallback allowed), in Strict and DeferAndFuse and with
--compile (torch.compile, backend "tpu"), against the same run on CPU in eager mode."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPT = os.path.join(REPO, "examples", "train_gpt.py")
STEPS = int(os.environ.get("TORCHTPU_TRAIN_STEPS", "60"))  # the loss falls from 4.2 to 2.4


def losses(tmp_path, device, mode="strict"):
    out = tmp_path / f"{device}-{mode}.json"
    compile = mode == "compile"
    env = dict(os.environ, TORCHTPU_CPU_FALLBACK="error",
               TORCHTPU_EAGER_MODE="strict" if compile else mode)
    r = subprocess.run([sys.executable, SCRIPT, "--device", device, "--steps", str(STEPS),
                        "--dropout", "0", "--losses-out", str(out)] + ["--compile"] * compile,
                       env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    if device == "tpu":
        assert "cpu fallback calls 0" in r.stdout, r.stdout
    if compile:  # every step replayed its captured programs: none ran eagerly
        assert "eager runs 0" in r.stdout and "replays 0" not in r.stdout, r.stdout
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    return losses(tmp_path_factory.mktemp("cpu"), "cpu")


# Debug runs Strict's programs, with a wait and checks after each op (test_models runs it on
# models): not again here.
@pytest.fixture(scope="module", params=["strict", "defer_and_fuse", "compile"])
def tpu(request, tmp_path_factory):
    return losses(tmp_path_factory.mktemp(request.param), "tpu", request.param)


def test_first_20_steps_match_cpu(tpu, cpu):
    for step, (a, b) in enumerate(zip(tpu[:20], cpu[:20])):
        assert abs(a - b) <= 1e-3 * abs(b), f"step {step}: tpu {a} vs cpu {b}"


def test_final_loss_matches_cpu_and_training_learns(tpu, cpu):
    assert len(tpu) == len(cpu) == STEPS
    assert abs(tpu[-1] - cpu[-1]) <= 0.02 * abs(cpu[-1]), (tpu[-1], cpu[-1])
    assert tpu[-1] < 0.7 * tpu[0]  # it learned something
