"""A scan's output: rows as JSON lines or Parquet, written so that an interrupted scan resumes
(docs/scan.md#resuming).

While a scan runs, each row is appended to a journal as one JSON line, written whole and then
flushed: a line is in the file only once the row is complete. The journal of ``OUT.jsonl`` is
``OUT.jsonl`` itself; that of ``OUT.parquet`` is ``OUT.parquet.rows.jsonl`` beside it. At the
end, :meth:`Catalog.finish` writes the output with every row sorted by source, atomically (a
temporary file in the same directory renamed over it), and removes a Parquet journal.

Resuming reads the output's rows (a Parquet file and its journal, or the JSON lines file), drops
a last line that is not complete (a scan stopped mid-write), and cuts the journal back to its last
whole line before appending; the sources already there are not scanned again.

Parquet needs pyarrow (the ``parquet`` extra); its schema is :func:`parquet_schema`, the same
fields and values as the JSON lines (a map is a Parquet map, read back as a dict).
"""

from __future__ import annotations

import json
import os

from ..errors import IoError, MalformedError, UnsupportedError, UsageError
from .row import FIELDS

#: The suffix of a Parquet output's journal.
JOURNAL_SUFFIX = ".rows.jsonl"


def output_format(path: str) -> str:
    """``"parquet"`` for a path ending in ``.parquet``, ``"jsonl"`` for ``.jsonl`` or
    ``.json``; UsageError otherwise."""
    lower = path.lower()
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith((".jsonl", ".json")):
        return "jsonl"
    raise UsageError(f"the catalog {path}: JSON lines (.jsonl) or Parquet (.parquet), "
                     "by its suffix")


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise UnsupportedError("Parquet output needs pyarrow: pip install "
                               "'onemodel-onnx[parquet]'") from None
    return pyarrow


def parquet_schema():
    """The Parquet schema of rows (pyarrow): one column per field of
    :data:`onemodel.scan.row.FIELDS`."""
    pa = _pyarrow()
    i64, s = pa.int64(), pa.string()
    types = {
        "schema": i64, "source": s, "format": s, "bytes": i64, "data_bytes": i64,
        "ir_version": i64,
        "opsets": pa.list_(pa.struct([("domain", s), ("version", i64)])),
        "producer": s, "producer_version": s, "nodes": i64, "ops": pa.map_(s, i64),
        "initializers": i64, "parameters": i64, "weight_bytes": i64,
        "by_dtype": pa.map_(s, pa.struct([("tensors", i64), ("parameters", i64),
                                          ("bytes", i64)])),
        "tensor_count": i64, "tensor_bytes": i64, "external_tensors": i64, "digest": s,
        "tensors": pa.list_(pa.struct([("path", s), ("name", s), ("digest", s),
                                       ("dtype", s), ("bytes", i64)])),
        "check_errors": i64, "check_warnings": i64, "check_infos": i64,
        "check_codes": pa.map_(s, i64), "output": s, "output_error": s, "error_kind": s,
        "error": s, "read_bytes": i64, "seconds": pa.float64(),
    }
    return pa.schema([(name, types[name]) for name in FIELDS])


def _maps(schema) -> set[str]:
    pa = _pyarrow()
    return {f.name for f in schema if pa.types.is_map(f.type)}


def _from_arrow(row: dict, maps: set[str]) -> dict:
    """A row as pyarrow gives it back, with its maps as dicts again (maps nested in maps do not
    occur)."""
    for name in maps:
        if row.get(name) is not None:
            row[name] = dict(row[name])
    return row


def read_jsonl(path: str) -> list[dict]:
    """The rows of a JSON lines file; a last line without its newline (a write stopped
    half-way) is ignored, and so is one that is not a JSON object. IoError when it cannot be
    read; a missing file has no rows."""
    return _read_lines(path)[0]


