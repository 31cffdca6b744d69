"""A digest of what decides a Python function's behaviour, so that work derived from the function
(a JAX export) can be reused by a later process without running the function again.

The digest covers the function's code (nested code objects included), its defaults, the contents
of its closure cells, and every global its code names, followed through: a function reached that
way counts by its own digest, a module or class of an installed package (one under site-packages)
by the package's name and version, any other module or class by its source file's bytes. Values
count by their contents: Python literals and containers of them, NumPy arrays and dtypes. Anything
else (an object whose behaviour the digest cannot see) makes the function undigestable: `digest`
returns None, and the caller must not reuse anything across processes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import sys
import types

_LITERALS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))


class _Undigestable(Exception):
    pass


def digest(fn) -> str | None:
    """The hex digest of `fn`'s behaviour, or None where something it uses cannot be digested."""
    h = hashlib.sha256(sys.version.encode())
    try:
        _feed(fn, h, set())
    except _Undigestable:
        return None
    return h.hexdigest()


def _feed(obj, h, seen: set[int]) -> None:
    if isinstance(obj, _LITERALS):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
        return
    if id(obj) in seen:  # recursion (a function naming itself): its name is enough the second time
        h.update(b"seen;")
        return
    seen.add(id(obj))
    if isinstance(obj, (tuple, list)):
        h.update(f"{type(obj).__name__}[{len(obj)}]".encode())
        for item in obj:
            _feed(item, h, seen)
    elif isinstance(obj, (set, frozenset)):
        h.update(f"set[{len(obj)}]".encode())
        for item in sorted(obj, key=repr):
            _feed(item, h, seen)
    elif isinstance(obj, dict):
        h.update(f"dict[{len(obj)}]".encode())
        for key in sorted(obj, key=repr):
            _feed(key, h, seen)
            _feed(obj[key], h, seen)
    elif isinstance(obj, types.CodeType):
        _feed_code(obj, h, seen)
    elif isinstance(obj, types.FunctionType):
        _feed_function(obj, h, seen)
    elif isinstance(obj, functools.partial):
        h.update(b"partial")
        _feed((obj.func, obj.args, obj.keywords), h, seen)
    elif isinstance(obj, types.MethodType):
        h.update(b"method")
        _feed((obj.__func__, obj.__self__), h, seen)
    elif isinstance(obj, types.ModuleType):
        h.update(f"module {obj.__name__}:{_source_identity(obj.__name__)};".encode())
    elif _named(obj):  # a class, builtin or function its module names: by name and source
        h.update(f"{obj.__module__}.{obj.__qualname__}:{_source_identity(obj.__module__)};"
                 .encode())
    elif all(hasattr(obj, a) for a in ("__array__", "shape", "dtype")):  # an array: its values
        import numpy as np

        try:
            array = np.asarray(obj)
        except Exception as e:  # noqa: BLE001  (a tensor on a device, one that requires grad)
            raise _Undigestable(f"{type(obj).__qualname__}: {e}") from e
        h.update(f"array {array.dtype} {array.shape};".encode())
        h.update(np.ascontiguousarray(array).tobytes())
    elif _is_numpy_dtype(obj):
        h.update(f"dtype {obj};".encode())
    elif hasattr(obj, "__torchtpu_digest__"):  # an object that says what decides it
        _feed(obj.__torchtpu_digest__(), h, seen)
    elif hasattr(obj, "__dict__") and _named(type(obj)):  # an object: its class and its state
        _feed(type(obj), h, seen)
        _feed(vars(obj), h, seen)
    else:
        raise _Undigestable(type(obj).__qualname__)


def _is_numpy_dtype(obj) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(obj, numpy.dtype)


def _named(obj) -> bool:
    """Whether `obj` is what its module's attribute `__qualname__` names (as pickle would refer
    to it)."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    qualname = obj.__dict__.get("__qualname__") if isinstance(getattr(obj, "__dict__", None),
                                                              dict) else None
    qualname = qualname or (obj.__qualname__ if isinstance(obj, (type, types.FunctionType,
                                                                 types.BuiltinFunctionType))
                            else None)
    if module is None or not isinstance(qualname, str):
        return False
    found = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found is obj


def _feed_code(code: types.CodeType, h, seen: set[int]) -> None:
    h.update(code.co_code)
    _feed((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars, code.co_argcount,
           code.co_kwonlyargcount, code.co_flags), h, seen)
    _feed(code.co_consts, h, seen)


def _names(code: types.CodeType) -> set[str]:
    """The names `code` and the code objects nested in it may look up as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _feed_function(fn: types.FunctionType, h, seen: set[int]) -> None:
    module = fn.__module__ or ""
    if _installed_module(module):
        h.update(f"function {module}.{fn.__qualname__}:{_source_identity(module)};".encode())
        return
    h.update(f"function {fn.__qualname__}".encode())
    _feed_code(fn.__code__, h, seen)
    _feed((fn.__defaults__, fn.__kwdefaults__), h, seen)
    for cell in fn.__closure__ or ():
        try:
            _feed(cell.cell_contents, h, seen)
        except ValueError:  # an empty cell
            h.update(b"empty cell;")
    for name in sorted(_names(fn.__code__)):
        if name in fn.__globals__:
            h.update(f"global {name}=".encode())
            _feed(fn.__globals__[name], h, seen)


def _installed_module(name: str) -> bool:
    module = sys.modules.get(name.split(".")[0])
    return _package_version(module) is not None if module is not None else False


def _source_identity(module_name: str) -> str:
    """An installed package's name and version; another module's source file, by its bytes."""
    module = sys.modules.get(module_name)
    if module is None:
        return "absent"
    version = _package_version(sys.modules.get(module_name.split(".")[0]))
    if version is not None:
        return version
    path = getattr(module, "__file__", None)
    if not path:
        if module_name in sys.builtin_module_names:
            return "builtin"
        raise _Undigestable(f"{module_name} has no source file")
    try:
        st = os.stat(path)
        return _file_digest(path, st.st_mtime_ns, st.st_size)
    except OSError as e:
        raise _Undigestable(f"{module_name}: {e}") from e


@functools.lru_cache(maxsize=None)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@functools.lru_cache(maxsize=None)
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _package_version(top) -> str | None:
    """`top`'s distribution and version where it is installed under site-packages."""
    path = getattr(top, "__file__", None) or ""
    if not any(part in ("site-packages", "dist-packages") for part in path.split(os.sep)):
        return None
    version = getattr(top, "__version__", None)  # cheaper than searching the distributions
    return f"{top.__name__}=={version}" if isinstance(version, str) else _installed_version(
        top.__name__)


@functools.lru_cache(maxsize=None)
def _installed_version(top_name: str) -> str | None:
    names = _distributions().get(top_name)
    if not names:
        return None
    try:
        return f"{names[0]}=={importlib.metadata.version(names[0])}"
    except importlib.metadata.PackageNotFoundError:
        return None
