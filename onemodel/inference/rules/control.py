"""Inference rules of the control-flow operators If, Loop and Scan (the kernels of
``onemodel/evaluate/kernels/control.py``, same keys and versions).

The body graphs are inferred by :meth:`~..context.InferContext.infer_graph` with their formal
inputs bound to the node's Values; a body reads the names of the enclosing scopes (ONNX Part 1,
Clause 5.4.3).

* ``If``: both branches are inferred; an output is the branch's Value when the condition is a
  known constant, else the join of the two (:func:`join`: equal extents kept, others unknown,
  ranks that differ an unknown rank); element types that differ are a contradiction (Clause
  10.4: one type per output).
* ``Loop``: the body takes ``iteration_num`` (int64 ``[]``), ``cond`` (bool ``[]``, true: the body
  only runs while the condition holds) and the loop-carried values. A carried value whose
  inferred type after one iteration differs from the one it entered with is generalized (the
  join) and the body inferred again with the generalized types, until they stay (at most
  :data:`_PASSES` passes; then the still changing ones are unknown). The final carried values
  are the body's outputs of the last pass when the body provably runs, else the generalized
  ones (zero iterations leave the initial values). A scan output is the stack of the
  per-iteration values on a new axis 0 of extent the trip count, known when ``M`` is a known
  constant (or an expression of extents, as ``Shape`` gives) and the body's condition is
  provably true (or ignored: ``M`` given without ``cond``) and the initial ``cond`` is absent
  or known true.
* ``Scan`` (opset 9 and later): states, then ``num_scan_inputs`` scan inputs sliced along
  ``scan_input_axes``; scan outputs stacked along ``scan_output_axes`` (negative axes counted
  in the stacked rank); the number of iterations is the scan inputs' common extent (extents
  that cannot be equal are a contradiction). ``Scan`` opset 8: a leading batch axis on states
  and scan inputs, scan outputs ``[batch, sequence, ...]``.

Zero iterations: the operators' definitions do not say what a scan output's other extents
are when nothing was stacked (the evaluator takes the body's declared extents, 0 where it
declares none, :func:`onemodel.evaluate.kernels.control._empty_like_output`). Where the number of
iterations is not provably at least one, a scan output is the join of the stacked shape and
that empty shape, so nothing is claimed that a zero-iteration run would not give (Clause 9.4).
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ..value import UNKNOWN, Value
from ._util import lower, nonneg

_BOOL, _INT64, _FLOAT = 9, 7, 1

#: At most this many inferences of a loop body (the first, then with generalized types).
_PASSES = 4


def join(ctx, a: Value | None, b: Value | None, what: str) -> Value:
    """What is known of a value that is either ``a`` or ``b``: equal kinds and element types
    kept (element types or kinds that differ are a contradiction, reported with ``what``, and
    give an unknown Value), per axis the extent both have, an unknown rank where the ranks
    differ, elements only when equal. Sequences and optionals join their elements. Never
    raises."""
    if a is None or b is None or a.kind is None or b.kind is None:
        return UNKNOWN
    if a == b:
        return a
    if a.kind != b.kind and "optional" in (a.kind, b.kind):
        return UNKNOWN   # a loop-carried optional whose body gives its element (Loop-16)
    if a.kind != b.kind:
        ctx.contradiction(f"{what}: {a} and {b} are not of one type")
        return UNKNOWN
    if a.kind in ("sequence", "optional"):
        if a.inner is None or b.inner is None:
            return Value(a.kind)
        return Value(a.kind, inner=join(ctx, a.inner, b.inner, what))
    if a.kind not in ("tensor", "sparse_tensor"):
        return a if a == b else Value(a.kind)
    elem = a.elem
    if a.elem is not None and b.elem is not None and a.elem != b.elem:
        ctx.contradiction(f"{what}: element types of {a} and {b} differ")
        return UNKNOWN
    if elem is None:
        elem = b.elem
    sa, sb = a.shape, b.shape
    if sa is None or sb is None or len(sa) != len(sb):
        shape = None
    else:
        shape = tuple(x if x is not None and x == y else None for x, y in zip(sa, sb))
    data = a.data if shape == sa and shape == sb and a.data == b.data else None
    return Value(a.kind, elem, shape, data)


def _bool_known(v: Value | None):
    """True/False when ``v`` is a one-element bool tensor whose element is known, else None."""
    if v is None or v.kind != "tensor":
        return None
    d = v.data
    if d is not None and len(d) == 1 and type(d[0]) is bool:
        return d[0]
    return None


def _body_outputs_declared(ctx, name: str) -> list:
    """The declared types of the outputs of GRAPH attribute ``name`` (``ir.Type`` or None)."""
    g = ctx.attr(name, None)
    if g is None:
        return []
    return [vi.type for vi in g.outputs]


def _fixpoint(ctx, name: str, head: list, carried: list, tail, n_out_carried: int,
              offset: int, what: str):
    """Infer body ``name`` with inputs ``head + carried + tail(carried)`` until the carried
    outputs (``outs[offset : offset + n]``) agree with the carried inputs; each pass enters
    the join of what went in and what came out (a kind that changes between an optional and its
    element gives an unknown value). Contradictions and constraints found by
    passes other than the last are dropped (the last pass, with the most general types, has
    its own). Returns (carried types, body outputs of the last pass)."""
    result = ctx._engine.result
    n_errors, n_constraints = len(result.contradictions), len(result.constraints)
    state = [v if v is not None else UNKNOWN for v in carried]
    outs: list = []
    kept: list = []   # the contradictions of the joins (types that change), of every pass

    def again(state):
        del result.contradictions[n_errors:]
        del result.constraints[n_constraints:]
        return ctx.infer_graph(name, head + state + tail(state))

    for p in range(_PASSES):
        outs = again(state)
        got = outs[offset:offset + n_out_carried]
        nxt = list(state)
        mark = len(result.contradictions)
        for k in range(min(len(got), len(state))):
            nxt[k] = join(ctx, state[k], got[k], f"{what} value {k}")
        kept += [c for c in result.contradictions[mark:]
                 if all(c.message != d.message for d in kept)]
        del result.contradictions[mark:]
        if nxt == state:
            break
        state = nxt
    else:
        state = [Value(s.kind) if s.kind is not None else UNKNOWN for s in state]
        outs = again(state)
    result.contradictions.extend(kept)
    return state, outs


def _final(state: list, outs: list, offset: int, at_least_one: bool) -> list:
    """The final carried values: the body's last outputs when the body provably runs (the
    last pass had the most general inputs, so they hold for every iteration), else the
    generalized values (zero iterations give the initial ones)."""
    if not at_least_one:
        return list(state)
    got = outs[offset:offset + len(state)]
    return [g if g is not None and g.kind is not None else s
            for s, g in zip(state, got + [None] * (len(state) - len(got)))]


def _empty_stack(declared, elem) -> Value:
    """The evaluator's scan output of zero iterations for a body output declared ``declared``
    (an ``ir.Type`` or None): ``[0, *declared extents]``, 0 for an extent it does not give,
    ``[0]`` without a declared shape; element type ``elem``."""
    dims = [0]
    t = getattr(declared, "tensor_type", None) if declared is not None else None
    if t is not None and t.shape is not None:
        dims += [d.dim_value if d.dim_value is not None else 0 for d in t.shape.dims]
    return Value.tensor(elem, dims)


def _stacked(ctx, v: Value | None, length, axis: int, at_least_one: bool, declared,
             what: str) -> Value:
    """The scan output stacking per-iteration Values ``v`` on a new axis ``axis`` (negative:
    counted in the stacked rank) of extent ``length``; joined with the zero-iteration value
    unless ``at_least_one``."""
    if v is None or v.kind != "tensor":
        return Value.tensor(None if v is None else v.elem, None)
    shape = None
    if v.shape is not None:
        r = len(v.shape) + 1
        a = ctx.axis(axis, r, f"{what} axis")
        if a is not None:
            shape = list(v.shape)
            shape.insert(a, length)
    out = Value.tensor(v.elem, shape)
    if at_least_one:
        return out
    empty = _empty_stack(declared, v.elem)
    if shape is not None and len(shape) == empty.rank:
        return Value.tensor(v.elem, [x if type(x) is int and x == y else None
                                     for x, y in zip(shape, empty.shape)])
    return Value.tensor(v.elem, None)


# -- If ----------------------------------------------------------------------------------------
@rule("If")
def if_(ctx, cond):
    """If: both branches inferred; an output is the chosen branch's when the condition is
    known, else the join of the branches' (:func:`join`)."""
    then_out = ctx.infer_graph("then_branch", [])
    else_out = ctx.infer_graph("else_branch", [])
    n = ctx.num_outputs
    for name, outs in (("then_branch", then_out), ("else_branch", else_out)):
        if ctx.attr(name, None) is not None and len(outs) != n:
            ctx.contradiction(f"{name} has {len(outs)} outputs, the node {n}")
    if cond is not None and cond.shape is not None and cond.shape not in ((), (1,)) \
            and all(type(d) is int for d in cond.shape):
        ctx.contradiction(f"the condition has shape {D.shape_text(cond.shape)}, not one element")
    pick = _bool_known(cond)
    res = []
    for k in range(n):
        a = then_out[k] if k < len(then_out) else None
        b = else_out[k] if k < len(else_out) else None
        j = join(ctx, a, b, f"output {k} of the branches")
        if pick is True and a is not None:
            j = a if j.kind is not None else UNKNOWN
        elif pick is False and b is not None:
            j = b if j.kind is not None else UNKNOWN
        res.append(j)
    return tuple(res)



