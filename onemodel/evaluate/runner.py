"""The graph runner: plans a model once, then evaluates it node by node with numpy kernels.

Planning (:class:`Session`) does all the checking before any computation (ONNX Part 1, Clause 4.4
and 8.6). The graph rules of :mod:`onemodel.ir.graph_rules` come first, with their messages and
paths: one definition per name, every name defined in its graph or an enclosing one (If, Loop and
Scan bodies read the values around them, Clause 5.4.3), declared domains, and the evaluation
order (the node order, which Clause 7.5 requires to be topological; an unsorted graph is sorted,
a cycle is refused), for the main graph, its subgraphs and the bodies of model-local functions.
Then every node is matched to a kernel (the session's own ``kernels=`` first, then the
registry's user and built-in kernels) or else a model-local function it calls, at the opset
version of its domain, and every operator without one is listed in one
:class:`~onemodel.errors.UnsupportedError`. Planning also fixes the values each subgraph reads
from its enclosing scopes and the last use of every value, after which the runner drops it, and
runs the attention chain MatMul -> Softmax -> MatMul and a MatMul -> Add as single steps where no
other node, subgraph or requested output sees their intermediate values (:mod:`.fusion`).

A kernel failing on the values it is given (numpy's ValueError, IndexError, an arithmetic error,
MemoryError) is an :class:`~onemodel.errors.EvaluationError` naming the node and the shapes of
its inputs; any other exception that is not a :class:`~onemodel.errors.OneModelError`
(TypeError, AttributeError, KeyError, ...) is a bug of the kernel, an
:class:`~onemodel.errors.InternalError` naming the node and the kernel.

Evaluation seeds each graph's values with its initializers as zero-copy arrays
(:meth:`Tensor.numpy`; a misaligned one is copied once when the session is prepared, see
:func:`.context.tensor_value`), sparse initializers as dense arrays, then the caller's inputs (which
override an initializer of the same name, Clause 7.2), and runs each node's kernel. Model-local
functions (Clause 8.4) run their body with the call site's attributes bound, when no kernel is
registered for the function's operator.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import numpy as np

from .. import limits
from ..errors import (
    EvaluationError,
    InternalError,
    InvalidModelError,
    OneModelError,
    UnsupportedError,
    UsageError,
    quote,
)
from ..ir import graph_rules
from ..ir.model import Attribute, Function, Graph, Model, Node
from ..ir.order import node_outer_names
from ..operators.custom import using
from . import registry
from .context import Context, attribute_value, tensor_value
from .fusion import fuse_attention
from .inputs import prepare_inputs
from .memory import refresh_budget, tune_allocator


class RunExpired(BaseException):
    """Raised between two nodes of :meth:`Session.run` once ``Session.deadline`` has passed.
    A BaseException, as KeyboardInterrupt is, so that no kernel running a subgraph turns it
    into an error of its node; only a caller that set the deadline catches it (the input
    hint's probe, :func:`.inputs.add_inputs_hint`)."""


def _label(node: Node) -> str:
    name = f" '{node.name}'" if node.name else ""
    dom = f"{node.domain}." if registry.normalize_domain(node.domain) else ""
    return f"{dom}{node.op_type}{name}"


_PARAM_CACHE: dict[Any, int] = {}


def _positional_params(fn) -> int:
    """Number of input parameters after ``ctx`` (-1: the kernel takes ``*inputs``)."""
    try:
        return _PARAM_CACHE[fn]
    except (KeyError, TypeError):
        pass
    n = 0
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            n = -1
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    try:
        _PARAM_CACHE[fn] = n
    except TypeError:
        pass
    return n


class _Step:
    """One node of a plan: its kernel (or function body), value names and what to drop after."""

    __slots__ = ("node", "index", "fn", "body", "opset", "attrs", "raw", "path", "ins", "outs",
                 "free", "nparams", "pad", "ctx")


class _Plan:
    """How to evaluate one graph (or one function body at one call site)."""

    __slots__ = ("graph", "inputs", "outputs", "consts", "steps", "captures", "is_function",
                 "used", "folded")


def _normalize(v):
    if isinstance(v, np.generic):
        return np.asarray(v)
    return v


class Session:
    """A model prepared for evaluation: checked, ordered and planned once, run many times.

    Args:
        model: an :class:`~onemodel.ir.Model` with a main graph. Its tensors are read in place.
        kernels: per-session kernels, ``{(domain, op_type): fn}`` (since opset 1) or
            ``{(domain, op_type, since): fn}``, each ``fn(ctx, *inputs)`` as for
            :func:`onemodel.evaluate.registry.register_kernel`. For this session they take
            precedence over user registrations and built-ins (the one with the greatest
            ``since <= opset`` of the node's domain); the process-global registry is untouched.
        operators: :class:`onemodel.operators.Operator` definitions of custom operators known
            to this session (their kernels, signatures and rules), before registered ones.
        tune_malloc: keep freed memory mapped for the next run: glibc's malloc thresholds,
            set once for the whole process (:mod:`onemodel.evaluate.memory`; nothing on other C
            libraries, nor when ``ONEMODEL_TUNE_MALLOC=0`` or glibc's own ``MALLOC_*_``
            variables are set). Off by default: it changes how the whole process allocates, and
            the process then keeps up to 64 MiB of freed memory. It saves the page faults of
            re-allocating large intermediates in every later run (docs/performance.md: a
            transformer encoder at batch 16, 8.6 ms -> 4.3 ms a run).
        check_inputs: before the first run whose inputs have extents the model does not fix,
            infer what its operators entail of them (:mod:`.constraints`, Clause 9) and refuse
            inputs that break it at the input, naming the axis and the operator, instead of
            failing inside a node. On by default; an inference that cannot be made checks
            nothing (Clause 9.4: it never prevents evaluation).

    Raises (at construction, before any computation):
        InvalidModelError: a graph rule of :mod:`onemodel.ir.graph_rules` broken (in the main
            graph, a subgraph or a function body: a name defined twice in one graph, a name not
            defined in its graph or an enclosing one, a cycle, a domain the model does not
            import), with that rule's message and path.
        UnsupportedError: a function that calls itself (directly or through others: its
            expansion would not end, Clause 15.4); listing every operator ``(domain, op_type,
            opset)`` no kernel and no model-local function implements, in the main graph, its
            subgraphs and the functions it calls; or nesting deeper than
            ``limits.MAX_EVAL_DEPTH`` (graphs nested deeper than ``limits.MAX_MODEL_NESTING``,
            by the graph rules); or function calls that expand to more than
            ``limits.MAX_EXPANDED_NODES`` nodes.
        InternalError: the kernel of a Constant (computed here) failing with an exception that
            is not a OneModelError nor an input fault (see :meth:`run`).
        UsageError: a ``kernels`` key that is not ``(domain, op_type[, since])``, or a value
            that is not callable; an ``operators`` item that is not an Operator.
        UsageError: ``ONEMODEL_MEMORY_LIMIT`` set to anything but a decimal integer of bytes
            (:func:`.memory.memory_limit`).
    """

    def __init__(self, model: Model, *, kernels: dict | None = None, tune_malloc: bool = False,
                 check_inputs: bool = True, operators=None):
        if model is None or model.graph is None:
            raise InvalidModelError("the model has no graph", path="graph")
        refresh_budget()  # a bad ONEMODEL_MEMORY_LIMIT is named here, not by the first big array
        self.model = model
        self._kernels = _session_kernels(kernels or {})
        self._operators = tuple(operators or ())
        with using(self._operators):  # (checks them)
            self._prepare(model, tune_malloc, check_inputs)

    def _prepare(self, model: Model, tune_malloc: bool, check_inputs: bool) -> None:
        #: node order of every checked graph and function body, by id (graph_rules.check_model)
        self._orders = graph_rules.check_model(model, function_bodies=True)
        #: id(graph copy made by binding a function's attributes) -> (copy, graph of the model)
        self._origins: dict[int, tuple[Graph, Graph]] = {}
        self._opsets = self._imports(model.opset_imports)
        self._functions: dict[tuple[str, str, str], Function] = {}
        for f in model.functions:
            key = (registry.normalize_domain(f.domain), f.name or "", f.overload or "")
            self._functions[key] = f
        self._subplans: dict[int, _Plan] = {}
        self._plans: dict[Any, _Plan] = {}
        if tune_malloc:
            tune_allocator()  # keep freed intermediates mapped for the next run (see .memory)
        self._check_supported()
        self._main = self._plan_graph(model.graph, "graph", self._opsets, 0, outputs=None,
                                      top=True)
        self._plans[None] = self._main
        self._check_inputs = check_inputs
        self._constraints: list | None = None
        #: ``time.monotonic()`` after which a run stops between two nodes (its subgraphs'
        #: included) by raising :class:`RunExpired`; None (the default): no limit. Set by
        #: the input hint's probe, whose trial runs have a wall-clock budget.
        self.deadline: float | None = None

    # -- the public face ------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        """Names of the main graph's inputs that have no initializer (the caller must supply)."""
        inits = {t.name for t in self.model.graph.initializers}
        inits |= {s.name for s in self.model.graph.sparse_initializers}
        return [v.name for v in self.model.graph.inputs if v.name not in inits]

    @property
    def output_names(self) -> list[str]:
        """Names of the main graph's outputs, in order."""
        return [v.name for v in self.model.graph.outputs]

    def run(self, inputs: dict[str, Any], outputs: list[str] | None = None) -> dict[str, Any]:
        """Evaluate the main graph.

        Args:
            inputs: graph input name -> value: an ndarray (or anything ``numpy.asarray`` takes)
                for a tensor, a list for a sequence, a dict for a map, ``None`` or the value for
                an optional. Inputs that have an initializer may be omitted (Clause 7.2).
            outputs: names of the values wanted, graph outputs or any intermediate value;
                ``None`` for the graph outputs. Only the nodes they depend on run.
        Returns:
            name -> value, in the order of ``outputs``: ndarrays (numpy or ml_dtypes dtypes),
            lists for sequences, dicts for maps, ``None`` for an empty optional.
        Raises:
            InputError: a missing or unknown input, a value of the wrong element type or
                shape, an initializer supplied as input; an input whose extents break what the
                operators entail (``check_inputs``: at the input, with the axis).
            InvalidModelError: a node whose attributes or subgraph are invalid as read (a
                missing required attribute, a body with too few outputs).
            EvaluationError: a node failing on the values it is given, a run-time condition of
                its operator that does not hold for them (a Reshape that cannot hold, shapes
                that do not broadcast, an index out of range, an array too large to allocate:
                the kernel raised ValueError, IndexError, an ArithmeticError or MemoryError):
                the message names the node (index, op_type, name) and the element type and
                shape of each input; the path is the node's.
            InternalError: a bug of a kernel: it raised another exception that is not a
                OneModelError (TypeError, AttributeError, KeyError, ...); the message names the
                node (index, op_type, name, domain, opset version) and the kernel
                (``module.function``), the path is the node's; the exception is its cause.
            UnsupportedError: a kernel refusing an attribute value or type it does not
                implement; subgraphs nesting too deeply for the Python stack.
        """
        with using(self._operators):
            return self._run(inputs, outputs)

    def _run(self, inputs: dict[str, Any], outputs: list[str] | None) -> dict[str, Any]:
        key = None if outputs is None else tuple(outputs)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan_graph(self.model.graph, "graph", self._opsets, 0,
                                    outputs=list(outputs), top=True)
            self._plans[key] = plan
        env = prepare_inputs(self.model.graph, plan, inputs)
        if self._check_inputs and inputs:
            self._check_constraints(env)
        with np.errstate(all="ignore"):  # IEEE results (inf, nan) are values, not warnings
            values = self._execute(plan, env)
        return dict(zip(plan.outputs, values))

    def observe(self, inputs: dict[str, Any], observer) -> None:
        """Evaluate the main graph, calling ``observer(name, value)`` for every value a node of
        the main graph produces, as it is produced, and keeping none of them past its last use
        (so a run holds what :meth:`run` holds, whatever ``observer`` keeps). Every node runs,
        none fused (each intermediate value is produced). ``inputs`` and the errors raised are
        :meth:`run`'s. ``verify --bisect`` sees each intermediate value this way
        (:mod:`onemodel.bisect`)."""
        with using(self._operators):
            self._observe(inputs, observer)

    def _observe(self, inputs: dict[str, Any], observer) -> None:
        plan = self._plans.get(_OBSERVED)
        if plan is None:
            plan = self._plan_graph(self.model.graph, "graph", self._opsets, 0, outputs=None,
                                    top=True, fuse=False)
            self._plans[_OBSERVED] = plan
        env = prepare_inputs(self.model.graph, plan, inputs)
        if self._check_inputs and inputs:
            self._check_constraints(env)
        for name, value in plan.folded.items():  # Constants, computed when planned
            observer(name, value)
        with np.errstate(all="ignore"):
            self._execute(plan, env, observer)

    def _check_constraints(self, env: dict) -> None:
        """The inputs against the constraints inference finds (computed on first use)."""
        from .constraints import bind_inputs, check_inputs, model_constraints

        binding, where = bind_inputs(self.model, env)
        if not binding:
            return
        if self._constraints is None:
            try:
                self._constraints = model_constraints(self.model)
            except Exception:  # noqa: BLE001 - inference never prevents evaluation (9.4)
                self._constraints = []
        check_inputs(self._constraints, binding, where)

    # -- checking -------------------------------------------------------------------------------
    @staticmethod
    def _imports(opset_imports) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in opset_imports:
            out[registry.normalize_domain(o.domain)] = int(o.version or 0)
        return out

    def _function_for(self, node: Node) -> Function | None:
        key = (registry.normalize_domain(node.domain), node.op_type or "", node.overload or "")
        return self._functions.get(key)

    def _resolve(self, node: Node, opsets: dict[str, int]):
        """(kernel or None, function or None, opset version) for a node: the version of its
        domain in ``opsets`` (imported, graph rule 4), the session's kernel, else the registry's
        (user, then built-in) with the greatest ``since <= version``, else the model-local
        function of its (domain, op_type, overload)."""
        domain = registry.normalize_domain(node.domain)
        version = opsets[domain]
        func = self._function_for(node)
        own = self._kernels.get((domain, node.op_type or ""))
        fn = registry._pick(own, version) if own else None
        if fn is None:
            fn = registry.lookup(domain, node.op_type or "", version)
        if fn is not None:
            return fn, None, version
        return None, func, version

    def _check_supported(self) -> None:
        """Refuse, before planning, what cannot be evaluated: operators without a kernel or
        function (all listed), a function that calls itself, nesting past
        ``limits.MAX_EVAL_DEPTH``, and function calls that expand to more than
        ``limits.MAX_EXPANDED_NODES`` nodes of function bodies (each function's count is
        computed once, so this takes time linear in the model's size)."""
        missing: dict[tuple[str, str, int], str] = {}
        expanded: dict[int, int] = {}  # id(function) -> nodes planned for one call of it
        cap = limits.MAX_EXPANDED_NODES + 1

        def visit_nodes(nodes, opsets, path, depth, stack, body: bool) -> int:
            """The nodes planned from function bodies for ``nodes`` (each node of a body
            itself when ``body``), at most ``cap``."""
            if depth > limits.MAX_EVAL_DEPTH:
                raise UnsupportedError(f"subgraphs and function calls nest deeper than "
                                       f"{limits.MAX_EVAL_DEPTH}", path=path)
            count = len(nodes) if body else 0
            for i, node in enumerate(nodes):
                npath = f"{path}.nodes[{i}]"
                fn, func, version = self._resolve(node, opsets)
                if fn is None and func is None:
                    key = (registry.normalize_domain(node.domain), node.op_type or "", version)
                    missing.setdefault(key, npath)
                for j, a in enumerate(node.attributes):
                    for field, g in a.subgraphs():
                        count += visit_nodes(g.nodes, opsets,
                                             f"{npath}.attributes[{j}].{field}", depth + 1,
                                             stack, body)
                if fn is None and func is not None:
                    if id(func) in stack:  # its expansion would not end (Clause 15.4)
                        raise UnsupportedError(f"function {func.domain}.{func.name} calls "
                                               "itself: a recursive function cannot be "
                                               "evaluated", path=npath)
                    if id(func) not in expanded:
                        fops = dict(opsets)
                        fops.update(self._imports(func.opset_imports))
                        expanded[id(func)] = visit_nodes(
                            func.nodes, fops, f"function {func.domain}.{func.name}",
                            depth + 1, stack | {id(func)}, True)
                    count += expanded[id(func)]
            return min(count, cap)

        total = visit_nodes(self.model.graph.nodes, self._opsets, "graph", 0, frozenset(),
                            False)
        if total >= cap:
            raise UnsupportedError(f"the model's function calls expand to more than "
                                   f"{limits.MAX_EXPANDED_NODES} nodes of function bodies "
                                   "(MAX_EXPANDED_NODES)", path="graph")
        if missing:
            listed = ", ".join(f"({d or 'ai.onnx'}, {t}, {v})" for (d, t, v) in sorted(missing))
            first = next(iter(missing.values()))
            raise UnsupportedError(
                f"{len(missing)} operator(s) cannot be evaluated (domain, op_type, opset): "
                f"{listed}", path=first)

    # -- planning -------------------------------------------------------------------------------
    def _order(self, graph: Graph | None, function: Function | None) -> list[int]:
        """The evaluation order of a graph or function body: graph rule 3's, computed when the
        session was checked (a graph copied by binding a function's attributes has the order of
        the graph it copies)."""
        if function is not None:
            return self._orders[id(function)]
        return self._orders[id(self._origins.get(id(graph), (None, graph))[1])]

    def _plan_graph(self, graph: Graph, path: str, opsets: dict[str, int], depth: int, *,
                    outputs: list[str] | None = None, top: bool = False,
                    function: Function | None = None, bound: dict | None = None,
                    fuse: bool = True) -> _Plan:
        """Plan one graph (checked by the graph rules); ``function``/``bound`` plan a function
        body at one call site; ``fuse=False`` keeps every node a step of its own."""
        if depth > limits.MAX_EVAL_DEPTH:
            raise UnsupportedError(f"subgraphs and function calls nest deeper than "
                                   f"{limits.MAX_EVAL_DEPTH}", path=path)
        plan = _Plan()
        plan.graph = graph
        plan.is_function = function is not None
        consts: dict[str, Any] = {}
        if function is not None:
            nodes = [_bind_node(n, bound, self._origins) for n in function.nodes]
            plan.inputs = list(function.inputs)
            plan.outputs = list(function.outputs)
        else:
            nodes = graph.nodes
            plan.inputs = [v.name for v in graph.inputs]
            plan.outputs = list(outputs) if outputs is not None else [v.name for v in graph.outputs]
            for j, t in enumerate(graph.initializers):
                consts[t.name] = (t, f"{path}.initializers[{j}]")
            for j, st in enumerate(graph.sparse_initializers):
                consts[st.name] = (st, f"{path}.sparse_initializers[{j}]")
        local = {n for n in plan.inputs if n}  # names this graph defines (the rest: captures)
        local.update(consts)

        order = self._order(graph, function)
        # Prune to the nodes the outputs depend on (Clause 8.2 allows eliding unused nodes).
        needed = set(plan.outputs)
        keep = []
        free_cache: dict[int, set[str]] = {}
        for i in reversed(order):
            node = nodes[i]
            if top and outputs is not None and not any(o in needed for o in node.outputs if o):
                continue
            keep.append(i)
            needed.update(n for n in node.inputs if n)
            fv = node_outer_names(node)
            free_cache[i] = fv
            needed.update(fv)
        keep.reverse()

        folded: dict[str, Any] = {}
        steps: list[_Step] = []
        uses: dict[str, int] = {}
        for i in keep:
            pos = len(steps)
            node = nodes[i]
            npath = f"{path}.nodes[{i}]"
            fn, func, version = self._resolve(node, opsets)
            st = _Step()
            st.node = node
            st.index = i
            st.fn = fn
            st.body = None
            st.opset = version
            st.path = f"{npath} ({_label(node)})"
            st.ins = list(node.inputs)
            st.outs = list(node.outputs)
            raw = {a.name: a for a in node.attributes}
            st.raw = raw
            try:
                st.attrs = {a.name: attribute_value(a) for a in node.attributes
                            if not a.ref_attr_name}
            except OneModelError as e:
                raise e.at(path=npath)
            if fn is None:
                if func is None:  # _check_supported refused it already
                    raise UnsupportedError(f"no kernel for {_label(node)}", path=npath)
                fops = dict(opsets)
                fops.update(self._imports(func.opset_imports))
                call = {a.name: a for a in func.attribute_defaults}
                call.update(raw)
                st.body = self._plan_graph(graph, f"{st.path} -> function "
                                           f"{func.domain or ''}.{func.name}", fops,
                                           depth + 1, function=func, bound=call)
                st.nparams = len(st.body.inputs)
            else:
                st.nparams = _positional_params(fn)
                _check_signature(node, version, npath)
            # subgraphs of this node read what this graph and the ones around it define
            for j, a in enumerate(node.attributes):
                for field, g in a.subgraphs():
                    gpath = f"{npath}.attributes[{j}].{field}"
                    self._subplans[id(g)] = self._plan_graph(g, gpath, opsets, depth + 1)
            st.pad = [None] * max(st.nparams - len(st.ins), 0)
            # A node without subgraphs gets one Context for every run (it never reads the
            # environment); a node with subgraphs gets a fresh one per run, see _execute.
            st.ctx = None
            if st.fn is not None and not free_cache.get(i) and not any(
                    a.subgraphs() for a in node.attributes):
                st.ctx = Context(node, version, st.attrs, raw, st.path, self, None)
            if (node.op_type == "Constant" and st.ctx is not None
                    and not registry.normalize_domain(node.domain)
                    and fn is registry.lookup("", "Constant", version, user=False)):
                # A Constant's value is fixed by its attributes: computed once, here.
                value = self._fold(st)
                for n in st.outs:
                    if n:
                        local.add(n)
                        folded[n] = value
                continue
            for n in st.ins:
                if n:
                    uses[n] = pos
            for n in free_cache.get(i, ()):
                uses[n] = pos
            for n in st.outs:
                if n:
                    local.add(n)
                    uses.setdefault(n, pos)
                    uses[n] = max(uses[n], pos)
            steps.append(st)

        keep_names = set(plan.outputs)
        captured = set().union(*(free_cache.get(st.index, ()) for st in steps))
        fused = fuse_attention(steps, captured, keep_names, _fused_step) if fuse else steps
        if fused is not steps:  # the last use of every value, again
            steps = fused
            uses = {}
            for pos, st in enumerate(steps):
                for n in st.ins:
                    if n:
                        uses[n] = pos
                for n in free_cache.get(st.index, ()):
                    uses[n] = pos
                for n in st.outs:
                    if n:
                        uses[n] = max(uses.get(n, pos), pos)
        if top and outputs is not None:  # names the caller asked for (the graph's are checked)
            for n in plan.outputs:
                if n not in local:
                    raise InvalidModelError(f"output {quote(n)} is not defined by any node, "
                                            "input or initializer", path=path)
        frees: list[list[str]] = [[] for _ in steps]
        for n, pos in uses.items():
            if n not in keep_names:
                frees[pos].append(n)
        for st, fr in zip(steps, frees):
            st.free = tuple(fr)
        plan.steps = steps
        # Values read from enclosing scopes: used here (or in nested subgraphs) but not local.
        captures = {n for n in uses if n not in local}
        captures |= {n for n in plan.outputs if n and n not in local}
        plan.captures = tuple(sorted(captures))
        used_consts = {n: c for n, c in consts.items() if n in uses or n in keep_names}
        plan.consts = {n: _const_array(c, p) for n, (c, p) in used_consts.items()}
        plan.consts.update((n, v) for n, v in folded.items() if n in uses or n in keep_names)
        plan.used = frozenset(uses) | keep_names
        plan.folded = folded  # (the Constants computed here, by name, used or not)
        return plan

    def _fold(self, st: _Step):
        """The value of a node computed at planning time (a Constant), errors located: the
        kernel failing on the node's attributes (an input fault, see :data:`_INPUT_FAULTS`) is
        an InvalidModelError; another exception that is not a OneModelError, an
        InternalError."""
        try:
            with np.errstate(all="ignore"):
                res = st.fn(st.ctx)
        except (OneModelError, InternalError) as e:
            raise e.at(path=st.path)
        except _INPUT_FAULTS as e:
            raise InvalidModelError(f"{_label(st.node)} failed: {type(e).__name__}: {e}",
                                    path=st.path) from e
        except Exception as e:
            raise _internal_error(st, e) from e
        return _normalize(res[0] if type(res) is tuple else res)

    # -- evaluation -----------------------------------------------------------------------------
    def _execute(self, plan: _Plan, env: dict, observer=None) -> list:
        deadline = self.deadline
        for st in plan.steps:
            if deadline is not None and time.monotonic() > deadline:
                raise RunExpired(f"the run passed its deadline before node {st.index}")
            try:
                args = [env[n] if n else None for n in st.ins]
            except KeyError as e:
                raise InvalidModelError(f"value {e.args[0]!r} is not available when node "
                                        f"{_label(st.node)} runs", path=st.path) from None
            if st.pad:
                args.extend(st.pad)
            outs = st.outs
            nout = len(outs)
            try:
                if st.body is not None:
                    res = tuple(self._run_function(st.body, args, st.path))
                else:
                    ctx = st.ctx
                    if ctx is None:
                        ctx = Context(st.node, st.opset, st.attrs, st.raw, st.path, self, env)
                    res = st.fn(ctx, *args)
            except EvaluationError as e:
                if e.path is not None:  # a node of a subgraph or function body: described
                    raise
                raise _evaluation_error(st, args, e.message, e) from None
            except (OneModelError, InternalError) as e:  # an inner node's InternalError stays
                raise e.at(path=st.path)                 # its own (not wrapped again below)
            except MemoryError as e:  # an array the values given make too large
                detail = f": {e}" if str(e) else ""
                raise _evaluation_error(st, args, "needs more memory than is available"
                                        f"{detail}") from None
            except RecursionError:
                raise UnsupportedError(f"{_label(st.node)} nests too deeply",
                                       path=st.path) from None
            except _INPUT_FAULTS as e:  # a kernel's run-time check failing on these inputs
                raise _evaluation_error(st, args, f"{type(e).__name__}: {e}") from e
            except Exception as e:  # a bug of the kernel
                raise _internal_error(st, e) from e
            if nout == 1:
                if type(res) is tuple:
                    res = res[0] if res else None
                name = outs[0]
                if name:
                    env[name] = _normalize(res)
            else:
                if not isinstance(res, (tuple, list)):
                    res = (res,)  # one value: the first output (the others must be unnamed)
                if len(res) < nout:
                    for name in outs[len(res):]:
                        if name:
                            raise InvalidModelError(
                                f"kernel of {_label(st.node)} returned {len(res)} values for "
                                f"{nout} outputs", path=st.path)
                for name, v in zip(outs, res):
                    if name:
                        env[name] = _normalize(v)
            if observer is not None:
                for name in outs:
                    if name:
                        observer(name, env[name])
            for n in st.free:
                env.pop(n, None)
        try:
            return [env[n] for n in plan.outputs]
        except KeyError as e:
            raise InvalidModelError(f"output {e.args[0]!r} was not computed",
                                    path=plan.steps[-1].path if plan.steps else None) from None

    def _run_function(self, plan: _Plan, args: list, path: str) -> list:
        env = dict(plan.consts)
        for name, v in zip(plan.inputs, args):
            if name:
                env[name] = v
        return self._execute(plan, env)

    def run_subgraph(self, graph: Graph, inputs: list, outer_env: dict, path: str) -> tuple:
        """Evaluate a subgraph of the node at ``path`` with the enclosing scope ``outer_env``.

        ``inputs`` bind the subgraph's inputs by position; inputs past them take their
        initializer (Clause 7.2). Returns the output values as a tuple.
        """
        plan = self._subplans.get(id(graph))
        if plan is None or plan.graph is not graph:  # a graph no node of the model holds
            gpath = f"{path}.<subgraph>"
            self._orders.update(graph_rules.check_graph(graph, gpath, self._opsets,
                                                        outer=outer_env or ()))
            plan = self._plan_graph(graph, gpath, self._opsets, 1)
            self._subplans[id(graph)] = plan  # keeps the graph, so its id keys its order
        env = {}
        outer_env = outer_env if outer_env is not None else {}
        for n in plan.captures:
            try:
                env[n] = outer_env[n]
            except KeyError:
                raise InvalidModelError(f"the subgraph reads '{n}', which no enclosing scope "
                                        f"defines", path=path) from None
        env.update(plan.consts)
        names = plan.inputs
        if len(inputs) > len(names):
            raise InvalidModelError(f"{len(inputs)} values given to a subgraph with "
                                    f"{len(names)} inputs", path=path)
        for name, v in zip(names, inputs):
            env[name] = v
        for name in names[len(inputs):]:
            if name not in plan.consts:
                raise InvalidModelError(f"subgraph input '{name}' was given no value",
                                        path=path)
        return tuple(self._execute(plan, env))


#: The key of the plan of :meth:`Session.observe` (every node, none fused).
_OBSERVED = object()

#: Inputs of a node described at most in an evaluation error (the rest are counted).
_DESCRIBED_INPUTS = 8

#: Exceptions a kernel raises for the values it is given: numpy's for shapes that do not
#: broadcast or reshape, an axis or index out of range, a singular matrix (ValueError,
#: IndexError and their subclasses AxisError and LinAlgError), an integer division by zero or an
#: overflow (ArithmeticError). The node fails on its inputs: an EvaluationError (MemoryError, an
#: array too large for the values given, is one too, see Session._execute). Any other exception
#: that is not a OneModelError (TypeError, AttributeError, KeyError, NameError, ...) is a bug of
#: the kernel: an InternalError.
_INPUT_FAULTS = (ValueError, IndexError, ArithmeticError)


def _session_kernels(kernels: dict) -> dict[tuple[str, str], list]:
    """``{(domain, op_type): [(since, fn), ...] sorted by since}`` from Session's ``kernels``;
    a key that is not ``(domain, op_type)`` or ``(domain, op_type, since)`` of strings and a
    positive int, or a value that is not callable, raises UsageError."""
    out: dict[tuple[str, str], list] = {}
    for key, fn in kernels.items():
        ok = isinstance(key, tuple) and len(key) in (2, 3) and all(
            isinstance(k, str) for k in key[:2])
        since = key[2] if ok and len(key) == 3 else 1
        if not ok or type(since) is not int or since < 1 or not callable(fn):
            raise UsageError(f"kernels: {key!r} is not (domain, op_type) or (domain, op_type, "
                             "since) mapped to a callable")
        out.setdefault((registry.normalize_domain(key[0]), key[1]), []).append((since, fn))
    for entries in out.values():
        entries.sort(key=lambda e: e[0])
    return out


def describe_value(value) -> str:
    """A value as an evaluation error shows it: ``float32[1, 16, 4]`` for a tensor, ``sequence
    of 3``, ``map of 2``, ``absent`` for a missing optional input."""
    if value is None:
        return "absent"
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}"
    if isinstance(value, (list, tuple)):
        return f"sequence of {len(value)}"
    if isinstance(value, dict):
        return f"map of {len(value)}"
    return type(value).__name__


