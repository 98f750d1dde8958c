"""Kernels of the attention and rotary embedding operators of onnxruntime's com.microsoft domain
(com.microsoft, opset 1): Attention (the fused BERT / GPT-2 operator of onnxruntime's
transformer optimizer), MultiHeadAttention, RotaryEmbedding and GroupQueryAttention.

The semantics are onnxruntime's contrib operator definitions (docs/ContribOperators.md) as its
CPU kernels compute them; an operator outside the default domains is not defined by ONNX
Part 1 itself (Clause 4.4: a node of another domain runs only where an implementation of that
domain is present).

Precision: onnxruntime's CPU kernels compute in float32. Here the projections and Q K^T are
computed in float64, the scaled scores are rounded to float32 before the additive masks are
added in float32 (so a -10000 mask loses the digits it loses in onnxruntime, which decides the
result of a fully masked row), the softmax and the weighted sum of V are in float64 again, and
the outputs are rounded to the input type. Inputs: float32 or float16 (other types:
UnsupportedError).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, InvalidModelError, UnsupportedError
from ..registry import op
from .attention import masked_softmax

_W = np.float64
_S = np.float32


def _float_input(x, op_type: str, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float16):
        raise UnsupportedError(f"{op_type} {what} of type {x.dtype} (float32 and float16 are "
                               "implemented)")
    return x


def _to_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """[B, S, H * D] -> [B, H, S, D]."""
    b, s, hd = x.shape
    return x.reshape(b, s, heads, hd // heads).transpose(0, 2, 1, 3)


def _from_heads(x: np.ndarray) -> np.ndarray:
    """[B, H, S, D] -> [B, S, H * D]."""
    b, h, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * d)


def _attend(q, k, v, scale: float, mask=None, bias=None, softcap: float = 0.0,
            allowed=None) -> np.ndarray:
    """``softmax(scores + mask + bias) V`` per head, Q [B, N, S, D], K [B, N, T, D],
    V [B, N, T, Dv] (float64); scores ``scale * Q K^T`` rounded to float32 (module doc),
    ``softcap * tanh(scores / softcap)`` when ``softcap`` > 0; ``mask`` and ``bias`` (float32,
    broadcast to [B, N, S, T]) added in float32; ``allowed`` (bool, broadcast) drops the
    other keys entirely (a row without any gives zeros). Returns [B, N, S, Dv] float64."""
    scores = (np.matmul(q, np.swapaxes(k, -1, -2)) * scale).astype(_S)
    if softcap > 0:
        scores = (softcap * np.tanh(scores.astype(_W) / softcap)).astype(_S)
    if mask is not None:
        scores = scores + mask.astype(_S)
    if bias is not None:
        scores = scores + bias.astype(_S)
    scores = scores.astype(_W)
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    return np.matmul(masked_softmax(scores), v)


def _key_padding(mask_index, b: int, s: int, total: int, filter_value: float,
                 op_type: str) -> np.ndarray:
    """The additive [B, 1, S, T] float32 mask of a com.microsoft ``mask_index`` /
    ``key_padding_mask``: 1-D [B] valid key lengths (keys from it on masked), 1-D [2B] end
    positions then start positions (keys before the start masked too), 2-D [B, T] or 3-D
    [B, S, T] 0/1 masks (0 masked). A masked key gets ``filter_value``."""
    m = np.asarray(mask_index)
    j = np.arange(total)
    if m.ndim == 1 and m.shape[0] in (b, 2 * b):
        m = m.astype(np.int64)
        keep = j[None, :] < m[:b, None]
        if m.shape[0] == 2 * b:
            keep &= j[None, :] >= np.minimum(m[b:, None], total)
        keep = keep[:, None, None, :]
    elif m.ndim == 2 and m.shape == (b, total):
        keep = (m > 0)[:, None, None, :]
    elif m.ndim == 3 and m.shape == (b, s, total):
        keep = (m > 0)[:, None, :, :]
    else:
        raise UnsupportedError(f"{op_type} mask of shape {list(m.shape)} (implemented: [B], "
                               f"[2 * B], [B, T], [B, S, T] with B={b}, S={s}, T={total})")
    return np.broadcast_to(np.where(keep, 0.0, filter_value).astype(_S), (b, 1, s, total))


def _causal(s: int, total: int) -> np.ndarray:
    """The [S, T] keys a query sees under a causal mask: query i (after T - S past keys) sees
    keys up to T - S + i. onnxruntime excludes the later keys entirely (their weight is 0
    whatever ``mask_filter_value`` is), not by adding the filter value."""
    past = total - s
    return np.arange(total)[None, :] <= past + np.arange(s)[:, None]


def _bias4(bias, b, n, s, total, op_type: str) -> np.ndarray:
    """``attention_bias`` [B or 1, N or 1, S, T] checked against the scores."""
    a = np.asarray(bias)
    if a.ndim != 4 or a.shape[0] not in (1, b) or a.shape[1] not in (1, n) or \
            a.shape[2:] != (s, total):
        raise EvaluationError(f"{op_type} attention_bias of shape {list(a.shape)} does not "
                              f"broadcast to the scores [{b}, {n}, {s}, {total}]")
    return a


def _heads_attr(ctx, op_type: str) -> int:
    n = int(ctx.attr("num_heads", 0) or 0)
    if n <= 0:
        raise InvalidModelError(f"{op_type} needs a positive num_heads attribute")
    return n


def _scale(ctx, head_size: int) -> float:
    scale = float(ctx.attr("scale", 0.0) or 0.0)
    return scale if scale != 0.0 else 1.0 / math.sqrt(head_size)


@op("Attention", since=1, domain="com.microsoft")
def ms_attention(ctx, x, weights, bias=None, mask_index=None, past=None, attention_bias=None,
                 past_sequence_length=None):
    """com.microsoft Attention: multi-head self-attention with the Q, K, V projections merged.

    input [B, S, In]; weights [In, Hq + Hk + Hv] (``qkv_hidden_sizes`` [Hq, Hk, Hv], default
    three equal parts, Hq = Hk); bias [Hq + Hk + Hv] (optional); ``num_heads`` N divides each.
    ``mask_index`` (int32, optional): [B] valid key lengths, [2 * B] end then start positions,
    [B, T] or [B, S, T] 0/1 masks; a masked key's score gets ``mask_filter_value`` (default
    -10000) added, and ``unidirectional`` drops every key after the query's position
    (T - S + i) entirely (weight 0, as onnxruntime does). ``past`` [2, B, N, P, D] is
    prepended to K and V (present [2, B, N, P + S, D], output 1). ``attention_bias``
    [B or 1, N or 1, S, T] is added to the scores. ``scale`` defaults to 1/sqrt(D).
    Output [B, S, Hv].

    Raises UnsupportedError for ``past_present_share_buffer``, ``do_rotary``, a 4-D mask and
    non-float inputs; EvaluationError for shapes that do not fit.
    """
    op_type = "Attention"
    x = _float_input(x, op_type, "input")
    w = _float_input(weights, op_type, "weights")
    if int(ctx.attr("past_present_share_buffer", 0) or 0):
        raise UnsupportedError("Attention with past_present_share_buffer is not implemented")
    if int(ctx.attr("do_rotary", 0) or 0):
        raise UnsupportedError("Attention with do_rotary is not implemented")
    n = _heads_attr(ctx, op_type)
    if x.ndim != 3 or w.ndim != 2 or w.shape[0] != x.shape[2]:
        raise EvaluationError(f"Attention input {list(x.shape)} and weights {list(w.shape)} "
                              "are not [B, S, In] and [In, *]")
    sizes = ctx.attr("qkv_hidden_sizes", None)
    if sizes is None:
        if w.shape[1] % 3:
            raise EvaluationError(f"Attention weights' last dim {w.shape[1]} is not 3 equal "
                                  "parts")
        sizes = [w.shape[1] // 3] * 3
    sizes = [int(t) for t in sizes]
    if len(sizes) != 3 or sum(sizes) != w.shape[1] or sizes[0] != sizes[1] or \
            any(t <= 0 or t % n for t in sizes):
        raise EvaluationError(f"Attention qkv_hidden_sizes {sizes} do not fit weights "
                              f"{list(w.shape)} and {n} heads")
    proj = np.matmul(x.astype(_W), w.astype(_W))
    if bias is not None:
        bvec = np.asarray(bias)
        if bvec.shape != (w.shape[1],):
            raise EvaluationError(f"Attention bias of shape {list(bvec.shape)}, "
                                  f"[{w.shape[1]}] is needed")
        proj = proj + bvec.astype(_W)
    b, s = x.shape[:2]
    q = _to_heads(proj[..., :sizes[0]], n)
    k = _to_heads(proj[..., sizes[0]:sizes[0] + sizes[1]], n)
    v = _to_heads(proj[..., sizes[0] + sizes[1]:], n)
    head = sizes[0] // n
    present = None
    if past is not None:
        pst = np.asarray(past)
        if sizes[1] != sizes[2] or pst.ndim != 5 or pst.shape[:3] != (2, b, n) or \
                pst.shape[4] != head:
            raise EvaluationError(f"Attention past of shape {list(pst.shape)}, "
                                  f"[2, {b}, {n}, P, {head}] is needed (equal K and V sizes)")
        k = np.concatenate([pst[0].astype(_W), k], axis=2)
        v = np.concatenate([pst[1].astype(_W), v], axis=2)
    if ctx.num_outputs > 1:
        present = np.stack([k, v]).astype(x.dtype)
    total = k.shape[2]
    filter_value = float(ctx.attr("mask_filter_value", -10000.0))
    mask = None
    if mask_index is not None:
        if np.asarray(mask_index).ndim == 4:
            raise UnsupportedError("Attention with a 4-D mask_index is not implemented")
        mask = _key_padding(mask_index, b, s, total, filter_value, op_type)
    allowed = _causal(s, total) if int(ctx.attr("unidirectional", 0) or 0) else None
    extra = None if attention_bias is None else _bias4(attention_bias, b, n, s, total, op_type)
    y = _attend(q, k, v, _scale(ctx, head), mask, extra, allowed=allowed)
    return _from_heads(y).astype(x.dtype), present
