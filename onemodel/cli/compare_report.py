"""``verify``'s run flags (inputs, engines, tolerances), and its report (text and ``--json``).

The flags are declared once here (:data:`SeedOpt` ... :data:`TolOpt`) and taken by ``verify``
and by ``view A B --run``; :func:`run_flags` parses them alike for both. Parsing only what the
flags say (every malformed value a :class:`~onemodel.errors.UsageError` naming the flag); the
comparison itself is :mod:`onemodel.compare`, run by :func:`onemodel.verify.verify` and
:func:`onemodel.bisect.bisect_generated`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import typer

from ..errors import UsageError, printable
from .application import _inputs_given, _seed

SeedOpt = typer.Option(0, "--seed", parser=_seed, metavar="N",
                       help="Seed of the generated inputs (an integer >= 0).")
DimOpt = typer.Option(None, "--dim", metavar="NAME=VALUE", help="Value of a symbolic dimension "
                      "for --run (repeatable; unset ones are 1).")
EngineOpt = typer.Option(None, "--engine", help="The engine for both models: onemodel "
                         "(default), onnxruntime or one registered (group onemodel.engines).")
EnginesOpt = typer.Option(None, "--engines", metavar="E1,E2", help="Run A with E1 and B (or A "
                          "again) with E2; implies --run; floats within Clause 11.5 defaults.")
AtolOpt = typer.Option(None, "--atol", help="Absolute tolerance of float outputs (with --run).")
RtolOpt = typer.Option(None, "--rtol", help="Relative tolerance of float outputs, relative to "
                       "B's value.")
UlpOpt = typer.Option(None, "--ulp", help="Float elements at most this many representable "
                      "values apart are within tolerance.")
TolOpt = typer.Option(None, "--tol", metavar="NAME:atol=X,rtol=Y,ulp=N", help="Tolerance of one "
                      "output (repeatable; unset fields from --atol/--rtol/--ulp).")


@dataclass
class RunFlags:
    """The run flags parsed: ``pair`` (``--engines``, or None), ``engines`` (the engine of each
    side), ``tolerances`` (:class:`onemodel.compare.Tolerances` or None), ``dims``, ``shapes``
    (``--dim``, ``--shape``), ``seed``, and ``run``: whether the models run (``--run``, or
    implied by ``--engines`` or ``--bisect``)."""

    pair: Optional[tuple[str, str]]
    engines: tuple[str, str]
    tolerances: object
    dims: dict
    shapes: dict
    seed: int
    run: bool


def run_flags(b: Optional[str], *, run: bool, seed: int, dim, shape, engine, engines, atol,
              rtol, ulp, tol) -> RunFlags:
    """The flags of :data:`SeedOpt` ... :data:`TolOpt` and ``--shape`` parsed as ``verify``
    takes them (``b``: the second model or None; ``run``: ``--run`` or ``--bisect``); when the
    models run on onemodel's engine, the allocator is tuned as ``run`` does (the process is the
    command's). Raises UsageError as :func:`parse_engines` and :func:`parse_tolerances` do."""
    pair = parse_engines(engine, engines, b)
    tolerances = parse_tolerances(atol, rtol, ulp, tol, run=run or pair is not None,
                                  exact=pair is None or pair[0] == pair[1],
                                  cross_engine=pair is not None and pair[0] != pair[1])
    dims, shapes = _inputs_given(dim, shape)
    run = run or pair is not None
    sides = pair or ((engine or "onemodel"),) * 2
    if run and "onemodel" in sides:
        from ..evaluate.memory import tune_allocator
        tune_allocator()
    return RunFlags(pair, tuple(sides), tolerances, dims, shapes, seed, run)


def parse_engines(engine: Optional[str], engines: Optional[str],
                  b: Optional[str]) -> Optional[tuple[str, str]]:
    """``--engines E1,E2`` as ``(E1, E2)``, or None when not given (then ``--engine``, default
    onemodel, runs both models). Refused: both flags; a value that is not two names; B omitted
    without ``--engines``. Unknown names are refused by the engine registry
    (:func:`onemodel.engines.get`: Unsupported, naming the known engines)."""
    if engines is None:
        if b is None:
            raise UsageError("B is needed unless --engines E1,E2 is given (then A runs on both)")
        return None
    if engine is not None:
        raise UsageError("choose one of --engine and --engines")
    names = [n.strip() for n in engines.split(",")]
    if len(names) != 2 or not all(names):
        from ..engines import names as known
        raise UsageError(f"--engines {engines!r} is not E1,E2 (two of {', '.join(known())})")
    return names[0], names[1]


def _flag_value(flag: str, value, integer: bool = False):
    if value is None:
        return None
    if integer:
        if value < 0:
            raise UsageError(f"{flag} {value}: not an integer >= 0")
    elif not math.isfinite(value) or value < 0:
        raise UsageError(f"{flag} {value}: not a finite number >= 0")
    return value


