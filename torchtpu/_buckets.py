"""Shape buckets: one program for a compiled graph over every size of its dynamic dimensions up
to a bound.

A graph Dynamo traced with symbolic sizes (a dimension seen with a second size, or marked with
torch._dynamo.mark_dynamic) runs, for a size n, the program captured for its bucket B >= n: the
next step of a geometric ladder (8, 16, 32, ... for TORCHTPU_SHAPE_BUCKETS=2, the default; 0
turns buckets off) but no more than the size's upper bound (a guard's: slicing a 64-row buffer
bounds the slice's length by 64), or the `max` that mark_dynamic gave. Its tensor inputs are
padded to B, and the graph is rewritten so that the padding, whatever it holds, never reaches
a valid element: where an op reduces or contracts over a dynamic dimension (sum, max, mean,
softmax, matmul, the loss's targets, an embedding's gradient, layer norm's weight gradient), its
input's padding is first replaced by the op's identity, and a mean divides by the true count.
The true sizes are device arguments, so one program serves every size in the bucket.

Every dynamic dimension keeps its valid elements at its front. Where a view would break that
(merging a dynamic size with an outer dimension, as logits.view(-1, vocab) does), a gather puts
them back in front, and a view splitting such a dimension gathers them out again. Outputs come
back as their valid elements: contiguous, as PyTorch returns them, for what the caller sees (a
gather compacts them where needed); what a forward saves for its backward stays padded, and the
backward views it at the bucket's sizes without a copy.

A graph is bucketed only when every op touching a dynamic dimension is one whose valid results
depend on valid inputs alone (pointwise ops, views, the reductions and contractions above,
gathers, slices from a fixed start, cat (along a dynamic dimension, a gather puts each part's
valid elements after the previous part's), scatter along other dimensions); any other graph
compiles per size, as before.

An input contiguous at its true sizes whose layout differs from the bucket's (a [1, 2, n, 8] KV
cache a graph returned, in a storage as long as the bucket) is taken as it is, viewed at the
bucket's sizes with their contiguous strides, and the graph moves its elements to their places
(Plan.graph): viewed with its own strides, each length would be a program of its own.
"""

from __future__ import annotations

import math
import operator
import os

import sympy
import torch

DEFAULT_FACTOR = 2.0
SMALLEST = 8
HOST_PAD_ELEMENTS = 1 << 16  # inputs up to this many elements are padded on the host

_aten = torch.ops.aten


class _NotBucketed(Exception):
    pass


# plan()'s reasons that say nothing about the graph's ops: no size varies, or buckets are off
NOT_VARYING = ("no input of dynamic size", "TORCHTPU_SHAPE_BUCKETS=0")


def factor() -> float | None:
    """The ladder's factor (TORCHTPU_SHAPE_BUCKETS), None when buckets are off."""
    text = os.environ.get("TORCHTPU_SHAPE_BUCKETS", "").strip()
    if not text:
        return DEFAULT_FACTOR
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"torchtpu: TORCHTPU_SHAPE_BUCKETS must be a number (a ladder factor "
                         f"above 1, or 0 for off), got {text!r}") from None
    if value == 0:
        return None
    if not value > 1:
        raise ValueError(f"torchtpu: TORCHTPU_SHAPE_BUCKETS must be above 1 (or 0 for off), "
                         f"got {text!r}")
    return value


def bucket(n: int, ladder: float, bound: int | None = None, marked: bool = False) -> int:
    """The bucket for size n: `bound` if mark_dynamic's max gave it (`marked`), else the ladder's
    first step at or above n, capped at `bound` (an upper bound a guard set)."""
    within = bound is not None and n <= bound
    if within and marked:
        return bound
    b = SMALLEST
    while b < n:
        b = max(b + 1, math.ceil(b * ladder))
    return min(b, bound) if within else b


def _expr(value) -> sympy.Expr:
    if isinstance(value, torch.SymInt):
        return value.node.expr
    return sympy.Integer(int(value))


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _is_tensor(node) -> bool:
    return isinstance(_val(node), torch.Tensor)


def _dynamic(value) -> bool:
    return isinstance(value, torch.Tensor) and any(
        not _expr(s).is_number for s in value.shape)


def _shape(node) -> list[sympy.Expr]:
    return [_expr(s) for s in _val(node).shape]


def _groups(before: list[sympy.Expr], after: list[sympy.Expr]):
    """A view's dimensions in groups of equal size: (dims before, dims after) per group."""
    groups, i, j = [], 0, 0
    while i < len(before) or j < len(after):
        gi, gj = [], []
        a = b = sympy.Integer(1)
        if i < len(before):
            gi, a, i = [i], before[i], i + 1
        if j < len(after):
            gj, b, j = [j], after[j], j + 1
        if a == 0 or b == 0:
            raise _NotBucketed("a view of an empty tensor")
        while sympy.simplify(a - b) != 0:
            if sympy.denom(sympy.together(b / a)) == 1 and i < len(before):
                gi, a, i = gi + [i], a * before[i], i + 1
            elif j < len(after):
                gj, b, j = gj + [j], b * after[j], j + 1
            else:
                raise _NotBucketed("a view of sizes that do not match")
        groups.append((gi, gj))
    return groups


def _regrouping(before: list[sympy.Expr], after: list[sympy.Expr]):
    """How a view moves valid elements: per group holding a dynamic size whose valid elements
    would stop being a prefix, (kind, dim, outer, dynamic size, inner): "merge" for dims merged
    into output dim `dim`, "split" for input dim `dim` split. Raises when no gather can fix it."""
    moves = []
    for gi, gj in _groups(before, after):
        dyn_in = [d for d in gi if not before[d].is_number]
        dyn_out = [d for d in gj if not after[d].is_number]
        if not dyn_in and not dyn_out:
            continue
        if len(gi) == 1 and len(gj) == 1:
            continue
        if len(gj) == 1 and len(dyn_in) == 1:
            d = dyn_in[0]
            outer = [before[k] for k in gi if k < d]
            if all(f == 1 for f in outer):
                continue  # the dynamic size is outermost: its valid elements stay a prefix
            moves.append(("merge", gj[0], math.prod(outer, start=sympy.Integer(1)), before[d],
                          math.prod((before[k] for k in gi if k > d), start=sympy.Integer(1))))
        elif len(gi) == 1 and len(dyn_out) == 1:
            d = dyn_out[0]
            outer = [after[k] for k in gj if k < d]
            if all(f == 1 for f in outer):
                continue
            moves.append(("split", gi[0], math.prod(outer, start=sympy.Integer(1)), after[d],
                          math.prod((after[k] for k in gj if k > d), start=sympy.Integer(1))))
        else:
            raise _NotBucketed("a view regrouping several dynamic sizes")
    return moves


