"""``onemodel info`` of an ONNX model whose external data files cannot all be read (a data file
missing, unreadable): the structure, everything ``info`` shows without the weights' bytes, and
which data files could not be read, instead of the first error alone."""

from __future__ import annotations

from ..errors import IoError, OneModelError


def load_structure(file, error: IoError, *, storage_options=None, allow_outside: bool = False):
    """``(model, errors)``: the model at ``file`` with its external tensors resolved where their
    data files can be read, when ``error`` (raised by :func:`onemodel.load` of it whole, with
    these options) came from its data files; ``errors`` is the error of each tensor left
    without its bytes (in the order of the tensors). Raises ``error`` again when the file
    cannot be read without its data files or is not ONNX, or when every data file can be read.
    """
    from ..api import load
    from ..formats.onnx.external import resolve_external_data

    try:  # (an OptionError for a format without data files)
        model = load(file, storage_options=storage_options, allow_outside=allow_outside,
                     load_external=False)
    except OneModelError:
        raise error from None
    errors: list = []
    try:
        model.resources += resolve_external_data(model, errors=errors, source=model.source,
                                                 allow_outside=allow_outside,
                                                 storage_options=storage_options)
    except BaseException:
        model.close()
        raise
    if not errors:
        model.close()
        raise error
    return model, errors


def mark_unread(report: list[dict], model, errors: list) -> None:
    """Set ``error`` in each entry of ``report`` (:func:`onemodel.cli.info.external_report`) whose
    data file could not be read: ``cannot be read, N tensors without their bytes: MESSAGE``,
    MESSAGE that of its first tensor's error (``errors``, by the tensor's field path)."""
    from ..formats.onnx.external_refs import RefusedError, location_parts, parse_reference
    from ..formats.onnx.paths import proto_path
    from ..ir.tensor import EXTERNAL
    from ..ir.walk import iter_tensors

    def key(location: str) -> str:
        try:
            return "/".join(location_parts(location))
        except RefusedError:
            return location

    by_path = {e.path: e for e in errors}
    unread: dict[str, list] = {}
    for _, t in iter_tensors(model):
        if t.data_location != EXTERNAL or t.external is not None:
            continue
        try:
            location = parse_reference(t.external_data).location
        except RefusedError:
            continue  # (the report says why already)
        e = by_path.get(proto_path(model, t))
        if e is not None:
            unread.setdefault(key(location), []).append(e)
    for f in report:
        found = unread.get(key(f["location"])) if f.get("location") is not None else None
        if found and not f.get("error"):
            n = len(found)
            f["error"] = (f"cannot be read, {n} tensor{'' if n == 1 else 's'} without "
                          f"{'its' if n == 1 else 'their'} bytes: {found[0].message}")
