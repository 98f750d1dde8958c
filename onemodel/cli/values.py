"""Values given on the command line, parsed into what the API takes: ``--dim``, ``--shape`` and
``--storage-option``. Parsing only: whether a name fits the model is the API's check.

Every malformed value is a :class:`~onemodel.errors.UsageError` naming the flag and the value.
"""

from __future__ import annotations

import json
from typing import Iterable, Optional

from ..errors import UsageError


def _split(item: str, flag: str, form: str, last: bool = False) -> tuple[str, str]:
    """``item`` split at its first ``=`` (``last``: its last one, for values that never hold
    one but names that may)."""
    if "=" not in item:
        raise UsageError(f"{flag} {item!r} is not {form}")
    key, value = item.rsplit("=", 1) if last else item.split("=", 1)
    if not key:
        raise UsageError(f"{flag} {item!r}: the name before '=' is empty ({form})")
    return key, value


def _count(text: str, flag: str, item: str) -> int:
    """A non-negative decimal integer (``int()``'s syntax, so ``16`` and ``1_024``)."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise UsageError(f"{flag} {item}: {text.strip()!r} is not a non-negative integer")
    return n


def parse_dims(items: Optional[Iterable[str]]) -> dict[str, int]:
    """``--dim NAME=VALUE`` (repeatable): a dim_param name and its extent, a non-negative
    integer. Returns ``{name: extent}``; a name given twice is refused."""
    dims: dict[str, int] = {}
    for item in items or []:
        name, value = _split(item, "--dim", "NAME=VALUE", last=True)
        if name in dims:
            raise UsageError(f"--dim {name} is given twice")
        dims[name] = _count(value, "--dim", item)
    return dims


def parse_shapes(items: Optional[Iterable[str]]) -> dict[str, tuple[int, ...]]:
    """``--shape NAME=D0,D1,...`` (repeatable): the whole shape of the graph input NAME, one
    non-negative extent per axis (``NAME=`` is a scalar, rank 0). Returns ``{name: extents}``;
    an input given twice is refused."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, value = _split(item, "--shape", "NAME=D0,D1,...", last=True)
        if name in shapes:
            raise UsageError(f"--shape {name} is given twice")
        shapes[name] = tuple(_count(d, "--shape", item) for d in value.split(",")) \
            if value.strip() else ()
    return shapes


def option_value(text: str):
    """A ``--storage-option`` value: ``true``/``false`` in any case are booleans, a decimal
    integer is an int; otherwise JSON when the text is a JSON object, array, number, string in
    double quotes, or ``null`` (``'{"region_name": "eu-west-1"}'``, ``1.5``, ``'"007"'`` for the
    string 007); anything else is the text itself."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_storage_options(items: Optional[Iterable[str]]) -> Optional[dict]:
    """``--storage-option KEY=VALUE`` (repeatable) as the ``storage_options`` dict the API takes
    (:func:`onemodel.storage.remote.options_for`), or ``None`` when none is given.

    A dotted KEY nests: ``s3.client_kwargs={"region_name": "eu-west-1"}`` gives
    ``{"s3": {"client_kwargs": {...}}}`` (a section that applies to ``s3://`` URLs only), and
    ``http.headers.Authorization=...`` gives ``{"http": {"headers": {"Authorization": ...}}}``.
    Sections given in several options merge; the same key given twice, or a key under a value
    that is not an object, is refused. Values: :func:`option_value`.
    """
    result: dict = {}
    for item in items or []:
        key, text = _split(item, "--storage-option", "KEY=VALUE")
        parts = key.split(".")
        if not all(parts):
            raise UsageError(f"--storage-option {key!r}: empty name between dots")
        _merge(result, parts, option_value(text), key)
    return result or None


def _merge(into: dict, parts: list[str], value, key: str) -> None:
    node = into
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise UsageError(f"--storage-option {key}: {'.'.join(parts[:i + 1])} is already "
                             "given a value that is not a JSON object")
        node = child
    last = parts[-1]
    if last in node:
        old = node[last]
        if isinstance(old, dict) and isinstance(value, dict):
            for k, v in value.items():
                _merge(node, [last, k], v, key)
            return
        raise UsageError(f"--storage-option {key} is given twice")
    node[last] = value
