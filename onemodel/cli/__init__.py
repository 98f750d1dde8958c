"""The ``onemodel`` command line (typer, rich). Thin: parse, call the API, print.

Exit status: 0 success (``verify``: the models are equal), 1 ``verify`` found a difference,
2 error, 70 a kernel's internal error (:class:`~onemodel.errors.InternalError`, a bug). An error
prints one line naming its kind (Malformed, InvalidModel, Unsupported, Io), the field path, the
offset and the file; ``--debug`` prints the traceback instead.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import List, Optional

import typer

from ..errors import InternalError, OneModelError, UnsupportedError, UsageError, printable, quote
from .redact import redact, shown


def _click():
    """The click module typer runs on (already imported with typer: no import of its own)."""
    return getattr(typer.core, "_click", None) or getattr(typer.core, "click")


class _Group(typer.core.TyperGroup):
    """typer's command group, whose own usage errors (``Got unexpected extra argument(s)
    (URL)``, ``Invalid value for '--seed': 'URL'``, ``No such command 'x'``) are one
    :func:`redact`-ed line, ``Usage error: ... Try 'onemodel CMD --help' for help.``, with exit
    status 2, as every other error (not typer's box of rich panels); ``--help`` and the help
    shown for no arguments are typer's. Every command's arguments are paths or URLs: an empty
    one is such a usage error (``Invalid value for 'FILE': empty path``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for command in self.commands.values():
            for param in command.params:
                if param.param_type_name == "argument" and param.callback is None:
                    param.callback = _not_empty

    def make_context(self, *args, **kwargs):
        with _one_line_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with _one_line_usage_errors(ctx):
            return super().invoke(ctx)


def _not_empty(ctx, param, value):
    """Callback of every command argument (a path or URL): an empty one is refused."""
    if value == "":
        raise _click().exceptions.BadParameter("empty path", ctx=ctx, param=param)
    return value


@contextlib.contextmanager
def _one_line_usage_errors(group_ctx=None):
    """A usage error of click's (one of its parser, of a parameter's type or callback, an
    unknown command) as one ``Usage error:`` line ending in where to find the help, and exit
    status 2; ``group_ctx`` (the group's context) names the command when the error has no
    context of its own (an option given a value it does not take)."""
    click = _click()
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        raise  # (the help text itself: typer shows it)
    except click.exceptions.UsageError as e:
        text = " ".join(e.format_message().split())
        ctx = e.ctx
        path = ctx.command_path if ctx is not None else None
        if ctx is None and group_ctx is not None:
            ctx = group_ctx
            path = " ".join(filter(None, (ctx.command_path, ctx.invoked_subcommand)))
        if ctx is not None and ctx.help_option_names:
            text += ("" if text.endswith((".", "?", "!")) else ".") + \
                f" Try '{path} {ctx.help_option_names[-1]}' for help."
        err.line(f"Usage error: {text}")
        raise typer.Exit(2) from None
    except click.exceptions.ClickException as e:
        e.message = redact(e.message)
        raise


app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  cls=_Group, context_settings={"help_option_names": ["-h", "--help"]},
                  help="Store, convert and verify ONNX and OneModel models, bit-identical.")


class _LazyConsole:
    """A rich Console created on first use (importing rich costs ~20 ms of every command).

    :meth:`line` prints plain text without rich at all: most output is plain lines, and rich would
    also read ``:name:`` in a file name as an emoji code. Every line is :func:`redact`-ed: no URL
    credential, presigned query or secret storage option reaches the terminal.
    """

    def __init__(self, **options):
        self._options = options
        self._console = None

    def line(self, text: str) -> None:
        """Print ``text`` (URLs and secrets masked, every character that is not printable
        escaped, :func:`onemodel.errors.printable`; otherwise as given) and a newline on this
        console's stream; a text of several lines is masked line by line. (Strings of a model
        are made printable where they are put in a line, so that a newline in one is escaped
        too; this is the net under them.)"""
        if "\n" in text:
            lines = [redact(part) for part in text.split("\n")]
            text = "\n".join(lines)
            if not text.replace("\n", "").isprintable():  # (one pass for a 7 MB --json)
                text = "\n".join(map(printable, lines))
        else:
            text = printable(redact(text))
        try:
            print(text, file=sys.stderr if self._options.get("stderr") else sys.stdout)
        except BrokenPipeError:
            _stdout_gone()

    def __getattr__(self, name):
        if self._console is None:
            from rich.console import Console
            self._console = Console(**self._options)
            # rich's own answer to a closed pipe is SystemExit(1): "different" for verify
            self._console.on_broken_pipe = _stdout_gone
        return getattr(self._console, name)


# emoji=False: a name such as "m:smile:.onnx" in a table or title stays as it is
out = _LazyConsole(highlight=False, soft_wrap=True, emoji=False)
err = _LazyConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False)

