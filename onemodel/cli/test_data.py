"""``onemodel run --test-data DIR`` and ``--input NAME=FILE.pb``: ONNX test data in, outputs
compared within the Clause 11.5 tolerances of :mod:`onemodel.testdata`."""

from __future__ import annotations

import os

from ..errors import IoError, UsageError, quote
from . import out


def graph_inputs(model) -> list:
    """The graph inputs a caller feeds (those without an initializer), in order."""
    if model.graph is None:
        return []
    inits = model.graph.initializer_map()
    return [v for v in model.graph.inputs if v.name not in inits]


def read_input(model, name: str, path: str):
    """The value of ``--input NAME=PATH``: a ``.pb`` file holds the message of the input's type
    (TensorProto, SequenceProto, MapProto, OptionalProto), any other file is read with
    ``numpy.load``. A ``.npy`` array in a byte order other than the machine's (``np.save`` of a
    ``'>f4'`` array) is the same values: it is converted to native order (one copy). Raises
    IoError naming the input when the file cannot be read."""
    import numpy as np

    from ..testdata import message_kind, read_pb

    if path.endswith(".pb"):
        info = next((v for v in (model.graph.inputs if model.graph else []) if v.name == name),
                    None)
        return read_pb(path, message_kind(info.type if info is not None else None))
    try:
        arr = np.load(path, allow_pickle=False)
    except OSError as e:
        raise IoError(f"cannot read input {quote(name)}: {e.strerror or e}",
                      source=path) from None
    except ValueError as e:  # not a .npy file, or one holding Python objects
        raise IoError(f"cannot read input {quote(name)}: {e}", source=path) from None
    if isinstance(arr, np.ndarray) and not arr.dtype.isnative:  # the same values: one copy
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def run_test_data(model, directory: str, rtol: float, atol: float, run, files_for) -> bool:
    """Run every data set of ``directory`` (:func:`onemodel.testdata.data_sets`) through
    ``run(feeds) -> {output: value}`` and compare with its ``output_*.pb``; print per data set
    ``pass`` or, per output that differs, the differences. ``input_J.pb`` feeds the J-th graph
    input without an initializer, ``output_J.pb`` is the J-th graph output, each file decoded as
    the message of that value's type. ``files_for(set_dir)`` gives the OutputFiles of one data
    set (or None). Returns True when every data set passes. Raises UsageError when a data set
    has more files than the graph has inputs or outputs."""
    from ..testdata import compare, data_sets

    sets = data_sets(directory)
    ins = graph_inputs(model)
    outs = list(model.graph.outputs) if model.graph is not None else []
    passed = 0
    for set_dir, in_paths, out_paths in sets:
        label = os.path.basename(os.path.normpath(set_dir))
        if len(in_paths) > len(ins) or len(out_paths) > len(outs):
            raise UsageError(f"--test-data {label}: {len(in_paths)} input and {len(out_paths)} "
                             f"output files for a graph of {len(ins)} inputs to feed and "
                             f"{len(outs)} outputs")
        feeds = {v.name: _read(p, v) for v, p in zip(ins, in_paths)}
        want = {v.name: _read(p, v) for v, p in zip(outs, out_paths)}
        results = run(feeds)
        problems = [d for name, w in want.items()
                    for d in compare(results.get(name), w, rtol, atol, name)]
        files = files_for(set_dir if len(sets) > 1 else None)
        if files is not None:
            for name, value in results.items():
                files.save(name, value)
            for name, path in files.written:
                out.line(f"saved {name} -> {path}")
        if problems:
            out.line(f"{label}: {len(problems)} difference(s) in {len(want)} output(s)")
            for d in problems:
                out.line(f"  {d.text()}")
        else:
            passed += 1
            out.line(f"{label}: pass ({len(want)} output(s) within tolerance)")
    out.line(f"{passed} of {len(sets)} data set(s) pass")
    return passed == len(sets)


def _read(path, info):
    from ..testdata import message_kind, read_pb
    return read_pb(path, message_kind(info.type))
