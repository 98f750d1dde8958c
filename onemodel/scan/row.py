"""One row of a scan: what one model is (docs/scan.md#rows).

:func:`scan_one` reads a model and returns its row, a JSON-ready dict with every key of
:data:`FIELDS` (``None`` where a fact is not known or not asked for); it never raises for a
model that cannot be read: the row carries the error's kind and its one line instead.
:func:`failed_row` is the row of a model whose task was stopped (a limit exceeded, its process
lost).

Without ``hash``, ``tensors`` or ``convert_to`` only the structure is read: the OneModel header
and manifest, the ONNX message with every ``raw_data`` skipped (range reads for a URL; a local
file is mapped, its weight pages never touched); ``check`` reads the structure the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import IoError, OneModelError, display_url

#: The version of the row's schema (docs/scan.md#rows); raised when a field changes meaning
#: or type, not when one is added.
SCHEMA_VERSION = 1

#: Every field of a row, in order; docs/scan.md describes each.
FIELDS = ("schema", "source", "format", "bytes", "data_bytes", "ir_version", "opsets",
          "producer", "producer_version", "nodes", "ops", "initializers", "parameters",
          "weight_bytes", "by_dtype", "tensor_count", "tensor_bytes", "external_tensors",
          "digest", "tensors", "check_errors", "check_warnings", "check_infos", "check_codes",
          "output", "output_error", "error_kind", "error", "read_bytes", "seconds")

#: The block size in which a remote file's structure is read (the ONNX reader's
#: ``block_size``): each initializer's header costs one block, so a small one keeps the
#: bytes read without ``hash`` near the structure's own.
STRUCTURE_BLOCK = 8 * 1024

#: The error kind of a row whose model made onemodel fail unexpectedly (a bug, reported).
INTERNAL = "Internal"


@dataclass(frozen=True)
class ScanOptions:
    """What a scan reads and writes per model.

    hash: the content digest (reads every tensor byte once). tensors: each tensor's digest
    too (implies hash). check: ``onemodel check``'s error, warning and info counts and codes.
    convert_to: the output directory of conversions (the path of each comes with the task).
    layout: ``"onemodel"`` (the container) or an ONNX layout (``inline``, ``file``,
    ``per_tensor``, ``safetensors``, ``keep``). storage_options: fsspec options of URLs.
    allow_outside: resolve external data outside a model's directory (Clause 15.3).
    """

    hash: bool = False
    tensors: bool = False
    check: bool = False
    convert_to: str | None = None
    layout: str = "onemodel"
    storage_options: dict | None = None
    allow_outside: bool = False

    @property
    def digests(self) -> bool:
        """Whether a row has the content digest (``hash``, ``tensors``, or a conversion,
        whose output is checked against it)."""
        return self.hash or self.tensors or self.convert_to is not None

    def answered_by(self, row: dict) -> bool:
        """Whether ``row`` (of an earlier scan, resumed) holds what these options ask: the
        digest, the tensors' digests, the check's counts, the conversion (written or failed).
        A row of a model that could not be read holds all it ever will."""
        if row.get("error_kind") is not None:
            return True
        return not ((self.digests and row.get("digest") is None)
                    or (self.tensors and row.get("tensors") is None)
                    or (self.check and row.get("check_errors") is None)
                    or (self.convert_to is not None and row.get("output") is None
                        and row.get("output_error") is None))


    def kept_from(self, row: dict) -> tuple:
        """The flags (``"hash"``, ``"tensors"``, ``"check"``) of what ``row`` (of an earlier
        scan, resumed, scanned again for what these options ask) holds and these options do
        not ask: a model scanned again with them too keeps in its new row what its old one
        held (``--resume --hash`` of a catalog made with ``--check`` keeps the check's
        counts)."""
        if row.get("error_kind") is not None:
            return ()
        return tuple(flag for flag, field in (("hash", "digest"), ("tensors", "tensors"),
                                              ("check", "check_errors"))
                     if row.get(field) is not None and not getattr(self, flag))


def row_source(source: str) -> str:
    """The ``source`` field of ``source``'s row: a URL's user information and query values
    masked (:func:`~onemodel.errors.display_url`), made printable (a file name may hold
    anything); the key a resumed scan finds a source's row by."""
    from ..errors import printable

    return printable(display_url(source))


