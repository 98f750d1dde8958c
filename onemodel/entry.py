"""The entry point of the ``onemodel`` console script and of ``python -m onemodel``.

Ctrl-C (SIGINT) and SIGTERM are handled from the first moment the package runs: a command
interrupted while Python is still importing the command line (typer, rich, the readers, numpy:
the first tenth of a second or so) prints ``interrupted`` (exit 130) or ``terminated`` (exit
143), one line on stderr as once it runs, not a traceback of the imports. This module therefore
imports nothing but what a Python process has loaded already (``os``, ``signal``, ``sys``), the
leaf :mod:`onemodel.signals` and the package's ``__init__``, which imports nothing (its names
are imported on first use). Once the command line is imported,
:func:`onemodel.cli.application.main` handles signals itself (the writes in progress are undone
first).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys

from .signals import Terminated, on_sigterm


def _stop(text: str | None, status: int) -> None:
    """Print ``text`` (if any) on stderr and end the process with ``status``: the atexit
    callbacks run and the output is flushed, then ``os._exit`` (a second Ctrl-C is ignored
    meanwhile). Not a plain exit: CPython (3.11) ends a process by SIGINT itself, whatever
    status it was given, once a KeyboardInterrupt has left code run by ``exec`` of a string
    (dataclasses, namedtuple), even when the interrupt was then handled."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        atexit._run_exitfuncs()
        if text:
            sys.stderr.write(text + "\n")
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(status)


def _early(signum, frame) -> None:
    """The handler of SIGINT and SIGTERM from the import of this module until the command line
    is imported: nothing is being written yet, so the process ends at once, wherever the signal
    came (between two bytecodes of any import, or of :func:`main` before its ``try``: a
    KeyboardInterrupt raised there would escape as a traceback)."""
    if signum == signal.SIGINT:
        _stop("interrupted", 130)
    _stop("terminated", 143)


#: SIGINT's handler when this module was imported: Python's (KeyboardInterrupt), or SIG_IGN for
#: a job a shell started in the background, which stays ignored.
_SIGINT_AT_START = signal.getsignal(signal.SIGINT)
if _SIGINT_AT_START is signal.default_int_handler:
    signal.signal(signal.SIGINT, _early)
signal.signal(signal.SIGTERM, _early)


def main() -> None:
    """Run the command line (:func:`onemodel.cli.main`) with Ctrl-C exiting 130 with the line
    ``interrupted`` and SIGTERM 143 with ``terminated``, also while its modules are imported
    (:func:`_early`); once they are, the signals raise KeyboardInterrupt and
    :class:`~onemodel.signals.Terminated` again, so that the writes in progress are undone."""
    try:
        from .cli import main as command_line

        signal.signal(signal.SIGTERM, on_sigterm)
        if _SIGINT_AT_START is signal.default_int_handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        command_line()
    except KeyboardInterrupt:
        _stop("interrupted", 130)
    except Terminated:
        _stop("terminated", 143)
    except SystemExit as e:
        if e.code in (130, 143):  # interrupted, and said so
            _stop(None, e.code)
        _finishing(e.code)
        raise
    _finishing(0)


#: The status of the command once it is done (:func:`_finishing`), while the interpreter ends.
_done_status: int | None = None


def _finishing(code) -> None:
    """The command is done (``code``: its SystemExit code): from here to the end of the
    process, Ctrl-C or SIGTERM ends it at once with the command's status, its work complete,
    instead of raising into the interpreter's teardown; and once the atexit callbacks have run
    (:func:`_ignore_late_signals`), they are ignored. Python restores the default disposition of
    a signal it handles as it finalizes, so a Ctrl-C then would end the process by SIGINT (-2,
    no message) though everything was written."""
    global _done_status
    _done_status = code if isinstance(code, int) else 0 if code is None else 1

    def now(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:  # (what was printed is kept)
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os._exit(_done_status)

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, now)
    signal.signal(signal.SIGTERM, now)


def _ignore_late_signals() -> None:
    """Registered when this module is imported, so run after every other atexit callback: once
    the command is done (:func:`_finishing`), SIGINT and SIGTERM are ignored for what remains of
    the interpreter's end (its finalization resets a handler written in Python to the default,
    which would end the process by the signal)."""
    if _done_status is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


atexit.register(_ignore_late_signals)