def _evaluation_error(st: _Step, args: list, detail: str,
                      cause: EvaluationError | None = None) -> EvaluationError:
    """The EvaluationError of node ``st`` failing on ``args``: the node (index, op_type, name),
    what failed, and the element type and shape of each of its inputs."""
    node = st.node
    parts = [f"{n or '(none)'} {describe_value(v)}"
             for n, v in zip(st.ins[:_DESCRIBED_INPUTS], args)]
    if len(st.ins) > _DESCRIBED_INPUTS:
        parts.append(f"and {len(st.ins) - _DESCRIBED_INPUTS} more")
    text = (f"node {st.index} ({_label(node)}) failed: {detail}; its inputs: "
            f"{', '.join(parts) or 'none'}")
    return EvaluationError(text, path=st.path, source=cause.source if cause else None)


#: (domain, op_type, opset) -> ([(name, whether a GRAPH) of the required attributes],
#: [(index, name) of the required inputs])
_SIGNATURES: dict[tuple, tuple] = {}


def _signature(domain: str, op_type: str, opset: int) -> tuple:
    key = (domain, op_type, opset)
    got = _SIGNATURES.get(key)
    if got is None:
        from ..schemas import get
        s = get(op_type, domain, opset) if opset >= 1 else None
        if s is None:  # a domain or version onemodel.schemas does not define
            got = ((), ())
        else:
            got = (tuple((n, a.type == "GRAPH") for n, a in s.attributes.items() if a.required),
                   tuple((k, f.name) for k, f in enumerate(s.inputs) if f.option == "single"))
        _SIGNATURES[key] = got
    return got


