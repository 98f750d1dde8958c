"""The tables of ``onemodel info`` as rich draws them, without importing rich.

Importing rich and building its tables costs about 20 ms of a command that otherwise takes
around 100 ms, so :func:`draw` writes the common case itself: every text printable ASCII with
spaces only single and inside, an UTF-8 stream, a POSIX system, and every table no wider than
the console. Then the output is, byte for byte, what the CLI's rich console (``highlight=False,
soft_wrap=True, emoji=False``) prints for ``Table(title=..., title_justify="left",
show_edge=False)``: the HEAVY_HEAD box without its edge, one space of padding each side of a
cell, the header bold and the title italic when rich would style (a terminal that is not
``dumb``), columns as wide as their widest text. Anything else (wider tables, which rich
shrinks and folds; other characters, whose width rich measures itself; spaces at the ends,
which it strips) is left to rich: :func:`draw` returns False and writes nothing.
``tests/cli/test_tables.py`` compares both over many tables, widths and terminal settings.

**Only a terminal's width counts.** Into a pipe or a file (a stream that is not a terminal,
:func:`cut_to_screen`) no line is cut: every table is as wide as its widest text, whatever
``COLUMNS`` says, here and in the CLI's rich path (:func:`unbounded_width`). On a terminal a
table wider than the screen is left to rich, which folds its cells (no ``…``: nothing is lost).

How rich decides (rich 15: ``Console.is_terminal``, ``_detect_color_system``, ``size``):
styles when the stream is a terminal (``TTY_COMPATIBLE`` 0/1, else ``FORCE_COLOR`` set and
non-empty, else ``isatty()``) and ``TERM`` is not ``dumb`` or ``unknown``; the width from
``COLUMNS`` (with ``LINES``, or when not a dumb terminal), else the first of stdin, stdout and
stderr that is a terminal, else 80. (Older rich releases, which ``rich>=13`` admits, ignore
``TTY_COMPATIBLE`` and read an empty ``FORCE_COLOR`` differently: only those settings would
then differ.)
"""

from __future__ import annotations

import os
import sys

BOLD, ITALIC, RESET = "\x1b[1m", "\x1b[3m", "\x1b[0m"


class Table:
    """A table to draw: ``title`` (a line above it), ``columns`` as ``(header, justify)`` with
    justify ``"left"`` or ``"right"``, and ``rows`` (lists of str, one per column)."""

    def __init__(self, title: str, columns: list[tuple[str, str]]):
        self.title = title
        self.columns = columns
        self.rows: list[list[str]] = []

    def add_row(self, *cells: str) -> None:
        """Append a row (one str per column)."""
        self.rows.append(list(cells))


def _plain(text: str) -> bool:
    """Printable ASCII, spaces only single and inside (rich strips and wraps at others)."""
    return (text.isascii() and text.isprintable() and text == text.strip()
            and "  " not in text)


def console_facts(stream, environ=os.environ) -> tuple[bool, int] | None:
    """``(styled, width)`` as rich's Console would find them for ``stream``, or None where this
    module does not follow rich (not POSIX, not UTF-8, IPython or IDLE)."""
    if os.name != "posix" or "idlelib" in sys.modules:
        return None
    import builtins
    if hasattr(builtins, "get_ipython"):
        return None
    if not (getattr(stream, "encoding", None) or "utf-8").lower().startswith("utf"):
        return None
    compatible = environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        terminal = compatible == "1"
    elif environ.get("FORCE_COLOR") is not None:
        terminal = environ["FORCE_COLOR"] != ""
    else:
        isatty = getattr(stream, "isatty", None)
        try:
            terminal = bool(isatty()) if isatty is not None else False
        except ValueError:
            terminal = False
    dumb = terminal and environ.get("TERM", "").lower() in ("dumb", "unknown")
    columns, lines = environ.get("COLUMNS"), environ.get("LINES")
    try:
        given = int(columns) if columns is not None and columns.isdigit() else None
        given_lines = lines is not None and lines.isdigit()
    except ValueError:  # a digit that is not 0-9 ("²"): rich fails on it; leave it to rich
        return None
    if given is not None and (given_lines or not dumb):
        width = given
    elif dumb:
        width = 80
    else:
        width = 0
        for fd in _std_fds():
            try:
                width = os.get_terminal_size(fd)[0]
                break
            except (AttributeError, ValueError, OSError):
                pass
        width = width or 80
    return terminal and not dumb, width


