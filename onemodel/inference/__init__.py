"""Shape and type inference (ONNX Part 1, Clause 9): every value's type and shape, symbolic
where it must be.

    >>> import onemodel
    >>> types = onemodel.infer("model.onnx")            # name -> onemodel.Type
    >>> str(types["logits"])
    'tensor(float)[batch,seq,50257]'

Extents are ints, dimension variables (``dim_param``) or expressions an operator makes of them
(``seq + 1``, ``2*h``, ``ceil(h/2)``; :mod:`.dims`), or unknown. Each operator has a rule per
definition version (:mod:`.registry`, :mod:`.rules`), beside the evaluator's kernels; small
integer tensors that carry shapes are followed element by element (data propagation).
Contradictions between what a model declares and what its operators entail are reported with
their paths (:attr:`Inference.contradictions`).
"""

from __future__ import annotations

from .dims import Dim, Expr, fits_file
from .engine import Contradiction, Engine, Inference
from .value import UNKNOWN, Value

__all__ = ["infer", "infer_model", "annotate", "complete_outputs", "wide_extents",
           "operator_names", "Inference", "Contradiction", "Value", "Expr", "Dim", "UNKNOWN"]


def _model(model_or_path, storage_options=None):
    from ..api import check_storage_options, load
    from ..ir import Model

    if isinstance(model_or_path, Model):
        check_storage_options(storage_options, model_or_path)  # (ignored: refused)
        return model_or_path

    return load(model_or_path, storage_options=storage_options)


def infer_model(model, *, fresh_inputs: bool = False, positive_dims: bool = True,
                orders: dict | None = None) -> Inference:
    """Infer every value of ``model`` (an :class:`onemodel.Model`, or a path or URL read with
    :func:`onemodel.load`; tensor bytes are read only for initializers of at most
    :data:`~.value.MAX_DATA` elements). Returns the :class:`Inference`: every graph's Values by
    name, the contradictions, the operators without a rule. Raises the errors of
    :func:`onemodel.load` for a path; :class:`~onemodel.errors.InternalError` for a rule's
    bug. ``fresh_inputs``: each unnamed extent of a main-graph input becomes a variable of its
    own (``?x:1``, :func:`.engine.fresh_name`), so that what the operators entail of it is
    found (:attr:`Inference.constraints`). ``positive_dims``: each dimension variable of a
    main-graph input is taken to be at least 1 (a dynamic axis of a real input; Clause 6.5
    allows an extent of 0, and an input empty along such an axis may have other shapes than
    the inferred ones); ``False`` takes every variable to be only at least 0. ``orders``: what
    :func:`onemodel.ir.graph_rules.check_model` returned for this model, when the caller ran
    it (a main graph found in order is then not walked again to order it). A model read
    from a path is closed before this returns (the elements of initializers no rule read are
    then unknown). A Model closed before the call is inferred without the elements of its
    tensors (initializers, Constant and ConstantOfShape values): what those elements would
    tell (shapes given as data, axes, indices) is unknown, so infer a model while it is
    open."""
    m = _model(model)
    try:
        return Engine(m, fresh_inputs=fresh_inputs, positive_dims=positive_dims,
                      orders=orders).run()
    finally:
        if m is not model:
            m.close()


def infer(model, *, storage_options=None, operators=None) -> dict:
    """The inferred types of the main graph's values (Clause 9): name ->
    :class:`onemodel.Type` (an expression or a variable extent as a ``dim_param``, ``seq + 1``;
    an unknown one with neither field), for every value whose type is known: inputs,
    initializers and node outputs. ``model``: an :class:`onemodel.Model` or a path or URL
    (read with :func:`onemodel.load` and ``storage_options``, closed before this returns).
    ``operators``: :class:`onemodel.operators.Operator` definitions of custom operators known
    for this call (their rules and signatures). Raises the errors of :func:`onemodel.load`;
    UsageError for an ``operators`` item that is not an Operator; InternalError for a rule's
    bug."""
    from ..operators.custom import using

    m = _model(model, storage_options)
    try:
        with using(operators):
            res = Engine(m).run()
    finally:
        if m is not model:
            m.close()
    out = {}
    for name, v in res.values.items():
        t = v.to_type()
        if t is not None:
            out[name] = t
    return out