_POSITIONAL = {  # valid results from valid inputs, position by position
    _aten.clone, _aten._to_copy, _aten.alias, _aten.detach, _aten.copy, _aten.lift_fresh_copy,
    _aten.where, _aten.masked_fill, _aten.cumsum, _aten.triu, _aten.tril, _aten.zeros_like,
    _aten.ones_like, _aten.empty_like, _aten.full_like, _aten.fill, _aten.permute,
    _aten.transpose, _aten.t, _aten.unsqueeze, _aten.squeeze, _aten.expand, _aten.expand_copy,
}
_REDUCTIONS = {_aten.sum: 0, _aten.amax: "min", _aten.amin: "max", _aten.any: False,
               _aten.all: True, _aten.prod: 1, _aten.mean: 0}
_FACTORIES = {_aten.full, _aten.zeros, _aten.ones, _aten.empty, _aten.new_zeros, _aten.new_ones,
              _aten.new_full, _aten.new_empty, _aten.empty_strided, _aten.scalar_tensor}
_VIEWS = {_aten.view, _aten._unsafe_view, _aten.reshape, _aten.view_copy}
# ops taking indices (the argument holding them)
_INDEXED = {_aten.embedding: 1, _aten.index_select: 2, _aten.gather: 2}
_DIVISIONS = {_aten.div, _aten.remainder, _aten.fmod, _aten.floor_divide}
# (op, argument) that a size may be given to as a size
_SIZE_ARGUMENTS = {(_aten.arange, "end"), (_aten.slice, "end"), (_aten.sym_size, "dim")}
_SIZE_MATH = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.neg,
              torch.sym_max, torch.sym_min, operator.getitem, _aten.sym_size.int}


def _reduced_dims(node: torch.fx.Node, rank: int) -> set[int]:
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dims is None or dims == [] or node.target in (_aten.sum.default, _aten.mean.default,
                                                      _aten.any.default, _aten.all.default,
                                                      _aten.prod.default):
        return set(range(rank))
    dims = [dims] if isinstance(dims, int) else dims
    return {d % rank for d in dims}


def _dynamic_dims(node, dims=None) -> set[int]:
    return {d for d, e in enumerate(_shape(node)) if not e.is_number
            and (dims is None or d in dims)}


def _count(mean: torch.fx.Node) -> sympy.Expr:
    """The number of valid elements a mean divides by: the product of its reduced sizes."""
    shape = _shape(mean.args[0])
    return math.prod((shape[d] for d in _reduced_dims(mean, len(shape))), start=sympy.Integer(1))


# (operand, its contracted dim, operand, its contracted dim)
_CONTRACTIONS = {_aten.mm: (0, 1, 1, 0), _aten.addmm: (1, 1, 2, 0), _aten.bmm: (0, 2, 1, 1),
                 _aten.baddbmm: (1, 2, 2, 1)}


