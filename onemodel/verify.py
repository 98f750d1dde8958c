"""Proving two models are the same: field by field, tensor byte by tensor byte, and by running them.

:func:`compare_models` walks both models over the fields every record declares and reports each
difference with its path (``graph.nodes[3].attributes[0].f``). Tensors are compared by their
contents in raw storage layout, bit for bit (NaN payloads and signed zeros included), so a model
whose weights moved between inline, typed, external and OneModel storage still compares equal;
where the contents differ the first differing element is named. Two tensors that both carry a
recorded content digest (OneModel files written with ``digests=True``, docs/format-extension.md
section 9) are compared by those digests first: different digests are a difference; equal
digests need no octet-by-octet comparison, but each side's bytes are checked against its digest
(IoError naming the tensor when they do not match: equal records say nothing of the bytes).

:func:`verify` loads two files in any formats and compares them; with ``run=True`` it also runs
both on the same deterministic inputs (onemodel's evaluator, or another engine of the registry
:mod:`onemodel.engines`: ``engine="onnxruntime"`` when it is installed, or one a third party
registers; ``engines=(E1, E2)`` runs A with E1 and B with E2, and one model on two engines when
B is omitted) and compares every output with :mod:`onemodel.compare`: bit for bit when one
engine runs both and no tolerance is given, within the cross-engine defaults when the engines
differ (:data:`onemodel.compare.CROSS_ENGINE`: float32 rtol 1e-4, atol 1e-5; Part 1, Clause
11.5 for the other types), or within the tolerances given.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import (
    InternalError,
    IoError,
    OneModelError,
    UsageError,
)
from .ir import Model, Tensor
from .ir.dtypes import INFO
from .ir.record import (
    ARRAY,
    F32,
    LIST_MSG,
    MSG,
    Record,
    f32_bits,
    is_empty,
    is_empty_record,
    same_bytes,
)
from .ir.tensor import STORAGE_FIELDS
from .ir.walk import check_nesting
from .lazy import np

#: Tensor fields that say where the contents are stored, not what they are.
_LAYOUT_FIELDS = frozenset(STORAGE_FIELDS)


@dataclass
class Difference:
    """One difference: the field ``path`` and what differs."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class VerifyReport:
    """The result of :func:`verify`.

    Attributes:
        equal: True when no difference was found (structure, tensors, and outputs when run).
        differences: every difference found, up to the limit, in model order.
        outputs_compared: names of the outputs compared when run.
        tensors_by_digest: tensors found equal by their recorded digests alone (both sides
            carry one, and they are equal), whose bytes were not compared.
        engines: the engines A and B ran with (None when not run).
        comparisons: one :class:`onemodel.compare.ValueComparison` per output compared.
        tolerances: the :class:`onemodel.compare.Tolerances` the outputs were compared with.
        structure: the differences of the models themselves (fields and tensors), also in
            ``differences``.
        by_outputs: ``equal`` is the verdict of the run alone (``by_outputs=True``): every
            output within tolerance, whatever ``structure`` holds.
        run_error: why B (or A on the second engine) could not run on A's inputs, so that no
            output was compared (also the ``run`` entry of ``differences``); None otherwise.
    """

    a: str
    b: str
    equal: bool = True
    differences: list[Difference] = field(default_factory=list)
    outputs_compared: list[str] = field(default_factory=list)
    tensors_by_digest: int = 0
    engines: tuple[str, str] | None = None
    comparisons: list = field(default_factory=list)
    tolerances: object = None
    structure: list[Difference] = field(default_factory=list)
    by_outputs: bool = False
    run_error: str | None = None

    @property
    def first(self) -> Difference | None:
        """The first difference, or None."""
        return self.differences[0] if self.differences else None

    def __bool__(self) -> bool:
        """``equal``: ``if onemodel.verify(a, b):`` reads as it says (a report object that was
        always true made that test pass for models that differ)."""
        return self.equal


def _fmt(kind: str, v) -> str:
    if v is None:
        return "absent"
    if kind == F32:
        return f"{float(v)!r} (0x{f32_bits(v):08X})"
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _scalar(x):
    """A numpy scalar as a plain Python value for messages (``-0.25``, not ``np.float32(...)``)."""
    try:
        return x.item()
    except (AttributeError, ValueError, TypeError):
        return x


