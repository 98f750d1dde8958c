"""SIGTERM as an exception: what the entry point (:mod:`onemodel.entry`) and the command line
(:mod:`onemodel.cli.application`) both install, kept in a leaf module that imports nothing, so
that neither imports the other for it."""

from __future__ import annotations


class Terminated(BaseException):
    """SIGTERM arrived (``timeout``, ``kill``, a container stopping): raised in the main thread by
    :func:`on_sigterm` so that every open sink aborts and removes its temporary file, as on
    Ctrl-C."""


def on_sigterm(signum, frame):
    """The SIGTERM handler of the command line: raises :class:`Terminated`."""
    raise Terminated()
