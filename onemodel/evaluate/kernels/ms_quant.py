"""Kernels of the quantized matrix products and QLinear operators of onnxruntime's
com.microsoft domain (com.microsoft, opset 1).

These operators are not in ONNX Part 2; their definitions are onnxruntime's contrib operator
schemas (``docs/ContribOperators.md`` of microsoft/onnxruntime) and, where the schema leaves a
detail open, what its CPU kernels compute. A model imports them through the ``com.microsoft``
operator set (Part 1, Clause 4.4: an operator is identified by domain, name and version).

Precision: the float outputs are computed in float32 (float16 / bfloat16 inputs are widened to
float32 and the result is cast back), the type onnxruntime's CPU kernels compute in; integer
parts (unpacking, zero-point subtraction, integer matrix products) are exact.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ..registry import op

MS = "com.microsoft"


def _int_attr(ctx, name: str, default=None) -> int:
    """An int attribute; InvalidModelError when a required one (``default`` None) is missing."""
    value = ctx.attr(name, default)
    if value is None:
        raise InvalidModelError(f"{ctx.node.op_type} needs the attribute {name}")
    return int(value)


def unpack_bits(packed: np.ndarray, bits: int) -> np.ndarray:
    """The unsigned ``bits``-bit codes packed low-first in the uint8 array ``packed``: along
    the last axis, byte ``j`` holds codes ``j * 8 / bits`` to ``(j + 1) * 8 / bits - 1``, the
    first one in the lowest bits. Shape ``packed.shape[:-1] + (packed.shape[-1] * 8 / bits,)``,
    int32. ``bits`` is 2, 4 or 8."""
    packed = np.asarray(packed, dtype=np.uint8)
    if bits == 8:
        return packed.astype(np.int32)
    per = 8 // bits
    shifts = np.arange(per, dtype=np.uint8) * bits
    codes = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return codes.reshape(packed.shape[:-1] + (packed.shape[-1] * per,)).astype(np.int32)


def _widen(x: np.ndarray) -> tuple[np.ndarray, np.dtype]:
    """x in float32 for the arithmetic, and the dtype to return (x's own float type)."""
    x = np.asarray(x)
    if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
        raise UnsupportedError(f"a float input was expected, not {x.dtype}")
    return x.astype(np.float32), x.dtype


# -- MatMulNBits -----------------------------------------------------------------------------

def matmul_nbits_weight(b, scales, zero_points, g_idx, *, k: int, n: int, bits: int,
                        block_size: int) -> np.ndarray:
    """The dequantized weight ``W`` [N, K] (float32) of MatMulNBits.

    ``b`` uint8 [N, k_blocks, block_size * bits / 8] holds the codes packed low-first along K
    (``k_blocks = ceil(K / block_size)``; codes past K in the last block are padding);
    ``scales`` has N * k_blocks elements (shape [N, k_blocks] or flat); ``zero_points`` is None
    (the code ``2 ** (bits - 1)``), uint8 packed like B (N * ceil(k_blocks * bits / 8) bytes),
    or a float tensor of N * k_blocks elements. ``g_idx`` (int32 [K], optional) names the block
    of each k, else ``k // block_size``. ``W[n, k] = (code - zero_point) * scale`` in float32.
    Raises EvaluationError when the shapes do not fit K, N, bits and block_size.
    """
    k_blocks = -(-k // block_size)
    blob = block_size * bits // 8
    b = np.asarray(b)
    if b.dtype != np.uint8 or b.size != n * k_blocks * blob:
        raise EvaluationError(f"MatMulNBits B {b.dtype} {list(b.shape)} does not hold "
                              f"[{n}, {k_blocks}, {blob}] uint8 (K={k}, N={n}, bits={bits}, "
                              f"block_size={block_size})")
    codes = unpack_bits(b.reshape(n, k_blocks * blob), bits)[:, :k]
    scale = np.asarray(scales)
    if scale.size != n * k_blocks:
        raise EvaluationError(f"MatMulNBits scales of shape {list(scale.shape)} do not hold "
                              f"N * k_blocks = {n * k_blocks} elements")
    scale = scale.astype(np.float32).reshape(n, k_blocks)
    if zero_points is None:
        zp = np.full((n, k_blocks), float(1 << (bits - 1)), np.float32)
    else:
        zpa = np.asarray(zero_points)
        if zpa.dtype == np.uint8:
            per_row = -(-k_blocks * bits // 8)
            if zpa.size != n * per_row:
                raise EvaluationError(f"MatMulNBits packed zero_points of shape "
                                      f"{list(zpa.shape)} do not hold N * {per_row} bytes")
            zp = unpack_bits(zpa.reshape(n, per_row), bits)[:, :k_blocks].astype(np.float32)
        else:
            if zpa.size != n * k_blocks:
                raise EvaluationError(f"MatMulNBits zero_points of shape {list(zpa.shape)} do "
                                      f"not hold N * k_blocks = {n * k_blocks} elements")
            zp = zpa.astype(np.float32).reshape(n, k_blocks)
    if g_idx is not None:
        group = np.asarray(g_idx).astype(np.int64).reshape(-1)
        if group.size != k or (k and (group.min() < 0 or group.max() >= k_blocks)):
            raise EvaluationError(f"MatMulNBits g_idx must hold {k} block numbers in "
                                  f"[0, {k_blocks})")
    else:
        group = np.arange(k) // block_size
    return (codes.astype(np.float32) - zp[:, group]) * scale[:, group]


@op("MatMulNBits", since=1, domain=MS)
def matmul_nbits(ctx, a, b, scales, zero_points=None, g_idx=None, bias=None):
    """MatMulNBits: ``Y = A @ dequant(B).T + bias`` with B block-quantized along K.

    A: float32 / float16 / bfloat16 [..., K]; B, scales, zero_points, g_idx as
    :func:`matmul_nbits_weight`; bias [N] (optional). Attributes K, N, block_size (required;
    a power of two >= 16), bits (2, 4 or 8, the widths onnxruntime supports; default 4).
    Y: [..., N] in A's type, computed in float32. ``accuracy_level`` only lets an engine compute
    with a lower-precision A (onnxruntime quantizes A to int8 at level 4); this reference
    result ignores it and always computes in float32. Raises UnsupportedError for other bit
    widths or ``weight_prepacked`` != 0, InvalidModelError for a bad block_size, EvaluationError
    for shapes that do not fit.
    """
    k = _int_attr(ctx, "K")
    n = _int_attr(ctx, "N")
    bits = _int_attr(ctx, "bits", 4)
    block = _int_attr(ctx, "block_size")
    if bits not in (2, 4, 8):
        raise UnsupportedError(f"MatMulNBits with bits={bits} (2, 4 and 8 are supported)")
    if block < 16 or block & (block - 1):
        raise InvalidModelError(f"MatMulNBits block_size {block} must be a power of 2, >= 16")
    if _int_attr(ctx, "weight_prepacked", 0):
        raise UnsupportedError("MatMulNBits with weight_prepacked (an engine's own layout)")
    x, out_dtype = _widen(a)
    if x.ndim < 1 or x.shape[-1] != k:
        raise EvaluationError(f"MatMulNBits A of shape {list(x.shape)} does not end in K={k}")
    w = matmul_nbits_weight(b, scales, zero_points, g_idx, k=k, n=n, bits=bits,
                            block_size=block)
    y = np.matmul(x, w.T)
    if bias is not None:
        bv = np.asarray(bias).astype(np.float32).reshape(-1)
        if bv.size != n:
            raise EvaluationError(f"MatMulNBits bias has {bv.size} elements, N={n}")
        y = y + bv
    return y.astype(out_dtype)
