"""The inference of a model: every value's :class:`~.value.Value`, graph by graph, in
dependency order (ONNX Part 1, Clause 9).

For each node the engine binds the definition's type constraints to the inputs' element types
(Clause 10.4: an output typed ``T`` has the element type of the inputs typed ``T``; one typed
``tensor(int64)`` or by a constraint of one type has that type), then calls the node's rule
(:mod:`.registry`) for shapes, data and anything the constraints leave open. A node of a
model-local function is inferred through the function's body with the call's input types
(Clause 8.4), once per distinct input Values and attributes (at most
:data:`~onemodel.limits.MAX_FUNCTION_SIGNATURES` of them per function), and never for a function
that recurs (:func:`onemodel.ir.calls.recursive_functions`): such a call, and a symbolic extent
past :data:`~onemodel.limits.MAX_EXPR_SIZE` (:mod:`.dims`), get what the constraints give, and
a :class:`Note` says where. A node without a rule or function gets the constrained element
types and an unknown shape, and is listed in :attr:`Inference.no_rule`.

What the model declares (graph inputs, ``value_info``, graph outputs) is merged with what is
inferred: the better known extent is kept (an int over an expression over unknown), and a
declared type the inference contradicts (another element type, another rank, extents that
cannot be equal) is a contradiction, reported with its path (Clause 9.4).
"""

from __future__ import annotations

from ..errors import InternalError, IoError
from ..ir.calls import cycle_text, function_key, recursive_functions
from ..ir.dtypes import DataType
from ..ir.entries import normalize_domain
from ..ir.walk import check_nesting
from ..limits import (
    MAX_DATA_EXPR_SIZE,
    MAX_EVAL_DEPTH,
    MAX_EXPR_INTEGER,
    MAX_EXPR_SIZE,
    MAX_FUNCTION_SIGNATURES,
)
from . import dims as D
from . import value as value_mod
from .context import InferContext
from .registry import lookup
from .value import MAX_DATA, UNKNOWN, Value

_CODES = {t.name.lower(): int(t) for t in DataType if int(t)}


def parse_type(text: str) -> Value | None:
    """The Value template of an ONNX type string (``tensor(float)``, ``seq(tensor(int64))``,
    ``optional(...)``, ``map(string,tensor(float))``, ``sparse_tensor(...)``), shape unknown;
    None for a string it does not know."""
    text = text.replace(" ", "")
    if text.endswith(")"):
        head, _, body = text[:-1].partition("(")
        if head in ("tensor", "sparse_tensor"):
            code = _CODES.get(body)
            return Value(head, code) if code else None
        if head in ("seq", "sequence"):
            inner = parse_type(body)
            return Value.sequence(inner) if inner is not None else None
        if head == "optional":
            inner = parse_type(body)
            return Value.optional(inner) if inner is not None else None
        if head == "map":
            key, _, val = body.partition(",")
            return Value.map(_CODES.get(key), parse_type(val))
    return None


def _template(v: Value | None) -> Value | None:
    """``v`` without shape and data: what a type parameter binds to."""
    if v is None or v.kind is None:
        return None
    if v.kind in ("tensor", "sparse_tensor"):
        return Value(v.kind, v.elem) if v.elem is not None else None
    if v.kind in ("sequence", "optional"):
        inner = _template(v.inner)
        return Value(v.kind, inner=inner) if inner is not None else None
    if v.kind == "map":
        return Value.map(v.elem, _template(v.inner))
    return None


def _formal(formals, i: int):
    if i < len(formals):
        return formals[i]
    if formals and formals[-1].variadic:
        return formals[-1]
    return None


def _heterogeneous(f) -> bool:
    """Whether formal ``f`` is variadic with actual parameters of their own types each
    (Loop's ``v_initial``, Scan's, SequenceMap's outputs): its type parameter stands for no
    one type, so it binds nothing and is bound by nothing."""
    return f.option == "variadic" and not f.is_homogeneous


