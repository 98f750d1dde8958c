"""``onemodel view``: one self-contained HTML page of a model (issue 28).

:func:`render` gives the page of a model in memory: its graph laid out by dagre (layered,
vendored from its npm release, ``static/``), nodes grouped by name scope and long runs
(:mod:`.grouping`), each node's op, version, attributes and its values' inferred types
(:mod:`.page_model`), ``check`` findings on their nodes, initializer statistics read from the
mapped bytes (:mod:`.statistics`), ``info``'s summary; the page itself in :mod:`.html`.
"""

from __future__ import annotations

__all__ = ["render", "render_svg", "render_diff"]


def render(model, title: str) -> str:
    """The page of ``model`` (an open :class:`onemodel.Model`) titled ``title``, as one HTML
    string (an initializer whose bytes cannot be read has its error for statistics)."""
    from .html import page_html
    from .page_model import page_model

    return page_html(page_model(model, title))


def render_svg(model, title: str, depth: int = 2) -> str:
    """A static, deterministic SVG picture of ``model`` (:mod:`.svg`), ``depth`` levels of
    groups shown. Raises UnsupportedError without igraph, or past :data:`.svg.MAX_ITEMS` items."""
    from .page_model import page_model
    from .svg import page_svg

    return page_svg(page_model(model, title), depth)


def render_diff(model_a, title_a: str, model_b, title_b: str, run=None,
                verdict: str | None = None) -> str:
    """The page of ``model_b`` with what changed from ``model_a`` marked (:mod:`.diff`), titled
    ``"title_b vs title_a"``. Both models open. ``run``: a :class:`onemodel.bisect.BisectReport`
    of A against B on the same inputs, which colours each node by its outputs' largest
    difference and marks the first differing node (``verdict``: its verdict line)."""
    from .diff import annotate_diff, annotate_run
    from .html import page_html
    from .page_model import page_model_scoped

    data_b, scopes_b = page_model_scoped(model_b, f"{title_b} vs {title_a}")
    annotate_diff(data_b, scopes_b, *page_model_scoped(model_a, title_a), title_a)
    if run is not None:
        annotate_run(data_b, scopes_b, run, verdict)
    return page_html(data_b)
