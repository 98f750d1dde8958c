"""Finding the first node where two runs part: ``onemodel verify A B --run --bisect``.

:func:`bisect` runs both sides on the same inputs keeping every intermediate value of the main
graph, walks A's main-graph nodes in topological order (graph rule 3, Part 1, Clause 7.3), and
compares each node's outputs with the values of the same names on B's side, within the
tolerances of :mod:`onemodel.compare` (Part 1, Clause 11.5). The first node with an output
beyond tolerance is named with its op_type, name and the comparison of each of its inputs and
outputs. That node is then run alone in B's engine, with B's definition of it (its attributes
and the initializers it reads, from B) and A's values of its other inputs as feeds: if its
outputs then agree with A's, the node agrees on the same inputs and what differs is upstream
(``inputs``); if not, the node itself differs (``node``: a changed weight or attribute, or an
engine computing that operator differently). The nodes after it whose outputs differ are re-run
the same way, so that a fault that spreads is told from a second one.

The two models may differ in structure (a changed weight, a node added): values are matched
by name, and names A's nodes produce that B has not are listed as unmatched, never compared.

Intermediate values: each side's engine gives them (:mod:`onemodel.engines`, by name, through
its ``observe``). onemodel's evaluator gives every value by name as it is produced
(:meth:`onemodel.evaluate.Session.observe`). onnxruntime gives only graph outputs, so (as for
any engine that keeps the default ``observe`` of :class:`onemodel.engines.Engine`) a
temporary copy of the model gets every main-graph node output as a graph output, typed by its
``value_info`` or by onemodel's inference (Clause 9; onnxruntime needs the element type of an
output); a value neither types is skipped and listed with the reason.

Memory: only A's values are kept (to compare B's with, and to feed a node re-run alone), at most
:data:`~onemodel.limits.MAX_BISECT_MEMORY` bytes of them in memory; the rest are written to a
temporary directory, mapped back when read and removed when :func:`bisect` returns. B's values
are compared with A's as B's run produces them and then dropped: a run of the onemodel engine
holds only what the evaluator holds anyway. (onnxruntime returns all of a run's values at once:
with it, that run's values are in memory together until they are kept or compared.)
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from .engines import exposed_copy, node_output_names  # noqa: F401 (public here too)
from .errors import EvaluationError, InputError, InvalidModelError, OneModelError, UnsupportedError
from .ir import Graph, Model, Node, ValueInfo
from .ir.types import Type
from .lazy import np
from .limits import MAX_BISECT_MEMORY

#: Verdicts of a node re-run alone on the first side's inputs.
INPUTS, NODE = "inputs", "node"

_VERDICT_TEXT = {INPUTS: "the node agrees on the same inputs: its inputs differ",
                 NODE: "the node itself differs"}


# ---------------------------------------------------------------------------------------------
# Intermediate values
# ---------------------------------------------------------------------------------------------

def topological_order(model: Model) -> list[int]:
    """The indices of the main graph's nodes in the evaluation order of graph rule 3 (Part 1,
    Clause 7.3: the stable topological order, file order where it is free).

    Raises:
        InvalidModelError: a graph rule broken (a name defined twice, undefined, a cycle).
    """
    from .ir import graph_rules
    if model.graph is None:
        raise InvalidModelError("the model has no graph", path="graph")
    return list(graph_rules.check_model(model)[id(model.graph)])


def intermediate_values(model: Model, inputs: dict, engine: str = "onemodel"
                        ) -> tuple[dict[str, Any], dict[str, str]]:
    """Every value of the main graph that ``engine`` computes on ``inputs``, by name.

    The values the engine's ``observe`` gives (:mod:`onemodel.engines`): ``onemodel``, the
    evaluator's value of every node output (:meth:`onemodel.evaluate.Session.observe`);
    ``onnxruntime`` (and any engine that gives graph outputs only), the outputs of
    :func:`exposed_copy`, run without graph optimizations, one thread.

    Returns:
        (name -> value, ``{name: reason}`` of node outputs the engine could not expose).
    Raises:
        EvaluationError: the model failed on these inputs.
        UnsupportedError: an unknown engine, one that cannot run here (onnxruntime not
            installed) or refusing the model.
        InvalidModelError: see :meth:`onemodel.evaluate.Session.run`.
    """
    values: dict[str, Any] = {}
    skipped = _engine(engine).observe(model, inputs, values.__setitem__)
    return values, skipped


def _engine(name: str):
    from . import engines
    return engines.get(name)


class KeptValues:
    """Values by name within a memory bound: tensors are held in memory while their bytes add
    up to at most ``budget``; past it each is written to a file of ``directory`` and read back
    as a read-only array mapping that file (the page cache, not the process, holds it).
    Sequences, maps, strings and empty optionals are held as they are. A read-only mapping
    (``in``, ``[name]``, ``get``) of what :meth:`put` was given."""

    def __init__(self, budget: int, directory: str):
        self.budget = budget
        self.directory = directory
        self.held = 0  # bytes of the tensors held in memory
        self.spilled = 0  # bytes written to files
        self._memory: dict[str, Any] = {}
        self._files: dict[str, tuple] = {}
        self._written = 0  # files written (each its own, never reused)

    def put(self, name: str, value) -> None:
        """Keep ``value`` as ``name``'s (a later value of the same name replaces it)."""
        old = self._memory.pop(name, None)
        if isinstance(old, np.ndarray):
            self.held -= old.nbytes
        self._files.pop(name, None)
        if (not isinstance(value, np.ndarray) or value.dtype.hasobject or value.size == 0
                or self.held + value.nbytes <= self.budget):
            self._memory[name] = value
            self.held += value.nbytes if isinstance(value, np.ndarray) else 0
            return
        path = os.path.join(self.directory, f"{self._written}.bin")
        self._written += 1
        np.ascontiguousarray(value).reshape(-1).view(np.uint8).tofile(path)
        self._files[name] = (path, value.dtype, value.shape)
        self.spilled += value.nbytes

    def __contains__(self, name) -> bool:
        return name in self._memory or name in self._files

    def __getitem__(self, name: str):
        try:
            return self._memory[name]
        except KeyError:
            pass
        path, dtype, shape = self._files[name]
        return np.asarray(np.memmap(path, dtype=np.uint8, mode="r")).view(dtype).reshape(shape)

    def get(self, name: str, default=None):
        return self[name] if name in self else default