class _Walker:
    def __init__(self, loose: bool, limit: int):
        self.loose = loose
        self.limit = limit
        self.out: list[Difference] = []
        self.by_digest = 0  # tensors found equal by their recorded digests
        from .formats.container.digests import blob_digest  # (loading ONNX needs no container)
        self.blob_digest = blob_digest
        self.unheld = None
        if loose:  # the fields a plain OneModel v1 file cannot hold
            from .formats.container import v1_unheld
            self.unheld = v1_unheld

    def full(self) -> bool:
        return len(self.out) >= self.limit

    def add(self, path: str, message: str) -> None:
        if not self.full():
            self.out.append(Difference(path, message))

    def record(self, a: Record, b: Record, path: str) -> None:
        if type(a) is not type(b):
            self.add(path, f"{type(a).__name__} vs {type(b).__name__}")
            return
        tensor = isinstance(a, Tensor)
        # fields neither record's v1 object holds (an attribute's or a type's own choice of
        # value field or kind counts only when both made the same choice)
        skip = self.unheld(a) & self.unheld(b) if self.unheld is not None else ()
        # name the record in messages (an attribute's, tensor's or node's name), not only its
        # index in the path
        who = getattr(a, "name", None) if "name" in a.KIND else None
        label = f"{who}: " if isinstance(who, str) and who else ""
        for name, kind, _ in a.FIELDS:
            if self.full():
                return
            if (tensor and name in _LAYOUT_FIELDS) or name in skip:
                continue
            x, y = getattr(a, name), getattr(b, name)
            p = f"{path}.{name}" if path else name
            if kind == MSG:
                if x is None or y is None:
                    if self.loose and is_empty_record(x) and is_empty_record(y):
                        continue  # absent equals empty (an empty TypeProto: no type in v1)
                    if (x is None) != (y is None):
                        self.add(p, f"{'absent' if x is None else 'present'} vs "
                                    f"{'absent' if y is None else 'present'}")
                else:
                    self.record(x, y, p)
            elif kind == LIST_MSG:
                if len(x) != len(y):
                    self.add(p, f"{len(x)} vs {len(y)} items")
                for i, (u, v) in enumerate(zip(x, y)):
                    self.record(u, v, f"{p}[{i}]")
            else:
                self.value(kind, x, y, p, "" if name == "name" else label)
        if tensor:
            self.tensor_contents(a, b, path, label)
        if not self.loose and a.unknown != b.unknown:
            self.add(f"{path}.unknown" if path else "unknown",
                     f"{len(a.unknown)} vs {len(b.unknown)} bytes of unknown fields")

    def value(self, kind: str, x, y, p: str, label: str = "") -> None:
        if self.loose and is_empty(kind, x) and is_empty(kind, y):
            return
        if x is None or y is None:
            if x is not None or y is not None:
                self.add(p, label + f"{_fmt(kind, x)} vs {_fmt(kind, y)}")
            return
        if kind == F32:
            if f32_bits(x) != f32_bits(y):
                self.add(p, label + f"{_fmt(kind, x)} vs {_fmt(kind, y)}")
        elif kind == ARRAY:
            xa, ya = np.asarray(x), np.asarray(y)
            if xa.shape != ya.shape or not same_bytes(np.ascontiguousarray(xa),
                                                      np.ascontiguousarray(ya)):
                self.add(p, label + f"arrays differ ({xa.size} vs {ya.size} values)")
        elif x != y:
            self.add(p, label + f"{_fmt(kind, x)} vs {_fmt(kind, y)}")

    def tensor_contents(self, a: Tensor, b: Tensor, path: str, label: str = "") -> None:
        p = f"{path}.contents" if path else "contents"
        if a.storage == "none" and b.storage == "none":
            return
        code = a.data_type or 0
        if code == 8:  # STRING
            if list(a.string_data) != list(b.string_data):
                self.add(p, f"{label}string elements differ")
            return
        if code not in INFO or code != (b.data_type or 0):
            return  # the data_type difference is already reported
        da, db = self.blob_digest(a), self.blob_digest(b)
        if da is not None and da == db:  # the digests cover element type, dims and contents
            # equal records say nothing of the bytes: each side's bytes are checked against
            # its digest (IoError naming the tensor when they do not match), then they are
            # equal without comparing them octet by octet
            a.raw_view()
            b.raw_view()
            self.by_digest += 1
            return
        try:
            ra, rb = a.raw_view(), b.raw_view()
        except IoError:
            raise  # unreadable (a closed model, a failed fetch): an error, not a difference
        except OneModelError as e:
            self.add(p, f"{label}cannot read contents: {e.message}")
            return
        if len(ra) != len(rb):
            self.add(p, f"{label}{len(ra)} vs {len(rb)} bytes")
        elif not same_bytes(ra, rb):
            xa = np.frombuffer(ra, dtype=np.uint8)
            xb = np.frombuffer(rb, dtype=np.uint8)
            first = int(np.flatnonzero(xa != xb)[0])
            element = first * 8 // INFO[code].bits
            values = ""
            try:
                u, v = a.numpy().reshape(-1)[element], b.numpy().reshape(-1)[element]
                values = f": {_scalar(u)!r} vs {_scalar(v)!r}"
            except (OneModelError, IndexError):
                pass
            self.add(p, f"{label}contents differ first at byte {first} (element {element})"
                        f"{values}")


