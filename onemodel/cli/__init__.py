"""The ``onemodel`` command line (typer, rich). Thin: parse, call the API, print.

:mod:`.application` holds the typer ``app``, the options and output the commands share, the
error-to-exit-status mapping and the entry point :func:`main` (the console script
``onemodel.cli:main``); each command is a module of its own that registers its command on
``app`` when imported (:data:`.application.COMMANDS`, in the order ``onemodel --help`` lists
them). :func:`main` imports the one a command line names; ``onemodel.cli.app`` is the app with
every command registered.
"""

from .application import EXIT_INTERNAL, EXIT_PIPE, main, register_commands


def __getattr__(name: str):
    if name == "app":  # every command registered, in the order --help lists them
        return register_commands()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EXIT_INTERNAL", "EXIT_PIPE", "app", "main"]