def _observe(model: Model, inputs: dict, engine: str, observer) -> dict[str, str]:
    """Give ``observer(name, value)`` every value of ``model``'s main graph ``engine`` computes
    on ``inputs`` (the inputs first, then each node output); returns ``{name: reason}`` of the
    node outputs the engine could not expose. Errors as :func:`intermediate_values`."""
    for name, value in inputs.items():
        observer(name, value)
    return _engine(engine).observe(model, inputs, observer)


# ---------------------------------------------------------------------------------------------
# A node alone
# ---------------------------------------------------------------------------------------------

def _value_type(value) -> Type | None:
    """The type of a runtime value (an ndarray: its element type and shape), None when it is not
    a tensor onemodel can name."""
    from .ir.dtypes import code_of_dtype
    if isinstance(value, np.ndarray):
        code = code_of_dtype(value.dtype)
        return None if code is None else Type.tensor(code, list(value.shape))
    return None


def lone_node_model(model: Model, index: int, feeds: dict[str, Any],
                    outputs: dict[str, Any]) -> Model:
    """A model of one node: ``model.graph.nodes[index]`` with the same IR version, opset
    imports and local functions, the initializers of ``model`` it reads (directly or from its
    subgraphs), and as graph inputs every other name it reads, typed by the value in ``feeds``;
    its graph outputs are its non-empty outputs, typed by the values in ``outputs`` (the ones to
    compare with).

    Raises:
        UnsupportedError: an input or output whose value is not a tensor (a sequence, a map:
            its type cannot be taken from the value), or a read name with no value in ``feeds``.
    """
    from .ir.order import node_outer_names
    node: Node = model.graph.nodes[index]
    g = model.graph
    inits = {t.name: t for t in g.initializers}
    sparse = {t.values.name if t.values is not None else None: t for t in g.sparse_initializers}
    read = [n for n in node.inputs if n] + sorted(node_outer_names(node))
    lone = Graph(name=f"bisect_{index}")
    seen: set[str] = set()
    for name in read:
        if name in seen:
            continue
        seen.add(name)
        if name in inits:
            lone.initializers.append(inits[name])
            continue
        if name in sparse:
            lone.sparse_initializers.append(sparse[name])
            continue
        if name not in feeds:
            raise UnsupportedError(f"no value of {name!r} to feed the node alone")
        t = _value_type(feeds[name])
        if t is None:
            raise UnsupportedError(f"input {name!r} of the node is not a tensor; it cannot be "
                                   "fed to the node alone")
        lone.inputs.append(ValueInfo(name=name, type=t))
    for name in node.outputs:
        if not name:
            continue
        t = _value_type(outputs.get(name))
        if t is None:
            raise UnsupportedError(f"output {name!r} of the node is not a tensor; the node "
                                   "cannot be run alone")
        lone.outputs.append(ValueInfo(name=name, type=Type.tensor(t.elem_type)))
    lone.nodes.append(node)
    out = Model(ir_version=model.ir_version, opset_imports=list(model.opset_imports),
                functions=list(model.functions), graph=lone)
    return out