class _Rewriter:
    """Emits a plan's masks, means and gathers into the new graph."""

    def __init__(self, plan: "Plan", graph: torch.fx.Graph):
        self.plan, self.graph = plan, graph

    def start(self, env) -> None:
        """After the graph's inputs: the true sizes' inputs, and each symbol's bucket size."""
        g, plan = self.graph, self.plan
        self.sizes = [g.placeholder(f"true_size_{k}") for k in range(len(plan.sizes))]
        self.symbols = {}
        for s, (i, d) in plan.symbol_at.items():
            p = env[plan.placeholders[i]]
            self.symbols[s] = p if d is None else g.call_function(_aten.sym_size.int, (p, d))

    def bucket(self, e: sympy.Expr):
        """Size `e` at the bucket (an int, or a node computing it from the bucket's sizes)."""
        e = sympy.sympify(e)
        if e.is_number:
            return int(e)
        if isinstance(e, sympy.Symbol):
            return self.symbols[e]
        op = operator.add if isinstance(e, sympy.Add) else operator.mul
        # a power (n**2, of a square's elements) is a product of its base, repeated
        terms = [e.base] * int(e.exp) if isinstance(e, sympy.Pow) else e.args
        value = None
        for a in terms:
            v = self.bucket(a)
            value = v if value is None else self.graph.call_function(op, (value, v))
        return value

    def true(self, e: sympy.Expr):
        return self.sizes[self.plan._size(sympy.sympify(e))]

    def divisor(self, e: sympy.Expr):
        """The true size `e`, at least 1: what an index is divided by (an empty dimension has
        no valid element to find)."""
        return self.graph.call_function(_aten.clamp_min.default, (self.true(e), 1))

    def extent(self, outer, size, inner):
        """A regrouped view's (block, length) at the bucket: size * inner, and outer blocks."""
        block = self.graph.call_function(operator.mul, (self.bucket(size), self.bucket(inner)))
        return block, self.graph.call_function(operator.mul, (block, self.bucket(outer)))

    def emit(self, n, target, args, kwargs):
        """`n` again, as `target` on new arguments, with `n`'s metadata."""
        out = self.graph.call_function(target, tuple(args), kwargs)
        out.meta = dict(n.meta)
        return out

    def index(self, length, device):
        return self.graph.call_function(_aten.arange.default, (length,),
                                        {"dtype": torch.int64, "device": device})

    def valid(self, value, source, dims):
        """True at the valid elements of `source` (its copy `value`) along `dims`."""
        g = self.graph
        rank = _val(source).dim()
        mask = None
        for d in sorted(dims):
            at = self.index(g.call_function(_aten.sym_size.int, (value, d)), _val(source).device)
            ok = g.call_function(_aten.lt.Tensor, (at, self.true(_shape(source)[d])))
            shape = [1] * rank
            shape[d] = -1
            ok = g.call_function(_aten.view.default, (ok, shape))
            mask = ok if mask is None else g.call_function(_aten.logical_and.default, (mask, ok))
        return mask

    def zeroed(self, value, source):
        """Input `source` (its copy `value`) with zeros in its padding."""
        return self.graph.call_function(_aten.where.ScalarOther, (
            self.valid(value, source, _dynamic_dims(source)), value, 0))

    def masked(self, n, masks, env):
        g = self.graph
        args = [torch.fx.node.map_arg(a, env.__getitem__) for a in n.args]
        kwargs = torch.fx.node.map_arg(n.kwargs, env.__getitem__)
        for arg, dims, fill in masks:
            if isinstance(arg, tuple):  # an element of a list argument (index_put's indices)
                source, value = n.args[arg[0]][arg[1]], args[arg[0]][arg[1]]
            else:
                source, value = n.args[arg], args[arg]
            if isinstance(fill, tuple):  # ("bound" or "wrap", size): indices into a size
                kind, size = fill
                if kind == "wrap":  # a negative index counts from the true size
                    negative = g.call_function(_aten.lt.Scalar, (value, 0))
                    value = g.call_function(_aten.where.self, (negative, g.call_function(
                        _aten.add.Tensor, (value, self.true(size))), value))
                # out of range (negative still, or at or past the true size): the bucket's size
                past = g.call_function(_aten.logical_or.default, (
                    g.call_function(_aten.ge.Tensor, (value, self.true(size))),
                    g.call_function(_aten.lt.Scalar, (value, 0))))
                value = g.call_function(_aten.where.ScalarSelf, (past, self.bucket(size), value))
            elif fill == "first":  # each padding element: the first valid one along the dims
                for d in sorted(dims):
                    first = g.call_function(_aten.slice.Tensor, (value, d, 0, 1))
                    value = g.call_function(_aten.where.self,
                                            (self.valid(value, source, {d}), value, first))
            else:
                if fill in ("min", "max"):
                    fill = _extreme(_val(source).dtype, fill)
                value = g.call_function(_aten.where.ScalarOther,
                                        (self.valid(value, source, dims), value, fill))
            if isinstance(arg, tuple):
                args[arg[0]] = list(args[arg[0]])
                args[arg[0]][arg[1]] = value
            else:
                args[arg] = value
        if n in self.plan.means:
            keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
            dims = sorted(_reduced_dims(n, _val(n.args[0]).dim()))
            total = g.call_function(_aten.sum.dim_IntList, (args[0], dims, keep),
                                    {k: v for k, v in kwargs.items() if k == "dtype"})
            return self.emit(n, _aten.div.Tensor, (total, self.true(_count(n))), {})
        return self.emit(n, n.target, args, kwargs)

    def sized(self, n, values, env):
        """An op taking a size as a value, given the true size as a 0-d tensor: of the op's
        tensor's type when that is an integer type, as a Python int takes it, so that a 0-d
        tensor operand keeps the result's type; else int64 (beside a floating tensor it changes
        no type, and the op computes with the exact size, as PyTorch does)."""
        args = [torch.fx.node.map_arg(a, env.__getitem__) for a in n.args]
        tensor = next((_val(a) for a in n.args if _is_tensor(a)), None)
        dtype = torch.int64 if tensor is None or tensor.dtype == torch.bool or (
            tensor.dtype.is_floating_point or tensor.dtype.is_complex) else tensor.dtype
        for k, e in values:
            args[k] = self.true(e) if dtype == torch.int64 else self.graph.call_function(
                _aten._to_copy.default, (self.true(e),), {"dtype": dtype})
        return self.emit(n, n.target.overloadpacket.Tensor, args,
                         torch.fx.node.map_arg(n.kwargs, env.__getitem__))

    def tail(self, n, env):
        """A slice or select from the end of a dynamic dimension, at its true size."""
        g = self.graph
        source = n.args[0]
        dim, start, k = self.plan.tails[n]
        first = g.call_function(_aten.add.Tensor, (self.true(_shape(source)[dim]), start))
        at = g.call_function(_aten.add.Tensor, (self.index(k, _val(source).device), first))
        out = g.call_function(_aten.index_select.default, (env[source], dim, at))
        if n.target.overloadpacket is _aten.select:
            out = g.call_function(_aten.squeeze.dim, (out, dim))
        out.meta = dict(n.meta)
        return out

    def join(self, n, env):
        """A cat along a dynamic dimension: the parts, at the bucket's sizes, one after another,
        then a gather that puts each part's valid elements right after the previous part's."""
        g = self.graph
        dim, sizes = self.plan.joins[n]
        out = g.call_function(n.target, *torch.fx.node.map_arg((n.args, n.kwargs),
                                                              env.__getitem__))
        length = self.bucket(sum(sizes))
        p = self.index(length, _val(n).device)
        src = p
        for k in range(1, len(sizes)):
            before = sum(sizes[:k])
            if before.is_number:
                continue  # a part after fixed sizes only: already where it belongs
            # position p at or past the true start of part k reads the part's element
            # p - (true start), which in the parts at the bucket's sizes is at p + (bucket
            # start - true start)
            start = self.true(before)
            shift = g.call_function(_aten.rsub.Scalar, (start, self.bucket(before)))
            moved = g.call_function(_aten.add.Tensor, (p, shift))
            src = g.call_function(_aten.where.self, (
                g.call_function(_aten.ge.Tensor, (p, start)), moved, src))
        src = g.call_function(_aten.clamp_max.default, (src, g.call_function(
            operator.sub, (length, 1))))
        out = g.call_function(_aten.index_select.default, (out, dim, src))
        out.meta = dict(n.meta)
        return out

    def spread(self, value, source):
        """Input `source` given compact (`value`: its storage viewed at the bucket's sizes with
        their contiguous strides): each element moved to its place at the bucket's sizes, where
        element (i, j, ...) is the compact one at ((i * n1) + j) * n2 + ... of the true sizes."""
        g = self.graph
        shape = _shape(source)
        rank = len(shape)
        padded = [g.call_function(_aten.sym_size.int, (value, d)) for d in range(rank)]
        at = None
        for d, size in enumerate(shape):
            index = self.index(padded[d], _val(source).device)
            index = g.call_function(_aten.view.default,
                                    (index, [-1 if k == d else 1 for k in range(rank)]))
            if at is None:
                at = index
                continue
            scaled = g.call_function(_aten.mul.Scalar, (at, int(size))) if size.is_number \
                else g.call_function(_aten.mul.Tensor, (at, self.true(size)))
            at = g.call_function(_aten.add.Tensor, (scaled, index))
        total = self.bucket(math.prod(shape, start=sympy.Integer(1)))
        at = g.call_function(_aten.clamp_max.default, (
            g.call_function(_aten.reshape.default, (at, [-1])),
            g.call_function(operator.sub, (total, 1))))
        flat = g.call_function(_aten.reshape.default, (value, [-1]))
        out = g.call_function(_aten.index_select.default, (flat, 0, at))
        return g.call_function(_aten.view.default, (out, padded))

    def compacted(self, value, node):
        """`value` (at the bucket's sizes) as a flat tensor with its valid elements in order at
        the front: element j is the one at j's index in the true sizes."""
        g = self.graph
        shape = _shape(node)
        total = self.bucket(math.prod(shape, start=sympy.Integer(1)))
        j = self.index(total, _val(node).device)
        rest, at, stride = j, None, 1
        for d in reversed(range(len(shape))):
            size = shape[d]
            true = self.divisor(size) if not size.is_number else max(int(size), 1)
            scalar = isinstance(true, int)
            digit = g.call_function(_aten.remainder.Scalar if scalar else _aten.remainder.Tensor,
                                    (rest, true))
            rest = g.call_function(_aten.div.Tensor_mode if not scalar else _aten.div.Scalar_mode,
                                   (rest, true), {"rounding_mode": "floor"})
            term = g.call_function(_aten.mul.Scalar if isinstance(stride, int) else
                                   _aten.mul.Tensor, (digit, stride))
            at = term if at is None else g.call_function(_aten.add.Tensor, (at, term))
            stride = g.call_function(operator.mul, (stride, self.bucket(size))) \
                if not (isinstance(stride, int) and size.is_number) else stride * int(size)
        at = g.call_function(_aten.clamp_max.default, (at, g.call_function(operator.sub,
                                                                          (total, 1))))
        flat = g.call_function(_aten.reshape.default, (value, [-1]))
        return g.call_function(_aten.index_select.default, (flat, 0, at))

    def view(self, n, env):
        """A view whose valid elements a gather puts back in front (merged), or in place
        (split), before it is taken."""
        g = self.graph
        x = env[n.args[0]]
        device = _val(n).device
        moves = self.plan.moves[n]
        for _, dim, outer, size, inner in (m for m in moves if m[0] == "split"):
            # position q of the split dims (at the bucket) reads element o * n * inner + r of
            # the compact input, o = q // (B * inner), r = q % (B * inner)
            block, length = self.extent(outer, size, inner)
            q = self.index(length, device)
            o = g.call_function(_aten.div.Tensor_mode, (q, block), {"rounding_mode": "floor"})
            r = g.call_function(_aten.remainder.Scalar, (q, block))
            valid = self.true(size * inner)
            src = g.call_function(_aten.add.Tensor,
                                  (g.call_function(_aten.mul.Tensor, (o, valid)), r))
            src = g.call_function(_aten.where.ScalarOther,
                                  (g.call_function(_aten.lt.Tensor, (r, valid)), src, 0))
            x = g.call_function(_aten.index_select.default, (x, dim, src))
        out = self.emit(n, n.target, [x] + [torch.fx.node.map_arg(a, env.__getitem__)
                                            for a in n.args[1:]], {})
        for _, dim, outer, size, inner in (m for m in moves if m[0] == "merge"):
            # element j of the merged dim (compact) is o * B * inner + r of the view, for
            # o = j // (n * inner), r = j % (n * inner)
            block, length = self.extent(outer, size, inner)
            j = self.index(length, device)
            valid = self.divisor(size * inner)
            o = g.call_function(_aten.div.Tensor_mode, (j, valid), {"rounding_mode": "floor"})
            r = g.call_function(_aten.remainder.Tensor, (j, valid))
            src = g.call_function(_aten.add.Tensor,
                                  (g.call_function(_aten.mul.Tensor, (o, block)), r))
            src = g.call_function(_aten.clamp_max.default, (src, g.call_function(
                operator.sub, (length, 1))))
            out = g.call_function(_aten.index_select.default, (out, dim, src))
        return out


