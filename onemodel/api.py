"""The Python API: load, save and convert models in any registered format, from any storage.

>>> import onemodel
>>> with onemodel.load("model.onnx") as m:           # zero-copy: tensors view the mapped file
...     onemodel.save(m, "model.onemodel")
...     data = onemodel.to_bytes(m)                    # the ONNX file, or format="onemodel"
>>> onemodel.load(data).format
'onnx'
>>> onemodel.convert("model.onemodel", "back.onnx")
>>> onemodel.verify("model.onnx", "back.onnx").equal
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import formats
from .errors import (
    NoDataDirectoryError,
    OneModelError,
    OptionError,
    Placeholder,
    Setting,
    UnsupportedError,
    UsageError,
)
from .ir import Model
from .ir.walk import check_nesting
from .storage import BytesSink, check_storage_options, open_sink, open_source
from .storage.file_objects import FileObjectSink, file_object_source, is_file_object
from .storage.place import name_of_url


def _name_of(target) -> str | None:
    """The name whose suffix tells ``target``'s format: a URL without its query (a presigned
    ``?X-Amz-Signature=...``), a file object's ``name``, or None."""
    if isinstance(target, (str, os.PathLike)):
        return name_of_url(os.fspath(target))
    name = getattr(target, "name", None)
    return name if isinstance(name, str) else None


def _not_empty(target) -> None:
    """Refuse an empty path (``""``): it names no file, not the working directory."""
    if isinstance(target, (str, os.PathLike)) and os.fspath(target) in ("", b""):
        raise UsageError("empty path")


def _no_directory(e: UnsupportedError, call: str, base_dir: bool) -> UnsupportedError:
    """The ONNX writer's refusal to write data files with no directory for them
    (:class:`~onemodel.errors.NoDataDirectoryError`, told by its class, not its text) said for
    ``call`` (``to_bytes`` or ``save``): what to pass there, ``base_dir`` only where data files
    can go (not for bytes). Any other error is returned as it is."""
    if not isinstance(e, NoDataDirectoryError):
        return e
    where = "bytes in memory have" if call == "to_bytes" else "a file object has"
    e.message = (f"the model has external data files to write and {where} no directory "
                 f"for them: {call}(..., layout=\"inline\") puts every tensor in the one "
                 f"{'buffer' if call == 'to_bytes' else 'stream'}"
                 + (", or base_dir= names the directory to write the data files in"
                    if base_dir else ""))
    return e


def load(target, *, format: str | None = None, storage_options: dict | None = None,
         progress=None, allow_outside: bool = False, **options) -> Model:
    """Read a model from a path, URL, bytes, binary file object or Source.

    Args:
        target: local path, ``file://`` or fsspec URL, bytes-like object (``to_bytes`` output),
            binary file object (``io.BytesIO``, ``open(path, "rb")``: read from its position to
            its end, whole, since it cannot be mapped), or a storage Source. Bytes and file
            objects have no directory, so external data in them is refused unless ``base_dir``
            (an ONNX reader option) names one.
        format: ``onnx`` or ``onemodel`` (or a plugin's name); by default the magic bytes decide,
            then the file name's suffix.
        storage_options: options for the fsspec backend of a URL; also given to the format's
            reader when it takes them (ONNX: for external data files under a URL).
        progress: a callable given byte counts as they are read (remote files), such as
            :class:`onemodel.storage.progress.Progress`.
        allow_outside: resolve external data outside the model's directory (Clause 15.3; never
            the default); given to a reader that takes it (ONNX). A format without external
            data (OneModel) has nothing to resolve, so the same call serves any input format.
        options: passed to the format's reader (ONNX: ``load_external``, ``base_dir``,
            ``block_size``). An option the reader does not take raises
            :class:`~onemodel.errors.OptionError` (an UnsupportedError) naming it and those it
            takes.
    Returns:
        the :class:`~onemodel.ir.Model`. Tensors are views of the mapped file; use the model as a
        context manager (or call ``close()``) to release the map.
    Raises:
        OneModelError of kind Malformed, InvalidModel, Unsupported or Io; TypeError for a text
        file object or a target of another type; UsageError for an empty path (``""``: it
        names no file) or for ``storage_options`` when every file to open is local (they
        would be ignored: :func:`onemodel.storage.check_storage_options`).
    """
    _not_empty(target)
    check_storage_options(storage_options, target, options.get("base_dir"))
    return _load(target, format=format, storage_options=storage_options, progress=progress,
                 allow_outside=allow_outside, **options)


