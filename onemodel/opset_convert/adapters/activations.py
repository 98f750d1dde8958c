"""Version adapters of the activations family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...ir import Attribute, Node
from ...operators import adapter
from ..function_body import FunctionBody
from ..generic import LegacyAttribute, NegativeAxis


class Coerced13:
    """Softmax, LogSoftmax, Hardmax at 13: before, the input was coerced to 2-D at ``axis``
    (default 1) and normalized over every axis from ``axis`` on together; from 13 along the one
    axis ``axis`` (default -1). The two agree when ``axis`` is the last axis, or when every
    extent after it is 1.

    Up: ``axis`` set to the same axis when they agree; otherwise the node becomes Shape,
    Flatten at ``axis``, the operator along axis 1, Reshape to the input's shape (the earlier
    definition's own coercion, written out). Down: ``axis`` set when they agree (the last axis
    as -1, which opset 11 admits); otherwise refused."""

    @staticmethod
    def _agree(step, axis: int):
        """The non-negative axis when the two definitions agree on it, else None."""
        x = step.input(0)
        shape = step.shape(x)
        if shape is None:
            return None
        r = len(shape)
        a = axis + r if axis < 0 else axis
        if not 0 <= a < r:
            step.refuse(f"axis {axis} is out of range for rank {r}")
        return a if all(d == 1 for d in shape[a + 1:]) else None

    @staticmethod
    def up(step, node):
        axis = int(step.attr("axis"))
        a = Coerced13._agree(step, axis)
        if a is not None:
            step.set_attr("axis", a)
            return None
        x = step.input(0)
        shape, flat, out = (step.fresh(f"{node.name or node.op_type}_{s}")
                            for s in ("shape", "flat", "2d"))
        step.declare(shape, 7)  # int64
        step.declare(flat, step.elem(x))
        step.declare(out, step.elem(x))
        op = Node(op_type=node.op_type, inputs=[flat], outputs=[out], name=node.name,
                  attributes=[Attribute.make("axis", 1)])
        return [Node(op_type="Shape", inputs=[x], outputs=[shape]),
                Node(op_type="Flatten", inputs=[x], outputs=[flat],
                     attributes=[Attribute.make("axis", axis)]),
                op,
                Node(op_type="Reshape", inputs=[out, shape], outputs=list(node.outputs))]

    @staticmethod
    def down(step, node):
        axis = int(step.attr("axis"))
        if axis == -1:
            step.set_attr("axis", -1)
            return None
        a = Coerced13._agree(step, axis)
        if a is None:
            x = step.input(0)
            shape = step.shape(x)
            step.refuse(f"axis {axis} is not the last axis of {x!r} "
                        f"({'rank unknown' if shape is None else f'shape {list(shape)}'}): "
                        f"{node.op_type}-{step.target} would normalize over axis {axis} and "
                        "every later axis together")
        step.set_attr("axis", a)
        return None


class Axis11(NegativeAxis):
    """Softmax, LogSoftmax, Hardmax at 11: a negative axis admitted."""


class Consumed6(LegacyAttribute):
    """consumed_inputs dropped at 6."""


class Selu6(LegacyAttribute):
    """Selu at 6: consumed_inputs dropped; the defaults of alpha and gamma changed (to more
    digits), so they are set explicitly."""

    explicit = ("alpha", "gamma")


for _op in ("Softmax", "LogSoftmax", "Hardmax"):
    adapter(_op, since=13)(Coerced13)
    adapter(_op, since=11)(Axis11)
for _op in ("Elu", "HardSigmoid", "LeakyRelu", "PRelu", "Relu", "Sigmoid"):
    adapter(_op, since=6)(Consumed6)
adapter("Selu", since=6)(Selu6)


class PRelu7:
    """PRelu at 7: the slope is broadcast to X unidirectionally (numpy rules); before, it had
    X's shape or one element. Up unchanged; down refused unless the slope's shape is X's or it
    holds one element."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        x, slope = step.dims(step.input(0)), step.dims(step.input(1))
        if slope is not None and all(d == 1 for d in slope):
            return None
        if x is None or slope is None or tuple(x) != tuple(slope) or None in x:
            step.refuse(f"the slope's shape {_shape(slope)} is neither the input's "
                        f"{_shape(x)} nor one element")
        return None


def _shape(dims) -> str:
    return "unknown" if dims is None else "[" + ", ".join(
        "?" if d is None else str(d) for d in dims) + "]"


adapter("PRelu", since=7)(PRelu7)