def compare_models(a: Record, b: Record, *, loose: bool = False,
                   limit: int = 100) -> list[Difference]:
    """Every difference between two models (or any two records), up to ``limit``.

    Args:
        loose: compare only what a plain OneModel v1 file (``strict_v1``) can hold: ignore the
            fields it has no place for (:func:`onemodel.formats.container.v1_unheld`: metadata
            of nodes, values, graphs and tensors, training information, denotations, an
            attribute's value fields beyond the one its type selects ...; of an attribute or
            a type, only those neither record's v1 object holds), treat an absent
            field as equal to an empty or zero one, and ignore unknown fields. A real change
            (a weight, an attribute value, a name, a shape) is still reported.
    Returns:
        the differences in model order; empty when the models are the same.
    Raises:
        UnsupportedError: a model whose graphs nest deeper than ``limits.MAX_MODEL_NESTING``
            (:func:`onemodel.ir.walk.check_nesting`).
    """
    return _walk(a, b, loose, limit).out


def _walk(a: Record, b: Record, loose: bool, limit: int) -> "_Walker":
    for m in (a, b):  # the walk recurses into subgraphs: bounded first
        if isinstance(m, Model):
            check_nesting(m)
    w = _Walker(loose, limit)
    w.record(a, b, "")
    return w