def annotate(model, inference: Inference | None = None) -> int:
    """Add a ``value_info`` entry to every graph of ``model`` (in place) for each node output
    whose type inference knows and that the graph declares nowhere (not an input, output,
    initializer or existing ``value_info``), in node order; everything else is left as it is.
    Returns the number of entries added. Entries of values with equal inferred types share one
    :class:`~onemodel.ir.Type` record (replace an entry's ``type`` rather than change it in
    place)."""
    from ..ir import ValueInfo
    from ..ir.accelerator import passes
    from ..ir.walk import iter_graphs

    res = inference if inference is not None else Engine(model).run()
    added = 0
    types: dict = {}  # Value -> Type record
    by_id: dict = {}  # id(Value) -> Type record (a rule's memoized result is one object)
    if model.graph is None:
        return 0

    def resolve(v):
        t = types.get(v)
        if t is None:
            t = types[v] = v.to_type()
        by_id[id(v)] = t
        return t

    fast = passes()  # the loop below in C (onemodel/ir/_cpass.c), when built
    for gpath, g in iter_graphs(model.graph):
        values = res.graphs.get(gpath)
        if not values:
            continue
        have = {vi.name for vi in g.inputs} | {vi.name for vi in g.outputs} | \
            {vi.name for vi in g.value_info} | {t.name for t in g.initializers}
        if fast is not None and type(g.nodes) is list and type(values) is dict:
            entries = fast.annotate(g.nodes, have, values, by_id, resolve)
            g.value_info.extend(entries)
            added += len(entries)
            continue
        entries = []
        get = values.get
        new = ValueInfo.__new__
        for node in g.nodes:
            for name in node.outputs:
                if not name or name in have:
                    continue
                v = get(name)
                if v is None:
                    continue
                t = by_id.get(id(v))
                if t is None:
                    t = resolve(v)
                if t is not None:
                    # ValueInfo(name=name, type=t), its fields set directly: half the time of
                    # the keyword constructor, for 50,000 entries 9 ms (tests/infer pin equality)
                    vi = new(ValueInfo)
                    vi.name, vi.type, vi.doc_string, vi.metadata_props, vi.unknown = \
                        name, t, None, [], b""
                    entries.append(vi)
                    have.add(name)
        g.value_info.extend(entries)
        added += len(entries)
    return added


def complete_outputs(model, inference: Inference | None = None) -> int:
    """Give each graph output of ``model`` (every graph's, in place) what inference knows of
    its type and the output does not state, as ``onnx.shape_inference`` does: a missing type,
    a tensor's unset ``elem_type`` (0), a missing shape, and each dimension with neither
    ``dim_value`` nor ``dim_param`` (an expression or variable as its ``dim_param``, as
    :func:`annotate` writes them; an extent above 2^63 - 1 stays unknown). What the output
    states is kept as stated: a shape of another rank, another element type or another extent
    is a contradiction (:attr:`Inference.contradictions`, ``OM410``), not replaced (Clause 9.4),
    and an output whose declared type (or ``value_info`` of its name) contradicts the operators
    is not completed at all.
    A completed output gets a new :class:`~onemodel.ir.Type` record (records may be shared).
    Returns the number of outputs completed."""
    from ..ir.walk import iter_graphs

    res = inference if inference is not None else Engine(model).run()
    done = 0
    if model.graph is None:
        return 0
    # (graph path, value name) of every declared type a contradiction was found in: such a
    # value is the declared one merged with the inferred one, which nothing states in full
    contradicted = {(c.path.rsplit(".", 1)[0], c.name) for c in res.contradictions
                    if c.name is not None}
    for gpath, g in iter_graphs(model.graph):
        values = res.graphs.get(gpath)
        if not values:
            continue
        for vi in g.outputs:
            if (gpath, vi.name) in contradicted:
                continue
            v = values.get(vi.name) if vi.name else None
            inferred = v.to_type() if v is not None else None
            if inferred is None:
                continue
            t = _completed(vi.type, inferred)
            if t is not None:
                vi.type = t
                done += 1
    return done


