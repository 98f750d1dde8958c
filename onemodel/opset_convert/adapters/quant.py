"""Version adapters of the quant family (:mod:`onemodel.operators.families`)."""

from __future__ import annotations

from ...operators import adapter
from ..generic import AttributeAdded

#: the float8 element types (Table 5 codes) ``saturate`` applies to
FLOAT8 = frozenset((17, 18, 19, 20))


def _count(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


class PerAxis13:
    """QuantizeLinear, DequantizeLinear at 13: ``axis`` (default 1) added for a scale of one
    element per channel; before, the scale was one value. Down: refused unless the scale is
    known to hold one element (then ``axis`` means nothing and is removed)."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        scale = step.dims(step.input(1))
        if scale is None or any(d != 1 for d in scale):
            n = None if scale is None or not all(type(d) is int for d in scale) else \
                _count(scale)
            what = "is not known to be one value" if n is None else f"holds {n} values"
            step.refuse(f"the scale {step.input(1)!r} {what} (per-axis quantization has no "
                        f"equivalent before opset {step.source})")
        step.remove_attr("axis")
        return None


class Saturate19:
    """QuantizeLinear at 19: ``saturate`` (float8 outputs only) added: removed going down
    when the output type (the zero point's, else uint8) is not a float8 type."""

    @staticmethod
    def up(step, node):
        return None

    @staticmethod
    def down(step, node):
        if step.has_attr("saturate"):
            zp = step.input(2)
            code = step.elem(zp) if zp is not None else 2
            if code is None or code in FLOAT8:
                step.refuse("saturate applies to a float8 output, which does not exist "
                            f"before opset {step.source}")
            step.remove_attr("saturate")
        return None


class Blocked21(AttributeAdded):
    """QuantizeLinear, DequantizeLinear at 21: ``block_size`` (default 0: no blocks) and, for
    QuantizeLinear, ``output_dtype`` (default 0: the zero point's type) added."""

    added = ("block_size", "output_dtype")


class Precision23(AttributeAdded):
    """QuantizeLinear at 23: ``precision`` (default 0: the input's), DequantizeLinear at 23:
    ``output_dtype`` (default 0: the scale's type) added."""

    added = ("precision", "output_dtype")


for _op in ("QuantizeLinear", "DequantizeLinear"):
    adapter(_op, since=13)(PerAxis13)
    adapter(_op, since=21)(Blocked21)
    adapter(_op, since=23)(Precision23)
adapter("QuantizeLinear", since=19)(Saturate19)