def _check_signature(node: Node, opset: int, path: str) -> None:
    """InvalidModelError unless ``node`` sets every attribute and gives every input its
    operator's definition requires (:mod:`onemodel.schemas`, ONNX Part 1, Clause 10.4: the
    codes OM310, OM305 and OM307 of ``onemodel check``), checked once when a Session plans the
    node, so that no kernel meets a missing one (a KeyError, an input of None); a required GRAPH
    attribute (an If branch, a Loop or Scan body) must hold a graph. The path is the node's
    (``graph.nodes[3]``), or its input's or attribute's (``graph.nodes[3].inputs[0]``)."""
    attrs, inputs = _signature(registry.normalize_domain(node.domain), node.op_type or "",
                               opset)
    if attrs:
        have = {a.name: a for a in node.attributes}
        for name, graph in attrs:
            a = have.get(name)
            if a is None:
                raise InvalidModelError(f"{_label(node)} lacks required attribute "
                                        f"{quote(name)}", path=path)
            if graph and a.g is None:  # (a body a kernel runs: anything else is no graph)
                raise InvalidModelError(f"{_label(node)}: attribute {quote(name)} holds no "
                                        "graph; the definition's type is GRAPH",
                                        path=f"{path}.attributes[{node.attributes.index(a)}]")
    for k, name in inputs:
        if k >= len(node.inputs) or not node.inputs[k]:
            raise InvalidModelError(f"{_label(node)} lacks required input {k} "
                                    f"({quote(name)})", path=f"{path}.inputs[{k}]")


