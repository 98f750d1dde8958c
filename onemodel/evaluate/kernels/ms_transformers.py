"""Kernels of the com.microsoft operators that onnxruntime's transformer tools emit for BERT and
GPT-2 and that no other family module holds (com.microsoft, opset 1): QAttention and
QEmbedLayerNormalization (``onnxruntime.quantization.quantize_dynamic`` of a model the
transformer optimizer fused), FusedGemm (onnxruntime's own graph optimizer, Gemm followed by an
activation, e.g. BERT's pooler Gemm + Tanh).

The reference is onnxruntime's contrib operator documentation and its CPU kernels. Precision:
the integer products of QAttention are exact (computed in float64, exact for every sum of
products of 8-bit integers with fewer than 2**37 terms); everything else is computed in float32,
the precision onnxruntime computes these float32 operators in. Inputs outside what the
operators define (an embedding index out of range, a mask of another rank) raise
:class:`~onemodel.errors.EvaluationError`; attributes these kernels do not implement
(``do_rotary``, ``past_present_share_buffer``) raise :class:`~onemodel.errors.UnsupportedError`
(ONNX Part 1, Clause 4.4: no approximation in their place).
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ...operators import kernel

MS = "com.microsoft"

_F32 = np.float32


def _require(op_type: str, **inputs) -> None:
    """InvalidModelError naming the first required input the node does not supply."""
    for name, value in inputs.items():
        if value is None:
            raise InvalidModelError(f"{op_type} needs its input {name!r}")


def _scalar(x, what: str, op_type: str):
    """The single element of ``x`` (a scalar or a 1-element tensor); EvaluationError else."""
    a = np.asarray(x)
    if a.size != 1:
        raise EvaluationError(f"{op_type} {what} must be a scalar or a 1-element tensor, "
                              f"not of shape {list(a.shape)}")
    return a.reshape(())


def _integers(q: np.ndarray, zero_point) -> np.ndarray:
    """``q - zero_point`` as exact float64 integers (zero_point broadcast on the last axis)."""
    zp = 0.0 if zero_point is None else np.asarray(zero_point).astype(np.float64)
    return np.asarray(q).astype(np.float64) - zp


def attention_mask(mask_index, batch: int, seq: int, past: int, total: int, causal: bool,
                   filter_value: float) -> np.ndarray | None:
    """The additive float32 mask [B, S, T] (T = past + key length) of onnxruntime's
    Attention / QAttention ``mask_index``, or None without mask and causality.

    ``mask_index`` int32: [B] (right padding: keys at or after ``mask_index[b]`` get
    ``filter_value``), [2B] (also keys before ``mask_index[B + b]``), [B, T] or [B, S, T] (raw
    mask: 0 gets ``filter_value``, anything else 0). ``causal`` (unidirectional with S > 1):
    key ``j > past + i`` gets float32's lowest value for query ``i``. EvaluationError for other
    shapes (4-D masks, the [3B + 2] index form)."""
    if mask_index is None and not causal:
        return None
    mask = np.zeros((batch, seq, total), _F32)
    fv = _F32(filter_value)
    if mask_index is not None:
        m = np.asarray(mask_index)
        keys = np.arange(total)
        if m.ndim == 1 and m.shape[0] in (batch, 2 * batch):
            end = m[:batch].astype(np.int64)
            bad = keys[None, :] >= end[:, None]
            if m.shape[0] == 2 * batch:
                start = np.minimum(m[batch:].astype(np.int64), total)
                bad |= keys[None, :] < start[:, None]
            mask = np.where(bad[:, None, :], fv, mask)
        elif m.ndim == 2 and m.shape == (batch, total):
            mask = np.where((m > 0)[:, None, :], mask, fv)
        elif m.ndim == 3 and m.shape == (batch, seq, total):
            mask = np.where(m > 0, mask, fv)
        else:
            raise EvaluationError(f"mask_index of shape {list(m.shape)} is not one of [B], "
                                  f"[2B], [B, T], [B, S, T] (B {batch}, S {seq}, T {total})")
    if causal:
        later = np.arange(total)[None, :] > (past + np.arange(seq))[:, None]
        mask = np.where(later[None], np.finfo(_F32).min, mask)
    return mask


def _softmax32(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis in float32 (max subtracted first)."""
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _attend(qkv: np.ndarray, heads: int, mask, past, scale) -> tuple:
    """Self-attention of the projected ``qkv`` [B, S, 3H] (float32) with ``heads`` heads:
    ``softmax(scale Q K^T + mask) V`` -> ([B, S, H], present [2, B, N, P + S, H / N])."""
    b, s, h3 = qkv.shape
    h = h3 // 3
    d = h // heads

    def split(x):
        return x.reshape(b, s, heads, d).transpose(0, 2, 1, 3)

    q, k, v = split(qkv[..., :h]), split(qkv[..., h:2 * h]), split(qkv[..., 2 * h:])
    if past is not None:
        k = np.concatenate([past[0].astype(_F32), k], axis=2)
        v = np.concatenate([past[1].astype(_F32), v], axis=2)
    present = np.stack([k, v])
    p = 0 if past is None else past.shape[3]
    total = p + s
    sc = _F32(1.0 / np.sqrt(_F32(d))) if scale is None else _F32(scale)
    scores = np.matmul(q, k.transpose(0, 1, 3, 2)) * sc
    m = mask(b, s, p, total)
    if m is not None:
        scores = scores + m[:, None]
    out = np.matmul(_softmax32(scores), v)
    return out.transpose(0, 2, 1, 3).reshape(b, s, h), present