def bind_outputs(schema, inputs: list, n_out: int) -> list:
    """The output Value templates (element types, no shapes) the definition's type
    constraints give for ``inputs``, one per output (None where they give nothing; always
    for a heterogeneous variadic output)."""
    if schema is None:
        return [None] * n_out
    params: dict = {}
    for i, v in enumerate(inputs):
        f = _formal(schema.inputs, i)
        if f is not None and f.type_str in schema.constraints and f.type_str not in params \
                and not _heterogeneous(f):
            t = _template(v)
            if t is not None:
                params[f.type_str] = t
    out = []
    for i in range(n_out):
        f = _formal(schema.outputs, i)
        t = None
        if f is not None and not _heterogeneous(f):
            ts = f.type_str
            if ts in params:
                t = params[ts]
            elif ts in schema.constraints:
                allowed = schema.constraints[ts]
                t = parse_type(allowed[0]) if len(allowed) == 1 else None
            else:
                t = parse_type(ts)
        out.append(t)
    return out


def fresh_name(input_name: str, axis: int) -> str:
    """The variable standing for the unnamed extent ``axis`` of main-graph input
    ``input_name`` when the engine is asked for fresh variables (Clause 9.3 allows them):
    ``?x:1``; never written to a file."""
    return f"?{input_name}:{axis}"


class Scope:
    """Names visible in one graph: its own values, then its enclosing scopes' (Clause 5.4.3)."""

    __slots__ = ("local", "parent", "opsets")

    def __init__(self, parent: "Scope | None" = None, opsets: dict | None = None):
        self.local: dict[str, Value] = {}
        self.parent = parent
        self.opsets = opsets if opsets is not None else (parent.opsets if parent else {})

    def get(self, name: str) -> Value | None:
        s = self
        while s is not None:
            v = s.local.get(name)
            if v is not None:
                return v
            s = s.parent
        return None


class Contradiction:
    """One contradiction: ``path`` (IR field names, ``graph.nodes[3]``) and ``message``;
    ``name``: the value whose declared type the inference contradicts (None for inputs an
    operator cannot take)."""

    __slots__ = ("path", "message", "name")

    def __init__(self, path: str, message: str, name: str | None = None):
        self.path = path
        self.message = message
        self.name = name

    def __repr__(self):
        return f"Contradiction({self.path!r}, {self.message!r})"


class Note(Contradiction):
    """Where inference kept less than it could, at a documented limit (Clause 15.4): ``path``
    (the node) and ``message``. Not a fault of the model; ``check --full`` reports it as
    information (OM413)."""

    __slots__ = ()

    def __repr__(self):
        return f"Note({self.path!r}, {self.message!r})"


class Constraint:
    """What the operators entail of the extents (issue 12: the evaluator checks inputs against
    them, random inputs satisfy them): ``a == b`` (``allowed`` None), or ``a`` in ``allowed``
    (a tuple of ints: a broadcast extent is 1 or the other side's); found at ``path`` (the
    node), ``message`` saying which operator needs it."""

    __slots__ = ("path", "a", "b", "allowed", "message")

    def __init__(self, path, a, b, allowed, message):
        self.path, self.a, self.b, self.allowed, self.message = path, a, b, allowed, message

    def holds(self, binding: dict) -> bool | None:
        """Whether the constraint holds under ``binding`` (variable -> int); None when a
        variable it uses is unbound."""
        a = self.a.evaluate(binding) if isinstance(self.a, D.Expr) else self.a
        if a is None:
            return None
        if self.allowed is not None:
            return a in self.allowed
        b = self.b.evaluate(binding) if isinstance(self.b, D.Expr) else self.b
        return None if b is None else a == b

    def __repr__(self):
        rel = f"in {self.allowed}" if self.allowed is not None else f"== {D.dim_text(self.b)}"
        return f"Constraint({D.dim_text(self.a)} {rel} at {self.path})"