def empty_row(source: str) -> dict:
    """A row of ``source`` with every field ``None`` but the schema and the source."""
    row = dict.fromkeys(FIELDS)
    row["schema"] = SCHEMA_VERSION
    row["source"] = row_source(source)
    return row


def failed_row(source: str, kind: str, message: str, seconds: float | None = None) -> dict:
    """The row of a model that could not be scanned: ``kind`` (``Malformed``, ``InvalidModel``,
    ``Unsupported``, ``Io``, or an executor's kind such as a limit exceeded) and its one-line
    ``message``."""
    row = empty_row(source)
    row["error_kind"] = kind
    row["error"] = _one_line(message)
    row["seconds"] = seconds
    return row


def _one_line(text: str) -> str:
    """``text`` on one line (the line ``onemodel`` prints), printable, each URL's user
    information and query values masked (:func:`onemodel.errors.mask_urls`)."""
    from ..errors import mask_urls, printable

    return printable(mask_urls(" ".join(str(text).split())))


def error_fields(e: BaseException) -> dict:
    """``{"error_kind", "error"}`` of an exception: a OneModelError's kind and its line
    without the kind in front; anything else is :data:`INTERNAL` (a bug) with its type."""
    if isinstance(e, OneModelError):
        kind = e.kind
        return {"error_kind": kind, "error": _one_line(str(e).removeprefix(f"{kind}: "))}
    return {"error_kind": INTERNAL, "error": _one_line(f"{type(e).__name__}: {e}")}


class _Counter:
    """A progress callable counting the bytes transferred from remote storage."""

    def __init__(self):
        self.n = 0

    def __call__(self, n: int) -> None:
        self.n += n


def scan_item(item: tuple, options: ScanOptions) -> dict:
    """:func:`scan_one` of a task's item ``(source, output)`` (``output``: the conversion's
    destination or None): the function a scan gives its executor. An item ``(source, output,
    listed, listed_output)`` opens ``source`` and writes ``output`` (absolute paths, for a
    Dask worker whose working directory is another) but names them as listed in its row
    (``listed`` None: as opened). A fifth element names flags set for this model too
    (:meth:`ScanOptions.kept_from`)."""
    source, output, listed, listed_output, more = (tuple(item) + (None,) * 5)[:5]
    if more:
        from dataclasses import replace

        options = replace(options, **dict.fromkeys(more, True))
    row = scan_one(source, options, output=output)
    if listed is not None:  # the paths as listed, in the row's fields and its messages
        for opened, as_named in ((source, listed), (output, listed_output)):
            if opened is None or opened == as_named:
                continue
            shown, as_listed = row_source(opened), row_source(as_named)
            for field in ("error", "output_error"):
                if row.get(field):
                    row[field] = row[field].replace(shown, as_listed)
        row["source"] = row_source(listed)
        if row.get("output") is not None:
            row["output"] = row_source(listed_output)
    return row


def scan_one(source: str, options: ScanOptions, *, output: str | None = None) -> dict:
    """The row of the model at ``source`` (a path or URL): every key of :data:`FIELDS`.

    A model that cannot be read gives a row whose ``error_kind`` is ``Malformed``,
    ``InvalidModel``, ``Unsupported`` or ``Io`` and ``error`` its one line (without the kind);
    an unexpected failure (a bug) gives ``Internal``. Never raises for the model.
    ``output``: where to write the model converted (``options.layout``), its content digest
    checked against the source's after writing; a failed conversion is ``output_error``.
    """
    from ..storage import is_local

    start = time.perf_counter()
    row = empty_row(source)
    counter = _Counter()
    try:
        _read(source, options, row, counter)
        if output is not None and row["error_kind"] is None:
            _convert(source, output, options, row)
    except Exception as e:  # every failure is the row's, never the scan's
        row.update(error_fields(e))
    row["read_bytes"] = None if is_local(source) else counter.n
    row["seconds"] = round(time.perf_counter() - start, 6)
    return printable_row(row)


