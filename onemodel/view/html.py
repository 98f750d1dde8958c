"""The page of ``onemodel view``: one HTML file with everything inline (styles, the vendored
dagre layout library, the page's script, the model's data), so it opens offline and fetches
nothing (its Content-Security-Policy forbids any fetch: ``default-src 'none'``).

Everything from the model reaches the page as data: the title HTML-escaped, the rest in one
``<script type="application/json">`` element whose JSON has ``<``, ``>``, ``&`` and the line
separators U+2028/U+2029 written as ``\\uXXXX`` escapes, so no text of the model can close the
element or be read as markup; the script sets it as text (``textContent``), never as HTML.
"""

from __future__ import annotations

import html
import json
from functools import lru_cache
from importlib import resources

_JSON_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                 ("\u2029", "\\u2029"))


def script_json(data) -> str:
    """``data`` as JSON fit for the inside of a ``<script type="application/json">``
    element: no ``</`` (nor ``<!--``) can appear. NaN and infinities are refused
    (``ValueError``): the page's data holds none."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escape in _JSON_ESCAPES:  # (str.replace: 20x faster than str.translate here)
        if char in text:
            text = text.replace(char, escape)
    return text


@lru_cache(maxsize=None)
def _static(name: str) -> str:
    return resources.files("onemodel.view").joinpath("static", name).read_text("utf-8")


def page_html(data: dict) -> str:
    """The whole page for the page data of :func:`onemodel.view.page_model.page_model`."""
    for name in ("dagre.min.js", "view.js"):
        if "</script" in _static(name).lower():  # (vendored code is checked as it is inlined)
            raise ValueError(f"{name} holds '</script' and cannot be inlined")
    page = _static("page.html")
    from .categories import COLOURS

    colours = "".join(f".c-{k} rect, .legend .c-{k} {{ fill: {c}; background: {c}; }}\n"
                      for k, c in COLOURS.items())
    parts = {"{title}": html.escape(str(data.get("title", ""))),
             "{css}": _static("view.css") + colours,
             "{data}": script_json(data), "{dagre}": _static("dagre.min.js"),
             "{script}": _static("view.js")}
    out, rest = [], page
    # one pass over the template: text inserted is never searched for placeholders again
    while True:
        at = [(rest.find(k), k) for k in parts if rest.find(k) >= 0]
        if not at:
            out.append(rest)
            return "".join(out)
        i, k = min(at)
        out.append(rest[:i])
        out.append(parts[k])
        rest = rest[i + len(k):]
