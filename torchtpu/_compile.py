"""The torch.compile backend "tpu" (found by Dynamo through the torch_dynamo_backends entry point).

Dynamo captures the Python program; AOTAutograd turns each of its graphs into forward and
backward graphs of core ATen. Each of those runs once per input signature (shapes, strides,
dtypes, how inputs share storage, the values of its non-tensor arguments) through torchtpu's
ordinary ATen kernels under a capture: every op records into one program, nothing runs until the
graph returns, and that program, compiled once (and kept in the persistent cache), is what every
later call with that signature runs, without going through the graph again. Symbolic sizes from
Dynamo's dynamic shapes are therefore specialized per concrete shape at run time.

A graph whose capture cannot be replayed (an op in it reads a value to the host or runs on the
CPU, an input lives on the CPU) runs eagerly on those inputs, with a warning, never a wrong result.

TORCHTPU_COMPILE_DEBUG=1 writes each graph's FX code and each captured program's StableHLO into
TORCHTPU_COMPILE_DEBUG_DIR (default ./torchtpu_compile_debug).
"""

from __future__ import annotations

import itertools
import os
import warnings

import torch

from . import _C

_graph_numbers = itertools.count()
_stats = {"compiled_graphs": 0, "compiled_captures": 0, "compiled_replays": 0,
          "compiled_eager_runs": 0}


def stats() -> dict:
    """Graphs handed over by AOTAutograd, programs captured, calls replayed, calls run eagerly."""
    return dict(_stats)


def _debug_directory() -> str | None:
    if os.environ.get("TORCHTPU_COMPILE_DEBUG", "").strip() in ("", "0"):
        return None
    folder = os.environ.get("TORCHTPU_COMPILE_DEBUG_DIR") or os.path.join(
        os.getcwd(), "torchtpu_compile_debug")
    os.makedirs(folder, exist_ok=True)
    return folder


class _Graph:
    """One graph from AOTAutograd and the programs captured for it, one per signature."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str):
        self.gm = gm
        self.name = f"graph_{next(_graph_numbers)}_{kind}"
        self.programs = _C._CompiledGraph()
        self.captures = 0
        self.warned: set[str] = set()
        # Collectives are staged through the host on the CPU plugin, so such a graph cannot be
        # one device program: its warning names them.
        self.collectives = sorted({n.target.name() for n in gm.graph.nodes
                                   if n.op == "call_function" and isinstance(
                                       n.target, torch._ops.OpOverload)
                                   and n.target.namespace == "_c10d_functional"})
        self.debug = _debug_directory()
        if self.debug:
            with open(os.path.join(self.debug, f"{self.name}.fx.py"), "w") as f:
                f.write(gm.print_readable(print_output=False))
        _stats["compiled_graphs"] += 1

    def __call__(self, args: list) -> list:
        args = list(args)
        if not _C._capturing():
            outputs, signature = self.programs.run(args)
            if outputs is not None:
                _stats["compiled_replays"] += 1
                return outputs
            if signature is not None and not self.programs.eager(signature):
                return self._capture(args, signature)
            if signature is None:
                self._warn(_off_device(args))
        _stats["compiled_eager_runs"] += 1
        return list(self.gm(*args))

    def _capture(self, args: list, signature: bytes) -> list:
        self.programs.begin_capture(args)
        try:
            outputs = list(self.gm(*args))
        except BaseException:
            self.programs.abort_capture()
            raise
        why, text = self.programs.end_capture(signature, args, outputs, self.debug is not None)
        self.captures += 1
        _stats["compiled_captures"] += 1
        if why:
            self._warn(why)
        elif self.debug and text:
            path = os.path.join(self.debug, f"{self.name}_{self.captures}.stablehlo.mlir")
            with open(path, "w") as f:
                f.write(text)
        return outputs

    def _warn(self, why: str) -> None:
        if why not in self.warned:
            self.warned.add(why)
            if self.collectives:
                why = (f"it holds the collectives {', '.join(self.collectives)}, which run "
                       f"through the host, not in the program ({why})")
            warnings.warn(f"torchtpu: compiled graph {self.name} runs eagerly on these inputs: "
                          f"{why}", stacklevel=2)


def _off_device(args: list) -> str:
    """Why a call with a tensor input that is not on a tpu device runs eagerly."""
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.device.type != "tpu":
            return (f"input {i} is a {a.device.type} tensor ({a.dtype}, shape {list(a.shape)}); "
                    "its values would be baked into the program (an optimizer: construct it with "
                    "capturable=True so its step counts live on the device; a Python float that "
                    "Dynamo passes as a tensor: make it a tpu tensor)")
    return "an input is not a tpu tensor"


def _compiler(kind: str):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        graph = _Graph(gm, kind)

        def run(args):  # AOTAutograd's boxed convention: the arguments in one list
            return graph(args)

        run._boxed_call = True
        return run

    return compile_graph


def _make_backend():
    from torch._decomp import core_aten_decompositions
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                        inference_compiler=_compiler("inference"),
                        decompositions=core_aten_decompositions(),
                        keep_inference_input_mutations=True)


_backend = None


def backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The "tpu" backend: torch.compile(model, backend="tpu")."""
    global _backend
    if _backend is None:
        _backend = _make_backend()
    return _backend(gm, example_inputs, **kwargs)