class Plan:
    """How a graph runs bucketed: its dynamic inputs, the masks and gathers it needs, its
    outputs. Every dynamic dimension's valid elements are a prefix of it: where a view would
    break that (merging a dynamic size with an outer one), a gather puts them back in front."""

    def __init__(self, gm: torch.fx.GraphModule, ladder: float, visible: int | None = None):
        self.ladder = ladder
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.inputs: list[list[tuple[int, sympy.Expr]]] = []  # per input, its dynamic dims
        self.int_inputs: dict[int, sympy.Symbol] = {}
        self.bounds: dict[sympy.Symbol, tuple[int | None, bool]] = {}  # _bound()
        self.symbol_at: dict[sympy.Symbol, tuple[int, int | None]] = {}  # (input, dim or None)
        for i, p in enumerate(self.placeholders):
            val = _val(p)
            dims = []
            if isinstance(val, torch.SymInt):
                e = _expr(val)
                self.int_inputs[i] = e
                if isinstance(e, sympy.Symbol):
                    self.bounds[e] = _bound(val)
                    self.symbol_at.setdefault(e, (i, None))
            elif isinstance(val, torch.Tensor):
                for d, size in enumerate(val.shape):
                    e = _expr(size)
                    if e.is_number:
                        continue
                    dims.append((d, e))
                    if isinstance(e, sympy.Symbol):
                        self.bounds[e] = _bound(size)
                        self.symbol_at.setdefault(e, (i, d))
            self.inputs.append(dims)
        if not any(self.inputs):
            raise _NotBucketed(NOT_VARYING[0])
        for i, e in [*((i, e) for i, dims in enumerate(self.inputs) for _, e in dims),
                     *self.int_inputs.items()]:
            if not e.free_symbols <= set(self.symbol_at):
                raise _NotBucketed(f"input {i}'s size {e} is not made of the inputs' sizes")
        for n in gm.graph.nodes:
            vals = _val(n) if isinstance(_val(n), (list, tuple)) else [_val(n)]
            for v in vals:
                exprs = [_expr(x) for x in v.shape] if isinstance(v, torch.Tensor) else (
                    [_expr(v)] if isinstance(v, torch.SymInt) else [])
                for e in exprs:
                    if not _growing(e, set(self.symbol_at)):
                        raise _NotBucketed(f"the size {e}: not a sum of products of the inputs' "
                                           "sizes")
        # (node, argument (or (argument, element)), dims, the padding's fill)
        self.masks: list[tuple[torch.fx.Node, object, set[int], object]] = []
        self.means: set[torch.fx.Node] = set()
        self.moves: dict[torch.fx.Node, list] = {}  # views and their gathers
        self.values: dict[torch.fx.Node, list] = {}  # ops taking a size as a value
        self.tails: dict[torch.fx.Node, tuple] = {}  # slices and selects from the end
        self.joins: dict[torch.fx.Node, tuple] = {}  # cats along a dynamic dimension
        for n in gm.graph.nodes:
            self._visit(n)
        outs = _results(gm)
        self.outputs: list = []  # per output: its sizes if dynamic, its expression if a size
        # Outputs the caller sees whose valid elements are not a prefix of their storage come
        # back compacted (contiguous, as PyTorch returns them); those only the backward reads
        # stay padded, for it to take as they are.
        self.compacted: set[int] = set()
        for i, o in enumerate(outs):
            val = _val(o)
            if o is not None and not isinstance(o, torch.fx.Node):
                raise _NotBucketed("it returns a constant")
            if isinstance(val, torch.SymInt):
                self.outputs.append(_expr(val))  # a size: returned at its true value
                continue
            self.outputs.append(_shape(o) if _dynamic(val) else None)
            if _dynamic(val) and (visible is None or i < visible) and not _prefix(_shape(o)):
                self.compacted.add(i)
        self.sizes: list[sympy.Expr] = []  # sizes given to the program as device arguments
        # Tensor inputs whose contiguous strides change with a dynamic size (a [1, 2, n, 8] KV
        # cache): viewed at the bucket's sizes with their own strides, each size would be a
        # program of its own, so contiguous ones come compact and the graph spreads them (a
        # gather). Not those the graph writes.
        written = mutated_inputs(gm)
        self.spreadable = {i for i, (p, dims) in enumerate(zip(self.placeholders, self.inputs))
                           if dims and i not in written and not _strides_fixed(_shape(p))}
        for i in sorted(self.spreadable):
            for _, e in self.inputs[i]:
                self._size(e)
        self.source = gm
        self._graphs: dict[frozenset, torch.fx.GraphModule] = {}
        self.gm = self.graph(frozenset())
        try:  # the other graphs are made at the first call needing them: here, one fails early
            self.graph(frozenset(self.spreadable))
        except Exception:  # noqa: BLE001 - as plan() does: such inputs are padded instead
            self.spreadable = set()
        self._calls: dict[tuple, _Call] = {}

    def graph(self, spread: frozenset) -> torch.fx.GraphModule:
        """The rewritten graph for inputs `spread` given compact (the others at the bucket's
        sizes)."""
        gm = self._graphs.get(spread)
        if gm is None:
            gm = self._graphs[spread] = self._rewritten(self.source, spread)
        return gm

    # -- which ops are safe ------------------------------------------------------------------

    def _visit(self, n: torch.fx.Node) -> None:
        if n.op != "call_function":
            return
        self._check_sizes_as_values(n)
        found: list = []
        torch.fx.node.map_arg((n.args, n.kwargs), found.append)
        outputs = _val(n) if isinstance(_val(n), (list, tuple)) else [_val(n)]
        if not any(_dynamic(_val(a)) for a in found) and not any(_dynamic(v) for v in outputs):
            return
        if n.target in _SIZE_MATH:
            return
        packet = getattr(n.target, "overloadpacket", None)
        if packet is None:
            raise _NotBucketed(f"{n.target} on a dynamic size")
        if torch.Tag.nondeterministic_seeded in n.target.tags:
            # at the bucket's size it would draw other numbers than at the true one
            raise _NotBucketed(f"the random op {packet.__name__} on a dynamic size")
        x = n.args[0] if n.args else None
        if packet in _VIEWS:
            moves = _regrouping(_shape(x), _shape(n))
            if moves:
                self.moves[n] = moves
        elif packet in _REDUCTIONS:
            dims = _dynamic_dims(x, _reduced_dims(n, _val(x).dim()))
            if dims:
                self.masks.append((n, 0, dims, _REDUCTIONS[packet]))
                if packet is _aten.mean:
                    self.means.add(n)
        elif packet in (_aten._softmax, _aten._log_softmax):
            dims = _dynamic_dims(x, {n.args[1] % _val(x).dim()})
            if dims:
                self.masks.append((n, 0, dims, "min"))
        elif packet in _CONTRACTIONS:
            ia, da, ib, db = _CONTRACTIONS[packet]
            if _dynamic_dims(n.args[ia], {da}) or _dynamic_dims(n.args[ib], {db}):
                # both zero in the padding: a 0 times an infinite padding would be NaN
                if da not in self._zeros(n.args[ia]):
                    self.masks.append((n, ia, {da}, 0))
                if db not in self._zeros(n.args[ib]):
                    self.masks.append((n, ib, {db}, 0))
        elif packet is _aten.native_layer_norm:
            rank = _val(x).dim()
            if _dynamic_dims(x, set(range(rank - len(n.args[1]), rank))):
                raise _NotBucketed("layer norm over a dynamic dimension")
        elif packet in (_aten.slice, _aten.select):
            dim = (n.args[1] if len(n.args) > 1 else 0) % _val(x).dim()
            start = n.args[2] if len(n.args) > 2 else 0
            if _dynamic_dims(x, {dim}) and not (isinstance(start, int) and start >= 0):
                # the last k elements (x[:, -k:], x[:, -1]): taken at the true size
                end = n.args[3] if len(n.args) > 3 else None
                step = n.args[4] if len(n.args) > 4 else 1
                k = 1 if packet is _aten.select else -start if isinstance(start, int) else 0
                whole = end is None or (isinstance(end, int) and end >= 2 ** 62)
                if not (isinstance(start, int) and start < 0 and (packet is _aten.select or (
                        whole and step == 1 and _shape(n)[dim] == k))):
                    raise _NotBucketed(f"{packet.__name__} of a dynamic dimension from its end")
                self.tails[n] = (dim, start if packet is _aten.select else -k, k)
        elif packet in (_aten.split, _aten.split_with_sizes):
            dim = (n.args[2] if len(n.args) > 2 else 0) % _val(x).dim()
            if _dynamic_dims(x, {dim}):
                raise _NotBucketed("a split of a dynamic dimension")
        elif packet in _INDEXED:
            # indices in the padding made valid: whatever an index computed from padding is,
            # the device's index check would raise for it
            index = _INDEXED[packet]
            dims = _dynamic_dims(n.args[index])
            if dims:
                self.masks.append((n, index, dims, 0))
            # indices into a dynamic dimension: one at or past the true size would read the
            # padding where PyTorch raises, so it becomes the bucket's size, which the check
            # refuses
            source, along = (n.args[0], 0) if packet is _aten.embedding else (x, n.args[1])
            along %= max(_val(source).dim(), 1)
            if _dynamic_dims(source, {along}):
                self.masks.append((n, index, set(), ("bound", _shape(source)[along])))
        elif packet in _DIVISIONS and len(n.args) > 1 and _is_tensor(n.args[1]) \
                and not _val(n.args[1]).is_floating_point() and _dynamic_dims(n.args[1]):
            # an integer division by padding would raise for a zero divisor
            self.masks.append((n, 1, _dynamic_dims(n.args[1]), 1))
        elif packet is _aten.index_put:
            indexed = {d for d, t in enumerate(n.args[1]) if t is not None}
            masks = [t for t in n.args[1] if t is not None and _val(t).dtype == torch.bool]
            if any(_dynamic_dims(t) for t in masks) or (masks and _dynamic_dims(x, indexed)):
                raise _NotBucketed("index_put by a boolean mask over a dynamic dimension")
            for d in _dynamic_dims(x, indexed):
                # indices into a dynamic dimension: a negative one counts from the true size,
                # and one at or past it, which PyTorch refuses, becomes the bucket's size
                self.masks.append((n, (1, d), set(), ("wrap", _shape(x)[d])))
            indices = [t for t in n.args[1] if t is not None]
            accumulate = n.args[3] if len(n.args) > 3 else n.kwargs.get("accumulate", False)
            dynamic = [t for t in indices if _dynamic_dims(t)]
            if dynamic and accumulate:
                # the padding's indices add zeros (and are made valid)
                if _shape(n.args[2])[:1] != _shape(indices[0])[:1]:
                    raise _NotBucketed("index_put with dynamic indices")
                self.masks.append((n, 2, _dynamic_dims(n.args[2]), 0))
                for k, t in enumerate(n.args[1]):
                    if t is not None and _dynamic_dims(t):
                        self.masks.append((n, (1, k), _dynamic_dims(t), 0))
            elif dynamic:
                # a write: the padding writes the first valid element's value at its index
                # again (a static KV cache written at a prompt's positions)
                if any(_val(t).dim() > 1 for t in indices) or any(
                        _shape(t) != _shape(dynamic[0]) for t in dynamic):
                    raise _NotBucketed("index_put with dynamic indices of several shapes")
                for k, t in enumerate(n.args[1]):
                    if t is not None and _dynamic_dims(t):
                        self.masks.append((n, (1, k), {0}, "first"))
                # where the indices' dimension is in the values, broadcast to x[indices]
                indexed = sorted(indexed)
                adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
                values = _val(n.args[2]).dim()
                at = (indexed[0] if adjacent else 0) - (_val(x).dim() - len(indexed) + 1 - values)
                if 0 <= at < values and _dynamic_dims(n.args[2], {at}):
                    self.masks.append((n, 2, {at}, "first"))
        elif packet is _aten.cat:
            dim = (n.args[1] if len(n.args) > 1 else 0) % _val(n).dim()
            parts = [t for t in n.args[0] if _val(t).dim() == _val(n).dim()]  # not 1-d empties
            if any(_dynamic_dims(t, {dim}) for t in parts):
                # each part's valid elements are gathered to follow the last one's (a growing
                # KV cache: cat((past, new), dim=-2))
                self.joins[n] = (dim, [_shape(t)[dim] for t in parts])
        elif packet in (_aten.scatter, _aten.scatter_add, _aten.scatter_reduce):
            index = n.args[2]
            if _dynamic_dims(index):
                self.masks.append((n, 2, _dynamic_dims(index), 0))
            dim = n.args[1] % max(_val(index).dim(), 1)
            target = _shape(x)
            # the padding's elements must land in the padding: along every dynamic dimension
            # but the scattered one, where the output has the same dynamic size
            if any(d == dim or target[d] != _shape(index)[d] for d in _dynamic_dims(index)):
                raise _NotBucketed(f"{packet.__name__} of dynamic size into other positions")
        elif packet is _aten.arange:
            if len(n.args) > 1 and n.args[0] != 0:
                raise _NotBucketed("an arange from a start")
        elif not (packet in _POSITIONAL or packet in _FACTORIES
                  or torch.Tag.pointwise in n.target.tags):
            raise _NotBucketed(f"{packet.__name__} on a dynamic size")

    def _zeros(self, node) -> set[int]:
        """The dimensions along which `node`'s padding is known to hold zeros: a softmax's
        output along the dimension it masked (exp(-inf)), through the views taken of it."""
        if not isinstance(node, torch.fx.Node) or node.op != "call_function":
            return set()
        packet = getattr(node.target, "overloadpacket", None)
        source = node.args[0] if node.args else None
        if packet is _aten._softmax:
            return _dynamic_dims(source, {node.args[1] % _val(source).dim()})
        if packet in (_aten.expand, _aten.clone, _aten.alias, _aten.detach):
            lead = _val(node).dim() - _val(source).dim()
            return {d + lead for d in self._zeros(source)}
        if packet in (_aten.permute, _aten.transpose, _aten.t):
            rank = _val(source).dim()
            if packet is _aten.permute:
                order = [d % rank for d in node.args[1]]
            else:
                a, b = (node.args[1] % rank, node.args[2] % rank) if packet is _aten.transpose \
                    else (0, 1)
                order = list(range(rank))
                order[a], order[b] = order[b], order[a]
            zeros = self._zeros(source)
            return {k for k, d in enumerate(order) if d in zeros}
        if packet in _VIEWS and node not in self.moves:
            zeros = self._zeros(source)
            return {gj[0] for gi, gj in _groups(_shape(source), _shape(node))
                    if len(gi) == 1 and len(gj) == 1 and gi[0] in zeros}
        return set()

    def _check_sizes_as_values(self, n: torch.fx.Node) -> None:
        """A size anywhere but where it gives a size (a view's, an expand's or a factory's sizes,
        an arange's or a slice's end) would be the bucket's there, not the true one: an index, a
        bound, a value. A Scalar given a size gets the true size, a 0-d tensor, through the op's
        Tensor overload; anything else keeps the graph from being bucketed."""
        schema = getattr(n.target, "_schema", None)
        if schema is None:
            return
        packet = n.target.overloadpacket
        given = list(zip(schema.arguments, n.args)) + [
            (a, n.kwargs[a.name]) for a in schema.arguments if a.name in n.kwargs]
        for k, (arg, value) in enumerate(given):
            found: list = []
            torch.fx.node.map_arg(value, found.append)
            symbolic = [f for f in found if isinstance(_val(f), (torch.SymInt, torch.SymFloat,
                                                                 torch.SymBool))]
            if not symbolic:
                continue
            if (packet, arg.name) in _SIZE_ARGUMENTS or (
                    packet in _VIEWS | _FACTORIES | {_aten.expand, _aten.expand_copy}
                    and arg.name in ("size", "shape")):
                continue
            tensor_overload = getattr(packet, "Tensor", None)
            if (n.target._overloadname in ("Scalar", "Tensor") and tensor_overload is not None
                    and isinstance(value, torch.fx.Node) and k < len(n.args)
                    and isinstance(_val(value), torch.SymInt)):
                self.values.setdefault(n, []).append((k, _expr(_val(value))))
                continue
            raise _NotBucketed(f"{n.target} takes a size as a value ({arg.name})")

    # -- the rewritten graph ----------------------------------------------------------------------

    def _size(self, e: sympy.Expr) -> int:
        """The index of size `e` among the true sizes given to the program."""
        if e not in self.sizes:
            self.sizes.append(e)
        return self.sizes.index(e)

    def _rewritten(self, gm: torch.fx.GraphModule, spread: frozenset) -> torch.fx.GraphModule:
        masks: dict[torch.fx.Node, list] = {}
        for node, arg, dims, fill in self.masks:
            masks.setdefault(node, []).append((arg, dims, fill))
            source = node.args[arg[0]][arg[1]] if isinstance(arg, tuple) else node.args[arg]
            for d in dims:
                self._size(_shape(source)[d])
            if isinstance(fill, tuple):
                self._size(fill[1])
        for node in self.means:
            self._size(_count(node))
        self.zeroed = [p for p, dims in zip(self.placeholders, self.inputs) if dims
                       and isinstance(_val(p), torch.Tensor) and not _val(p).is_floating_point()
                       and _val(p).dtype != torch.bool]
        for p in self.zeroed:
            for d in _dynamic_dims(p):
                self._size(_shape(p)[d])
        for node, moves in self.moves.items():
            for _, _, _, size, inner in moves:
                self._size(size * inner)
        for node, values in self.values.items():
            for _, e in values:
                self._size(e)
        for node, (dim, _, _) in self.tails.items():
            self._size(_shape(node.args[0])[dim])
        for node, (dim, sizes) in self.joins.items():
            for k in range(1, len(sizes)):
                if not sum(sizes[:k]).is_number:
                    self._size(sum(sizes[:k]))
        results = _results(gm)
        for i in self.compacted:
            for e in _shape(results[i]):
                if not e.is_number:
                    self._size(e)
        graph = torch.fx.Graph()
        env: dict[torch.fx.Node, torch.fx.Node] = {}
        rw = _Rewriter(self, graph)
        for n in gm.graph.nodes:
            if n.op == "output":
                continue
            if n.op == "placeholder":
                env[n] = graph.node_copy(n, env.__getitem__)
                if n is self.placeholders[-1]:
                    rw.start(env)
                    for i in sorted(spread):
                        p = self.placeholders[i]
                        env[p] = rw.spread(env[p], p)
                    for p in self.placeholders:  # indices: no garbage in the padding
                        if p in self.zeroed:
                            env[p] = rw.zeroed(env[p], p)
                continue
            if n in self.moves:
                env[n] = rw.view(n, env)
            elif n in self.values:
                env[n] = rw.sized(n, self.values[n], env)
            elif n in self.tails:
                env[n] = rw.tail(n, env)
            elif n in self.joins:
                env[n] = rw.join(n, env)
            elif n in masks:
                env[n] = rw.masked(n, masks[n], env)
            else:
                env[n] = graph.node_copy(n, env.__getitem__)
        results = _results(gm)
        compacted = {i: rw.compacted(env[results[i]], results[i]) for i in self.compacted}
        graph.output(tuple(compacted[i] if i in compacted else torch.fx.node.map_arg(
            r, env.__getitem__) for i, r in enumerate(results)))
        return torch.fx.GraphModule(gm, graph)

    # -- a call -----------------------------------------------------------------------------------

    def call(self, args: list) -> "_Call":
        """What a call with these arguments' sizes runs at: worked out once per set of sizes."""
        values = []
        for s, (i, d) in self.symbol_at.items():
            values.append(int(args[i]) if d is None else args[i].shape[d])
        key = tuple(values)
        call = self._calls.get(key)
        if call is None:
            if len(self._calls) >= 4096:
                self._calls.clear()
            call = self._calls[key] = _Call(self, dict(zip(self.symbol_at, values)), args)
        return call