def _read_lines(path: str, *, strict: bool = False) -> tuple[list[dict], int]:
    """``(rows, length)``: the complete rows of the JSON lines file and the length of the file
    up to the end of its last complete line. ``strict`` (a file a scan will append to): every
    complete line must be a row of this schema, and a torn last line the start of one (a scan
    writes ``{"schema":`` first), else UsageError: the file is not a scan's catalog."""
    from .row import SCHEMA_VERSION

    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return [], 0
    except OSError as e:
        raise IoError(f"cannot read the catalog: {e.strerror}", source=path) from None
    end = data.rfind(b"\n") + 1
    rows = []
    for number, line in enumerate(data[:end].splitlines(), 1):
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict) and isinstance(row.get("source"), str):
            if not strict or row.get("schema") == SCHEMA_VERSION:
                rows.append(row)
                continue
        if strict and line.strip():
            raise UsageError(f"{path} is not the catalog of a scan (line {number} is not a row "
                             f"of schema {SCHEMA_VERSION}): only a scan's own output is resumed")
    tail = data[end:]
    if strict and tail.strip() and not b'{"schema":'.startswith(tail[:10]) and \
            not tail.startswith(b'{"schema":'):
        raise UsageError(f"{path} is not the catalog of a scan (its last line is not a row): "
                         "only a scan's own output is resumed")
    return rows, end


def read_parquet(path: str) -> list[dict]:
    """The rows of a Parquet catalog (maps as dicts); a missing file has none. MalformedError
    when the file is not Parquet, IoError when it cannot be read."""
    pa = _pyarrow()
    try:
        table = pa.parquet.read_table(path)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise IoError(f"cannot read the catalog: {e}", source=path) from None
    except pa.lib.ArrowException as e:  # (not Parquet: no magic bytes, a torn footer)
        raise MalformedError(f"the catalog is not a Parquet file: {e}", source=path) from None
    maps = _maps(table.schema)
    return [_from_arrow(r, maps) for r in table.to_pylist()]


def read_catalog(path: str) -> list[dict]:
    """The rows of a catalog (JSON lines or Parquet, by its suffix; a Parquet output's journal
    included), one per source (the last one written), sorted by source."""
    if output_format(path) == "parquet":
        rows = read_parquet(path) + read_jsonl(path + JOURNAL_SUFFIX)
    else:
        rows = read_jsonl(path)
    by_source = {r["source"]: r for r in rows}
    return [by_source[k] for k in sorted(by_source)]


def write_parquet(rows: list[dict], path: str) -> None:
    """``rows`` as the Parquet file ``path``, atomically."""
    pa = _pyarrow()
    table = pa.Table.from_pylist([{k: r.get(k) for k in FIELDS} for r in rows],
                                 schema=parquet_schema())
    _atomic(path, lambda tmp: pa.parquet.write_table(table, tmp))


def write_jsonl(rows: list[dict], path: str) -> None:
    """``rows`` as the JSON lines file ``path``, atomically."""
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(_line(r))
    _atomic(path, write)


