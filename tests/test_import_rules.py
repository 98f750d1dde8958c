"""The package's layering (docs/architecture: sources -> readers -> IR -> writers -> sinks),
checked statically over every module's imports, function-local ones included.

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
- ``onemodel.engines`` (the engine registry and the built-in engines) imports nothing from
  ``onemodel.verify``, ``onemodel.bisect`` or ``onemodel.cli`` (they use it, not the reverse),
  and the built-in engines (``.onemodel_engine``, ``.onnxruntime_engine``) are imported by no
  module outside ``onemodel.engines``: callers ask the registry by name;
- the command line's application (``onemodel.cli.application``: the typer app, shared options,
  exit handling) imports no command module: each command (``onemodel.cli.convert``, ``.info``,
  ``.verify``, ``.check``, ``.run``, ``.hash``, ``.infer``) registers itself on the app, and
  imports no other command (what two share lives in the application or a helper module).
"""

import ast
import sys
from pathlib import Path

import onemodel

ROOT = Path(onemodel.__file__).parent

RULES = {
    "onemodel.storage": ("onemodel.ir", "onemodel.formats", "onemodel.evaluate"),
    "onemodel.ir": ("onemodel.storage", "onemodel.formats", "onemodel.evaluate"),
    "onemodel.formats": ("onemodel.evaluate", "onemodel.cli"),
    "onemodel.schemas": ("onemodel.storage", "onemodel.formats", "onemodel.evaluate",
                         "onemodel.cli"),
    "onemodel.inference": ("onemodel.storage", "onemodel.formats", "onemodel.evaluate",
                           "onemodel.validation", "onemodel.cli"),
    "onemodel.engines": ("onemodel.verify", "onemodel.bisect", "onemodel.cli"),
}

#: Format packages that import nothing of one another.
FORMAT_PACKAGES = ("onemodel.formats.onnx", "onemodel.formats.container",
                   "onemodel.formats.safetensors")
for _package in FORMAT_PACKAGES:
    RULES[_package] = tuple(p for p in FORMAT_PACKAGES if p != _package)

#: The command modules of the command line, one per command (``onemodel.cli`` imports them).
CLI_COMMANDS = tuple(f"onemodel.cli.{c}" for c in
                     ("convert", "info", "verify", "check", "run", "hash", "infer"))
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
