"""``onemodel view``: one self-contained HTML page of a model (issue 28).

:func:`render` gives the page of a model in memory: its graph laid out by dagre (layered,
vendored from its npm release, ``static/``), nodes grouped by name scope and long runs
(:mod:`.grouping`), each node's op, version, attributes and its values' inferred types
(:mod:`.page_model`), ``check`` findings on their nodes, initializer statistics read from the
mapped bytes (:mod:`.statistics`), ``info``'s summary; the page itself in :mod:`.html`.
"""

from __future__ import annotations

__all__ = ["render"]


def render(model, title: str) -> str:
    """The page of ``model`` (an open :class:`onemodel.Model`) titled ``title``, as one HTML
    string (an initializer whose bytes cannot be read has its error for statistics)."""
    from .html import page_html
    from .page_model import page_model

    return page_html(page_model(model, title))