def parse_tolerances(atol: Optional[float], rtol: Optional[float], ulp: Optional[int],
                     tol: Optional[list], *, run: bool, exact: bool,
                     needs: str = "--run (or --engines)", cross_engine: bool = False):
    """The :class:`onemodel.compare.Tolerances` of ``--atol``, ``--rtol``, ``--ulp`` and
    ``--tol NAME:...`` (repeatable, one per output), or None when none is given (the API's
    default: bit for bit on one engine, Clause 11.5 across two). ``exact``: one engine runs
    both sides, so outputs without an explicit tolerance are compared bit for bit;
    ``cross_engine``: two engines, so they get the cross-engine defaults
    (:data:`onemodel.compare.CROSS_ENGINE`). ``needs``:
    the flag that makes outputs to compare, named when ``run`` is false (``run --test-data``).

    Raises:
        UsageError: a negative or non-finite value, a malformed ``--tol``, one output given
            twice, or any of them without ``run`` (``needs``: ``--run`` or ``--engines``).
    """
    from ..compare import Tolerance, Tolerances, parse_tolerance

    given = [f for f, v in (("--atol", atol), ("--rtol", rtol), ("--ulp", ulp)) if v is not None]
    if tol:
        given.append("--tol")
    if not given:
        return None
    if not run:
        raise UsageError(f"{given[0]} compares outputs: give {needs}")
    default = Tolerance(atol=_flag_value("--atol", atol), rtol=_flag_value("--rtol", rtol),
                        ulp=_flag_value("--ulp", ulp, integer=True))
    per_output = {}
    for item in tol or []:
        name, t = parse_tolerance(item)
        if name in per_output:
            raise UsageError(f"--tol {name}: given twice")
        per_output[name] = t
    return Tolerances(default, per_output, exact=exact, cross_engine=cross_engine)


def _engines_text(report, a: str, b: Optional[str]) -> str:
    ea, eb = report.engines
    if b is None:
        return f"{a} on {ea} and {eb}"
    return f"{a} and {b}" + (f" ({ea} vs {eb})" if ea != eb else "")


def _shown(d) -> str:
    """One difference as the text report prints it: the ``run`` one (B could not run on A's
    inputs) says the run did not happen, ``run: not run: ...``."""
    return printable(f"run: not run: {d.message}" if d.path == "run" else str(d))


def print_report(out, report, a: str, b: Optional[str], *, quiet: bool, limit: int) -> None:
    """The text report (docs/cli.md, Comparing runs): ``equal: ...`` or ``different: FIRST``
    and the other output differences and the ``run: not run: ...`` line when B could not run
    (always, even past the models' differences; judged by the outputs: ``within tolerance:
    ...``, the models' own differences on a ``models differ:`` line), then unless ``quiet`` one
    line per output compared."""
    def count(n: int, noun: str) -> str:
        return f"{n} {noun}{'' if n == 1 else 's'}"

    names = _engines_text(report, a, b) if report.engines else f"{a} and {b}"
    n = len(report.outputs_compared)
    bits = all(c.tolerance is None for c in report.comparisons)
    outputs = f"{count(n, 'output')} {'bit-identical' if bits else 'within tolerance'}"
    run_diffs = [d for d in report.differences if d not in report.structure]
    shown_outputs = set()
    if report.by_outputs:
        if report.equal:
            if not quiet:
                out.line(f"{'equal' if bits else 'within tolerance'}: {names}, {outputs}")
        else:
            out.line(f"different: {_shown(run_diffs[0])}")
            for d in run_diffs[1:]:
                out.line(f"  {_shown(d)}")
            shown_outputs = {d.path for d in run_diffs}
        if report.structure and not quiet:
            more = len(report.structure) - 1
            capped = len(report.structure) >= limit
            extra = (f" ({'at least ' if capped else ''}{count(more, 'more difference')})"
                     if more else "")
            out.line(f"  models differ: {printable(str(report.structure[0]))}{extra}")
    elif report.equal:
        if not quiet:
            what = f", {outputs}" if report.engines is not None else ""
            if report.tensors_by_digest:
                what += (f" ({count(report.tensors_by_digest, 'tensor')} by their recorded "
                         "digests)")
            out.line(f"equal: {names}{what}")
    else:
        first = report.first
        out.line(f"different: {_shown(first)}")
        # the outputs that differ when run, and the run that could not happen, are named even
        # when a structural difference is first (however many there are)
        listed = [first] + [d for d in report.differences[1:]
                            if d.path.startswith("outputs") or d.path == "run"]
        for d in listed[1:]:
            out.line(f"  {_shown(d)}")
        shown_outputs = {d.path for d in listed}
        if len(report.differences) > len(listed) and not quiet:
            more = len(report.differences) - len(listed)
            capped = len(report.differences) >= limit
            out.line(f"  ({'at least ' if capped else ''}{count(more, 'more difference')})")
    if quiet:
        return
    for c in report.comparisons:  # every output; the ones out of tolerance are listed above
        path = f"outputs[{c.name!r}]"
        if path not in shown_outputs:
            line = str(c)
            out.line(printable(f"  {path}: {line[len(c.name) + 2:]}"))


def report_json(report, a: str, b: Optional[str], limit: int) -> dict:
    """``verify --json``: one object, the same keys every time (docs/cli.md, Comparing runs).
    Numbers that JSON cannot hold (NaN, infinities) are the strings ``"nan"``, ``"inf"``,
    ``"-inf"``."""
    return {
        "a": a,
        "b": b,
        "equal": report.equal,
        "judged_by": "outputs" if report.by_outputs else "models and outputs",
        "models_equal": None if b is None else not report.structure,
        "engines": list(report.engines) if report.engines else None,
        "tolerances": None if report.tolerances is None else report.tolerances.to_json(),
        "differences": [{"path": d.path, "message": d.message} for d in report.differences],
        "differences_capped": len(report.differences) >= limit,
        "run_error": report.run_error,
        "tensors_by_digest": report.tensors_by_digest,
        "outputs": [c.to_json() for c in report.comparisons],
    }
