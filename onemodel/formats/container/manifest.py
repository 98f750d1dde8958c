"""The manifest's JSON: limits, parsing, typed field access and the encodings of section 1.2.

* Size and depth are checked before the text is parsed: :func:`json_depth` scans the bytes
  without recursion, so a hostile manifest of 100 000 nested arrays is refused with
  UnsupportedError instead of exhausting the stack.
* Integers are parsed exactly (Python ``int``) and must fit in a signed 64-bit integer. Numbers
  written with a fraction or exponent parse to :class:`JsonFloat` and are refused wherever an
  integer is required; ``NaN`` and ``Infinity`` (not JSON) are refused outright.
* Floats are the unsigned integer of their IEEE-754 bits; bytes are base64 (RFC 4648, standard
  alphabet, padded, canonical).

Every accessor takes the manifest path of the value (``manifest.graph.nodes[3].inputs``) and
raises MalformedError naming it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import json
import re
import sys

from ...errors import MalformedError, UnsupportedError, quote
from ...limits import MAX_JSON_DEPTH
from ..json_scan import SMALL_BRACKETS as _SMALL_BRACKETS  # noqa: F401 (tests read it)
from ..json_scan import json_depth

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1
MANIFEST_OFFSET = 64



class JsonFloat:
    """A JSON number written with a fraction or exponent: kept as text, never used as a value."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _reject_constant(name: str):
    raise MalformedError(f"{name} is not a JSON number (RFC 8259)", path="manifest")