class _Call:
    """One set of true sizes: the buckets' sizes, how each input is padded, the true sizes given
    to the program (a device tensor, kept), and how each output is cut back."""

    def __init__(self, plan: Plan, at_n: dict, args: list):
        at_b = {s: bucket(n, plan.ladder, *plan.bounds.get(s, (None, False)))
                for s, n in at_n.items()}
        self.ints = {i: int(e.subs(at_b)) for i, e in plan.int_inputs.items()}
        self.pads = {i: {d: int(e.subs(at_b)) for d, e in dims}
                     for i, dims in enumerate(plan.inputs) if dims and i not in plan.int_inputs}
        self.spreadable = plan.spreadable
        device = next((a.device for a in args if isinstance(a, torch.Tensor)
                       and a.device.type == "tpu"), None)
        sizes = torch.tensor([int(e.subs(at_n)) for e in plan.sizes], dtype=torch.int64)
        sizes = sizes.to(device)
        self.sizes = [sizes[k] for k in range(len(plan.sizes))]
        self.outputs: list = []
        for i, spec in enumerate(plan.outputs):
            if isinstance(spec, sympy.Expr):
                self.outputs.append(("size", int(spec.subs(at_n))))
            elif i in plan.compacted:
                self.outputs.append(("compact", [int(e.subs(at_n)) for e in spec]))
            elif spec is not None:
                self.outputs.append(("narrow", [(d, int(e.subs(at_n))) for d, e in
                                                enumerate(spec) if not e.is_number]))
            else:
                self.outputs.append(None)

    def padded(self, args: list) -> tuple[list, frozenset]:
        """The arguments at the buckets' sizes, and the true sizes after them; and which inputs
        come compact, for the graph to spread (Plan.graph)."""
        out = list(args)
        spread = set()
        for i, value in self.ints.items():
            out[i] = value
        for i, sizes in self.pads.items():
            compact = _compact(args[i], sizes) if i in self.spreadable else None
            if compact is not None:
                out[i] = compact
                spread.add(i)
            else:
                out[i] = _pad(args[i], sizes)
        return out + self.sizes, frozenset(spread)

    def unpadded(self, outputs: list) -> list:
        """The outputs at their true sizes: views of their valid elements."""
        result = list(outputs)
        for i, spec in enumerate(self.outputs):
            if spec is None:
                continue
            kind, how = spec
            if kind == "size":
                result[i] = how
            elif kind == "compact":
                result[i] = outputs[i][:math.prod(how)].view(how)
            else:
                t = outputs[i]
                for d, length in how:
                    t = t.narrow(d, 0, length)
                result[i] = t
        return result



