"""Scanning JSON bytes without parsing them: the nesting depth of arrays and objects, checked
before a parser that recurses is given the text. Shared by every reader of JSON in a file (the
OneModel manifest, :mod:`.container.manifest`; a safetensors header, :mod:`.safetensors.header`),
so no format imports another's private helpers."""

from __future__ import annotations

import re

from ..lazy import np
from ..limits import MAX_JSON_DEPTH

_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|"', re.DOTALL)
_OPEN = frozenset(b"[{")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
#: Brackets counted by a Python loop (about 3 ms at most); more go to numpy.
SMALL_BRACKETS = 1 << 16


def json_depth(data, limit: int = MAX_JSON_DEPTH) -> tuple[int, int | None]:
    """Deepest nesting of arrays and objects in JSON bytes, scanning without recursion.

    Returns ``(depth, offset)`` where ``offset`` is the byte index of the first bracket that went
    past ``limit`` (``None`` when the depth stays within it). Brackets inside strings are skipped;
    the scan stops at an unterminated string (the parser reports that). Strings are removed and
    the brackets counted in C (``re``, ``bytes.translate``, numpy for more than
    :data:`SMALL_BRACKETS` of them, a plain loop below, which spares small manifests the import
    of numpy); the Python token loop runs only to find the offset of a file that is too deep.
    """
    stripped = _STRING.sub(b"", data)
    quote = stripped.find(b'"')
    if quote >= 0:
        stripped = stripped[:quote]
    brackets = stripped.translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0, None
    if len(brackets) <= SMALL_BRACKETS:
        depth = deepest = 0
        for c in brackets:
            if c == 0x5B or c == 0x7B:
                depth += 1
                if depth > deepest:
                    deepest = depth
            else:
                depth -= 1
    else:
        steps = np.frombuffer(brackets, dtype=np.uint8)
        steps = np.where((steps == 0x5B) | (steps == 0x7B), 1, -1).astype(np.int32)
        deepest = int(np.cumsum(steps, dtype=np.int64).max())
    if deepest <= limit:
        return deepest, None
    return deepest, _offset_past(data, limit)


def _offset_past(data, limit: int) -> int | None:
    depth = 0
    for m in _TOKEN.finditer(data):
        tok = m.group()
        if len(tok) != 1:
            continue
        c = tok[0]
        if c == 0x22:
            break
        if c in _OPEN:
            depth += 1
            if depth > limit:
                return m.start()
        else:
            depth -= 1
    return None


__all__ = ["SMALL_BRACKETS", "json_depth"]
