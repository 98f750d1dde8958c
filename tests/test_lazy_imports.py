"""A command pays only for what it uses: numpy, ml_dtypes, zstandard, rich and fsspec are
imported on first need (onemodel.lazy), so converting a model whose weights are raw_data and
whose attributes hold no float lists never imports them; running a float model never imports
ml_dtypes; loading one format imports nothing of the other format's plugin. Each case runs in a
fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest

MODELS = Path(__file__).resolve().parent.parent / "testdata" / "models"
HEAVY = ("numpy", "ml_dtypes", "zstandard", "rich", "fsspec")


def _run(code: str, pure: bool = False) -> dict:
    env = dict(os.environ)
    env.pop("ONEMODEL_PURE_PYTHON", None)
    if pure:
        env["ONEMODEL_PURE_PYTHON"] = "1"
    script = textwrap.dedent("""
        import json, sys
        HEAVY = %r
        def loaded():
            return sorted(m for m in HEAVY if m in sys.modules)
        out = {}
    """ % (HEAVY,)) + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_cli_imports_none_of_them():
    out = _run("""
        import onemodel, onemodel.cli
        out["loaded"] = loaded()
    """)
    assert out["loaded"] == []


@pytest.mark.parametrize("pure", [False, True], ids=["C decoder", "Python decoder"])
def test_a_transformer_converts_both_ways_without_numpy(tmp_path, pure):
    """transformer_dynamo.onnx has FLOAT attributes (LayerNormalization epsilon, Gemm alpha):
    they are read as Float32 without numpy, and the round trip is still byte-identical."""
    src = MODELS / "transformer_dynamo.onnx"
    om, back = tmp_path / "t.onemodel", tmp_path / "t.onnx"
    out = _run(f"""
        import onemodel
        onemodel.convert({str(src)!r}, {str(om)!r})
        onemodel.convert({str(om)!r}, {str(back)!r})
        with onemodel.load({str(src)!r}) as m:
            eps = [a.f for n in m.graph.nodes for a in n.attributes if a.name == "epsilon"]
            out["eps"] = [[type(e).__name__, e.bits] for e in eps]
        out["loaded"] = loaded()
    """, pure=pure)
    assert out["loaded"] == []
    assert back.read_bytes() == src.read_bytes()
    proto = onnx.load(str(src))
    want = [onnx.helper.get_attribute_value(a) for n in proto.graph.node for a in n.attribute
            if a.name == "epsilon"]
    import numpy as np
    assert want and out["eps"] == [["Float32", int(np.float32(w).view(np.uint32))] for w in want]


@pytest.mark.parametrize("pure", [False, True], ids=["C decoder", "Python decoder"])
def test_numpy_arrives_with_the_first_array_and_values_are_right(pure):
    """A model with float lists (skl2onnx: Scaler offsets, LinearClassifier coefficients)
    imports numpy in the middle of a decode, after a model that did not need it."""
    first = MODELS / "cnn_dynamo.onnx"
    src = MODELS / "sklearn_pipeline_zipmap.onnx"
    out = _run(f"""
        import onemodel
        onemodel.load({str(first)!r}).close()
        out["before"] = loaded()
        with onemodel.load({str(src)!r}) as m:
            out["floats"] = {{f"{{n.name}}.{{a.name}}": a.floats.tolist()
                             for n in m.graph.nodes for a in n.attributes
                             if a.floats is not None}}
        out["after"] = loaded()
    """, pure=pure)
    assert out["before"] == [] and "numpy" in out["after"]
    proto = onnx.load(str(src))
    want = {f"{n.name}.{a.name}": [float(x) for x in a.floats] for n in proto.graph.node
            for a in n.attribute if a.type == onnx.AttributeProto.FLOATS}
    assert want and out["floats"] == want


@pytest.mark.parametrize("fmt, other", [("onnx", "onemodel.formats.container"),
                                        ("onemodel", "onemodel.formats.onnx")])
def test_loading_one_format_imports_nothing_of_the_other(tmp_path, fmt, other):
    """The format registry imports a built-in plugin only when a file can be of its format: the
    first load of a model pays for its own reader alone."""
    src = MODELS / "cnn_dynamo.onnx"
    path = src
    if fmt == "onemodel":
        path = tmp_path / "cnn.onemodel"
        import onemodel
        onemodel.convert(str(src), str(path))
    out = _run(f"""
        import onemodel
        with onemodel.load({str(path)!r}) as m:
            out["nodes"] = len(m.graph.nodes)
            out["format"] = m.format
        out["other"] = {other!r} in sys.modules
        out["hashlib"] = "hashlib" in sys.modules  # (data-file checksums only)
    """)
    assert out["nodes"] == len(onnx.load(str(src)).graph.node)
    assert out["format"] == fmt and out["other"] is False and out["hashlib"] is False


def test_the_registry_knows_each_builtin_format_as_its_plugin_does():
    """formats._BUILTIN decides which plugin to import from the suffix and the magic: they
    must be the plugins' own."""
    from onemodel import formats
    from onemodel.formats.container import MAGIC

    for name, (spec, suffixes, magic) in formats._BUILTIN.items():
        module, attr = spec.split(":")
        plugin = getattr(__import__(module, fromlist=[attr]), attr)
        assert plugin.name == name and plugin.suffixes == suffixes
        assert magic is None or plugin.sniff(magic + b"\0" * 56)
    assert formats._BUILTIN["onemodel"][2] == MAGIC