def _load(target, *, format: str | None = None, storage_options: dict | None = None,
          progress=None, allow_outside: bool = False, **options) -> Model:
    """:func:`load` without the check of ``storage_options`` against ``target``: for an
    operation that opens several files (``convert``, ``verify``) and checks them once against
    all of them."""
    _not_empty(target)
    if is_file_object(target, "read"):
        target = file_object_source(target)

    def read(plugin, source):
        model = plugin.read(source, **_plugin_options(
            plugin.read, 1, options, f"{plugin.name} input", storage_options=storage_options,
            allow_outside=allow_outside or None))
        model.format = plugin.name
        return model

    return formats.open_and_read(target, read, format=format, name=_name_of(target),
                                 storage_options=storage_options, progress=progress)


def _plugin_for_target(target, format: str | None):
    if format:
        return formats.by_name(format)
    name = _name_of(target)
    try:
        return formats.detect(None, name)
    except UnsupportedError:
        if name is None and not isinstance(target, (str, os.PathLike)):
            raise UnsupportedError("cannot tell the output format: this target has no file "
                                   "name; give the format (format='onnx' or 'onemodel')") \
                from None
        raise UnsupportedError.advising(
            "cannot tell the output format from the file name: name it .onnx or .onemodel, or "
            "give the format ({0})", Setting("format", Placeholder("onnx|onemodel")),
            source=name) from None


def save(model: Model, target, format: str | None = None, *,
         storage_options: dict | None = None, progress=None, **options):
    """Write ``model`` to ``target`` atomically (a temporary file renamed into place).

    Args:
        model: the model to write.
        target: local path, ``file://`` or fsspec URL, binary writable file object
            (``io.BytesIO``, ``open(path, "wb")``, ``sys.stdout.buffer``: bytes are written
            into it as they are produced, from its position; on error a seekable one is
            truncated back to it), or a storage Sink.
        format: ``onnx`` or ``onemodel``; by default the target's suffix decides (a file
            object's ``name``); required for a file object without a name.
        storage_options: options for the fsspec backend of a URL; also given to the format's
            writer when it takes them (ONNX: for external data files under a URL).
        progress: a callable given byte counts as they are written.
        options: passed to the format's writer (``strict_v1=True`` for plain OneModel v1;
            external-data layout options for ONNX). An option the writer does not take raises
            :class:`~onemodel.errors.OptionError` (an UnsupportedError) before anything is
            written.
    Returns:
        whatever the writer returns (the OneModel writer: what ``strict_v1`` left out).
    Raises:
        OneModelError; on error nothing is left at ``target``. A file object (or a Sink that is
        no file) has no directory for external data files: an ONNX model whose layout puts
        tensors in data files (``keep`` of a model read with external data, ``file``,
        ``per_tensor``) raises UnsupportedError there unless ``base_dir`` names their
        directory; ``layout="inline"`` writes everything into the one stream (the message says
        ``save(..., layout="inline")``). UsageError for an empty path (``""``), or for
        ``storage_options`` when ``target`` (and ``base_dir``) is local.
        UnsupportedError for graphs nested deeper than ``limits.MAX_MODEL_NESTING``
        (:func:`onemodel.ir.walk.check_nesting`), before anything is written.
    """
    _not_empty(target)
    check_storage_options(storage_options, target, options.get("base_dir"))
    plugin = _plugin_for_target(target, format)
    options = _plugin_options(plugin.write, 2, options, f"{plugin.name} output",
                              storage_options=storage_options)
    try:
        return _write(plugin, model, target, options, storage_options, progress)
    except UnsupportedError as e:
        if is_file_object(target, "write"):
            raise _no_directory(e, "save", True) from None
        raise


