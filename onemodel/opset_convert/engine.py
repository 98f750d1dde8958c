"""Opset conversion: a model rewritten from the operator set versions it imports to others,
up or down, one adjacent definition of each operator at a time (ONNX Part 1, Clauses 5.3.2,
14.3 and 14.4).

Every node of the default domain and of ai.onnx.ml -- in the main graph, its subgraphs (If,
Loop, Scan), the training graphs and the model-local functions (under their own imports) -- is
stepped from the definition in force at the version imported to the one in force at the target,
across each change between (:mod:`.changes`): unchanged where only types differ and the model's
element types are admitted, rewritten by the change's adapter (:mod:`.context`), or refused
with the reason. Every node that cannot be converted is collected and one
:class:`ConversionRefused` lists them all; nothing is returned then. Nodes of other domains
pass through unchanged, and are noted.
"""

from __future__ import annotations

import re
import warnings

from ..errors import InternalError, OneModelWarning, UnsupportedError, UsageError
from ..ir import Model, Node, Tensor, ValueInfo, normalize_domain
from ..ir.types import Type
from ..ir.walk import check_nesting, iter_graphs
from ..lazy import np
from .changes import change
from .context import Refused, Step
from .ir_versions import ELEMENT_TYPE_IR, FUNCTIONS_IR, NEWEST_IR, REQUIRED_IR, required_ir

#: the domains whose operators are converted (the others pass through)
DOMAINS = ("", "ai.onnx.ml")


class ConversionRefused(UnsupportedError):
    """Nodes that cannot be converted: ``refusals`` lists every one as ``(path, operator,
    reason)`` (``graph.nodes[3]``, ``Softmax-11 -> 10``, ``axis 1 is not the last ...``); the
    message names them all, on one line."""

    def __init__(self, refusals: list):
        self.refusals = list(refusals)
        shown = "; ".join(f"{p}: {op}: {r}" for p, op, r in self.refusals)
        n = len(self.refusals)
        super().__init__(f"cannot convert {n} node{'s' if n != 1 else ''}: {shown}")


class Conversion:
    """What :func:`convert` did: the converted ``model``, ``notes`` (nodes of other domains
    passed through, one phrase each), ``steps``: how many node rewrites each kind of change
    made (``{"types": 12, "adapter": 3, ...}``), and ``contradictions``: those shape inference
    found in the original model (the conversion infers it first when a node's rewrite or type
    check needs its values; otherwise on first use of the attribute)."""

    def __init__(self, model: Model, notes: list, steps: dict, contradictions=None,
                 original: Model | None = None):
        self.model, self.notes, self.steps = model, notes, steps
        self._contradictions = None if contradictions is None else list(contradictions)
        self._original = original

    @property
    def contradictions(self) -> list:
        if self._contradictions is None:
            from ..inference import infer_model
            self._contradictions = [] if self._original is None else \
                list(infer_model(self._original).contradictions)
        return self._contradictions


def latest(domain: str) -> int:
    """The greatest operator set version of ``domain`` (ai.onnx, ai.onnx.ml) the stored tables
    know."""
    return REQUIRED_IR[domain][-1][1]


def targets_of(targets) -> dict:
    """``targets`` (a mapping domain -> version, or an int for ai.onnx alone) checked:
    UsageError for a domain that is not converted (:data:`DOMAINS`) or a version outside 1 ..
    :func:`latest`."""
    if type(targets) is int:
        targets = {"": targets}
    if not hasattr(targets, "items"):
        raise UsageError(f"opset targets are a dict of domain -> version, not {targets!r}")
    out = {}
    for d, v in targets.items():
        d = normalize_domain(d)
        if d not in DOMAINS:
            raise UsageError(f"opset conversion converts ai.onnx and ai.onnx.ml, not {d!r}")
        if type(v) is not int or not 1 <= v <= latest(d):
            raise UsageError(f"{d or 'ai.onnx'} opset {v!r}: a version from 1 to {latest(d)}")
        out[d] = v
    return out


def check_ir_version(ir_version) -> None:
    """UsageError unless ``ir_version`` is None or an int from 1 to the newest IR version the
    stored tables know (:data:`.ir_versions.NEWEST_IR`: onnx's checker and onnxruntime refuse a
    newer one)."""
    if ir_version is not None and (type(ir_version) is not int or
                                   not 1 <= ir_version <= NEWEST_IR):
        raise UsageError(f"IR version {ir_version!r}: a version from 1 to {NEWEST_IR} (the "
                         "newest Part 1, Table 12 version known here)")


