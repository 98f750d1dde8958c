"""``python -m onemodel``: the command line."""

from .cli import main

main()