DebugOpt = typer.Option(False, "--debug", help="Show the full traceback on errors, and what "
                         "happened on the way (HTTP redirects) as debug: lines.")
QuietOpt = typer.Option(False, "--quiet", "-q", help="Print nothing but errors; no progress.")
OutsideOpt = typer.Option(False, "--allow-external-outside", help="Resolve external data "
                          "outside the model's directory or through symbolic links "
                          "(Clause 15.3; never the default).")
StorageOpt = typer.Option(None, "--storage-option", "-S", metavar="KEY=VALUE",
                          help="fsspec storage option for URLs (repeatable): VALUE is JSON or "
                          "text; a dotted KEY nests, s3.KEY or http.headers.NAME for one "
                          "protocol's section.")


def _seed(value) -> int:
    """``--seed``'s parser: an integer >= 0 (decimal digits), else click's usage error naming
    the flag, ``Invalid value for '--seed': 'abc' is not an integer >= 0`` (not click's
    ``is not a valid int range``)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value  # (the default)
    text = str(value).strip()
    if not text.isascii() or not text.isdigit():
        raise _click().exceptions.BadParameter(f"{str(value)!r} is not an integer >= 0")
    return int(text)


ShapeOpt = typer.Option(None, "--shape", metavar="NAME=D0,D1,...",
                        help="Whole shape of a generated input (repeatable; for inputs whose "
                        "dimensions have no names).")


class Terminated(BaseException):
    """SIGTERM arrived (``timeout``, ``kill``, a container stopping): raised in the main thread so
    that every open sink aborts and removes its temporary file, as on Ctrl-C."""


def _on_sigterm(signum, frame):
    raise Terminated()


#: Exit status of an :class:`~onemodel.errors.InternalError` (a kernel's bug, "please report"):
#: ``EX_SOFTWARE`` of sysexits.h, apart from 2 (the model, its inputs or the command line).
EXIT_INTERNAL = 70

#: Exit status when stdout's reader went away (``onemodel info m.onnx | head -1``): that of a
#: process ended by SIGPIPE, as other Unix tools give (128 + 13), and unlike 1 (verify: differ).
EXIT_PIPE = 141


def _stdout_gone() -> None:
    """Point stdout at /dev/null so that nothing else fails on the closed pipe (not even the
    flush at exit), then stop quietly with :data:`EXIT_PIPE`."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a test runner): nothing to quiet
        pass
    raise typer.Exit(EXIT_PIPE)


@contextlib.contextmanager
def _errors(debug: bool):
    """Turn every failure into one line on stderr and exit status 2 (:data:`EXIT_INTERNAL` for
    a bug: an unexpected exception, ``internal error: T: ...``, or an
    InternalError, whose line reads ``internal error in kernel K for node N: ...; please report
    it``); with --debug the full traceback is printed instead (the exit status stays the same,
    so scripts read it the same way).
    Ctrl-C exits 130 and SIGTERM 143 (after the writes in progress are undone); a closed
    stdout exits :data:`EXIT_PIPE` without a message. With --debug the messages of the
    ``onemodel`` loggers at DEBUG level (an HTTP redirect: :mod:`onemodel.storage.redirects`)
    are printed too, each as one masked ``debug:`` line on stderr."""
    handler = _debug_log() if debug else None
    try:
        yield
    except typer.Exit:
        raise
    except BrokenPipeError:
        _stdout_gone()
    except KeyboardInterrupt:
        err.line("interrupted")
        raise typer.Exit(130) from None
    except Terminated:
        err.line("terminated")
        raise typer.Exit(143) from None
    except Exception as e:
        if debug:  # the traceback masked like every other line
            import traceback
            for text in traceback.format_exc().splitlines():
                err.line(text)
        elif isinstance(e, UsageError):  # (a OneModelError: tested first)
            err.line(f"Usage error: {e}")
        elif isinstance(e, (OneModelError, InternalError)):  # InternalError: its own line
            err.line(str(e))
        else:  # a bug: still one line
            err.line(f"internal error: {type(e).__name__}: {e} (run with --debug for the "
                     "traceback)")
        raise typer.Exit(2 if isinstance(e, OneModelError) else EXIT_INTERNAL) from None
    finally:
        if handler is not None:
            import logging
            logging.getLogger("onemodel").removeHandler(handler)


