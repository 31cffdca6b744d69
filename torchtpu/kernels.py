"""JAX functions as PyTorch ops on "tpu": jnp and lax code, Pallas kernels, anything `jax.export`
exports.

    from torchtpu.kernels import jax_op

    @jax_op
    def gelu_tanh(x):
        return jax.nn.gelu(x, approximate=True)

    y = gelu_tanh(torch.randn(8, device="tpu"))           # a torch.Tensor on tpu

Each wrapped function is an op "torchtpu::<name>" taking and returning tensors, with a fake
implementation from `jax.eval_shape` (so Dynamo traces through it) and a backward from `jax.vjp`
(itself such an op) unless one is given. It is defined with `torch.library.Library`, its kernels
registered per dispatch key, not with `torch.library.custom_op`, whose Python layers around the
kernel cost several times the kernel per call; a call that wants no gradient skips the autograd
kernel (Python too) and goes straight below autograd. On tpu tensors the function is exported once
per input signature (shapes, dtypes, static arguments) for the plugin's platform, and the exported
StableHLO becomes one op of torchtpu's own programs (its functions placed beside the program's,
called by `func.call`): in Strict it is one cached executable, in DeferAndFuse it joins the pending
program and fuses with the ops around it, and in a compiled graph it is part of the one captured
program. Inputs and outputs stay device buffers: nothing is copied. On the CPU plugin a Pallas
kernel runs in Pallas's interpret mode, chosen here; other plugins lower it themselves. On CPU
tensors the function runs in JAX on the host (a reference).

Static (non-tensor) arguments are keyword arguments named in `static_argnames`, Python literals
(numbers, strings, booleans, None, tuples); each distinct set of values is exported once. A function
returning one array gives one tensor, any other result a tuple of its arrays (JAX's leaf order).
JAX is imported when a function is first called, not with torchtpu.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import importlib.metadata
import itertools
import json
import os
import threading

import torch

from . import _C, _fingerprint

_SCHEMA = "(Tensor[] inputs, str statics) -> Tensor[]"
_LIBRARY = torch.library.Library("torchtpu", "FRAGMENT")  # every JaxOp's definition and kernels
_names = itertools.count()
_lock = threading.Lock()
_stats = {"kernel_exports": 0, "kernel_exports_from_disk": 0}


def stats() -> dict:
    """Exports JAX made in this process, and exports read from the disk cache instead."""
    return dict(_stats)


def _jax():
    import jax
    import jax.export  # noqa: F401  (a submodule jax does not import itself)

    return jax


# The dtypes PyTorch and JAX share, by PyTorch's name.
_SHARED_DTYPES = ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
                  "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
                  "float8_e4m3fn", "float8_e5m2")


def _jax_dtype(dtype: torch.dtype, fn_name: str):
    import jax.numpy as jnp

    name = str(dtype).removeprefix("torch.")
    if name not in _SHARED_DTYPES:
        raise TypeError(f"torchtpu.kernels: {fn_name}: JAX has no dtype for {dtype}")
    return jnp.dtype(name)


def _torch_dtype(dtype) -> torch.dtype:
    name = str(dtype)
    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise TypeError(f"torchtpu.kernels: PyTorch has no dtype for JAX's {name}")
    return found


def _platform() -> str:
    name = _C._platform_name().lower()
    return {"gpu": "cuda"}.get(name, name)


class _Exported:
    """One export of a function for one signature: the entry point registered with the runtime and
    its functions' text, which inputs the module kept (None: all of them), its outputs' (shape,
    dtype), and whether the function returns one array (not a tuple)."""

    __slots__ = ("entry", "text", "kept", "outputs", "single")

    def __init__(self, entry, text, kept, outputs, single):
        self.entry, self.text, self.kept = entry, text, kept
        self.outputs, self.single = outputs, single

    def to_bytes(self) -> bytes:
        return json.dumps({"entry": self.entry, "text": self.text, "kept": self.kept,
                           "single": self.single,
                           "outputs": [[list(shape), str(dtype).removeprefix("torch.")]
                                       for shape, dtype in self.outputs]}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> _Exported:
        d = json.loads(data)
        kept = None if d["kept"] is None else tuple(d["kept"])
        outputs = tuple((tuple(shape), getattr(torch, dtype)) for shape, dtype in d["outputs"])
        return cls(d["entry"], d["text"], kept, outputs, bool(d["single"]))


def _functions(exported, fn_name: str) -> tuple[str, str]:
    """The exported module's functions, renamed after a hash of their text and private, and the
    entry point's new name: (entry, text of the definitions)."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        module = ir.Module.parse(exported.mlir_module())
        digest = hashlib.sha256(
            module.operation.get_asm(enable_debug_info=False).encode()).hexdigest()[:20]
        prefix = f"jax_{digest}_"
        funcs = list(module.body.operations)
        for op in funcs:
            old = ir.StringAttr(op.attributes["sym_name"]).value
            ir.SymbolTable.replace_all_symbol_uses(old, prefix + old, module.operation)
            op.attributes["sym_name"] = ir.StringAttr.get(prefix + old)
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            for attr in ("arg_attrs", "res_attrs"):  # shardings, layouts, result names
                if attr in op.attributes:
                    del op.attributes[attr]
        text = "\n".join(op.operation.get_asm(enable_debug_info=False) for op in funcs)
    return prefix + "main", text


