"""``onemodel convert SRC DST``: ONNX <-> OneModel, or a change of ONNX layout, bit-identical
(:func:`onemodel.api.convert`); with ``--opset``, to other operator set versions
(:mod:`onemodel.opset_convert`), with ``--verify-run`` proven by running both
(:mod:`onemodel.opset_convert.verify_run`); the writer options' errors spelled with the
flags."""

from __future__ import annotations

import contextlib
from typing import List, Optional

import typer

from ..errors import UnsupportedError, UsageError, printable
from .application import (
    FLAGS,
    DebugOpt,
    OutsideOpt,
    QuietOpt,
    ShapeOpt,
    StorageOpt,
    _count,
    _errors,
    _human,
    _inputs_given,
    _no_collections,
    _read_options,
    _seed,
    _storage,
    app,
    err,
    flag_of,
    out,
)
from .redact import shown

#: The flag of each writer option that ``convert`` sets or that a writer takes
#: (``layout``: the flag that set it, or :data:`_LAYOUT_FLAGS` when listed as taken); options
#: without a flag are not shown.
_CONVERT_FLAGS = {name: FLAGS[name] for name in (
    "strict_v1", "digests", "external_data", "align", "threshold", "force", "max_shard_size",
    "allow_outside", "storage_options")}
#: The flags that set the writer option ``layout`` (``--layout NAME``, or one of its values).
_LAYOUT_FLAGS = ("--layout", "--inline", "--external-data-per-tensor")


@contextlib.contextmanager
def _option_flags(layout_flag: Optional[str]):
    """Errors about writer options name the flags the user typed, not the Python keywords:
    an :class:`~onemodel.errors.OptionError` is spelled with flags (``--align does not apply to
    onemodel output (it takes: --strict-v1)``), and a writer's refusal of an option's value (a
    message that starts with the option's name: ``align must be a power of two ...``) is a
    :class:`~onemodel.errors.UsageError` that starts with its flag instead (``--align 3`` is a
    value the user typed, not something the file needs that onemodel lacks). ``layout_flag``:
    the flag that set ``layout`` (``--layout``, ``--inline`` or ``--external-data-per-tensor``),
    named when that option is refused. An :class:`~onemodel.errors.AdviceError` (the 2 GiB
    refusal's ``force=True``) is spelled with the flags too (``--force``, ``--layout file``)."""
    from ..errors import AdviceError, OptionError

    def spell(name: str) -> Optional[str]:
        if name == "layout":
            given = layout_flag if "layout" in refused else None
            return given or ", ".join(_LAYOUT_FLAGS)
        return _CONVERT_FLAGS.get(name)

    refused: tuple = ()
    try:
        yield
    except OptionError as e:
        refused = e.options
        e.message = e.spelled(spell)
        raise
    except AdviceError as e:  # settings advised: the flags (--force, not force=True)
        raise e.spell_as(flag_of)
    except UnsupportedError as e:  # an option's value refused: the flag's usage error
        if e.settings and all(x.name in _CONVERT_FLAGS for x in e.settings):
            raise UsageError(e.spelled(flag_of)) from None
        raise