def _debug_log():
    """A handler on the ``onemodel`` logger, at DEBUG level, printing each record as one
    ``debug:`` line on stderr through :func:`redact` (``err.line``); the handler, to remove."""
    import logging

    class _Lines(logging.Handler):
        def emit(self, record):
            try:
                text = record.getMessage()
            except Exception:  # a bad format string: the record as it is
                text = str(record.msg)
            err.line(f"debug: {' '.join(text.split())}")

    handler = _Lines(logging.DEBUG)
    logger = logging.getLogger("onemodel")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    return handler


#: Differences verify collects at most (the report says "at least" when it is reached).
REPORT_LIMIT = 100


def _storage(items: Optional[List[str]], *targets: str) -> Optional[dict]:
    """``--storage-option`` values as the API's ``storage_options``; their secret values are
    masked in everything printed from now on. ``targets``: every file or URL the command
    opens; options given when all of them are local are refused (UsageError), not ignored."""
    if not items:  # (nothing to parse, mask or check: no import of the parsers and json)
        return None
    from ..storage import check_storage_options
    from .redact import add_secrets
    from .values import parse_storage_options

    options = parse_storage_options(items)
    add_secrets(options)
    check_storage_options(options, *targets, name="--storage-option")
    return options


def _inputs_given(dim: Optional[List[str]], shape: Optional[List[str]]) -> tuple[dict, dict]:
    """``(dims, shapes)`` from ``--dim`` and ``--shape``, parsed only: whether they fit the
    model is checked by ``onemodel.evaluate.inputs.check_dims_shapes``, alike for ``run``,
    ``verify --run`` and ``verify``."""
    from .values import parse_dims, parse_shapes

    return parse_dims(dim), parse_shapes(shape)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _read_options(allow_outside: bool) -> dict:
    return {"allow_outside": True} if allow_outside else {}


def _human(n: int) -> str:
    from ..storage.progress import binary_size
    return binary_size(n)


#: The flag of each writer option that ``convert`` sets or that a writer takes
#: (``layout``: the flag that set it, or :data:`_LAYOUT_FLAGS` when listed as taken); options
#: without a flag are not shown.
_CONVERT_FLAGS = {"strict_v1": "--strict-v1", "digests": "--digests",
                  "external_data": "--external-data",
                  "align": "--align", "threshold": "--threshold", "force": "--force",
                  "max_shard_size": "--max-shard-size",
                  "allow_outside": "--allow-external-outside",
                  "storage_options": "--storage-option"}
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

    def setting(name: str, value) -> Optional[str]:
        if (name, value) == ("layout", "inline"):
            return "--inline"
        flag = "--layout" if name == "layout" else _CONVERT_FLAGS.get(name)
        if flag is None:
            return None
        return flag if value is True else f"{flag} {value}"

    refused: tuple = ()
    try:
        yield
    except OptionError as e:
        refused = e.options
        e.message = e.spelled(spell)
        raise
    except AdviceError as e:  # settings advised: the flags (--force, not force=True)
        e.message = e.spelled(setting)
        raise
    except UnsupportedError as e:
        word = e.message.split(" ", 1)[0]
        if word in _CONVERT_FLAGS:
            raise UsageError(_CONVERT_FLAGS[word] + e.message[len(word):]) from None
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
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    quiet: bool = QuietOpt,
    debug: bool = DebugOpt,
):
    """Convert SRC to DST (ONNX <-> OneModel, or ONNX layout changes), bit-identical."""
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
        with Progress("convert", quiet=quiet) as bar, _option_flags(layout_flag):
            result = api.convert(src, dst, to=to, into=into,
                                 storage_options=_storage(storage_option, src, dst),
                                 read_options=read_options, progress=bar, **options)
        if not quiet:
            out.line(f"{shown(src)} ({result.source_format}) -> {shown(dst)} "
                     f"({result.target_format}): "
                     f"{_count(result.tensors, 'tensor')}, {_human(result.tensor_bytes)}")
            for item in result.omitted:
                out.line(printable(f"  left out (--strict-v1): {item}"))
            if result.padding:
                n = len(result.padding)
                out.line(f"  {n} padding entr{'y' if n == 1 else 'ies'} "
                         f"({', '.join(result.padding[:3])}{', ...' if n > 3 else ''}) in the "
                         f"file: they keep each tensor at a multiple of --align (default 64 "
                         f"bytes); a reader that lists every key sees them; --align 1 writes "
                         f"none")