def _growing(e: sympy.Expr, symbols: set) -> bool:
    """Whether size `e` is a polynomial in `symbols` with integer coefficients, non-negative but
    for the constant (so at the buckets' sizes it is at least its true value, and is computed
    from them by + and *)."""
    if e.is_number:
        return True
    if not e.free_symbols <= symbols:
        return False
    try:
        poly = sympy.Poly(e, *sorted(e.free_symbols, key=str))
    except sympy.PolynomialError:
        return False
    return poly.domain.is_ZZ and all(c >= 0 for m, c in poly.terms() if any(m))


def mutated_inputs(gm: torch.fx.GraphModule) -> set[int]:
    """The inputs the graph writes (AOTAutograd keeps input mutations as copy_ into them)."""
    placeholders = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    return {placeholders[n.args[0]] for n in gm.graph.nodes
            if n.op == "call_function" and n.target is torch.ops.aten.copy_.default
            and n.args and n.args[0] in placeholders}


def _results(gm: torch.fx.GraphModule) -> list:
    """The graph's outputs, in order (a node, or None for a gradient not computed)."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    results = output.args[0]
    if not isinstance(results, (list, tuple)):
        raise _NotBucketed("its output is not a list")
    return list(results)


def _prefix(shape: list[sympy.Expr]) -> bool:
    """Whether a tensor of `shape` at a bucket's sizes holds its valid elements at the front: one
    dynamic dimension, with only 1s before it."""
    dynamic = [d for d, e in enumerate(shape) if not e.is_number]
    return len(dynamic) == 1 and all(e == 1 for e in shape[:dynamic[0]])


def _strides_fixed(shape: list[sympy.Expr]) -> bool:
    """Whether a contiguous tensor of `shape` keeps its elements where the same tensor at the
    bucket's sizes has them: no dynamic dimension after one of another size than 1."""
    wide = False
    for e in shape:
        if not e.is_number and wide:
            return False
        wide = wide or e != 1
    return True