class Inference:
    """The result of inferring a model.

    Attributes:
        graphs: graph path (``graph``, ``graph.nodes[4].attributes[0].g``) -> name -> Value,
            for every value of that graph (inputs, initializers, node outputs).
        contradictions: list of :class:`Contradiction`, in the order found.
        no_rule: the ``(domain, op_type, opset)`` of nodes inferred without a rule.
        constraints: list of :class:`Constraint` on symbolic extents, in the order found.
        notes: list of :class:`Note`: nodes whose outputs are less known because of a
            limit (an extent past :data:`~onemodel.limits.MAX_EXPR_SIZE`, a function call not
            expanded), in the order found.
    """

    def __init__(self):
        self.graphs: dict[str, dict[str, Value]] = {}
        self.contradictions: list[Contradiction] = []
        self.no_rule: set = set()
        self.constraints: list[Constraint] = []
        self.notes: list[Note] = []

    @property
    def values(self) -> dict[str, Value]:
        """The main graph's values by name."""
        return self.graphs.get("graph", {})


def merge(declared: Value | None, inferred: Value | None, path: str, name: str, out) -> Value:
    """The Value of ``name`` from a declared and an inferred Value (either may be None or
    unknown); a contradiction between them is appended to ``out`` (Clause 9.4)."""
    if declared is None or declared.kind is None:
        return inferred if inferred is not None else UNKNOWN
    if declared == inferred:
        return inferred
    if inferred is None or inferred.kind is None:
        return declared
    if declared.kind != inferred.kind:
        out.append(Contradiction(path, f"{name!r} is declared {declared} but inferred "
                                       f"{inferred}", name))
        return declared
    if declared.kind in ("sequence", "optional"):
        return Value(declared.kind, inner=merge(declared.inner, inferred.inner, path, name, out))
    if declared.kind == "map":
        return declared
    elem = inferred.elem if inferred.elem is not None else declared.elem
    if declared.elem is not None and inferred.elem is not None and declared.elem != inferred.elem:
        out.append(Contradiction(path, f"{name!r} is declared {declared} but inferred "
                                       f"{inferred}", name))
        elem = declared.elem
    ds, is_ = declared.shape, inferred.shape
    if ds is None or is_ is None:
        shape = is_ if is_ is not None else ds
    elif len(ds) != len(is_):
        out.append(Contradiction(path, f"{name!r} is declared rank {len(ds)} "
                                       f"{D.shape_text(ds)} but inferred rank {len(is_)} "
                                       f"{D.shape_text(is_)}", name))
        shape = ds
    else:
        shape = []
        for k, (a, b) in enumerate(zip(ds, is_)):
            if D.differ(a, b):
                out.append(Contradiction(path, f"{name!r} is declared {D.shape_text(ds)} but "
                                               f"inferred {D.shape_text(is_)} (axis {k})",
                                               name))
                shape.append(a)
            elif type(a) is int or b is None:
                shape.append(a)
            else:
                shape.append(b)
    shape = None if shape is None else tuple(shape)
    return Value(declared.kind, elem, shape, inferred.data if shape == is_ else None)


#: element types whose initializers are never read for their elements (as plain ints: the
#: ``in`` test of every initializer compares no enum members)
_UNREAD_TYPES = (int(DataType.STRING), 0, None)


def initializer_value(t) -> Value:
    """The Value of an initializer or Constant tensor: element type and dims, and its elements
    (read on a rule's first use, :meth:`~.value.Value.lazy_tensor`) when it has at most
    :data:`~.value.MAX_DATA` of them and a numeric or bool type."""
    dims = tuple(map(int, t.dims))
    count = 1
    for d in dims:
        count *= d
    if count > MAX_DATA or t.data_type in _UNREAD_TYPES:
        return Value.tensor(t.data_type or None, dims)

    def read():
        try:
            data = tuple(t.numpy().reshape(-1).tolist())
        except Exception:  # bytes not at hand (a closed model), a type numpy cannot hold
            return None
        return data if all(type(x) in (int, float, bool) for x in data) else None

    return Value.lazy_tensor(t.data_type or None, dims, read)