def convert_opset(model: Model, targets, ir_version: int | None = None) -> Model:
    """A new model: ``model`` converted to the operator set versions ``targets`` (``{"": 13,
    "ai.onnx.ml": 3}``, or an int for ai.onnx), up or down, and to the IR version they require
    (:mod:`.ir_versions`; ``ir_version`` to choose another). Tensors are shared with ``model``
    (the same Blob views: no weight is copied; closing either model closes the files both
    view). Nodes of other domains pass through, each noted in a :class:`OneModelWarning`.

    Raises:
        ConversionRefused (an UnsupportedError) listing every node that cannot be converted
        (operator, versions, reason), nothing converted; UsageError for a bad target;
        UnsupportedError for graphs nested past ``MAX_MODEL_NESTING``.
    """
    conv = convert(model, targets, ir_version)
    for note in conv.notes:
        warnings.warn(note, OneModelWarning, stacklevel=2)
    return conv.model


def convert(model: Model, targets, ir_version: int | None = None,
            share: bool = False) -> Conversion:
    """:func:`convert_opset`, returning the :class:`Conversion` (the notes as data).

    ``share``: the converted model shares with ``model`` the nodes the conversion leaves as
    they are (those without subgraphs) and the initializers, instead of copies of them (a
    node is copied before an adapter rewrites it): much faster on large graphs, for a caller
    that changes neither model afterwards (``onemodel convert --opset``)."""
    targets = targets_of(targets)
    check_ir_version(ir_version)
    check_nesting(model)
    shared: set = set()
    new = _copy_sharing(model, shared) if share else model.copy()
    for name in Model.EXTRA:
        setattr(new, name, getattr(model, name, None))
    conv = _Converter(new, targets, model)
    conv.shared = shared
    conv.run()
    if conv.rewritten:  # (``model`` is as it was: the names read before the conversion)
        _prune(new, _used_names(model) | conv.added)
    if ir_version is not None and ir_version < _ir_for(new, None):
        raise UsageError(f"IR version {ir_version} is older than the converted model requires "
                         f"({_ir_for(new, None)}: its operator set imports, model-local "
                         "functions and element types, Part 1, Table 12)")
    new.ir_version = ir_version if ir_version is not None else _ir_for(new, model.ir_version)
    if new.ir_version < 4 and new.graph is not None:
        _initializers_as_inputs(new)
    return Conversion(new, conv.notes, conv.steps, conv.contradictions, original=model)


def convert_checked(model: Model, targets, ir_version: int | None = None,
                    check: bool = True, share: bool = False) -> Conversion:
    """:func:`convert`, then (with ``check``) the converted model checked in memory
    (:func:`onemodel.check`) and inferred (:func:`onemodel.inference.infer_model`, Clause
    9.4): an error finding or a contradiction that ``model`` does not have raises
    UnsupportedError naming the first three (what ``onemodel convert --opset`` does by
    default; ``share`` as :func:`convert`)."""
    from ..inference import infer_model
    from ..validation import check as check_model

    conv = convert(model, targets, ir_version, share)
    if check:
        errors = [f for f in check_model(conv.model).findings if f.severity == "error"]
        if errors:
            before = {(f.code, f.message) for f in check_model(model).findings}
            new = [f for f in errors if (f.code, f.message) not in before]
            if new:
                shown = "; ".join(f"{f.code} {f.message} [{f.path}]" for f in new[:3])
                raise UnsupportedError(f"the converted model fails check with {len(new)} "
                                       f"error{'s' if len(new) != 1 else ''}: {shown}")
        found = infer_model(conv.model).contradictions
        if found:
            before = {c.message for c in conv.contradictions}
            new = [c for c in found if c.message not in before]
            if new:
                shown = "; ".join(f"{c.message} [{c.path}]" for c in new[:3])
                raise UnsupportedError(f"shape inference finds {len(new)} contradiction"
                                       f"{'s' if len(new) != 1 else ''} in the converted model"
                                       f" that the original has not: {shown}")
    conv.model.format = model.format
    return conv


def _copy_sharing(model: Model, shared: set) -> Model:
    """A deep copy of ``model`` (:meth:`Record.copy`) that shares its nodes without
    subgraphs and its tensors (the records themselves; their ids added to ``shared``)."""
    from ..ir.record import LIST_KINDS, LIST_MSG, MSG

    root = type(model).__new__(type(model))
    work = [(model, root)]
    while work:
        old, new = work.pop()
        for name, kind, _ in old.FIELDS:
            v = getattr(old, name)
            if kind == MSG and v is not None:
                c = type(v).__new__(type(v))
                work.append((v, c))
                v = c
            elif kind == LIST_MSG:
                copies = list(v)
                own = [i for i, x in enumerate(v) if not (type(x) is Tensor or (
                    type(x) is Node and not (x.attributes and any(
                        a.g is not None or a.graphs for a in x.attributes))))]
                shared.update(map(id, v))
                for i in own:
                    x = v[i]
                    shared.discard(id(x))
                    c = copies[i] = type(x).__new__(type(x))
                    work.append((x, c))
                v = copies
            elif kind in LIST_KINDS:
                v = list(v)
            setattr(new, name, v)
        for name in old.EXTRA:
            setattr(new, name, getattr(old, name))
        new.unknown = old.unknown
    return root


