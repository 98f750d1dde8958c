"""Inference rules of Resize and Upsample (the kernels of
``onemodel/evaluate/kernels/resize.py``, same keys and versions).

Shapes (ONNX Part 1, operator definitions of Clause 14.3): the output has X's rank. Resize 11+
gives axis ``i`` the extent ``floor(x_i * scales_i)`` (the product taken in float32, as the
kernel does) or ``sizes_i`` (exactly one of the two inputs given, an empty tensor counting as
absent); from opset 18 ``axes`` names the axes they address (the others keep their extents) and
``keep_aspect_ratio_policy`` not_larger / not_smaller scales every addressed axis by the least /
greatest ``sizes_i / x_i``, the extent ``floor(scale * x_i + 0.5)``. Resize 10 and Upsample
(``scales`` an attribute at opset 7, an input at 9) give ``floor(x_i * scales_i)`` in float64.

Symbolic extents (Clause 9.3): a scale that is an integer ``k`` makes ``k * x`` (1 keeps ``x``;
exact for extents below 2**24 / k, where float32 holds ``x * k``); any other scale of a
symbolic extent, or scales/sizes whose elements are not known, give an unknown extent. Sizes
known as extents (data inference of ``Concat(Shape(x)[:2], [64, 64])``) are taken as they are.

Contradictions (Clause 9.4): scales or sizes with another number of elements than the axes they
address, a scale that is not positive, an axis out of range or repeated.
"""

from __future__ import annotations

import math

from ...operators import axes as axes_
from ...operators import rule
from .. import dims as D
from ._util import count


def _given(ctx, v) -> bool | None:
    """Whether optional input ``v`` is given with elements: True, False (absent or empty),
    None (its element count is not known)."""
    if v is None:
        return False
    if v.shape is None:
        return None
    n = count(v.shape)
    if n is None:
        return None
    return n > 0


def _scaled(x, s: float, f32: bool):
    """``floor(x * s)`` for extent ``x`` and scale ``s`` (module doc)."""
    if x is None:
        return None
    if type(x) is int:
        if f32:
            import numpy as np

            return int(math.floor(float(np.float32(x) * np.float32(s))))
        return int(math.floor(x * s))
    if f32:
        import numpy as np

        s = float(np.float32(s))
    if s == int(s):
        return D.mul(x, int(s))
    return None


def _unknown_at(shape, axes) -> list:
    """``shape`` with the extents of ``axes`` unknown."""
    return [None if k in axes else d for k, d in enumerate(shape)]


def _by_scales(ctx, shape, scales, axes, f32: bool) -> list:
    if scales is None:
        return _unknown_at(shape, axes)
    out = list(shape)
    if len(scales) != len(axes):
        ctx.contradiction(f"scales has {len(scales)} values for {len(axes)} axes")
        return [None] * len(shape)
    for s, a in zip(scales, axes):
        if not s > 0:
            ctx.contradiction(f"scale {s} is not positive")
            out[a] = None
        else:
            out[a] = _scaled(shape[a], s, f32)
    return out


def _floats(ctx, i: int):
    c = ctx.const(i)
    return None if c is None else [float(v) for v in c.reshape(-1)]


def _legacy(ctx, x, scales):
    if x.shape is None:
        return None
    return _by_scales(ctx, x.shape, scales, range(len(x.shape)), False)


@rule("Resize", since=11)
def resize(ctx, x, roi=None, scales=None, sizes=None):
    """Resize 11+: the extents by scales or sizes (module doc)."""
    axes = ctx.attr("axes", None) if ctx.opset >= 18 else None
    use_sizes = _given(ctx, sizes)
    use_scales = _given(ctx, scales)
    if use_sizes and use_scales:
        ctx.contradiction("both scales and sizes are given")
        return None
    shape = x.shape
    if shape is None:
        given = sizes if use_sizes else scales if use_scales else None
        if axes is None and given is not None and len(given.shape) == 1:
            shape = [None] * given.shape[0]   # one value per axis of X
        else:
            return None
    r = len(shape)
    if axes is None:
        axes = list(range(r))
    try:
        norm = axes_.distinct_axes([int(a) for a in axes], r)
    except axes_.AxisError as e:
        ctx.contradiction(str(e))
        return None
    if use_scales:
        return _by_scales(ctx, shape, _floats(ctx, 2), norm, True)
    if not use_sizes:
        if use_sizes is False and use_scales is False:
            ctx.contradiction("neither scales nor sizes is given")
        return _unknown_at(shape, norm)
    got = ctx.ints(3)
    if got is None:
        return _unknown_at(shape, norm)
    out = list(shape)
    if len(got) != len(norm):
        ctx.contradiction(f"sizes has {len(got)} values for {len(norm)} axes")
        return [None] * r
    policy = ctx.attr("keep_aspect_ratio_policy") if ctx.opset >= 18 else "stretch"
    if policy == "stretch":
        for z, a in zip(got, norm):
            out[a] = z
        return out
    if policy not in ("not_larger", "not_smaller") or not all(
            type(z) is int for z in got) or not all(type(shape[a]) is int for a in norm):
        return _unknown_at(shape, norm)
    ratios = [z / shape[a] if shape[a] else 1.0 for z, a in zip(got, norm)]
    common = min(ratios) if policy == "not_larger" else max(ratios)
    for a in norm:
        out[a] = int(math.floor(common * shape[a] + 0.5))
    return out


@rule("Resize")
def resize10(ctx, x, scales):
    """Resize 10: ``floor(x_i * scales_i)`` (module doc)."""
    return _legacy(ctx, x, _floats(ctx, 1))


@rule("Upsample", since=7)
def upsample(ctx, x, scales=None):
    """Upsample: ``floor(x_i * scales_i)``, scales an attribute at opset 7, an input at 9."""
    if ctx.opset < 9:
        s = ctx.attr("scales", None)
        return _legacy(ctx, x, None if s is None else [float(v) for v in s])
    return _legacy(ctx, x, _floats(ctx, 1))
