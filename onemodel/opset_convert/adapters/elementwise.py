"""Version adapters of the elementwise family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...lazy import np
from ...operators import adapter
from ..generic import LegacyAttribute, _set_input


def _known(dims) -> bool:
    return dims is not None and None not in dims


def _text(dims) -> str:
    return "unknown" if dims is None else "[" + ", ".join(
        "?" if d is None else str(d) for d in dims) + "]"


class Consumed6(LegacyAttribute):
    """consumed_inputs dropped at 6 (Clip: its min and max keep their meaning)."""


class Broadcast7:
    """Add, Sub, Mul, Div, Pow, And, Or, Xor, Equal, Greater, Less at 7: numpy broadcasting
    of both inputs replaced the legacy ``broadcast`` and ``axis`` attributes (B broadcast to
    A: B's shape a suffix of A's, one element, or placed at ``axis``).

    Up: without ``broadcast`` the shapes are equal, and with it and no ``axis`` B's shape is a
    suffix of A's: numpy broadcasting computes the same. With ``axis``, B is given trailing
    extents of 1 (a constant B reshaped, else an Unsqueeze) so that it lines up at ``axis``;
    that needs both ranks. Down: equal shapes need nothing, B's shape a suffix of A's (or one
    element) is ``broadcast=1``; anything else, or shapes not known, is refused."""

    @staticmethod
    def up(step, node):
        broadcast = step.attr("broadcast", 0)
        axis = step.attr("axis") if step.has_attr("axis") else None
        step.remove_attr("broadcast")
        step.remove_attr("axis")
        if not broadcast or axis is None:
            return None
        a, b = step.input(0), step.input(1)
        ra, rb = step.rank(a), step.rank(b)
        if ra is None or rb is None:
            step.refuse("broadcast=1 with an axis needs the ranks of both inputs, which are "
                        "not known")
        axis = axis + ra if axis < 0 else axis
        extra = ra - axis - rb
        if extra < 0:
            step.refuse(f"B of rank {rb} does not fit A of rank {ra} at axis {axis}")
        if extra == 0:
            return None
        value = step.constant(b)
        if value is not None:
            name = step.add_constant(value.reshape(value.shape + (1,) * extra), "B")
        else:
            name = step.fresh(f"{node.name or node.op_type}_B")
            step.add_node("Unsqueeze", [b], [name], axes=list(range(rb, rb + extra)))
        _set_input(node, 1, name)
        return None

    @staticmethod
    def down(step, node):
        a, b = step.dims(step.input(0)), step.dims(step.input(1))
        if _known(a) and _known(b) and tuple(a) == tuple(b):
            return None
        if _known(b) and all(d == 1 for d in b) and (a is None or len(b) <= len(a)):
            step.set_attr("broadcast", 1)
            return None
        if _known(a) and _known(b) and len(b) <= len(a) and tuple(a[len(a) - len(b):]) == \
                tuple(b):
            step.set_attr("broadcast", 1)
            return None
        step.refuse(f"numpy broadcasting of shapes {_text(a)} and {_text(b)} has no legacy "
                    "equivalent (B's shape a suffix of A's, or one element)")


class SameShapes8:
    """Max, Mean, Min, Sum at 8: numpy broadcasting of every input; before, every input had one
    shape. Up unchanged; down refused unless every input's shape is known and the same."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        shapes = [step.dims(n) for n in node.inputs if n]
        if all(_known(s) for s in shapes) and len({tuple(s) for s in shapes}) <= 1:
            return None
        step.refuse("the inputs' shapes " + ", ".join(_text(s) for s in shapes)
                    + " are not known to be one shape")