def _pairs(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise MalformedError(f"key {quote(k)} appears twice in one object",
                                     path="manifest")
            seen.add(k)
    return obj


#: Python frames a read or write may need: MAX_JSON_DEPTH levels for the json module plus the
#: codecs' frames for MAX_MODEL_NESTING levels, on top of the default limit.
RECURSION_ROOM = 1000 + 2 * MAX_JSON_DEPTH + 500


def ensure_recursion_room() -> None:
    """Raise the interpreter's recursion limit to :data:`RECURSION_ROOM` if it is lower.

    The json module recurses once per nesting level, and the manifest may nest
    MAX_JSON_DEPTH levels (checked before parsing), so the default limit of 1000 is too low.
    The limit is only ever raised, never lowered (safe with threads).
    """
    if sys.getrecursionlimit() < RECURSION_ROOM:
        sys.setrecursionlimit(RECURSION_ROOM)


@contextlib.contextmanager
def bulk_objects():
    """Pause the cyclic garbage collector while a manifest's many small objects are built.

    Reading or writing a manifest creates hundreds of thousands of objects and no cycles; the
    collector would otherwise run over the whole growing heap again and again (two thirds of the
    time of a 20 000-node read). It is re-enabled on exit if it was enabled on entry.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _with_recursion_room(fn, *args):
    ensure_recursion_room()
    return fn(*args)


def parse_manifest(data, base: int = MANIFEST_OFFSET) -> dict:
    """Parse the manifest bytes ``data`` (section 1.2) into a dict.

    ``base`` is the file offset of the first manifest byte, used in error locations. Raises
    MalformedError for a byte-order mark, invalid UTF-8, invalid JSON (with the offset of the
    fault), ``NaN``/``Infinity``, a key repeated in one object, an integer of more than 4300
    digits, or a top level that is not an object; UnsupportedError for more than
    :data:`~onemodel.limits.MAX_JSON_DEPTH` levels of nesting.
    """
    data = memoryview(data)
    if data[:3] == b"\xef\xbb\xbf":
        raise MalformedError("the manifest starts with a byte-order mark", path="manifest",
                             offset=base)
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError as e:
        raise MalformedError(f"the manifest is not valid UTF-8 ({e.reason})", path="manifest",
                             offset=base + e.start) from None
    depth, where = json_depth(data)
    if where is not None:
        raise UnsupportedError(f"the manifest nests more than {MAX_JSON_DEPTH} JSON levels",
                               path="manifest", offset=base + where)
    try:
        obj = _with_recursion_room(_loads, text)
    except json.JSONDecodeError as e:
        offset = base + len(text[:e.pos].encode("utf-8", "surrogatepass"))
        raise MalformedError(f"the manifest is not valid JSON: {e.msg}", path="manifest",
                             offset=offset) from None
    except (ValueError, RecursionError) as e:
        raise MalformedError(f"the manifest is not valid JSON: {e}", path="manifest") from None
    if not isinstance(obj, dict):
        raise MalformedError("the manifest is not a JSON object", path="manifest", offset=base)
    return obj


def _loads(text: str):
    return json.loads(text, parse_float=JsonFloat, parse_constant=_reject_constant,
                      object_pairs_hook=_pairs)


def dumps(obj) -> bytes:
    """The manifest text of ``obj``: UTF-8, no insignificant whitespace, keys in insertion order."""
    return _with_recursion_room(
        lambda: json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
                           allow_nan=False).encode("utf-8"))


# -- typed access ---------------------------------------------------------------------------------
def _type_name(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, JsonFloat):
        return f"the number {v.text} with a fraction or exponent"
    return {str: "a string", int: "an integer", list: "an array", dict: "an object"}.get(
        type(v), type(v).__name__)


def wrong(v, want: str, path: str) -> MalformedError:
    """The MalformedError for a value of the wrong JSON type."""
    return MalformedError(f"{want} expected, found {_type_name(v)}", path=path)


def as_obj(v, path: str) -> dict:
    """``v`` as a JSON object, or MalformedError."""
    if type(v) is not dict:
        raise wrong(v, "an object", path)
    return v


def as_list(v, path: str) -> list:
    """``v`` as a JSON array, or MalformedError."""
    if type(v) is not list:
        raise wrong(v, "an array", path)
    return v


def as_str(v, path: str) -> str:
    """``v`` as a JSON string, or MalformedError.

    A string holding a lone surrogate (a ``\\ud800`` escape without its pair) is refused too:
    it is no Unicode text, so no UTF-8 writer could store it (RFC 8259, section 8.2).
    """
    if type(v) is not str:
        raise wrong(v, "a string", path)
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise MalformedError(f"string holds the lone surrogate U+{ord(v[e.start]):04X}, "
                                 "which is no Unicode text", path=path) from None
    return v


def as_int(v, path: str, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """``v`` as an integer in ``[lo, hi]`` (default: signed 64-bit), or MalformedError."""
    if type(v) is not int:
        raise wrong(v, "an integer", path)
    if v < lo or v > hi:
        raise MalformedError(f"integer {v} is outside [{lo}, {hi}]", path=path)
    return v


_B64_DIGITS = re.compile(rb"[A-Za-z0-9+/]*")


def _b64_form_error(raw: bytes) -> str | None:
    """Why ``raw`` is not padded standard base64 (RFC 4648, section 4: digits of the standard
    alphabet, then at most two ``=`` ending a length that is a multiple of 4), or None.

    The checks of ``binascii.a2b_base64(strict_mode=True)``, which Python 3.10 lacks: without
    them a2b_base64 skips bytes outside the alphabet and stops at the first padding.
    """
    end = _B64_DIGITS.match(raw).end()
    if end < len(raw):
        tail = raw[end:]
        if tail[0] != 0x3D:  # "="
            return f"character {chr(raw[end])!r} at index {end} is not a base64 digit"
        extra = len(tail) - len(tail.lstrip(b"="))
        if extra < len(tail):
            return f"data after the padding at index {end + extra}"
        if extra > 2:
            return f"{extra} padding characters (at most 2) at index {end}"
    if len(raw) % 4:
        return f"length {len(raw)} is not a multiple of 4 (unpadded or truncated)"
    return None


def as_bytes(v, path: str) -> bytes:
    """A base64 string (RFC 4648, standard alphabet, padded, canonical) decoded, or
    MalformedError."""
    if type(v) is not str:
        raise wrong(v, "a base64 string", path)
    try:
        raw = v.encode("ascii")
    except UnicodeEncodeError as e:
        raise MalformedError(f"invalid base64: character {v[e.start]!r} at index {e.start} is "
                             "not a base64 digit", path=path) from None
    problem = _b64_form_error(raw)
    if problem is not None:
        raise MalformedError(f"invalid base64: {problem}", path=path)
    out = binascii.a2b_base64(raw)
    if base64.b64encode(out) != raw:
        raise MalformedError("base64 is not in canonical form (padding or trailing bits)",
                             path=path)
    return out


def b64(data) -> str:
    """``data`` (bytes-like) as a padded standard base64 string."""
    return base64.b64encode(data).decode("ascii")


def req(obj: dict, key: str, path: str):
    """``obj[key]``, or MalformedError naming the missing field."""
    try:
        return obj[key]
    except KeyError:
        raise MalformedError(f"required field {quote(key)} is missing", path=path) from None


def get_str(obj: dict, key: str, path: str, required: bool = False) -> str:
    """A string field; ``""`` when absent and optional."""
    if key not in obj:
        if required:
            req(obj, key, path)
        return ""
    return as_str(obj[key], f"{path}.{key}")


def get_int(obj: dict, key: str, path: str, required: bool = False, default: int = 0) -> int:
    """A signed 64-bit integer field; ``default`` when absent and optional."""
    if key not in obj:
        if required:
            req(obj, key, path)
        return default
    return as_int(obj[key], f"{path}.{key}")


def get_list(obj: dict, key: str, path: str, required: bool = False) -> list:
    """An array field; ``[]`` when absent and optional."""
    if key not in obj:
        if required:
            req(obj, key, path)
        return []
    return as_list(obj[key], f"{path}.{key}")


def int_list(v, path: str, lo: int = INT64_MIN, hi: int = INT64_MAX) -> list[int]:
    """An array of integers in ``[lo, hi]``."""
    out = as_list(v, path)
    for i, x in enumerate(out):
        if type(x) is not int or x < lo or x > hi:
            as_int(x, f"{path}[{i}]", lo, hi)
    return out


def str_list(v, path: str) -> list[str]:
    """An array of strings."""
    out = as_list(v, path)
    for i, x in enumerate(out):
        if type(x) is not str or not x.isascii():
            as_str(x, f"{path}[{i}]")
    return out


def bytes_list(v, path: str) -> list[bytes]:
    """An array of base64 strings, decoded."""
    return [as_bytes(x, f"{path}[{i}]") for i, x in enumerate(as_list(v, path))]