def to_bytes(model: Model, format: str | None = None, **options) -> bytes:
    """The file ``save`` would write, as bytes in memory: ``to_bytes(model)``, or
    ``to_bytes(model, format="onemodel")``.

    Args:
        model: the model to write.
        format: ``onnx`` or ``onemodel`` (or a plugin's name). By default the format the model
            was read from (``model.format``: a model loaded from a ``.onemodel`` file gives
            OneModel bytes back), and ``onnx`` for a model that was not read from a file
            (built in memory), as ``onnx.ModelProto.SerializeToString()`` gives ONNX bytes.
        options: as for :func:`save` (``strict_v1=True``; ONNX ``layout``, ...). ONNX bytes
            default to ``layout="inline"``: the bytes of one whole model, every tensor inside
            them, for a model read with external data too (bytes have no directory for data
            files, and a reader of the bytes, ``onnx.load_from_string`` included, expects the
            model, not references to files beside it). Another ``layout``, or ``base_dir``
            (the directory to write the data files in, with layout ``keep``), opts out.
    Returns:
        the bytes of the whole file (one copy of every tensor's contents: use :func:`save` to a
        file or file object to stream large models instead). ``load(data)`` reads them back.
    Raises:
        OneModelError as :func:`save`; UnsupportedError for an ONNX ``layout`` that puts
        tensors in external data files without ``base_dir`` (they have nowhere to go; the
        message says ``to_bytes(..., layout="inline")``); TypeError for a ``format`` that is
        not a string.
    """
    if format is None:
        format = getattr(model, "format", None) or "onnx"
    elif not isinstance(format, str):
        raise TypeError(f"format must be a format name ('onnx' or 'onemodel'), not "
                        f"{type(format).__name__}")
    plugin = formats.by_name(format)
    options = _plugin_options(plugin.write, 2, options, f"{plugin.name} output")
    import inspect

    if "layout" not in options and "base_dir" not in options and \
            "layout" in inspect.signature(plugin.write).parameters:
        options["layout"] = "inline"  # the bytes of one model, not references to data files
    sink = BytesSink()
    try:
        _write(plugin, model, sink, options, None, None)
    except UnsupportedError as e:
        raise _no_directory(e, "to_bytes", False) from None
    return sink.getvalue()


def _write(plugin, model: Model, target, options: dict, storage_options, progress):
    """``plugin.write`` to a sink opened for ``target``, committed on success, aborted on any
    error (``options`` already checked by :func:`_plugin_options`)."""
    check_nesting(model)  # every writer recurses into subgraphs: refused before a byte is written
    if is_file_object(target, "write"):
        target = FileObjectSink(target)
    sink = open_sink(target, storage_options=storage_options, progress=progress)
    try:
        result = plugin.write(model, sink, **options)
    except BaseException:
        sink.abort()
        raise
    sink.commit()
    return result


def write_pieces(pieces: list, dst, storage_options, progress) -> None:
    """``pieces`` (bytes, memoryviews and Blobs, as :func:`onemodel.formats.onnx.splice`
    gives them) as the file ``dst``, committed on success, aborted (nothing left at ``dst``)
    on any error."""
    from .formats.onnx.writer import stream_pieces

    sink = open_sink(dst, storage_options=storage_options, progress=progress)
    try:
        sink.reserve(sum(len(p) for p in pieces))
        stream_pieces(pieces, sink)
    except BaseException:
        sink.abort()
        raise
    sink.commit()


def _spliced_graph(original: Model, model: Model, out_format: str, options: dict, src, dst):
    """The pieces of ``dst`` when ``model`` (what a transform returned for ``original``) has
    the main graph ``original`` was read with: its other fields encoded around that graph's
    octets as read (:func:`onemodel.formats.onnx.splice.splice_graph`), or None when it must
    be written by its writer (another format, layout or option, a graph that differs, a source
    whose octets cannot be used as they are, a file of 2 GiB or more)."""
    if out_format != "onnx" or set(options) - {"storage_options"} or model is original or \
            model.graph is None or original.graph is None:
        return None
    from . import limits
    from .formats.onnx.splice import WireError, source_octets, splice_graph

    whole = source_octets(original, src, dst)
    if whole is None or model.graph != original.graph:
        return None
    try:
        pieces = splice_graph(whole, model)
    except WireError:
        return None
    if pieces is None or sum(len(p) for p in pieces) >= limits.PROTOBUF_MESSAGE_LIMIT:
        return None
    return pieces