def verify(a, b=None, *, loose: bool = False, run: bool = False, seed: int = 0,
           dims: dict[str, int] | None = None, engine: str = "onemodel",
           storage_options: dict | None = None, limit: int = 100,
           read_options: dict | None = None,
           shapes: dict[str, tuple] | None = None,
           engines: tuple[str, str] | None = None,
           tolerances=None, by_outputs: bool = False) -> VerifyReport:
    """Load two models (any formats, any storage) and compare them.

    Args:
        a, b: paths, URLs or already loaded :class:`~onemodel.ir.Model` objects. ``b`` may be
            None with ``engines``: then ``a`` is run on both engines and not compared with
            itself field by field.
        loose: see :func:`compare_models`.
        run: also run both models on the same deterministic inputs (``seed``; symbolic dims from
            ``dims``, whole input shapes from ``shapes``) with ``engine`` (a name of
            :func:`onemodel.engines.names`: ``onemodel``, ``onnxruntime``, a registered one)
            and compare every output (:func:`run_and_compare`).
        engines: ``(E1, E2)``: run ``a`` with E1 and ``b`` with E2 (implies ``run``; replaces
            ``engine``).
        tolerances: a :class:`onemodel.compare.Tolerances`; None: bit for bit when both sides
            run on one engine, the cross-engine defaults (:data:`onemodel.compare.CROSS_ENGINE`,
            else Clause 11.5) when the engines differ.
        by_outputs: with ``run``, ``equal`` says whether the outputs agree (within
            ``tolerances``), not whether the models are the same: a model whose weights moved a
            little is equal when its outputs stay within tolerance. Its structural differences
            are still reported (``structure``).
        dims, shapes: as for :func:`onemodel.evaluate.random_inputs`; checked against ``a``'s
            inputs whether or not ``run`` is set (:func:`~onemodel.evaluate.inputs.
            check_dims_shapes`), so a name the model does not have is refused either way.
        read_options: passed to :func:`onemodel.load` for both (e.g. ``allow_outside=True``).
    Returns:
        a :class:`VerifyReport`.
    Raises:
        OneModelError when a model cannot be read, or when ``a`` cannot be run (an
        EvaluationError when it fails on its own generated inputs, with a note naming the
        inputs and axes to set), whatever ``b`` is; ``b`` failing on ``a``'s inputs is the
        ``run`` difference and ``run_error`` instead; an
        UnsupportedError for an unknown engine or one that cannot run here (onnxruntime not
        installed).
        UsageError: ``dims`` or ``shapes`` that do not fit ``a``'s inputs; ``b`` omitted
            without ``engines``; ``engines`` not two names.
    """
    from .api import _load as load
    from .storage import check_storage_options

    check_storage_options(storage_options, a, b, (read_options or {}).get("base_dir"))
    if engines is not None:
        engines = tuple(engines)
        if len(engines) != 2:
            raise UsageError(f"engines: two engine names, not {len(engines)}")
        run = True
    elif b is None:
        raise UsageError("the second model is needed unless two engines are given")
    pair = engines if engines is not None else (engine, engine)
    if run:  # (before any model is read: a missing engine is an error, not a difference)
        from . import engines as registry
        for e in pair:
            registry.get(e)
    opts = dict(read_options or {}, storage_options=storage_options)
    ma = a if isinstance(a, Model) else load(a, **opts)
    try:
        mb = ma if b is None else b if isinstance(b, Model) else load(b, **opts)
        try:
            if dims or shapes:
                from .evaluate.inputs import check_dims_shapes
                check_dims_shapes(ma, dims, shapes)
            source_a = str(getattr(ma, "source", a))
            report = VerifyReport(source_a, source_a if b is None
                                  else str(getattr(mb, "source", b)))
            if b is not None:
                walked = _walk(ma, mb, loose, limit)
                report.differences = walked.out
                report.structure = list(walked.out)
                report.tensors_by_digest = walked.by_digest
            diffs: list[Difference] = []
            if run:
                # A failing on its own generated inputs (or not running at all) raises, whatever
                # B is: the run did not happen, which no difference of the models can stand for
                ran = run_and_compare(ma, mb, seed=seed, dims=dims or {}, engines=pair,
                                      shapes=shapes, tolerances=tolerances)
                diffs, names = ran.differences, ran.names
                report.comparisons = ran.comparisons
                report.tolerances = ran.tolerances
                report.run_error = next((d.message for d in diffs if d.path == "run"), None)
                report.engines = pair
                report.differences.extend(diffs)
                report.outputs_compared = names
            report.by_outputs = by_outputs and run
            report.equal = not (diffs if report.by_outputs else report.differences)
            return report
        finally:
            if mb is not b and mb is not ma:
                mb.close()
    finally:
        if ma is not a:
            ma.close()


@dataclass
class RunComparison:
    """What :func:`run_and_compare` found.

    Attributes:
        differences: ``outputs`` when the output names differ, ``outputs[NAME]`` for each output
            out of tolerance (the message is the comparison's one line), ``run`` when ``b``
            could not run on ``a``'s inputs.
        comparisons: one :class:`onemodel.compare.ValueComparison` per output both runs gave,
            in ``a``'s output order.
        names: the names of those outputs.
        engines: the engines ``a`` and ``b`` ran with.
        tolerances: the :class:`onemodel.compare.Tolerances` used.
    """

    differences: list[Difference]
    comparisons: list
    names: list[str]
    engines: tuple[str, str]
    tolerances: object


