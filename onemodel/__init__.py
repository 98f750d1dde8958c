"""onemodel: store, convert and verify machine-learning models, bit-identical.

ONNX files (Part 1, Clause 12) and the OneModel container (format version 1) read into one
in-memory model (:mod:`onemodel.ir`) and write back byte for byte; weights stay zero-copy views of
memory-mapped files.

    >>> import onemodel
    >>> onemodel.convert("model.onnx", "model.onemodel")
    >>> onemodel.verify("model.onnx", "model.onemodel").equal
    True
    >>> onemodel.check("model.onnx").ok  # every problem, with its code, path and clause
    True
    >>> data = onemodel.to_bytes(onemodel.load("model.onnx"), format="onnx")  # bytes in memory
"""

from .api import ConvertResult, convert, load, save, to_bytes
from .errors import (
    AdviceError,
    EvaluationError,
    InputError,
    InternalError,
    InvalidModelError,
    IoError,
    MalformedError,
    OneModelError,
    OneModelWarning,
    OptionError,
    UnsupportedError,
    UsageError,
)
from .ir import (
    Attribute,
    DataType,
    Function,
    Graph,
    Model,
    Node,
    SparseTensor,
    Tensor,
    Type,
    ValueInfo,
)
from .verify import Difference, VerifyReport, compare_models, verify

__version__ = "0.1.0"

#: Names served on first use, so ``import onemodel`` does not import the validator (its code
#: registry and check families, about 20 ms) for commands that never check.
_LAZY = {"check": "onemodel.validation", "Finding": "onemodel.validation",
         "Report": "onemodel.validation", "infer": "onemodel.inference",
         "digest": "onemodel.content_digest", "ModelDigest": "onemodel.content_digest"}


def __getattr__(name: str):
    if name == "engines":  # the engine registry (onemodel.engines.register, get, names)
        import importlib

        return importlib.import_module("onemodel.engines")
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'onemodel' has no attribute {name!r}")

__all__ = [
    "load", "save", "to_bytes", "convert", "verify", "check", "Finding", "Report", "infer",
    "digest", "ModelDigest",
    "compare_models", "ConvertResult", "VerifyReport", "Difference", "OneModelError",
    "MalformedError", "InvalidModelError", "UnsupportedError", "OptionError", "IoError",
    "AdviceError", "UsageError", "InputError", "EvaluationError", "InternalError",
    "OneModelWarning",
    "Model", "Graph", "Node", "Attribute",
    "Tensor", "SparseTensor", "Type", "ValueInfo", "Function", "DataType", "__version__",
]
