"""torchtpu: an XLA accelerator as the PyTorch device "tpu", through any PJRT plugin.

    import torch, torchtpu
    x = torch.ones(3, device="tpu")

`import torch` alone also loads it (the torch.backends entry point), unless
TORCH_DEVICE_BACKEND_AUTOLOAD=0.
"""

from __future__ import annotations

import atexit


def _autoload() -> None:
    """Entry point of the torch.backends group: importing this module does the work. Defined
    before `import torch`, which calls it when `import torchtpu` comes first."""


import torch

__version__ = "0.1.0"

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from . import _C, _compile, _config, _plugins, device_module
from . import _compile_cache as _cache

_choice = _plugins.choose()
try:
    _cache_dir, _cache_max = _cache.directory() or "", _cache.max_bytes()
    _memory_max = _cache.memory_max_bytes()
except ValueError as _e:  # reported at first use, like a plugin problem
    _choice.unavailable, _cache_dir, _cache_max, _memory_max = f"torchtpu: {_e}", "", 0, 0
    _choice.path = ""
_C._configure(_choice.path, _choice.platform, _choice.options, _choice.unavailable, _cache_dir,
              _cache_max, __version__, _memory_max,
              _config.flag("TORCHTPU_KEEP_HOST_MEMORY", True))
_C._set_cpu_fallback_policy(_config.choice("TORCHTPU_CPU_FALLBACK", ("warn", "error"), "warn"))
_C._set_index_checks(_config.flag("TORCHTPU_INDEX_CHECKS", True))
_C._set_host_ops(_config.flag("TORCHTPU_HOST_OPS", True))

from .compiles import compile_log, explain_compiles
from .eager import eager_mode, get_eager_mode, set_eager_mode

eager._from_environment()
compiles._from_environment()
# Daemon threads still running tpu ops at exit wait in the engine instead of aborting the process.
atexit.register(_C._close_for_exit)

if not hasattr(torch, "tpu"):
    torch._register_device_module("tpu", device_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)

from . import _multiprocessing
from . import fused_optim as _fused_optim
from .topology import distributed_mesh

_fused_optim.install()
_multiprocessing.install()

if torch.distributed.is_available():  # the c10d backend "tpu" (torch.distributed is loaded already)
    from . import distributed as _distributed

    _distributed._register()


def metrics() -> dict:
    """Counters of this process: executables compiled, cache hits/misses, compile seconds,
    deferred flushes, torch.compile graphs/captures/replays/eager runs, and the ops that fell
    back to the CPU (with their call counts), JAX functions exported (torchtpu.kernels), and
    `compile_reasons`: why programs were compiled, the ten most frequent reasons with their
    counts and Python lines (torchtpu.compiles.top_reasons)."""
    from . import kernels

    return {**_C._metrics(), **_compile.stats(), **kernels.stats(),
            "compile_reasons": compiles.top_reasons()}


def plugin() -> dict:
    """Which PJRT plugin backs "tpu" (chosen from TORCHTPU_PJRT_PLUGIN / TORCHTPU_PLATFORM)."""
    return {"path": _choice.path, "platform": _choice.platform, "options": dict(_choice.options),
            "unavailable": _choice.unavailable}


__all__ = ["__version__", "compile_log", "distributed_mesh", "eager_mode", "explain_compiles",
           "get_eager_mode", "metrics", "plugin", "set_eager_mode"]
