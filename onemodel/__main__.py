"""``python -m onemodel``: the command line (:mod:`onemodel.entry`)."""

from .entry import main

main()