def run_and_compare(a: Model, b: Model, *, seed: int = 0, dims: dict[str, int] | None = None,
                    engines: tuple[str, str] = ("onemodel", "onemodel"),
                    shapes: dict[str, tuple] | None = None,
                    tolerances=None) -> RunComparison:
    """Run ``a`` with ``engines[0]`` and ``b`` with ``engines[1]`` on the same deterministic
    inputs and compare every output (:func:`onemodel.compare.compare_outputs`, B the reference).

    The inputs are :func:`onemodel.evaluate.random_inputs` of ``a`` (``seed``; each dimension
    variable from ``dims``, 1 when not given; an input's whole shape from ``shapes``), which
    checks ``dims`` and ``shapes`` against ``a`` (UsageError). ``tolerances`` (a
    :class:`onemodel.compare.Tolerances`) defaults to bit for bit (dtype, shape and every byte:
    NaN payloads and signed zeros included) when both engines are the same, and to the
    cross-engine defaults of each element type when they differ
    (:data:`onemodel.compare.CROSS_ENGINE`: float32 rtol 1e-4, atol 1e-5; the Part 1, Clause
    11.5 defaults for the others).
    Returns:
        a :class:`RunComparison`.
    Raises:
        OneModelError when ``a`` cannot be run (an unsupported operator, a bad model; an
        EvaluationError, with a note naming the generated inputs and their open axes, when it
        fails on the generated inputs), or when an engine is unknown or not installed.
        UsageError: ``dims`` or ``shapes`` that do not fit ``a``'s inputs.
    """
    from . import engines as registry
    from .compare import Tolerances, compare_outputs
    from .evaluate import random_inputs
    from .evaluate.input_hints import add_inputs_hint

    ea, eb = engines
    run_a, run_b = (registry.get(e).run for e in (ea, eb))
    if tolerances is None:
        tolerances = Tolerances(exact=ea == eb, cross_engine=ea != eb)
    inputs = random_inputs(a, seed=seed, dims=dims or {}, shapes=shapes)
    try:
        out_a = run_a(a, inputs)
    except (OneModelError, InternalError) as e:  # the axis at fault is found by running with
        # the same engine (an InternalError, a bug, only gets the source)
        raise add_inputs_hint(e, a, dims or {}, shapes, seed=seed, runner=run_a)
    try:
        out_b = run_b(b, inputs)
    except InternalError as e:  # a bug of the evaluator, not a difference of the models
        raise e.at(source=getattr(b, "source", None))
    except OneModelError as e:
        who = (f"engine {eb} cannot run the model on the inputs engine {ea} ran"
               if a is b else "the second model cannot run on the first one's inputs")
        return RunComparison([Difference("run", f"{who}: {e}")], [], [], (ea, eb), tolerances)
    diffs = []
    if list(out_a) != list(out_b):
        diffs.append(Difference("outputs", f"{list(out_a)} vs {list(out_b)}"))
    comparisons = compare_outputs(out_a, out_b, tolerances)
    for c in comparisons:
        if not c.within:
            line = str(c)
            diffs.append(Difference(f"outputs[{c.name!r}]", line[len(c.name) + 2:]))
    return RunComparison(diffs, comparisons, [c.name for c in comparisons], (ea, eb), tolerances)


def compare_runs(a: Model, b: Model, *, seed: int = 0, dims: dict[str, int] | None = None,
                 engine: str = "onemodel",
                 shapes: dict[str, tuple] | None = None,
                 engines: tuple[str, str] | None = None,
                 tolerances=None) -> tuple[list[Difference], list[str]]:
    """Run both models on the same deterministic inputs and compare every output: bit for bit
    with one ``engine`` and no ``tolerances``; see :func:`run_and_compare` (which also gives
    the per-output comparisons) for ``engines`` and ``tolerances``.

    Returns:
        (differences, names of the outputs compared). A difference ``outputs[NAME]`` names an
        output out of tolerance; ``run`` says that ``b`` could not run on ``a``'s inputs.
    Raises:
        as :func:`run_and_compare`.
    """
    ran = run_and_compare(a, b, seed=seed, dims=dims, shapes=shapes, tolerances=tolerances,
                          engines=engines if engines is not None else (engine, engine))
    return ran.differences, ran.names