def _kernel_name(fn) -> str:
    """A kernel as an internal error names it: ``module.function`` (``qualname`` included)."""
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        return repr(fn)
    return f"{module}.{name}" if module else name


def _internal_error(st: _Step, e: BaseException) -> InternalError:
    """The InternalError of node ``st``'s kernel raising ``e`` (not a OneModelError): names
    the kernel and the node (index, op_type, name, domain, opset version)."""
    node = st.node
    name = f" {quote(node.name)}" if node.name else ""
    domain = registry.normalize_domain(node.domain) or "ai.onnx"
    where = f"{st.index} ({node.op_type}{name}, domain {domain}, opset {st.opset})"
    kernel = _kernel_name(st.fn)
    return InternalError(f"internal error in kernel {kernel} for node {where}: "
                         f"{type(e).__name__}: {e}; please report it", path=st.path,
                         kernel=kernel, node=where)


def _fused_step(last: _Step, ins: list[str], kernel) -> _Step:
    """The step running fused nodes (:mod:`.fusion`) in place of the last of them."""
    st = _Step()
    for name in _Step.__slots__:
        if hasattr(last, name):
            setattr(st, name, getattr(last, name))
    st.fn = kernel
    st.ins = list(ins)
    st.nparams = 3
    st.pad = []
    return st