# -- the IR version -------------------------------------------------------------------------
def _ir_for(model: Model, before: int | None) -> int:
    """The IR version the converted model's imports require, raised to what its functions and
    element types need (Part 1, Table 12); the model's own when none of its imports is known."""
    need = [required_ir(o.domain, o.version) for o in model.opset_imports
            if o.version is not None]
    need = [n for n in need if n is not None]
    if not need:
        return before or 3
    ir = max(need)
    if model.functions:
        ir = max(ir, FUNCTIONS_IR)
    for code in _element_types(model):
        ir = max(ir, ELEMENT_TYPE_IR.get(code, 0))
    return ir


def _element_types(model: Model) -> set:
    codes = set()
    for _, g in _all_graphs(model):
        codes.update(t.data_type for t in g.initializers if t.data_type)
        for vi in (*g.inputs, *g.outputs, *g.value_info):
            e = vi.type.elem_type if vi.type is not None else None
            if e:
                codes.add(e)
    return codes


def _used_names(model: Model) -> set:
    """Every name a node of the model reads (graphs, subgraphs, functions)."""
    names = set()
    for _, g in _all_graphs(model):
        for n in g.nodes:
            names.update(n.inputs)
    for fn in model.functions or ():
        for n in fn.nodes:
            names.update(n.inputs)
            for sg in n.subgraphs():
                for _, g in iter_graphs(sg):
                    for m in g.nodes:
                        names.update(m.inputs)
    return names


def _prune(model: Model, candidates: set) -> None:
    """Remove what the conversion left unread. Of ``candidates`` (the names read before the
    conversion, or added by it), those no node reads any more and that are no graph's or
    function's output: their initializers (unless graph inputs), and the nodes of the
    converted domains that produce them when none of a node's outputs is read or an output
    (an axes input folded into an attribute leaves nothing behind: not its Constant, nor the
    Cast or Shape chain that computed it, each producer in turn)."""
    outputs = set()
    for _, g in _all_graphs(model):
        outputs.update(vi.name for vi in g.outputs)
    for fn in model.functions or ():
        outputs.update(fn.outputs)
        for n in fn.nodes:
            for sg in n.subgraphs():
                for _, g in iter_graphs(sg):
                    outputs.update(vi.name for vi in g.outputs)

    def live(nodes: list, used: set, gone: set) -> list:
        return [n for n in nodes if not (
            any(o in gone for o in n.outputs)
            and all(not o or (o not in used and o not in outputs) for o in n.outputs)
            and normalize_domain(n.domain) in DOMAINS and not _is_function_call(model, n))]

    while True:
        used = _used_names(model)
        gone = candidates - used - outputs
        if not gone:
            return
        removed = False
        for _, g in list(_all_graphs(model)):
            inputs = {vi.name for vi in g.inputs}
            g.initializers = [t for t in g.initializers
                              if t.name not in gone or t.name in inputs]
            kept = live(g.nodes, used, gone)
            removed |= len(kept) != len(g.nodes)
            g.nodes = kept
        for fn in model.functions or ():
            kept = live(fn.nodes, used, gone)
            removed |= len(kept) != len(fn.nodes)
            fn.nodes = kept
        if not removed:
            return
        candidates = candidates - gone


def _initializers_as_inputs(model: Model) -> None:
    """Below IR version 4 every initializer is also an input of its graph (Part 1, Clause 7.2):
    each of the main graph that is not is added as a graph input, with its type; a subgraph's,
    whose inputs its operator fixes (a Loop body, an If branch), become Constant nodes at the
    head of the subgraph instead."""
    from ..ir import Attribute

    graph = model.graph
    have = {vi.name for vi in graph.inputs}
    for t in graph.initializers:
        if t.name and t.name not in have:
            graph.inputs.append(ValueInfo(name=t.name, type=Type.tensor(t.data_type,
                                                                          list(t.dims))))
            have.add(t.name)
    for _, g in _all_graphs(model):
        if g is graph or not g.initializers:
            continue
        heads = []
        for t in g.initializers:
            name, t.name = t.name, None
            heads.append(Node(op_type="Constant", inputs=[], outputs=[name],
                              attributes=[Attribute.make("value", t)]))
        g.nodes = heads + list(g.nodes)
        g.initializers = []


def _all_graphs(model: Model):
    """(path, graph) of the main graph, its subgraphs and the training graphs."""
    if model.graph is not None:
        yield from iter_graphs(model.graph, "graph")
    for k, ti in enumerate(model.training_info or ()):
        for name in ("initialization", "algorithm"):
            g = getattr(ti, name)
            if g is not None:
                yield from iter_graphs(g, f"training_info[{k}].{name}")