# ---------------------------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------------------------

def default_tolerances(engines: tuple[str, str]):
    """The tolerances ``verify --run`` uses by default (:class:`onemodel.compare.Tolerances`):
    bit for bit when one engine runs both sides, the cross-engine defaults of each element type
    when the engines differ (:data:`onemodel.compare.CROSS_ENGINE`)."""
    from .compare import Tolerances
    return Tolerances(exact=engines[0] == engines[1], cross_engine=engines[0] != engines[1])


def compare_values(name: str, x, y, tolerances):
    """The :class:`onemodel.compare.ValueComparison` of A's value ``x`` and B's value ``y`` of
    ``name``, with the tolerance ``tolerances.for_value(name, dtype)`` gives (the element type
    of the tensors, of a sequence's or map's tensors). Its ``within`` says whether they
    agree."""
    from .compare import compare_value, leaf_dtype
    dtype = leaf_dtype(x)
    if dtype is None:
        dtype = leaf_dtype(y)
    return compare_value(name, x, y, tolerances.for_value(name, dtype))


def _json(c) -> dict | None:
    return None if c is None else c.to_json()


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------

@dataclass
class NodeReport:
    """One node of A whose outputs differ from B's values of the same names.

    Attributes:
        index: its place in A's ``graph.nodes``; ``path`` is ``graph.nodes[index]``.
        position: its place in the topological order, 0-based (the report, text and JSON,
            gives it 1-based: ``7 of 78 in topological order``, ``"position": 7``).
        op_type, name, domain: the node's.
        inputs, outputs: ``[(value name, comparison or None)]``: None for a value one side
            does not have (an initializer, which is part of the node's definition and compared
            by ``onemodel verify`` without ``--run``; a name B does not have; a value an engine
            did not expose).
        verdict: :data:`INPUTS` or :data:`NODE` from re-running the node alone (None when it
            could not be, with ``rerun_error`` saying why).
        rerun: ``[(output name, comparison of the lone node's value with A's)]``.
    """

    index: int
    position: int
    op_type: str
    name: str
    domain: str
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    verdict: str | None = None
    rerun: list = field(default_factory=list)
    rerun_error: str | None = None

    @property
    def path(self) -> str:
        return f"graph.nodes[{self.index}]"

    @property
    def label(self) -> str:
        return f"{self.path} ({self.op_type} {self.name!r})"

    def to_json(self) -> dict:
        """The node's report as ``verify --bisect --json`` gives it (docs/cli.md, Bisect):
        ``position`` 1-based, as the text report says it; ``index`` 0-based, as in ``path``."""
        return {"index": self.index, "path": self.path, "position": self.position + 1,
                "op_type": self.op_type, "name": self.name, "domain": self.domain,
                "inputs": [{"name": n, "comparison": _json(c)} for n, c in self.inputs],
                "outputs": [{"name": n, "comparison": _json(c)} for n, c in self.outputs],
                "verdict": self.verdict,
                "rerun": [{"name": n, "comparison": _json(c)} for n, c in self.rerun],
                "rerun_error": self.rerun_error}


