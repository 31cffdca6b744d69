"""Warm start of torch.compile(backend="tpu"): a second process with the same cache folder loads
AOTAutograd's results from PyTorch's AOTAutograd cache instead of making them again."""

import json
import os
import pickle
import shutil

import pytest
import torch

import torchtpu._autograd_cache
from conftest import run_python

# One training step: the model's loss compiled (one Dynamo graph: a forward and a backward graph),
# the optimizer step eager. WIDTH and ACTIVATION change the model's shapes and code.
PROGRAM = """
import hashlib, json, os
import torch, torchtpu
from torch._dynamo.utils import counters

width, activation = int(os.environ["WIDTH"]), getattr(torch, os.environ["ACTIVATION"])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.Linear(width, 4)).to("tpu")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

@torch.compile(backend="tpu")
def loss_of(x, y):
    return torch.nn.functional.mse_loss(model[1](activation(model[0](x))), y)

x, y = torch.randn(16, 8).to("tpu"), torch.randn(16, 4).to("tpu")
loss = loss_of(x, y)
loss.backward()
optimizer.step()
values = torch.cat([loss.detach().cpu().reshape(1)]
                   + [p.detach().cpu().flatten() for p in model.parameters()])
print(json.dumps({"digest": hashlib.sha256(values.numpy().tobytes()).hexdigest(),
                  "aot": dict(counters["aot_autograd"]), "tpu": torchtpu._compile.stats(),
                  "compiled": torchtpu.metrics()["executables_compiled"]}))
"""


