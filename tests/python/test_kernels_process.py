"""torchtpu.kernels and JAX in one process: either may be imported first, torchtpu does not import
JAX itself, and the threads JAX adds come once, not per call or per export. Each order runs in a
fresh interpreter (the PJRT plugin and JAX's backends are chosen once per process)."""

import json

import pytest
import torch
from conftest import run_python

pytest.importorskip("jax")

_BODY = """
import numpy as np

def threads():
    return int(next(l for l in open("/proc/self/status") if l.startswith("Threads:")).split()[1])

from jax._src import xla_bridge
from torchtpu.kernels import jax_op

twice_tanh = jax_op(lambda x: jnp.tanh(x) * 2)
x = torch.linspace(-2, 2, 12).reshape(3, 4)
on_tpu = twice_tanh(x.to("tpu")).cpu()
report["tpu_error"] = (on_tpu - torch.tanh(x) * 2).abs().max().item()
report["after_first_call"] = threads()
report["jax_backends_after_first_call"] = sorted(xla_bridge._backends)
for _ in range(50):
    twice_tanh(x.to("tpu"))
twice_tanh(torch.zeros(7, device="tpu")).cpu()  # a second export
report["after_more_calls"] = threads()
report["jax_error"] = float(np.abs(np.asarray(jnp.tanh(jnp.asarray(x.numpy())) * 2)
                                   - on_tpu.numpy()).max())
print(json.dumps(report))
"""

_JAX_FIRST = """
import json
import jax, jax.numpy as jnp
report = {"jax_before": float(jnp.ones(3).sum())}
import torch, torchtpu
""" + _BODY

_TORCHTPU_FIRST = """
import json, sys
import torch, torchtpu, torchtpu.kernels
report = {"imported_jax": "jax" in sys.modules}
torch.ones(2, device="tpu").cpu()
import jax, jax.numpy as jnp
""" + _BODY


@pytest.fixture(scope="module", params=["jax_first", "torchtpu_first"])
def report(request):
    result = run_python(_JAX_FIRST if request.param == "jax_first" else _TORCHTPU_FIRST)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_both_import_orders_compute_on_both_sides(report):
    assert report["tpu_error"] < 1e-6 and report["jax_error"] < 1e-6


def test_torchtpu_does_not_import_jax(report):
    assert report.get("imported_jax", False) is False


def test_threads_come_once_not_per_call_or_export(report):
    assert report["after_more_calls"] == report["after_first_call"]


@pytest.mark.xfail(strict=True, reason="jax.export lowers for a default device, so the first "
                   "export starts JAX's own CPU client (12 threads, ~60 MiB) though nothing runs "
                   "on it: jax/_src/interpreters/pxla.py, _get_and_check_device_assignment")
def test_tpu_calls_leave_jax_without_a_backend():
    result = run_python("""
        import torch, torchtpu, jax.numpy as jnp
        from jax._src import xla_bridge
        from torchtpu.kernels import jax_op
        jax_op(lambda x: x + 1)(torch.ones(2, device="tpu")).cpu()
        print(sorted(xla_bridge._backends))
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


# A kernel module of the user's own; SCALE and the helper decide what it computes.
_KERNEL_MODULE = """
def helper(x):
    return x * SCALE


def scaled_tanh(x):
    import jax.numpy as jnp  # imported in the call, so a process that never traces never imports
    return helper(jnp.tanh(x))
"""

_WARM = """
import json, sys
import torch, torchtpu
sys.path.insert(0, {folder!r})
import user_kernels
from torchtpu.kernels import jax_op

op = jax_op(user_kernels.scaled_tanh, name="scaled_tanh")
x = torch.linspace(-2, 2, 12).reshape(3, 4)
eager = op(x.to("tpu")).cpu()
compiled = torch.compile(lambda t: op(t) + 1, backend="tpu")(x.to("tpu")).cpu()
m = torchtpu.metrics()
print(json.dumps({{"eager": eager.tolist(), "compiled": compiled.tolist(),
                  "jax_imported": "jax" in sys.modules, "exports": m["kernel_exports"],
                  "from_disk": m["kernel_exports_from_disk"]}}))
"""


def test_a_warm_process_reuses_exports_without_jax(tmp_path):
    """Exports go to the disk cache: a second process runs the op (eagerly and in a compiled
    graph, whose fake implementation needs the output shapes) without importing JAX, with the
    same values; changing what the function reaches (a global of its module) exports afresh."""
    cache, folder = tmp_path / "cache", tmp_path / "code"
    folder.mkdir()
    (folder / "user_kernels.py").write_text("SCALE = 2\n" + _KERNEL_MODULE)

    def run():
        result = run_python(_WARM.format(folder=str(folder)), TORCHTPU_CACHE_DIR=str(cache),
                            PYTHONDONTWRITEBYTECODE="1")  # the source changes below
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout.strip().splitlines()[-1])

    cold, warm = run(), run()
    assert cold["jax_imported"] and cold["exports"] == 1 and cold["from_disk"] == 0
    assert not warm["jax_imported"] and warm["exports"] == 0 and warm["from_disk"] >= 1
    assert warm["eager"] == cold["eager"] and warm["compiled"] == cold["compiled"]
    x = torch.linspace(-2, 2, 12).reshape(3, 4)
    assert torch.allclose(torch.tensor(cold["eager"]), torch.tanh(x) * 2, atol=1e-6)

    (folder / "user_kernels.py").write_text("SCALE = 3\n" + _KERNEL_MODULE)
    changed = run()
    assert changed["exports"] == 1 and changed["from_disk"] == 0
    assert torch.allclose(torch.tensor(changed["eager"]), torch.tanh(x) * 3, atol=1e-6)


_MATMUL = """
import json, sys
import torch, torchtpu
sys.path.insert(0, {folder!r})
import user_matmul
from torchtpu.kernels import jax_op

x = torch.ones(2, 2, device="tpu")
jax_op(user_matmul.matmul, name="matmul")(x, x).cpu()
m = torchtpu.metrics()
print(json.dumps({{"exports": m["kernel_exports"], "from_disk": m["kernel_exports_from_disk"]}}))
"""


def test_exports_made_under_other_jax_settings_are_not_reused(tmp_path):
    """JAX's options set in the environment change what an export holds
    (JAX_DEFAULT_MATMUL_PRECISION writes the dots' precision): a process with other settings
    exports afresh instead of taking another's export from the disk cache."""
    cache, folder = tmp_path / "cache", tmp_path / "code"
    folder.mkdir()
    (folder / "user_matmul.py").write_text("def matmul(a, b):\n    return a @ b\n")

    def run(name, precision):
        dump = tmp_path / name
        result = run_python(_MATMUL.format(folder=str(folder)), TORCHTPU_CACHE_DIR=str(cache),
                            TORCHTPU_DUMP_PROGRAMS=str(dump),
                            JAX_DEFAULT_MATMUL_PRECISION=precision)
        assert result.returncode == 0, result.stderr[-3000:]
        programs = "".join(p.read_text() for p in dump.iterdir())
        return json.loads(result.stdout.strip().splitlines()[-1]), programs

    highest, programs = run("highest", "highest")
    assert highest == {"exports": 1, "from_disk": 0} and "HIGHEST" in programs
    default, programs = run("default", None)
    assert default == {"exports": 1, "from_disk": 0} and "HIGHEST" not in programs
    again, programs = run("again", "highest")
    assert again == {"exports": 0, "from_disk": 1} and "HIGHEST" in programs
