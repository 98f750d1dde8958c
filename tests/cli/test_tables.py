"""onemodel.cli.tables draws info's tables byte for byte as rich does, or leaves them to rich."""

from __future__ import annotations

import io
import random
import string

import pytest

import onemodel.cli.info as cli_info
from onemodel.cli import tables
from onemodel.cli.application import _LazyConsole
from onemodel.cli.tables import Table, console_facts, draw

rich_console = pytest.importorskip("rich.console")


class Stream(io.StringIO):
    """A text stream that says whether it is a terminal."""

    def __init__(self, tty: bool, encoding: str | None = "utf-8"):
        super().__init__()
        self._tty = tty
        self._encoding = encoding

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self):
        return self._encoding


ENVS = [  # (environment, stream is a tty)
    ({}, False),
    ({}, True),
    ({"TERM": "dumb"}, True),
    ({"TERM": "unknown"}, True),
    ({"TERM": "xterm-256color"}, True),
    ({"FORCE_COLOR": "1"}, False),
    ({"FORCE_COLOR": ""}, True),
    ({"TTY_COMPATIBLE": "1"}, False),
    ({"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, True),
    ({"NO_COLOR": "1"}, True),
]
CLEARED = ("COLUMNS", "LINES", "TERM", "FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR",
           "TTY_INTERACTIVE", "JUPYTER_COLUMNS")


def _set_env(monkeypatch, env: dict) -> None:
    for k in CLEARED:
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def _rich_output(monkeypatch, blocks, stream) -> str:
    """What the CLI's rich path prints for ``blocks`` on ``stream`` (a fresh console, as a
    fresh process has)."""
    monkeypatch.setattr(cli_info, "out", _LazyConsole(highlight=False, soft_wrap=True,
                                                      emoji=False))
    monkeypatch.setattr("sys.stdout", stream)
    cli_info._print_rich(blocks)
    return stream.getvalue()


def _text(rng: random.Random, most: int, alphabet: str) -> str:
    """1 to ``most`` characters of ``alphabet``, some words separated by single spaces."""
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, most)))
    if " " in alphabet:  # spaces single and inside, as in "312.5 KiB"
        text = " ".join(text.split()) or "x"
    return text


def _blocks(rng: random.Random) -> list:
    names = string.ascii_letters + string.digits + "_.:/-"
    cells = names + " []()<>,?*=!#@%&"
    blocks: list = [("bold", _text(rng, 40, names), f"  format onnx, IR version "
                     f"{rng.randint(1, 14)}"), ("line", "opsets: ai.onnx 21")]
    for _ in range(rng.randint(1, 4)):
        cols = [(_text(rng, 9, string.ascii_lowercase), rng.choice(("left", "right")))
                for _ in range(rng.randint(1, 3))]
        t = Table(_text(rng, 30, names + " ,"), cols)
        for _ in range(rng.randint(0, 5)):
            t.add_row(*(_text(rng, 24, cells) for _ in cols))
        blocks.append(t)
        if rng.random() < 0.3:
            blocks.append(("line", "initializers: none"))
    return blocks


@pytest.mark.parametrize("env,tty", ENVS)
def test_drawn_as_rich_draws_or_left_to_rich(monkeypatch, env, tty):
    rng = random.Random(hash((tuple(sorted(env.items())), tty)) & 0xFFFF)
    drawn_count = 0
    for i in range(60):
        blocks = _blocks(rng)
        width = rng.choice((20, 40, 60, 80, 120, 200))
        _set_env(monkeypatch, dict(env, COLUMNS=str(width), LINES="25"))
        mine = Stream(tty)
        if draw(blocks, mine):
            drawn_count += 1
            assert mine.getvalue() == _rich_output(monkeypatch, blocks, Stream(tty)), (i, width)
        else:
            assert mine.getvalue() == ""
            # left to rich only when a table is wider than the console
            widest = max(sum(max([len(h)] + [len(r[k]) for r in b.rows]) + 3
                             for k, (h, _) in enumerate(b.columns)) - 1
                         for b in blocks if isinstance(b, Table))
            assert widest > width, (i, width)
    assert drawn_count > 20


