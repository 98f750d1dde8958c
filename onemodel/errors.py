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

An option that a format's reader or writer does not take is an :class:`OptionError`, of kind
Unsupported, which keeps the option names apart so that the command line can name its flags.

Three more errors are not reading kinds: :class:`EvaluationError`, a OneModelError (a valid
model failed while it was evaluated on the inputs given, for example a Reshape that cannot hold
for those extents), :class:`InputError`, a OneModelError and a ``ValueError`` (the inputs given
do not fit the graph: an unknown name, a wrong element type, rank or extent), and
:class:`UsageError`, a OneModelError and a ``ValueError`` (a caller's
argument that cannot be taken: an unknown input name, a value out of range).
:class:`InternalError` is not a OneModelError: a bug (a kernel or an inference rule raising an
exception that is not one of these), which ``except OneModelError`` does not catch, as it
catches no other bug. It carries the same fields (message, path, offset, source) and gives the
same one line (without a kind in front). Warnings that a caller should see (a model that is
read but deviates from the spec in a way onemodel tolerates) are :class:`OneModelWarning`.

Each error carries the path of the field (``ModelProto.graph.node[3].input[1]`` or
``manifest.graph.nodes[3].inputs[1]``), the byte offset in the file when there is one, and the
source (a path or URL). ``str(error)`` gives one line::

    Malformed: tensor byte range ends past the data region [manifest.graph.initializers[4].data]
    at offset 0x1f40 in s3://b/m.onemodel

That line stays readable whatever the file holds: a message quotes a name, a location or a string
from the file with :func:`quote`, which keeps the first and last hundred characters of a longer
value and gives its full length (``'aaaa…aaaa' (100000 characters)``); and ``str(error)`` cuts the
message to :data:`MESSAGE_LIMIT` characters and the path and the source to :data:`PART_LIMIT`
each, the same way, so that no error line exceeds about 4 KB whatever the call site, and
writes every character that is not printable as ``repr`` does (:func:`printable`: an escape
code or newline in a name the message did not quote cannot reach the terminal).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

KINDS = ("Malformed", "InvalidModel", "Unsupported", "Io")

#: Characters of a value :func:`quote` keeps (half from the start, half from the end).
QUOTE_LIMIT = 200
#: Characters of an error's message that ``str(error)`` keeps.
MESSAGE_LIMIT = 2000
#: Characters of an error's path, and of its source, that ``str(error)`` keeps.
PART_LIMIT = 500

#: A URL in running text (fsspec chains included), masked before a text is cut (:func:`clip`).
_URL = re.compile(r"(?:[A-Za-z][\w+.-]*::)*[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]*")


def display_url(url: str) -> str:
    """``url`` fit for messages: user information and query values (presigned signatures,
    tokens) are replaced by ``***``. Each segment of a chained URL (``simplecache::s3://...``)
    is masked; a string without ``://`` is returned as it is. Here, below storage, because an
    error line masks the URLs it cuts (:func:`clip`); storage and the command line use it too."""
    def clean(part: str) -> str:
        if "://" not in part:
            return part
        s = urlsplit(part)
        netloc = s.netloc
        if "@" not in netloc and not s.query:
            return part  # nothing to mask: as given (urlunsplit would drop an empty "//")
        if "@" in netloc:
            netloc = "***@" + netloc.rsplit("@", 1)[1]
        query = "&".join(q.split("=", 1)[0] + "=***" if "=" in q else q
                         for q in s.query.split("&")) if s.query else ""
        return urlunsplit((s.scheme, netloc, s.path, query, s.fragment))
    return "::".join(clean(p) for p in url.split("::"))


def _masked(text: str) -> str:
    """``text`` with each URL in it shown as :func:`display_url` shows it (user information and
    query values as ``***``): cutting a URL could separate a signature from the ``?`` that marks
    it, and the command line's masking would no longer see it."""
    return _URL.sub(lambda m: display_url(m.group(0)), text)


def mask_urls(text: str) -> str:
    """``text`` with each URL in it shown as :func:`display_url` shows it (user information
    and query values as ``***``): for lines kept outside the command line's masking (a scan's
    rows)."""
    return _masked(text) if "://" in text else text