@dataclass
class BisectReport:
    """The result of :func:`bisect`.

    Attributes:
        engines: (A's engine, B's engine).
        nodes: how many nodes A's main graph has (the ``M`` of a position ``N of M``).
        nodes_compared: A's nodes with at least one output compared (matched by name in B).
        first: the first differing node in topological order (None: no node differs).
        later: the differing nodes after it, each re-run alone (at most ``max_later``).
        differing: how many of A's nodes differ in all.
        unmatched: names A's nodes produce that B's run has not (not compared).
        skipped: ``{name: reason}`` of values an engine did not expose (not compared).
        tolerances: the :class:`onemodel.compare.Tolerances` values were compared with.
        comparisons: ``{value name: ValueComparison}`` of every value both runs gave (A's
            node outputs; ``onemodel view A B --run`` colours each node by them). Not in
            :meth:`to_json`.
    """

    engines: tuple[str, str]
    tolerances: Any = None
    nodes: int = 0
    nodes_compared: int = 0
    first: NodeReport | None = None
    later: list[NodeReport] = field(default_factory=list)
    differing: int = 0
    unmatched: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    comparisons: dict = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        """True when no node's outputs differ beyond tolerance."""
        return self.first is None

    def to_json(self) -> dict:
        return {"engines": list(self.engines),
                "tolerances": None if self.tolerances is None else self.tolerances.to_json(),
                "nodes": self.nodes, "nodes_compared": self.nodes_compared,
                "differing": self.differing,
                "first": _json(self.first), "later": [n.to_json() for n in self.later],
                "unmatched": list(self.unmatched), "skipped": dict(self.skipped)}

    def lines(self) -> list[str]:
        """The report as text lines (what ``onemodel verify --bisect`` prints)."""
        out = []
        compared = _count(self.nodes_compared, "node") + " compared"
        if self.first is None:
            out.append(f"bisect: no node differs ({compared}, "
                       f"{self.engines[0]} vs {self.engines[1]})")
        else:
            f = self.first
            # the position is among all of A's nodes; fewer may have been compared (matched
            # by name in B)
            out.append(f"bisect: first differing node {f.label}, {f.position + 1} of "
                       f"{self.nodes} in topological order ({self.differing} "
                       f"{'differs' if self.differing == 1 else 'differ'}, {compared})")
            for kind, items in (("input", f.inputs), ("output", f.outputs)):
                for n, c in items:
                    out.append(f"  {kind} {n}: not compared" if c is None else f"  {kind} {c}")
            out.append(f"  alone in {self.engines[1]}: {verdict_line(f)}")
            for n in self.later:
                out.append(f"  then {n.label}: {verdict_line(n)}")
            if self.differing > 1 + len(self.later):
                more = self.differing - 1 - len(self.later)
                out.append(f"  ({more} more differing {'node' if more == 1 else 'nodes'} "
                           "not re-run)")
        if self.unmatched:
            out.append(f"  {len(self.unmatched)} value(s) of A not in B, not compared: "
                       + ", ".join(repr(n) for n in self.unmatched[:5])
                       + (" ..." if len(self.unmatched) > 5 else ""))
        if self.skipped:
            out.append(f"  {len(self.skipped)} value(s) not exposed by an engine, not "
                       "compared: " + ", ".join(repr(n) for n in list(self.skipped)[:5])
                       + (" ..." if len(self.skipped) > 5 else ""))
        return out