# -- types -------------------------------------------------------------------------------
def _type_string(v) -> str | None:
    """The ONNX type string of an inferred Value (``tensor(float)``, ``seq(tensor(int64))``),
    or None when its element type is unknown."""
    from ..ir.dtypes import name_of

    if v is None or v.kind is None:
        return None
    if v.kind in ("tensor", "sparse_tensor"):
        return f"{v.kind}({name_of(v.elem)})" if v.elem else None
    if v.kind in ("sequence", "optional"):
        inner = _type_string(v.inner)
        head = "seq" if v.kind == "sequence" else "optional"
        return None if inner is None else f"{head}({inner})"
    if v.kind == "map":
        inner = _type_string(v.inner)
        return None if inner is None or not v.elem else f"map({name_of(v.elem)},{inner})"
    return None


def _inference(model: Model):
    """The model inferred (Clause 9), with the Values every node was inferred with recorded
    by node: ``(Inference, {id(node): [(input Values, output Values), ...]}, positive)`` (a
    function's body node has one record per distinct call; ``positive`` the dimension
    variables inference took to be at least 1: the main graph's input extents)."""
    from ..inference.engine import Engine

    records: dict = {}

    class Recording(Engine):
        def infer_node(self, node, ins, npath, scope, raw=None, memo_key=None):
            outs = super().infer_node(node, ins, npath, scope, raw, memo_key)
            records.setdefault(id(node), []).append((list(ins), list(outs)))
            return outs

    engine = Recording(model)
    positive = engine._positive(model.graph) if model.graph is not None else frozenset()
    return engine.run(), records, positive


_SUBGRAPH = re.compile(r"\.nodes\[\d+\]\.attributes\[\d+\]\.(?:g|graphs\[\d+\])$")


class _Scope:
    """One graph or function body being converted: its values' types and constants, where a
    new constant goes, fresh names."""

    def __init__(self, conv, versions: dict, graph=None, path=None, function=None,
                 values=None, parents=()):
        self.conv, self.versions = conv, versions
        self.graph, self.path, self.function = graph, path, function
        self.values = values or {}
        self.parents = parents   # enclosing _Scope objects, innermost first
        nodes = graph.nodes if graph is not None else function.nodes
        self.constants = {n.outputs[0]: n for n in nodes
                          if n.op_type == "Constant" and not n.domain and n.outputs}
        self.inits = None   # initializer name -> tensor, made on the first lookup

    def value(self, name):
        for s in (self, *self.parents):
            v = s.values.get(name)
            if v is not None:
                return v
        return None

    def shape(self, name):
        v = self.value(name)
        if v is None or v.kind != "tensor" or v.shape is None:
            return None
        return tuple(d if type(d) is int else None for d in v.shape)

    def dims(self, name):
        v = self.value(name)
        return v.shape if v is not None and v.kind == "tensor" else None

    def elem(self, name):
        v = self.value(name)
        return v.elem if v is not None else None

    def elements(self, name):
        v = self.value(name)
        return v.data if v is not None and v.kind == "tensor" else None

    def constant(self, name):
        for s in (self, *self.parents):
            n = s.constants.get(name)
            if n is not None:
                return _constant_value(n)
            if s.graph is not None:
                if s.inits is None:
                    s.inits = {t.name: t for t in s.graph.initializers}
                t = s.inits.get(name)
                if t is not None:
                    if s.parents or not s.conv.overridable(name):
                        return t.numpy()
                    return None
        v = self.value(name)
        if v is not None and v.kind == "tensor" and v.shape is not None and v.elem:
            data = v.data
            if data is not None and all(type(x) in (int, float, bool) for x in data):
                from ..ir.dtypes import info
                try:
                    return np.asarray(data, dtype=info(v.elem).dtype).reshape(v.shape)
                except (TypeError, ValueError):
                    return None
        return None

    def fresh(self, hint: str) -> str:
        return self.conv.fresh(hint)

    def add_constant(self, step: Step, t: Tensor) -> None:
        """``t`` (named) made a constant of this scope: an initializer of the graph, or a
        Constant node before the node in a function body."""
        from ..inference.value import Value

        name = t.name
        if self.graph is not None:
            self.graph.initializers.append(t)
            if self.inits is not None:
                self.inits[name] = t
        else:
            from ..ir import Attribute
            t.name = None
            step.before.append(Node(op_type="Constant", inputs=[], outputs=[name],
                                    attributes=[Attribute.make("value", t)]))
        self.values[name] = Value.tensor(t.data_type, list(t.dims))


def _constant_value(node: Node):
    """The value of a Constant node as an array, or None (a sparse or string value)."""
    for a in node.attributes:
        if a.name == "value" and a.t is not None:
            try:
                return a.t.numpy()
            except Exception:
                return None
        if a.name == "value_int":
            return np.asarray(a.value, dtype=np.int64)
        if a.name == "value_ints":
            return np.asarray(a.value, dtype=np.int64)
        if a.name == "value_float":
            return np.asarray(a.value, dtype=np.float32)
        if a.name == "value_floats":
            return np.asarray(a.value, dtype=np.float32)
    return None


