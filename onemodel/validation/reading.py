"""Reading a model for ``onemodel check``: its structure, with the reader's tensor checks
collected instead of raised (so three bad tensors give three findings).

An ONNX file is decoded with :func:`onemodel.formats.onnx.checks.check_tensors` and
:func:`~onemodel.formats.onnx.external.resolve_external_data` in their collecting mode (tensor
bytes are never loaded: raw_data stays a Blob of the file, external data is checked for
reference and length); the fields Clause 5.3.1 makes mandatory are left to the structure checks.
A OneModel file is read by its reader's own pieces without the graph rules (which the structure
checks report all at once), its tensor faults (byte lengths, extension tensor rules) collected;
any other refusal of a manifest object is reported alone (the model cannot be made). What
cannot be decoded at all (Malformed, Io) is raised.
"""

from __future__ import annotations

from ..errors import InvalidModelError, IoError, UnsupportedError
from .codes import finding


def read_for_check(target, *, storage_options: dict | None = None,
                   allow_outside: bool = False, full: bool = False,
                   block_size: int = 64 * 1024):
    """``(model, findings, fmt, graph_paths)`` for the file or URL ``target``: the model read
    (``None`` when a OneModel reader refused it), the reading findings (``OM2xx``, paths in the
    file's terms), the format name and the OneModel reader's ``{id(graph): manifest path}``.
    External data checksums (SHA-1 of a whole data file, Clause 13.3) are verified only with
    ``full``; otherwise each data file with checksums gets the info finding ``OM206``.

    ``block_size``: the blocks a remote ONNX file's structure is read in (as the ONNX
    reader's ``block_size``).

    Raises MalformedError or IoError (the file cannot be read), UnsupportedError for a format
    that cannot be told or a limit that stops decoding."""
    from ..formats import open_and_read

    def read(plugin, source):
        if plugin.name == "onnx":
            model, found = _onnx(source, storage_options, allow_outside, full, block_size)
            return model, found, "onnx", {}
        if plugin.name == "onemodel":
            model, found, paths = _onemodel(source)
            return model, found, "onemodel", paths
        model = plugin.read(source)
        model.format = plugin.name
        return model, [], plugin.name, {}

    return open_and_read(target, read, storage_options=storage_options)


def _strip(path):
    if path and path.startswith("ModelProto."):
        return path[len("ModelProto."):]
    return path


def _onnx(source, storage_options, allow_outside, full, block_size):
    from ..formats.onnx.checks import check_tensors
    from ..formats.onnx.external import default_base, resolve_external_data
    from ..formats.onnx.wire_decode import decode
    from ..ir.tensor import EXTERNAL, Tensor, typed_extra_bits
    from ..storage.base import BlockView

    data = source.whole()
    if data is None:
        data = BlockView(source, block_size)
    tensor_errors: list = []
    external: dict = {}

    extra_bits: list = []

    def check(root, tensors):
        check_tensors(root, tensors, source.name, errors=tensor_errors)
        for t, offset in tensors:
            if type(t) is Tensor and t.data_location == EXTERNAL:
                external[id(t)] = offset
            elif type(t) is Tensor and t.int32_data is not None:
                bad = typed_extra_bits(t)
                if bad is not None:
                    extra_bits.append((t, offset, bad))

    model = decode(data, "ModelProto", source=source.name, blob_source=source, check=check)
    model.resources = [source]
    model.source = source.name
    model.format = "onnx"
    found = [finding("OM202" if isinstance(e, UnsupportedError) else "OM201", e.message,
                     _strip(e.path), e.offset) for e in tensor_errors]
    found += [_extra_bits(model, t, offset, bad) for t, offset, bad in extra_bits]
    if external:
        model.base_dir = default_base(source)
        refused: list = []
        unverified: list | None = None if full else []
        model.resources += resolve_external_data(
            model, model.base_dir, allow_outside=allow_outside, storage_options=storage_options,
            offsets=external, source=source.name, errors=refused, unverified=unverified,
            model_file=source)
        found += [finding("OM204" if isinstance(e, IoError) else "OM203", e.message,
                          _strip(e.path), e.offset) for e in refused]
        found += _unverified(model, unverified or [], external)
    return model, found


def _extra_bits(model, t, offset, bad):
    """The ``OM208`` warning of a narrow tensor whose int32_data value ``bad = (index,
    value)`` sets bits outside its elements' (Clause 6.3.4, Table 7)."""
    from ..formats.onnx.paths import proto_path
    from ..ir.dtypes import INFO

    info = INFO[t.data_type]
    index, value = bad
    top = 7 if info.bits in (2, 4) else info.bits - 1
    low = value & ((1 << (top + 1)) - 1)
    if info.bits in (2, 4):
        read = f"the octet {low:#04x}"
    else:
        read = f"the element code {low:#04x}"
    return finding("OM208", f"int32_data[{index}] of {info.name} is {value} "
                   f"({value & 0xFFFFFFFF:#010x}): bits outside 0 to {top} are set; read as "
                   f"{read}", _strip(proto_path(model, t)), offset)


def _unverified(model, tensors: list, offsets: dict) -> list:
    """One ``OM206`` per data file among ``tensors`` (external tensors whose checksum was not
    verified), at the first such tensor."""
    from ..formats.onnx.paths import proto_path

    by_file: dict = {}
    for t in tensors:
        loc = next((e.value for e in t.external_data if e.key == "location"), "")
        by_file.setdefault(loc, []).append(t)
    out = []
    for loc, ts in by_file.items():
        n = len(ts)
        out.append(finding(
            "OM206", f"external data location {loc!r}: the SHA-1 checksum{'s' if n > 1 else ''} "
            f"of {n} tensor{'s' if n > 1 else ''} {'were' if n > 1 else 'was'} not verified "
            "(check reads structure only; --full reads the file and verifies them)",
            _strip(proto_path(model, ts[0])), offsets.get(id(ts[0]))))
    return out


def _onemodel(source):
    from ..formats.container import reader as cr

    cr.ensure_recursion_room()
    size = source.size  # a header or manifest that cannot be parsed: unreadable, raised
    header = cr.parse_header(source.read(0, min(cr.HEADER_SIZE, size)), size)
    try:
        manifest = cr.parse_manifest(source.read(cr.HEADER_SIZE, header.manifest_length),
                                     cr.HEADER_SIZE)
    except RecursionError:
        raise UnsupportedError("the manifest nests too deeply", path=cr.MANIFEST) from None
    try:
        r = cr.Reader(source, header, errors=[])  # tensor faults collected, every one
        with cr.bulk_objects():
            model = r.full("Model", manifest, cr.MANIFEST, 0)
    except (InvalidModelError, UnsupportedError) as e:  # (Malformed, Io: unreadable, raised)
        return None, [finding("OM205", e.message, e.path, e.offset)], {}
    except RecursionError:
        raise UnsupportedError("the manifest nests too deeply", path=cr.MANIFEST) from None
    model.resources = [source]
    model.source = source.name
    model.format = "onemodel"
    return model, [finding("OM205", e.message, e.path, e.offset) for e in r.errors], r.graph_paths
