"""The ``onemodel`` command line's application: the typer ``app`` the commands register on
(one module per command: :mod:`.convert`, :mod:`.info`, :mod:`.verify`, :mod:`.check`,
:mod:`.run`, :mod:`.hash`, :mod:`.infer`, :mod:`.scan`, ...), the options they share, the
output consoles, the error-to-exit-status mapping, signal and exit handling, and the entry
point :func:`main`.

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

from ..errors import InternalError, OneModelError, UsageError, printable
from ..signals import Terminated, on_sigterm
from .redact import redact


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


#: The command line's flag for each Python keyword an error's setting names
#: (:class:`onemodel.errors.Setting`): the inputs of run and verify, the options of convert.
FLAGS = {"dims": "--dim", "shapes": "--shape", "strict_v1": "--strict-v1",
         "digests": "--digests", "external_data": "--external-data", "align": "--align",
         "threshold": "--threshold", "force": "--force", "max_shard_size": "--max-shard-size",
         "allow_outside": "--allow-external-outside", "storage_options": "--storage-option",
         "into": "--into", "format": "--to", "layout": "--layout"}


def flag_of(setting) -> str | None:
    """How the command line writes a setting an error names (:class:`onemodel.errors.Setting`):
    the extents and shapes of generated inputs as ``--dim seq=16``, ``--shape x=2,4``, an
    option as its flag and value (``--external-data NAME``, ``--force`` for True,
    ``--inline`` for the layout ``inline``), the parameter alone as its flag (``--align``);
    None for a keyword :data:`FLAGS` lacks (Python's writing stays)."""
    from ..errors import NAME_ONLY

    name, value = setting.name, setting.value
    flag = FLAGS.get(name)
    if flag is None:
        return None
    if value is NAME_ONLY or value is True:
        return flag
    if name == "dims" and isinstance(value, dict):
        return " ".join(f"{flag} {k}={v}" for k, v in value.items())
    if name == "shapes" and isinstance(value, dict):
        return " ".join(f"{flag} {k}={_extents(shape)}" for k, shape in value.items())
    if (name, value) == ("layout", "inline"):
        return "--inline"
    return f"{flag} {value}"


def _extents(shape) -> str:
    """A shape as ``--shape`` takes it (``2,4``); what is not a sequence, as it is."""
    try:
        return ",".join(str(d) for d in shape)
    except TypeError:
        return repr(shape)


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
        _interrupted()
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
            err.line(f"Usage error: {e.spell_as(flag_of)}")
        elif isinstance(e, OneModelError):  # settings it names written as the flags
            err.line(str(e.spell_as(flag_of)))
        elif isinstance(e, InternalError):  # its own line
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


def _keep_until_exit(obj) -> None:
    """Keep ``obj`` (a model, or what holds one) referenced until the process ends, in the
    command's own process only (:data:`_kept_to_exit`); elsewhere it is freed on return."""
    if _own_process:
        _kept_to_exit.append(obj)


def _nothing_left_at_exit() -> None:
    """Said by a command that has printed everything and leaves nothing that must run at exit
    (:data:`_nothing_at_exit`): :func:`main` may end the process without tearing down."""
    global _nothing_at_exit
    _nothing_at_exit = True


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
_told_interrupted = False


def _interrupted() -> None:
    """Say ``interrupted`` on stderr, once (typer exits 130 without a word on a Ctrl-C that
    comes before the command's own handling, while its modules are imported)."""
    global _told_interrupted
    if not _told_interrupted:
        _told_interrupted = True
        err.line("interrupted")


#: The commands, each a module of this package that registers its command on :data:`app`
#: when imported, in the order ``onemodel --help`` lists them.
COMMANDS = ("convert", "info", "verify", "check", "run", "hash", "sign", "verify-signature",
            "infer", "view", "scan")

#: The module of a command whose name is not its module's (both signing commands are in sign.py).
_MODULE_OF = {"verify-signature": "sign"}


def register_commands(names=COMMANDS):
    """Register the commands ``names`` (of :data:`COMMANDS`) on :data:`app`, by importing
    their modules, kept in the order of :data:`COMMANDS` whatever order they come in; returns
    :data:`app`."""
    import importlib
    import inspect

    for name in names:
        importlib.import_module(f"{__package__}.{_MODULE_OF.get(name, name)}")
    order = {n: k for k, n in enumerate(COMMANDS)}
    app.registered_commands.sort(
        key=lambda c: order.get(c.name or c.callback.__name__, len(order)))
    for c in app.registered_commands:
        doc = c.callback.__doc__ if c.callback is not None else None
        if not doc:
            continue
        paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n")]
        if c.short_help is None:  # the command list: each first paragraph on one line
            c.short_help = paragraphs[0]
        if c.help is None:  # `--help`: each paragraph's lines joined, wrapped to the terminal
            c.help = "\n\n".join(paragraphs)  # (typer keeps a later paragraph's line breaks)
    return app


def _invoked(argv) -> tuple:
    """The commands to register for a command line: the one it names first, when it names one
    of :data:`COMMANDS` (building the others' options would cost every command ~5 ms); all of
    them for anything else (``--help``, ``--version``, a misspelt command: its message lists
    or suggests the others)."""
    return (argv[0],) if argv and argv[0] in COMMANDS else COMMANDS


def _help_to_a_closed_pipe() -> None:
    """Help is printed by typer through a rich Console of its own, whose answer to a closed
    stdout (``onemodel --help | head -1``) is SystemExit(1), "different" for verify: every
    Console of this process answers as the command line's own output does (:data:`EXIT_PIPE`).
    Only when help is asked for (importing rich costs the other commands' start-up)."""
    from rich.console import Console

    Console.on_broken_pipe = lambda self: _stdout_gone()


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
    signal.signal(signal.SIGTERM, on_sigterm)
    warnings.showwarning = _show_warning
    register_commands(_invoked(sys.argv[1:]))
    if not sys.argv[1:] or any(a in ("--help", "-h") for a in sys.argv[1:]):
        _help_to_a_closed_pipe()
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
        if e.code == 130:
            _interrupted()
        _exit_now(e.code)
        raise