class _Converter:
    """Converts one model (already a copy) in place; :meth:`run` raises ConversionRefused."""

    def __init__(self, model: Model, targets: dict, original: Model):
        self.model, self.targets, self.original = model, targets, original
        self.refusals: list = []
        self.notes: list = []
        self.steps: dict = {}
        #: the original's contradictions, Values by node, positive dimension variables: from
        #: its inference, made by :meth:`run` when a node needs them (else None, {}, none)
        self.contradictions: list | None = None
        self.records: dict = {}
        self.positive: frozenset = frozenset()
        self._names: set | None = None  # every value name (fresh), made on first use
        #: whether a node was replaced, removed or added (:func:`_prune` is needed)
        self.rewritten = False
        self.counter = 0
        self.given: dict = {}
        self._known: dict = {}
        self._defs: dict = {}
        self._plans: dict = {}
        self._by_list: dict = {}  # (id(nodes), ...) -> (nodes, _operator_plans of them)
        #: ids of the records shared with the original model (:func:`_copy_sharing`)
        self.shared: set = set()
        #: (operator, versions, the node's type strings) -> the refusal reason or None
        self._typed: dict = {}
        #: the names this conversion made
        self.added: set = set()
        inputs = {vi.name for vi in model.graph.inputs} if model.graph is not None else set()
        self.main_inputs = inputs if (model.ir_version or 0) >= 4 else set()

    def overridable(self, name: str) -> bool:
        return name in self.main_inputs

    def fresh(self, hint: str) -> str:
        """A name no value of the model has, from ``hint`` (kept in :attr:`added`)."""
        hint = re.sub(r"[^A-Za-z0-9_.]", "_", hint) or "v"
        if self._names is None:  # (the original's names and those made so far)
            self._names = _all_names(self.original) | self.added
        name = hint
        while name in self._names:
            self.counter += 1
            name = f"{hint}_{self.counter}"
        self._names.add(name)
        self.added.add(name)
        return name

    def run(self) -> None:
        m = self.model
        versions = {normalize_domain(o.domain): o.version for o in m.opset_imports}
        inference = None
        if self._needs_values(versions):
            inference, self.records, self.positive = _inference(m)
            self.contradictions = inference.contradictions
        scopes: dict = {}
        for path, g in list(_all_graphs(m)):
            parent = _SUBGRAPH.sub("", path) if path != "graph" and \
                not path.startswith("training_info") else None
            chain = []
            while parent is not None and parent in scopes:
                chain.append(scopes[parent])
                parent = _SUBGRAPH.sub("", parent) if _SUBGRAPH.search(parent) else None
            s = _Scope(self, versions, graph=g, path=path,
                       values=dict(inference.graphs.get(path, {})) if inference else {},
                       parents=tuple(chain))
            scopes[path] = s
        for path, s in scopes.items():
            s.graph.nodes = self._nodes(s, s.graph.nodes, path)
        for f, fn in enumerate(m.functions or ()):
            fv = {normalize_domain(o.domain): o.version for o in fn.opset_imports}
            values = {}
            for node in fn.nodes:
                for ins, outs in self.records.get(id(node), ())[:1]:
                    values.update({n: v for n, v in zip(node.inputs, ins) if n and v})
                    values.update({n: v for n, v in zip(node.outputs, outs) if n and v})
            s = _Scope(self, fv, function=fn, values=values)
            fn.nodes = self._nodes(s, fn.nodes, f"functions[{f}]")
            for sub_path, g in [(p, g) for i, n in enumerate(fn.nodes)
                                for j, a in enumerate(n.attributes) for fld, sg in a.subgraphs()
                                for p, g in iter_graphs(sg, f"functions[{f}].nodes[{i}]"
                                                            f".attributes[{j}].{fld}")]:
                gs = _Scope(self, fv, graph=g, path=sub_path, parents=(s,))
                g.nodes = self._nodes(gs, g.nodes, sub_path)
            _retarget(fn.opset_imports, self.targets)
        for d, v in self.targets.items():
            if d not in versions:
                self.notes.append(f"the model does not import {d or 'ai.onnx'}: the target "
                                  f"{d or 'ai.onnx'} {v} changes nothing")
        if self.refusals:
            raise ConversionRefused(self.refusals)
        _retarget(m.opset_imports, self.targets)

    def _needs_values(self, versions: dict) -> bool:
        """Whether some node's conversion reads what inference knows of the original model
        (an adapter, a decomposition, a refusal or a type check is on its way: :meth:`_plan`
        gives None or checks); when none does, the conversion changes only opset imports and
        the original is not inferred (:attr:`contradictions` stays None until asked)."""
        def needs(ns, vs) -> bool:
            return any(plan is None or (plan is not _OTHER and plan[0])
                       for plan, _ in self._operator_plans(vs, ns))

        if any(needs(g.nodes, versions) for _, g in _all_graphs(self.model)):
            return True
        for fn in self.model.functions or ():
            fv = {normalize_domain(o.domain): o.version for o in fn.opset_imports}
            if needs(fn.nodes, fv) or any(needs(g.nodes, fv) for n in fn.nodes
                                          for sg in n.subgraphs() for _, g in iter_graphs(sg)):
                return True
        return False

    def _nodes(self, scope: _Scope, nodes: list, path: str) -> list:
        kept = self._all_kept(scope, nodes)
        if kept is not None:  # every node stays as it is: only the steps are counted
            for kind, n in kept.items():
                self.steps[kind] = self.steps.get(kind, 0) + n
            return list(nodes)
        out = []
        for i, node in enumerate(nodes):
            d = normalize_domain(node.domain)
            src, dst = scope.versions.get(d), self.targets.get(d)
            if d not in DOMAINS:
                if not _is_function_call(self.model, node):
                    self.notes.append(f"{path}.nodes[{i}]: {node.op_type} of domain {d!r} "
                                      "passed through unchanged")
                out.append(node)
                continue
            if src is None or dst is None or src == dst:
                out.append(node)
                continue
            try:
                out.extend(self._convert(scope, node, d, src, dst))
            except Refused as e:
                self.refusals.append((f"{path}.nodes[{i}]",
                                      f"{node.op_type}-{src} -> {dst}", e.reason))
        return out

    def _operator_plans(self, versions: dict, nodes: list) -> list:
        """``[(plan, count)]`` of each operator of ``nodes`` under imports ``versions``: its
        :meth:`_plan` to the target (``((), ())`` when no change is crossed), :data:`_OTHER`
        for an operator of another domain; one look per operator, memoized for the list
        (:meth:`_needs_values` and :meth:`_nodes` ask of the same lists, unchanged between)."""
        key = (id(nodes), len(nodes), tuple(sorted(versions.items())))
        got = self._by_list.get(key)
        if got is None or got[0] is not nodes:
            got = self._by_list[key] = (nodes, list(self._plans_of(versions, nodes)))
        return got[1]

    def _plans_of(self, versions: dict, nodes: list):
        counts: dict = {}
        for n in nodes:
            key = (n.domain, n.op_type)
            counts[key] = counts.get(key, 0) + 1
        for (domain, op_type), count in counts.items():
            d = normalize_domain(domain)
            src, dst = versions.get(d), self.targets.get(d)
            if d not in DOMAINS:
                yield _OTHER, count
            elif src is None or dst is None or src == dst:
                yield ((), ()), count
            else:
                yield self._plan(d, op_type, src, dst), count

    def _all_kept(self, scope: _Scope, nodes: list) -> dict | None:
        """When every node of ``nodes`` is of ai.onnx or ai.onnx.ml and stays as it is (no
        adapter, decomposition, refusal or type check on its way), the steps they cross by
        kind (``{"types": 30000}``); else None."""
        steps: dict = {}
        for plan, count in self._operator_plans(scope.versions, nodes):
            if plan is _OTHER or plan is None or plan[0]:
                return None
            for kind, n in plan[1]:
                steps[kind] = steps.get(kind, 0) + n * count
        return steps

    def _convert(self, scope, node: Node, d: str, src: int, dst: int) -> list:
        """The nodes that replace ``node`` (of domain ``d`` at version ``src``) at ``dst``."""
        checks = self._plan(d, node.op_type, src, dst)
        if checks is not None:  # no adapter on the way: the node stays, if its types do
            for kind, n in checks[1]:
                self.steps[kind] = self.steps.get(kind, 0) + n
            for at, to in checks[0]:
                self._check_types(scope, node, d, at, to)
            return [node]
        return self._stepped(scope, node, d, src, dst)

    def _plan(self, d: str, op_type: str, src: int, dst: int):
        """For a node that crosses only changes no adapter rewrites (types, or a semantic
        change up): ``(the (source, target) pairs whose types are checked, (kind, count) of
        the steps)``, memoized; None when an adapter, a decomposition or a refusal is on the
        way (:meth:`_stepped` does those)."""
        key = (d, op_type, src, dst)
        got = self._plans.get(key, self)
        if got is not self:
            return got
        got = None
        known = self._versions(d, op_type)
        current = self._definition(d, op_type, src) if known else None
        if current is not None and dst >= known[0]:
            cur = current.since_version
            up = dst > src
            steps = [s for s in known if cur < s <= dst] if up else \
                [s for s in reversed(known) if dst < s <= cur]
            checks, kinds = [], {}
            for since in steps:
                ch = change(d, op_type, since)
                if ch.kind not in ("types", "semantic") or (ch.adapter is not None and not up) \
                        or (ch.kind == "semantic" and not up):
                    break
                at, to = (ch.before, since) if up else (since, ch.before)
                if ch.types_checked(up) or ch.kind == "semantic":
                    checks.append((at, to))
                kinds[ch.kind] = kinds.get(ch.kind, 0) + 1
            else:
                got = (checks, tuple(kinds.items()))
        self._plans[key] = got
        return got

    def _stepped(self, scope, node: Node, d: str, src: int, dst: int) -> list:
        """:meth:`_convert` one change at a time, through adapters."""
        self.rewritten = True  # (an adapter may change the node or what it reads)
        known = self._versions(d, node.op_type)
        if not known:
            raise Refused(f"{node.op_type} is not an operator of {d or 'ai.onnx'}")
        current = self._definition(d, node.op_type, src)
        if current is None:
            raise Refused(f"{node.op_type} does not exist at opset {src} (it was introduced "
                          f"at {known[0]})")
        decompose = None
        if dst < known[0]:  # below the first definition: its decomposition, if it has one
            from ..operators.table import exact
            decompose = exact("adapter", d, node.op_type, known[0])
            if not getattr(decompose, "decomposition", False):
                raise Refused(f"{node.op_type} does not exist before opset {known[0]}")
        stop = known[0] if decompose is not None else dst
        cur = current.since_version
        if stop > src:
            steps = [(s, True) for s in known if cur < s <= stop]
        else:
            steps = [(s, False) for s in reversed(known) if stop < s <= cur]
        if steps and id(node) not in self.given:
            self._given(node)  # (by its names as read, before an adapter renames them)
        if id(node) in self.shared:  # the original's: an adapter may change it
            self._given(node)
            own = node.copy()
            self.given[id(own)] = self.given[id(node)]
            node = own
        for since, up in steps:
            ch = change(d, node.op_type, since)
            before = ch.before
            at, to = (before, since) if up else (since, before)
            step = Step(scope, node, d, at, to)
            kind = ch.kind
            replaced = None
            if kind == "uncovered":
                raise Refused(f"no adapter yet for {node.op_type} {before} -> {since} "
                              f"({'; '.join(ch.differences)})")
            if kind == "semantic" and not up and ch.adapter is None:
                raise Refused(f"{node.op_type}-{since} admits {ch.reason}, which "
                              f"{node.op_type}-{before} does not: no adapter proves this node "
                              "does not use it")
            if ch.adapter is not None and (kind == "adapter" or not up):
                replaced = (ch.adapter.up if up else ch.adapter.down)(step, node)
            self.steps[kind] = self.steps.get(kind, 0) + 1
            if replaced is not None:
                # the replacement is at ``to``, one step nearer ``dst``: the recursion is
                # at most as deep as the operator has definitions
                out = list(step.before)
                for n in replaced:
                    if normalize_domain(n.domain) == d:
                        out.extend(self._convert(scope, n, d, to, dst))
                    else:
                        out.append(n)
                return out
            if ch.types_checked(up) or kind == "semantic":
                self._check_types(scope, node, d, at, to)
            if step.before:
                return [*step.before, *self._after(scope, step.before, node, d, to, dst)]
        if decompose is not None:
            return self._decompose(scope, decompose, node, d, known[0], dst)
        return [node]

    def _decompose(self, scope, adapter, node: Node, d: str, first: int, dst: int) -> list:
        """``node``, at its first definition (introduced at ``first``), replaced by the nodes
        its decomposition gives at ``first - 1`` (the ``down`` of the adapter attached to the
        first definition), those converted on to ``dst``."""
        step = Step(scope, node, d, first, first - 1)
        replaced = adapter.down(step, node)
        if replaced is None:
            raise InternalError(f"the decomposition of {node.op_type} returned no nodes")
        self.steps["decomposition"] = self.steps.get("decomposition", 0) + 1
        out = []
        for n in [*step.before, *replaced]:
            if normalize_domain(n.domain) != d or n.op_type == "Constant":
                out.append(n)
                continue
            self._check_types(scope, n, d, first - 1, first - 1)
            out.extend(self._convert(scope, n, d, first - 1, dst) if first - 1 != dst
                       else [n])
        return out

    def _after(self, scope, inserted, node, d, at, dst):
        """``node`` (stepped to ``at`` after inserting ``inserted``) converted the rest of the
        way; the inserted nodes are of version ``at`` and are converted too."""
        for k, n in enumerate(inserted):
            if normalize_domain(n.domain) == d and n.op_type != "Constant" and at != dst:
                got = self._convert(scope, n, d, at, dst)
                inserted[k:k + 1] = got
        return self._convert(scope, node, d, at, dst) if at != dst else [node]

    def _versions(self, d: str, op_type: str) -> tuple:
        """:func:`onemodel.operators.table.versions`, memoized."""
        key = (d, op_type)
        got = self._known.get(key)
        if got is None:
            from ..operators.table import versions
            got = self._known[key] = versions(d, op_type)
        return got

    def _given(self, node: Node) -> list:
        """The Values ``node`` was inferred with, by its names as read: one dict per record
        (a function body's node has one per distinct call), made on first use."""
        got = self.given.get(id(node))
        if got is None:
            got = self.given[id(node)] = [
                {**{n: v for n, v in zip(node.inputs, ins) if n and v is not None},
                 **{n: v for n, v in zip(node.outputs, outs) if n and v is not None}}
                for ins, outs in self.records.get(id(node), ())] or [{}]
        return got

    def _definition(self, d: str, op_type: str, version: int):
        """The definition in force (:func:`onemodel.operators.table.definition`), memoized."""
        key = (d, op_type, version)
        got = self._defs.get(key, self)
        if got is self:
            from ..operators.table import definition
            got = self._defs[key] = definition(d, op_type, version)
        return got

    def _check_types(self, scope, node: Node, d: str, source: int, target: int) -> None:
        """Refuse ``node`` when the definition in force at ``target`` does not admit its element
        types, or when a type is unknown where that definition admits fewer types than the one
        in force at ``source``."""
        names = (*node.inputs, *node.outputs)
        key = (d, node.op_type, source, target, len(node.inputs),
               tuple(tuple(_type_string(given.get(n) or scope.value(n)) if n else ""
                           for n in names) for given in self._given(node)))
        if key in self._typed:  # admitted before: the same types pass the same check
            return
        self._check_node_types(scope, node, d, source, target)
        self._typed[key] = None

    def _check_node_types(self, scope, node: Node, d: str, source: int, target: int) -> None:
        """:meth:`_check_types`, not memoized."""
        from ..validation.types import allowed

        tdef = self._definition(d, node.op_type, target)
        sdef = self._definition(d, node.op_type, source)
        for given in self._given(node):
            bound: dict = {}
            for io in ("inputs", "outputs"):
                formals_t, formals_s = getattr(tdef, io), getattr(sdef, io)
                for k, name in enumerate(getattr(node, io)):
                    if not name or not formals_t:
                        continue
                    if k >= len(formals_t) and not formals_t[-1].variadic:
                        continue
                    ft = formals_t[min(k, len(formals_t) - 1)]
                    want = allowed(tdef, ft.type_str)
                    v = given.get(name) or scope.value(name)
                    ts = _type_string(v)
                    if ts is not None:
                        if ts not in want:
                            raise Refused(f"{name!r} is {ts}, which {node.op_type}-"
                                          f"{tdef.since_version} does not admit")
                        if ft.type_str in tdef.constraints and not (
                                ft.variadic and not ft.is_homogeneous):
                            other = bound.setdefault(ft.type_str, (name, ts))
                            if other[1] != ts:
                                raise Refused(f"{other[0]!r} is {other[1]} and {name!r} is "
                                              f"{ts}, but {node.op_type}-"
                                              f"{tdef.since_version} binds both to type "
                                              f"parameter {ft.type_str}")
                        continue
                    fs = formals_s[min(k, len(formals_s) - 1)] if formals_s else None
                    if fs is not None and fs.name == ft.name and allowed(sdef, fs.type_str) - want:
                        raise Refused(f"the element type of {name!r} is not known, and "
                                      f"{node.op_type}-{tdef.since_version} admits fewer types "
                                      f"than {node.op_type}-{sdef.since_version}")


