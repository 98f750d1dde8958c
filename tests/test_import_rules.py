"""The package's layering (docs/architecture: sources -> readers -> IR -> writers -> sinks),
checked statically over every module's imports, function-local ones included.

- ``onemodel.errors`` imports nothing of ``onemodel``;
- ``onemodel.storage`` imports nothing from ``onemodel.ir``, ``onemodel.formats`` or
  ``onemodel.evaluate``;
- ``onemodel.ir`` imports nothing from ``onemodel.storage``, ``onemodel.formats`` or
  ``onemodel.evaluate``;
- ``onemodel.formats`` imports nothing from ``onemodel.evaluate`` or ``onemodel.cli``;
- ``onemodel.schemas`` (the operator table, a leaf) imports nothing from ``onemodel.storage``,
  ``onemodel.formats``, ``onemodel.evaluate`` or ``onemodel.cli``;
- ``onemodel.inference`` (shape and type inference, which the evaluator and the validator use)
  imports nothing from ``onemodel.storage``, ``onemodel.formats``, ``onemodel.evaluate``,
  ``onemodel.validation`` or ``onemodel.cli`` (a path is read through ``onemodel.api``);
- the format packages (``onemodel.formats.onnx``, ``.container``, ``.safetensors``) import
  nothing of one another (what they share lives in ``onemodel.formats`` or ``onemodel.limits``:
  ``formats.json_scan``, ``limits.MAX_EXTERNAL_DATA_ALIGNMENT``);
- ``onemodel.formats.safetensors`` is imported by no module outside it: it is reached through
  the layout registry (``onemodel.formats.layouts``), which names its plugin by a string;
- ``onemodel.operators`` (the operator table, and the geometry, axis normalization and
  broadcasting the kernels and rules share) imports nothing from ``onemodel.storage``,
  ``onemodel.formats``, ``onemodel.evaluate``, ``onemodel.inference`` or ``onemodel.cli`` (a
  family's module is imported by name; the symbolic arithmetic is passed in);
- ``onemodel.engines`` (the engine registry and the built-in engines) imports nothing from
  ``onemodel.verify``, ``onemodel.bisect`` or ``onemodel.cli`` (they use it, not the reverse),
  and the built-in engines (``.onemodel_engine``, ``.onnxruntime_engine``) are imported by no
  module outside ``onemodel.engines``: callers ask the registry by name;
- the command line's application (``onemodel.cli.application``: the typer app, shared options,
  exit handling) imports no command module: each command (``onemodel.cli.convert``, ``.info``,
  ``.verify``, ``.check``, ``.run``, ``.hash``, ``.infer``) registers itself on the app, and
  imports no other command (what two share lives in the application or a helper module).

And no cycles (issue 25 item 7), at three grains:

- no cycle of module-level imports between the modules of ``onemodel`` (an import at the top of
  a module, in a class body, under ``if`` or ``try``: what runs when the module is imported);
- no cycle either when imports inside functions are counted too: an import moved into a
  function to dodge a cycle still makes one (the shared piece goes down a layer instead). The
  function-level imports that may close a cycle are listed in :data:`ALLOWED_CYCLE_EDGES`, each
  with its reason; the test fails when one no longer exists or no longer closes a cycle;
- no cycle between ``onemodel``'s top-level modules and packages (``errors``, ``storage``,
  ``formats``, ``api``, ``validation``, ``cli``, ...), all imports counted, so that
  ``formats -> content_digest -> formats`` is caught although no module imports itself back.

A package's ``__init__`` importing its own modules is not a cycle (the packages above an imported
module are not edges); :data:`KNOWN_CYCLES` lists the cycles of today, with their reason, and
only shrinks.
"""

import ast
import sys
from pathlib import Path

import onemodel

ROOT = Path(onemodel.__file__).parent

