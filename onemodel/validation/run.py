"""``onemodel.check``: read a model's structure, run every check family, filter, report."""

from __future__ import annotations

import re

from ..ir.walk import nesting_error
from .codes import CODES, finding, matches
from .digests import check_digests
from .finding import Finding, Report
from .inferred import check_inferred
from .operators import check_operators
from .paths import file_path
from .structure import check_structure
from .types import check_types

#: The check families run on a model that was read, in order: each is
#: ``family(model, context) -> list of Finding`` with paths in IR field names (or already in the
#: file's terms). Operator checks against onemodel.schemas (ONNX Part 1, Clause 10.4) and type
#: checks (Clause 10.3) join this list as families of their own.
FAMILIES = [
    lambda model, ctx: check_structure(model, prefix=ctx["prefix"],
                                       graph_paths=ctx["graph_paths"],
                                       sorted_required=ctx["fmt"] != "onemodel", ctx=ctx),
    check_operators,   # OM3xx against onemodel.schemas (Clause 10.4)
    check_types,       # OM4xx stated types (Clause 10.3), after check_operators: shares its walk
    check_inferred,    # OM41x shape inference under --full (Clauses 9.4, 10.4)
    check_digests,     # OM207 recorded content digests under --full
]


def check(path_or_model, *, full: bool = False, strict: bool = False, select=None,
          ignore=None, storage_options: dict | None = None,
          allow_outside: bool = False, operators=None) -> Report:
    """Check a model and report every problem found (ONNX Part 1, Clause 10: a validating
    consumer that reports all conditions, not only the first).

    Args:
        path_or_model: a local path or URL of an ONNX or OneModel file, or an
            :class:`onemodel.ir.Model` in memory (its paths are in IR field names). A file is
            read for its structure only: tensor bytes are checked for length and reference,
            never loaded.
        full: also verify external data checksums (reading the data files) and check the
            types and shapes of every intermediate value by shape inference (Clause 9.4):
            each contradiction is an ``OM410`` error, operators without an inference rule one
            ``OM411`` info (:mod:`.inferred`).
        strict: warnings count as errors (their severity becomes ``error``).
        select: codes or code prefixes (``["OM1"]``, or one comma-separated string
            ``"OM1,OM3"`` as the command line takes them) to report; default all.
        ignore: codes or code prefixes not to report (the same forms).
        storage_options: fsspec options for a URL. allow_outside: resolve external data
            outside the model's directory (Clause 15.3; never the default).
        operators: :class:`onemodel.operators.Operator` definitions of custom operators: their
            nodes are checked against these signatures (OM3xx) and inferred by their rules,
            instead of being reported unchecked (OM304).
    Returns:
        a :class:`Report`; ``report.ok`` when there is no error. Codes are listed in
        :data:`onemodel.validation.codes.CODES` and docs/check.md.
    Raises:
        MalformedError or IoError when the file cannot be read at all; UnsupportedError when
        its format cannot be told or decoding hits a limit; UsageError for a code in ``select``
        or ``ignore`` that matches no code, or an ``operators`` item that is not an Operator.
    """
    from ..operators.custom import using

    with using(operators):
        return check_and_model(path_or_model, full=full, strict=strict, select=select,
                               ignore=ignore, storage_options=storage_options,
                               allow_outside=allow_outside)[0]


def check_and_model(path_or_model, *, full: bool = False, strict: bool = False, select=None,
                    ignore=None, storage_options: dict | None = None,
                    allow_outside: bool = False, block_size: int = 64 * 1024,
                    close: bool = True):
    """:func:`check`, and the model it read (closed unless ``close`` is False, when the caller
    closes it: ``onemodel scan`` still reads the sizes of its files; ``None`` when none could
    be made): the command line keeps it until the process ends, so that its records are not
    freed one by one before the process exits anyway. ``block_size``: the blocks a remote ONNX
    file's structure is read in (``onemodel scan`` reads in smaller ones)."""
    from ..ir import Model
    from ..storage import check_storage_options

    check_storage_options(storage_options, path_or_model)
    select, ignore = _codes(select), _codes(ignore)
    _known(select, "select")
    _known(ignore, "ignore")
    if isinstance(path_or_model, Model):
        model, found, fmt, graph_paths, source = path_or_model, [], None, {}, None
        close = False  # (the caller's model)
    else:
        from .reading import read_for_check
        model, found, fmt, graph_paths = read_for_check(
            path_or_model, storage_options=storage_options, allow_outside=allow_outside,
            full=full, block_size=block_size)
        source = getattr(model, "source", None) or str(path_or_model)
    try:
        nested = nesting_error(model) if model is not None else None
        if nested is not None:  # the families walk graphs recursively: the one finding
            found.append(finding("OM119", nested.message, nested.path))
        elif model is not None:
            ctx = {"fmt": fmt, "prefix": "manifest." if fmt == "onemodel" else "",
                   "graph_paths": graph_paths, "full": full}
            for family in FAMILIES:
                for f in family(model, ctx):
                    found.append(_in_file_terms(model, f, fmt))
    finally:
        if close and model is not None:
            model.close()
    out = []
    for f in found:
        if select and not matches(f.code, select):
            continue
        if ignore and matches(f.code, ignore):
            continue
        if strict and f.severity == "warning":
            f = Finding(f.code, "error", f.message, f.path, f.offset, f.clause)
        out.append(f)
    return Report(out, source), model


#: A message that names an earlier field holds ``(first at PATH)`` (OM104, OM115, OM116,
#: OM120), PATH in IR field names like the finding's own path.
_FIRST_AT = re.compile(r"\(first at ([A-Za-z0-9_.\[\]]+)\)")


def _in_file_terms(model, f: Finding, fmt) -> Finding:
    """``f`` with its path, and the ``(first at PATH)`` its message holds, in the file's
    terms (:func:`file_path`), so that the message names a field as the path does."""
    path = file_path(model, f.path, fmt)
    message = f.message
    m = _FIRST_AT.search(message)
    if m:
        message = (message[:m.start(1)] + (file_path(model, m.group(1), fmt) or m.group(1))
                   + message[m.end(1):])
    if path == f.path and message == f.message:
        return f
    return Finding(f.code, f.severity, message, path, f.offset, f.clause)


def _codes(patterns):
    """``patterns`` as a list: a string is one comma-separated list (``"OM1,OM3"``), not a
    sequence of one-letter patterns."""
    if isinstance(patterns, str):
        return [p for p in patterns.split(",") if p.strip()]
    return patterns


def _known(patterns, what: str) -> None:
    from ..errors import UsageError

    for p in patterns or ():
        p = p.strip().upper()
        if p and not any(c.startswith(p) for c in CODES):
            raise UsageError(f"{what}: {p!r} matches no code (see docs/check.md)")
