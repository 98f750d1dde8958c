"""The ``onemodel`` command line (typer, rich). Thin: parse, call the API, print.

:mod:`.application` holds the typer ``app``, the options and output the commands share, the
error-to-exit-status mapping and the entry point :func:`main` (the console script
``onemodel.cli:main``); each command is a module of its own that registers its command on
``app`` when imported here, in the order ``onemodel --help`` lists them.
"""

from .application import EXIT_INTERNAL, EXIT_PIPE, app, main

# isort: off
from . import convert, info, verify, check, run, hash, infer  # noqa: F401 (registration)
# isort: on

__all__ = ["EXIT_INTERNAL", "EXIT_PIPE", "app", "main"]
