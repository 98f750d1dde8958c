"""What ``onemodel run`` reads values from: ``--input NAME=FILE`` (a ``.npy`` array or a ``.pb``
message of the input's type) and the ONNX test data of ``--test-data DIR`` (``input_*.pb`` in,
``output_*.pb`` compared within the Clause 11.5 tolerances of :mod:`onemodel.tolerances`)."""

from __future__ import annotations

import os

from ..errors import IoError, MalformedError, UsageError, printable, quote
from .application import out


def graph_inputs(model) -> list:
    """The graph inputs a caller feeds (those without an initializer), in order."""
    if model.graph is None:
        return []
    inits = model.graph.initializer_map()
    return [v for v in model.graph.inputs if v.name not in inits]


#: The first bytes of every ``.npy`` file (numpy's format, any version).
NPY_MAGIC = b"\x93NUMPY"


def read_input(model, name: str, path: str):
    """The value of ``--input NAME=PATH``: a ``.pb`` file holds the message of the input's type
    (TensorProto, SequenceProto, MapProto, OptionalProto), any other file is a ``.npy`` array.

    A ``.npy`` array in a byte order other than the machine's (``np.save`` of a ``'>f4'``
    array) is the same values: it is converted to native order (one copy). Pickled data is
    never loaded. Either file is opened as a model is
    (:func:`onemodel.storage.local.open_regular`: without blocking, a regular file only), and
    the size a ``.npy`` header declares (shape times item size) must be what the file holds
    after the header before anything is allocated.

    Raises:
        IoError: the file cannot be read, or is not a regular file (a FIFO, a device, a
            directory: naming what it is), naming the input.
        MalformedError: the file is not a ``.npy`` array (an ``.onnx`` file, an ``.npz``
            archive, text ...), is one of Python objects (pickled), or its header declares
            more or fewer bytes than the file holds, naming the input and the file.
    """
    from ..value_files import message_kind, read_pb

    if path.endswith(".pb"):
        info = next((v for v in (model.graph.inputs if model.graph else []) if v.name == name),
                    None)
        return read_pb(path, message_kind(info.type if info is not None else None))
    from ..storage.local import open_regular

    try:
        fd = open_regular(path)
    except IoError as e:
        raise IoError(f"cannot read input {quote(name)}: {e.message}", source=path) from None
    except OSError as e:
        raise IoError(f"cannot read input {quote(name)}: {e.strerror or e}",
                      source=path) from None
    try:
        with os.fdopen(fd, "rb") as f:
            return _read_npy(f, name, path)
    except OSError as e:
        raise IoError(f"cannot read input {quote(name)}: {e.strerror or e}",
                      source=path) from None


def _read_npy(f, name: str, path: str):
    """The array of the ``.npy`` file open as ``f`` (see :func:`read_input`), in native byte
    order."""
    import numpy as np

    fmt = np.lib.format
    not_npy = MalformedError(
        f"input {quote(name)}: the file is neither a .npy array nor a .pb file holding a "
        "TensorProto (or the message of the input's type); --input takes NAME=FILE.npy or "
        "NAME=FILE.pb", source=path)
    if f.read(len(NPY_MAGIC)) != NPY_MAGIC:
        raise not_npy
    f.seek(0)
    try:
        version = fmt.read_magic(f)
        header = {(1, 0): fmt.read_array_header_1_0,
                  (2, 0): fmt.read_array_header_2_0,  # (3.0: 2.0 with UTF-8 field names)
                  (3, 0): fmt.read_array_header_2_0}.get(version)
        if header is None:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
        shape, _, dtype = header(f)
        if dtype.hasobject:
            raise MalformedError(f"input {quote(name)}: the .npy file holds Python objects "
                                 "(pickled data), which onemodel never loads; save a "
                                 "numeric or string array", source=path)
        _check_npy_size(f, shape, dtype, name, path)
        f.seek(0)
        arr = fmt.read_array(f, allow_pickle=False)
    except ValueError as e:  # a truncated or damaged header or body
        text = " ".join(str(e).split())
        if "allow_pickle" in text:
            raise MalformedError(f"input {quote(name)}: the .npy file holds Python objects "
                                 "(pickled data), which onemodel never loads", source=path) \
                from None
        raise MalformedError(f"input {quote(name)}: not a readable .npy array: {text}",
                             source=path) from None
    if not arr.dtype.isnative:  # the same values in the other byte order: one copy
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _check_npy_size(f, shape: tuple, dtype, name: str, path: str) -> None:
    """MalformedError unless the bytes after the ``.npy`` header (``f`` is just past it) are
    exactly the array the header declares: the element count times the item size, in exact
    integer arithmetic, compared with the file's size before anything is allocated."""
    from ..evaluate.memory import size_text

    count = 1
    for d in shape:
        count *= int(d)
    declared = count * dtype.itemsize
    held = os.fstat(f.fileno()).st_size - f.tell()
    if declared != held:
        raise MalformedError(
            f"input {quote(name)}: the .npy header declares shape {list(shape)} of {dtype} "
            f"({size_text(declared)}), but the file holds {held} bytes after its header",
            source=path)