def clip(text: str, limit: int) -> str:
    """``text`` itself when it has at most ``limit`` characters; otherwise its first and last
    ``limit // 2`` characters around ``…`` and its full length: ``aaaa…aaaa (100000
    characters)``. A URL in a text that is cut is masked first."""
    if len(text) <= limit:
        return text
    n = len(text)
    if "://" in text:
        text = _masked(text)
    half = max(limit // 2, 1)
    return f"{text[:half]}…{text[-half:]} ({n} characters)"


def printable(text: str) -> str:
    """``text`` fit for a terminal, a log or a report: itself when every character is printable,
    else each character that is not (escape codes, carriage returns, newlines, tabs, bidi
    overrides: what ``str.isprintable`` refuses) written as ``repr`` writes it (``\\x1b``,
    ``\\r``, ``\\n``, ``\\u202e``), the others as they are. Every string from a model (a
    name, op_type, domain, producer, dim_param, message built from them) goes through it, or
    through :func:`quote`, which escapes the same way, before it is printed: a model cannot move
    the cursor, erase a line or write a line of its own."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _body(text: str) -> str:
    """The repr of ``text`` without its quotes, fit to stand between single quotes."""
    r = repr(text)
    return r[1:-1] if r[0] == "'" else r[1:-1].replace("'", "\\'")


def quote(value, limit: int = QUOTE_LIMIT) -> str:
    """``value`` quoted for a message, as ``repr`` does (``'name'``), but at most about ``limit``
    characters of it: a longer string keeps its first and last ``limit // 2`` characters around
    ``…`` and gives its full length, ``'aaaa…aaaa' (100000 characters)``; bytes give ``(N
    octets)``; any other value is its ``repr``, cut as :func:`clip` cuts. Use it for every value
    that comes from a file or a caller (names, locations, keys, strings): they can be megabytes.
    A URL in a string that is cut is masked first (user information and query values)."""
    half = max(limit // 2, 1)
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        head, tail = value[:half], value[-half:]
        if "://" in value:
            head, tail = _masked(value)[:half], _masked(value)[-half:]
        return f"'{_body(head)}…{_body(tail)}' ({len(value)} characters)"
    if isinstance(value, (bytes, bytearray)):
        if len(value) <= limit:
            return repr(bytes(value))
        return (f"b'{repr(bytes(value[:half]))[2:-1]}…{repr(bytes(value[-half:]))[2:-1]}' "
                f"({len(value)} octets)")
    return clip(repr(value), limit)


class _LocatedError(Exception):
    """What :class:`OneModelError` and :class:`InternalError` share, and nothing else: a
    message, the field path, the byte offset and the source, one line from ``str()``, and
    :meth:`at`. Private: ``except`` names one of the two, never this (a bug is not caught with
    the errors of the input)."""

    kind = "Error"

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None,
                 source: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.offset = offset
        self.source = source

    def __str__(self) -> str:
        """One line: ``Kind: message [path] at offset 0x.. in source``; the message is cut to
        :data:`MESSAGE_LIMIT` characters, the path and the source to :data:`PART_LIMIT` each
        (:func:`clip`), so the line stays under about 4 KB."""
        text = f"{self.kind}: {clip(str(self.message), MESSAGE_LIMIT)}"
        if self.path:
            text += f" [{clip(str(self.path), PART_LIMIT)}]"
        if self.offset is not None:
            text += f" at offset {self.offset:#x}"
        if self.source:
            text += f" in {clip(str(self.source), PART_LIMIT)}"
        return printable(text)

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.path, self.offset, self.source))

    def at(self, *, path: str | None = None, offset: int | None = None,
           source: str | None = None):
        """Fill in location fields that are still unknown; returns ``self`` for
        ``raise e.at(...)``."""
        if self.path is None and path is not None:
            self.path = path
        if self.offset is None and offset is not None:
            self.offset = offset
        if self.source is None and source is not None:
            self.source = source
        return self


class Setting:
    """A setting a message advises or names, kept apart from the sentence so that each
    interface writes it as its user types it: Python as a keyword argument (``dims={'seq':
    16}``, ``force=True``), the command line as its flags (``--dim seq=16``, ``--force``).

    Attributes:
        name: the Python keyword (``"dims"``, ``"shapes"``, ``"force"``).
        value: the value set; for ``dims`` and ``shapes`` a dict (name -> extent or shape),
            whose values may be placeholders (:class:`Placeholder`: ``N``, ``D0``); or
            :data:`NAME_ONLY` to name the parameter alone (Python writes ``dims``, the command
            line ``--dim``).
    """

    __slots__ = ("name", "value")

    def __init__(self, name: str, value):
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        if self.value is NAME_ONLY:
            return self.name
        return f"{self.name}={self.value!r}"

    def __eq__(self, other) -> bool:
        return isinstance(other, Setting) and (other.name, other.value) == (self.name,
                                                                             self.value)

    __hash__ = None


#: :class:`Setting`'s value when only the parameter is named (``dims`` / ``--dim``).
NAME_ONLY = type("NameOnly", (), {"__repr__": lambda self: "", "__reduce__":
                                   lambda self: "NAME_ONLY"})()


def literal(text: str) -> str:
    """``text`` as a part of a message template (:meth:`OneModelError.advise`): its braces
    doubled, so that ``{`` in a name is not taken for a setting's place."""
    return text.replace("{", "{{").replace("}", "}}")


class Placeholder(str):
    """A value a message leaves for the user to choose (``N``, ``D1``): written bare."""

    def __repr__(self) -> str:
        return str(self)


class OneModelError(_LocatedError):
    """Base of the four error kinds (and of every error of a caller's input: EvaluationError,
    InputError, UsageError). Not the base of :class:`InternalError`: ``except OneModelError``
    does not catch a bug.

    Attributes:
        kind: one of ``KINDS``.
        message: what is wrong, one sentence without the location.
        path: field path inside the file (``ModelProto.graph.node[3]``), or ``None``.
        offset: byte offset in the file where the problem was found, or ``None``.
        source: the file path or URL being read or written, or ``None``.
        template, settings: for a message that names settings of the caller (see
            :meth:`advise`): the sentence with ``{0}``, ``{1}``, ... where each
            :class:`Setting` goes; ``None`` and ``()`` otherwise.
    """

    template: str | None = None
    settings: tuple = ()

    def advise(self, template: str, *settings: Setting):
        """Append ``template`` to the message, each ``{k}`` in it standing for
        ``settings[k]`` (a :class:`Setting`), written as Python writes it; the structure is
        kept (:attr:`template`, :attr:`settings`) so that :meth:`spelled` can write it as
        another interface does. Returns ``self``."""
        if self.template is None:
            self.template = literal(self.message)
        n = len(self.settings)
        self.template += template.format(*(f"{{{n + k}}}" for k in range(len(settings))))
        self.settings = self.settings + tuple(settings)
        self.message = self.spelled()
        self.args = (self.message,)
        return self

    def spelled(self, spell=None) -> str:
        """The message with each setting written ``spell(setting)`` (a str; ``None`` keeps
        Python's writing, ``repr(setting)``); the message itself when it names no setting."""
        if self.template is None:
            return self.message
        said = [(spell(x) if spell is not None else None) or repr(x) for x in self.settings]
        return self.template.format(*said)

    def spell_as(self, spell):
        """Write the message once and for all as the interface of ``spell`` does
        (:meth:`spelled`); the settings stay in :attr:`settings`. Returns ``self``."""
        if self.template is not None:
            self.message = self.spelled(spell)
            self.args = (self.message,)
            self.template = None
        return self

    @classmethod
    def advising(cls, template: str, *settings: Setting, **where):
        """An error whose message is ``template`` with each ``{k}`` standing for
        ``settings[k]`` (:meth:`advise`)."""
        e = cls("", **where)
        e.template = ""
        return e.advise(template, *settings)


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


class OptionError(UnsupportedError):
    """An option a format's reader or writer does not take (``align`` for OneModel output): an
    UnsupportedError that keeps the names apart from the sentence, so that a caller can name
    them as its user typed them.

    Attributes:
        options: the option names refused (Python keyword names, ``("align",)``).
        accepted: the names the reader or writer takes.
        target: what was being read or written (``"onemodel output"``).

    ``message`` names the options as Python keywords: ``align does not apply to onemodel output
    (it takes: strict_v1)``. :meth:`spelled` gives the same sentence with each name as another
    interface spells it: the command line passes its flags and gets ``--align does not apply to
    onemodel output (it takes: --strict-v1)``.
    """

    def __init__(self, options, accepted, target: str, **where):
        self.options = tuple(options)
        self.accepted = tuple(accepted)
        self.target = target
        super().__init__(self.spelled(), **where)

    def spelled(self, spell=None) -> str:
        """The message with each option name ``n`` written as ``spell(n)``; a refused name
        ``spell`` maps to ``None`` stays as it is, an accepted one is left out (an option the
        interface does not offer)."""
        def say(name):
            return name if spell is None else spell(name)

        refused = ", ".join(say(n) or n for n in self.options)
        taken = ", ".join(t for t in (say(n) for n in self.accepted) if t)
        verb = "does" if len(self.options) == 1 else "do"
        return f"{refused} {verb} not apply to {self.target} (it takes: {taken or 'no options'})"

    def __reduce__(self):
        return (_rebuild_option, (self.options, self.accepted, self.target, self.message,
                                  self.path, self.offset, self.source))


def _rebuild_option(options, accepted, target, message, path, offset, source):
    e = OptionError(options, accepted, target, path=path, offset=offset, source=source)
    e.message = message
    return e


class AdviceError(UnsupportedError):
    """An UnsupportedError whose message advises option settings (``force=True``), kept apart
    from the sentence so that a caller can write them as its user types them (``--force``), as
    :class:`OptionError` does for the names it refuses.

    ``AdviceError(template, [(name, value), ...])``: ``{0}``, ``{1}``, ... of ``template``
    stand for each setting (a :class:`Setting` in :attr:`settings`); ``message`` writes each
    as Python does, ``name=value!r`` (``layout='file'``, ``force=True``); :meth:`spelled`
    writes it as another interface does.
    """

    def __init__(self, template: str, settings, **where):
        super().__init__("", **where)
        self.template = ""
        self.advise(template, *(Setting(n, v) for n, v in settings))

    def __reduce__(self):
        return (_rebuild_advice, (self.template, [(x.name, x.value) for x in self.settings],
                                  self.message, self.path, self.offset, self.source))


def _rebuild_advice(template, settings, message, path, offset, source):
    e = AdviceError.__new__(AdviceError)
    _LocatedError.__init__(e, message, path=path, offset=offset, source=source)
    e.template, e.settings = template, tuple(Setting(n, v) for n, v in settings)
    return e


class WeightsFileError(UnsupportedError):
    """A file of tensors only where a model is expected (a safetensors weights file): no format
    reads it as a model. ``layout``: the name of the layout whose weights file it is
    (``"safetensors"``); the message, the layout's note, names the setting that puts its
    tensors into a model (``into``, :attr:`settings`)."""

    layout: str | None = None


class NoDataDirectoryError(UnsupportedError):
    """The ONNX writer has external data files to write and the sink has no directory for them
    (a file object or bytes in memory, without ``base_dir``). A distinct class, not a message
    text, so that a caller (``onemodel.save``, ``onemodel.to_bytes``, the CLI) says what to pass
    in its own words by ``isinstance``, never by reading the message.

    Attributes:
        files: the locations of the data files that had nowhere to go (a tuple of str)."""

    def __init__(self, message: str, files=(), **where):
        self.files = tuple(files)
        super().__init__(message, **where)

    def __reduce__(self):
        return (_rebuild_no_directory, (self.message, self.files, self.path, self.offset,
                                        self.source))


def _rebuild_no_directory(message, files, path, offset, source):
    return NoDataDirectoryError(message, files, path=path, offset=offset, source=source)


class EvaluationError(OneModelError):
    """A well-formed, valid model failed while being evaluated on the inputs given (Clause 11):
    the message names the node (op_type, name, index) and the shapes of its inputs. Not a
    reading kind: the file is fine, the inputs do not fit it (or an operator's run-time
    condition does not hold)."""

    kind = "EvaluationError"


class InputError(OneModelError, ValueError):
    """The inputs a caller gave do not fit the graph (Clauses 6.5, 7.2): an input name the
    graph does not have, a value for a constant, an input left without a value, a value of the
    wrong element type or rank, an extent other than the fixed one declared, two extents for
    one dimension variable, or an extent the operators exclude. The model is not at fault: not
    a reading kind (and not an InvalidModelError); a ``ValueError`` too, as a caller's argument
    that cannot be taken is. The command line prints its one line (``InputError: input 'x' has
    rank 3; the graph declares 2 [1,4] [graph.inputs[0]] in m.onnx``) and exits with status
    2."""

    kind = "InputError"


class InternalError(_LocatedError):
    """A bug in onemodel or in a kernel given to it, not a fault of the model or its inputs: a
    kernel raised an exception that is not a OneModelError (a TypeError, AttributeError,
    KeyError, ...; see :mod:`onemodel.evaluate.runner` for what counts as the inputs' fault), or
    an inference rule did. Not a OneModelError (``except OneModelError`` lets it through, as it
    lets any other bug through) and not a reading kind. The exception raised is its
    ``__cause__``.

    Attributes (besides ``message``, ``path``, ``offset`` and ``source``, and :meth:`at`, as
    those of :class:`OneModelError`):
        kernel: the kernel, ``module.function`` (``onemodel.evaluate.kernels.math.add``).
        node: the node, ``3 (Add 'plus', domain ai.onnx, opset 14)`` (index, op_type, name,
            domain, opset version).

    ``message`` reads ``internal error in kernel K for node N: TypeError: ...; please report
    it``, and ``str(error)`` is the message with its location, without a kind in front. The
    command line prints that line and exits with status 70 (not 2).
    """

    kind = "InternalError"

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None,
                 source: str | None = None, kernel: str | None = None, node: str | None = None):
        super().__init__(message, path=path, offset=offset, source=source)
        self.kernel = kernel
        self.node = node

    def __str__(self) -> str:
        """``message [path] ... in source`` as for the other errors, without ``Kind: ``: the
        message says what it is."""
        return super().__str__().removeprefix(f"{self.kind}: ")

    def __reduce__(self):
        return (_rebuild_internal, (self.message, self.path, self.offset, self.source,
                                    self.kernel, self.node))


def _rebuild_internal(message, path, offset, source, kernel, node):
    return InternalError(message, path=path, offset=offset, source=source, kernel=kernel,
                         node=node)


class UsageError(OneModelError, ValueError):
    """An argument of the caller that cannot be taken (an input name the model does not have, a
    shape of the wrong rank, a negative extent, storage options for local files). A
    :class:`OneModelError` (``except OneModelError`` catches it, as every other error of a
    caller's input) and, as before, a ``ValueError``; not a reading kind. The command line prints
    it as one line, ``Usage error: message``, with exit status 2. ``str()`` is the message alone
    (no kind in front), cut to :data:`MESSAGE_LIMIT` characters as an error line is
    (:func:`clip`), and made :func:`printable`."""

    kind = "Usage"

    def __str__(self) -> str:
        return printable(clip(str(self.message), MESSAGE_LIMIT))


class OneModelWarning(UserWarning):
    """Something a reader or the evaluator tolerates but the user should know (for example a
    declared dimension of -1, which Clause 6.5 does not allow, read as unknown). The command line
    prints each as one ``warning:`` line on stderr; ``str()`` is cut to :data:`MESSAGE_LIMIT`
    characters as an error line is (:func:`clip`), and made :func:`printable`."""

    def __str__(self) -> str:
        return printable(clip(super().__str__(), MESSAGE_LIMIT))
