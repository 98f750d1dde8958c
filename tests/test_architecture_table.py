"""docs/architecture.md's table "Packages and who imports whom" is true (issue 25): checked
against the import rules and the imports that :mod:`test_import_rules` computes, so it cannot go
stale.

The table's unit is a top-level package or module of ``onemodel`` (``storage``, ``ir``,
``errors``, ``api``, ...; ``onemodel`` is ``onemodel/__init__.py``). Every one has a row (a new
package without one fails). Its columns, as parsed:

- **Package**: the units of the row, in backticks: ``onemodel.storage``, ``api.py``,
  ``onemodel/__init__.py``.
- **May not import (tested)**: what :data:`test_import_rules.RULES` forbids the package, the one
  source of truth (the table is checked against it, never read by it): ``-`` (no rule), ``everything
  of onemodel``, or the units in backticks. Parts after a ``;`` that start with ``in `` state the
  finer rules inside the package (the format packages, the command modules) in words; the row
  must have one when ``RULES`` has a rule for a module inside the package.
- **Imports today**: parts separated by ``;``, each an optional ``` `unit`: ``` (which unit of a
  row of several the part is about; it holds for the parts after it) then the units it imports in
  backticks, or ``nothing of onemodel``; a part ending in ``inside a function`` or ``inside
  functions`` lists the units imported only inside functions, the others those imported at module
  level (at the top, in a class body, under ``if`` or ``try``). A name may be finer than a unit
  (``formats.onnx``): then something inside it is imported. Words in parentheses are comments.

An import is what :func:`test_import_rules.import_edges` sees: ``import`` and ``from ... import``
statements. A module imported by name through ``importlib.import_module`` (the operator table's
family modules, the plugins of the format, layout and engine registries, ``onemodel``'s public
names, PEP 562) is not an import of the table: the registries' rules are stated in words.
"""

import re
from pathlib import Path

import pytest
from test_import_rules import RULES, _modules, import_edges

ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
HEADING = "## Packages and who imports whom"
COLUMNS = ["Package", "Holds", "May not import (tested)", "Imports today"]
FUNCTION_LEVEL = re.compile(r"\s*inside (a function|functions)\s*$")
PREFIX = re.compile(r"^\s*`([\w.]+)`:\s*")


def table_rows(text: str) -> list[list[str]]:
    """The cells of every row of the table under :data:`HEADING` (the header checked)."""
    lines = text.split(HEADING, 1)[1].splitlines()
    rows = []
    for line in lines[1:]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert rows[0] == COLUMNS, rows[0]
    assert set(rows[1][0]) <= set("-"), rows[1]
    for row in rows[2:]:
        assert len(row) == len(COLUMNS), row
    return rows[2:]


def _uncommented(text: str) -> str:
    """``text`` without its words in parentheses, nested ones too."""
    while True:
        shorter = re.sub(r"\([^()]*\)", "", text)
        if shorter == text:
            return text
        text = shorter


def _names(text: str) -> list[str]:
    """The names in backticks, outside parentheses."""
    return re.findall(r"`([^`]+)`", _uncommented(text))


