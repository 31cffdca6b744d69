"""Warm start of torch.compile(backend="tpu") through PyTorch's AOTAutograd cache.

The forward and backward compilers of the "tpu" backend return a `GraphOutputCode`, an
`OutputCode` (torch/_inductor/output_code.py) that PyTorch's AOTAutogradCache
(torch/_functorch/_aot_autograd/autograd_cache.py) can store in its bundled form: the whole
AOTAutograd result (runtime metadata and wrappers, and each graph as torch.fx's GraphPickler
writes it) pickled into one file. A later process that compiles the same Dynamo graph finds it
there and skips AOTAutograd (functionalization, joint tracing, partitioning, decompositions):
`post_compile` rebuilds the `_Graph` from the saved graph, whose first call captures its program,
itself found in torchtpu's persistent executable cache. A graph run in shape buckets (_buckets)
keeps each node's value (symbolic sizes, in a shape environment the pickle carries), with what
the buckets' plan reads outside the graph, so the loading process plans it again.

The entries live in `<torchtpu cache directory>/aotautograd` (none when TORCHTPU_CACHE=0). Their key
is PyTorch's (the Dynamo graph, its inputs' metadata, the AOTAutograd and functorch configuration,
grad and autocast state, the torch version) plus, through torch.compiler.config.cache_key_tag,
torchtpu's own: its version and the hash of its Python sources and libraries, and the PJRT plugin
(platform, path, size, modification time). An entry that cannot be read, or whose graph does not
match its checksum, is not used: the graph is compiled as usual.

PyTorch's own switches still apply: TORCHINDUCTOR_AUTOGRAD_CACHE=0
(torch._functorch.config.enable_autograd_cache) or torch.compiler.config.force_disable_caches turn
the lookup and the saving off.

Dynamo's own work (tracing the bytecode, building guards) still runs in a warm process: torch
2.13's caching precompile (torch._dynamo.config.caching_precompile) drops identity guards and
cannot save a graph holding static-address parameters (a compiled optimizer step); see the README.
A graph without breaks can skip Dynamo too through torch's explicit API,
`torch.compile(fn, fullgraph=True, backend="tpu").aot_compile(...)`, `save_compiled_function` and
`torch.compiler.load_compiled_function`, which saves these same outputs; `post_compile` then also
checks that the loading process has the torchtpu and plugin that compiled them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import stat
import warnings
from typing import Any, Callable

import torch
from torch._inductor.output_code import OutputCode

from . import _compile_cache


@functools.cache
def identity() -> str:
    """What the saved graphs depend on beside what PyTorch's key holds: torchtpu's version, the
    bytes of its Python sources, its libraries and the PJRT plugin (path, size and mtime)."""
    import torchtpu

    package = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256(torchtpu.__version__.encode())
    for name in sorted(os.listdir(package)):
        path = os.path.join(package, name)
        if name.endswith(".py"):
            with open(path, "rb") as f:
                digest.update(name.encode() + f.read())
        elif name.endswith(".so"):
            st = os.stat(path)
            digest.update(f"{name} {st.st_size} {st.st_mtime_ns}".encode())
    plugin = torchtpu.plugin()
    digest.update(f"{plugin['platform']} {plugin['path']} {sorted(plugin['options'].items())}"
                  .encode())
    if plugin["path"] and os.path.exists(plugin["path"]):
        st = os.stat(plugin["path"])
        digest.update(f"{st.st_size} {st.st_mtime_ns}".encode())
    return f"torchtpu-{torchtpu.__version__}-{digest.hexdigest()[:32]}"


def directory() -> str | None:
    """Where the AOTAutograd entries of the "tpu" backend live, created if need be; None when the
    cache is off, or the folder cannot be made or is not private (see private_folder)."""
    folder = _compile_cache.directory()
    if folder is None:
        return None
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)  # as torchtpu's executable cache makes it
        folder = os.path.join(folder, _compile_cache.AUTOGRAD_SUBDIRECTORY)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        return folder if private_folder(folder) else None
    except OSError as e:
        _warn_once(f"torchtpu: cannot use {folder} ({e}); torch.compile's AOTAutograd results "
                   "are neither loaded from it nor saved there")
        return None


def private_folder(folder: str) -> bool:
    """Whether `folder` and the cache folder above it are directories (not symlinks) of this
    user that no one else can write: an entry is a pickle, loading it runs code (the README's
    trust model). Warns once when not."""
    for path in (os.path.dirname(folder), folder):
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            _warn_once(f"torchtpu: {path} is not a private folder of this user (a directory it "
                       "owns that no one else can write); torch.compile's AOTAutograd results "
                       "are neither loaded from it nor saved there")
            return False
    return True


@functools.cache
def _warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=3)


@contextlib.contextmanager
def cached_compile(folder: str):
    """AOTAutograd, inside this context, looks up and stores bundled entries in `folder` under a
    key tagged with torchtpu's identity. The backward graph is compiled with the forward one (not
    at the first backward call) so that the whole entry is made and saved inside the context."""
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache

    tag = torch.compiler.config.cache_key_tag
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch._functorch.config.patch(
            bundled_autograd_cache=True, force_non_lazy_backward_lowering=True))
        stack.enter_context(torch.compiler.config.patch(
            cache_key_tag=f"{tag}|{identity()}" if tag else identity()))
        # AOTAutogradCache has no setting for its folder (it is inductor's cache_dir()); the
        # patch lasts only while Dynamo's compile lock is held by this compilation.
        stack.enter_context(_patched_attribute(AOTAutogradCache, "_get_tmp_dir",
                                               classmethod(lambda cls: folder)))
        yield


@contextlib.contextmanager
def _patched_attribute(owner: Any, name: str, value: Any):
    saved = owner.__dict__[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


@dataclasses.dataclass
class GraphOutputCode(OutputCode):
    """One forward, backward or inference graph of the "tpu" backend, as AOTAutograd's cache
    stores it: the graph, without its node metadata, and what `_Graph` learns from that metadata.
    `runner` is the live graph; it is left out of the saved copy and rebuilt from the graph by
    `post_compile` in the process that loads the entry."""

    kind: str = ""
    graph: bytes | None = None  # the GraphModule, as torch.fx's GraphPickler writes it
    checksum: str = ""
    made_by: str = ""  # identity() of the process that compiled it
    scalars_move: bool = True
    # A bucketed graph's _outputs_seen(); its graph keeps each node's value (sizes symbolic, and
    # their shape environment with mark_dynamic's maxima), which the buckets' plan reads.
    seen: tuple | None = None
    runner: Callable[[list], list] | None = None

    def __post_init__(self) -> None:
        self._boxed_call = True

    @classmethod
    def of(cls, gm: torch.fx.GraphModule, kind: str, runner, scalars_move: bool,
           seen: tuple | None = None):
        """The output of one graph, with what a later process needs to rebuild it. (Not its
        Python code: GraphModule's own pickling traces that code again, which turns ops without
        tensor inputs into constants.) `seen`: a bucketed graph's _outputs_seen()."""
        from torch.fx._graph_pickler import GraphPickler, Options

        keep = (lambda key: key == "val") if seen is not None else (lambda key: False)
        try:
            graph = GraphPickler.dumps(gm, Options(ops_filter=None, node_metadata_key_filter=keep))
        except Exception:  # noqa: BLE001  (whatever cannot be pickled: the graph is not saved)
            return cls(kind=kind, runner=runner)
        return cls(kind=kind, graph=graph, checksum=hashlib.sha256(graph).hexdigest(),
                   made_by=identity(), scalars_move=scalars_move, runner=runner,
                   seen=None if seen is None else tuple(seen))

    def __call__(self, inputs: list) -> list:
        return self.runner(inputs)

    def prepare_for_serialization(self) -> None:
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

        if self.graph is None:
            raise BypassAOTAutogradCache(f"torchtpu: this {self.kind} graph cannot be saved "
                                         "(split at collectives, or not picklable)")
        self.runner = None

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        if self.runner is not None:
            return
        if hashlib.sha256(self.graph).hexdigest() != self.checksum:
            raise RuntimeError(f"torchtpu: a saved {self.kind} graph is corrupted")
        if self.made_by != identity():  # reached through torch.compiler.load_compiled_function
            raise RuntimeError(f"torchtpu: a saved {self.kind} graph was compiled by another "
                               f"torchtpu or plugin ({self.made_by}; this is {identity()})")
        from torch._subclasses import FakeTensorMode
        from torch.fx._graph_pickler import GraphPickler

        from . import _compile

        if self.seen is None:
            gm = GraphPickler.loads(self.graph, FakeTensorMode())
        else:  # symbolic sizes, in the shape environment the pickle carries
            from torch.fx.experimental.symbolic_shapes import ShapeEnv

            gm = GraphPickler.loads(self.graph, FakeTensorMode(shape_env=ShapeEnv()))
        gm.recompile()
        self.runner = _compile.graph_from_cache(gm, self.kind, self.scalars_move, self.seen)

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        pass

