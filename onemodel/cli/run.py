"""``onemodel run FILE``: a model run by onemodel's evaluator (:mod:`onemodel.evaluate`) on
inputs from files (``--input``) or generated (``--random``), each output printed with the
sha256 of its bytes and saved with ``--output-dir`` (:mod:`.output_files`); or its ONNX test
data run and compared (``--test-data``, :mod:`.run_inputs`)."""

from __future__ import annotations

import os
from typing import List, Optional

import typer

from ..errors import InternalError, OneModelError, UsageError, printable, quote
from .application import (
    DebugOpt,
    OutsideOpt,
    ShapeOpt,
    StorageOpt,
    _errors,
    _inputs_given,
    _read_options,
    _seed,
    _storage,
    app,
    err,
    out,
)


@app.command("run")
def run_cmd(
    file: str = typer.Argument(..., metavar="FILE", help="Model to run."),
    input: Optional[List[str]] = typer.Option(None, "--input", "-i", metavar="NAME=FILE.npy",
                                              help="An input value from a .npy file, or a .pb "
                                                   "file holding the message of the input's "
                                                   "type (repeatable; overrides --random)."),
    random: bool = typer.Option(False, "--random", help="Generate the inputs from their types "
                                "(seeded, deterministic)."),
    seed: int = typer.Option(0, "--seed", parser=_seed, metavar="N",
                             help="Seed for --random (an integer >= 0)."),
    dim: Optional[List[str]] = typer.Option(None, "--dim", metavar="NAME=VALUE",
                                            help="Value of a symbolic dimension for --random "
                                                 "(repeatable; unset ones are 1)."),
    shape: Optional[List[str]] = ShapeOpt,
    output_dir: Optional[str] = typer.Option(None, "--output-dir", metavar="DIR",
                                             help="Save each output in this directory as "
                                             "NAME.npy, or NAME.pb (TensorProto) for dtypes "
                                             "numpy cannot load back and for sequences, maps "
                                             "and optionals; characters other than letters, "
                                             "digits and -_. written %XX; the names and files "
                                             "are listed."),
    output_format: str = typer.Option("npy", "--output-format", metavar="npy|pb",
                                      help="--output-dir files: npy (.npy where numpy can load "
                                      "the dtype back, TensorProto .pb where not) or pb (every "
                                      "tensor a .pb); sequences and maps are always .pb."),
    test_data: Optional[str] = typer.Option(None, "--test-data", metavar="DIR",
                                            help="Run the ONNX test data in DIR (input_*.pb, or "
                                            "test_data_set_*/ holding them) and compare with "
                                            "output_*.pb; exit 1 on differences."),
    rtol: Optional[float] = typer.Option(None, "--rtol", help="--test-data: relative tolerance "
                                         "of float outputs (default 1e-3; bfloat16: at least "
                                         "2^-6)."),
    atol: Optional[float] = typer.Option(None, "--atol", help="--test-data: absolute tolerance "
                                         "(default 1e-7)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Run a model with onemodel's evaluator; print each output's name, shape, dtype and the
    sha256 of its bytes (C order), or with --test-data whether the outputs match."""
    from .. import api
    from ..evaluate import random_inputs
    from ..evaluate import run as run_model
    from ..evaluate.input_hints import add_inputs_hint
    from ..evaluate.inputs import check_dims_shapes
    from .run_inputs import describe_generated, graph_inputs, read_input

    with _errors(debug):
        if output_dir == "":  # (refused before the run, not after it)
            raise UsageError("--output-dir: empty path")
        if output_format not in ("npy", "pb"):
            raise UsageError(f"--output-format {output_format!r}: npy or pb")
        if test_data is not None and (input or random):
            raise UsageError("--test-data takes the inputs from its files: not with --input "
                             "or --random")
        from .compare_report import parse_tolerances
        # finite, >= 0, as verify takes them; only with --test-data (nothing else compares)
        parse_tolerances(atol, rtol, None, None, run=test_data is not None, exact=False,
                         needs="--test-data")
        with api.load(file, storage_options=_storage(storage_option, file),
                      **_read_options(allow_outside)) as model:
            if test_data is not None:
                from ..tolerances import ATOL, RTOL
                _run_test_data(model, test_data, RTOL if rtol is None else rtol,
                               ATOL if atol is None else atol, output_dir, output_format)
                return
            given_files = [(f"--input {quote(item.split('=', 1)[0])}", item.split("=", 1)[1])
                           for item in input or [] if "=" in item and item.split("=", 1)[1]]
            if output_dir:  # no output over a file this command reads, before the run
                _output_files(output_dir, output_format, model, given_files, make=False)
            dims, shapes = _inputs_given(dim, shape)
            # (a shape that does not fit, an input too large: named by their flags, the
            # settings of the errors written as the command line's, by _errors)
            check_dims_shapes(model, dims, shapes)
            feeds = random_inputs(model, seed=seed, dims=dims, shapes=shapes) if random else {}
            if not random and not input and model.graph is not None:
                needed = [v.name for v in graph_inputs(model)]
                if needed:
                    hint = " (--dim and --shape size the inputs --random generates)" \
                        if dim or shape else ""
                    raise UsageError(f"the model needs input(s) {', '.join(needed)}: give "
                                     f"--input NAME=FILE.npy, or --random [--seed N]{hint}")
            given = set()
            for item in input or []:
                if "=" not in item:
                    raise UsageError(f"--input {item!r} is not NAME=FILE.npy")
                name, path = item.split("=", 1)
                if not path:
                    raise UsageError(f"--input {item}: empty path")
                given.add(name)
                feeds[name] = read_input(model, name, path)
            generated = {k: v for k, v in feeds.items() if k not in given}
            try:
                results = run_model(model, feeds, tune_malloc=True)  # the process is the command's
            except (OneModelError, InternalError) as e:  # (the one line names the generated
                # inputs; an InternalError gets the model's source too, and still exits 70)
                raise (add_inputs_hint(e, model, dims, shapes, seed=seed) if random
                       else e.at(source=model.source))
            if generated:  # what --random chose, so that the run can be repeated
                err.line(f"inputs: {describe_generated(model, generated, dims, shapes)}")
            files = _output_files(output_dir, output_format, model, given_files) \
                if output_dir else None
            # still inside `with`: an output may be a view of the model's mapped weights
            for name, value in results.items():
                _report_value(name, value, files)
            for text in files.saved_lines() if files else []:
                out.line(text)


def _output_files(directory: str, output_format: str, model, inputs=(), make: bool = True):
    """The OutputFiles of ``run --output-dir``, the directory made first (IoError if not;
    ``make=False``: not made, for the check alone). UsageError when a file an output could be
    saved to is one the command reads: the model's files (:func:`onemodel.formats.inputs.
    input_files`) or ``inputs`` (``(what, path)``: ``--input`` files, the test data)."""
    from ..errors import IoError
    from ..formats.inputs import input_files
    from ..value_files import message_kind
    from .output_files import OutputFiles

    kinds = {v.name: message_kind(v.type) for v in model.graph.outputs} if model.graph else {}
    files = OutputFiles(directory, output_format, kinds, input_files(model) + list(inputs))
    files.refuse_inputs([v.name for v in model.graph.outputs] if model.graph else [])
    if make:
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise IoError(f"cannot create the output directory: {e.strerror or e}",
                          source=directory) from None
    return files


def _run_test_data(model, directory, rtol, atol, output_dir, output_format) -> None:
    """``run --test-data``: exit 1 when an output differs (:mod:`.run_inputs`)."""
    from ..evaluate import run as run_model
    from .run_inputs import run_test_data

    def run(feeds):
        try:
            return run_model(model, feeds, tune_malloc=True)
        except (OneModelError, InternalError) as e:
            raise e.at(source=model.source)

    def files_for(set_dir, make=True):
        if not output_dir:
            return None
        sub = os.path.join(output_dir, os.path.basename(os.path.normpath(set_dir))) \
            if set_dir is not None else output_dir
        return _output_files(sub, output_format, model, test_files, make=make)

    from ..value_files import data_sets
    sets = data_sets(directory)
    test_files = [("a file of the test data", str(p)) for _, ins, outs in sets
                  for p in ins + outs]
    for set_dir, _, _ in sets:  # every data set's outputs checked before anything is run
        files_for(set_dir if len(sets) > 1 else None, make=False)
    if not run_test_data(model, directory, rtol, atol, run, files_for):
        raise typer.Exit(1)


#: Bytes of an output copied at a time to hash one that is not in C order (a view).
_DIGEST_BLOCK = 16 << 20


def _digest(arr) -> str:
    """sha256 of a tensor's elements: its bytes in C order (numpy's ``tobytes()``); for string
    tensors, each element's UTF-8 bytes followed by a NUL byte. No copy of the whole output (an
    output as large as the memory budget allows must not need a second one): a C-order array is
    hashed in place, another (a transposed or broadcast view) a block of rows at a time."""
    import hashlib

    import numpy as np
    h = hashlib.sha256()
    if arr.dtype == object:
        for v in arr.reshape(-1):
            h.update((v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape"))
                     + b"\0")
        return h.hexdigest()
    if arr.ndim == 0 or arr.size == 0:
        h.update(arr.tobytes())
    elif arr.flags.c_contiguous:
        h.update(arr.reshape(-1).view(np.uint8))
    else:
        rows = max(1, _DIGEST_BLOCK // max(1, arr[0].nbytes))
        for i in range(0, arr.shape[0], rows):
            h.update(np.ascontiguousarray(arr[i:i + rows]).reshape(-1).view(np.uint8))
    return h.hexdigest()


def _report_value(name: str, value, files, top: bool = True) -> None:
    """Print one output (a sequence element by element) and save it with ``files`` (an
    :class:`~onemodel.cli.output_files.OutputFiles`, or None): a tensor as ``.npy`` or
    ``.pb``, a sequence, map or optional as one ``.pb``."""
    import numpy as np

    name = printable(name)  # (an output name of the model)
    if isinstance(value, np.ndarray):
        dtype = "string" if value.dtype == object else str(value.dtype)
        out.line(f"{name}: shape {list(value.shape)} dtype {dtype} sha256:{_digest(value)}")
    elif isinstance(value, list):
        out.line(f"{name}: sequence of {len(value)}")
        for i, v in enumerate(value):
            _report_value(f"{name}[{i}]", v, files, top=False)
    elif value is None:
        out.line(f"{name}: empty optional")
    else:
        text = str(value)
        out.line(printable(f"{name}: {type(value).__name__} {text[:60]}"
                           f"{'...' if len(text) > 60 else ''}"))
    if files is not None and top:
        files.save(name, value)