def _completed(declared, inferred):
    """``declared`` (a Type or None) with what ``inferred`` adds to it, as a new record; None
    when it adds nothing."""
    if declared is not None and declared.kind is None and declared.unknown:
        return None  # (a kind this reader does not know, kept as the file has it)
    if declared is None or declared.kind is None:
        if declared is not None and declared.denotation is not None:
            inferred.denotation = declared.denotation
        return inferred
    kind = declared.kind
    if kind not in ("tensor", "sparse_tensor") or inferred.kind != kind:
        return None  # (a sequence, map, optional: kept as declared)
    have, got = declared.value, inferred.value
    elem = not have.elem_type and got.elem_type
    if have.shape is None:
        shape = got.shape is not None
        fill = []
    else:
        shape = False
        dims = have.shape.dims
        fill = [] if got.shape is None or len(got.shape.dims) != len(dims) else [
            k for k, (d, e) in enumerate(zip(dims, got.shape.dims))
            if d.dim_value is None and d.dim_param is None
            and (e.dim_value is not None or e.dim_param is not None)]
    if not (elem or shape or fill):
        return None
    out = declared.copy()
    value = out.value
    if elem:
        value.elem_type = got.elem_type
    if shape:
        value.shape = got.shape
    for k in fill:
        d, e = value.shape.dims[k], got.shape.dims[k]
        d.dim_value, d.dim_param = e.dim_value, e.dim_param
    return out


def wide_extents(model, inference: Inference) -> list[dict]:
    """The node outputs of ``model`` whose inferred shape has an integer extent above 2^63 - 1,
    which no ``dim_value`` (an int64, Clause 12.2) can record: ``[{"path", "node", "name",
    "where", "axis", "extent"}]`` in graph and node order (``path``: the graph's IR path,
    ``graph``, ``graph.nodes[2].attributes[0].g``; ``node``: the node's index in it; ``where``:
    ``""``, or ``"element"`` for a sequence's or optional's element). :func:`annotate` writes
    each such extent as unknown (:meth:`.Value.to_type`); ``check --full`` reports them
    (``OM412``) and ``onemodel infer`` notes them."""
    from ..ir.walk import iter_graphs

    found: list = []
    if model.graph is None:
        return found
    for gpath, g in iter_graphs(model.graph):
        values = inference.graphs.get(gpath)
        if not values:
            continue
        if not _any_wide(values.values()):  # (the common case: the nodes are not walked)
            continue
        for i, node in enumerate(g.nodes):
            for name in node.outputs:
                v = values.get(name) if name else None
                if v is None:
                    continue
                found += [{"path": gpath, "node": i, "name": name, "where": where,
                           "axis": axis, "extent": d} for where, axis, d in v.wide_extents()]
    return found


def _any_wide(values) -> bool:
    """Whether one of ``values`` has an extent :meth:`.Value.wide_extents` lists. A rule's
    memoized result is one Value for many outputs, and initializers of one shape share it:
    each distinct tensor shape is looked at once, other Values one by one."""
    shapes: set = set()
    for v in values:
        if v.kind == "tensor":
            shapes.add(v.shape)
        elif v.wide_extents():
            return True
    shapes.discard(None)
    return any(type(d) is int and not fits_file(d) for s in shapes for d in s)


def operator_names(keys) -> list[str]:
    """``Op-version`` (``domain Op-version`` outside ai.onnx) of each ``(domain, op_type,
    version)`` in ``keys`` (:attr:`Inference.no_rule`), sorted: what ``onemodel infer`` and
    ``check --full`` (``OM411``) name as inferred without a rule. An operator without a name,
    of a domain the model does not import or imported at a version below 1 is left out (the
    structure checks report those: ``OM106``, ``OM105``, ``OM121``). Domain and op_type are made
    printable (:func:`onemodel.errors.printable`: an escape code or newline in them is escaped)."""
    from ..errors import printable

    return sorted(f"{printable(d) + ' ' if d else ''}{printable(op)}-{v}" for d, op, v in keys
                  if op and type(v) is int and v > 0)
