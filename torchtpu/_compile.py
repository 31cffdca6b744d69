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

A graph holding functional collectives (`_c10d_functional` ops, from
torch.distributed._functional_collectives) is split at them, with one warning when it is
compiled: the collectives go through the process group, which stages them through the host, so
they cannot be inside a device program. Each run of compute nodes between them is a graph of its
own, captured and replayed as above; the collectives run eagerly between those, in the graph's
order.

With the persistent cache on, AOTAutograd's result for each Dynamo graph (its forward and
backward graphs and runtime metadata) is saved too, through PyTorch's AOTAutograd cache: a later
process compiling the same graph skips AOTAutograd (see _autograd_cache).

TORCHTPU_COMPILE_DEBUG=1 writes each graph's FX code and each captured program's StableHLO into
TORCHTPU_COMPILE_DEBUG_DIR (default ./torchtpu_compile_debug).
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import warnings

import torch
from torch.fx.passes.split_module import split_module

from . import _buckets, _C

_graph_numbers = itertools.count()
_stats = {"compiled_graphs": 0, "compiled_graphs_loaded": 0, "compiled_captures": 0,
          "compiled_replays": 0, "compiled_eager_runs": 0, "compiled_collective_runs": 0,
          "compiled_bucketed_graphs": 0, "compiled_bucketed_calls": 0}
_COLLECTIVE_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd")


def stats() -> dict:
    """Graphs handed over by AOTAutograd (and how many of them its cache loaded), programs
    captured, calls replayed, calls run eagerly, runs of the collectives between the device
    programs of a graph split at them, and graphs run in shape buckets and their calls."""
    return dict(_stats)


def _debug_directory() -> str | None:
    if os.environ.get("TORCHTPU_COMPILE_DEBUG", "").strip() in ("", "0"):
        return None
    folder = os.environ.get("TORCHTPU_COMPILE_DEBUG_DIR") or os.path.join(
        os.getcwd(), "torchtpu_compile_debug")
    os.makedirs(folder, exist_ok=True)
    return folder


def _write_fx(name: str, gm: torch.fx.GraphModule) -> None:
    folder = _debug_directory()
    if folder:
        with open(os.path.join(folder, f"{name}.fx.py"), "w") as f:
            f.write(gm.print_readable(print_output=False))