#: :meth:`_Converter._operator_plans`'s plan of an operator of another domain than ai.onnx and
#: ai.onnx.ml (passed through, noted)
_OTHER = object()


def _is_function_call(model: Model, node: Node) -> bool:
    d = normalize_domain(node.domain)
    return any(normalize_domain(f.domain) == d and f.name == node.op_type
               for f in model.functions or ())


def _retarget(imports: list, targets: dict) -> None:
    for o in imports:
        d = normalize_domain(o.domain)
        if d in targets:
            o.version = targets[d]


def _all_names(model: Model) -> set:
    """Every value name of the model (graphs, subgraphs, functions), for fresh names."""
    names = set()

    def nodes(ns):
        for n in ns:
            names.update(n.inputs)
            names.update(n.outputs)

    for _, g in _all_graphs(model):
        names.update(t.name for t in g.initializers)
        names.update(vi.name for vi in (*g.inputs, *g.outputs, *g.value_info))
        nodes(g.nodes)
    for fn in model.functions or ():
        names.update(fn.inputs)
        names.update(fn.outputs)
        nodes(fn.nodes)
        for n in fn.nodes:
            for sg in n.subgraphs():
                for _, g in iter_graphs(sg):
                    nodes(g.nodes)
    names.discard(None)
    return names