def test_tables_that_just_fit_and_just_do_not(monkeypatch):
    t = Table("title longer than the table", [("name", "left"), ("count", "right")])
    t.add_row("abcdef", "12")  # widths 6 and 5: 8 + 1 + 7 = 16 columns
    for width in (15, 16, 17):
        _set_env(monkeypatch, {"COLUMNS": str(width), "LINES": "25"})
        mine = Stream(True)
        assert draw([t], mine) is (width >= 16)
        if width >= 16:
            assert mine.getvalue() == _rich_output(monkeypatch, [t], Stream(True))
            assert mine.getvalue() == (
                "\x1b[3mtitle longer than the table\x1b[0m\n"
                "\x1b[1m \x1b[0m\x1b[1mname  \x1b[0m\x1b[1m \x1b[0m┃"
                "\x1b[1m \x1b[0m\x1b[1mcount\x1b[0m\x1b[1m \x1b[0m\n"
                "━━━━━━━━╇━━━━━━━\n"
                " abcdef │    12 \n")


def test_empty_table_and_plain_lines(monkeypatch):
    _set_env(monkeypatch, {})
    blocks = [("bold", "m.onnx", "  format onnx, IR version 9"), ("line", "x [y] :smile:"),
              Table("inputs", [("name", "left"), ("type", "left")])]
    mine = Stream(False)
    assert draw(blocks, mine)
    assert mine.getvalue() == ("m.onnx  format onnx, IR version 9\nx [y] :smile:\ninputs\n"
                               " name ┃ type \n━━━━━━╇━━━━━━\n")
    assert mine.getvalue() == _rich_output(monkeypatch, blocks, Stream(False))


@pytest.mark.parametrize("text", ["naïve", "名前", "tab\there", "cr\rhere", "bell\a", "e\u0301",
                                  " lead", "trail ", "two  spaces"])
def test_other_characters_are_left_to_rich(monkeypatch, text):
    _set_env(monkeypatch, {})
    t = Table("inputs", [("name", "left")])
    t.add_row(text)
    for blocks in ([t], [("bold", text, "")]):
        mine = Stream(True)
        assert not draw(blocks, mine)
        assert mine.getvalue() == ""


def test_not_utf8_is_left_to_rich(monkeypatch):
    _set_env(monkeypatch, {})
    assert console_facts(Stream(False, encoding="latin-1")) is None
    assert not draw([("line", "x")], Stream(False, encoding="ascii"))
    assert console_facts(Stream(False, encoding=None)) is not None  # rich takes it for utf-8


@pytest.mark.parametrize("env,tty", ENVS + [({"COLUMNS": "33"}, True),
                                            ({"COLUMNS": "33", "TERM": "dumb"}, True),
                                            ({"COLUMNS": "33", "LINES": "9", "TERM": "dumb"}, True),
                                            ({"COLUMNS": "0", "LINES": "9"}, False),
                                            ({"COLUMNS": "x"}, False)])
def test_styles_and_width_as_rich_finds_them(monkeypatch, env, tty):
    _set_env(monkeypatch, env)
    stream = Stream(tty)
    c = rich_console.Console(file=stream, highlight=False, soft_wrap=True, emoji=False)
    styled, width = console_facts(stream)
    assert styled == (c.color_system is not None)
    assert width == c.width


def test_width_from_the_terminal_of_a_standard_stream(monkeypatch):
    _set_env(monkeypatch, {})
    asked = []

    def size(fd):
        asked.append(fd)
        if fd == 1:
            return (101, 30)
        raise OSError("not a terminal")

    monkeypatch.setattr(tables, "_std_fds", lambda: (0, 1, 2))
    monkeypatch.setattr(tables.os, "get_terminal_size", size)
    assert console_facts(Stream(True)) == (True, 101)
    assert asked == [0, 1]
    monkeypatch.setattr(tables.os, "get_terminal_size", lambda fd: (0, 0))
    assert console_facts(Stream(False)) == (False, 80)  # 0 columns reported: rich takes 80
