"""What ``onemodel check`` reports: a :class:`Finding` per problem and the :class:`Report` of a
run."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import printable

#: Severities, most severe first.
SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One problem of a model.

    Attributes:
        code: the stable code (``"OM101"``), one of :data:`onemodel.validation.codes.CODES`.
        severity: ``"error"``, ``"warning"`` or ``"info"`` (the code's, or ``"error"`` for a
            warning under ``strict``).
        message: what is wrong, one line.
        path: the field in the file's own terms (ONNX: ``graph.node[3].input[1]``, Annex B
            field names; OneModel: ``manifest.graph.nodes[3].inputs[1]``; an in-memory model:
            the :mod:`onemodel.ir` field names), or ``None``.
        offset: the byte offset in the file where there is one (a tensor's TensorProto), else
            ``None``.
        clause: where the rule is stated (``"ONNX Part 1, Clause 7.5"``).

    ``message`` and ``path`` are made :func:`~onemodel.errors.printable` when the finding is
    made: a name, op_type or domain of the model holding an escape code or a newline is written
    ``\\x1b``, ``\\n`` in the text report, the JSON and the SARIF log alike.
    """

    code: str
    severity: str
    message: str
    path: str | None = None
    offset: int | None = None
    clause: str = ""

    def __post_init__(self):
        object.__setattr__(self, "message", printable(self.message))
        if self.path is not None:
            object.__setattr__(self, "path", printable(self.path))

    def as_dict(self) -> dict:
        """The finding as the JSON object of ``onemodel check --json``."""
        return {"code": self.code, "severity": self.severity, "message": self.message,
                "path": self.path, "offset": self.offset, "clause": self.clause}

    def __str__(self) -> str:
        where = f" [{self.path}]" if self.path else ""
        at = f" at offset {self.offset:#x}" if self.offset is not None else ""
        return f"{self.code} {self.severity}: {self.message}{where}{at}"


@dataclass
class Report:
    """The findings of one check, in the order they were found.

    ``errors``, ``warnings`` and ``infos`` are the findings of each severity; ``ok`` is true
    when there is no error (warnings allowed); ``counts`` gives ``{"error": n, "warning": n,
    "info": n, "total": n}``; ``by_code()`` groups them. ``source`` is the file checked (a
    URL as given; masked only where it is shown) or ``None`` for a model in memory.
    """

    findings: list[Finding] = field(default_factory=list)
    source: str | None = None

    def _of(self, severity: str) -> list[Finding]:
        return [f for f in self.findings if f.severity == severity]

    @property
    def errors(self) -> list[Finding]:
        return self._of("error")

    @property
    def warnings(self) -> list[Finding]:
        return self._of("warning")

    @property
    def infos(self) -> list[Finding]:
        return self._of("info")

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def __bool__(self) -> bool:
        """``if report:`` reads as ``if report.ok:`` (no error), not "has findings"."""
        return self.ok

    @property
    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in SEVERITIES}
        for f in self.findings:
            out[f.severity] += 1
        out["total"] = len(self.findings)
        return out

    def by_code(self) -> dict[str, list[Finding]]:
        """``{code: findings}`` in code order."""
        out: dict[str, list[Finding]] = {}
        for f in sorted(self.findings, key=lambda f: f.code):
            out.setdefault(f.code, []).append(f)
        return out

    def as_dict(self) -> dict:
        """``{"findings": [...], "counts": {...}}``, the document of ``onemodel check --json``."""
        return {"findings": [f.as_dict() for f in self.findings], "counts": self.counts}
