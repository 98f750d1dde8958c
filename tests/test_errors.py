"""Error lines stay readable (issue 9, item 7): quoted values are cut with an ellipsis and their
full length (``errors.quote``), and ``str(error)`` bounds its message, path and source
(``errors.clip``) whatever the call site."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

import onemodel
from onemodel.errors import (
    MESSAGE_LIMIT,
    PART_LIMIT,
    EvaluationError,
    IoError,
    MalformedError,
    OneModelError,
    OneModelWarning,
    UsageError,
    clip,
    quote,
)

N = 100_000


def test_short_values_are_quoted_as_repr_does():
    for v in ("abc", "it's", 'say "hi"', "a\nb", "", "é", "x" * 200):
        assert quote(v) == repr(v)
    assert quote(b"\x00ab") == repr(b"\x00ab")
    assert quote(42) == "42"


def test_a_long_string_keeps_both_ends_and_its_length():
    v = "a" * 100 + "b" * (N - 200) + "c" * 100
    assert quote(v) == "'" + "a" * 100 + "…" + "c" * 100 + f"' ({N} characters)"
    assert quote(v, limit=10) == f"'aaaaa…ccccc' ({N} characters)"
    # escapes are those of repr, and a quote inside stays escaped between single quotes
    assert quote("'\n" * 150, limit=4) == "'\\'\\n…\\'\\n' (300 characters)"


def test_long_bytes_and_other_values_are_cut_too():
    assert quote(b"x" * 1000, limit=4) == "b'xx…xx' (1000 octets)"
    r = repr(list(range(1000)))
    assert quote(list(range(1000)), limit=10) == f"{r[:5]}…{r[-5:]} ({len(r)} characters)"


def test_a_url_is_masked_before_it_is_cut():
    """Cutting could separate a signature from its ``?``; the masking of the command line would
    not see it then, so the URL is masked first."""
    url = "https://h/" + "p" * 300 + "?X-Amz-Signature=SECRET&t=" + "s" * 300
    q = quote(url)
    assert "SECRET" not in q and "sss" not in q
    assert q.endswith(f"?X-Amz-Signature=***&t=***' ({len(url)} characters)")
    assert "SECRET" not in clip(f"cannot read {url} now", 100)


def test_an_error_line_is_bounded_whatever_the_call_site():
    e = IoError("m" * N, path="p" * N, offset=16, source="s" * N)
    line = str(e)
    assert len(line) < MESSAGE_LIMIT + 2 * PART_LIMIT + 200
    assert line.count(f"({N} characters)") == 3 and "\n" not in line
    assert line.startswith("Io: " + "m" * (MESSAGE_LIMIT // 2) + "…")
    assert e.message == "m" * N  # the attributes keep everything
    assert pickle.loads(pickle.dumps(e)).message == e.message


def test_evaluation_and_usage_errors_are_bounded_too():
    assert len(str(EvaluationError("e" * N))) < MESSAGE_LIMIT + 100
    u = UsageError("u" * N)
    assert len(str(u)) < MESSAGE_LIMIT + 100 and str(u).endswith(f"({N} characters)")
    assert str(UsageError("no input 'x'")) == "no input 'x'"
    assert len(str(OneModelWarning("w" * N))) < MESSAGE_LIMIT + 100


def test_a_short_error_line_is_unchanged():
    e = MalformedError("bad 'x'", path="ModelProto.graph", offset=0x1F40, source="m.onnx")
    assert str(e) == "Malformed: bad 'x' [ModelProto.graph] at offset 0x1f40 in m.onnx"
    assert str(OneModelError("m" * MESSAGE_LIMIT)) == "Error: " + "m" * MESSAGE_LIMIT


def _long_location_model(path):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    t = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "a" * N), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", 1, None)], initializer=[t])
    path.write_bytes(helper.make_model(g).SerializeToString())


def test_a_100_kb_external_data_location_gives_a_short_line(tmp_path):
    p = tmp_path / "m.onnx"
    _long_location_model(p)
    with pytest.raises(OneModelError) as info:
        onemodel.load(p)
    line = str(info.value)
    assert len(line) < 1024, len(line)
    assert "location 'aaaa" in line and f"aaaa' ({N} characters)" in line
    assert info.value.path == "ModelProto.graph.initializer[0]"


def test_a_100_kb_external_data_location_through_the_command_line(tmp_path):
    p = tmp_path / "m.onnx"
    _long_location_model(p)
    r = subprocess.run([sys.executable, "-m", "onemodel", "info", str(p)], capture_output=True,
                       text=True, timeout=60)
    # the structure on stdout (its data file line bounded too), the error line on stderr
    assert r.returncode == 2 and max(map(len, r.stdout.splitlines())) < 2048
    assert r.stdout.splitlines()[-1].startswith("data file aaaa")
    assert len(r.stderr) < 1024 and r.stderr.count("\n") == 1, r.stderr[:300]
    assert r.stderr.startswith("Io: tensor 'w', external data location 'aaaa")
    assert f"({N} characters)" in r.stderr


def test_usage_error_is_a_onemodel_error_and_exported():
    # issue 24 item 6: `except OneModelError` caught every error of a caller's input but this one
    assert issubclass(UsageError, OneModelError) and issubclass(UsageError, ValueError)
    assert not issubclass(onemodel.UsageError, (MalformedError, IoError))  # not a reading kind
    e = UsageError("no input 'x'")
    assert (e.kind, e.message, str(e)) == ("Usage", "no input 'x'", "no input 'x'")
    assert str(e.at(path="p", source="m.onnx")) == "no input 'x'"  # the message alone, as before
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is UsageError and back.message == "no input 'x'"
    # every public error class of onemodel.errors is exported by the package
    import inspect

    import onemodel.errors as errors
    public = {n for n, c in vars(errors).items() if inspect.isclass(c) and not n.startswith("_")
              and issubclass(c, (Exception, Warning)) and c.__module__ == errors.__name__}
    assert public <= set(onemodel.__all__), public - set(onemodel.__all__)
    assert all(getattr(onemodel, n) is getattr(errors, n) for n in public)


def test_a_usage_error_through_the_command_line_is_still_a_usage_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "onemodel", "convert", "a.onnx", "b.onnx",
                        "--inline", "--external-data-per-tensor"], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("Usage error: choose one of --inline, --external-data, "
                        "--external-data-per-tensor\n")


def test_an_internal_error_is_not_a_onemodel_error_but_reads_as_one():
    """Issue 25 item 2: a bug (InternalError) is kept out of the hierarchy of the input's
    faults, so ``except OneModelError`` does not swallow it; it keeps the same fields, ``at``,
    the bounded one line (without a kind in front) and pickling, and is exported."""
    from onemodel.errors import InternalError

    assert not issubclass(InternalError, OneModelError) and issubclass(InternalError, Exception)
    assert onemodel.InternalError is InternalError and "InternalError" in onemodel.__all__
    e = InternalError("internal error in kernel k for node 0 (Add): TypeError: x; please report "
                      "it", kernel="k", node="0 (Add)")
    with pytest.raises(InternalError):
        try:
            raise e
        except OneModelError:
            pytest.fail("except OneModelError caught an InternalError")
    e.at(path="graph.nodes[0]", source="m.onnx")
    assert (e.path, e.offset, e.source) == ("graph.nodes[0]", None, "m.onnx")
    assert str(e) == ("internal error in kernel k for node 0 (Add): TypeError: x; please report "
                      "it [graph.nodes[0]] in m.onnx")
    assert len(str(InternalError("x" * N))) < MESSAGE_LIMIT + 100
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is InternalError and (back.kernel, back.node, str(back)) == \
        ("k", "0 (Add)", str(e))


#: Exception classes defined outside onemodel.errors and not exported, each with why: none
#: reaches a caller as a class of its own.
NOT_EXPORTED = {
    "RefusedError": "formats.onnx.external_refs: the ONNX package's InvalidModelError for a "
                    "refused external reference, told apart inside the package; a caller "
                    "catches it as InvalidModelError",
    "PlacementError": "formats.layouts: what a layout plugin's plan raises for the writer, "
                      "which re-raises its OneModelError with the tensor's path",
    "WireError": "formats.protobuf: the wire decoder's fault, raised to the reader as a "
                 "MalformedError with the field path",
    "RunExpired": "evaluate.runner: a BaseException stopping a trial run at its deadline, "
                  "caught by the input hint",
    "Terminated": "cli: a BaseException for SIGTERM, turned into exit status 143",
    "Refused": "opset_convert.context: an adapter's refusal of one node, collected by the "
               "converter into one ConversionRefused (exported) listing every node",
    "AxisError": "operators.axes: the shared axis normalization's ValueError, which each "
                 "caller turns into its own error (a kernel's EvaluationError, a rule's "
                 "contradiction)",
}


def test_every_public_error_class_is_exported_or_says_why_not():
    """Issue 25 item 3: every exception class of the package (found in its source: a class
    deriving from an exception class) is exported by ``onemodel`` or listed in NOT_EXPORTED
    with its reason; the list holds only classes that exist."""
    import ast
    import builtins
    import pathlib

    root = pathlib.Path(onemodel.__file__).parent
    known = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
             and issubclass(getattr(builtins, n), BaseException)}
    classes = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = {getattr(b, "id", getattr(b, "attr", None))
                                      for b in node.bases}
    grew = True
    while grew:  # the classes deriving from an exception class, through the package's own
        new = {n for n, bases in classes.items() if bases & known} - known
        grew = bool(new)
        known |= new
    errors = {n for n in known if n in classes and not n.startswith("_")}
    unexported = errors - set(onemodel.__all__)
    assert unexported == set(NOT_EXPORTED), unexported ^ set(NOT_EXPORTED)
    assert {"InternalError", "UsageError", "OptionError", "AdviceError"} <= errors


#: Command-line flag text (``--dim``, ``--force``...) in a string of the library (issue 25 item
#: 3): a message naming a caller's setting keeps it as a field (onemodel.errors.Setting) that the
#: command line writes as its flag (cli.application.flag_of); the library writes none.
_FLAG_TEXT = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")

#: The modules outside onemodel/cli/ whose strings name flags, and why that is right there.
_FLAG_TEXT_ALLOWED = {
    "onemodel/limits.py": "each limit's sentence is the conformance statement's, naming the "
                          "command option it bounds (verify --bisect, check --full)",
    "onemodel/validation/codes.py": "the check codes' descriptions are the reference of the "
                                    "check command (docs/check.md), naming its options",
    "onemodel/validation/reading.py": "OM206's finding says what check --full would verify "
                                      "(docs/check.md gives full=True beside it)",
    "onemodel/validation/output.py": "the check command's text report (--json lists every "
                                     "finding)",
    "onemodel/compare.py": "parse_tolerance parses the text of verify's and run's --tol, "
                           "naming the flag its caller gives in its errors",
}


def test_no_command_line_flags_in_library_messages():
    # every string literal (docstrings aside) of onemodel/ outside onemodel/cli/ that spells a
    # command-line flag, in a module not allowed to with its reason; a reason that no longer
    # holds (the module names no flag) fails too
    import ast

    root = Path(onemodel.__file__).parent
    found = {}
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root.parent).as_posix()
        if rel.startswith("onemodel/cli/"):
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                        ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)
                      and isinstance(n.body[0].value, ast.Constant)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and \
                    id(n) not in docstrings and _FLAG_TEXT.search(n.value):
                found.setdefault(rel, []).append(n.lineno)
    assert set(found) == set(_FLAG_TEXT_ALLOWED), {
        rel: sorted(found.get(rel, [])) for rel in set(found) ^ set(_FLAG_TEXT_ALLOWED)}