RULES = {
    "onemodel.errors": ("onemodel",),
    "onemodel.storage": ("onemodel.ir", "onemodel.formats", "onemodel.evaluate"),
    "onemodel.ir": ("onemodel.storage", "onemodel.formats", "onemodel.evaluate"),
    "onemodel.formats": ("onemodel.evaluate", "onemodel.cli"),
    "onemodel.schemas": ("onemodel.storage", "onemodel.formats", "onemodel.evaluate",
                         "onemodel.cli"),
    "onemodel.inference": ("onemodel.storage", "onemodel.formats", "onemodel.evaluate",
                           "onemodel.validation", "onemodel.cli"),
    "onemodel.engines": ("onemodel.verify", "onemodel.bisect", "onemodel.cli"),
    "onemodel.operators": ("onemodel.storage", "onemodel.formats", "onemodel.evaluate",
                           "onemodel.inference", "onemodel.cli"),
    "onemodel.view": ("onemodel.storage", "onemodel.formats", "onemodel.evaluate",
                      "onemodel.cli"),
}

#: Format packages that import nothing of one another.
FORMAT_PACKAGES = ("onemodel.formats.onnx", "onemodel.formats.container",
                   "onemodel.formats.safetensors")
for _package in FORMAT_PACKAGES:
    RULES[_package] = tuple(p for p in FORMAT_PACKAGES if p != _package)

#: The command modules of the command line, one per command (``onemodel.cli`` imports them).
CLI_COMMANDS = tuple(f"onemodel.cli.{c}" for c in
                     ("convert", "info", "verify", "check", "run", "hash", "infer", "view",
                      "scan"))
RULES["onemodel.cli.application"] = CLI_COMMANDS
for _command in CLI_COMMANDS:
    RULES[_command] = tuple(c for c in CLI_COMMANDS if c != _command)

#: Packages no module outside them imports (plugins reached through a registry).
SEALED = ("onemodel.formats.safetensors", "onemodel.engines.onemodel_engine",
          "onemodel.engines.onnxruntime_engine")

#: (importing module, imported module) pairs that break a rule today, each with its reason;
#: the test fails when one is fixed and left here, so the list only shrinks.
KNOWN: dict = {
    # info --shapes prints infer's value listing (shape_listing, shape_blocks), which lives
    # with the command that writes the same facts into a model
    ("onemodel.cli.info", "onemodel.cli.infer"): "info --shapes: infer's value listing",
}

#: Imports inside a function that close a cycle, (importing module, imported module) -> why it
#: stays; each must exist, be function-level only, and still close a cycle.
ALLOWED_CYCLE_EDGES = {
    ("onemodel.evaluate.inputs", "onemodel.evaluate.input_hints"):
        "the former public path onemodel.evaluate.inputs.add_inputs_hint (docs/api.md) is "
        "served by a module __getattr__; input_hints (it runs the model) stands above inputs",
}

#: Cycles of today (their modules, all imports counted) -> why; the test fails when one is gone.
#: Empty: the last one, cli <-> its command modules, went with the app's move to cli.application.
KNOWN_CYCLES: dict = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute, wherever the import statement is."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)  # from pkg import submodule
    return found


def _inside(mod: str, package: str) -> bool:
    return mod == package or mod.startswith(package + ".")


def violations() -> set[tuple[str, str]]:
    bad = set()
    for path in ROOT.rglob("*.py"):
        name = _module_name(path)
        for sealed in SEALED:
            if not _inside(name, sealed) and any(_inside(m, sealed) for m in imports_of(path)):
                bad.add((name, sealed))
        for layer, forbidden in RULES.items():
            if not _inside(name, layer):
                continue
            for mod in imports_of(path):
                if any(_inside(mod, f) for f in forbidden):
                    bad.add((name, next(f for f in forbidden if _inside(mod, f))))
    return bad


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def import_edges(path: Path, modules) -> dict[str, bool]:
    """The modules of ``onemodel`` (names in ``modules``) that ``path`` imports, each with
    whether some import of it runs when ``path`` is imported (at module level: at the top, in a
    class body, under an ``if`` or ``try``) rather than only when a function runs. ``from X
    import a`` where ``X.a`` is a module is an edge to ``X.a`` alone; the packages above a
    module imported (whose ``__init__`` Python runs first) are not edges: a package's
    ``__init__`` importing its own modules is not a cycle. ``from . import _ckernels``, a
    compiled extension (a ``_ckernels.c`` or ``.so`` beside), is an edge to nothing of the
    package's Python."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, bool] = {}

    def add(mod: str, top: bool) -> None:
        if mod in modules and mod != name:
            found[mod] = found.get(mod, False) or top

    def visit(node, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    add(a.name, top)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                for a in child.names:
                    sub = f"{mod}.{a.name}"
                    if sub in modules:
                        add(sub, top)
                    elif not any(ROOT.parent.joinpath(*mod.split(".")).glob(f"{a.name}.*")):
                        add(mod, top)  # a name the module defines (not an extension module)
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), True)
    return found


def import_graph(module_level_only: bool) -> dict[str, set[str]]:
    """Module -> the modules it imports (only those imported at module level, or all)."""
    modules = _modules()
    return {name: {m for m, top in import_edges(path, modules).items()
                   if top or not module_level_only}
            for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module (Tarjan's
    algorithm, iterative: ``onemodel.ir.calls.strongly_connected``, which finds recursive
    functions), each sorted; a module importing itself is not an edge."""
    from onemodel.ir.calls import strongly_connected

    ordered = {k: sorted(graph[k]) for k in sorted(graph)}
    return [sorted(c) for c in strongly_connected(ordered) if len(c) > 1]