@app.command()
def info(
    file: str = typer.Argument(..., metavar="FILE", help="Model file or URL."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    shapes: bool = typer.Option(False, "--shapes", help="Also list every value of every graph "
                                "with its inferred type and shape (shape inference)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Show a model: IR and opsets, producer, inputs and outputs, operators, weights (with
    --shapes, every value's inferred type). A safetensors weights file: what it is and its
    tensors."""
    global _nothing_at_exit
    with _errors(debug):
        try:
            _info_of_model(file, as_json, shapes, allow_outside, storage_option)
        except UnsupportedError as e:
            from ..formats.layouts import weights_layout
            layout = weights_layout(note=e.message)
            if layout is None:
                raise
            _weights_listing(layout, file, as_json, _storage(storage_option, file))
    _nothing_at_exit = True  # printed; nothing of the model needs tearing down


def _info_of_model(file, as_json, shapes, allow_outside, storage_option) -> None:
    """``info`` of a model: load it, summarize, print (text or JSON)."""
    from .. import api
    from ..errors import IoError
    from ..storage.progress import Progress
    from ..summary import summarize

    storage = _storage(storage_option, file)
    unread: list = []  # the errors of the tensors whose data files could not be read
    failed = None  # the error of loading the model whole, raised once the structure is shown
    with _no_collections():
        try:
            with Progress("read", quiet=as_json) as bar:
                model = api.load(file, storage_options=storage, progress=bar,
                                 **_read_options(allow_outside))
        except IoError as e:  # a data file missing: the structure, and which file
            from .unread_data import load_structure
            model, unread = load_structure(file, e, storage_options=storage,
                                           allow_outside=allow_outside)
            failed = e
        with model:
            s = summarize(model)
            # (the report walks every tensor again: only for a model that has external data)
            s["external_data"] = external_report(model) if s["tensors"]["external"] else []
            if unread:
                from .unread_data import mark_unread
                mark_unread(s["external_data"], model, unread)
            if shapes:
                from .infer import shape_listing
                s.update(shape_listing(model))
    if _own_process:  # freed with the process, not record by record on return
        _kept_to_exit.append(model)
    s["source"] = shown(s["source"])
    if as_json:
        import json
        out.line(json.dumps(s, indent=2))
    else:
        _print_summary(s)
    if failed is not None:  # shown: still an error (exit 2), its line on stderr
        raise failed


def _weights_listing(layout, file: str, as_json: bool, storage_options) -> None:
    """``info`` of a weights file of ``layout`` (a safetensors file: what
    :func:`onemodel.formats.detect` refuses with the layout's ``weights_note``, the model reader
    having found no model): the note that it is no model, then its tensors (key, dtype, shape,
    bytes; padding entries marked) from its checked header. Raises what the header check
    raises for a broken one (MalformedError, UnsupportedError), IoError when it cannot be
    read."""
    from ..storage import open_source

    note = layout.weights_note
    src = open_source(file, storage_options=storage_options)
    try:
        metadata, rows = layout.list_weights(src, file)
    finally:
        close = getattr(src, "close", None)
        if close is not None:
            close()
    if as_json:
        import json
        out.line(json.dumps({"source": shown(file), "format": layout.name, "model": False,
                             "note": note, "metadata": metadata,
                             "tensors": rows}, indent=2))
        return
    tensors = [r for r in rows if not r["padding"]]
    out.line(f"{shown(file)}: {note}")
    out.line(f"tensors: {len(tensors)}, {_human(sum(r['bytes'] for r in tensors))}"
             + (f" (+{len(rows) - len(tensors)} padding entries)" if len(rows) > len(tensors)
                else ""))
    for r in rows:
        out.line(f"  {printable(r['name'])}  {printable(r['dtype'])}{r['shape']}  "
                 f"{_human(r['bytes'])}"
                 + ("  (padding)" if r["padding"] else ""))


def external_report(model) -> list[dict]:
    """Per external data file: bytes referenced, unreferenced, alignment (ONNX models only)."""
    if model.format != "onnx":
        return []
    from ..formats.onnx.external_report import external_data_report
    return external_data_report(model)


def _summary_blocks(s: dict) -> list:
    """What ``info`` prints, as :func:`onemodel.cli.tables.draw` takes it: lines and tables."""
    from ..storage.progress import binary_size
    from .tables import Table

    # every string of the model is made printable (escape codes, newlines: errors.printable)
    p = printable
    blocks: list = [("bold", p(str(s["source"])), f"  format {s['format']}, IR version "
                     f"{s['ir_version']}")]
    opsets = ", ".join(f"{p(o['domain']) or 'ai.onnx'} {o['version']}" for o in s["opsets"])
    blocks.append(("line", f"opsets: {opsets}"))
    prod = s["producer"]
    if prod["name"] or prod["version"]:
        blocks.append(("line", f"producer: {p(prod['name'])} {p(prod['version'])}".rstrip()))
    for title, values in (("inputs", s["inputs"]), ("outputs", s["outputs"])):
        t = Table(title, [("name", "left"), ("type", "left")])
        for v in values:
            t.add_row(p(redact(v["name"])), p(v["type"]))
        blocks.append(t)
    t = Table(f"nodes: {s['nodes']}", [("op_type", "left"), ("count", "right")])
    for op, n in s["ops"].items():
        t.add_row(p(op), str(n))
    blocks.append(t)
    init = s["initializers"]
    if not init["count"]:
        blocks.append(("line", "initializers: none"))
    else:
        t = Table(f"initializers: {init['count']}, {binary_size(init['bytes'])}",
                  [("dtype", "left"), ("count", "right"), ("bytes", "right")])
        for dt, e in init["by_dtype"].items():
            t.add_row(dt, str(e["count"]), binary_size(e["bytes"]))
        blocks.append(t)
    if s["functions"]:
        blocks.append(("line", "functions: " + ", ".join(map(p, s["functions"]))))
    for f in s.get("external_data", []):
        blocks.append(("line", _data_file_line(f)))
    if "values" in s:  # info --shapes
        from .infer import shape_blocks
        blocks += shape_blocks(s)
    return blocks


def _print_summary(s: dict) -> None:
    """Print ``info``'s summary: drawn by :mod:`onemodel.cli.tables` when it can draw it as rich
    would, else by rich. Titles and the text after the bold source go through rich markup
    (their text never holds ``[``); every other text is escaped; lines are redacted."""
    from .tables import Table, draw

    blocks = _summary_blocks(s)
    marked = [b.title if isinstance(b, Table) else b[2] for b in blocks
              if isinstance(b, Table) or b[0] == "bold"]
    if not any("[" in text for text in marked):
        plain = [("line", redact(b[1])) if isinstance(b, tuple) and b[0] == "line" else b
                 for b in blocks]
        try:
            if draw(plain, sys.stdout):
                return
        except BrokenPipeError:
            _stdout_gone()
    _print_rich(blocks)


def _print_rich(blocks: list) -> None:
    """Print ``blocks`` with rich: on a terminal a table wider than it folds its cells; into a
    pipe or a file every table is drawn whole, as wide as its text (nothing cut with ``…``)."""
    from rich.markup import escape
    from rich.table import Table as RichTable

    from .tables import Table, cut_to_screen, unbounded_width

    whole = not cut_to_screen(sys.stdout)
    for b in blocks:
        if isinstance(b, Table):
            t = RichTable(title=escape(b.title), title_justify="left", show_edge=False)
            for header, justify in b.columns:
                t.add_column(header, justify=justify, overflow="fold")
            for row in b.rows:
                t.add_row(*map(escape, row))
            if whole:
                from rich.console import Console

                wide = Console(highlight=False, soft_wrap=True, emoji=False,
                               width=unbounded_width(b))
                wide.on_broken_pipe = _stdout_gone
                wide.print(t)
            else:
                out.print(t)
        elif b[0] == "bold":
            out.print(f"[bold]{escape(b[1])}[/bold]{b[2]}")
        else:
            out.line(b[1])


def _data_file_line(f: dict) -> str:
    from ..errors import PART_LIMIT, clip

    if f.get("error"):  # (a location or message from the file: bounded, as an error line is)
        where = printable(clip(str(f['location']), PART_LIMIT))
        return f"data file {where}: {printable(clip(f['error'], 2000))}"
    from ..formats.onnx.external_report import describe_alignment

    aligned = describe_alignment(f.get("alignment"))
    unref = ("size unknown" if f.get("unreferenced") is None else
             f"{_human(f['unreferenced'])} unreferenced (gaps {_human(f['gaps'])}, "
             f"trailing {_human(f['trailing'])})")
    from ..formats.layouts import layouts
    st = "".join(layout.summary(f[layout.name], f["tensors"]) for layout in layouts()
                 if isinstance(f.get(layout.name), dict))  # what a layout said of its file
    return (f"data file {printable(f['location'])}: {_count(f['tensors'], 'tensor')}, "
            f"{_human(f['referenced'])} referenced, {unref}, {aligned}{st}")


@app.command()
def verify(
    a: str = typer.Argument(..., metavar="A", help="First model (any format, path or URL)."),
    b: Optional[str] = typer.Argument(None, metavar="B", help="Second model (may be "
                                      "omitted with --engines: A on both engines)."),
    loose: bool = typer.Option(False, "--loose", help="Compare what a plain OneModel v1 file "
                               "holds: absent equals empty; unknown fields and fields v1 has no "
                               "place for (metadata_props below the model, denotations, ...) "
                               "are ignored."),
    run: bool = typer.Option(False, "--run", help="Also run both models and compare every "
                             "output (bit for bit on one engine unless a tolerance is given)."),
    seed: int = typer.Option(0, "--seed", parser=_seed, metavar="N",
                             help="Seed of the generated inputs (an integer >= 0)."),
    dim: Optional[List[str]] = typer.Option(None, "--dim", metavar="NAME=VALUE",
                                            help="Value of a symbolic dimension for --run "
                                            "(repeatable; unset ones are 1)."),
    shape: Optional[List[str]] = ShapeOpt,
    engine: Optional[str] = typer.Option(None, "--engine", help="onemodel (default) or "
                                         "onnxruntime, for both models."),
    engines: Optional[str] = typer.Option(None, "--engines", metavar="E1,E2",
                                          help="Run A with E1 and B (or A again) with E2; "
                                          "implies --run; floats within Clause 11.5 defaults."),
    atol: Optional[float] = typer.Option(None, "--atol", help="Absolute tolerance of float "
                                         "outputs (with --run)."),
    rtol: Optional[float] = typer.Option(None, "--rtol", help="Relative tolerance of float "
                                         "outputs, relative to B's value."),
    ulp: Optional[int] = typer.Option(None, "--ulp", help="Float elements at most this many "
                                      "representable values apart are within tolerance."),
    tol: Optional[List[str]] = typer.Option(None, "--tol", metavar="NAME:atol=X,rtol=Y,ulp=N",
                                            help="Tolerance of one output (repeatable; unset "
                                            "fields from --atol/--rtol/--ulp)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
    bisect: bool = typer.Option(False, "--bisect", help="Also name the first node, in "
                                "topological order, whose outputs differ beyond tolerance, and "
                                "re-run it alone on A's inputs: the node itself or its inputs "
                                "differ (implies --run)."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    quiet: bool = QuietOpt,
    debug: bool = DebugOpt,
):
    """Compare two models field by field and tensor byte by byte, and with --run their outputs
    (exit 0 equal or within tolerance, 1 different)."""
    from ..verify import verify as do_verify
    from .compare_report import parse_engines, parse_tolerances, print_report, report_json

    with _errors(debug):
        pair = parse_engines(engine, engines, b)
        run = run or bisect
        tolerances = parse_tolerances(atol, rtol, ulp, tol, run=run or pair is not None,
                                      exact=pair is None or pair[0] == pair[1],
                                      cross_engine=pair is not None and pair[0] != pair[1])
        dims, shapes = _inputs_given(dim, shape)
        run = run or pair is not None
        if run and "onemodel" in (pair or (engine,)):  # the process is the command's: tune
            from ..evaluate.memory import tune_allocator  # as `run` does
            tune_allocator()
        try:
            report = do_verify(a, b, loose=loose, run=run, seed=seed, dims=dims, shapes=shapes,
                               engine=engine or "onemodel", engines=pair,
                               tolerances=tolerances,
                               by_outputs=tolerances is not None or pair is not None,
                               read_options=_read_options(allow_outside),
                               limit=REPORT_LIMIT,
                               storage_options=_storage(storage_option, a, *filter(None, [b])))
        except (OneModelError, UsageError) as e:  # the hints name the flags, not dims=/shapes=
            from ..evaluate.inputs import as_flags
            raise as_flags(e) from None
        if tolerances is not None and report.comparisons:
            unknown = sorted(set(tolerances.per_output) - set(report.outputs_compared))
            if unknown:
                raise UsageError(f"--tol {unknown[0]}: no output of that name (outputs: "
                                 f"{', '.join(report.outputs_compared)})")
        bisected = None
        not_bisected = None  # why bisect could not run, when the report has a verdict
        if bisect:
            try:
                bisected = _bisect(a, b, pair or (engine or "onemodel",) * 2, tolerances, seed,
                                   dims, shapes, _read_options(allow_outside),
                                   _storage(storage_option, a, *filter(None, [b])))
            except UsageError as e:  # (a OneModelError: caught first)
                from ..evaluate.inputs import as_flags
                raise as_flags(e) from None
            except OneModelError as e:  # (an InternalError, a bug, is not: it goes on up)
                # the runs could not be matched (B cannot run on A's inputs): the report
                # already says they differ; bisect's failure is one line of it, not an error
                if report.equal:
                    from ..evaluate.inputs import as_flags
                    raise as_flags(e) from None
                not_bisected = " ".join(str(e).removeprefix(f"{e.kind}: ").split())
    if as_json:
        import json
        doc = report_json(report, shown(a), shown(b) if b is not None else None, REPORT_LIMIT)
        if bisect:
            doc["bisect"] = bisected.to_json() if bisected is not None else None
            doc["bisect_error"] = not_bisected
        out.line(json.dumps(doc, indent=2))
    else:
        print_report(out, report, shown(a), shown(b) if b is not None else None, quiet=quiet,
                     limit=REPORT_LIMIT)
        for line in bisected.lines() if bisected is not None else ():
            out.line(printable(line))
        if not_bisected is not None:
            out.line(printable(f"bisect: not run: {not_bisected}"))
    raise typer.Exit(0 if report.equal else 1)


def _bisect(a: str, b: Optional[str], engines, tolerances, seed, dims, shapes, read_options,
            storage_options):
    """verify --bisect: :func:`onemodel.bisect.bisect` of A and B (A again when B is omitted)
    on the inputs ``--run`` generated (the same seed, dims and shapes)."""
    from ..api import _load as load  # (storage options checked against A and B by verify)
    from ..bisect import bisect as do_bisect
    from ..evaluate import random_inputs

    opts = dict(read_options or {}, storage_options=storage_options)
    ma = load(a, **opts)
    try:
        mb = ma if b is None else load(b, **opts)
        try:
            inputs = random_inputs(ma, seed=seed, dims=dims or {}, shapes=shapes)
            return do_bisect(ma, mb, inputs, engines=tuple(engines), tolerances=tolerances)
        finally:
            if mb is not ma:
                mb.close()
    finally:
        ma.close()


def _digest(arr) -> str:
    """sha256 of a tensor's elements: its bytes in C order (numpy's ``tobytes()``); for string
    tensors, each element's UTF-8 bytes followed by a NUL byte."""
    import hashlib
    if arr.dtype == object:
        h = hashlib.sha256()
        for v in arr.reshape(-1):
            h.update((v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape"))
                     + b"\0")
        return h.hexdigest()
    return hashlib.sha256(arr.tobytes()).hexdigest()


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


@app.command()
def check(
    file: str = typer.Argument(..., metavar="FILE", help="Model file or URL."),
    as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON."),
    sarif: bool = typer.Option(False, "--sarif", help="Print the findings as SARIF 2.1.0."),
    full: bool = typer.Option(False, "--full", help="Also verify external data checksums "
                              "(SHA-1, reading the files) and every intermediate value's type "
                              "and shape by shape inference (OM410, OM411)."),
    strict: bool = typer.Option(False, "--strict", help="Warnings are errors."),
    select: Optional[str] = typer.Option(None, "--select", metavar="CODES",
                                         help="Report only these codes or prefixes "
                                              "(comma-separated: OM1,OM201)."),
    ignore: Optional[str] = typer.Option(None, "--ignore", metavar="CODES",
                                         help="Do not report these codes or prefixes."),
    allow_outside: bool = OutsideOpt,
    storage_option: Optional[List[str]] = StorageOpt,
    debug: bool = DebugOpt,
):
    """Validate a model (ONNX Part 1, Clause 10): every problem with its code, field path,
    offset and clause. Exit 0: no error (warnings allowed); 1: errors; 2: unreadable."""
    from ..validation.output import sarif as to_sarif
    from ..validation.output import text_lines
    from ..validation.run import check_and_model

    global _nothing_at_exit
    with _errors(debug):
        if as_json and sarif:
            raise UsageError("choose one of --json and --sarif")
        try:
            with _no_collections():
                report, model = check_and_model(
                    file, full=full, strict=strict, select=select.split(",") if select else None,
                    ignore=ignore.split(",") if ignore else None,
                    storage_options=_storage(storage_option, file), allow_outside=allow_outside)
        except OneModelError as e:  # unreadable: the document says so too, the line stays
            if (as_json or sarif) and not isinstance(e, UsageError):
                import json

                from ..validation.output import sarif_unreadable, unreadable
                kind = e.kind
                message = redact(" ".join(str(e).removeprefix(f"{kind}: ").split()))
                doc = sarif_unreadable(kind, message, shown(file)) if sarif \
                    else unreadable(kind, message)
                out.line(json.dumps(doc, indent=2))
            raise
        if _own_process:  # freed with the process, not record by record on return
            _kept_to_exit.append(model)
        where = shown(file)
        if as_json or sarif:
            import json
            doc = to_sarif(report, where) if sarif else report.as_dict()
            out.line(json.dumps(doc, indent=2))
        else:
            for text in text_lines(report, where):
                out.line(text)
    _nothing_at_exit = True  # printed; nothing of the model needs tearing down
    raise typer.Exit(0 if report.ok else 1)


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
    from ..evaluate.inputs import as_flags, check_dims_shapes, describe_generated
    from .test_data import read_input

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
            try:  # (a shape that does not fit is named by its flag, as one not parsed is)
                check_dims_shapes(model, dims, shapes)
            except UsageError as e:
                raise as_flags(e) from None
            try:  # (an input too large names the flag that made it so)
                feeds = random_inputs(model, seed=seed, dims=dims, shapes=shapes) if random \
                    else {}
            except UsageError as e:
                raise as_flags(e) from None
            if not random and not input and model.graph is not None:
                needed = [v.name for v in model.graph.inputs
                          if v.name not in model.graph.initializer_map()]
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
                raise (as_flags(add_inputs_hint(e, model, dims, shapes, seed=seed)) if random
                       else e.at(source=model.source))
            if generated:  # what --random chose, so that the run can be repeated
                err.line(f"inputs: {describe_generated(model, generated, dims, shapes)}")
            files = _output_files(output_dir, output_format, model, given_files) \
                if output_dir else None
            # still inside `with`: an output may be a view of the model's mapped weights
            for name, value in results.items():
                _report_value(name, value, files)
            for name, path in files.written if files else []:
                out.line(f"saved {printable(name)} -> {printable(path)}")


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
    """``run --test-data``: exit 1 when an output differs (:mod:`.test_data`)."""
    from ..evaluate import run as run_model
    from .test_data import run_test_data

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


def _version(value: bool) -> None:
    if value:
        from .. import __version__
        out.line(f"onemodel {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Store, convert and verify ONNX and OneModel models, bit-identical."""
    from .redact import clear_secrets
    clear_secrets()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one plain ``warning: ...`` line on stderr (not Python's file:line format)."""
    err.line(f"warning: {message}")


#: Set by :func:`main`: this process is the command (not a test runner invoking ``app``), so
#: the collector's state and the way out are the CLI's to choose.
_own_process = False
#: Models a command keeps referenced until the process ends (in :data:`_own_process` only):
#: returning from ``info`` would otherwise free the 50,000 records of a large graph one by one
#: (15 ms) just before :func:`_exit_now` ends the process without tearing anything down.
_kept_to_exit: list = []
#: Set by a command that has printed everything and leaves nothing that must run at exit
#: (``info``): :func:`main` may then end the process without tearing the model down.
_nothing_at_exit = False


@contextlib.contextmanager
def _no_collections():
    """No cyclic garbage collection while a model is read and summarized.

    A decode makes hundreds of thousands of records (a tree: nothing for the collector to
    find), and the first allocations after it would have a young collection walk them all
    (about 20 ms for 50,000 nodes). In the command's own process (:data:`_own_process`), what
    was made joins the objects :func:`main` froze at start (``gc.freeze()``), as the model
    lives until the process ends; elsewhere (``app`` invoked by a test) collections resume as
    they were, the records in the youngest generation.
    """
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _own_process:
            gc.freeze()
        if enabled:
            gc.enable()


def _exit_now(code) -> None:
    """End the process with ``code`` (an int or None, as SystemExit carries it) without the
    interpreter's teardown (freeing every record of the model costs 15 ms for 50,000 nodes),
    when that teardown has nothing else to do: a command said so (:data:`_nothing_at_exit`),
    no atexit callback was registered since start (fsspec caches, weakref finalizers, logging
    register theirs), and no other thread runs. stdout and stderr are flushed first; a flush
    that fails returns, and the usual exit reports it. Returns without exiting otherwise."""
    import atexit
    import threading

    if not (_nothing_at_exit and isinstance(code, (int, type(None)))
            and getattr(atexit, "_ncallbacks", lambda: -1)() == _atexit_at_start
            and threading.active_count() == 1):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code or 0)


_atexit_at_start = -2


def main() -> None:
    """Entry point of the ``onemodel`` console script."""
    import atexit
    import gc
    import signal
    import warnings
    global _own_process, _atexit_at_start
    # the modules loaded so far are never garbage: collections during the command (numpy's
    # import, a decode) skip them (-14 ms of a 120 ms `run`; docs/performance.md)
    gc.freeze()
    _own_process = True
    _atexit_at_start = getattr(atexit, "_ncallbacks", lambda: -2)()
    signal.signal(signal.SIGTERM, _on_sigterm)
    warnings.showwarning = _show_warning
    try:
        try:
            app(prog_name="onemodel")
        finally:  # output still buffered goes now, where a closed pipe can be handled
            sys.stdout.flush()
    except BrokenPipeError:
        try:
            _stdout_gone()
        except typer.Exit as e:
            sys.exit(e.exit_code)
    except SystemExit as e:  # how click ends every command
        _exit_now(e.code)
        raise


# commands defined in modules of their own register on ``app`` when imported
from . import hash_cmd  # noqa: E402,F401
from . import infer as _infer  # noqa: E402,F401

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
