"""How ``onemodel check`` prints a :class:`~.finding.Report`: text grouped by code and counted,
and SARIF 2.1.0 for code-scanning tools (the ``--json`` document is ``Report.as_dict``); and
the JSON and SARIF documents of a file that cannot be read at all."""

from __future__ import annotations

import re

from .codes import CODES
from .finding import Report

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}

#: The run properties of the SARIF log of a zstd-compressed model (``model.onnx.zst``): its
#: byte offsets count in the decompressed bytes, the model the ``.zst`` holds.
DECOMPRESSED_OFFSETS = {
    "byteOffsets": "decompressed",
    "byteOffsetsNote": "the model file is zstd-compressed: every region.byteOffset counts in "
                       "its decompressed bytes (the model it holds), not in the file itself"}


def is_compressed(source: str | None) -> bool:
    """Whether ``source`` (a path or URL) names a file the readers decompress first (the
    ``.zst`` suffix, as :func:`onemodel.storage.open_source` tells it), so that the findings'
    byte offsets are offsets in its decompressed bytes."""
    from ..storage.compressed import has_zstd_suffix
    from ..storage.place import name_of_url

    return source is not None and has_zstd_suffix(name_of_url(source))


#: The findings of a group the text names besides the first (subject and path each).
GROUP_SHOWN = 3

#: A name as :func:`onemodel.errors.quote` writes it in a message (``'w'``, ``"it's"``, a cut one
#: with its length): the first one is the finding's subject (``tensor 'w', ...``).
_QUOTED = re.compile(r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")(?: \(\d+ characters\))?""")


def _subject(message: str) -> tuple[str, str | None]:
    """``(template, subject)``: the message with its first quoted name replaced by a marker,
    and that name (``None`` and the message itself when it quotes none)."""
    m = _QUOTED.search(message)
    if m is None:
        return message, None
    return message[:m.start()] + "\x00" + message[m.end():], m.group(0)


def _groups(findings: list) -> list[list]:
    """``findings`` (one code's, in the order found) in groups of the same severity and the
    same message but for its subject, each group where its first finding was."""
    groups: dict = {}
    for f in findings:
        groups.setdefault((f.severity, _subject(f.message)[0]), []).append(f)
    return list(groups.values())


def _where(f) -> str:
    at = f" at offset {f.offset:#x}" if f.offset is not None else ""
    return f"{f.path}{at}: " if f.path else (f"{at.strip()}: " if at else "")


def text_lines(report: Report, shown_source: str) -> list[str]:
    """The lines of the text report: a header per code with its count and description, one
    line per finding (path, offset, message), then the counts.

    Findings of one code whose messages differ only in their subject (the first quoted name:
    ``tensor 'w0', external data location 'm.data': ... does not exist`` for each of 28
    tensors), or not at all, are one line: the first finding, then ``(and 27 more alike:
    'w1' at graph.initializer[1], ... (:data:`GROUP_SHOWN`), …; --json lists every one)``.
    ``--json`` and ``--sarif`` keep every finding."""
    lines = []
    for code, fs in report.by_code().items():
        c = CODES[code]
        lines.append(f"{code} {fs[0].severity} ({len(fs)}): {c.summary} [{c.clause}]")
        for group in _groups(fs):
            first, rest = group[0], group[1:]
            line = f"  {_where(first)}{first.message}"
            if rest:
                shown = []
                for f in rest[:GROUP_SHOWN]:
                    subject = _subject(f.message)[1]
                    shown.append(" at ".join(filter(None, [subject, f.path])) or "?")
                more = ", …" if len(rest) > GROUP_SHOWN else ""
                line += (f" (and {len(rest)} more alike: {', '.join(shown)}{more}; --json "
                         f"lists every one)")
            lines.append(line)
    n = report.counts
    verdict = "ok" if report.ok else "not valid"
    lines.append(f"{shown_source}: {verdict}: {n['error']} error(s), {n['warning']} warning(s), "
                 f"{n['info']} info")
    return lines


def unreadable(kind: str, message: str) -> dict:
    """The ``--json`` document of a file that cannot be read at all (exit status 2): no
    findings, zero counts, and ``"error": {"kind": kind, "message": message}``, ``kind`` one of
    the error kinds (``Malformed``, ``InvalidModel``, ``Unsupported``, ``Io``) and ``message``
    the error's line without its kind (the caller masks it)."""
    doc = Report().as_dict()
    doc["error"] = {"kind": kind, "message": message}
    return doc


def sarif_unreadable(kind: str, message: str, shown_source: str) -> dict:
    """The SARIF 2.1.0 log of a file that cannot be read at all: no rules or results, and
    ``invocations[0]`` with ``executionSuccessful: false`` and one error
    ``toolExecutionNotifications`` entry holding ``message`` (its descriptor id is ``kind``)."""
    log = sarif(Report(), shown_source)
    log["runs"][0]["invocations"] = [{
        "executionSuccessful": False,
        "toolExecutionNotifications": [{"level": "error", "message": {"text": message},
                                        "descriptor": {"id": kind}}]}]
    return log


def sarif(report: Report, shown_source: str) -> dict:
    """The report as a SARIF 2.1.0 log: one run, a rule per code of :data:`CODES` that was
    found, a result per finding (its logical location is the field path, its region the byte
    offset when there is one). For a ``.zst`` model (``report.source``, else
    ``shown_source``) the run's ``properties`` are :data:`DECOMPRESSED_OFFSETS`: the offsets
    are in the decompressed bytes."""
    from .. import __version__

    used = sorted({f.code for f in report.findings})
    rules = [{"id": c, "shortDescription": {"text": CODES[c].summary},
              "properties": {"clause": CODES[c].clause},
              "defaultConfiguration": {"level": _LEVEL[CODES[c].severity]}} for c in used]
    results = []
    for f in report.findings:
        loc: dict = {"physicalLocation": {"artifactLocation": {"uri": shown_source}}}
        if f.offset is not None:
            loc["physicalLocation"]["region"] = {"byteOffset": f.offset}
        if f.path:
            loc["logicalLocations"] = [{"fullyQualifiedName": f.path}]
        results.append({"ruleId": f.code, "ruleIndex": used.index(f.code),
                        "level": _LEVEL[f.severity], "message": {"text": f.message},
                        "locations": [loc]})
    run = {"tool": {"driver": {"name": "onemodel", "version": __version__, "rules": rules}},
           "results": results}
    if is_compressed(report.source or shown_source):
        run["properties"] = dict(DECOMPRESSED_OFFSETS)
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