def check_graph_rules(model: Model) -> dict:
    """:func:`onemodel.ir.graph_rules.check_model` of ``model`` (Clause 7: names defined once
    and before use, no cycle, every domain imported): ``{id(graph): node order}``. Its error
    names the file the model was read from (``model.source``) and the field in the file's
    terms (``graph.output[1]`` of an ONNX file, not the IR's ``graph.outputs[1]``), as the
    readers' errors do. Raises InvalidModelError or UnsupportedError as ``check_model``."""
    from .ir import graph_rules

    try:
        return graph_rules.check_model(model)
    except OneModelError as e:
        if e.path is not None and getattr(model, "format", None) == "onnx":
            from .formats.onnx.paths import onnx_path

            e.path = onnx_path(model, e.path)
        raise e.at(source=getattr(model, "source", None)) from None


def refuse_overwriting(model: Model, outputs, *, in_place: bool = True,
                       extra_inputs=()) -> None:
    """Raise UsageError when one of ``outputs`` (``(what, target)`` pairs) is a file ``model``
    was read from (:func:`onemodel.formats.inputs.input_files`) or one of ``extra_inputs``
    (pairs alike): writing it would destroy an input. ``in_place``: the first output (the
    model written) may be the model file itself (it is written to a temporary file renamed
    over the old one; ``convert m.onnx m.onnx``)."""
    from .formats.inputs import input_files
    from .storage.place import refuse_inputs_as_outputs, same_file

    inputs = input_files(model) + list(extra_inputs)
    outputs = list(outputs)
    if in_place and outputs:
        own = [f for f in inputs if getattr(f, "model", False)]
        if own and same_file(outputs[0][1], own[0].target):
            refuse_inputs_as_outputs(outputs[1:], inputs)
            refuse_inputs_as_outputs(outputs[:1], [f for f in inputs if f not in own])
            return
    refuse_inputs_as_outputs(outputs, inputs)


def _plugin_options(func, positional: int, options: dict, what: str, **given) -> dict:
    """The keyword arguments for a format plugin's ``read`` or ``write`` (``func``, whose first
    ``positional`` parameters are the source, or the model and sink): ``options``, refused with
    :class:`~onemodel.errors.OptionError` naming those ``func`` does not declare (``align`` for
    OneModel output, a misspelt ``load_externall``) and those it declares, instead of being
    ignored, plus each of ``given`` (what load/save take for any format: ``storage_options``,
    ``allow_outside``) that is not ``None`` and that ``func`` declares. A plugin that declares
    ``**options`` takes any option."""
    import inspect

    params = list(inspect.signature(func).parameters.values())[positional:]
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if not any(p.kind == p.VAR_KEYWORD for p in params):
        unknown = sorted(k for k in options if k not in named)
        if unknown:
            raise OptionError(unknown, sorted(named), what)
    passed = {k: v for k, v in given.items() if v is not None and k in named}
    return {**options, **passed} if passed else options


@dataclass
class ConvertResult:
    """What :func:`convert` did: formats, tensor count and bytes, what was left out."""

    source_format: str
    target_format: str
    tensors: int = 0
    tensor_bytes: int = 0
    omitted: list[str] = field(default_factory=list)
    #: safetensors output: the padding entries written (``__pad0__``, ...: keys that keep each
    #: tensor at a multiple of ``align``; a reader that lists every key sees them; none with
    #: ``align=1``).
    padding: list[str] = field(default_factory=list)