def _count(n: int, noun: str) -> str:
    """``1 node``, ``2 nodes``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def verdict_line(n: NodeReport) -> str:
    """The verdict of a re-run node as ``verify --bisect`` words it (``node itself``, ``inputs
    differ``, ``not re-run (why)``), for the reports that name a node the same way."""
    if n.verdict is None:
        return f"not re-run ({n.rerun_error})"
    if n.verdict == INPUTS and all(c is None or c.within for _, c in n.inputs):
        return ("the node agrees on the same inputs: its inputs' differences, each within "
                "tolerance, grow beyond it here")
    return _VERDICT_TEXT[n.verdict]


# ---------------------------------------------------------------------------------------------
# bisect
# ---------------------------------------------------------------------------------------------

def bisect(a: Model, b: Model, inputs: dict, *, engines: tuple[str, str] = ("onemodel", "onemodel"),
           tolerances=None, max_later: int | None = 8,
           memory: int = MAX_BISECT_MEMORY) -> BisectReport:
    """The first node of ``a`` whose outputs differ from ``b``'s values of the same names.

    Args:
        a, b: the two models (the same model to compare two engines).
        inputs: graph input name -> value, fed to both.
        engines: the engine of each side, a name of :func:`onemodel.engines.names`
            (``onemodel``, ``onnxruntime`` or a registered one).
        tolerances: a :class:`onemodel.compare.Tolerances` (default: :func:`default_tolerances`,
            bit for bit on one engine, Clause 11.5's defaults across two).
        max_later: how many differing nodes after the first to re-run alone (None: all).
        memory: bytes of A's values kept in memory; the rest go to a temporary directory,
            removed before this returns (see the module's docstring).
    Returns:
        a :class:`BisectReport`.
    Raises:
        EvaluationError: ``a`` failed on ``inputs``, or ``b`` did (said so in the message:
            ``the second model cannot run on the first one's inputs: ...``), ``b``'s graph
            not taking them (another input name, another extent) included.
        UnsupportedError: an unknown engine, onnxruntime not installed or refusing a model.
        InvalidModelError: a graph rule broken in ``a``.
    """
    ea, eb = engines
    for e in engines:
        _engine(e)
    tol = default_tolerances(engines) if tolerances is None else tolerances
    order = topological_order(a)
    with tempfile.TemporaryDirectory(prefix="onemodel-bisect-") as directory:
        va = KeptValues(memory, directory)
        skipped = _observe(a, inputs, ea, va.put)
        compared: dict[str, Any] = {}  # name -> comparison of A's value with B's
        vb: set[str] = set()  # the names B's run gave a value

        def against_a(name: str, value) -> None:
            vb.add(name)
            if name in va:
                compared[name] = compare_values(name, va[name], value, tol)

        try:
            skipped_b = _observe(b, inputs, eb, against_a)
        except (EvaluationError, InputError, InvalidModelError) as e:  # (B's inputs are not
            # A's: another name, an extent its graph does not declare; or B fails on them)
            who = (f"engine {eb} cannot run the model on the inputs engine {ea} ran"
                   if a is b else "the second model cannot run on the first one's inputs")
            raise EvaluationError(f"{who}: {e.message}", path=e.path) from None
        return _report(a, b, order, va, vb, compared, skipped, skipped_b, (ea, eb), tol,
                       max_later)


def _report(a: Model, b: Model, order: list, va: KeptValues, vb: set, compared: dict,
            skipped: dict, skipped_b: dict, engines: tuple, tol, max_later) -> BisectReport:
    """The report of :func:`bisect` from A's kept values ``va``, the names B gave values
    ``vb`` and the comparisons made as B ran (``compared``)."""
    ea, eb = engines
    skipped = dict(skipped)
    for k, v in skipped_b.items():
        skipped.setdefault(k, v)
    report = BisectReport(engines=(ea, eb), tolerances=tol, skipped=skipped, nodes=len(order),
                          comparisons=compared)
    b_inits = {t.name for t in b.graph.initializers}
    b_nodes = {}
    for j, node in enumerate(b.graph.nodes):
        for name in node.outputs:
            if name:
                b_nodes.setdefault(name, j)
    a_inits = {t.name: t for t in a.graph.initializers}
    b_init_t = {t.name: t for t in b.graph.initializers}
    for pos, i in enumerate(order):
        node = a.graph.nodes[i]
        outs = []
        differs = False
        for name in node.outputs:
            if not name:
                continue
            if name not in vb or name not in va:
                if name not in skipped and name not in vb and name not in b_inits:
                    report.unmatched.append(name)
                outs.append((name, None))
                continue
            c = compared[name]
            outs.append((name, c))
            differs |= not c.within
        if not any(c is not None for _, c in outs):
            continue
        report.nodes_compared += 1
        if not differs:
            continue
        report.differing += 1
        if report.first is not None and max_later is not None and len(report.later) >= max_later:
            continue
        nr = NodeReport(index=i, position=pos, op_type=node.op_type or "", name=node.name or "",
                        domain=node.domain or "", outputs=outs)
        for name in node.inputs:
            if not name:
                continue
            if name in a_inits:  # part of the node's definition: A's weight against B's
                t = b_init_t.get(name)
                nr.inputs.append((name, None if t is None or name in vb else
                                  compare_values(name, a_inits[name].numpy(), t.numpy(), tol)))
            elif name not in va or name not in vb:
                nr.inputs.append((name, None))
            else:
                nr.inputs.append((name, compared[name]))
        _rerun(nr, a, b, b_nodes, va, eb, tol)
        if report.first is None:
            report.first = nr
        else:
            report.later.append(nr)
    return report


def _rerun(nr: NodeReport, a: Model, b: Model, b_nodes: dict, va, engine: str,
           tol) -> None:
    """Run B's node producing ``nr``'s first output alone in ``engine`` on A's values; set the
    verdict."""
    node = a.graph.nodes[nr.index]
    first = next(n for n in node.outputs if n)
    j = b_nodes.get(first)
    if j is None:
        nr.rerun_error = f"B has no node producing {first!r}"
        return
    try:
        lone = lone_node_model(b, j, va, va)
        got = _engine(engine).run(lone, {vi.name: va[vi.name] for vi in lone.graph.inputs})
    except OneModelError as e:  # the diagnosis stops here; the comparisons above stand
        nr.rerun_error = str(e)
        return
    agree = True
    for name in b.graph.nodes[j].outputs:
        if not name or name not in va or name not in got:
            continue
        c = compare_values(name, va[name], got[name], tol)
        nr.rerun.append((name, c))
        agree &= bool(c.within)
    nr.verdict = INPUTS if agree else NODE


def bisect_generated(a: Model, b: Model, *, seed: int = 0, dims: dict[str, int] | None = None,
                     shapes: dict[str, tuple] | None = None,
                     engines: tuple[str, str] = ("onemodel", "onemodel"), tolerances=None,
                     max_later: int | None = 8) -> BisectReport:
    """:func:`bisect` of ``a`` and ``b`` on the inputs ``verify --run`` generates for ``a``
    (:func:`onemodel.evaluate.random_inputs` with ``seed``, ``dims`` and ``shapes``): what
    ``verify --bisect`` and ``view A B --run`` run.

    Raises:
        UsageError: ``dims`` or ``shapes`` that do not fit ``a``'s inputs.
        EvaluationError, UnsupportedError, InvalidModelError: as :func:`bisect`.
    """
    from .evaluate import random_inputs

    inputs = random_inputs(a, seed=seed, dims=dims or {}, shapes=shapes)
    return bisect(a, b, inputs, engines=tuple(engines), tolerances=tolerances,
                  max_later=max_later)
