"""A command pays only for what it uses: numpy, ml_dtypes, zstandard, rich and fsspec are
imported on first need (onemodel.lazy), so converting a model whose weights are raw_data and
whose attributes hold no float lists never imports them. Each case runs in a fresh process."""

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