def convert(src, dst, *, to: str | None = None, source_format: str | None = None,
            storage_options: dict | None = None, read_options: dict | None = None,
            progress=None, into=None, transform=None, **write_options) -> ConvertResult:
    """Convert the model at ``src`` to ``dst`` (formats from magic bytes and suffixes, or
    ``source_format`` / ``to``). Tensor bytes stream from the source map to the destination.

    The output format and ``write_options`` are checked before the source is opened: an
    unknown format or an option the writer does not take raises UnsupportedError without
    reading anything. ``read_options`` go to the reader (:func:`load`). ``progress`` (a callable
    given byte counts, e.g. a Progress bar) is given the bytes written to ``dst`` and to the ONNX
    external data files written beside it; when it has ``set_total``, its total is set to the
    model's tensor bytes (``ConvertResult.tensor_bytes``) before writing starts.

    Every conversion applies the graph rules (:func:`onemodel.ir.graph_rules.check_model`: one
    definition per name, names defined in the graph or an enclosing one, no cycle, declared
    domains) before writing, whatever the input and output formats: a model the OneModel
    writer would refuse is refused with the same message and path when the output is ONNX too
    (``load`` alone still accepts such an ONNX file as written).

    Safetensors (docs/safetensors.md): a ``dst`` ending in ``.safetensors`` (without ``to``)
    receives the initializers of the model at ``src`` (:func:`extract_weights`); with ``into``
    (a model's path or URL), ``src`` is a safetensors file whose tensors replace the initializers
    of that model by name, and the result is written to ``dst`` as any conversion
    (:func:`apply_weights`).

    ``transform``: a function given the model read (the graph rules applied) that returns the
    model to write, whose tensors may still be the source's (the command line's ``--opset``
    passes :func:`onemodel.opset_convert.convert_checked`); what it raises propagates, and
    nothing is written. It must not change the model it is given: when the model it returns
    has the same main graph (equal records) and is written as ONNX in the default layout from
    a local ONNX file, that graph's octets are copied from the file as read, not encoded again
    (:func:`onemodel.formats.onnx.splice.splice_graph`; for a file in the writer's canonical
    form, the same octets the writer gives).

    Returns a :class:`ConvertResult`; raises OneModelError (InvalidModelError for a model that
    breaks the graph rules, with nothing written at ``dst``), UsageError for an empty ``src`` or
    ``dst`` path, for ``storage_options`` when every file it opens is local, and for a ``dst``
    that is one of the files the model was read from other than the model file itself (a data
    file, a shard, the shard index, the weights file of ``into``: :func:`refuse_overwriting`),
    before anything is written. ``dst`` may be ``src`` itself: the
    model is converted in place (written to a temporary file renamed over it).
    """
    from .ir import iter_tensors

    _not_empty(src)
    _not_empty(dst)
    check_storage_options(storage_options, src, dst, into, (read_options or {}).get("base_dir"),
                          write_options.get("base_dir"))
    if into is not None:
        return apply_weights(src, into, dst, to=to, storage_options=storage_options,
                             read_options=read_options, progress=progress, **write_options)
    weights = None if to is not None else _weights_layout_of(dst)
    if weights is not None:  # a weights file of a layout plugin (.safetensors)
        unknown = sorted(k for k in write_options if k != "align")
        if unknown:
            raise OptionError(unknown, ["align"], f"{weights.name} output")
        return extract_weights(src, dst, source_format=source_format,
                               storage_options=storage_options, read_options=read_options,
                               progress=progress, **write_options)
    out_plugin = _plugin_for_target(dst, to)
    options = _plugin_options(out_plugin.write, 2, write_options, f"{out_plugin.name} output",
                              storage_options=storage_options)
    model = _load(src, format=source_format, storage_options=storage_options,
                  **(read_options or {}))
    with model:
        refuse_overwriting(model, [("the destination", dst)])
        check_graph_rules(model)
        original = model
        pieces = None
        if transform is not None:
            model = transform(model)
            pieces = _spliced_graph(original, model, out_plugin.name, options, src, dst)
        tensors = [t for _, t in iter_tensors(model)]
        total = sum(t.nbytes for t in tensors)
        if progress is not None and hasattr(progress, "set_total"):
            progress.set_total(total)
        if pieces is not None:
            check_nesting(model)
            write_pieces(pieces, dst, storage_options, progress)
            omitted = None
        else:
            omitted = _write(out_plugin, model, dst, options, storage_options, progress)
        return ConvertResult(original.format or "?", out_plugin.name, len(tensors), total,
                             list(omitted or []))


def _weights_layout_of(dst):
    """The layout plugin a weights file at ``dst`` (a path or URL) is written with, by its
    name's suffix (``.safetensors``: :func:`onemodel.formats.layouts.weights_layout`), or
    None for a model file."""
    from .formats.layouts import weights_layout

    name = _name_of(dst)
    return weights_layout(name.lower()) if name else None