@kernel("QAttention", domain=MS)
def q_attention(ctx, x, weight, bias, input_scale, weight_scale, mask_index=None,
                input_zero_point=None, weight_zero_point=None, past=None):
    """QAttention (com.microsoft 1): self-attention whose Q/K/V projection is an 8-bit
    integer product.

    ``x`` uint8 / int8 [B, S, D] with scalar ``input_scale`` / ``input_zero_point``;
    ``weight`` uint8 / int8 [D, 3H] with ``weight_scale`` / ``weight_zero_point`` scalar or
    [3H] (per column); ``bias`` float32 [3H]. ``qkv = float32(sum (x - xz)(w - wz)) *
    (input_scale * weight_scale) + bias`` (the integer sum exact), then what com.microsoft
    Attention computes: heads ``num_heads``, ``scale`` (default 1/sqrt(H / num_heads)),
    ``mask_index`` (see :func:`attention_mask`, ``mask_filter_value`` default -10000),
    ``unidirectional``, ``past`` [2, B, N, P, H / N]. Outputs: [B, S, H] float32 and present
    [2, B, N, P + S, H / N]. InvalidModelError without ``num_heads`` or a required input;
    EvaluationError for inputs of other shapes; UnsupportedError for ``do_rotary`` or
    ``past_present_share_buffer``.
    """
    _require("QAttention", input=x, weight=weight, bias=bias, input_scale=input_scale,
             weight_scale=weight_scale)
    heads = ctx.attr("num_heads", None)
    if not heads or heads <= 0:
        raise InvalidModelError("QAttention needs a positive num_heads attribute")
    for name in ("do_rotary", "past_present_share_buffer"):
        if ctx.attr(name, 0):
            raise UnsupportedError(f"QAttention with {name}=1 is not implemented")
    x, weight, bias = np.asarray(x), np.asarray(weight), np.asarray(bias)
    if x.ndim != 3 or weight.ndim != 2 or weight.shape[0] != x.shape[2]:
        raise EvaluationError(f"QAttention input {list(x.shape)} and weight "
                              f"{list(weight.shape)} are not [B, S, D] and [D, 3H]")
    h3 = weight.shape[1]
    if h3 % 3 or (h3 // 3) % heads or bias.shape != (h3,):
        raise EvaluationError(f"QAttention weight [.., {h3}] / bias {list(bias.shape)} are not "
                              f"3H / [3H] with H a multiple of {heads} heads")
    xs = _scalar(input_scale, "input_scale", "QAttention").astype(_F32)
    xz = None if input_zero_point is None else _scalar(input_zero_point, "input_zero_point",
                                                       "QAttention")
    ws = np.asarray(weight_scale).astype(_F32).reshape(-1)
    wz = None if weight_zero_point is None else np.asarray(weight_zero_point).reshape(-1)
    for what, a in (("weight_scale", ws), ("weight_zero_point", wz)):
        if a is not None and a.size not in (1, h3):
            raise EvaluationError(f"QAttention {what} has {a.size} elements; 1 or {h3} needed")
    acc = np.matmul(_integers(x, xz), _integers(weight, wz))
    qkv = acc.astype(_F32) * (xs * ws) + bias.astype(_F32)
    if past is not None:
        past = np.asarray(past)
        hd = h3 // 3 // heads
        if past.ndim != 5 or past.shape[:3] != (2, x.shape[0], heads) or past.shape[4] != hd:
            raise EvaluationError(f"QAttention past of shape {list(past.shape)} is not "
                                  f"[2, {x.shape[0]}, {heads}, P, {hd}]")
    filter_value = ctx.attr("mask_filter_value", -10000.0)
    causal = bool(ctx.attr("unidirectional", 0))

    def mask(b, s, p, total):
        return attention_mask(mask_index, b, s, p, total, causal and s > 1, filter_value)

    out, present = _attend(qkv, heads, mask, past, ctx.attr("scale", None))
    return out.astype(bias.dtype), present.astype(bias.dtype)


def _dequantized(q, scale, zero_point, what: str) -> np.ndarray:
    """``(q - zero_point) * scale`` in float32 for per-tensor ``scale`` / ``zero_point``."""
    s = _scalar(scale, f"{what} scale", "QEmbedLayerNormalization").astype(_F32)
    z = _scalar(zero_point, f"{what} zero point", "QEmbedLayerNormalization")
    return (np.asarray(q).astype(np.int32) - z.astype(np.int32)).astype(_F32) * s


def _rows(table: np.ndarray, ids: np.ndarray, what: str) -> np.ndarray:
    if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        raise EvaluationError(f"QEmbedLayerNormalization {what} index out of range "
                              f"[0, {table.shape[0]})")
    return table[ids]


@kernel("QEmbedLayerNormalization", domain=MS)
def q_embed_layer_normalization(ctx, input_ids, segment_ids, word_q, position_q, segment_q,
                                gamma_q, beta_q, mask, word_scale, position_scale,
                                segment_scale, gamma_scale, beta_scale, word_zp, position_zp,
                                segment_zp, gamma_zp, beta_zp):
    """QEmbedLayerNormalization (com.microsoft 1): BERT's embedding sum and layer
    normalization with 8-bit tables.

    ``input_ids`` (and ``segment_ids``) int32 [B, S] index the dequantized tables
    ``(q - zero_point) * scale`` (per-tensor; word [V, H], position [P, H] indexed by the
    position ``0..S-1``, segment [G, H]; the three segment inputs all or none); their sum is
    normalized over H (``epsilon``, default 1e-12) and scaled by the dequantized ``gamma`` and
    shifted by ``beta`` [H]. Outputs: float32 [B, S, H] and the mask index int32 [B] (the number
    of entries equal to 1 in each row of ``mask``; zeros without a mask). EvaluationError for an
    index out of range or S above the position table.
    """
    _require("QEmbedLayerNormalization", input_ids=input_ids, word_embedding_quant=word_q,
             position_embedding_quant=position_q, gamma_quant=gamma_q, beta_quant=beta_q,
             word_embedding_scale=word_scale, position_embedding_scale=position_scale,
             gamma_scale=gamma_scale, beta_scale=beta_scale,
             word_embedding_zero_point=word_zp, position_embedding_zero_point=position_zp,
             gamma_zero_point=gamma_zp, beta_zero_point=beta_zp)
    ids = np.asarray(input_ids).astype(np.int64)
    if ids.ndim != 2:
        raise EvaluationError(f"QEmbedLayerNormalization input_ids of shape {list(ids.shape)} "
                              "is not [B, S]")
    b, s = ids.shape
    word = _dequantized(word_q, word_scale, word_zp, "word embedding")
    pos = _dequantized(position_q, position_scale, position_zp, "position embedding")
    if s > pos.shape[0]:
        raise EvaluationError(f"QEmbedLayerNormalization sequence length {s} exceeds the "
                              f"{pos.shape[0]} position embeddings")
    total = _rows(word, ids, "word") + pos[None, :s]
    segment = (segment_ids, segment_q, segment_scale, segment_zp)
    if any(v is not None for v in segment):
        if any(v is None for v in segment):
            raise InvalidModelError("QEmbedLayerNormalization takes segment_ids, "
                                    "segment_embedding, its scale and zero point all or none")
        seg = _dequantized(segment_q, segment_scale, segment_zp, "segment embedding")
        total = total + _rows(seg, np.asarray(segment_ids).astype(np.int64), "segment")
    eps = _F32(ctx.attr("epsilon", 1e-12))
    hidden = _F32(total.shape[-1])
    mean = total.sum(axis=-1, keepdims=True, dtype=_F32) / hidden
    centered = total - mean
    e = np.sqrt((centered * centered).sum(axis=-1, keepdims=True, dtype=_F32) / hidden + eps)
    gamma = _dequantized(gamma_q, gamma_scale, gamma_zp, "gamma")
    beta = _dequantized(beta_q, beta_scale, beta_zp, "beta")
    y = centered / e * gamma + beta
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != (b, s):
            raise EvaluationError(f"QEmbedLayerNormalization mask of shape {list(m.shape)} is "
                                  f"not [{b}, {s}]")
        index = (m == 1).sum(axis=1).astype(np.int32)
    else:
        index = np.zeros(b, np.int32)
    return y, index


def _param(ctx, name: str, activation: str) -> float:
    value = ctx.attr(f"activation_{name}", None)
    if value is None:
        raise InvalidModelError(f"FusedGemm activation {activation} needs the attribute "
                                f"activation_{name}")
    return float(value)


def _activate(ctx, y: np.ndarray, activation: str) -> np.ndarray:
    """``activation`` (an ONNX activation's name, with its ``activation_*`` parameters)
    applied to float ``y`` in its own precision."""
    t = y.dtype.type
    if activation == "":
        raise InvalidModelError("FusedGemm needs an activation attribute (onnxruntime refuses "
                                "the node without one)")
    if activation == "Relu":
        return np.maximum(y, t(0))
    if activation == "Tanh":
        return np.tanh(y)
    if activation == "Sigmoid":
        return t(1) / (t(1) + np.exp(-y))
    if activation == "Softsign":
        return y / (t(1) + np.abs(y))
    if activation == "Softplus":
        return np.logaddexp(t(0), y)
    if activation == "LeakyRelu":
        alpha = t(_param(ctx, "alpha", activation))
        return np.where(y >= 0, y, y * alpha)
    if activation == "ThresholdedRelu":
        alpha = t(_param(ctx, "alpha", activation))
        return np.where(y > alpha, y, t(0))
    if activation == "Elu":
        alpha = t(_param(ctx, "alpha", activation))
        return np.where(y >= 0, y, alpha * np.expm1(y))
    if activation == "HardSigmoid":
        alpha, beta = t(_param(ctx, "alpha", activation)), t(_param(ctx, "beta", activation))
        return np.clip(alpha * y + beta, t(0), t(1))
    if activation == "Selu":
        alpha, gamma = t(_param(ctx, "alpha", activation)), t(_param(ctx, "gamma", activation))
        return np.where(y > 0, gamma * y, gamma * alpha * np.expm1(y))
    raise UnsupportedError(f"FusedGemm activation {activation!r} is not implemented")


@kernel("FusedGemm", domain=MS)
def fused_gemm(ctx, a, b, c=None):
    """FusedGemm (com.microsoft 1): Gemm (``alpha * A' B' + beta * C``, ``transA``,
    ``transB``, C unidirectionally broadcast; Part 2 Gemm) followed by ``activation`` (Relu,
    Tanh, Sigmoid, Softsign, Softplus, LeakyRelu, ThresholdedRelu, Elu, HardSigmoid, Selu;
    required, as onnxruntime requires it) whose parameters are the ``activation_alpha`` /
    ``_beta`` / ``_gamma`` attributes. Float inputs only (onnxruntime's CPU kernel takes
    float32), computed in their own precision. InvalidModelError for a missing activation or
    parameter, UnsupportedError for another activation or an integer type, EvaluationError for
    inputs that are not 2-D."""
    _require("FusedGemm", A=a, B=b)
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f" or b.dtype != a.dtype:
        raise UnsupportedError(f"FusedGemm of {a.dtype} and {b.dtype} inputs is not "
                               "implemented (float only)")
    if a.ndim != 2 or b.ndim != 2:
        raise EvaluationError(f"FusedGemm inputs must be 2-D, not {list(a.shape)} and "
                              f"{list(b.shape)}")
    if ctx.attr("transA", 0):
        a = a.T
    if ctx.attr("transB", 0):
        b = b.T
    t = a.dtype.type
    y = np.matmul(a, b)
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    if alpha != 1.0:
        y = y * t(alpha)
    if c is not None and beta != 0.0:
        cc = np.asarray(c).astype(a.dtype)
        y = y + (cc * t(beta) if beta != 1.0 else cc)
    act = ctx.attr("activation", "")
    if isinstance(act, bytes):
        act = act.decode()
    return _activate(ctx, y, act).astype(a.dtype)