class HardSwish14(FunctionBody):
    """HardSwish, introduced at 14: below it, its function body (HardSigmoid with alpha 1/6,
    beta 0.5, times X)."""


class Mish18(FunctionBody):
    """Mish, introduced at 18: below it, its function body (X * Tanh(Softplus(X)))."""


class Swish24(FunctionBody):
    """Swish, introduced at 24: below it, its function body (X * Sigmoid(alpha * X))."""


adapter("HardSwish", since=14)(HardSwish14)
adapter("Mish", since=18)(Mish18)
adapter("Swish", since=24)(Swish24)


def _mk(op, ins, outs, **attrs):
    return Node(op_type=op, inputs=list(ins), outputs=list(outs),
                attributes=[Attribute.make(k, v) for k, v in attrs.items()])


class Gelu20:
    """Gelu, introduced at 20: below it, what its (context-dependent) function body computes,
    in X's element type (float, double or float16): ``approximate='none'``:
    ``0.5 * X * (1 + Erf(X / sqrt(2)))`` (Erf from opset 9); ``'tanh'``:
    ``0.5 * X * (1 + Tanh(sqrt(2 / pi) * (X + 0.044715 * X^3)))``. Refused for another
    element type or approximate value."""

    #: attached to the first definition: converts below it
    decomposition = True

    @staticmethod
    def up(step, node):
        return None  # a first definition: nothing comes before it to go up from

    @staticmethod
    def down(step, node):
        import math

        from ...lazy import np

        x, y = step.input(0), node.outputs[0]
        code = step.elem(x)
        dtype = {1: np.float32, 11: np.float64, 10: np.float16}.get(code)
        if dtype is None:
            step.refuse(f"the element type of {x!r} is not known to be float, double or "
                        "float16")
        approximate = step.attr("approximate", "none")
        approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
        if approximate not in ("none", "tanh"):
            step.refuse(f"approximate={approximate!r} is neither 'none' nor 'tanh'")

        def const(v, hint):
            return step.add_constant(np.asarray(v, dtype), hint)

        base = node.name or "Gelu"
        t = [step.fresh(f"{base}_{k}") for k in ("a", "b", "c", "d", "e", "f")]
        for name in t:
            step.declare(name, code)
        if approximate == "none":
            nodes = [_mk("Mul", [x, const(1 / math.sqrt(2), "inv_sqrt2")], [t[0]]),
                     _mk("Erf", [t[0]], [t[1]])]
        else:
            nodes = [_mk("Mul", [x, x], [t[2]]),
                     _mk("Mul", [t[2], x], [t[3]]),
                     _mk("Mul", [t[3], const(0.044715, "c")], [t[4]]),
                     _mk("Add", [x, t[4]], [t[5]]),
                     _mk("Mul", [t[5], const(math.sqrt(2 / math.pi), "sqrt_2_pi")], [t[0]]),
                     _mk("Tanh", [t[0]], [t[1]])]
        one, half = const(1.0, "one"), const(0.5, "half")
        h, p = step.fresh(f"{base}_half_x"), step.fresh(f"{base}_one_plus")
        step.declare(h, code)
        step.declare(p, code)
        return [*nodes, _mk("Add", [t[1], one], [p]), _mk("Mul", [x, half], [h]),
                _mk("Mul", [h, p], [y])]


adapter("Gelu", since=20)(Gelu20)


class Celu12:
    """Celu, introduced at 12 (float only): below it, ``alpha * Elu(X / alpha)`` with Elu's
    alpha 1, which is its function body's ``max(0, X) + min(0, alpha * (exp(X / alpha) - 1))``
    (``Elu(X)`` alone when alpha is 1)."""

    #: attached to the first definition: converts below it
    decomposition = True

    @staticmethod
    def up(step, node):
        return None  # a first definition: nothing comes before it to go up from

    @staticmethod
    def down(step, node):
        from ...lazy import np

        x, y = step.input(0), node.outputs[0]
        alpha = float(step.attr("alpha", 1.0))
        if alpha == 1.0:
            return [_mk("Elu", [x], [y], alpha=1.0)]
        base = node.name or "Celu"
        a = step.add_constant(np.asarray(alpha, np.float32), "alpha")
        scaled, elu = step.fresh(f"{base}_scaled"), step.fresh(f"{base}_elu")
        step.declare(scaled, 1)
        step.declare(elu, 1)
        return [_mk("Div", [x, a], [scaled]), _mk("Elu", [scaled], [elu], alpha=1.0),
                _mk("Mul", [elu, a], [y])]


adapter("Celu", since=12)(Celu12)
