"""Small records shared by many others: string key-value entries and operator set imports."""

from __future__ import annotations

from .record import INT, LIST_INT, STR, Record


class StringStringEntry(Record):
    """A key-value pair of strings (``StringStringEntryProto``, Annex B.2.13).

    Used for metadata properties at every level (Clause 5.5), for external data references
    (Clause 13.2) and for training bindings. ``key`` and ``value`` may each be absent (``None``).
    """

    FIELDS = (("key", STR, None), ("value", STR, None))


DEFAULT_DOMAIN = "ai.onnx"  # the default operator set's name; "" (or absent) means it too


def normalize_domain(domain: str | None) -> str:
    """``""`` for the default ONNX domain, whether written ``""``, ``None`` or ``"ai.onnx"``
    (Clause 5.3.2); any other domain as it is. Compare domains only after this."""
    if not domain or domain == DEFAULT_DOMAIN:
        return ""
    return domain


class OperatorSetId(Record):
    """An operator set import: ``domain`` and ``version`` (``OperatorSetIdProto``, Clause 5.3.2).

    The empty domain ``""`` (and ``"ai.onnx"``) is the default ONNX domain.
    """

    FIELDS = (("domain", STR, None), ("version", INT, None))


class IntIntListEntry(Record):
    """An int64 key with a list of int64 values (``IntIntListEntryProto``, Annex B.2.5)."""

    FIELDS = (("key", INT, None), ("value", LIST_INT, None))


def entries_to_dict(entries: list[StringStringEntry]) -> dict[str, str]:
    """Metadata entries as a dict (absent keys and values read as ``""``; the last key wins)."""
    return {e.key or "": e.value or "" for e in entries}

