"""Opset conversion: a model rewritten from the operator set versions it imports to others, up or
down (issue 26), node by node through the version adapters of the operator table
(:func:`onemodel.operators.adapter`).

    >>> import onemodel
    >>> m13 = onemodel.convert_opset(onemodel.load("model.onnx"), {"": 13})

Modules: :mod:`.engine` (:func:`convert_opset`, the walk over every graph and function),
:mod:`.changes` (what changed between adjacent definitions: the classification the engine and
the coverage table docs/opset-conversion.md share), :mod:`.context` (what an adapter is given),
:mod:`.generic` (kinds of change many operators share), :mod:`.ir_versions` (the IR version an
operator set requires), :mod:`.verify_run` (:func:`verify_conversion`: the original and the
converted model run and compared, ``convert --verify-run``), ``adapters/<family>.py`` (the
adapters).
"""

from .engine import (
    Conversion,
    ConversionRefused,
    convert,
    convert_checked,
    convert_opset,
    targets_of,
)
from .verify_run import RunVerification, verify_conversion

__all__ = ["convert_opset", "convert", "convert_checked", "Conversion", "ConversionRefused",
           "targets_of", "verify_conversion", "RunVerification"]