_SIZE_UNITS = {"": 1, "b": 1, "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
               "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def byte_size(text: str, flag: str) -> int:
    """A size in bytes as the command line takes it: an integer (``5000000000``), or a number
    with a unit as Hugging Face spells ``max_shard_size`` (``5GB``, ``500MB``, ``10GiB``,
    ``1.5GB``): KB, MB, GB, TB decimal (10**3 ...), KiB, MiB, GiB, TiB binary (2**10 ...), B
    bytes; case-insensitive, a space allowed before the unit. Returns an int >= 0 (a fractional
    byte count rounds down). Raises UsageError naming ``flag`` for anything else."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", text, re.IGNORECASE)
    unit = _SIZE_UNITS.get(m.group(2).lower()) if m else None
    if unit is None:
        raise UsageError(f"{flag} takes a size in bytes: an integer or a number with a unit "
                         f"(KB, MB, GB decimal; KiB, MiB, GiB binary: 5GB, 500MB, 10GiB), "
                         f"not {text!r}")
    number = m.group(1)
    if "." not in number:
        return int(number) * unit
    from fractions import Fraction
    return int(Fraction(number) * unit)


def opset_targets(values: List[str]) -> dict:
    """``--opset`` values (``13``, ``ai.onnx.ml=3``, ``ai.onnx=13``) as a dict domain ->
    version (``""`` for ai.onnx); UsageError for anything else or a domain given twice."""
    from ..opset_convert import targets_of

    out: dict = {}
    for text in values:
        domain, eq, version = text.rpartition("=")
        if (eq and not domain) or not version.strip().isdigit():
            raise UsageError(f"--opset takes VERSION or DOMAIN=VERSION (13, ai.onnx.ml=3), not "
                             f"{text!r}")
        domain = "" if domain == "ai.onnx" else domain
        if domain in out:
            raise UsageError(f"--opset gives {domain or 'ai.onnx'} twice")
        out[domain] = int(version)
    try:
        return targets_of(out)
    except UsageError as e:  # (the library's words, with the flag named)
        raise UsageError(f"--opset: {e.message}") from None


@app.command()
def convert(
    src: str = typer.Argument(..., metavar="SRC",
                              help="Model to read (.onnx, .onemodel; path or URL)."),
    dst: str = typer.Argument(..., metavar="DST", help="Where to write it."),
    to: Optional[str] = typer.Option(None, "--to", metavar="FORMAT", case_sensitive=False,
                                     help="Output format: onnx or onemodel (default: from "
                                     "DST's suffix)."),
    strict_v1: bool = typer.Option(False, "--strict-v1", help="Write plain OneModel v1 without "
                                   "the ONNX-preservation extension; list what is left out."),
    digests: bool = typer.Option(False, "--digests", help="OneModel output: record each "
                                 "tensor's content digest and the model digest; readers check "
                                 "a tensor's bytes on first use."),
    external_data: Optional[str] = typer.Option(None, "--external-data", metavar="FILE",
                                                help="ONNX output: put weights in this data file."),
    per_tensor: bool = typer.Option(False, "--external-data-per-tensor",
                                    help="ONNX output: one data file per tensor."),
    inline: bool = typer.Option(False, "--inline", help="ONNX output: all weights inline."),
    layout_name: Optional[str] = typer.Option(None, "--layout", metavar="LAYOUT",
                                              help="ONNX output layout: keep, inline, file, "
                                              "per_tensor, safetensors (a data file name "
                                              "ending in .safetensors selects it) or a "
                                              "registered layout plugin's name."),
    max_shard_size: Optional[str] = typer.Option(None, "--max-shard-size", metavar="SIZE",
                                                 help="Layout safetensors: shards of at most "
                                                 "this many tensor bytes (5000000000, 5GB, "
                                                 "500MB, 10GiB), with an index json."),
    into: Optional[str] = typer.Option(None, "--into", metavar="MODEL", help="SRC is a "
                                       ".safetensors file: replace MODEL's initializers by "
                                       "name with its tensors and write the result to DST."),
    align: Optional[int] = typer.Option(None, "--align", metavar="BYTES",
                                        help="Alignment of data file offsets in bytes (default "
                                        "4096)."),
    threshold: Optional[int] = typer.Option(None, "--threshold", metavar="BYTES",
                                            help="Tensors smaller than this many bytes stay "
                                            "inline (default 1024)."),
    force: bool = typer.Option(False, "--force", help="Write an inline ONNX file over 2 GiB; "
                               "overwrite data files that may belong to another model."),
    opset: Optional[List[str]] = typer.Option(None, "--opset", metavar="[DOMAIN=]VERSION",
                                              help="Convert to this operator set version "
                                              "(13: ai.onnx, 1-28; ai.onnx.ml=3, 1-5), up or "
                                              "down; repeatable. Nodes that cannot be converted "
                                              "are listed, nothing is written (exit 2)."),
    ir_version: Optional[int] = typer.Option(None, "--ir-version", metavar="N",
                                             help="With --opset: the IR version to write "
                                             "(default: the one the target opset requires)."),
    no_check: bool = typer.Option(False, "--no-check", help="With --opset: do not check the "
                                  "converted model (by default an error finding it has and "
                                  "the original has not fails the conversion)."),
    verify_run: bool = typer.Option(False, "--verify-run", help="With --opset: also run the "
                                    "original and the converted model on generated inputs "
                                    "and compare their outputs within the Clause 11.5 "
                                    "tolerances; a difference names the first differing node, "
                                    "exits 1 and writes nothing."),
    seed: Optional[int] = typer.Option(None, "--seed", parser=_seed, metavar="N",
                                       help="With --verify-run: seed of the generated inputs "
                                       "(an integer >= 0; default 0)."),
    dim: Optional[List[str]] = typer.Option(None, "--dim", metavar="NAME=VALUE",
                                            help="With --verify-run: value of a symbolic "
                                            "dimension of the generated inputs (repeatable; "
                                            "unset ones are 1)."),
    shape: Optional[List[str]] = ShapeOpt,
    engine: Optional[str] = typer.Option(None, "--engine", help="With --verify-run: the "
                                         "engine both models run with: onemodel (default), "
                                         "onnxruntime or one registered (group "
                                         "onemodel.engines)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    quiet: bool = QuietOpt,
    debug: bool = DebugOpt,
):
    """Convert SRC to DST (ONNX <-> OneModel, or ONNX layout changes), bit-identical; with
    --opset, to other operator set versions."""
    from .. import api

    with _errors(debug):
        options: dict = {}
        if strict_v1:
            options["strict_v1"] = True
        if digests:
            options["digests"] = True
        layout = [flag for flag, on in (("inline", inline), ("per_tensor", per_tensor),
                                        ("file", external_data is not None)) if on]
        if len(layout) > 1:
            raise UsageError("choose one of --inline, --external-data, "
                             "--external-data-per-tensor")
        if layout_name is not None:
            from ..formats.layouts import names as layout_names
            known = layout_names()  # built-in and registered layout plugins
            if layout_name not in known:  # (a value the user typed: whatever the output)
                raise UsageError(f"--layout {layout_name!r}: one of {', '.join(known)}")
            if layout and layout[0] != "file":
                raise UsageError("choose one of --layout, --inline, --external-data-per-tensor")
            layout = [layout_name]
        if layout and (layout[0] != "file" or layout_name):  # --external-data alone: "file"
            options["layout"] = layout[0]
        if external_data is not None:
            options["external_data"] = external_data
        for name, value in (("align", align), ("threshold", threshold),
                            ("max_shard_size", None if max_shard_size is None
                             else byte_size(max_shard_size, "--max-shard-size"))):
            if value is not None:
                options[name] = value
        if force:
            options["force"] = True
        read_options = _read_options(allow_outside)
        from ..storage.progress import Progress
        layout_flag = "--layout" if layout_name is not None else \
            {"inline": "--inline", "per_tensor": "--external-data-per-tensor"}.get(
                options.get("layout"))
        targets = opset_targets(opset) if opset else None
        if targets is None and (ir_version is not None or no_check or verify_run):
            raise UsageError("--ir-version, --no-check and --verify-run go with --opset")
        if not verify_run and (seed is not None or dim or shape or engine is not None):
            raise UsageError("--seed, --dim, --shape and --engine go with --verify-run")
        dims, shapes = _inputs_given(dim, shape)
        done: list = []
        proofs: list = []  # (the RunVerification of --verify-run, the inputs described)
        if targets is not None:
            if into is not None:
                raise UsageError("--opset does not go with --into")
            from ..opset_convert import convert_checked
            from ..opset_convert.engine import check_ir_version
            try:
                check_ir_version(ir_version)  # (before anything is read)
            except UsageError as e:
                raise UsageError(f"--ir-version: {e.message}") from None
            if verify_run:
                from .. import engines as registry
                registry.get(engine or "onemodel")  # (before anything is read)
                if (engine or "onemodel") == "onemodel":  # the process is the command's: tune
                    from ..evaluate.memory import tune_allocator  # as `run` does
                    tune_allocator()

            def transform(model):
                try:
                    done.append(convert_checked(model, targets, ir_version,
                                                check=not no_check, share=True))
                except UsageError as e:  # (an --ir-version older than the opsets require)
                    raise UsageError(f"--ir-version: {e.message}") from None
                if verify_run:
                    proofs.append(_verify_run(model, done[-1].model, seed or 0, dims, shapes,
                                              engine or "onemodel"))
                    if not proofs[-1][0].equal:
                        raise _Differs()  # (before anything is written)
                return done[-1].model

            options["transform"] = transform
        try:
            # (a model is a tree of records: no collection walks them while they are made;
            # --verify-run's evaluation keeps collections, as `run` does)
            with Progress("convert", quiet=quiet) as bar, _option_flags(layout_flag), \
                    (_no_collections() if not verify_run else contextlib.nullcontext()):
                result = api.convert(src, dst, to=to, into=into,
                                     storage_options=_storage(storage_option, src, dst),
                                     read_options=read_options, progress=bar, **options)
        except UnsupportedError as e:
            refusals = getattr(e, "refusals", None)  # (ConversionRefused: every node listed)
            if refusals is None:
                raise
            n = len(refusals)
            err.line(f"Unsupported: cannot convert {n} node{'s' if n != 1 else ''} (each on a "
                     f"line below); {shown(dst)} not written")
            for path, op, reason in refusals:
                err.line(printable(f"  {path}: {op}: {reason}"))
            raise typer.Exit(2) from None
        except _Differs:
            proof = proofs[-1][0]
            out.line(printable(f"different: {proof.message()} (--verify-run; {shown(dst)} "
                               "not written)"))
            if not quiet:
                out.line(printable(f"  inputs: {proofs[-1][1]}"))
                lines = proof.bisect.lines() if proof.first_node is not None else []
                for line in lines[1:]:
                    out.line(printable(line))
            raise typer.Exit(1) from None
        if not quiet:
            out.line(f"{shown(src)} ({result.source_format}) -> {shown(dst)} "
                     f"({result.target_format}): "
                     f"{_count(result.tensors, 'tensor')}, {_human(result.tensor_bytes)}")
            for conv in done:
                m = conv.model
                shown_opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}"
                                         for o in m.opset_imports)
                out.line(f"  opset: {shown_opsets}; IR version {m.ir_version}")
                for note in conv.notes:
                    out.line(printable(f"  note: {note}"))
            for proof, described in proofs:
                n = len(proof.outputs_compared)
                out.line(printable(f"  verify-run: {_count(n, 'output')} within tolerance "
                                   f"(Clause 11.5) on {proof.engine}; inputs: {described}"))
            for item in result.omitted:
                out.line(printable(f"  left out (--strict-v1): {item}"))
            if result.padding:
                n = len(result.padding)
                out.line(f"  {n} padding entr{'y' if n == 1 else 'ies'} "
                         f"({', '.join(result.padding[:3])}{', ...' if n > 3 else ''}) in the "
                         f"file: they keep each tensor at a multiple of --align (default 64 "
                         f"bytes); a reader that lists every key sees them; --align 1 writes "
                         f"none")


class _Differs(Exception):
    """--verify-run found a difference: the conversion stops before anything is written."""


def _verify_run(original, converted, seed: int, dims: dict, shapes: dict, engine: str):
    """``--verify-run``: :func:`onemodel.opset_convert.verify_run.verify_conversion` of the
    model read and the converted one, and its inputs described as ``run`` describes them
    (``x float32[4,3] (N=4)``)."""
    from ..opset_convert.verify_run import verify_conversion
    from .run_inputs import describe_generated

    proof = verify_conversion(original, converted, seed=seed, dims=dims, shapes=shapes,
                              engine=engine)
    return proof, describe_generated(original, proof.inputs, dims, shapes) or "none"
