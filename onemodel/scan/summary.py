"""The summary at the end of a scan: counts by format, producer, opset and validity, and the
slowest and largest models (docs/scan.md#summary)."""

from __future__ import annotations

from collections import Counter

#: How many of the slowest and of the largest models a summary lists.
TOP = 5


def _validity(row: dict) -> str:
    """``unreadable`` (an error kind), ``invalid`` (check errors), ``valid`` (checked, no
    error) or ``read`` (read, not checked)."""
    if row.get("error_kind") is not None:
        return "unreadable"
    if row.get("check_errors") is None:
        return "read"
    return "invalid" if row["check_errors"] else "valid"


def summarize_rows(rows: list[dict], top: int = TOP) -> dict:
    """A JSON-ready summary of ``rows``.

    Keys: ``models``; ``failed`` (rows with an error); ``errors`` ({kind: rows});
    ``formats``, ``producers`` ({name: rows}, ``""`` for none), ``opsets`` ({"domain:version":
    rows}, the default domain written ``ai.onnx``), ``validity`` ({unreadable, invalid, valid,
    read: rows}), ``check_codes`` ({code: findings}); ``bytes`` (model files) and ``seconds``
    in total; ``slowest`` and ``largest``: the ``top`` rows by seconds and by bytes
    (``{"source", "seconds"}``, ``{"source", "bytes"}``; ties by source).
    """
    def counts(values) -> dict:
        c = Counter(values)
        return dict(sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0]))))

    ok = [r for r in rows if r.get("error_kind") is None]
    codes: Counter = Counter()
    for r in rows:
        codes.update(r.get("check_codes") or {})
    opsets = [f"{o['domain'] or 'ai.onnx'}:{o['version']}" for r in ok for o in r["opsets"] or ()]
    timed = [r for r in rows if r.get("seconds") is not None]
    sized = [r for r in ok if r.get("bytes") is not None]
    return {
        "models": len(rows),
        "failed": len(rows) - len(ok),
        "errors": counts(r["error_kind"] for r in rows if r.get("error_kind") is not None),
        "formats": counts(r["format"] for r in ok),
        "producers": counts(r["producer"] or "" for r in ok),
        "opsets": counts(opsets),
        "validity": counts(map(_validity, rows)),
        "check_codes": dict(sorted(codes.items())),
        "bytes": sum(r["bytes"] for r in sized),
        "seconds": round(sum(r["seconds"] for r in timed), 6),
        "slowest": [{"source": r["source"], "seconds": r["seconds"]}
                    for r in sorted(timed, key=lambda r: (-r["seconds"], r["source"]))[:top]],
        "largest": [{"source": r["source"], "bytes": r["bytes"]}
                    for r in sorted(sized, key=lambda r: (-r["bytes"], r["source"]))[:top]],
    }
