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
from ...operators import kernel
from ._util import axis_index
from .quant import _int_matmul, dynamic_quantize_linear

MS = "com.microsoft"


def _int_attr(ctx, name: str, default=None) -> int:
    """An int attribute; InvalidModelError when a required one (``default`` None) is missing."""
    value = ctx.attr(name, default)
    if value is None:
        raise InvalidModelError(f"{ctx.node.op_type} needs the attribute {name}")
    return int(value)


def unpack_bits(packed: np.ndarray, bits: int, dtype=np.int32) -> np.ndarray:
    """The unsigned ``bits``-bit codes packed low-first in the uint8 array ``packed``: along
    the last axis, byte ``j`` holds codes ``j * 8 / bits`` to ``(j + 1) * 8 / bits - 1``, the
    first one in the lowest bits. Shape ``packed.shape[:-1] + (packed.shape[-1] * 8 / bits,)``,
    in ``dtype`` (int32 by default). ``bits`` is 2, 4 or 8."""
    packed = np.asarray(packed, dtype=np.uint8)
    if bits == 8:
        return packed.astype(dtype)
    per = 8 // bits
    shifts = np.arange(per, dtype=np.uint8) * bits
    # one table row per byte value: its codes, already in dtype (a gather, not per-code math)
    table = ((np.arange(256, dtype=np.uint8)[:, None] >> shifts)
             & np.uint8((1 << bits) - 1)).astype(dtype)
    return table[packed].reshape(packed.shape[:-1] + (packed.shape[-1] * per,))


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
    codes = unpack_bits(b.reshape(n, k_blocks, blob), bits, np.float32)  # [N, k_blocks, B]
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
    if g_idx is None:   # blocks in order: broadcast one scale over each block
        codes -= zp[:, :, None]       # in place: codes is a new array
        codes *= scale[:, :, None]
        return codes.reshape(n, k_blocks * block_size)[:, :k]
    group = np.asarray(g_idx).astype(np.int64).reshape(-1)
    if group.size != k or (k and (group.min() < 0 or group.max() >= k_blocks)):
        raise EvaluationError(f"MatMulNBits g_idx must hold {k} block numbers in "
                              f"[0, {k_blocks})")
    codes = codes.reshape(n, k_blocks * block_size)[:, :k]
    return (codes - zp[:, group]) * scale[:, group]


@kernel("MatMulNBits", domain=MS)
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
    if a is None or b is None or scales is None:
        raise InvalidModelError("MatMulNBits needs A, B and scales")
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


# -- GatherBlockQuantized --------------------------------------------------------------------

def _blocks_along(param: np.ndarray, axis: int, block: int, length: int) -> np.ndarray:
    """A blocked parameter repeated ``block`` times along ``axis`` and cut to ``length``."""
    return np.repeat(param, block, axis=axis).take(np.arange(length), axis=axis)