class Engine:
    """Infers one model; :meth:`run` returns an :class:`Inference`."""

    def __init__(self, model, *, fresh_inputs: bool = False, positive_dims: bool = True,
                 orders: dict | None = None):
        self.model = model
        #: ``{id(graph): node order}`` of :func:`onemodel.ir.graph_rules.check_model` for this
        #: model, when the caller has it: a main graph it found in order (the identity) is
        #: inferred in that order without the engine's own pass over its nodes (:func:`_order`)
        self._orders = orders or {}
        self.positive_dims = positive_dims
        self.result = Inference()
        self.functions: dict = {}
        for f in model.functions:
            self.functions.setdefault(function_key(f.domain, f.name, f.overload), f)
        #: function key -> the cycle of calls through it, for each function that recurs
        self.recursive = recursive_functions(model) if self.functions else {}
        #: (id(function), input Values, attributes) -> output Values of an expanded call
        self._calls: dict = {}
        #: id(function) -> how many distinct calls were expanded
        self._expanded: dict = {}
        self.depth = 0
        self._resolved: dict = {}
        self._memo: dict = {}
        #: the memo's key names an input Value that is its own signature (not a lazily read
        #: one) by a token, an int from 1, the same for equal Values: ``id(Value) -> token``
        #: (the Values kept in ``_signed``, so that no id is reused) looks up at C level, where
        #: the Value itself in the key would call ``Value.__hash__`` and, for an equal Value
        #: that is another object (each node of a chain), ``Value.__eq__`` in Python
        self._tokens: dict = {}
        self._token_of: dict = {}  # Value -> token
        self._signed: list = []
        self._constrained = False
        self.fresh_inputs = fresh_inputs

    def contradiction(self, path: str, message: str) -> None:
        self.result.contradictions.append(Contradiction(path, message))

    def note(self, path: str, message: str) -> None:
        notes = self.result.notes
        if len(notes) < _MAX_NOTES:
            notes.append(Note(path, message))

    def constraint(self, path: str, a, b, allowed, message: str) -> None:
        c = self.result.constraints
        if len(c) < _MAX_CONSTRAINTS:
            c.append(Constraint(path, a, b, allowed, message))
        self._constrained = True

    def run(self) -> Inference:
        m = self.model
        check_nesting(m)  # UnsupportedError past MAX_MODEL_NESTING, before any recursive walk
        if m.graph is not None:
            opsets = {normalize_domain(o.domain): o.version for o in m.opset_imports}
            token = D.POSITIVE.set(self._positive(m.graph) if self.positive_dims
                                   else frozenset())
            try:
                self.infer_graph(m.graph, "graph", None, None, opsets)
            finally:
                D.POSITIVE.reset(token)
        return self.result

    def _positive(self, graph) -> frozenset:
        """The dimension variables of the main graph's inputs (and their fresh variables)."""
        out = set()
        for vi in graph.inputs:
            shape = vi.type.shape if vi.type is not None else None
            for k, e in enumerate(shape.extents if shape is not None else ()):
                if isinstance(e, str):
                    out.add(e)
                elif e is None and self.fresh_inputs:
                    out.add(fresh_name(vi.name, k))
        return frozenset(out)

    # -- graphs --------------------------------------------------------------------------------
    def infer_subgraph(self, graph, gpath: str, scope: Scope, inputs: list) -> list:
        return self.infer_graph(graph, gpath, scope, inputs, scope.opsets)

    def infer_graph(self, graph, gpath: str, parent: Scope | None, inputs, opsets) -> list:
        scope = Scope(parent, opsets)
        local = scope.local
        errors = self.result.contradictions
        declared_inputs = {vi.name for vi in graph.inputs}
        # Before IR version 4 every initializer of the main graph had to be a graph input too:
        # such a model carries its constants that way (Clause 7.2, editorial note), and they
        # are read as constants; from IR 4 on an initializer that is an input is a default the
        # caller may override (Clause 7.2), of which only the declared type is known.
        constants = parent is None and 0 < (self.model.ir_version or 0) < 4
        for t in graph.initializers:
            if t.name and (t.name not in declared_inputs or constants):
                local[t.name] = initializer_value(t)
        for t in graph.sparse_initializers:
            v = t.values
            if v is not None and v.name:
                local[v.name] = Value("tensor", v.data_type or None, tuple(t.dims))
        for i, vi in enumerate(graph.inputs):
            if constants and vi.name in local:
                continue  # an IR < 4 constant (above)
            declared = Value.from_type(vi.type)
            if self.fresh_inputs and parent is None and declared.shape is not None:
                declared = Value(declared.kind, declared.elem, tuple(
                    D.Expr.var(fresh_name(vi.name, k)) if d is None else d
                    for k, d in enumerate(declared.shape)))
            given = inputs[i] if inputs is not None and i < len(inputs) else None
            local[vi.name] = merge(declared, given, f"{gpath}.inputs[{i}]", vi.name, errors) \
                if given is not None else declared
        declared = {vi.name: vi.type for vi in graph.value_info}
        order = None
        if parent is None:  # (the graph rules' order is the engine's there when in order)
            given = self._orders.get(id(graph))
            n = len(graph.nodes)
            if given is not None and len(given) == n and given == list(range(n)):
                order = range(n)
        self._nodes(graph.nodes, gpath, scope, declared, order)
        outs = []
        for i, vi in enumerate(graph.outputs):
            v = merge(Value.from_type(vi.type), scope.get(vi.name), f"{gpath}.outputs[{i}]",
                      vi.name, errors)
            local[vi.name] = v
            outs.append(v)
        self.result.graphs[gpath] = local
        return outs

    def _nodes(self, nodes, gpath: str, scope: Scope, declared: dict, order=None) -> None:
        errors = self.result.contradictions
        local = scope.local
        get = local.get if scope.parent is None else scope.get
        infer = self.infer_node
        memo = self._memo
        tokens = self._tokens
        token = self._token
        where = id(scope.opsets)
        for i in _order(nodes, scope) if order is None else order:
            node = nodes[i]
            names = node.inputs
            # each input's signature in the memo's key: a lazily read Value's tuple, another
            # Value's token (the lists of most nodes, of one or two inputs, written out)
            if len(names) == 1:
                a = (get(names[0]) or UNKNOWN) if names[0] else None
                ins = [a]
                signed = (None if a is None else a.signature if a.signature is not a
                          else tokens.get(id(a)) or token(a),)
            elif len(names) == 2:
                a = (get(names[0]) or UNKNOWN) if names[0] else None
                b = (get(names[1]) or UNKNOWN) if names[1] else None
                ins = [a, b]
                signed = (None if a is None else a.signature if a.signature is not a
                          else tokens.get(id(a)) or token(a),
                          None if b is None else b.signature if b.signature is not b
                          else tokens.get(id(b)) or token(b))
            else:
                ins = [(get(n) or UNKNOWN) if n else None for n in names]
                signed = tuple([None if v is None else v.signature if v.signature is not v
                                else tokens.get(id(v)) or token(v) for v in ins])
            outputs = node.outputs
            # the memo of node results: same operator, imports, attributes and input signatures
            sig = _attribute_signature(node.attributes)
            key = None if sig is None else \
                (node.op_type, node.domain, where, len(outputs), sig, signed)
            outs = memo.get(key) if key is not None else None
            if outs is None:
                outs = infer(node, ins, f"{gpath}.nodes[{i}]", scope, memo_key=key)
            k = 0
            for name in node.outputs:
                if name:
                    v = outs[k] if k < len(outs) else None
                    if declared:
                        d = declared.get(name)
                        if d is not None:
                            v = merge(Value.from_type(d), v, f"{gpath}.nodes[{i}]", name, errors)
                    local[name] = UNKNOWN if v is None else v
                k += 1

    def _token(self, v: Value) -> int:
        """The memo's token of Value ``v`` (its own signature), not seen as this object yet:
        the token of an equal Value seen before, else a new one."""
        t = self._token_of.setdefault(v, len(self._token_of) + 1)
        self._tokens[id(v)] = t
        self._signed.append(v)
        return t

    # -- nodes -----------------------------------------------------------------------------------
    def _resolve(self, domain: str, op_type: str, version):
        """(rule, schema, input type parameters, output plan) of an operator at a version,
        computed once per (domain, op_type, version)."""
        key = (domain, op_type, version)
        r = self._resolved.get(key)
        if r is None:
            from ..operators.table import definition

            ok = type(version) is int and version > 0
            fn = lookup(domain, op_type, version) if ok else None
            schema = definition(domain, op_type, version) if ok else None
            r = self._resolved[key] = (fn, schema, _arg_count(fn) if fn else 0)
        return r

    def infer_node(self, node, ins: list, npath: str, scope: Scope,
                   raw: dict | None = None, memo_key=None) -> list:
        """The output Values of ``node`` given its input Values ``ins`` (None for an omitted
        input), by its rule, its model-local function, or the type constraints alone; kept
        under ``memo_key`` when the rule read no lazily read elements, found no contradiction
        and recorded no constraint (then any node of that key has these outputs)."""
        opsets = scope.opsets
        domain = node.domain or ""
        if domain == "ai.onnx":
            domain = ""
        version = opsets.get(domain)
        if version is None and domain == "":
            version = opsets.get("ai.onnx")
        fn, schema, nargs = self._resolve(domain, node.op_type, version)
        n_out = len(node.outputs)
        if raw is not None:
            memo_key = None
        generic = bind_outputs(schema, ins, n_out)
        if fn is None:
            f = self.functions.get((domain, node.op_type or "", node.overload or ""))
            if f is not None:
                return self._function(f, node, ins, npath, raw, generic)
            self.result.no_rule.add((domain, node.op_type, version))
            return generic
        ctx = InferContext(self, node, version, schema, ins, npath, scope, generic, raw)
        reads, found = value_mod.LAZY_READS, len(self.result.contradictions)
        bounded = D.BOUNDED
        self._constrained = False
        if nargs >= 0:
            args = ins[:nargs] if len(ins) >= nargs else ins + [None] * (nargs - len(ins))
        else:
            args = ins
        try:
            got = fn(ctx, *args)
        except IoError:  # bytes a rule reads are not at hand (a closed model, an unreadable
            got = None   # external file): what the type constraints give (Clause 9.4)
            memo_key = None
        except Exception as e:  # a rule's bug: name the node and the rule
            raise InternalError(f"inference rule {fn.__module__}.{fn.__name__} failed on "
                                f"{node.op_type} at {npath}: {type(e).__name__}: {e}") from e
        entries = got if type(got) is tuple else (got,)
        out = []
        for k in range(n_out):
            e = entries[k] if k < len(entries) else None
            g = generic[k]
            if type(e) is list:
                e = Value.tensor(g.elem if g is not None else None, e)
            elif isinstance(e, Value):
                if e.kind == "tensor" and e.elem is None and g is not None and g.elem is not None:
                    e = Value.tensor(g.elem, e.shape, e.data)
            elif e is None:
                e = g
            if e is not None:
                e = self._no_negative(e, node, npath, k, len(self.result.contradictions) > found)
                if e._data is not None and e._src is None:
                    e = _bounded_data(e)
            out.append(e)
        if D.BOUNDED != bounded:
            self.note(npath, f"{_label(node)}: {_BOUNDED_TEXT}")
        if memo_key is not None and value_mod.LAZY_READS == reads and \
                len(self.result.contradictions) == found and not self._constrained:
            self._memo[memo_key] = out
        return out

    def _no_negative(self, v: Value, node, npath: str, k: int, reported: bool) -> Value:
        """``v`` (output ``k`` of ``node``) with each extent that is a negative int made
        unknown: no tensor has one (Clause 6.5), so a rule's arithmetic that gives one means
        the node's inputs and attributes cannot all hold. That is a contradiction at the node,
        unless the rule has reported one there already (``reported``). Sequences and
        optionals are checked through their element. An int extent past
        :data:`~onemodel.limits.MAX_EXPR_INTEGER` a rule computed without :mod:`.dims` (a
        product of int extents) is made unknown too, and counted in ``dims.BOUNDED``."""
        if v.kind in ("sequence", "optional"):
            inner = v.inner
            if inner is None:
                return v
            fixed = self._no_negative(inner, node, npath, k, reported)
            return v if fixed is inner else Value(v.kind, inner=fixed)
        shape = v.shape
        if shape is None or v.kind not in ("tensor", "sparse_tensor") or \
                not any(type(d) is int and not 0 <= d <= MAX_EXPR_INTEGER for d in shape):
            return v
        if any(type(d) is int and d > MAX_EXPR_INTEGER for d in shape):
            D.BOUNDED += 1
            shape = tuple(None if type(d) is int and d > MAX_EXPR_INTEGER else d for d in shape)
            v = Value(v.kind, v.elem, shape)
            if not any(type(d) is int and d < 0 for d in shape):
                return v
        if not reported:
            label = _label(node)
            name = node.outputs[k] if k < len(node.outputs) else ""
            self.contradiction(npath, f"{label}: output {k} ({name!r}) would have the negative "
                                      f"extents of {D.shape_text(shape)}")
        return Value(v.kind, v.elem, tuple(None if type(d) is int and d < 0 else d
                                           for d in shape))

    def _function(self, f, node, ins, npath, raw, generic) -> list:
        """A call of model-local function ``f``: its body inferred with the call's inputs and
        attributes (Clause 8.4), once per distinct inputs and attributes; ``generic`` (what
        the constraints give) for a function that recurs, past
        :data:`~onemodel.limits.MAX_FUNCTION_SIGNATURES` distinct calls of ``f``, or past
        :data:`~onemodel.limits.MAX_EVAL_DEPTH` nested calls (with a :class:`Note`)."""
        cycle = self.recursive.get(function_key(f.domain, f.name, f.overload))
        if cycle is not None:
            self.note(npath, f"{_label(node)}: {cycle_text(cycle)}; the call is not expanded")
            return generic
        call = raw if raw is not None else {a.name: a for a in node.attributes}
        key = (id(f), tuple(ins), _call_signature(call))
        got = self._calls.get(key)
        if got is not None:
            return got
        n = self._expanded.get(id(f), 0)
        if n >= MAX_FUNCTION_SIGNATURES:
            self.note(npath, f"{_label(node)}: function {f.name} was inferred for "
                             f"{MAX_FUNCTION_SIGNATURES} distinct input types "
                             "(MAX_FUNCTION_SIGNATURES); this call is not expanded")
            return generic
        if self.depth >= MAX_EVAL_DEPTH:
            self.note(npath, f"{_label(node)}: function calls nest deeper than "
                             f"{MAX_EVAL_DEPTH} (MAX_EVAL_DEPTH); the call is not expanded")
            return generic
        self._expanded[id(f)] = n + 1
        self.depth += 1
        try:
            body = Scope(None, {normalize_domain(o.domain): o.version
                                for o in f.opset_imports})
            for name, v in zip(f.inputs, ins):
                if name and v is not None:
                    body.local[name] = v
            defaults = {a.name: a for a in f.attribute_defaults}
            for i, inner in enumerate(f.nodes):
                ipath = f"{npath}(function {f.name}).nodes[{i}]"
                bound = {}
                for a in inner.attributes:
                    if a.ref_attr_name:
                        src = call.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
                        if src is not None:
                            bound[a.name] = src
                    else:
                        bound[a.name] = a
                vals = [(body.get(n) or UNKNOWN) if n else None for n in inner.inputs]
                outs = self.infer_node(inner, vals, ipath, body, bound)
                for k, name in enumerate(inner.outputs):
                    if name and k < len(outs) and outs[k] is not None:
                        body.local[name] = outs[k]
            got = [body.get(n) for n in f.outputs]
        finally:
            self.depth -= 1
        self._calls[key] = got
        return got


