"""The decomposition of an operator below the version that introduced it by the function body
its definition provides (ONNX Part 2: an operator "defined as a function"; the bodies are in
the stored schema table, :func:`onemodel.schemas.function_bodies`).

An adapter class in ``adapters/<family>.py`` subclasses :class:`FunctionBody` and is attached
to the operator's first definition (``adapter("Mish", since=18)(Mish18)``): its ``down``
expands the body into the graph in place of the node, which :mod:`.engine` then converts to the
target opset like any node. The expansion (Clause 8.4, a function call's semantics):

- the body's formal inputs and outputs are the node's actual ones (an optional input the node
  does not give is ``""``), every other name in the body is made fresh;
- an attribute that refers to the operator's attribute (``ref_attr_name``) takes the node's
  value, else the definition's default, else is left out;
- a Constant's ``value_float``, ``value_int`` (and lists) are written as its ``value`` tensor,
  which Constant has at every version;
- the body's nodes, written for the body's operator set version, are converted down to the
  version before the operator's first definition (each by its own adapters).

A subgraph of the body (an If's branches, a Loop's body) is renamed the same way and its
nodes converted from the body's version to the conversion's target. Refused when the body
imports a domain other than ai.onnx, or when a body node cannot be converted.
"""

from __future__ import annotations

from ..ir import Attribute, Node
from ..ir.entries import normalize_domain
from .context import Refused


def body(domain: str, op_type: str, since: int):
    """The body (a :class:`onemodel.ir.Function`) of the definition introduced at ``since``
    written for the lowest operator set version, and that version; ``(None, None)`` when the
    definition has none stored."""
    from .. import schemas
    from ..formats.onnx.reader import decode_message

    found = schemas.function_bodies(op_type, domain, since)
    if not found:
        return None, None
    opset, data = found[0]
    return decode_message(bytes(data), "FunctionProto"), opset


class FunctionBody:
    """The decomposition by the operator's own function body (the module docstring); a
    subclass is attached to the operator's first definition."""

    #: attached to the first definition: converts below it
    decomposition = True

    @staticmethod
    def up(step, node):
        return None  # a first definition: nothing comes before it to go up from

    @classmethod
    def down(cls, step, node):
        fn, opset = body(step.domain, node.op_type, step.source)
        if fn is None:
            step.refuse(f"the definition of {node.op_type}-{step.source} has no stored "
                        "function body")
        imports = {normalize_domain(o.domain): o.version for o in fn.opset_imports}
        if set(imports) - {""}:
            step.refuse(f"its function body imports {sorted(set(imports) - {''})}")
        at = imports.get("", opset)
        names = {"": ""}
        for k, formal in enumerate(fn.inputs):
            names[formal] = node.inputs[k] if k < len(node.inputs) else ""
        base = node.name or node.op_type
        for k, formal in enumerate(fn.outputs):
            given = node.outputs[k] if k < len(node.outputs) else ""
            names[formal] = given or step.fresh(f"{base}_{formal}")

        def rename(name: str) -> str:
            got = names.get(name)
            if got is None:
                got = names[name] = step.fresh(f"{base}_{name}")
            return got

        nodes = [_bound(step, node, n, rename) for n in fn.nodes]
        values = _infer(step, node, nodes, at)
        conv = step.scope.conv
        for k, n in enumerate(nodes):   # a subgraph's nodes go from the body's version on
            for j, a in enumerate(n.attributes):
                for fld, g in a.subgraphs():
                    _subgraph(step, g, at, values,
                              f"{node.name or node.op_type}.body.nodes[{k}].attributes[{j}]"
                              f".{fld}")
        if at == step.target:
            return nodes
        out = []
        for n in nodes:
            try:
                out.extend(conv._convert(step.scope, n, "", at, step.target))
            except Refused as e:
                step.refuse(f"its function body's {n.op_type} (opset {at}) does not convert "
                            f"to opset {step.target}: {e.reason}")
        return out


