"""Small models that once made inference (and `check --full`, `infer`, `run`) take time or
memory exponential in their size (issue 24, items 1 and 2): shapes squared again and again,
and model-local functions that call each other twice or themselves. Each builder returns an
``onnx.ModelProto`` of a few hundred bytes."""

from __future__ import annotations

from onnx import TensorProto, helper

F = TensorProto.FLOAT


def _model(nodes, inputs, opsets=(("", 17),), functions=()):
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                          functions=list(functions))
    m.ir_version = 10
    return m


def squarings(n: int = 27, extent="N"):
    """``Shape(x)``, then ``n`` times ``Mul(s, s)``, then ``ConstantOfShape``: the extent is
    ``N^(2^n)`` (``n + 2`` nodes)."""
    nodes = [helper.make_node("Shape", ["x"], ["s0"])]
    nodes += [helper.make_node("Mul", [f"s{i}", f"s{i}"], [f"s{i + 1}"]) for i in range(n)]
    nodes.append(helper.make_node("ConstantOfShape", [f"s{n}"], ["y"]))
    return _model(nodes, [helper.make_tensor_value_info("x", F, [extent])])


def square_plus(n: int = 14):
    """``s = Add(Mul(s, s), s)`` ``n`` times: ``2^n`` terms of degree up to ``2^n``."""
    nodes = [helper.make_node("Shape", ["x"], ["s0"])]
    for i in range(n):
        nodes.append(helper.make_node("Mul", [f"s{i}", f"s{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"s{i}"], [f"s{i + 1}"]))
    nodes.append(helper.make_node("ConstantOfShape", [f"s{n}"], ["y"]))
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["N"])])


def binomial(n: int = 12):
    """``(A + B)`` squared ``n`` times: ``2^n + 1`` terms with coefficients of ``~0.3 * 2^n``
    digits."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ReduceSum", ["s"], ["t0"], keepdims=1)]
    nodes += [helper.make_node("Mul", [f"t{i}", f"t{i}"], [f"t{i + 1}"]) for i in range(n)]
    nodes.append(helper.make_node("ConstantOfShape", [f"t{n}"], ["y"]))
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["A", "B"])])


def wide(n: int = 24, k: int = 60, rank: int = 1024):
    """``s = Shape(x)`` of ``rank`` variables, ``t`` the sum of its first ``k``, then ``u0 =
    s + t`` and ``n`` times ``u = u + s``: ``rank`` distinct elements of ``k + 1`` atoms each
    per node (``n + 7`` nodes)."""
    def const(name, v):
        return helper.make_node("Constant", [], [name],
                                value=helper.make_tensor(name, TensorProto.INT64, [1], [v]))

    nodes = [helper.make_node("Shape", ["x"], ["s"]), const("st", 0), const("en", k),
             helper.make_node("Slice", ["s", "st", "en"], ["p"]),
             helper.make_node("ReduceSum", ["p"], ["t"], keepdims=1),
             helper.make_node("Add", ["s", "t"], ["u0"])]
    nodes += [helper.make_node("Add", [f"u{i}", "s"], [f"u{i + 1}"]) for i in range(n)]
    nodes.append(helper.make_node("ConstantOfShape", [f"u{n}"], ["y"]))
    return _model(nodes, [helper.make_tensor_value_info("x", F, [f"d{i}" for i in range(rank)])])


_LOCAL = (("", 17), ("local", 1))


def _fn(name, nodes):
    return helper.make_function("local", name, ["a"], ["b"], nodes,
                                [helper.make_opsetid(d, v) for d, v in _LOCAL])


def _call(op, x, y):
    return helper.make_node(op, [x], [y], domain="local")


def self_calling(calls: int = 2):
    """A function ``F`` whose body calls ``F`` ``calls`` times in a row, called once."""
    body = [_call("F", "a" if i == 0 else f"c{i - 1}", "b" if i == calls - 1 else f"c{i}")
            for i in range(calls)]
    return _model([_call("F", "x", "y")], [helper.make_tensor_value_info("x", F, ["N"])],
                  _LOCAL, [_fn("F", body)])


def mutual(n: int = 30):
    """Functions ``F0 .. F{n-1}``, each calling the next twice and the last calling ``F0``: one
    cycle through all of them."""
    fs = [_fn(f"F{i}", [_call(f"F{(i + 1) % n}", "a", "c"), _call(f"F{(i + 1) % n}", "c", "b")])
          for i in range(n)]
    return _model([_call("F0", "x", "y")], [helper.make_tensor_value_info("x", F, ["N"])],
                  _LOCAL, fs)


def doubling_chain(n: int = 31):
    """``F0(a) = Add(a, a)``; ``F{i}`` calls ``F{i-1}`` twice; the graph calls ``F{n-1}``:
    ``2^(n-1)`` Adds once expanded."""
    fs = [_fn("F0", [helper.make_node("Add", ["a", "a"], ["b"])])]
    fs += [_fn(f"F{i}", [_call(f"F{i - 1}", "a", "c"), _call(f"F{i - 1}", "c", "b")])
           for i in range(1, n)]
    return _model([_call(f"F{n - 1}", "x", "y")], [helper.make_tensor_value_info("x", F, ["N"])],
                  _LOCAL, fs)


#: name -> builder of the hostile models the time and memory guards run, with their 30-node
#: variants.
HOSTILE = {
    "squarings-27": squarings,
    "squarings-27-int": lambda: squarings(27, 2),
    "square-plus-14": square_plus,
    "binomial-12": binomial,
    "binomial-28": lambda: binomial(28),
    "self-calling": self_calling,
    "self-calling-30": lambda: self_calling(30),
    "mutual-30": mutual,
    "doubling-chain-31": doubling_chain,
    "wide-30": wide,
}