def run_test_data(model, directory: str, rtol: float, atol: float, run, files_for) -> bool:
    """Run every data set of ``directory`` (:func:`onemodel.value_files.data_sets`) through
    ``run(feeds) -> {output: value}`` and compare with its ``output_*.pb``; print per data set
    ``pass`` or, per output that differs, the differences. ``input_J.pb`` feeds the J-th graph
    input without an initializer, ``output_J.pb`` is the J-th graph output, each file decoded as
    the message of that value's type. ``files_for(set_dir)`` gives the OutputFiles of one data
    set (or None). Returns True when every data set passes. Raises UsageError when a data set
    has more files than the graph has inputs or outputs, fewer input files than inputs to feed,
    or no ``output_*.pb`` (nothing compared is no pass; said before anything is run)."""
    from ..tolerances import compare
    from ..value_files import data_sets

    sets = data_sets(directory)
    ins = graph_inputs(model)
    outs = list(model.graph.outputs) if model.graph is not None else []
    for k, (set_dir, _, out_paths) in enumerate(sets):
        if not out_paths:
            which = f" (data set {k + 1} of {len(sets)})" if len(sets) > 1 else ""
            raise UsageError(f"--test-data {directory}: no output_*.pb to compare in "
                             f"{set_dir}{which}")
    passed = 0
    for set_dir, in_paths, out_paths in sets:
        label = os.path.basename(os.path.normpath(set_dir))
        if len(in_paths) > len(ins) or len(out_paths) > len(outs):
            raise UsageError(f"--test-data {label}: {len(in_paths)} input and {len(out_paths)} "
                             f"output files for a graph of {len(ins)} inputs to feed and "
                             f"{len(outs)} outputs")
        if len(in_paths) < len(ins):  # the data set lacks them, not the model
            missing = ", ".join(v.name for v in ins[len(in_paths):])
            raise UsageError(f"--test-data {label}: {len(in_paths)} input_*.pb for a graph of "
                             f"{len(ins)} inputs to feed; none for {missing}")
        feeds = {v.name: _read(p, v) for v, p in zip(ins, in_paths)}
        want = {v.name: _read(p, v) for v, p in zip(outs, out_paths)}
        results = run(feeds)
        problems = [d for name, w in want.items()
                    for d in compare(results.get(name), w, rtol, atol, name)]
        files = files_for(set_dir if len(sets) > 1 else None)
        if files is not None:
            for name, value in results.items():
                files.save(name, value)
            for text in files.saved_lines():
                out.line(text)
        if problems:
            out.line(f"{label}: {len(problems)} difference(s) in {len(want)} output(s)")
            for d in problems:
                out.line(printable(f"  {d.text()}"))
        else:
            passed += 1
            out.line(f"{label}: pass ({len(want)} output(s) within tolerance)")
    out.line(f"{passed} of {len(sets)} data set(s) pass")
    return passed == len(sets)


def _read(path, info):
    from ..value_files import message_kind, read_pb
    return read_pb(path, message_kind(info.type))


def describe_generated(model, feeds: dict, dims: dict[str, int] | None = None,
                       shapes: dict[str, tuple] | None = None) -> str:
    """One line naming each generated input (those of ``feeds``, as :func:`random_inputs`
    made them with ``dims`` and ``shapes``), its element type and shape, and the value chosen
    for each axis the model leaves open, so that the run can be repeated with ``--dim`` and
    ``--shape``::

        x float32[1,3,224,224] (batch=1), mask int64[1,16] (batch=1, seq=16)

    An input whose shape was given whole says ``(--shape)``; an unnamed or negative declared
    extent is ``axis K=1``. At most :data:`DESCRIBED_INPUTS` inputs are named, the others
    counted. Empty when ``feeds`` is."""
    from ..evaluate.inputs import DESCRIBED_INPUTS, generated_axes, value_text

    shapes = shapes or {}
    open_axes = {name: axes for name, _, axes in generated_axes(model, dims, shapes)}
    parts = []
    for name, value in feeds.items():
        if len(parts) == DESCRIBED_INPUTS:
            parts.append(f"and {len(feeds) - DESCRIBED_INPUTS} more")
            break
        text = f"{printable(name)} {value_text(value)}"
        if name in shapes:
            text += " (--shape)"
        elif open_axes.get(name):
            text += f" ({', '.join(printable(a.replace(' = ', '=')) for a in open_axes[name])})"
        parts.append(text)
    return ", ".join(parts)
