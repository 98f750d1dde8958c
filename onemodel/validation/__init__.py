"""``onemodel check``: a validating consumer (ONNX Part 1, Clause 10) that reports every problem
of a model at once, each with a stable code, a severity, the field path in the file's own terms,
the byte offset where there is one and the clause.

    >>> import onemodel
    >>> report = onemodel.check("model.onnx")
    >>> report.ok, report.counts
    (True, {'error': 0, 'warning': 0, 'info': 0, 'total': 0})

Modules: :mod:`.finding` (Finding, Report), :mod:`.codes` (the registry docs/check.md is
generated from), :mod:`.reading` (reading with the tensor checks collected), :mod:`.structure`
(Clauses 5, 7, 8.4), :mod:`.paths` (paths in the file's terms), :mod:`.run` (:func:`check` and
the list of check families), :mod:`.sarif`, :mod:`.docs`.

``onemodel.check``, ``onemodel.Finding`` and ``onemodel.Report`` are this package's, imported on
first use (``import onemodel`` does not import the validator).
"""

from __future__ import annotations

from .codes import CODES, Code
from .finding import Finding, Report
from .run import check

__all__ = ["check", "Finding", "Report", "CODES", "Code"]
