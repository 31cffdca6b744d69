"""torchtpu._fingerprint: a function's digest changes with everything that decides what it
computes (its code, constants, closure, the globals and helpers it reaches, source files), stays
the same for an identical definition, and is None where something it uses cannot be seen."""

import functools
import importlib
import sys
import threading

import numpy as np
import pytest

from torchtpu._fingerprint import digest


def define(source: str, name: str = "f", **globals_):
    """`name` from `source`, run in a fresh namespace holding `globals_`."""
    namespace = {"np": np, **globals_}
    exec(source, namespace)  # noqa: S102
    return namespace[name]


F = "def f(x):\n    return x * 2 + 1\n"


def test_identical_definitions_share_a_digest():
    assert digest(define(F)) == digest(define(F)) is not None


@pytest.mark.parametrize("changed", [
    "def f(x):\n    return x * 3 + 1\n",       # a constant
    "def f(x):\n    return x * 2 - 1\n",       # an operator
    "def f(y):\n    return y * 2 + 1\n",       # an argument's name (keyword calls see it)
    "def f(x, k=1):\n    return x * 2 + k\n",  # a default
])
def test_the_code_decides(changed):
    assert digest(define(changed)) != digest(define(F))


def test_a_global_value_decides():
    source = "def f(x):\n    return x * SCALE\n"
    assert digest(define(source, SCALE=2)) != digest(define(source, SCALE=3))
    assert digest(define(source, SCALE=2)) == digest(define(source, SCALE=2))


def test_a_helper_function_is_followed():
    caller = "def f(x):\n    return helper(x) + 1\n"
    one = define(caller, helper=define("def g(x):\n    return x * 2\n", "g"))
    other = define(caller, helper=define("def g(x):\n    return x * 4\n", "g"))
    assert digest(one) != digest(other)


def test_a_closure_decides():
    def make(scale):
        return lambda x: x * scale

    assert digest(make(2)) != digest(make(3))
    assert digest(make(2)) == digest(make(2))


def test_an_array_decides_by_its_values():
    def make(weights):
        return lambda x: x @ weights

    a = np.arange(6.0).reshape(2, 3)
    b = a.copy()
    b[1, 2] = -1
    assert digest(make(a)) != digest(make(b))
    assert digest(make(a)) == digest(make(a.copy()))


def test_partial_arguments_decide():
    base = define("def f(x, k):\n    return x * k\n")
    assert digest(functools.partial(base, k=2)) != digest(functools.partial(base, k=3))


def test_a_recursive_function_has_a_digest():
    f = define("def f(n):\n    return 1 if n <= 1 else n * f(n - 1)\n")
    assert digest(f) is not None


def test_an_installed_package_counts_by_version_not_by_walking_it():
    f = define("def f(x):\n    return np.tanh(x) + np.float32(1)\n")
    assert digest(f) is not None


def test_a_module_of_ones_own_counts_by_its_source(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "fingerprint_helpers.py").write_text("def scale(x):\n    return x * 2\n")
    module = importlib.import_module("fingerprint_helpers")
    try:
        f = define("def f(x):\n    return fingerprint_helpers.scale(x)\n",
                   fingerprint_helpers=module)
        before = digest(f)
        (tmp_path / "fingerprint_helpers.py").write_text("def scale(x):\n    return x * 5\n")
        assert digest(f) != before
    finally:
        sys.modules.pop("fingerprint_helpers", None)


def test_what_cannot_be_seen_gives_no_digest():
    lock = threading.Lock()
    assert digest(define("def f(x):\n    return x if LOCK else x\n", LOCK=lock)) is None

    class Slotted:  # noqa: B903  (state the digest cannot read)
        __slots__ = ("scale",)

        def __init__(self):
            self.scale = 2

    assert digest(define("def f(x):\n    return x * S.scale\n", S=Slotted())) is None
