"""Small models for the view tests, written with onnx's helper (a test oracle) and read back
with onemodel.load, so that initializers are Blobs of the file as `onemodel view` sees them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

MODELS = Path(__file__).resolve().parents[2] / "testdata" / "models"


def save(path: Path, nodes, inputs, outputs, inits=(), name="g", functions=(), opset=17,
         doc="") -> Path:
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits), doc_string=doc)
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(f.domain, 1)
                                                 for f in functions]
    m = helper.make_model(g, opset_imports=opsets, functions=list(functions))
    onnx.save(m, str(path))
    return path


def tensor(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def vi(name: str, elem=onnx.TensorProto.FLOAT, shape=(2,)):
    return helper.make_tensor_value_info(name, elem, list(shape))