def extract_weights(src, dst, *, source_format: str | None = None,
                    storage_options: dict | None = None, read_options: dict | None = None,
                    progress=None, align: int | None = None) -> ConvertResult:
    """Write the initializers of the model at ``src`` (every graph's, STRING ones left out) to
    the safetensors file ``dst``: names as keys (unique keys for names met twice, recorded), the
    ONNX element types and the model's content digest (``onemodel.digest``: ``sha256:...``) in
    ``__metadata__``, every tensor at an offset that is a multiple of ``align`` (default 64;
    :mod:`onemodel.formats.safetensors.weights`). ``safetensors.safe_open(dst, "np")`` reads it.

    Returns a :class:`ConvertResult` (target format ``safetensors``, the tensors written and
    their bytes, the padding entries' keys in ``padding``). Raises the errors of :func:`load`,
    UnsupportedError for a bad ``align``; nothing is left at ``dst`` on error.
    """
    from .formats.content_digest import model_digest
    from .formats.layouts import weights_layout

    layout = _weights_layout_of(dst) or weights_layout(default=True)
    check_storage_options(storage_options, src, dst, (read_options or {}).get("base_dir"))
    model = _load(src, format=source_format, storage_options=storage_options,
                  **(read_options or {}))
    with model:
        refuse_overwriting(model, [("the destination", dst)], in_place=False)
        total = sum(t.nbytes for t in layout.weights_of(model))
        if progress is not None and hasattr(progress, "set_total"):
            progress.set_total(total)
        meta = {"onemodel.digest": model_digest(model).hex}
        sink = open_sink(dst, storage_options=storage_options, progress=progress)
        padding: list = []
        try:
            n = layout.write_weights(model, sink, align=align, metadata=meta, padding=padding)
        except BaseException:
            sink.abort()
            raise
        sink.commit()
        return ConvertResult(model.format or "?", layout.name, n, total, padding=padding)


def apply_weights(weights, model_path, dst, *, to: str | None = None,
                  storage_options: dict | None = None, read_options: dict | None = None,
                  progress=None, **write_options) -> ConvertResult:
    """Replace the initializers of the model at ``model_path`` by name with the tensors of the
    safetensors file ``weights`` (each must name an initializer and hold its element type and
    dims; :func:`onemodel.formats.safetensors.weights.apply_weights`) and write the result to
    ``dst`` as :func:`convert` writes (format from ``to`` or the suffix, ``write_options``
    checked first, the graph rules applied). Tensor bytes stream from the safetensors file.

    Returns a :class:`ConvertResult` whose ``tensors`` are the initializers replaced and
    ``tensor_bytes`` their bytes. Raises InvalidModelError naming the tensor for a key the model
    has no initializer of or a dtype or shape that does not match (nothing written), the
    errors of :func:`load` and of the header check for a file that breaks the safetensors rules.
    """
    from .formats.layouts import weights_layout

    _not_empty(weights)
    check_storage_options(storage_options, weights, model_path, dst,
                          (read_options or {}).get("base_dir"), write_options.get("base_dir"))
    out_plugin = _plugin_for_target(dst, to)
    options = _plugin_options(out_plugin.write, 2, write_options, f"{out_plugin.name} output",
                              storage_options=storage_options)
    model = _load(model_path, storage_options=storage_options, **(read_options or {}))
    with model:
        name = _name_of(weights)
        layout = weights_layout(name.lower() if name else None, default=True)
        refuse_overwriting(model, [("the destination", dst)],
                           extra_inputs=[(f"the {layout.name} file of the weights", weights)])
        source = open_source(weights, storage_options=storage_options)
        try:
            replaced = layout.apply_weights(model, source, name=source.name)
        except BaseException as e:
            source.close()
            raise e.at(source=source.name) if isinstance(e, OneModelError) else e
        check_graph_rules(model)
        total = sum(t.nbytes for t in replaced)
        if progress is not None and hasattr(progress, "set_total"):
            progress.set_total(total)
        _write(out_plugin, model, dst, options, storage_options, progress)
        return ConvertResult(layout.name, out_plugin.name, len(replaced), total)