def _bounded_data(v: Value) -> Value:
    """``v`` without its elements when the expressions among them hold more than
    :data:`~onemodel.limits.MAX_DATA_EXPR_SIZE` atoms together (counted in ``dims.BOUNDED``):
    a tensor of 1024 elements each of hundreds of atoms is no shape, and carrying it would cost
    every later node that much."""
    atoms = 0
    for x in v._data:
        if type(x) is D.Expr:
            atoms += x.size
    if atoms <= MAX_DATA_EXPR_SIZE:
        return v
    D.BOUNDED += 1
    return Value(v.kind, v.elem, v.shape)


def _label(node) -> str:
    """A node as messages name it: ``Mul 'm1'``, or the operator alone."""
    return f"{node.op_type} {node.name!r}" if node.name else (node.op_type or "")


def _call_signature(call: dict) -> tuple:
    """A hashable key of a call's attributes (name -> Attribute): their values, or the
    attribute records themselves where they hold a tensor, graph or type (the same record
    is the same value)."""
    out = []
    for name, a in call.items():
        sig = _attribute_signature((a,))
        out.append((name, sig if sig is not None else id(a)))
    return tuple(out)


def _arg_count(fn) -> int:
    """The number of inputs ``fn`` takes after ``ctx`` (-1 for ``*inputs``: what the node
    lists)."""
    code = fn.__code__
    if code.co_flags & 0x04:
        return -1
    return code.co_argcount - 1


