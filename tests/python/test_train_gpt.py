"""examples/train_gpt.py on "tpu" (no CPU fallback allowed) against the same run on CPU."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPT = os.path.join(REPO, "examples", "train_gpt.py")


def losses(tmp_path, device, steps):
    out = tmp_path / f"{device}.json"
    env = dict(os.environ, TORCHTPU_CPU_FALLBACK="error")
    r = subprocess.run([sys.executable, SCRIPT, "--device", device, "--steps", str(steps),
                        "--dropout", "0", "--losses-out", str(out)],
                       env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    if device == "tpu":
        assert "cpu fallback calls 0" in r.stdout, r.stdout
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train_gpt")
    steps = int(os.environ.get("TORCHTPU_TRAIN_STEPS", "200"))
    return losses(tmp, "tpu", steps), losses(tmp, "cpu", steps)


def test_first_20_steps_match_cpu(runs):
    tpu, cpu = runs
    for step, (a, b) in enumerate(zip(tpu[:20], cpu[:20])):
        assert abs(a - b) <= 1e-3 * abs(b), f"step {step}: tpu {a} vs cpu {b}"


def test_final_loss_matches_cpu_and_training_learns(runs):
    tpu, cpu = runs
    assert len(tpu) == len(cpu)
    assert abs(tpu[-1] - cpu[-1]) <= 0.02 * abs(cpu[-1]), (tpu[-1], cpu[-1])
    assert tpu[-1] < 0.7 * tpu[0]  # it learned something


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
