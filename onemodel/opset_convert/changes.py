"""What changed between two adjacent definitions of an operator, classified once: for converting
a node (:mod:`.engine`) and for the coverage table (docs/opset-conversion.md).

A change is named by the definition that introduced it, ``(domain, op_type, since)``: between
the definition introduced at ``since`` and the one before it (ONNX Part 1, Clause 14.3). Its
kind is one of

``types``
    the two definitions have the same inputs, outputs and attributes (names, options, types,
    defaults) and differ at most in the types their type constraints admit, or in which formal
    parameters share a type parameter: a node converts unchanged when the definition it goes
    to admits its element types and binds each type parameter to one type (checked against the
    model's declared and inferred types; a node whose type is unknown is refused where the
    definition it goes to admits fewer types than the one it leaves);
``adapter``
    a version adapter is attached to the definition (:func:`onemodel.operators.adapter`,
    ``onemodel/opset_convert/adapters/<family>.py``): it rewrites the node, or refuses it with
    a reason;
``semantic``
    the signatures match but the later definition admits behaviour the earlier one did not
    (:data:`SEMANTIC` says which and why): up is unchanged, down needs an adapter, else it is
    refused with that reason;
``uncovered``
    the signatures differ and no adapter is attached yet: refused, naming the difference.
"""

from __future__ import annotations

from ..ir.entries import normalize_domain

#: (domain, op_type, since) -> what the definition introduced at ``since`` admits that the one
#: before it did not, under an unchanged signature (Part 1, Table 13, fourth row). Converting
#: up is unchanged; converting down needs an adapter that proves the node does not use it.
SEMANTIC: dict[tuple[str, str, int], str] = {
    ("", "Gather", 11): "negative indices (counted from the end of the axis)",
    ("", "OneHot", 11): "negative indices (counted back from depth)",
    **{("", op, 11): "a negative axis (counted from the last)"
       for op in ("ArgMax", "ArgMin", "Concat", "Compress", "Flatten", "ReduceL1", "ReduceL2",
                  "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
                  "ReduceProd", "ReduceSum", "ReduceSumSquare", "Split", "Squeeze", "Unsqueeze",
                  "Hardmax", "LogSoftmax", "Softmax", "Scan")},
    ("", "Slice", 11): "negative axes and, with a negative step, INT_MIN as the end",
    **{("", op, 8): "multidirectional (numpy) broadcasting of its inputs"
       for op in ("Max", "Mean", "Min", "Sum")},
    ("", "PRelu", 7): "a slope unidirectionally broadcast to the input",
    ("", "If", 11): "branch outputs of different shapes",
    ("", "NonMaxSuppression", 11): "the stated range of iou_threshold, [0, 1]",
    **{("", op, 11): "explicit defaults of strides and dilations (1 along each spatial axis) "
                     "and the output extents of auto_pad stated anew"
       for op in ("AveragePool", "Conv", "ConvTranspose", "LpPool", "MaxPool", "MaxUnpool")},
    ("", "Pad", 19): "mode 'wrap'",
    ("", "Resize", 19): "coordinate_transformation_mode 'half_pixel_symmetric'",
    **{("", op, 18): "reduction 'max' and 'min'" for op in ("ScatterElements", "ScatterND")},
    ("", "Mod", 28): "fmod's rounding of the quotient restated in opset 28",
}

#: the kinds of :class:`Change`, in the coverage table's order
KINDS = ("types", "adapter", "semantic", "uncovered")


class Change:
    """The change between the definition of ``(domain, op_type)`` introduced at ``since`` and
    the one before it (introduced at ``before``).

    Attributes:
        kind: one of :data:`KINDS` (the module docstring).
        differences: what differs other than types, one phrase each (empty for ``types`` and
            ``semantic``).
        widened, narrowed: the type strings the later definition admits and the earlier does
            not, and the reverse, over all formal parameters (sorted).
        reason: for ``semantic``, what the later definition admits (:data:`SEMANTIC`).
        adapter: the adapter attached (kind ``adapter``, or ``semantic`` with one), or None.
    """

    __slots__ = ("domain", "op_type", "since", "before", "kind", "differences", "widened",
                 "narrowed", "reason", "adapter", "rebound")

    def __init__(self, domain, op_type, since, before, kind, differences, widened, narrowed,
                 reason=None, adapter=None, rebound=False):
        self.domain, self.op_type, self.since, self.before = domain, op_type, since, before
        self.kind, self.differences = kind, differences
        self.widened, self.narrowed = widened, narrowed
        self.reason, self.adapter = reason, adapter
        #: whether the formal parameters share type parameters differently
        self.rebound = rebound

    def types_checked(self, up: bool) -> bool:
        """Whether a node crossing this change unchanged needs its element types checked: the
        target admits types the source does not, or binds formals together differently (an
        adapter's rewrite is always checked)."""
        return bool(self.narrowed if up else self.widened) or self.rebound \
            or self.kind == "adapter"

    def __repr__(self):
        return (f"Change({self.domain or 'ai.onnx'}.{self.op_type} {self.before}->{self.since}: "
                f"{self.kind})")

    def summary(self, up: bool) -> str:
        """One cell of the coverage table: how a node is converted in that direction."""
        if self.kind == "adapter":
            return "adapter"
        if self.kind == "semantic":
            if up:
                return "identical" + self._types(up)
            return "adapter" if self.adapter is not None else f"refused: {self.reason}"
        if self.kind == "types":
            return "identical" + self._types(up)
        return "not yet covered: " + "; ".join(self.differences)

    def _types(self, up: bool) -> str:
        lost = self.narrowed if up else self.widened
        return f" (types not in the target: {', '.join(_short(t) for t in lost)})" if lost \
            else ""