def _line(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


def _atomic(path: str, write) -> None:
    """``write(tmp)`` of a temporary file beside ``path``, renamed over ``path``."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise IoError(f"cannot write the catalog: {e.strerror or e}", source=path) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _parquet_rows_to_resume(path: str) -> list[dict]:
    """The rows of the Parquet catalog ``path`` a scan resumes; UsageError when it is not a
    Parquet file or holds rows of another schema (a file that is not a catalog is not
    replaced)."""
    from .row import SCHEMA_VERSION

    why = "it is not a Parquet file"
    try:
        rows = read_parquet(path)
    except MalformedError:
        rows = None
    else:
        bad = next((n for n, r in enumerate(rows, 1) if not isinstance(r.get("source"), str)
                    or r.get("schema") != SCHEMA_VERSION), None)
        if bad is None:
            return rows
        why = f"row {bad} is not a row of schema {SCHEMA_VERSION}"
    raise UsageError(f"{path} is not the catalog of a scan ({why}): only a scan's own output "
                     "is resumed")


def _refuse_replacing(path: str, fmt: str, *, resume: bool = False) -> None:
    """UsageError when ``path`` exists, is not empty and is not a scan's catalog (``fmt``:
    ``"jsonl"``, whose first line a scan writes starting ``{"schema":``, or ``"parquet"``, with
    a catalog's columns): a scan replaces (or, ``resume``, appends to) its own earlier output,
    never another file (a model's external data file that happens to be called
    ``weights.jsonl``)."""
    try:
        if os.path.getsize(path) == 0:
            return
    except OSError:
        return  # (absent; one that cannot be read is refused when written)
    if fmt == "parquet":
        try:
            names = set(_pyarrow().parquet.read_schema(path).names)
        except Exception:  # noqa: BLE001 - any refusal of pyarrow: not a Parquet file
            why = "it is not a Parquet file"
        else:
            why = None if {"schema", "source"} <= names else "its columns are not a catalog's"
    else:
        try:
            with open(path, "rb") as f:
                head = f.read(10)
        except OSError as e:
            raise IoError(f"cannot read the catalog: {e.strerror}", source=path) from None
        why = None if head == b'{"schema":' else "its first line is not a row"
    if why is not None and resume:
        raise UsageError(f"{path} is not the catalog of a scan ({why}): only a scan's own "
                         "output is resumed")
    if why is not None:
        raise UsageError(f"{path} exists and is not the catalog of a scan ({why}): a scan "
                         "replaces only its own output; remove it or choose another path")


class Catalog:
    """The output of one scan: :meth:`add` each row as it completes, :meth:`finish` at the end.

    ``path``: a local ``.jsonl`` or ``.parquet`` file. ``resume``: keep the rows already there
    (:attr:`rows`) and append; otherwise an existing output is replaced when the scan finishes
    (and its journal started afresh). Nothing is written before the first row: a scan that
    cannot start (an unreachable cluster, a source that cannot be listed) leaves an existing
    catalog as it was. Raises UsageError for ``resume`` of a file that holds lines that are not
    rows of a scan (a file that is not a catalog is not replaced), IoError when it cannot be
    read or written.
    """

    def __init__(self, path: str, *, resume: bool = False):
        from ..storage import is_local

        if not is_local(path):
            raise UsageError(f"the catalog {path}: a local file (not a URL)")
        self.path = path
        self.format = output_format(path)
        if self.format == "parquet":
            _pyarrow()  # (refused before anything is scanned)
        self.journal = path + JOURNAL_SUFFIX if self.format == "parquet" else path
        from ..storage.local import refuse_special_file

        for p in {path, self.journal}:  # (a FIFO's open would wait for a reader)
            refuse_special_file(p)
        if not resume:  # replaced at the end (the journal at the first row): a scan's own only
            _refuse_replacing(path, self.format)
            if self.journal != path:
                _refuse_replacing(self.journal, "jsonl")
        else:  # appended to: a journal holding no row (blank lines) is no catalog either
            _refuse_replacing(self.journal, "jsonl", resume=True)
        rows: list[dict] = []
        self._end = 0  # where the journal's whole lines end (resume appends there)
        self._resume = resume
        if resume:
            if self.format == "parquet" and os.path.exists(path):
                rows = _parquet_rows_to_resume(path)
            journal_rows, self._end = _read_lines(self.journal, strict=True)
            rows += journal_rows
        self.rows = {r["source"]: r for r in rows}
        self._file = None  # opened by the first row

    def _open(self) -> None:
        try:
            if self._resume and os.path.exists(self.journal):
                self._file = open(self.journal, "r+b")
                self._file.truncate(self._end)  # a torn last line goes
                self._file.seek(self._end)
            else:
                self._file = open(self.journal, "wb")
        except OSError as e:
            raise IoError(f"cannot write the catalog: {e.strerror}", source=self.journal) \
                from None

    @property
    def done(self) -> set[str]:
        """The sources with a row already."""
        return set(self.rows)

    def add(self, row: dict) -> None:
        """Append ``row`` to the journal: one whole line, then flushed."""
        if self._file is None:
            self._open()
        self.rows[row["source"]] = row
        self._file.write(_line(row).encode("utf-8"))
        self._file.flush()

    def sorted_rows(self) -> list[dict]:
        """Every row, sorted by source."""
        return [self.rows[k] for k in sorted(self.rows)]

    def close(self) -> None:
        """Close the journal, leaving it as it is (an interrupted scan: resume from it)."""
        if self._file is not None and not self._file.closed:
            self._file.close()

    def finish(self) -> list[dict]:
        """Write the output sorted by source, atomically; a Parquet journal is removed.
        Returns the rows."""
        self.close()
        rows = self.sorted_rows()
        if self.format == "parquet":
            write_parquet(rows, self.path)
            try:
                os.unlink(self.journal)
            except FileNotFoundError:
                pass
        else:
            write_jsonl(rows, self.path)
        return rows