class Clip11:
    """Clip at 11: the attributes ``min`` and ``max`` (float) became optional inputs 1 and 2,
    scalars of the input's element type. Up: each attribute set becomes a constant of that
    type (the element type must be known). Down: each input given must be a constant whose
    value a float attribute holds exactly."""

    @staticmethod
    def up(step, node):
        x = step.input(0)
        for k, name in ((1, "min"), (2, "max")):
            if not step.has_attr(name):
                continue
            v = step.attr(name)
            step.remove_attr(name)
            code = step.elem(x)
            if code is None:
                step.refuse(f"the element type of {x!r} is not known, and the {name} input "
                            "must have it")
            from ...ir.dtypes import info
            _set_input(node, k, step.add_constant(np.asarray(v, dtype=info(code).dtype), name))
        return None

    @staticmethod
    def down(step, node):
        for k, name in ((1, "min"), (2, "max")):
            given = step.input(k)
            if given is None:
                continue
            v = step.constant(given)
            if v is None:
                step.refuse(f"input {k} {given!r} ({name}) is computed, not a constant: "
                            f"Clip-{step.target} needs it as an attribute")
            if np.asarray(v).size != 1:
                step.refuse(f"input {given!r} ({name}) is not one value")
            value = np.asarray(v).reshape(()).item()
            if float(np.float32(value)) != value:
                step.refuse(f"{name} {value!r} is not exactly a float32 value, which the "
                            f"attribute of Clip-{step.target} is")
            step.set_attr(name, float(value))
        node.inputs = node.inputs[:1]
        return None


class OrEqual12:
    """GreaterOrEqual, LessOrEqual, introduced at 12: below it, ``Or(Greater(A, B), Equal(A,
    B))`` (``Less`` for LessOrEqual), which is false for NaN as they are (``Not(Less)`` would
    not be)."""

    #: attached to the first definition: converts below it
    decomposition = True

    @staticmethod
    def up(step, node):
        return None  # a first definition: nothing comes before it to go up from

    @staticmethod
    def down(step, node):
        from ...ir import Node
        a, b = step.input(0), step.input(1)
        base = node.name or node.op_type
        strict, equal = step.fresh(f"{base}_strict"), step.fresh(f"{base}_equal")
        step.declare(strict, 9)
        step.declare(equal, 9)
        op = "Greater" if node.op_type == "GreaterOrEqual" else "Less"
        return [Node(op_type=op, inputs=[a, b], outputs=[strict]),
                Node(op_type="Equal", inputs=[a, b], outputs=[equal]),
                Node(op_type="Or", inputs=[strict, equal], outputs=list(node.outputs),
                     name=node.name)]


for _op in ("GreaterOrEqual", "LessOrEqual"):
    adapter(_op, since=12)(OrEqual12)
for _op in ("Abs", "Add", "Ceil", "Clip", "Div", "Exp", "Floor", "Log", "Max", "Mean", "Min",
            "Mul", "Neg", "Reciprocal", "Sqrt", "Sub", "Sum", "Tanh"):
    adapter(_op, since=6)(Consumed6)
for _op in ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"):
    adapter(_op, since=7)(Broadcast7)
for _op in ("Max", "Mean", "Min", "Sum"):
    adapter(_op, since=8)(SameShapes8)
class Mod28:
    """Mod at 28: the definition restated as a rounding of the quotient, ``fmod`` 0 (floor,
    the sign of B) and 1 (truncation, the sign of A) each for every element type; before,
    fmod=0 was for integer types and fmod=1 for floating-point ones. Up unchanged. Down: a
    node that keeps to that pairing is unchanged; fmod=0 on floating-point values (whose
    special cases, B infinite, are not those of ``A - Floor(A / B) * B``) and fmod=1 on
    integers are refused, as is a node whose element type is not known."""

    FLOATS = (1, 10, 11, 16)

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        code = step.elem(step.input(0))
        if code is None:
            step.refuse(f"the element type of {step.input(0)!r} is not known, and "
                        f"Mod-{step.target} ties fmod to it")
        fmod = int(step.attr("fmod", 0))
        if fmod != (1 if code in Mod28.FLOATS else 0):
            kind = "floating-point" if code in Mod28.FLOATS else "integer"
            step.refuse(f"fmod={fmod} on {kind} values: Mod-{step.target} takes fmod="
                        f"{1 - fmod} for them")
        return None


adapter("Clip", since=11)(Clip11)
adapter("Mod", since=28)(Mod28)