def test_a_float_model_runs_without_ml_dtypes_and_a_narrow_cast_imports_it():
    """ml_dtypes 0.7.0 takes half a second to import: the kernels name it through
    onemodel.lazy, so only a model that uses a narrow type (bfloat16, float8, int4 ...) pays."""
    src = MODELS / "cnn_dynamo.onnx"
    out = _run(f"""
        import numpy as np
        import onemodel
        from onemodel.evaluate import run
        from onemodel.ir import Graph, Model, Node, OperatorSetId, ValueInfo, TensorType, Attribute
        with onemodel.load({str(src)!r}) as m:
            x = m.graph.inputs[0]
            dims = [d if isinstance(d, int) else 1 for d in x.type.shape.values]
            y = run(m, {{x.name: np.ones(dims, np.float32)}})
            out["shape"] = list(next(iter(y.values())).shape)
        out["after_float"] = loaded()
        cast = Model(ir_version=10, opset_imports=[OperatorSetId(domain="", version=21)],
                     graph=Graph(name="g", inputs=[ValueInfo(name="x")],
                                 outputs=[ValueInfo(name="y")],
                                 nodes=[Node(op_type="Cast", inputs=["x"], outputs=["y"],
                                             attributes=[Attribute(name="to", i=16, type=2)])]))
        y = run(cast, {{"x": np.array([1.0, 3.0078125], np.float32)}})["y"]
        out["bf16"] = [str(y.dtype), y.view(np.uint16).tolist()]
        out["after_cast"] = loaded()
    """)
    assert out["shape"] == [1, 10]
    assert "numpy" in out["after_float"] and "ml_dtypes" not in out["after_float"]
    # bfloat16 of 1.0 is 0x3F80; 3.0078125 = 0x40408000 in float32 rounds (to nearest even,
    # a tie) down to 0x4040
    assert out["bf16"] == ["bfloat16", [0x3F80, 0x4040]]
    assert "ml_dtypes" in out["after_cast"]


@pytest.mark.parametrize("head, name, want", [
    (b"\x08\x07\x12\x00", "x.onemodel", "onnx"),   # the bytes win over the suffix
    (b"ONEMODEL" + b"\0" * 8, "x.onnx", "onemodel"),
    (None, "x.onemodel.zst", "onemodel"),
    (None, "X.ONNX", "onnx"),
    (b"\x08\x07\x12\x00", None, "onnx"),
    (b"junk", "x.onnx", "onnx"),                    # no format's bytes: the suffix
])
def test_detection_in_a_fresh_registry_is_what_it_was_with_every_plugin_loaded(head, name, want):
    out = _run(f"""
        from onemodel import formats
        out["lazy"] = formats.detect({head!r}, {name!r}).name
        formats._load_builtins()
        out["all"] = formats.detect({head!r}, {name!r}).name
    """)
    assert out == {"lazy": want, "all": want}


def test_importing_onemodel_does_not_import_the_validator():
    out = _run("""
        import onemodel, onemodel.cli
        out["before"] = sorted(m for m in sys.modules if m.startswith("onemodel.validation"))
        report = onemodel.check
        out["after"] = "onemodel.validation" in sys.modules and callable(report)
    """)
    assert out["before"] == [] and out["after"] is True


def test_checking_an_onnx_file_imports_neither_the_container_package_nor_hashlib():
    """`onemodel check` of an ONNX file without --full hashes nothing: the OM207 family imports
    the container package and hashlib (10 ms of the command) only under --full, where it
    works."""
    out = _run("""
        import onemodel
        report = onemodel.check(%r)
        out["ok"] = report.ok
        out["loaded"] = sorted(m for m in sys.modules if m in ("hashlib", "_hashlib")
                               or m.startswith("onemodel.formats.container"))
        onemodel.check(%r, full=True)
        out["full"] = "onemodel.formats.container.digests" in sys.modules
    """ % (str(MODELS / "cnn_dynamo.onnx"), str(MODELS / "cnn_dynamo.onnx")))
    assert out == {"ok": True, "loaded": [], "full": True}


def test_reading_a_model_does_not_import_tempfile():
    """Temporary files are made by the writer's sink and by decompression only: reading an
    ONNX file (and summarizing it, as info does) imports neither tempfile nor random."""
    out = _run("""
        import onemodel
        from onemodel.summary import summarize
        summarize(onemodel.load(%r))
        out["loaded"] = sorted(m for m in ("tempfile", "random") if m in sys.modules)
    """ % str(MODELS / "cnn_dynamo.onnx"))
    assert out == {"loaded": []}


def test_a_command_line_registers_the_command_it_names_and_help_lists_them_all():
    """`onemodel check M` imports and builds the check command only (the others' options cost
    ~5 ms of every command); ``--help`` and ``onemodel.cli.app`` have every command, in the
    order of COMMANDS, whichever module was imported first."""
    out = _run("""
        import contextlib, io
        sys.argv = ["onemodel", "check", %r]
        from onemodel.cli import application, main
        application._exit_now = lambda code: None  # (else the process ends in main)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                main()
        except SystemExit as e:
            out["status"] = e.code
        out["commands"] = sorted(m for m in sys.modules if m in (
            "onemodel.cli.convert", "onemodel.cli.check", "onemodel.cli.infer",
            "onemodel.cli.run"))
        import onemodel.cli
        out["all"] = [c.name or c.callback.__name__.removesuffix("_cmd")
                      for c in onemodel.cli.app.registered_commands]
    """ % str(MODELS / "cnn_dynamo.onnx"))
    assert out == {"status": 0, "commands": ["onemodel.cli.check"],
                   "all": ["convert", "info", "verify", "check", "run", "hash", "sign",
                           "verify-signature", "infer", "view", "scan"]}