def run(cache, width=16, activation="relu", **env):
    r = run_python(PROGRAM, TORCHTPU_CACHE_DIR=str(cache), WIDTH=str(width),
                   ACTIVATION=activation, **env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def entries(cache):
    folder = os.path.join(cache, "aotautograd")
    return sorted(os.path.join(folder, key, name) for key in os.listdir(folder)
                  for name in os.listdir(os.path.join(folder, key)))


@pytest.fixture(scope="module")
def cold_and_warm(tmp_path_factory):
    """The cache folder after two processes, and what each printed."""
    cache = tmp_path_factory.mktemp("cache")
    cold, _ = run(cache)
    warm, _ = run(cache)
    return cache, cold, warm


@pytest.fixture
def saved(cold_and_warm, tmp_path):
    """A copy of that folder, for a test to damage."""
    shutil.copytree(cold_and_warm[0], tmp_path, dirs_exist_ok=True)
    return tmp_path


def test_warm_process_skips_aot_autograd_with_the_same_results(cold_and_warm):
    _, cold, warm = cold_and_warm
    assert cold["aot"].get("autograd_cache_miss") == 1
    assert cold["aot"].get("autograd_cache_saved") == 1
    assert cold["tpu"]["compiled_graphs_loaded"] == 0
    assert warm["aot"].get("autograd_cache_hit") == 1
    assert "autograd_cache_miss" not in warm["aot"]
    assert warm["tpu"]["compiled_graphs_loaded"] == warm["tpu"]["compiled_graphs"] == 2
    assert warm["compiled"] == 0  # the programs come from the executable cache
    assert warm["digest"] == cold["digest"]  # bitwise: the loss and the parameters after the step


BUCKETED = """
import hashlib, json, os
import torch, torchtpu
from torch._dynamo.utils import counters

torch.manual_seed(0)
w = torch.randn(6, 6).to("tpu").requires_grad_()

@torch.compile(backend="tpu")
def loss_of(x):
    return ((x @ w).softmax(1) * x).mean(1).square().sum()

values = []
for n in (3, 5, 9, 30, 7):
    x = torch.randn(2, n, 6, generator=torch.Generator().manual_seed(n)).to("tpu")
    if os.environ["MARK"] == "1":
        torch._dynamo.mark_dynamic(x, 1, min=2, max=40)
    loss = loss_of(x)
    loss.backward()
    values += [loss.detach().cpu().reshape(1), w.grad.cpu().flatten()]
    w.grad = None
print(json.dumps({"digest": hashlib.sha256(torch.cat(values).numpy().tobytes()).hexdigest(),
                  "aot": dict(counters["aot_autograd"]), "tpu": torchtpu._compile.stats()}))
"""


@pytest.mark.parametrize("mark", [False, True])
def test_bucketed_graphs_are_saved_and_loaded(tmp_path, mark):
    """A graph over varying lengths, bucketed, is saved with its symbolic sizes: a warm process
    loads it and runs the same buckets (mark_dynamic's max included) with the same results."""
    def once():
        r = run_python(BUCKETED, TORCHTPU_CACHE_DIR=str(tmp_path), MARK=str(int(mark)))
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    cold, warm = once(), once()
    assert warm["digest"] == cold["digest"]
    assert cold["aot"].get("autograd_cache_saved", 0) >= 1
    assert warm["aot"].get("autograd_cache_hit", 0) == cold["aot"]["autograd_cache_saved"]
    assert warm["tpu"]["compiled_graphs_loaded"] >= 2  # the bucketed forward and backward
    for key in ("compiled_bucketed_graphs", "compiled_bucketed_calls", "compiled_captures"):
        assert warm["tpu"][key] == cold["tpu"][key], key
    if mark:  # one program per graph, at the max
        assert warm["tpu"]["compiled_captures"] == 2


@pytest.mark.parametrize("change", [{"width": 24}, {"activation": "tanh"}])
def test_changed_model_does_not_reuse_a_saved_result(saved, cold_and_warm, change):
    changed, _ = run(saved, **change)
    assert changed["aot"].get("autograd_cache_miss") == 1
    assert "autograd_cache_hit" not in changed["aot"]
    assert changed["tpu"]["compiled_graphs_loaded"] == 0
    assert changed["digest"] != cold_and_warm[1]["digest"]


def test_unreadable_entry_is_compiled_again(saved, cold_and_warm):
    (path,) = entries(saved)
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    again, _ = run(saved)
    assert "autograd_cache_hit" not in again["aot"]
    assert again["tpu"]["compiled_graphs_loaded"] == 0
    assert again["digest"] == cold_and_warm[1]["digest"]


def test_nothing_is_saved_with_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHTPU_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCHTPU_CACHE", "0")
    assert torchtpu._autograd_cache.directory() is None
    assert os.listdir(tmp_path) == []


def test_folder_others_can_write_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHTPU_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "aotautograd"
    folder.mkdir(mode=0o700)
    folder.chmod(0o777)
    with pytest.warns(UserWarning, match="is not a private folder of this user"):
        assert torchtpu._autograd_cache.directory() is None
    folder.chmod(0o700)
    assert torchtpu._autograd_cache.directory() == str(folder)


def test_folder_that_cannot_be_made_is_not_used(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TORCHTPU_CACHE_DIR", str(tmp_path / "file"))
    with pytest.warns(UserWarning, match="cannot use"):
        assert torchtpu._autograd_cache.directory() is None


AOT_COMPILE = """
import hashlib, json, os
import torch, torchtpu
from torch._dynamo.utils import counters

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

torch.manual_seed(0)
model = Net().to("tpu")
x = torch.randn(16, 8).to("tpu")
path = os.environ["SAVED"]
if not os.path.exists(path):
    compiled = torch.compile(model.forward, fullgraph=True, backend="tpu").aot_compile(((x,), {}))
    compiled.save_compiled_function(path)
else:
    with open(path, "rb") as f:
        compiled = torch.compiler.load_compiled_function(f)
out = compiled(model, x)
out.sum().backward()
values = torch.cat([out.detach().cpu().flatten()] + [p.grad.cpu().flatten()
                                                     for p in model.parameters()])
print(json.dumps({"digest": hashlib.sha256(values.numpy().tobytes()).hexdigest(),
                  "traced": counters["stats"].get("unique_graphs", 0),
                  "tpu": torchtpu._compile.stats()}))
"""


def test_aot_compile_saves_a_function_that_loads_without_dynamo(tmp_path):
    """torch's explicit precompile API, on the backend's serializable outputs."""
    def run_it():
        r = run_python(AOT_COMPILE, TORCHTPU_CACHE_DIR=str(tmp_path / "cache"),
                       SAVED=str(tmp_path / "forward.bin"))
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    saved, loaded = run_it(), run_it()
    assert saved["traced"] == 1 and saved["tpu"]["compiled_graphs_loaded"] == 0
    assert loaded["traced"] == 0  # Dynamo did not run
    assert loaded["tpu"]["compiled_graphs_loaded"] == 2  # forward and backward
    assert loaded["digest"] == saved["digest"]


def saved_output():
    """The saved form of a one-op graph's output (as AOTAutograd's cache pickles it)."""
    gm = torch.fx.symbolic_trace(lambda x: (x + 1,))  # AOTAutograd graphs return tuples
    output = torchtpu._autograd_cache.GraphOutputCode.of(gm, "forward", gm, True)
    output.prepare_for_serialization()
    return pickle.loads(pickle.dumps(output))


def test_saved_graph_runs_after_loading():
    output = saved_output()
    output.post_compile([], None, {})
    (result,) = output([torch.ones(2, device="tpu")])
    assert result.cpu().tolist() == [2.0, 2.0]


def test_saved_graph_from_another_torchtpu_is_refused():
    output = saved_output()
    output.made_by = "torchtpu-0.0.1-0123"
    with pytest.raises(RuntimeError, match="compiled by another torchtpu or plugin"):
        output.post_compile([], None, {})


def test_saved_graph_with_other_bytes_is_refused():
    output = saved_output()
    output.graph = output.graph.replace(b"add", b"sub")
    with pytest.raises(RuntimeError, match="a saved forward graph is corrupted"):
        output.post_compile([], None, {})  # AOTAutograd's cache then compiles the graph anew
