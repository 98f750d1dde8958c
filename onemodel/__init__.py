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

import sys as _sys
from types import ModuleType as _ModuleType

__version__ = "0.1.0"

#: Where each public name is defined: imported on its first use (PEP 562), so that
#: ``import onemodel`` imports nothing. The command line's entry point (:mod:`onemodel.entry`)
#: relies on it: it runs before anything slow is imported, to handle a Ctrl-C from the first
#: moment; and a command imports only the parts it uses.
_LAZY = {name: module for module, names in (
    ("onemodel.errors", ("AdviceError", "EvaluationError", "InputError", "InternalError",
                         "InvalidModelError", "IoError", "MalformedError", "NoDataDirectoryError",
                         "OneModelError", "OneModelWarning", "OptionError", "UnsupportedError",
                         "UsageError", "WeightsFileError")),
    ("onemodel.api", ("ConvertResult", "convert", "load", "save", "to_bytes")),
    ("onemodel.ir", ("Attribute", "DataType", "Function", "Graph", "Model", "Node",
                     "SparseTensor", "Tensor", "Type", "ValueInfo")),
    ("onemodel.verify", ("Difference", "VerifyReport", "compare_models", "verify")),
    ("onemodel.validation", ("check", "Finding", "Report")),
    ("onemodel.inference", ("infer",)),
    ("onemodel.opset_convert", ("convert_opset", "ConversionRefused", "verify_conversion")),
    ("onemodel.content_digest", ("digest", "ModelDigest")),
    ("onemodel.signing", ("sign", "verify_signature", "SignatureResult")),
    ("onemodel.scan", ("scan", "ScanResult")),
) for name in names}


def __getattr__(name: str):
    import importlib

    if name == "engines":  # the engine registry (onemodel.engines.register, get, names)
        return importlib.import_module("onemodel.engines")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("__"):  # a submodule not imported yet (onemodel.storage ...)
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'onemodel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(_ModuleType):
    """The package's module type: importing a submodule named like a public name
    (``onemodel.verify``) leaves the public name (the function) bound, as the eager imports
    did."""

    def __setattr__(self, name: str, value) -> None:
        if name in _LAZY and isinstance(value, _ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package

__all__ = [
    "load", "save", "to_bytes", "convert", "convert_opset", "ConversionRefused",
    "verify_conversion", "verify",
    "check", "Finding",
    "Report", "infer",
    "digest", "ModelDigest", "scan", "ScanResult",
    "compare_models", "ConvertResult", "VerifyReport", "Difference", "OneModelError",
    "MalformedError", "InvalidModelError", "UnsupportedError", "OptionError", "IoError",
    "AdviceError", "NoDataDirectoryError", "UsageError", "InputError", "EvaluationError",
    "InternalError", "WeightsFileError",
    "OneModelWarning",
    "Model", "Graph", "Node", "Attribute",
    "Tensor", "SparseTensor", "Type", "ValueInfo", "Function", "DataType", "__version__",
]