def unit_of(module: str) -> str:
    """``onemodel.formats.onnx.reader`` -> ``formats``; ``onemodel`` -> ``onemodel``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def row_units(cell: str) -> list[str]:
    """The units of a Package cell: ``onemodel.storage`` -> ``storage``, ``api.py`` -> ``api``,
    ``onemodel/__init__.py`` -> ``onemodel``."""
    units = []
    for name in _names(cell):
        if name == "onemodel/__init__.py":
            units.append("onemodel")
        elif name.startswith("onemodel."):
            units.append(name.removeprefix("onemodel."))
        else:
            assert name.endswith(".py"), name
            units.append(name.removesuffix(".py"))
    assert units, cell
    return units


def forbidden_in_table(cell: str) -> tuple[set[str], bool]:
    """The units a May-not-import cell forbids the package, and whether it has finer rules."""
    first, *rest = [p.strip() for p in cell.split(";")]
    assert all(p.startswith("in ") for p in rest), cell
    finer = bool(rest)
    if first.startswith("in "):
        return set(), True
    if first == "-":
        return set(), finer
    if first == "everything of onemodel":
        return {"onemodel"}, finer
    names = set(_names(first))
    assert names, cell
    return names, finer


def imports_in_table(cell: str, units: list[str]) -> dict[str, tuple[set[str], set[str]]]:
    """unit -> (names imported at module level, names imported only inside functions)."""
    out = {u: (set(), set()) for u in units}
    seen = set()
    current = units[0] if len(units) == 1 else None
    for part in _uncommented(cell).split(";"):
        match = PREFIX.match(part)
        if match:
            current = match.group(1)
            part = part[match.end():]
        assert current in out, f"{part!r}: which of {units}?"
        seen.add(current)
        functions = bool(FUNCTION_LEVEL.search(part))
        part = FUNCTION_LEVEL.sub("", part)
        if part.strip() == "nothing of onemodel":
            continue
        names = _names(part)
        assert names, f"{cell!r}: {part!r} names no unit"
        out[current][functions].update(names)
    assert seen == set(units), f"{cell!r} says nothing of {set(units) - seen}"
    return out


def imports_today() -> dict[str, dict[str, bool]]:
    """unit -> {module of another unit it imports: whether some import of it is at module
    level}, every unit of ``onemodel`` a key (a unit importing nothing maps to ``{}``)."""
    modules = _modules()
    found: dict[str, dict[str, bool]] = {}
    for name, path in modules.items():
        edges = found.setdefault(unit_of(name), {})
        for mod, top in import_edges(path, modules).items():
            if unit_of(mod) != unit_of(name):
                edges[mod] = edges.get(mod, False) or top
    return found


def _imports(edges: dict[str, bool], name: str, top: bool) -> bool:
    full = f"onemodel.{name}"
    return any((m == full or m.startswith(full + ".")) and (t if top else not t)
               for m, t in edges.items())


def stale_rows(text: str, today: dict | None = None) -> list[str]:
    """What the table says that is not true (empty when it is), against ``today``
    (:func:`imports_today` when not given)."""
    problems = []
    today = imports_today() if today is None else today
    units_seen: list[str] = []
    for package, _holds, forbidden, imports in table_rows(text):
        units = row_units(package)
        units_seen += units
        for unit in units:
            if unit not in today:
                problems.append(f"row {package}: {unit} is no module of onemodel")
        if len(units) == 1:
            key = "onemodel" if units[0] == "onemodel" else f"onemodel.{units[0]}"
            want = {f if f == "onemodel" else f.removeprefix("onemodel.")
                    for f in RULES.get(key, ())}
            try:
                got, finer = forbidden_in_table(forbidden)
            except AssertionError as e:
                problems.append(f"row {package}: May not import unreadable: {e}")
                got, finer = want, True
            if got != want:
                problems.append(f"row {package}: May not import says {sorted(got)}, "
                                f"RULES {sorted(want)}")
            inner = [k for k in RULES if k.startswith(key + ".")]
            if inner and not finer:
                problems.append(f"row {package}: RULES has {inner}, the row no 'in ...' part")
        elif forbidden != "-":
            problems.append(f"row {package}: several units, May not import must be '-'")
        if len(units) > 1 and any(unit_of(k) in units for k in RULES):
            problems.append(f"row {package}: a unit with a rule needs its own row")
        try:
            listed = imports_in_table(imports, units)
        except AssertionError as e:
            problems.append(f"row {package}: Imports today unreadable: {e}")
            continue
        for unit in units:
            if unit not in today:
                continue
            edges = today[unit]
            for top, where in ((True, "at module level"), (False, "only inside functions")):
                names = listed[unit][not top]
                actual = {unit_of(m) for m, t in edges.items() if t == top} - (
                    set() if top else {unit_of(m) for m, t in edges.items() if t})
                said = {n.split(".")[0] for n in names}
                if said != actual:
                    problems.append(f"row {package}: {unit} imports {where} {sorted(actual)}, "
                                    f"the table says {sorted(said)}")
                for name in names:
                    if "." in name and not _imports(edges, name, top):
                        problems.append(f"row {package}: {unit} imports nothing of {name} "
                                        f"{where}")
    missing = sorted(set(today) - set(units_seen))
    if missing:
        problems.append(f"no row for {missing}")
    twice = sorted({u for u in units_seen if units_seen.count(u) > 1})
    if twice:
        problems.append(f"more than one row for {twice}")
    return problems


def test_the_architecture_table_is_true():
    problems = stale_rows(ARCHITECTURE.read_text(encoding="utf-8"))
    assert problems == [], "docs/architecture.md, who imports whom:\n" + "\n".join(problems)


def _table(*rows: str) -> str:
    head = "| " + " | ".join(COLUMNS) + " |\n|---|---|---|---|\n"
    return f"{HEADING}\n\n{head}" + "".join(r + "\n" for r in rows) + "\nafter\n"


def test_the_parser_reads_each_form():
    assert row_units("`onemodel/__init__.py`, `entry.py`") == ["onemodel", "entry"]
    assert row_units("`onemodel.storage`") == ["storage"]
    assert forbidden_in_table("`evaluate`, `cli` (it imports a family by name, `x`)") == (
        {"evaluate", "cli"}, False)
    assert forbidden_in_table("-") == (set(), False)
    assert forbidden_in_table("everything of onemodel") == ({"onemodel"}, False)
    assert forbidden_in_table("`evaluate`; in a format package: another") == ({"evaluate"}, True)
    assert _names("`a` (`b` (`c`) `d`), `e`") == ["a", "e"]
    assert imports_in_table("`ir`, `errors`; `evaluate`, `formats.onnx` (bytes; `x`) inside "
                            "functions", ["engines"]) == {
        "engines": ({"ir", "errors"}, {"evaluate", "formats.onnx"})}
    assert imports_in_table("`entry`: `signals`; `cli` inside a function; `signals`: nothing "
                            "of onemodel", ["entry", "signals"]) == {
        "entry": ({"signals"}, {"cli"}), "signals": (set(), set())}
    with pytest.raises(AssertionError):
        imports_in_table("`entry`: `signals`", ["entry", "signals"])  # signals not said


def test_a_stale_row_a_missing_row_and_a_wrong_rule_are_each_caught():
    """Each kind of staleness, on the real table with one thing changed."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    today = imports_today()
    assert stale_rows(text, today) == []
    storage = next(line for line in text.splitlines() if line.startswith("| `onemodel.storage`"))
    cells = [c.strip() for c in storage.strip().strip("|").split("|")]
    for column, value, want in (
            (3, "`errors`, `limits`", "storage imports at module level"),          # lazy gone
            (3, "`errors`, `limits`, `lazy`; `ir` inside a function",
             "storage imports only inside functions"),                             # ir added
            (2, "`ir`, `formats`", "May not import says"),                        # a rule less
    ):
        changed = "| " + " | ".join(cells[:column] + [value] + cells[column + 1:]) + " |"
        problems = stale_rows(text.replace(storage, changed), today)
        assert len(problems) == 1 and want in problems[0], problems
    assert stale_rows(text.replace(storage + "\n", ""), today) == ["no row for ['storage']"]


def test_the_scanner_counts_no_import_module_string(tmp_path, monkeypatch):
    """A module named to ``importlib.import_module`` (how the operator table reaches a family's
    kernels and rules) is no import of the table's."""
    import test_import_rules

    pkg = tmp_path / "onemodel"
    (pkg / "operators").mkdir(parents=True)
    (pkg / "evaluate").mkdir()
    for rel in ("__init__.py", "operators/__init__.py", "evaluate/__init__.py"):
        (pkg / rel).write_text("")
    (pkg / "operators" / "table.py").write_text(
        "import importlib\n\ndef kernel(family):\n"
        "    return importlib.import_module(f'onemodel.evaluate.kernels.{family}')\n"
        "MOD = importlib.import_module('onemodel.evaluate')\n")
    monkeypatch.setattr(test_import_rules, "ROOT", pkg)
    assert imports_today()["operators"] == {}