class _Graph:
    """One graph without collectives and the programs captured for it, one per signature."""

    def __init__(self, gm: torch.fx.GraphModule, name: str, scalars_move: bool | None = None):
        self.gm = gm
        self.name = name
        self.programs = _C._CompiledGraph()
        self.captures = 0
        self.warned: set[str] = set()
        self.debug = _debug_directory()
        self.scalars_move = not _has_cpu_output(gm) if scalars_move is None else scalars_move
        self.mutated = _buckets.mutated_inputs(gm)
        # Where the 0-d CPU tensor inputs are, and a tpu input: found at the first call (Dynamo's
        # guards keep each input's device and rank for this graph).
        self.scalar_positions: list[int] | None = None
        self.device_position: int | None = None
        _write_fx(name, gm)

    def __call__(self, args: list) -> list:
        args = list(args)
        if _C._capturing():
            _stats["compiled_eager_runs"] += 1
            return list(self.gm(*args))
        moved = self._move_cpu_scalars(args)
        try:
            return self._run(args)
        finally:
            for i, original in moved:  # the graph wrote it: the caller sees the new value
                original.copy_(args[i])

    def _run(self, args: list) -> list:
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

    def _move_cpu_scalars(self, args: list) -> list:
        """0-d CPU tensor inputs (a Python float Dynamo turned into a tensor, a model's CPU
        scalar) become tpu tensors, arguments of the program as Python scalars are in eager mode,
        instead of values baked into it or a reason to run eagerly. Returns (index, the CPU
        tensor) of those the graph writes. (An input at another position that were a 0-d CPU
        tensor all the same would make the graph run eagerly, with a warning: still right.)"""
        if not self.scalars_move:
            return []
        if self.scalar_positions is None:
            tensors = [(i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
            self.scalar_positions = [i for i, a in tensors
                                     if a.device.type == "cpu" and a.dim() == 0]
            self.device_position = next((i for i, a in tensors if a.device.type == "tpu"), None)
        if not self.scalar_positions or self.device_position is None:
            return []
        device = args[self.device_position].device
        moved = []
        for i in self.scalar_positions:
            cpu = args[i]
            args[i] = cpu.to(device)
            if i in self.mutated:
                moved.append((i, cpu))
        return moved

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
            warnings.warn(f"torchtpu: compiled graph {self.name} runs eagerly on these inputs: "
                          f"{why}", stacklevel=2)


class _Bucketed:
    """A graph of varying sizes run in shape buckets (see _buckets): each call pads its inputs
    to its bucket's sizes and runs the rewritten graph, one program per bucket."""

    def __init__(self, name: str, plan, scalars_move: bool | None, seen: tuple):
        self.plan, self.name = plan, name
        # per set of inputs given compact (Plan.graph): the one without first
        self.graphs = {frozenset(): _Graph(plan.gm, name, scalars_move)}
        self.scalars_move = self.graphs[frozenset()].scalars_move
        self.seen = seen  # _outputs_seen() of the graph, which a process loading it cannot ask
        _stats["compiled_bucketed_graphs"] += 1

    def __call__(self, args: list) -> list:
        call = self.plan.call(args)
        padded, spread = call.padded(args)
        graph = self.graphs.get(spread)
        if graph is None:
            name = f"{self.name}_spread_{'_'.join(map(str, sorted(spread)))}"
            graph = self.graphs[spread] = _Graph(self.plan.graph(spread), name, self.scalars_move)
        outputs = graph(padded)
        _stats["compiled_bucketed_calls"] += 1
        return call.unpadded(outputs)


def _has_cpu_output(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph returns a CPU tensor (which its CPU inputs may compute)."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    values: list[torch.fx.Node] = []
    torch.fx.node.map_arg(output.args[0], values.append)
    return any(isinstance(v.meta.get("val"), torch.Tensor) and v.meta["val"].device.type == "cpu"
               for v in values)


def _off_device(args: list) -> str:
    """Why a call with a tensor input that is not on a tpu device runs eagerly."""
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.device.type != "tpu":
            return (f"input {i} is a {a.device.type} tensor ({a.dtype}, shape {list(a.shape)}); "
                    "its values would be baked into the program (move it to tpu; 0-d CPU tensors "
                    "move by themselves unless the graph returns a CPU tensor)")
    return "an input is not a tpu tensor"


def _is_collective(node: torch.fx.Node) -> bool:
    """A functional collective (wait_tensor included), or an element of one's list of results."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return isinstance(node.args[0], torch.fx.Node) and _is_collective(node.args[0])
    return (isinstance(node.target, torch._ops.OpOverload)
            and node.target.namespace in _COLLECTIVE_NAMESPACES)


def _partitions(graph: torch.fx.Graph) -> dict[torch.fx.Node, int]:
    """Each node's partition, numbered in the graph's order: a run of compute nodes is one, a run
    of collectives another. Placeholders, attributes and the output belong to none."""
    ids: dict[torch.fx.Node, int] = {}
    partition, previous = -1, None
    for node in graph.nodes:
        if node.op in ("placeholder", "get_attr", "output"):
            continue
        collective = _is_collective(node)
        partition += collective != previous
        previous = collective
        ids[node] = partition
    return ids


class _DeviceProgram(torch.nn.Module):
    """A run of compute nodes of a graph split at its collectives: a _Graph, captured once per
    signature and replayed like any other."""

    def __init__(self, gm: torch.fx.GraphModule, name: str):
        super().__init__()
        self.compiled = _Graph(gm, name)

    def forward(self, *args):
        return self.compiled(list(args))


class _EagerCollectives(torch.nn.Module):
    """A run of collectives of a split graph: it calls into the process group, eagerly."""

    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__()
        self.gm = gm

    def forward(self, *args):
        _stats["compiled_collective_runs"] += 1
        return self.gm(*args)


def _split_at_collectives(gm: torch.fx.GraphModule, name: str):
    """The graph as one device program per run of compute nodes, its collectives run eagerly
    between them, in the graph's order (split_module calls the partitions in the order of their
    numbers); says so once."""
    ids = _partitions(gm.graph)
    split = split_module(gm, gm, ids.__getitem__, keep_original_order=True, tuple_return=True)
    collective = {ids[n] for n in ids if _is_collective(n)}
    compute = set(ids.values()) - collective
    for i in set(ids.values()):
        sub = getattr(split, f"submod_{i}")
        piece = _DeviceProgram(sub, f"{name}_part{i}") if i in compute else _EagerCollectives(sub)
        setattr(split, f"submod_{i}", piece)
    names = sorted({n.target.name() for n in ids
                    if _is_collective(n) and n.target is not operator.getitem})
    warnings.warn(f"torchtpu: compiled graph {name} holds the collectives {', '.join(names)}, "
                  "which run through the host, not in a device program: it is split into "
                  f"{len(compute)} device programs around them", stacklevel=2)
    return lambda args: list(split(*args))


def _build(gm: torch.fx.GraphModule, kind: str, scalars_move: bool | None = None,
           seen: tuple | None = None):
    """The callable that runs one graph from AOTAutograd: a _Graph, a _Bucketed, or the graph
    split at its collectives. `seen`: _outputs_seen(kind), when the graph comes from a cache."""
    _stats["compiled_graphs"] += 1
    name = f"graph_{next(_graph_numbers)}_{kind}"
    if any(_is_collective(n) for n in gm.graph.nodes):
        _write_fx(name, gm)
        return _split_at_collectives(gm, name)
    seen = _outputs_seen(kind) if seen is None else tuple(seen)
    plan, why = _buckets.plan(gm, *seen)
    if plan is not None:
        return _Bucketed(name, plan, scalars_move, seen)
    if why not in _buckets.NOT_VARYING:
        if len(per_size) >= 100:
            per_size.pop(next(iter(per_size)))
        per_size[name] = why
    return _Graph(gm, name, scalars_move)


# Graphs of varying sizes that compile per size (not in shape buckets), and why: the last 100
# (torchtpu.explain_compiles() prints them).
per_size: dict[str, str] = {}


def _outputs_seen(kind: str) -> tuple[int | None, bool]:
    """How many of a graph's outputs its caller sees (a forward graph's others are saved for the
    backward; None: all of them), and whether PyTorch rebuilds some of them as views of another
    tensor, from the layout the graph returned them in (AOTAutograd's output aliases, and inputs
    whose sizes or strides the graph changes)."""
    if kind == "backward":
        return None, False
    from torch._functorch._aot_autograd.schemas import OutputType
    from torch._guards import TracingContext

    meta = getattr(TracingContext.try_get(), "fw_metadata", None)
    if meta is None:
        return None, True
    plain = (OutputType.non_alias, OutputType.unsafe_view_alias)
    aliased = meta.num_intermediate_bases > 0 or any(
        o.output_type not in plain for o in meta.output_info) or any(
        i.mutates_metadata for i in meta.input_info)  # restrided from the returned layout
    return (meta.num_forward if kind == "forward" else None), aliased


def graph_from_cache(gm: torch.fx.GraphModule, kind: str, scalars_move: bool,
                     seen: tuple | None = None):
    """The callable for a graph that AOTAutograd's cache loaded (without node metadata, but
    for a bucketed graph's values: what _Graph and the buckets read besides comes saved beside
    the graph)."""
    _stats["compiled_graphs_loaded"] += 1
    return _build(gm, kind, scalars_move, seen)


def _compiler(kind: str, cached: bool):
    """AOTAutograd's compiler of one kind of graph; `cached`: its output keeps what AOTAutograd's
    cache needs to save it (a graph split at collectives is never saved)."""
    from . import _autograd_cache

    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        graph = _build(gm, kind)
        if cached and isinstance(graph, (_Graph, _Bucketed)):
            return _autograd_cache.GraphOutputCode.of(gm, kind, graph, graph.scalars_move,
                                                      getattr(graph, "seen", None))
        return _autograd_cache.GraphOutputCode(kind=kind, runner=graph)

    return compile_graph


@functools.cache
def _decompositions() -> dict:
    from torch._decomp import core_aten_decompositions

    return core_aten_decompositions()


def _make_backend(cached: bool):
    """AOTAutograd with the tpu compilers. `cached`: the compilers are marked as returning
    serializable output, which makes AOTAutograd look its result up in its cache first. Made
    anew for each graph: AOTAutograd wraps the backward compiler in place."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import SerializableAOTDispatchCompiler

    from . import _autograd_cache

    def compiler(kind):
        compile_graph = _compiler(kind, cached)
        if cached:
            return SerializableAOTDispatchCompiler(_autograd_cache.GraphOutputCode, compile_graph)
        return compile_graph

    return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                        inference_compiler=compiler("inference"),
                        decompositions=_decompositions(), keep_inference_input_mutations=True)


def backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The "tpu" backend: torch.compile(model, backend="tpu"). With the persistent cache on, what
    AOTAutograd makes of each graph is kept there for the next process (see _autograd_cache)."""
    from . import _autograd_cache  # imports inductor's modules: not at `import torchtpu`

    folder = _autograd_cache.directory()
    if folder is None:
        return _make_backend(cached=False)(gm, example_inputs, **kwargs)
    with _autograd_cache.cached_compile(folder):
        return _make_backend(cached=True)(gm, example_inputs, **kwargs)