def test_resolving_relative_imports():
    path = ROOT / "storage" / "blob.py"
    assert _module_name(path) == "onemodel.storage.blob"
    assert "onemodel.errors" in imports_of(path)   # a function-local ``from ..errors import``


def test_every_module_keeps_the_import_rules():
    bad = violations()
    assert bad - set(KNOWN) == set(), "imports that break the layering: " + ", ".join(
        f"{a} imports {b}" for a, b in sorted(bad - set(KNOWN)))
    assert set(KNOWN) - bad == set(), "fixed: remove from KNOWN: " + repr(set(KNOWN) - bad)


def test_the_check_sees_storage_importing_the_ir(tmp_path, monkeypatch):
    """The rule this layering was made for: storage importing the IR again is caught, whether
    at the top of a module or inside a function."""
    for text in ("from ..ir.record import is_blob\n",
                 "def f():\n    from ..ir import record\n    return record\n",
                 "import onemodel.ir.tensor\n"):
        fake = tmp_path / "onemodel" / "storage" / "fake.py"
        fake.parent.mkdir(parents=True, exist_ok=True)
        fake.write_text(text)
        monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "onemodel")
        assert violations() == {("onemodel.storage.fake", "onemodel.ir")}


def test_the_check_sees_a_private_import_of_a_format_plugin(tmp_path, monkeypatch):
    """A module outside formats/safetensors importing it (as the ONNX writer did before the
    layout registry) is caught, and so is one format package importing another (as the
    safetensors header did with the container manifest's json_depth)."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "onemodel")
    cases = [(("formats", "onnx", "fake.py"), "from ..safetensors import layout\n",
              {("onemodel.formats.onnx.fake", "onemodel.formats.safetensors")}),
             (("api.py",), "def f():\n    from .formats.safetensors.weights import x\n",
              {("onemodel.api", "onemodel.formats.safetensors")}),
             (("formats", "safetensors", "fake.py"),
              "from ..container.manifest import json_depth\n",
              {("onemodel.formats.safetensors.fake", "onemodel.formats.container")}),
             (("formats", "safetensors", "ok.py"), "from . import header\n", set())]
    for parts, text, want in cases:
        for old in (tmp_path / "onemodel").rglob("*.py"):
            old.unlink()
        fake = tmp_path.joinpath("onemodel", *parts)
        fake.parent.mkdir(parents=True, exist_ok=True)
        fake.write_text(text)
        assert violations() == want


def test_the_check_sees_the_cli_application_or_a_command_importing_a_command(tmp_path,
                                                                            monkeypatch):
    """The command line's application importing a command module (the commands register on
    it, not the other way round), or one command module importing another, is caught."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "onemodel")
    cases = [("application.py", "def f():\n    from .run import run_cmd\n",
              {("onemodel.cli.application", "onemodel.cli.run")}),
             ("check.py", "from .verify import REPORT_LIMIT\n",
              {("onemodel.cli.check", "onemodel.cli.verify")}),
             ("hash.py", "from .application import app\nfrom . import redact\n", set())]
    for name, text, want in cases:
        for old in (tmp_path / "onemodel").rglob("*.py"):
            old.unlink()
        fake = tmp_path / "onemodel" / "cli" / name
        fake.parent.mkdir(parents=True, exist_ok=True)
        fake.write_text(text)
        assert violations() == want