@kernel("GatherBlockQuantized", domain=MS)
def gather_block_quantized(ctx, data, indices, scales, zero_points=None):
    """GatherBlockQuantized: Gather of a block-quantized tensor, dequantized.

    data: int4 / uint4 (one code per element), uint8 (``8 / bits`` codes per byte packed
    low-first along the last axis, bits 2, 4 or 8), or float8 / float4e2m1 (no zero point).
    indices: int32 / int64 of any shape, into ``data``'s ``gather_axis`` (default 0); negative
    ones count from the end and one out of ``[-s, s)`` gives zeros (onnxruntime's definition,
    unlike ONNX Gather). scales: data's rank, ``ceil(extent / block_size)`` on
    ``quantize_axis`` (default 1; ``block_size`` default 128, a power of two >= 16, or 0 for
    float data: one block over the axis), data's extents elsewhere (float data: 1 broadcasts).
    zero_points: scales' shape in data's type (uint8: packed along the last axis), default 0
    for int4 / uint4 and ``2 ** (bits - 1)`` for uint8.
    Output: ``data.shape[:g] + indices.shape + data.shape[g+1:]`` (the last extent unpacked),
    ``(code - zero_point) * scale`` computed in float32, in the scales' type. For uint8 data,
    gather_axis must be 0 and quantize_axis the last axis (as onnxruntime requires).
    Raises InvalidModelError for a bad block_size or bits, EvaluationError for shapes that do
    not fit, UnsupportedError for another data type.
    """
    if data is None or indices is None or scales is None:
        raise InvalidModelError("GatherBlockQuantized needs data, indices and scales")
    data = np.asarray(data)
    idx = np.asarray(indices)
    scale = np.asarray(scales)
    rank = data.ndim
    if rank < 1:
        raise EvaluationError("GatherBlockQuantized data must have rank >= 1")
    if idx.dtype not in (np.int32, np.int64):
        raise UnsupportedError(f"GatherBlockQuantized indices of type {idx.dtype}")
    g = axis_index(int(ctx.attr("gather_axis", 0)), rank, "gather_axis")
    q = axis_index(int(ctx.attr("quantize_axis", 1)), rank, "quantize_axis")
    block = int(ctx.attr("block_size", 128))
    bits = int(ctx.attr("bits", 4))
    kind = data.dtype.name
    is_float = kind.startswith("float8") or kind.startswith("float4")
    if not is_float and kind not in ("int4", "uint4", "uint8"):
        raise UnsupportedError(f"GatherBlockQuantized data of type {kind}")
    if not (block == 0 and is_float) and (block < 16 or block & (block - 1)):
        raise InvalidModelError(f"GatherBlockQuantized block_size {block} must be a power of "
                                "2, >= 16" + (" (or 0)" if is_float else ""))
    if block == 0:
        block = max(data.shape[q], 1)
    codes = data
    if kind == "uint8":
        if bits not in (2, 4, 8):
            raise InvalidModelError(f"GatherBlockQuantized bits={bits} for uint8 data "
                                    "(2, 4 or 8)")
        if g != 0 or q != rank - 1:
            raise EvaluationError("GatherBlockQuantized with uint8 data needs gather_axis 0 "
                                  "and quantize_axis the last axis")
        codes = unpack_bits(data, bits)
    elif not is_float and bits != 4:
        raise InvalidModelError(f"GatherBlockQuantized bits={bits} for {kind} data (4)")
    shape = codes.shape
    if scale.ndim != rank:
        raise EvaluationError(f"GatherBlockQuantized scales of rank {scale.ndim}, data of "
                              f"rank {rank}")
    for i in range(rank):
        want = -(-shape[i] // block) if i == q else shape[i]
        if scale.shape[i] != want and not (is_float and i != q and scale.shape[i] == 1):
            raise EvaluationError(f"GatherBlockQuantized scales of shape {list(scale.shape)} "
                                  f"do not fit data of shape {list(shape)} (block_size "
                                  f"{block}, quantize_axis {q})")
    zp = None
    if zero_points is not None:
        if is_float:
            raise EvaluationError("GatherBlockQuantized takes no zero points for float data")
        zpa = np.asarray(zero_points)
        if zpa.dtype != data.dtype:
            raise EvaluationError(f"GatherBlockQuantized zero points of type {zpa.dtype}, "
                                  f"data of type {data.dtype}")
        if kind == "uint8":
            per = 8 // bits
            want = scale.shape[:-1] + (-(-scale.shape[-1] // per),)
            if zpa.shape != want:
                raise EvaluationError(f"GatherBlockQuantized zero points of shape "
                                      f"{list(zpa.shape)}, expected {list(want)}")
            zp = unpack_bits(zpa, bits)[..., :scale.shape[-1]]
        elif zpa.shape != scale.shape:
            raise EvaluationError(f"GatherBlockQuantized zero points of shape "
                                  f"{list(zpa.shape)}, scales of shape {list(scale.shape)}")
        else:
            zp = zpa.astype(np.int32)
    elif kind == "uint8":
        zp = np.array(1 << (bits - 1), np.int32)
    s = shape[g]
    flat = idx.astype(np.int64).reshape(-1)
    valid = (flat >= -s) & (flat < s)
    pick = np.where(valid, np.where(flat < 0, flat + s, flat), 0)
    sel = np.take(codes, pick, axis=g).astype(np.float32)

    def along(param: np.ndarray) -> np.ndarray:
        """A per-block parameter for the gathered elements (data's rank, 1-D indices)."""
        if param.ndim == 0:
            return param
        if g == q:
            return np.take(param, pick // block, axis=g)
        if param.shape[g] != 1:
            param = np.take(param, pick, axis=g)
        return _blocks_along(param, q, block, shape[q])

    y = sel if zp is None else sel - along(zp).astype(np.float32)
    y = y * along(scale.astype(np.float32))
    if not valid.all():
        mask = valid.reshape((1,) * g + (-1,) + (1,) * (rank - g - 1))
        y = np.where(mask, y, np.float32(0))
    out_shape = shape[:g] + idx.shape + shape[g + 1:]
    return y.reshape(out_shape).astype(scale.dtype)


# -- DynamicQuantizeMatMul, MatMulIntegerToFloat -----------------------------------------------

def _scalar(value, what: str) -> np.ndarray:
    """A scalar (or one-element) quantization parameter as a 0-d array; UnsupportedError for
    a per-axis one (onnxruntime supports none for these operands either); InvalidModelError
    for a required one the node does not give (None)."""
    if value is None:
        raise InvalidModelError(f"{what} is missing")
    value = np.asarray(value)
    if value.size != 1:
        raise UnsupportedError(f"{what} of shape {list(value.shape)}: only a per-tensor "
                               "(scalar) value is supported")
    return value.reshape(())


def _per_column(value, n: int, what: str) -> np.ndarray:
    """A scalar or a 1-D per-column (length N) parameter of B, broadcastable to [..., N]
    (InvalidModelError when missing)."""
    if value is None:
        raise InvalidModelError(f"{what} is missing")
    value = np.asarray(value)
    if value.size == 1:
        return value.reshape(())
    if value.ndim != 1 or value.shape[0] != n:
        raise EvaluationError(f"{what} of shape {list(value.shape)} is neither a scalar nor "
                              f"one per column of B ({n})")
    return value


def integer_matmul_to_float(a_q: np.ndarray, a_zp, b: np.ndarray, b_zp, multiplier,
                            bias) -> np.ndarray:
    """``float32(acc) * multiplier + bias`` with ``acc = (A - a_zp) @ (B - b_zp)`` exact in
    integers (numpy matmul broadcasting); ``multiplier`` and ``b_zp`` scalars or per column."""
    if a_q is None or b is None:
        raise InvalidModelError("the matrix product needs A and B")
    b = np.asarray(b)
    if b.ndim < 2:
        raise EvaluationError(f"B of shape {list(b.shape)} needs rank >= 2")
    n = b.shape[-1]
    a64 = np.asarray(a_q).astype(np.int64)
    if a_zp is not None:
        a64 = a64 - np.asarray(a_zp).astype(np.int64)
    b64 = b.astype(np.int64)
    if b_zp is not None:
        b64 = b64 - _per_column(b_zp, n, "b_zero_point").astype(np.int64)
    if a64.ndim < 1 or a64.shape[-1] != b.shape[-2]:
        raise EvaluationError(f"A of shape {list(a64.shape)} and B of shape {list(b.shape)} "
                              "do not multiply")
    acc = _int_matmul(a64, b64)
    y = acc.astype(np.float32) * np.asarray(multiplier, np.float32)
    if bias is not None:
        y = y + _per_column(bias, n, "bias").astype(np.float32)
    return y


@kernel("DynamicQuantizeMatMul", domain=MS)
def dynamic_quantize_matmul(ctx, a, b, b_scale, b_zero_point=None, bias=None):
    """DynamicQuantizeMatMul: A (float32) quantized to uint8 as DynamicQuantizeLinear does
    (``scale = (max(0, max A) - min(0, min A)) / 255``, 1 when that is 0; ``zero_point =
    round(clip(-min / scale, 0, 255))``; ``a_q = saturate(round(A / scale) + zero_point)``,
    rounding half to even), then ``Y = float32((a_q - a_zp) @ (B - b_zero_point)) *
    (a_scale * b_scale) + bias``.

    B: int8 / uint8 [..., K, N] (numpy matmul broadcasting with A); b_scale (float32) and
    b_zero_point (B's type) scalars or one per column of B; bias [N] float32. Y: float32.
    The integer product is exact; the scaling is one float32 multiply and add per element.
    """
    if a is None or b is None:
        raise InvalidModelError("DynamicQuantizeMatMul needs A and B")
    x = np.asarray(a)
    if x.dtype != np.float32:
        raise UnsupportedError(f"DynamicQuantizeMatMul A of type {x.dtype} (float32 only)")
    n = np.asarray(b).shape[-1] if np.asarray(b).ndim else 0
    a_q, a_scale, a_zp = dynamic_quantize_linear(ctx, x)
    mult = np.float32(a_scale) * _per_column(b_scale, n, "b_scale").astype(np.float32)
    return integer_matmul_to_float(a_q, a_zp, b, b_zero_point, mult, bias)


def _one_element(v: np.ndarray) -> bool:
    """A scalar or a 1-D tensor of one element (onnxruntime's per-tensor parameter)."""
    return v.ndim == 0 or (v.ndim == 1 and v.size == 1)


def _fits_b(shape: tuple, b_shape: tuple) -> bool:
    """Whether a scale of ``shape`` is one onnxruntime's GEMM applies itself to B [..., K, N]:
    per tensor, [N] for a 2-D B, or B's shape with K replaced by 1 ([..., 1, N])."""
    if len(shape) == 0 or (len(shape) == 1 and shape[0] == 1):
        return True
    if len(shape) == 1:
        return len(b_shape) == 2 and shape[0] == b_shape[1]
    return len(shape) == len(b_shape) and shape[-2] == 1 and \
        all(d == e for i, (d, e) in enumerate(zip(shape, b_shape)) if i != len(shape) - 2)


@kernel("MatMulIntegerToFloat", domain=MS)
def matmul_integer_to_float(ctx, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None,
                            bias=None):
    """MatMulIntegerToFloat: ``Y = float((A - a_zero_point) @ (B - b_zero_point)) * (a_scale *
    b_scale) + bias``, with onnxruntime's CPU kernel's handling of scales that are not per
    tensor.

    A, B: int8 / uint8 (numpy matmul broadcasting); a_zero_point per tensor (a per-row one:
    UnsupportedError, onnxruntime's CPU kernel refuses it too); b_zero_point a scalar or one per
    column of B; a_scale, b_scale and bias (optional, [N]) float32 or float16, the output type.

    Scales of other shapes are taken as onnxruntime takes them: an a_scale that is not per
    tensor and whose last dim is not 1 ([N], [1, N]: per column) is exchanged with b_scale, and
    a b_scale whose second last dim is not 1 ([M, 1]: per row) with a_scale. A b_scale of
    the forms the GEMM applies (per tensor, [N] with a 2-D B, B's shape with K replaced by 1)
    multiplies the integer product before the bias is added; an a_scale that is not per tensor
    (e.g. per row [M, 1]) and any other b_scale multiply Y after it, so they scale the bias
    too; such a scale must broadcast to Y's shape (else EvaluationError). Computed in float32
    (the integer product exactly): ``a_scale * b_scale``, the product and bias, then the later
    scales, each rounded once; cast to the output type.
    """
    if a is None or b is None or a_scale is None or b_scale is None:
        raise InvalidModelError("MatMulIntegerToFloat needs A, B, a_scale and b_scale")
    out_dtype = np.asarray(a_scale).dtype
    if out_dtype.kind != "f":
        raise UnsupportedError(f"MatMulIntegerToFloat a_scale of type {out_dtype}")
    b = np.asarray(b)
    a_s = np.asarray(a_scale).astype(np.float32)
    b_s = np.asarray(b_scale).astype(np.float32)
    if not _one_element(a_s):
        if a_s.ndim == 1 or a_s.shape[-1] != 1:
            a_s, b_s = b_s, a_s
    elif not _one_element(b_s) and b_s.ndim > 1 and b_s.shape[-2] != 1:
        a_s, b_s = b_s, a_s
    a_zp = None
    if a_zero_point is not None:
        a_zp = np.asarray(a_zero_point)
        if not _one_element(a_zp):
            raise UnsupportedError(f"MatMulIntegerToFloat a_zero_point of shape "
                                   f"{list(a_zp.shape)}: only a per-tensor (scalar) value is "
                                   "implemented (onnxruntime's CPU kernel refuses a per-row "
                                   "one too)")
        a_zp = a_zp.reshape(())
    mult = a_s.reshape(()) if _one_element(a_s) else np.float32(1)
    later = [] if _one_element(a_s) else [a_s]
    if _fits_b(b_s.shape, b.shape):
        mult = mult * (b_s.reshape(()) if _one_element(b_s) else b_s)
    else:
        later.append(b_s)
    y = integer_matmul_to_float(a, a_zp, b, b_zero_point, mult, bias)
    for scale in later:
        try:
            fits = np.broadcast_shapes(scale.shape, y.shape) == y.shape
        except ValueError:
            fits = False
        if not fits:
            raise EvaluationError(f"MatMulIntegerToFloat scale of shape {list(scale.shape)} "
                                  f"does not broadcast to the output {list(y.shape)}")
        y = y * scale
    return y.astype(out_dtype)


# -- QLinear element-wise operators, pooling and concatenation ---------------------------------

def _qtype(x) -> np.ndarray:
    """A quantized operand: uint8 or int8 (UnsupportedError otherwise; InvalidModelError when
    missing)."""
    if x is None:
        raise InvalidModelError("a required quantized operand is missing")
    x = np.asarray(x)
    if x.dtype not in (np.uint8, np.int8):
        raise UnsupportedError(f"a quantized operand of type {x.dtype} (uint8 or int8)")
    return x


def _deq(x: np.ndarray, scale, zero_point, what: str) -> np.ndarray:
    """``(x - zero_point) * scale`` in float32, per tensor (a zero point of None is 0)."""
    s = _scalar(scale, f"{what} scale").astype(np.float32)
    v = x.astype(np.float32)
    if zero_point is not None:
        zp = _scalar(zero_point, f"{what} zero point")
        if zp.dtype != x.dtype:
            raise EvaluationError(f"{what} zero point of type {zp.dtype}, operand {x.dtype}")
        v = v - zp.astype(np.float32)
    return v * s


def _quant(v: np.ndarray, scale, zero_point, dtype, what: str) -> np.ndarray:
    """``saturate(round_half_even(v / scale) + zero_point)`` into uint8 / int8 ``dtype``,
    dividing in float32 (per tensor; a zero point of None is 0)."""
    s = _scalar(scale, f"{what} scale").astype(np.float32)
    q = np.rint(np.asarray(v, np.float32) / s).astype(np.float64)
    if zero_point is not None:
        zp = _scalar(zero_point, f"{what} zero point")
        if zp.dtype != np.dtype(dtype):
            raise EvaluationError(f"{what} zero point of type {zp.dtype}, output {dtype}")
        q = q + float(zp)
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


@kernel("QLinearAdd", domain=MS)
def qlinear_add(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale,
                c_zero_point=None):
    """QLinearAdd: ``C = quantize(dequantize(A) + dequantize(B))`` with numpy broadcasting.

    A, B, C: uint8 or int8 (one type); scales float32 and zero points (optional, default 0) per
    tensor. Dequantization, sum and the division by C_scale are float32 operations, rounded
    half to even and saturated.
    """
    a, b = _qtype(a), _qtype(b)
    if a.dtype != b.dtype:
        raise EvaluationError(f"QLinearAdd operands of types {a.dtype} and {b.dtype}")
    v = _deq(a, a_scale, a_zero_point, "A") + _deq(b, b_scale, b_zero_point, "B")
    return _quant(v, c_scale, c_zero_point, a.dtype, "C")


@kernel("QLinearMul", domain=MS)
def qlinear_mul(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale,
                c_zero_point=None):
    """QLinearMul: ``C = quantize(dequantize(A) * dequantize(B))`` with numpy broadcasting;
    types and precision as :func:`qlinear_add`."""
    a, b = _qtype(a), _qtype(b)
    if a.dtype != b.dtype:
        raise EvaluationError(f"QLinearMul operands of types {a.dtype} and {b.dtype}")
    v = _deq(a, a_scale, a_zero_point, "A") * _deq(b, b_scale, b_zero_point, "B")
    return _quant(v, c_scale, c_zero_point, a.dtype, "C")


@kernel("QLinearSigmoid", domain=MS)
def qlinear_sigmoid(ctx, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None):
    """QLinearSigmoid: ``Y = quantize(sigmoid(dequantize(X)))``, uint8 or int8, scales and
    zero points (default 0) per tensor; the sigmoid ``1 / (1 + exp(-x))`` in float32."""
    x = _qtype(x)
    if y_scale is None:
        raise InvalidModelError("QLinearSigmoid needs Y_scale")
    v = _deq(x, x_scale, x_zero_point, "X")
    with np.errstate(over="ignore"):
        s = np.float32(1) / (np.float32(1) + np.exp(-v))
    return _quant(s, y_scale, y_zero_point, x.dtype, "Y")


@kernel("QLinearGlobalAveragePool", domain=MS)
def qlinear_global_average_pool(ctx, x, x_scale, x_zero_point, y_scale, y_zero_point):
    """QLinearGlobalAveragePool: the mean over the spatial axes, requantized.

    X: uint8 / int8 ``[N, C, D1...]`` (``[N, D1..., C]`` with ``channels_last`` 1), rank >= 3;
    Y: the same rank with every spatial extent 1. ``Y = saturate(round((sum(X) - count *
    x_zp) * x_scale / count / y_scale) + y_zp)``: the integer sum is exact and the rest is
    computed in float64 (a float32 engine may differ by one step on a near-tie).
    """
    x = _qtype(x)
    if x.ndim < 3:
        raise EvaluationError(f"QLinearGlobalAveragePool X of rank {x.ndim}; 3 or more needed")
    last = bool(ctx.attr("channels_last", 0))
    axes = tuple(range(1, x.ndim - 1)) if last else tuple(range(2, x.ndim))
    count = int(np.prod([x.shape[i] for i in axes]))
    if count == 0:
        raise EvaluationError("QLinearGlobalAveragePool over an empty spatial extent")
    total = x.astype(np.int64).sum(axis=axes, keepdims=True).astype(np.float64)
    zp = _scalar(x_zero_point, "x zero point") if x_zero_point is not None else None
    if zp is not None:
        total = total - count * float(zp)
    xs = float(_scalar(x_scale, "x scale").astype(np.float32))
    ys = float(_scalar(y_scale, "y scale").astype(np.float32))
    q = np.rint(total * xs / count / ys)
    if y_zero_point is not None:
        yzp = _scalar(y_zero_point, "y zero point")
        if yzp.dtype != x.dtype:
            raise EvaluationError(f"y zero point of type {yzp.dtype}, X of type {x.dtype}")
        q = q + float(yzp)
    info = np.iinfo(x.dtype)
    return np.clip(q, info.min, info.max).astype(x.dtype)


@kernel("QLinearConcat", domain=MS)
def qlinear_concat(ctx, y_scale=None, y_zero_point=None, *inputs):
    """QLinearConcat: Concat of quantized tensors, each requantized to Y's parameters.

    Inputs: Y_scale (float32 scalar), Y_zero_point (uint8 / int8 scalar, Y's type), then one
    triple (tensor, scale, zero point) per operand, each uint8 / int8 of Y's type. An operand
    whose scale and zero point equal Y's is copied; another is ``quantize(dequantize(x))``
    (float32 dequantization and division, rounded half to even, saturated). ``axis``
    (required) as Concat's. Raises InvalidModelError for inputs that are not triples.
    """
    if y_scale is None or y_zero_point is None:
        raise InvalidModelError("QLinearConcat needs Y_scale and Y_zero_point")
    yzp = _scalar(y_zero_point, "Y zero point")
    dtype = _qtype(yzp).dtype
    ys = _scalar(y_scale, "Y scale").astype(np.float32)
    if not inputs or len(inputs) % 3:
        raise InvalidModelError(f"QLinearConcat takes (tensor, scale, zero point) triples "
                                f"after Y's parameters, not {len(inputs)} inputs")
    axis = ctx.attr("axis", None)
    if axis is None:
        raise InvalidModelError("QLinearConcat needs the axis attribute")
    parts = []
    for i in range(0, len(inputs), 3):
        x, s, z = inputs[i:i + 3]
        if x is None or s is None or z is None:
            raise InvalidModelError(f"QLinearConcat operand {i // 3} lacks its tensor, scale "
                                    "or zero point")
        x = _qtype(x)
        if x.dtype != dtype:
            raise EvaluationError(f"QLinearConcat operand {i // 3} of type {x.dtype}, Y of "
                                  f"type {dtype}")
        s32 = _scalar(s, "scale").astype(np.float32)
        zs = _scalar(z, "zero point")
        if s32 == ys and int(zs) == int(yzp):
            parts.append(x)
        else:
            parts.append(_quant(_deq(x, s32, zs, f"operand {i // 3}"), ys, yzp, dtype, "Y"))
    rank = parts[0].ndim
    if any(p.ndim != rank for p in parts):
        raise EvaluationError(f"QLinearConcat operands of ranks {[p.ndim for p in parts]}")
    a = axis_index(int(axis), rank)
    try:
        return np.concatenate(parts, axis=a)
    except ValueError as exc:
        raise EvaluationError(f"QLinearConcat operands do not fit: "
                              f"{[list(p.shape) for p in parts]} on axis {a}") from exc