def printable_row(row: dict) -> dict:
    """``row`` with every string that comes from a model made
    :func:`~onemodel.errors.printable` (producer, producer version, opset domains, operator
    names, tensor names; the source is :func:`row_source`, the rest onemodel writes itself,
    printable already): one
    holding an escape code, a newline or bytes that are not UTF-8 (read as lone surrogates) is
    written ``\\x1b``, ``\\n``, ``\\udcff``, so that every row is valid UTF-8 in JSON and
    Parquet and safe to print."""
    from ..errors import printable

    for key in ("producer", "producer_version"):
        if row[key] is not None:
            row[key] = printable(row[key])
    if row["ops"] and not all(map(str.isprintable, row["ops"])):
        row["ops"] = {printable(k): v for k, v in row["ops"].items()}
    for o in row["opsets"] or ():
        o["domain"] = printable(o["domain"])
    for t in row["tensors"] or ():
        t["name"], t["path"] = printable(t["name"]), printable(t["path"])
    return row


def _storage(options: ScanOptions, *targets: str) -> dict | None:
    """``options.storage_options`` when one of ``targets`` is a URL, else None (a scan may mix
    local files and URLs; the options serve the URLs)."""
    from ..storage import is_local

    return None if all(map(is_local, targets)) else options.storage_options


def _load(source: str, options: ScanOptions, counter: _Counter):
    """The model at ``source``, read as :func:`onemodel.load` reads it (the same open,
    detection and reader), but a reader that decodes a remote file through a block cache
    (ONNX: its ``block_size``) is given :data:`STRUCTURE_BLOCK`; ``counter`` counts the
    bytes transferred from a URL."""
    import inspect

    from ..formats import open_and_read
    from ..storage.place import name_of_url

    storage = _storage(options, source)
    read = {"allow_outside": True} if options.allow_outside else {}

    def reader(plugin, src):
        taken = inspect.signature(plugin.read).parameters
        given = {"storage_options": storage, **read}
        if "block_size" in taken:
            given["block_size"] = STRUCTURE_BLOCK
        model = plugin.read(src, **{k: v for k, v in given.items() if k in taken})
        model.format = plugin.name
        return model

    return open_and_read(source, reader, name=name_of_url(source), storage_options=storage,
                         progress=counter)


def _read(source: str, options: ScanOptions, row: dict, counter: _Counter) -> None:
    """Fill ``row`` from the model at ``source``: ``check``'s read (its counts, and the
    structure when nothing more is asked), else or then :func:`_load` (the structure, and the
    digests: one thread per model, tensors in file order, so that a remote file is read front
    to back once; the scan's parallelism is its executor's)."""
    if options.check:
        from ..storage import open_source
        from ..validation.run import check_and_model

        storage = _storage(options, source)
        src = open_source(source, storage_options=storage, progress=counter)
        model = None
        try:
            report, model = check_and_model(src, storage_options=storage,
                                            allow_outside=options.allow_outside,
                                            block_size=STRUCTURE_BLOCK, close=False)
            row.update(check_fields(report))
            refused = any(f.code.startswith("OM20") and f.severity == "error"
                          for f in report.findings)  # (load refuses it: its error is the row's)
            if model is not None and not options.digests and not refused:
                row.update(model_fields(model))  # (records and the files' sizes)
                return
        finally:  # (a OneModel file the check's reader refused leaves no model to close it)
            if model is not None:
                model.close()
            src.close()
    with _load(source, options, counter) as model:
        row.update(model_fields(model))
        if options.digests:
            from ..content_digest import model_digest

            d = model_digest(model, workers=1)
            row["digest"] = d.hex
            if options.tensors:
                row["tensors"] = tensor_fields(model, d)