class JaxOp:
    """A JAX function as the PyTorch op torchtpu::<name>; call it with tensors (and the static
    arguments as keywords)."""

    def __init__(self, fn, name: str | None = None, static_argnames=(), backward=None):
        functools.update_wrapper(self, fn)
        self.fn, self.static_argnames = fn, tuple(static_argnames)
        self._user_backward = backward
        self._exports: dict[tuple, _Exported] = {}
        self._single: dict[str, bool] = {}  # by static arguments: whether fn returns one array
        self._vjp: JaxOp | None = None
        self._digest: str | None | bool = False  # False: not computed yet; None: not persisted
        self._calls = _C._KernelCalls()  # the exports by signature, for calls from C++
        self._static_keys: dict[tuple, str] = {}
        base = name or f"{getattr(fn, '__name__', 'fn').strip('<>')}_{next(_names)}"
        self.name = base
        qualname = f"torchtpu::{base}"
        _LIBRARY.define(base + _SCHEMA)
        _LIBRARY.impl(base, self._impl_device, "PrivateUse1")
        _LIBRARY.impl(base, self._impl_host, "CPU")
        torch.library.register_fake(qualname, self._fake, lib=_LIBRARY)
        torch.library.register_autograd(qualname, self._backward,
                                        setup_context=self._setup_context, lib=_LIBRARY)
        self.op = getattr(torch.ops.torchtpu, base).default

    # -- calling -----------------------------------------------------------------------------

    def __call__(self, *tensors, **static):
        key = self._static_key(static) if static else ""
        if not torch.compiler.is_compiling():  # (Dynamo folds this and traces the op itself)
            # Plain tpu tensors, no gradient wanted, nothing observing the dispatcher, a signature
            # exported before: the tpu kernel's work, in C++. None otherwise.
            result = self._calls.call(tensors, key)
            if result is not None:
                return result
        flat = self._dispatch(tensors, key)
        return flat[0] if self._single[key] else tuple(flat)

    def _static_key(self, static: dict) -> str:
        """The static arguments as the op's string argument (remembered per set of values)."""
        items = tuple(static.items())
        try:
            return self._static_keys[items]
        except KeyError:
            pass
        except TypeError:  # an unhashable value: checked and refused below
            items = None
        unknown = set(static) - set(self.static_argnames)
        if unknown:
            raise TypeError(f"torchtpu.kernels: {self.name}: {sorted(unknown)} are not static "
                            f"arguments (static_argnames={list(self.static_argnames)})")
        key = repr(tuple(sorted(static.items())))
        if items is not None:
            self._static_keys[items] = key
        return key

    def _dispatch(self, tensors, key: str) -> list:
        """The call through the dispatcher (autograd, modes, other devices)."""
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"torchtpu.kernels: {self.name}: argument {i} is a "
                                f"{type(t).__name__}; pass tensors positionally and static "
                                "arguments by keyword (static_argnames)")
        if torch.compiler.is_compiling() or (
                torch.is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return self.op(list(tensors), key)
        # Where no gradient is wanted, what the op's autograd kernel would do (dispatch below
        # autograd) without that kernel's Python layers, which cost twice the tpu kernel.
        with torch._C._AutoDispatchBelowAutograd():
            return self.op(list(tensors), key)

    def _bound(self, key: str):
        """The function with the static arguments `key` stands for bound."""
        if not key:
            return self.fn
        try:
            static = dict(ast.literal_eval(key))
        except (ValueError, SyntaxError) as e:
            raise TypeError(f"torchtpu.kernels: {self.name}: static arguments must be Python "
                            f"literals (numbers, strings, tuples), got {key}") from e
        return functools.partial(self.fn, **static)

    def _note_structure(self, key: str, outs) -> None:
        self._single[key] = _is_single(outs)

    # -- export -------------------------------------------------------------------------------

    def _export(self, tensors, key: str, signature) -> _Exported:
        """The export for this signature: from the disk cache where a process exported it before,
        otherwise JAX's, which then goes to the disk cache."""
        disk_key = self._disk_key(signature)
        found = self._from_disk(key, signature, disk_key)
        if found is None:
            found = self._export_with_jax(tensors, key)
            if disk_key:
                _C._disk_cache_store(disk_key, found.to_bytes())
            self._keep(key, signature, found)
        return found

    def _from_disk(self, key: str, signature, disk_key: str | None) -> _Exported | None:
        data = disk_key and _C._disk_cache_load(disk_key)
        if not data:
            return None
        found = _Exported.from_bytes(data)
        _stats["kernel_exports_from_disk"] += 1
        self._keep(key, signature, found)
        return found

    def _keep(self, key: str, signature, found: _Exported) -> None:
        _C._register_inlined_module(found.entry, found.text)
        self._single[key] = found.single
        self._exports[signature] = found
        inputs = [(dtype, list(shape)) for dtype, shape in signature[1:]]
        kept = range(len(inputs)) if found.kept is None else found.kept
        self._calls.add(key, inputs, found.entry, list(kept),
                        [(list(shape), dtype) for shape, dtype in found.outputs], found.single)

    def _export_with_jax(self, tensors, key: str) -> _Exported:
        jax = _jax()
        with _lock, jax.enable_x64(True), _interpret_pallas(_platform()):
            try:
                exported = jax.export.export(jax.jit(self._bound(key)), platforms=[_platform()])(
                    *self._avals(tensors))
            except Exception as e:  # noqa: BLE001  (JAX's errors are of many types)
                raise RuntimeError(f"torchtpu.kernels: cannot export {self.name} for "
                                   f"{_describe(tensors)}: {type(e).__name__}: {e}") from e
            if exported.ordered_effects or exported.unordered_effects:
                raise RuntimeError(f"torchtpu.kernels: {self.name} has side effects "
                                   f"({exported.ordered_effects + exported.unordered_effects}); "
                                   "only pure functions can be ops")
            entry, text = _functions(exported, self.name)
        _stats["kernel_exports"] += 1
        outputs = tuple((tuple(a.shape), _torch_dtype(a.dtype)) for a in exported.out_avals)
        kept = tuple(sorted(exported.module_kept_var_idx))
        return _Exported(entry, text, None if kept == tuple(range(len(tensors))) else kept,
                         outputs, _is_single(exported.out_tree.unflatten(list(exported.out_avals))))

    def _avals(self, tensors) -> list:
        jax = _jax()
        return [jax.ShapeDtypeStruct(tuple(t.shape), _jax_dtype(t.dtype, self.name))
                for t in tensors]

    def _disk_key(self, signature) -> str | None:
        """The key of this signature's export in the disk cache: the function's digest (its code
        and everything it reaches, see torchtpu._fingerprint), the signature, the platform,
        JAX's version and JAX's settings from the environment; None where the function cannot be
        digested (then it is exported afresh in every process)."""
        if self._digest is False:
            self._digest = _fingerprint.digest(self)
        if self._digest is None:
            return None
        return (f"torchtpu.kernels export\n{self._digest}\n{signature!r}\n{_platform()}\n"
                f"{_jax_versions()}\n{_jax_environment()}")

    def __torchtpu_digest__(self):
        return (self.fn, self.static_argnames)

    # -- implementations ----------------------------------------------------------------------

    def _impl_device(self, inputs, statics):
        # Per call only a dict lookup keyed by the signature, the outputs' allocation and the call:
        # this is the op's whole host cost beside the dispatcher's.
        signature = (statics, *[(t.dtype, t.shape) for t in inputs])  # torch.Size hashes as tuple
        exported = self._exports.get(signature) or self._export(inputs, statics, signature)
        device = inputs[0].device if inputs else torch.device("tpu", torch.tpu.current_device())
        outputs = [torch.empty(shape, dtype=dtype, device=device)
                   for shape, dtype in exported.outputs]
        kept = exported.kept
        _C._call_module(exported.entry, inputs if kept is None else [inputs[i] for i in kept],
                        outputs)
        return outputs

    def _impl_host(self, inputs, statics):
        """On CPU tensors: JAX runs the function on the host."""
        import numpy as np

        jax = _jax()
        for t in inputs:
            _jax_dtype(t.dtype, self.name)
        with jax.enable_x64(True):
            outs = jax.jit(self._bound(statics))(*[t.detach().numpy(force=True) for t in inputs])
        self._note_structure(statics, outs)
        return [torch.from_numpy(np.array(o)) for o in jax.tree_util.tree_leaves(outs)]

    def _fake(self, inputs, statics):
        device = inputs[0].device if inputs else torch.device("tpu")
        known = self._known_export(inputs, statics, device)
        if known is not None:  # this process or an earlier one exported it: no JAX needed
            return [torch.empty(shape, dtype=dtype, device=device)
                    for shape, dtype in known.outputs]
        jax = _jax()
        with jax.enable_x64(True), _interpret_pallas("cpu"):
            outs = jax.eval_shape(self._bound(statics), *self._avals(inputs))
        self._note_structure(statics, outs)
        return [torch.empty(tuple(o.shape), dtype=_torch_dtype(o.dtype), device=device)
                for o in jax.tree_util.tree_leaves(outs)]

    def _known_export(self, inputs, statics, device) -> _Exported | None:
        """The export for these (fake) inputs where one is at hand, in memory or on disk."""
        if device.type != "tpu" or not all(isinstance(d, int) for t in inputs for d in t.shape):
            return None  # symbolic sizes have no signature
        signature = (statics, *[(t.dtype, t.shape) for t in inputs])
        return self._exports.get(signature) or self._from_disk(statics, signature,
                                                                 self._disk_key(signature))

    # -- autograd -----------------------------------------------------------------------------

    def _setup_context(self, ctx, inputs, output):
        ctx.statics = inputs[1]
        ctx.save_for_backward(*inputs[0])

    def _backward(self, ctx, grads):
        inputs = list(ctx.saved_tensors)
        if any(g is None for g in grads):
            grads = [g if g is not None else torch.zeros_like(o) for g, o in
                     zip(grads, self._fake(inputs, ctx.statics))]
        if self._user_backward is not None:
            static = dict(ast.literal_eval(ctx.statics)) if ctx.statics else {}
            result = self._user_backward(*inputs, *grads, **static)
        else:
            result = self._vjp_op()(*inputs, *grads, _key=ctx.statics, _inputs=len(inputs))
        result = list(result) if isinstance(result, (tuple, list)) else [result]
        return result, None

    def _vjp_op(self) -> JaxOp:
        """The backward as an op of its own: JAX's vjp of the function at the saved inputs, for
        the floating inputs (others get None), from the cotangents of the floating outputs."""
        if self._vjp is None:
            parent = self

            def vjp(*args, _key, _inputs):  # the inputs, then the outputs' cotangents
                return _vjp_of(_jax(), parent._bound(_key), args[:_inputs], args[_inputs:])

            self._vjp = JaxOp(vjp, name=f"{self.name}_vjp", static_argnames=("_key", "_inputs"))
        return self._vjp


def _is_single(outs) -> bool:
    """Whether a function's result `outs` (arrays or their avals) is one array, not a tuple."""
    return not isinstance(outs, (tuple, list, dict)) and len(
        _jax().tree_util.tree_leaves(outs)) == 1


@functools.lru_cache(maxsize=None)
def _jax_versions() -> str:
    """JAX's and jaxlib's versions, read without importing them."""
    return " ".join(f"{name}=={importlib.metadata.version(name)}" for name in ("jax", "jaxlib"))


def _jax_environment() -> str:
    """The JAX_* environment variables, which set JAX's options (JAX_DEFAULT_MATMUL_PRECISION
    changes the dots an export holds), read without importing JAX."""
    return " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("JAX_"))


def _vjp_of(jax, fn, primals, cts):
    """Cotangents of `fn`'s floating inputs (zeros for the others, which PyTorch drops)."""
    import jax.numpy as jnp

    floating = [i for i, p in enumerate(primals) if jnp.issubdtype(p.dtype, jnp.inexact)]

    def of_floating(*xs):
        full = list(primals)
        for i, x in zip(floating, xs):
            full[i] = x
        return fn(*full)

    out, pull = jax.vjp(of_floating, *[primals[i] for i in floating])
    leaves, tree = jax.tree_util.tree_flatten(out)
    cts = [c if jnp.issubdtype(o.dtype, jnp.inexact) else
           jnp.zeros(o.shape, jax.dtypes.float0) for c, o in zip(cts, leaves)]
    grads = dict(zip(floating, pull(jax.tree_util.tree_unflatten(tree, cts))))
    return tuple(grads.get(i, jnp.zeros(p.shape, p.dtype)) for i, p in enumerate(primals))


class _interpret_pallas:
    """On the CPU plugin Pallas kernels run in interpret mode (the kernel as ordinary HLO)."""

    def __init__(self, platform: str):
        self.on = platform == "cpu"

    def __enter__(self):
        if self.on:
            from jax._src import config
            self.prev = config.pallas_tpu_interpret_mode_context_manager.swap_local(True)

    def __exit__(self, *exc):
        if self.on:
            from jax._src import config
            config.pallas_tpu_interpret_mode_context_manager.set_local(self.prev)


def _describe(tensors) -> str:
    return ", ".join(f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}" for t in tensors)


def jax_op(fn=None, *, name: str | None = None, static_argnames=(), backward=None):
    """Wraps a JAX function into a PyTorch op on tpu tensors (a decorator, with or without
    arguments). `name`: the op's name in the torchtpu namespace (default: the function's, made
    unique). `static_argnames`: keyword arguments that are not tensors (exported once per value).
    `backward(*inputs, *grad_outputs, **static)`: returns the inputs' gradients; default JAX's
    own vjp."""
    if fn is None:
        return lambda f: JaxOp(f, name, static_argnames, backward)
    if not callable(fn) or inspect.isclass(fn):
        raise TypeError(f"torchtpu.kernels.jax_op wraps a function, got {type(fn).__name__}")
    return JaxOp(fn, name, static_argnames, backward)


__all__ = ["JaxOp", "jax_op"]