def _contiguous_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def _at_buckets(t: torch.Tensor, sizes: dict[int, int]) -> list[int]:
    """`t`'s shape with `sizes` along those dims."""
    return [sizes.get(d, s) for d, s in enumerate(t.shape)]


def _same_layout(t: torch.Tensor, sizes: dict[int, int]) -> bool:
    """Whether `t` is contiguous with its elements where a contiguous tensor at the buckets'
    `sizes` has them (the strides of its dimensions of size 1 aside)."""
    shape = _at_buckets(t, sizes)
    return t.is_contiguous() and all(n <= 1 or a == b for n, a, b in zip(
        t.shape, _contiguous_strides(shape), t.stride()))


def _room(t: torch.Tensor) -> int:
    """How many elements `t`'s storage holds from `t`'s first one on."""
    return t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()


def _pad(t: torch.Tensor, sizes: dict[int, int]) -> torch.Tensor:
    """`t` at `sizes` along those dims. A tensor whose storage reaches that far with its own
    strides (or, contiguous, with those of the bucket's sizes, if the same layout) is viewed there,
    without a copy: what a forward saved for its backward is such a view of its padded output,
    and whatever the padding holds, the masks keep it out of every valid element (integer
    inputs, which may be indices, have theirs zeroed first in the graph). Others are copied,
    padded with zeros."""
    shape = _at_buckets(t, sizes)
    # a contiguous one's strides of dimensions of size 1 follow the sizes: the bucket's, where
    # they place every element alike, keep the program's inputs the same at every size; one
    # laid out otherwise has strides that change with its size, each a program of its own: a
    # copy instead
    same = _same_layout(t, sizes)
    strides = _contiguous_strides(shape) if same else t.stride()
    reach = sum((s - 1) * st for s, st in zip(shape, strides))
    if all(st > 0 for st in strides) and reach < _room(t) and (same or not t.is_contiguous()):
        return t.as_strided(shape, strides, t.storage_offset())
    pad = [0] * (2 * t.dim())
    for d, b in sizes.items():
        pad[2 * (t.dim() - 1 - d) + 1] = b - t.shape[d]
    # a copy also when it needs no padding: the program then sees the same inputs (storages
    # shared with no other input) at every size of the bucket
    return _padded_copy(t, pad)