#: At most this many constraints are kept (a model's first ones; each is small).
_MAX_CONSTRAINTS = 100_000

#: The note of a node where a bound of :mod:`.dims` (or of data) made something unknown.
_BOUNDED_TEXT = (f"an extent or element past a bound of inference is unknown "
                 f"(MAX_EXPR_SIZE: {MAX_EXPR_SIZE} atoms; MAX_DATA_EXPR_SIZE: "
                 f"{MAX_DATA_EXPR_SIZE} atoms in one tensor; MAX_EXPR_INTEGER: "
                 f"2^{MAX_EXPR_INTEGER.bit_length()} - 1)")

#: At most this many notes are kept (a model's first ones).
_MAX_NOTES = 1000



def _attribute_signature(attributes) -> tuple | None:
    """A hashable summary of a node's attributes for the memo of node results, or None when
    one holds a tensor, graph or type (such nodes are inferred each time)."""
    if not attributes:
        return ()
    out = []
    for a in attributes:
        if a.t is not None or a.g is not None or a.tensors or a.graphs or a.tp is not None \
                or a.sparse_tensor is not None or a.type_protos or a.sparse_tensors \
                or a.ref_attr_name:
            return None
        fl = a.floats
        out.append((a.name, a.type, a.i, a.f, a.s, tuple(a.ints) if a.ints else None,
                    fl.tobytes() if fl is not None and len(fl) else None,
                    tuple(a.strings) if a.strings else None))
    return tuple(out)


def _order(nodes, scope: Scope) -> list[int]:
    """Node indices in dependency order: as listed when every input is defined before its
    use (Clause 7.5), else a stable topological order (a cycle leaves the rest as listed)."""
    seen = set()
    ok = True
    local = scope.local  # (the graph's own inputs and initializers: asked first, inline)
    for node in nodes:
        for n in node.inputs:
            if n and n not in seen and n not in local and scope.get(n) is None:
                ok = False
                break
        if not ok:
            break
        seen.update(node.outputs)
    if ok:
        return list(range(len(nodes)))
    producer = {}
    for i, node in enumerate(nodes):
        for n in node.outputs:
            if n:
                producer.setdefault(n, i)
    deps = [{producer[n] for n in node.inputs if n in producer and producer[n] != i}
            for i, node in enumerate(nodes)]
    from ..errors import InvalidModelError
    from ..ir.order import stable_topological_order
    try:
        return stable_topological_order(deps, "graph")
    except InvalidModelError:
        return list(range(len(nodes)))