# -- Loop --------------------------------------------------------------------------------------
@rule("Loop")
def loop(ctx, max_trip_count=None, cond=None, *carried):
    """Loop (Clause 9 on its body): see the module docstring. Outputs: the N final carried
    values, then the K scan outputs ``[trips, *body extents]``."""
    n = len(carried)
    iteration = Value.tensor(_INT64, ())
    keep = Value.tensor(_BOOL, (), (True,))
    state, outs = _fixpoint(ctx, "body", [iteration, keep], list(carried), lambda s: [], n, 1,
                            "Loop carried")
    if ctx.attr("body", None) is not None and len(outs) < 1 + n:
        ctx.contradiction(f"the body has {len(outs)} outputs; it needs at least {1 + n}")
    m = None
    if max_trip_count is not None:
        ints = ctx.ints(0)
        if ints is not None and len(ints) == 1 and (type(ints[0]) is int or nonneg(ints[0])):
            m = ints[0]   # an int, or an expression of extents (>= 0)
    low = lower(m)
    start = True if cond is None else _bool_known(cond)
    uses_body_cond = cond is not None or max_trip_count is None
    body_true = _bool_known(outs[0]) is True if outs else False
    trips = None
    if start is False or (type(m) is int and m <= 0):
        trips = 0
    elif start is True and m is not None and (body_true or not uses_body_cond):
        trips = m
    at_least_one = start is True and (max_trip_count is None or (low is not None and low >= 1))
    declared = _body_outputs_declared(ctx, "body")
    res = _final(state, outs, 1, at_least_one)
    for k in range(ctx.num_outputs - n):
        i = 1 + n + k
        v = outs[i] if i < len(outs) else None
        res.append(_stacked(ctx, v, trips, 0, at_least_one,
                            declared[i] if i < len(declared) else None, "Loop scan output"))
    return tuple(res)


