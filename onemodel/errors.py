"""The one error type of onemodel and its four kinds.

Every reader, writer and check raises :class:`OneModelError` (or one of its four subclasses) and
nothing else. The kinds are exactly those of the OneModel format specification, section 3.1:

=============  ==========================================================================
Kind           Meaning
=============  ==========================================================================
Malformed      not a well-formed file: bad magic, truncation, invalid encoding, a value of
               the wrong type, a range outside the file
InvalidModel   well formed but impossible: duplicate or undefined names, a byte length that
               does not match dims and dtype, a negative dimension
Unsupported    something this implementation does not handle: a newer version, an unknown
               element type, too much nesting, a documented limit exceeded
Io             the file could not be read or written
=============  ==========================================================================

Two more errors are not reading kinds: :class:`EvaluationError` (a valid model failed while it
was evaluated on the inputs given, for example a Reshape that cannot hold for those extents) and
:class:`UsageError` (a caller's argument that cannot be taken: an unknown input name, a value out
of range). Warnings that a caller should see (a model that is read but deviates from the spec in a
way onemodel tolerates) are :class:`OneModelWarning`.

Each error carries the path of the field (``ModelProto.graph.node[3].input[1]`` or
``manifest.graph.nodes[3].inputs[1]``), the byte offset in the file when there is one, and the
source (a path or URL). ``str(error)`` gives one line::

    Malformed: tensor byte range ends past the data region [manifest.graph.initializers[4].data]
    at offset 0x1F40 in s3://b/m.onemodel
"""

from __future__ import annotations

KINDS = ("Malformed", "InvalidModel", "Unsupported", "Io")


class OneModelError(Exception):
    """Base of the four error kinds.

    Attributes:
        kind: one of ``KINDS``.
        message: what is wrong, one sentence without the location.
        path: field path inside the file (``ModelProto.graph.node[3]``), or ``None``.
        offset: byte offset in the file where the problem was found, or ``None``.
        source: the file path or URL being read or written, or ``None``.
    """

    kind = "Error"

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None,
                 source: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.offset = offset
        self.source = source

    def __str__(self) -> str:
        text = f"{self.kind}: {self.message}"
        if self.path:
            text += f" [{self.path}]"
        if self.offset is not None:
            text += f" at offset 0x{self.offset:X}"
        if self.source:
            text += f" in {self.source}"
        return text

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.path, self.offset, self.source))

    def at(self, *, path: str | None = None, offset: int | None = None,
           source: str | None = None) -> "OneModelError":
        """Fill in location fields that are still unknown; returns ``self`` for ``raise e.at(...)``."""
        if self.path is None and path is not None:
            self.path = path
        if self.offset is None and offset is not None:
            self.offset = offset
        if self.source is None and source is not None:
            self.source = source
        return self


def _rebuild(cls, message, path, offset, source):
    return cls(message, path=path, offset=offset, source=source)


class MalformedError(OneModelError):
    """The bytes are not a well-formed file of the format being read."""

    kind = "Malformed"


class InvalidModelError(OneModelError):
    """The file is well formed but describes an impossible model."""

    kind = "InvalidModel"


class UnsupportedError(OneModelError):
    """Valid input that this implementation does not handle, or a documented limit exceeded."""

    kind = "Unsupported"


class IoError(OneModelError):
    """The file could not be opened, read or written."""

    kind = "Io"



class EvaluationError(OneModelError):
    """A well-formed, valid model failed while being evaluated on the inputs given (Clause 11):
    the message names the node (op_type, name, index) and the shapes of its inputs. Not a
    reading kind: the file is fine, the inputs do not fit it (or an operator's run-time
    condition does not hold)."""

    kind = "EvaluationError"


class UsageError(ValueError):
    """An argument of the caller that cannot be taken (an input name the model does not have, a
    shape of the wrong rank, a negative extent). The command line prints it as one line with exit
    status 2; it is a ``ValueError`` for Python callers."""


class OneModelWarning(UserWarning):
    """Something a reader or the evaluator tolerates but the user should know (for example a
    declared dimension of -1, which Clause 6.5 does not allow, read as unknown). The command line
    prints each as one ``warning:`` line on stderr."""
