"""``onemodel hash``: the content digest of models (onemodel.content_digest)."""

from __future__ import annotations

from typing import List, Optional

import typer

from .application import (
    DebugOpt,
    OutsideOpt,
    StorageOpt,
    _errors,
    _read_options,
    _storage,
    app,
    out,
)
from .redact import shown


@app.command("hash")
def hash_cmd(
    files: List[str] = typer.Argument(..., metavar="FILE...", help="Model files or URLs."),
    tensors: bool = typer.Option(False, "--tensors", help="Also print each tensor's digest."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    manifest_out: Optional[str] = typer.Option(None, "--manifest", metavar="OUT.json",
                                               help="Write the digests as a JSON manifest to "
                                               "sign (one FILE)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Print the content digest of each model, the same for every layout (inline, external
    data, OneModel, .zst), as 'sha256:<hex>  FILE'."""
    import json

    from .. import api
    from ..content_digest import digest, manifest
    from ..errors import UsageError

    with _errors(debug):
        if manifest_out is not None and len(files) != 1:
            raise UsageError("--manifest takes one FILE")
        # the options are for the URLs among the files and the manifest (a local path ignores
        # them); refused only when every one of them is local
        options = _storage(storage_option, *files, manifest_out)
        docs = []
        for f in files:
            if manifest_out is None:
                r = digest(f, storage_options=options, **_read_options(allow_outside))
            else:  # the manifest is never one of the files read (the model, its data files)
                with api.load(f, storage_options=options, **_read_options(allow_outside)) as m:
                    api.refuse_overwriting(m, [("--manifest", manifest_out)], in_place=False)
                    r = digest(m)
            where = shown(f)
            if manifest_out is not None:
                name = where.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
                _write_manifest(manifest_out, manifest(r, name), options)
            if as_json:
                docs.append({"file": where, "digest": r.hex, "version": 1, **(
                    {"tensors": [{"path": p, "name": n, "digest": d}
                                 for p, (n, d) in r.tensor_hex().items()]} if tensors else {})})
                continue
            out.line(f"{r.hex}  {where}")
            if tensors:
                for p, (n, d) in r.tensor_hex().items():
                    out.line(f"  {d}  {n or '(unnamed)'}  {p}")
        if as_json:
            out.line(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))


def _write_manifest(target: str, doc: dict, options: dict | None) -> None:
    """``doc`` as the JSON file ``target``; ``options``: storage options, used when ``target``
    is a URL."""
    import json

    from ..storage import open_sink

    sink = open_sink(target, storage_options=options, compression=None)
    try:
        sink.write((json.dumps(doc, indent=2) + "\n").encode())
        sink.commit()
    except BaseException:
        sink.abort()
        raise