def model_fields(model) -> dict:
    """The structural fields of a row for a model read (its records only: no tensor byte is
    read): format, sizes, IR version, opsets, producer, operators and weights by element
    type, from ``info``'s :func:`onemodel.summary.summarize`."""
    from ..summary import summarize

    s = summarize(model)
    resources = list(getattr(model, "resources", None) or [])
    by_dtype = {k: {"tensors": v["count"], "parameters": v["parameters"], "bytes": v["bytes"]}
                for k, v in s["initializers"]["by_dtype"].items()}
    return {
        "format": s["format"],
        "bytes": resources[0].size if resources else None,
        "data_bytes": sum(r.size for r in resources[1:]),
        "ir_version": s["ir_version"],
        "opsets": [{"domain": o["domain"], "version": o["version"]} for o in s["opsets"]],
        "producer": s["producer"]["name"],
        "producer_version": s["producer"]["version"],
        "nodes": s["nodes"],
        "ops": dict(sorted(s["ops"].items())),
        "initializers": s["initializers"]["count"],
        "parameters": s["initializers"]["parameters"],
        "weight_bytes": s["initializers"]["bytes"],
        "by_dtype": by_dtype,
        "tensor_count": s["tensors"]["count"],
        "tensor_bytes": s["tensors"]["bytes"],
        "external_tensors": s["tensors"]["external"],
    }


def check_fields(report) -> dict:
    """The ``check_*`` fields of a row from a :class:`onemodel.validation.Report`: counts by
    severity and ``{code: findings}``."""
    counts = report.counts
    codes: dict[str, int] = {}
    for f in report.findings:
        codes[f.code] = codes.get(f.code, 0) + 1
    return {"check_errors": counts["error"], "check_warnings": counts["warning"],
            "check_infos": counts["info"], "check_codes": dict(sorted(codes.items()))}


def tensor_fields(model, d) -> list[dict]:
    """Each tensor of ``model`` with its content digest (``d``, the model's
    :class:`~onemodel.content_digest.ModelDigest`): path (IR field names), name, element
    type, bytes (raw storage) and digest, in the digest's order."""
    from ..ir import iter_tensors
    from ..ir.dtypes import name_of

    tensors = dict(iter_tensors(model))
    out = []
    for path, (name, digest) in d.tensor_hex().items():
        t = tensors.get(path)
        out.append({"path": path, "name": name or "", "digest": digest,
                    "dtype": name_of(t.data_type or 0) if t is not None else None,
                    "bytes": t.nbytes if t is not None else None})
    return out


def _convert(source: str, output: str, options: ScanOptions, row: dict) -> None:
    """Convert ``source`` to ``output`` in ``options.layout``, then compare the output's
    content digest with the source's (``row["digest"]``); ``row["output"]`` is set when both
    hold, ``row["output_error"]`` (one line with its kind) otherwise."""
    import os

    from ..api import convert
    from ..content_digest import digest
    from ..storage import is_local

    write = {} if options.layout == "onemodel" else {"layout": options.layout}
    to = "onemodel" if options.layout == "onemodel" else "onnx"
    read = {"allow_outside": True} if options.allow_outside else {}
    try:
        if is_local(output):  # (the directories of the sources' tree, made as needed)
            try:
                os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
            except OSError as e:
                raise IoError(f"cannot create the directory: {e.strerror}",
                              source=output) from None
        convert(source, output, to=to, storage_options=_storage(options, source, output),
                read_options=read, **write)
        written = digest(output, storage_options=_storage(options, output)).hex
    except OneModelError as e:
        row["output_error"] = _one_line(str(e))
        return
    if written != row["digest"]:
        row["output_error"] = _one_line(f"InvalidModel: the content digest of {output} is "
                                        f"{written}, the source's {row['digest']}")
        return
    row["output"] = row_source(output)  # (masked and printable, as the source is)