def _const_array(c, path: str):
    try:
        return tensor_value(c)
    except OneModelError as e:
        raise e.at(path=path)
    except (ValueError, TypeError) as e:
        raise InvalidModelError(f"initializer cannot be read: {e}", path=path) from None


def _bind_node(node: Node, bound: dict[str, Attribute], origins: dict) -> Node:
    """A node of a function body with attribute references replaced (Clause 8.4).

    An attribute with ``ref_attr_name`` takes the call site's attribute of that name, else the
    function's default, else it is omitted. Graph attributes are bound recursively; each graph
    copied is recorded in ``origins`` (``id(copy) -> (copy, graph of the model)``), whose node
    order it keeps. Nodes without references are returned as they are.
    """
    changed = False
    attrs = []
    for a in node.attributes:
        if a.ref_attr_name:
            changed = True
            src = bound.get(a.ref_attr_name)
            if src is None:
                continue
            b = src.copy(deep=False)
            b.name = a.name
            b.ref_attr_name = None
            attrs.append(b)
        elif a.g is not None or a.graphs:
            b = a.copy(deep=False)
            if a.g is not None:
                b.g = _bind_graph(a.g, bound, origins)
            if a.graphs:
                b.graphs = [_bind_graph(g, bound, origins) for g in a.graphs]
            changed = changed or b.g is not a.g or any(x is not y
                                                       for x, y in zip(b.graphs, a.graphs))
            attrs.append(b)
        else:
            attrs.append(a)
    if not changed:
        return node
    new = node.copy(deep=False)
    new.attributes = attrs
    return new


def _bind_graph(g: Graph, bound: dict[str, Attribute], origins: dict) -> Graph:
    nodes = [_bind_node(n, bound, origins) for n in g.nodes]
    if all(a is b for a, b in zip(nodes, g.nodes)):
        return g
    new = g.copy(deep=False)
    new.nodes = nodes
    origins[id(new)] = (new, origins.get(id(g), (None, g))[1])
    return new


def run(model: Model, inputs: dict[str, Any], outputs: list[str] | None = None, *,
        kernels: dict | None = None, tune_malloc: bool = False,
        check_inputs: bool = True, operators=None) -> dict[str, Any]:
    """Evaluate ``model`` once: ``Session(model, kernels=kernels, tune_malloc=tune_malloc,
    check_inputs=check_inputs, operators=operators).run(inputs, outputs)``.

    See :class:`Session` for what is checked before any computation and for the options, and
    :meth:`Session.run` for the values, the result and the errors raised.
    """
    return Session(model, kernels=kernels, tune_malloc=tune_malloc,
                   check_inputs=check_inputs, operators=operators).run(inputs, outputs)
