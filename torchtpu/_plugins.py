"""Which PJRT plugin backs "tpu": discovery from the environment and the installed wheels."""

from __future__ import annotations

import dataclasses
import importlib.util
import os

PLATFORMS = ("auto", "cpu", "cuda", "tpu")

# (platform, package holding the plugin, file name, pip install hint)
_KNOWN = (
    ("tpu", "libtpu", "libtpu.so", "pip install libtpu"),
    ("cuda", "jax_plugins.xla_cuda13", "xla_cuda_plugin.so", "pip install jax-cuda13-pjrt"),
    ("cuda", "jax_plugins.xla_cuda12", "xla_cuda_plugin.so", "pip install jax-cuda12-pjrt"),
    ("cuda", "xla_plugins.xla_cuda13_pjrt", "xla_cuda13_pjrt.so", "pip install xla-cuda13-pjrt"),
    ("cpu", "xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so", "pip install xla-cpu-pjrt==0.0.1"),
)


@dataclasses.dataclass
class PluginChoice:
    path: str  # "" when nothing usable was found
    platform: str
    options: dict
    unavailable: str = ""  # why there is no plugin, as one sentence for the user


def _installed(package: str, filename: str) -> str | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    roots = list(spec.submodule_search_locations or [])
    if spec.origin and not roots:
        roots = [os.path.dirname(spec.origin)]
    for root in roots:
        path = os.path.join(root, filename)
        if os.path.isfile(path):
            return path
    return None


def _find(platform: str) -> str | None:
    if platform == "tpu" and os.environ.get("TPU_LIBRARY_PATH"):
        return os.environ["TPU_LIBRARY_PATH"]
    for p, package, filename, _ in _KNOWN:
        if p == platform:
            path = _installed(package, filename)
            if path:
                return path
    return None


def _gpu_present() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")


# PyTorch numbers a device with an int8 (c10::DeviceIndex): "tpu:127" is the last it can name.
MAX_DEVICES = 128


def _num_devices() -> int:
    text = os.environ.get("TORCHTPU_NUM_DEVICES", "1")
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"TORCHTPU_NUM_DEVICES must be a positive integer, not {text!r}")
    if n > MAX_DEVICES:
        raise ValueError(f"TORCHTPU_NUM_DEVICES must be at most {MAX_DEVICES} (PyTorch numbers "
                         f"devices with an int8), not {text!r}")
    return n


def _options(platform: str) -> dict:
    if platform == "cpu":
        return {"cpu_device_count": _num_devices()}
    if platform == "cuda":
        # Allocate on demand, as PyTorch does, instead of taking 75% of the GPU at start.
        return {"preallocate": False}
    return {}


def _platform_of(path: str) -> str:
    name = os.path.basename(path).lower()
    if "tpu" in name:
        return "tpu"
    if "cuda" in name or "gpu" in name:
        return "cuda"
    if "cpu" in name:
        return "cpu"
    return ""


def choose() -> PluginChoice:
    """The plugin to load, from TORCHTPU_PJRT_PLUGIN, else TORCHTPU_PLATFORM (default auto)."""
    platform = os.environ.get("TORCHTPU_PLATFORM", "auto").strip().lower() or "auto"
    if platform not in PLATFORMS:
        return PluginChoice("", "", {}, f"torchtpu: TORCHTPU_PLATFORM must be one of "
                            f"{', '.join(PLATFORMS)}, not {platform!r}")
    try:
        return _choose(platform)
    except ValueError as e:  # reported at first use: `import torch` must keep working
        return PluginChoice("", platform, {}, f"torchtpu: {e}")


def _choose(platform: str) -> PluginChoice:
    explicit = os.environ.get("TORCHTPU_PJRT_PLUGIN")
    if explicit:
        p = platform if platform != "auto" else _platform_of(explicit)
        return PluginChoice(explicit, p, _options(p))
    if platform == "auto":
        order = ["tpu"] + (["cuda"] if _gpu_present() else []) + ["cpu"]
    else:
        order = [platform]
    for p in order:
        path = _find(p)
        if path:
            return PluginChoice(path, p, _options(p))
    hints = "; ".join(f"{hint} for {p}" for p, _, _, hint in _KNOWN if p in order)
    return PluginChoice("", platform, {}, f"torchtpu: no PJRT plugin found for "
                        f"TORCHTPU_PLATFORM={platform}. Install one ({hints}) or set "
                        f"TORCHTPU_PJRT_PLUGIN to a plugin .so")