def _compact(t: torch.Tensor, sizes: dict[int, int]) -> torch.Tensor | None:
    """For the graph to spread: contiguous `t` in a storage longer than itself (a cache a graph
    returned, grown in later calls), as a view of its storage at the buckets' sizes and their
    contiguous strides, whose first elements are `t`'s in order; None where that needs a copy
    (which might as well be padded: _pad) or `t` is all of its storage (a user's input, or, at
    the bucket's own size, what a forward saved for its backward: padded already). At the
    bucket's own size the spread moves nothing, but its program is the other sizes' one."""
    shape = _at_buckets(t, sizes)
    room = _room(t)
    if not t.is_contiguous() or room < math.prod(shape) or room <= t.numel():
        return None
    return t.as_strided(shape, _contiguous_strides(shape), t.storage_offset())


def _padded_copy(t: torch.Tensor, pad: list[int]) -> torch.Tensor:
    whole = t.is_contiguous() and t.storage_offset() == 0 and \
        t.untyped_storage().nbytes() == t.numel() * t.element_size()
    if whole and t.numel() <= HOST_PAD_ELEMENTS and t.device.type != "cpu":
        # a small one (token ids, targets) through the host: padded on the device, it would be
        # a program of its own compiled for each size
        return torch.nn.functional.pad(t.cpu(), pad).to(t.device)
    return torch.nn.functional.pad(t, pad)


def _extreme(dtype: torch.dtype, which: str):
    if dtype.is_floating_point:
        return float("-inf") if which == "min" else float("inf")
    if dtype == torch.bool:
        return which == "max"
    info = torch.iinfo(dtype)
    return info.min if which == "min" else info.max


def _bound(value) -> tuple[int | None, bool]:
    """A symbolic size's upper bound, if it has one, and whether mark_dynamic's `max` gave it (else
    a guard did, as slicing a 512-row buffer bounds the slice's length by 512)."""
    try:
        env, expr = value.node.shape_env, value.node.expr
        upper = _finite(env.var_to_range[expr].upper)
    except (AttributeError, KeyError):
        return None, False
    if upper is None:
        return None, False
    return upper, _marked_maxima(env).get(expr) == upper


def _finite(upper) -> int | None:
    from torch.utils._sympy.numbers import int_oo

    if upper is int_oo or upper is sympy.oo or not upper.is_Integer or int(upper) >= 2 ** 31:
        return None
    return int(upper)


def _marked_maxima(env) -> dict:
    """mark_dynamic's `max` of each symbol it bounded, read from Dynamo's tracing context (the
    constraints on its inputs' sizes, by source); kept on the shape environment for graphs
    compiled outside that context (a backward compiled at its first call), and saved with it
    when AOTAutograd's cache pickles a bucketed graph's values (_autograd_cache)."""
    from torch._dynamo.source import TensorProperty, TensorPropertySource
    from torch._guards import TracingContext
    from torch.fx.experimental.symbolic_shapes import StrictMinMaxConstraint

    marked = env.__dict__.setdefault("_torchtpu_marked_maxima", {})
    context = TracingContext.try_get()
    symbols = getattr(env, "source_to_var", {})
    for symbolic in list(getattr(context, "tensor_to_context", {}).values()):
        source = getattr(symbolic, "tensor_source", None)
        for d, constraint in enumerate(getattr(symbolic, "constraint_sizes", None) or ()):
            if source is None or not isinstance(constraint, StrictMinMaxConstraint):
                continue
            symbol = symbols.get(TensorPropertySource(source, TensorProperty.SIZE, d).name)
            if isinstance(symbol, sympy.Symbol) and _finite(constraint.vr.upper) is not None:
                marked[symbol] = _finite(constraint.vr.upper)
    return marked


def plan(gm: torch.fx.GraphModule, visible: int | None = None,
         aliased: bool = False) -> tuple[Plan | None, str]:
    """The graph's bucketed plan, or None and why not. `visible`: how many of its outputs the
    caller sees (None: all); `aliased`: the caller rebuilds some outputs as views of another
    tensor from their layout, which at the bucket's sizes would not be the true one."""
    ladder = factor()
    if ladder is None:
        return None, NOT_VARYING[1]
    if aliased:
        return None, "an output is rebuilt as a view of another tensor"
    try:
        return Plan(gm, ladder, visible), ""
    except _NotBucketed as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - a graph this module does not understand: per size
        return None, f"{type(e).__name__}: {e}"
