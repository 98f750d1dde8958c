"""Proving an opset conversion by running it: ``onemodel convert IN OUT --opset N --verify-run``.

:func:`verify_conversion` runs the original model and the converted one on the same generated
inputs (:func:`onemodel.evaluate.random_inputs`: ``seed``, ``dims``, ``shapes``, as ``onemodel
run --random`` makes them) and compares their graph outputs with
:func:`onemodel.verify.run_and_compare`, within the Part 1, Clause 11.5 tolerances
(:class:`onemodel.compare.Tolerances` defaults, :mod:`onemodel.tolerances`): a conversion may
compute a value another way (a decomposition, an axis moved), so bit for bit is not asked.
When an output differs, :func:`onemodel.bisect.bisect` names the first node of the original,
in topological order, whose outputs differ from the converted model's values of the same names:
an adapter may rename or insert nodes, so only the values both models have are compared (the
graph outputs, whose names a conversion keeps, then every intermediate value of the same name;
the others are listed as unmatched).

Nothing here compares or generates values itself: the comparison is :mod:`onemodel.compare`'s,
the inputs :mod:`onemodel.evaluate.inputs`', the runs those of the engines of
:mod:`onemodel.engines`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import OneModelError
from ..ir import Model

#: The phrase :func:`onemodel.verify.run_and_compare` starts a failed second run with, and the
#: one a conversion's report says instead.
_SECOND = "the second model cannot run on the first one's inputs"
_CONVERTED = "the converted model cannot run on the original's inputs"


@dataclass
class RunVerification:
    """What :func:`verify_conversion` found.

    Attributes:
        engine: the engine both models ran with.
        tolerances: the :class:`onemodel.compare.Tolerances` values were compared with.
        inputs: the generated inputs, name -> value (ndarrays: their types and shapes are what
            ``--dim`` and ``--shape`` chose).
        outputs_compared: the graph outputs both runs gave, in the original's order.
        comparisons: one :class:`onemodel.compare.ValueComparison` per output compared.
        differences: :class:`onemodel.verify.Difference` of each output out of tolerance
            (``outputs['y']``), of the output names (``outputs``), or ``run`` when the converted
            model could not run on the original's inputs; empty when the conversion computes
            the same.
        bisect: the :class:`onemodel.bisect.BisectReport` of the original against the converted
            model when an output differs (None when none does, or when it could not be made:
            ``bisect_error`` says why).
        bisect_error: why bisect could not run, or None.
    """

    engine: str
    tolerances: Any
    inputs: dict = field(default_factory=dict)
    outputs_compared: list = field(default_factory=list)
    comparisons: list = field(default_factory=list)
    differences: list = field(default_factory=list)
    bisect: Any = None
    bisect_error: str | None = None

    @property
    def equal(self) -> bool:
        """True when every graph output is within tolerance."""
        return not self.differences

    def __bool__(self) -> bool:
        return self.equal

    @property
    def first_node(self):
        """The first differing node of the original (a :class:`onemodel.bisect.NodeReport`:
        ``path``, ``op_type``, ``name``, ``verdict``), or None."""
        return None if self.bisect is None else self.bisect.first

    def message(self) -> str:
        """One line: what differs and the first differing node of the original, e.g.
        ``the converted model differs from the original: outputs['z']: max abs diff 3 ...;
        first differing node graph.nodes[1] (ReduceSum 'sum'), 2 of 3 in topological order:
        the node itself differs``. Empty when :attr:`equal`."""
        if self.equal:
            return ""
        d = self.differences[0]
        if d.path == "run":
            return d.message.replace(_SECOND, _CONVERTED, 1)
        more = len(self.differences) - 1
        text = (f"the converted model differs from the original: {d}"
                + (f" (and {more} more output{'s' if more != 1 else ''})" if more else ""))
        node = self.first_node
        if node is not None:
            from ..bisect import verdict_line
            text += (f"; first differing node {node.label}, {node.position + 1} of "
                     f"{self.bisect.nodes} in topological order: {verdict_line(node)}")
        elif self.bisect is not None:
            text += "; no node's outputs differ by name (the values differ only under names "\
                    "the converted model does not keep)"
        elif self.bisect_error is not None:
            text += f"; bisect not run: {self.bisect_error}"
        return " ".join(text.split())


def verify_conversion(original: Model, converted: Model, *, seed: int = 0,
                      dims: dict[str, int] | None = None,
                      shapes: dict[str, tuple] | None = None, engine: str = "onemodel",
                      tolerances=None) -> RunVerification:
    """Run ``original`` and ``converted`` (e.g. :func:`onemodel.convert_opset`'s result) on the
    same generated inputs with ``engine`` and compare their graph outputs within the Clause 11.5
    tolerances; when one differs, name the first differing node of ``original``.

    Args:
        original, converted: the models (``converted`` takes the inputs ``original`` declares:
            a conversion keeps the graph's input and output names).
        seed, dims, shapes: as for :func:`onemodel.evaluate.random_inputs` (of ``original``):
            ``dims`` the value of each dimension variable (1 when not given), ``shapes`` the
            whole shape of an input.
        engine: a name of :func:`onemodel.engines.names` (``onemodel``, ``onnxruntime`` or a
            registered one); both models run with it.
        tolerances: a :class:`onemodel.compare.Tolerances` (default: the Clause 11.5 ones of
            each element type, :func:`onemodel.tolerances.tolerance`; integers, bool and strings
            exactly).
    Returns:
        a :class:`RunVerification` (``equal``, ``differences``, ``first_node``, ``message()``).
        The converted model failing on the original's inputs is its ``run`` difference, not an
        error.
    Raises:
        UsageError: ``dims`` or ``shapes`` that do not fit ``original``'s inputs.
        EvaluationError: ``original`` fails on the generated inputs (with a note naming the
            inputs and axes to set); OneModelError when ``original`` cannot be run at all
            (an operator without a kernel: UnsupportedError).
        UnsupportedError: an unknown engine, or one that cannot run here (onnxruntime not
            installed).
    """
    from ..bisect import bisect
    from ..compare import Tolerances
    from ..evaluate import random_inputs
    from ..verify import run_and_compare

    tol = Tolerances() if tolerances is None else tolerances
    dims = dict(dims or {})
    ran = run_and_compare(original, converted, seed=seed, dims=dims, shapes=shapes,
                          engines=(engine, engine), tolerances=tol)
    inputs = random_inputs(original, seed=seed, dims=dims, shapes=shapes)
    report = RunVerification(engine=engine, tolerances=tol, inputs=inputs,
                             outputs_compared=list(ran.names),
                             comparisons=list(ran.comparisons),
                             differences=list(ran.differences))
    if report.equal or any(d.path == "run" for d in report.differences):
        return report
    try:
        report.bisect = bisect(original, converted, inputs, engines=(engine, engine),
                               tolerances=tol)
    except OneModelError as e:  # the outputs' comparison stands; bisect's failure is one
        # phrase of the report (an InternalError, a bug, goes on up)
        report.bisect_error = " ".join(str(e).removeprefix(f"{e.kind}: ").split())
    return report