def _std_fds() -> tuple[int, int, int]:
    """The descriptors rich asks for a terminal size: those of ``sys.__stdin__``,
    ``sys.__stdout__`` and ``sys.__stderr__`` (0, 1, 2 when one has none)."""
    fds = []
    for stream, default in ((sys.__stdin__, 0), (sys.__stdout__, 1), (sys.__stderr__, 2)):
        try:
            fds.append(stream.fileno())
        except Exception:
            fds.append(default)
    return tuple(fds)


def cut_to_screen(stream) -> bool:
    """Whether lines written to ``stream`` are fitted to a screen's width: only when it is a
    terminal (``isatty()``). A pipe or a file gets every line whole (``onemodel info m.onnx |
    grep``, ``> info.txt``), whatever ``COLUMNS``, ``FORCE_COLOR`` or ``TTY_COMPATIBLE`` say."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False


def unbounded_width(t: Table) -> int:
    """A console width at which rich draws ``t`` without cutting or folding any cell: its
    columns as wide as their widest text (as rich measures it), their separators, and room for
    its title."""
    from rich.cells import cell_len

    columns = [max([cell_len(h)] + [cell_len(row[i]) for row in t.rows])
               for i, (h, _) in enumerate(t.columns)]
    return max(sum(columns) + 3 * len(columns), cell_len(t.title)) + 1


def _table_lines(t: Table, styled: bool, width: int | None) -> list[str] | None:
    texts = [t.title] + [h for h, _ in t.columns] + [c for row in t.rows for c in row]
    if not all(map(_plain, texts)) or not all(t.columns):
        return None
    widths = [max([len(h)] + [len(row[i]) for row in t.rows]) for i, (h, _) in
              enumerate(t.columns)]
    if width is not None and sum(widths) + 3 * len(widths) - 1 > width:  # rich would shrink it
        return None

    def fit(text: str, w: int, justify: str) -> str:
        return text.rjust(w) if justify == "right" else text.ljust(w)

    def header(text: str, w: int, justify: str) -> str:
        cell = fit(text, w, justify)
        return f"{BOLD} {RESET}{BOLD}{cell}{RESET}{BOLD} {RESET}" if styled else f" {cell} "

    out = [f"{ITALIC}{t.title}{RESET}" if styled else t.title]
    out.append("┃".join(header(h, w, j) for (h, j), w in zip(t.columns, widths)))
    out.append("╇".join("━" * (w + 2) for w in widths))
    for row in t.rows:
        out.append("│".join(f" {fit(c, w, j)} " for c, w, (_, j) in zip(row, widths,
                                                                       t.columns)))
    return out


def draw(blocks: list, stream) -> bool:
    """Write ``blocks`` to ``stream`` as the CLI's rich console prints them, and return True;
    or write nothing and return False when rich must draw them (see the module doc).

    ``blocks``: ``("bold", text, rest)`` for a line whose ``text`` is bold followed by plain
    ``rest``; ``("line", text)`` for a plain line (written as given); a :class:`Table`.
    A table is cut to the console's width only on a terminal (:func:`cut_to_screen`).
    """
    facts = console_facts(stream)
    if facts is None:
        return False
    styled, width = facts
    if not cut_to_screen(stream):
        width = None
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Table):
            drawn = _table_lines(block, styled, width)
            if drawn is None:
                return False
            lines += drawn
        elif block[0] == "bold":
            _, text, rest = block
            if not text or not _plain(text) or not _plain(rest.lstrip()):
                return False
            lines.append(f"{BOLD}{text}{RESET}{rest}" if styled else text + rest)
        else:
            lines.append(block[1])
    stream.write("\n".join(lines) + "\n")
    return True