def _short(t: str) -> str:
    return t[7:-1] if t.startswith("tensor(") else t


def _formals(s, io: str) -> list:
    return list(getattr(s, io))


def _partition(s) -> set:
    """The groups of formal parameters bound to one type parameter, as sets of positions."""
    groups: dict = {}
    for io in ("inputs", "outputs"):
        for k, f in enumerate(getattr(s, io)):
            if f.type_str in s.constraints:
                groups.setdefault(f.type_str, set()).add((io, k))
    return {frozenset(g) for g in groups.values()}


def differences(old, new) -> list[str]:
    """What differs between two definitions other than the types their constraints admit,
    one phrase each (``attribute 'axes' removed``, ``input 2 'axes' added``); empty when the
    signatures match."""
    out = []
    for io, what in (("inputs", "input"), ("outputs", "output")):
        a, b = getattr(old, io), getattr(new, io)
        for k in range(max(len(a), len(b))):
            fa = a[k] if k < len(a) else None
            fb = b[k] if k < len(b) else None
            if fa is None:
                out.append(f"{what} {k} {fb.name!r} added")
            elif fb is None:
                out.append(f"{what} {k} {fa.name!r} removed")
            elif (fa.name, fa.option, fa.is_homogeneous, fa.min_arity) != \
                    (fb.name, fb.option, fb.is_homogeneous, fb.min_arity):
                out.append(f"{what} {k} {fa.name!r} changed")
    for name in sorted(set(old.attributes) | set(new.attributes)):
        a, b = old.attributes.get(name), new.attributes.get(name)
        if a is None:
            out.append(f"attribute {name!r} added")
        elif b is None:
            out.append(f"attribute {name!r} removed")
        elif (a.type, a.required, a.has_default) != (b.type, b.required, b.has_default):
            out.append(f"attribute {name!r} changed")
        elif a.default != b.default:
            out.append(f"attribute {name!r} default {a.default!r} -> {b.default!r}")
    if not out and (old.min_input, old.max_input, old.min_output, old.max_output) != \
            (new.min_input, new.max_input, new.min_output, new.max_output):
        out.append("input or output counts changed")
    if not out and old.deprecated != new.deprecated:
        out.append("deprecated" if new.deprecated else "no longer deprecated")
    return out


def admitted(s, io: str, k: int) -> frozenset:
    """The normalized type strings formal parameter ``k`` of ``io`` of definition ``s`` admits
    (:func:`onemodel.validation.types.allowed`)."""
    from ..validation.types import allowed

    fs = getattr(s, io)
    if not fs:
        return frozenset()
    f = fs[min(k, len(fs) - 1)]
    return allowed(s, f.type_str)


def type_changes(old, new) -> tuple[list[str], list[str]]:
    """``(widened, narrowed)``: the type strings some formal parameter of ``new`` admits and
    that of ``old`` does not, and the reverse (sorted, each once)."""
    wide, narrow = set(), set()
    for io in ("inputs", "outputs"):
        for k in range(min(len(getattr(old, io)), len(getattr(new, io)))):
            a, b = admitted(old, io, k), admitted(new, io, k)
            wide |= b - a
            narrow |= a - b
    return sorted(wide), sorted(narrow)


_CACHE: dict = {}


def change(domain: str | None, op_type: str, since: int) -> Change | None:
    """The :class:`Change` introduced by the definition of ``(domain, op_type)`` at ``since``
    (a ``since_version`` of it other than the first); None for a first definition or one that
    does not exist. Cached."""
    from ..operators.table import definitions, exact

    d = normalize_domain(domain)
    key = (d, op_type, since)
    got = _CACHE.get(key)
    if got is not None:
        return got
    defs = definitions(d, op_type)
    idx = next((i for i, s in enumerate(defs) if s.since_version == since), None)
    if not idx:
        return None
    old, new = defs[idx - 1], defs[idx]
    diff = differences(old, new)
    wide, narrow = type_changes(old, new)
    fn = exact("adapter", d, op_type, since)
    reason = SEMANTIC.get(key)
    if reason is not None and not diff:
        kind = "semantic"
    elif fn is not None:
        kind = "adapter"
    elif not diff:
        kind = "types"
    else:
        kind = "uncovered"
    got = _CACHE[key] = Change(d, op_type, since, old.since_version, kind, diff, wide, narrow,
                               reason, fn, _partition(old) != _partition(new))
    return got


def changes(domain: str | None, op_type: str) -> list[Change]:
    """Every change of an operator, by ``since`` ascending (one fewer than its definitions)."""
    from ..operators.table import versions

    return [change(domain, op_type, v) for v in versions(domain, op_type)[1:]]
