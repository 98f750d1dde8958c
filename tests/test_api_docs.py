"""docs/api.md's function table gives each function's real signature: every parameter, in
order, of its kind, with its default (issue 24 item 6: ``engines``, ``tolerances`` and
``into=`` were missing), so that the table cannot go stale unnoticed."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import onemodel
from onemodel import evaluate

API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"
#: ``name(parameters)`` in backquotes, with an optional ``-> result``.
SIGNATURE = re.compile(r"`((?:onemodel\.)?[A-Za-z_][\w.]*)\((.*?)\)(?: -> [^`]+)?`")


def _documented() -> list[tuple[str, str]]:
    """``(name, parameters)`` of every signature in the first column of the function table."""
    found = []
    for line in API_MD.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split(" | ", 1)[0]
        found += SIGNATURE.findall(first)
    return found


def _resolve(name: str):
    obj = onemodel if name.startswith("onemodel.") else evaluate  # bare: Session, run
    for part in name.split(".")[1:] if name.startswith("onemodel.") else [name]:
        obj = getattr(obj, part)
    return obj


def _parameters(text: str) -> list[tuple[str, str, object]]:
    """``(kind, name, default)`` of a written parameter list: kind ``positional``,
    ``keyword`` (after ``*``) or ``**``; default ``inspect.Parameter.empty`` when none."""
    out, keyword = [], False
    for part in (p.strip() for p in text.split(",")) if text.strip() else []:
        if part == "*":
            keyword = True
        elif part.startswith("**"):
            out.append(("**", part[2:], inspect.Parameter.empty))
        else:
            name, _, default = part.partition("=")
            value = ast.literal_eval(default) if default else inspect.Parameter.empty
            out.append(("keyword" if keyword else "positional", name, value))
    return out


def _real(func) -> list[tuple[str, str, object]]:
    out = []
    for p in inspect.signature(func).parameters.values():
        kind = {p.KEYWORD_ONLY: "keyword", p.VAR_KEYWORD: "**"}.get(p.kind, "positional")
        out.append((kind, p.name, p.default))
    return out


def test_the_table_lists_the_functions():
    names = {n for n, _ in _documented()}
    assert {"onemodel.load", "onemodel.save", "onemodel.to_bytes", "onemodel.convert",
            "onemodel.verify", "onemodel.check", "onemodel.infer", "onemodel.digest",
            "onemodel.compare_models", "Session", "run"} <= names, names


@pytest.mark.parametrize("name,params", _documented())
def test_each_documented_signature_is_the_real_one(name, params):
    written, real = _parameters(params), _real(_resolve(name))
    # a ``**options`` parameter may be named for what it takes (``**read_options``)
    written = [(k, "**" if k == "**" else n, d) for k, n, d in written]
    real = [(k, "**" if k == "**" else n, d) for k, n, d in real]
    assert written == real