# -- Scan --------------------------------------------------------------------------------------
def _axes(ctx, name: str, count: int) -> list:
    v = ctx.attr(name, None)
    if v is None:
        return [0] * count
    v = list(v) if isinstance(v, (list, tuple)) else None
    if v is None or len(v) != count or any(type(a) is not int for a in v):
        ctx.contradiction(f"attribute {name} has {v!r}, not {count} ints")
        return [None] * count
    return v


def _drop_axis(v: Value, axis) -> Value:
    if v.kind != "tensor" or v.shape is None or axis is None:
        return Value.tensor(v.elem, None)
    return Value.tensor(v.elem, v.shape[:axis] + v.shape[axis + 1:])


def _scan_length(ctx, extents: list):
    length = None
    first = True
    for d in extents:
        if first:
            length, first = d, False
        else:
            length = ctx.unify(length, d, "scan input sequence lengths")
    return length


@rule("Scan", since=9)
def scan(ctx, *inputs):
    """Scan, opset 9 and later: see the module docstring. Outputs: the N final states, then
    the K scan outputs (the body's slices with the sequence length inserted at
    ``scan_output_axes``)."""
    m = ctx.attr("num_scan_inputs", None)
    if type(m) is not int or m < 0 or m > len(inputs):
        ctx.contradiction(f"num_scan_inputs {m!r} does not fit {len(inputs)} inputs")
        return None
    n = len(inputs) - m
    xs = [v if v is not None else UNKNOWN for v in inputs[n:]]
    in_axes = _axes(ctx, "scan_input_axes", m)
    slices, extents = [], []
    for x, a in zip(xs, in_axes):
        ax = ctx.axis(a, x.rank, "scan input axis") if x.kind == "tensor" else None
        slices.append(_drop_axis(x, ax))
        extents.append(None if ax is None else x.shape[ax])
    length = _scan_length(ctx, extents) if extents else 0
    state, outs = _fixpoint(ctx, "body", [], list(inputs[:n]), lambda s: slices, n, 0,
                            "Scan state")
    k = ctx.num_outputs - n
    out_axes = _axes(ctx, "scan_output_axes", k)
    declared = _body_outputs_declared(ctx, "body")
    at_least_one = type(length) is int and length >= 1
    res = _final(state, outs, 0, at_least_one)
    for j in range(k):
        i = n + j
        v = outs[i] if i < len(outs) else None
        res.append(_stacked(ctx, v, length, out_axes[j], at_least_one,
                            declared[i] if i < len(declared) else None, "Scan output"))
    return tuple(res)