def _without_allowed(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {a: {b for b in bs if (a, b) not in ALLOWED_CYCLE_EDGES} for a, bs in graph.items()}


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` seen between ``onemodel``'s top-level modules and packages."""
    out: dict[str, set[str]] = {}
    for a, bs in graph.items():
        out.setdefault(_package(a), set()).update(
            _package(b) for b in bs if _package(b) != _package(a))
    return out


def _unknown(found: list[list[str]]) -> list[list[str]]:
    return [c for c in found if not any(set(c) <= k for k in KNOWN_CYCLES)]


def test_no_module_level_import_cycle():
    found = cycles(import_graph(module_level_only=True))
    assert _unknown(found) == [], "module-level import cycles: " + "; ".join(
        " <-> ".join(c) for c in _unknown(found))


def test_no_import_cycle_through_function_level_imports():
    """All imports counted, those inside functions too (minus :data:`ALLOWED_CYCLE_EDGES`)."""
    found = cycles(_without_allowed(import_graph(module_level_only=False)))
    assert _unknown(found) == [], "import cycles (function-level imports counted): " + \
        "; ".join(" <-> ".join(c) for c in _unknown(found))
    gone = [k for k in KNOWN_CYCLES if not any(k == set(c) for c in found)]
    assert gone == [], f"fixed or changed: update KNOWN_CYCLES: {gone}"


def test_the_allowed_function_level_imports_still_close_a_cycle():
    graph = import_graph(module_level_only=False)
    top = import_graph(module_level_only=True)
    rest = _without_allowed(graph)
    for (a, b), reason in ALLOWED_CYCLE_EDGES.items():
        assert reason and b in graph[a] and b not in top[a], (a, b)
        rest[a].add(b)
        assert any({a, b} <= set(c) for c in cycles(rest)), f"no cycle any more: remove {(a, b)}"
        rest[a].discard(b)


def test_no_import_cycle_between_top_level_packages():
    found = cycles(package_graph(_without_allowed(import_graph(module_level_only=False))))
    assert found == [], "cycles between onemodel's packages: " + "; ".join(
        " <-> ".join(c) for c in found)


def test_the_cycle_checks_see_each_kind_of_cycle(tmp_path, monkeypatch):
    """A module-level cycle, one closed inside a function, one between two packages through
    different modules; and what is not a cycle: a package's __init__ importing its modules
    that import a sibling, and ``from . import _ext`` of a compiled extension."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "onemodel")

    def tree(files: dict[str, str]) -> None:
        for old in sorted((tmp_path / "onemodel").rglob("*"), reverse=True):
            old.unlink() if old.is_file() else old.rmdir()
        for rel, text in files.items():
            f = tmp_path / "onemodel" / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)

    tree({"__init__.py": "", "a.py": "from . import b\n", "b.py": "from .a import x\n"})
    assert cycles(import_graph(True)) == [["onemodel.a", "onemodel.b"]]
    tree({"__init__.py": "", "a.py": "from . import b\n",
          "b.py": "def f():\n    from .a import x\n"})
    assert cycles(import_graph(True)) == []
    assert cycles(import_graph(False)) == [["onemodel.a", "onemodel.b"]]
    tree({"__init__.py": "", "p/__init__.py": "", "p/x.py": "from ..q import y\n",
          "q/__init__.py": "", "q/y.py": "def f():\n    from ..p.z import g\n",
          "p/z.py": ""})
    assert cycles(import_graph(False)) == []
    assert cycles(package_graph(import_graph(False))) == [["onemodel.p", "onemodel.q"]]
    tree({"__init__.py": "from .p import x\n", "p/__init__.py": "from .x import f\n",
          "p/x.py": "from . import y, _ext\nfrom .. import p\n", "p/y.py": "",
          "p/_ext.c": ""})
    assert import_edges(tmp_path / "onemodel" / "p" / "x.py", _modules()) == \
        {"onemodel.p.y": True, "onemodel.p": True}
    assert cycles(import_graph(False)) == [["onemodel.p", "onemodel.p.x"]]  # x imports p back
    tree({"__init__.py": "from .p import x\n", "p/__init__.py": "from .x import f\n",
          "p/x.py": "from . import y, _ext\n", "p/y.py": "", "p/_ext.c": ""})
    assert cycles(import_graph(False)) == []