def _bound(step, node: Node, n: Node, rename) -> Node:
    """Body node ``n`` with its names renamed and its attribute references resolved to the
    values of ``node`` (the operator's node) or the definition's defaults; a subgraph's names
    renamed the same way, in place (the body is decoded afresh for each node)."""
    attrs = []
    for a in n.attributes:
        if a.ref_attr_name:
            own = node.attribute(a.ref_attr_name)
            if own is not None:
                if own.ref_attr_name:
                    step.refuse(f"attribute {own.name!r} refers to the enclosing "
                                f"function's attribute {own.ref_attr_name!r}")
                c = own.copy(deep=False)
                c.name = a.name
                attrs.append(c)
                continue
            from ..operators.table import attribute_default
            d = attribute_default(step.domain, node.op_type, step.source, a.ref_attr_name)
            if d is not None:
                attrs.append(Attribute.make(a.name, d, a.type))
            continue
        for _, g in a.subgraphs():
            for vi in (*g.inputs, *g.outputs, *g.value_info):
                vi.name = rename(vi.name)
            for t in g.initializers:
                t.name = rename(t.name)
            g.nodes = [_bound(step, node, m, rename) for m in g.nodes]
        attrs.append(a)
    if n.op_type == "Constant" and not n.domain:
        attrs = [_as_value(a) for a in attrs]
    return Node(op_type=n.op_type, domain=n.domain, inputs=[rename(i) for i in n.inputs],
                outputs=[rename(o) for o in n.outputs], attributes=attrs)


def _subgraph(step, g, at: int, values: dict, path: str) -> None:
    """The nodes of subgraph ``g`` of the expanded body (and of its own subgraphs), converted
    from the body's version ``at`` to the conversion's target, in place; a node that cannot be
    is refused as any other (listed with ``path``)."""
    from .engine import _Scope

    conv = step.scope.conv
    dst = conv.targets.get("")
    if dst is None or dst == at:
        return
    scope = _Scope(conv, {"": at}, graph=g, path=path, values=dict(values),
                   parents=(step.scope,))
    for k, n in enumerate(g.nodes):
        for j, a in enumerate(n.attributes):
            for fld, sg in a.subgraphs():
                _subgraph(step, sg, at, values, f"{path}.nodes[{k}].attributes[{j}].{fld}")
    g.nodes = conv._nodes(scope, g.nodes, path)


def _as_value(a: Attribute) -> Attribute:
    """A Constant's ``value_float``/``value_int``/``value_floats``/``value_ints`` (Constant-12
    on) as the ``value`` tensor every version of Constant has: float32 or int64, a scalar or
    1-D."""
    from ..ir import Tensor
    from ..lazy import np

    kinds = {"value_float": np.float32, "value_floats": np.float32,
             "value_int": np.int64, "value_ints": np.int64}
    dtype = kinds.get(a.name)
    if dtype is None:
        return a
    return Attribute.make("value", Tensor.from_numpy(np.asarray(a.value, dtype)))


def _infer(step, node: Node, nodes: list, at: int) -> dict:
    """The Values of the body's values, inferred (Clause 9) from those of the node's inputs
    (constant ones with their elements) at opset ``at``, stated in the scope so that the
    conversion of the body's nodes knows their types; returned by name, those of subgraphs
    too (empty when an input's type is not known)."""
    from ..inference import infer_model
    from ..ir import Graph, Model, OperatorSetId, Tensor, ValueInfo

    inputs, inits = [], []
    for name in dict.fromkeys(i for i in node.inputs if i):
        c = step.constant(name)
        if c is not None:
            t = Tensor.from_numpy(c)
            t.name = name
            inits.append(t)
            continue
        v = step.scope.value(name)
        t = v.to_type() if v is not None else None
        if t is None:
            return {}  # nothing to infer from: the body's nodes are converted without types
        inputs.append(ValueInfo(name=name, type=t))
    outs = [ValueInfo(name=o) for n in nodes for o in n.outputs if o]
    m = Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=at)],
              graph=Graph(name="body", nodes=[n.copy(deep=False) for n in nodes],
                          inputs=inputs, outputs=outs, initializers=inits))
    found = {}
    for got in infer_model(m, positive_dims=False).graphs.values():
        found.update({k: v for k, v in got.items() if v is not None and v.kind is not None})
    for n in nodes:
        for o in n.outputs:
            if o in found:
                step.scope.values[o] = found[o]
    return found