def _prefix(v, count: int):
    """(the leading ``count`` extents, ``v`` without them) of a tensor Value."""
    if v is None or v.kind != "tensor" or v.shape is None:
        return [None] * count, Value.tensor(None if v is None else v.elem, None)
    if len(v.shape) < count:
        return None, Value.tensor(v.elem, None)
    return list(v.shape[:count]), Value.tensor(v.elem, v.shape[count:])


@rule("Scan")
def scan8(ctx, sequence_lens=None, *inputs):
    """Scan, opset 8: states ``[batch, ...]`` and scan inputs ``[batch, sequence, ...]``, each
    batch entry scanned on its own (over its ``sequence_lens`` first steps). Outputs: the final
    states ``[batch, *body state]`` and scan outputs ``[batch, sequence, *body slice]``."""
    m = ctx.attr("num_scan_inputs", None)
    if type(m) is not int or m < 1 or m > len(inputs):
        ctx.contradiction(f"num_scan_inputs {m!r} does not fit {len(inputs)} inputs")
        return None
    n = len(inputs) - m
    batch, seq = [], []
    states, slices = [], []
    for i, v in enumerate(inputs):
        lead, rest = _prefix(v, 1 if i < n else 2)
        if lead is None:
            ctx.contradiction(f"input {i + 1} has rank {v.rank}; Scan-8 needs a batch axis"
                              + ("" if i < n else " and a sequence axis"))
            lead = [None, None]
        batch.append(lead[0])
        if i >= n:
            seq.append(lead[1])
        (states if i < n else slices).append(rest)
    b = _scan_length(ctx, batch)
    length = _scan_length(ctx, seq)
    if sequence_lens is not None and sequence_lens.shape is not None:
        if len(sequence_lens.shape) != 1:
            ctx.contradiction(f"sequence_lens has rank {len(sequence_lens.shape)}, not 1")
        else:
            b = ctx.unify(b, sequence_lens.shape[0], "batch extents")
    state, outs = _fixpoint(ctx, "body", [], states, lambda s: slices, n, 0, "Scan state")
    full = sequence_lens is None and type(length) is int and length >= 1
    state = _final(state, outs, 0, full)
    declared = _body_outputs_declared(ctx, "body")
    res = []
    for j in range(ctx.num_outputs):
        v = state[j] if j < n else (outs[j] if j < len(outs) else None)
        if j >= n:
            v = _stacked(ctx, v, length, 0, full, declared[j] if j < len(declared) else None,
                         "Scan output")
            if v.shape is not None:  # shorter sequences are padded to the longest
                v = Value.tensor(v.elem, (length,) + v.shape[1:])
        if v is None or v.kind != "tensor" or v.shape is None:
            res.append(Value.tensor(None if v is None else v.elem, None))
        else:
            res.append(Value.tensor(v.elem, (b,) + v.shape))
    return tuple(res)
