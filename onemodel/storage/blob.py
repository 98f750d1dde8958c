"""The byte range of a source that holds a tensor's bytes: :class:`Blob`.

A Blob names ``nbytes`` bytes at ``offset`` of a :class:`~onemodel.storage.base.Source` (a
OneModel data region, an external data file, a remote file). Readers put one where a tensor's
bytes are fetched on first use; :meth:`view` gives the bytes (read once, then kept) and
:func:`prefetch` fills many Blobs with coalesced reads.

The IR does not import storage: :class:`onemodel.ir.record.LazyBuffer` is the structural type the
IR knows a Blob by (any class with ``source``, ``offset``, ``nbytes`` and ``view``), so a Blob is
a valid ``raw_data`` or ``external`` value without this module being imported by ``onemodel.ir``.
"""

from __future__ import annotations


class Blob:
    """``nbytes`` bytes at ``offset`` of ``source``: an immutable value, fetched on first use.

    Attributes:
        source: the :class:`~onemodel.storage.base.Source` the bytes lie in.
        offset: where they start in it, in bytes.
        nbytes: how many there are (known without fetching).

    Two Blobs are equal when they name the same range of the same source object (source
    identity, offset, nbytes), whether or not either was fetched. Nothing is read until
    :meth:`view` is first called; the bytes are then kept, so nothing is fetched twice.
    """

    __slots__ = ("source", "offset", "nbytes", "_data")

    def __init__(self, source, offset: int, nbytes: int):
        set_ = object.__setattr__
        set_(self, "source", source)
        set_(self, "offset", offset)
        set_(self, "nbytes", nbytes)
        set_(self, "_data", None)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Blob is immutable: cannot set {name!r}")

    def view(self) -> memoryview:
        """The bytes as a read-only memoryview of exactly ``nbytes`` bytes: zero-copy for a mapped
        or in-memory source, one range read (kept for later calls) for a remote one. Raises
        MalformedError when the range passes the end of the source, IoError when it cannot be
        read."""
        data = self._data
        if data is None:
            data = self.source.read(self.offset, self.nbytes)
            object.__setattr__(self, "_data", data)
        return data

    def read(self, offset: int = 0, length: int | None = None) -> memoryview:
        """``length`` bytes (all to the end when None) at ``offset`` within the Blob, read from the
        source (from the kept bytes when already fetched). Raises MalformedError for a range
        outside the Blob or the source, IoError when it cannot be read."""
        from ..errors import MalformedError

        if length is None:
            length = self.nbytes - offset
        if offset < 0 or length < 0 or offset + length > self.nbytes:
            raise MalformedError(f"range of {length} bytes at {offset} is outside a blob of "
                                 f"{self.nbytes} bytes", source=getattr(self.source, "name", None))
        if self._data is not None:
            return self._data[offset:offset + length]
        return self.source.read(self.offset + offset, length)

    @property
    def loaded(self) -> bool:
        """True once the bytes were read."""
        return self._data is not None

    def __len__(self) -> int:
        return self.nbytes

    def __eq__(self, other) -> bool:
        if not isinstance(other, Blob):
            return NotImplemented
        return (self.source is other.source and self.offset == other.offset
                and self.nbytes == other.nbytes)

    def __hash__(self) -> int:
        return hash((id(self.source), self.offset, self.nbytes))

    def __repr__(self) -> str:
        name = getattr(self.source, "name", "?")
        return f"Blob({name!r}, offset={self.offset}, nbytes={self.nbytes})"


def prefetch(buffers) -> None:
    """Read every not-yet-loaded :class:`Blob` of ``buffers``, per source in one ``fetch_many``
    call (remote sources coalesce neighbouring ranges into few requests). Other values are
    skipped."""
    by_source: dict[int, list[Blob]] = {}
    for b in buffers:
        if isinstance(b, Blob) and b._data is None:
            by_source.setdefault(id(b.source), []).append(b)
    for group in by_source.values():
        group.sort(key=lambda b: b.offset)
        views = group[0].source.fetch_many([(b.offset, b.nbytes) for b in group])
        for b, v in zip(group, views):
            object.__setattr__(b, "_data", v)


__all__ = ["Blob", "prefetch"]
