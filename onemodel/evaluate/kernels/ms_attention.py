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
from ...operators import kernel
from .attention import masked_softmax, rotate

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
            allowed=None, with_scores: bool = False):
    """``softmax(scores + mask + bias) V`` per head, Q [B, N, S, D], K [B, N, T, D],
    V [B, N, T, Dv] (float64); scores ``scale * Q K^T`` rounded to float32 (module doc),
    ``softcap * tanh(scores / softcap)`` when ``softcap`` > 0; ``mask`` and ``bias`` (float32,
    broadcast to [B, N, S, T]) added in float32; ``allowed`` (bool, broadcast) drops the
    other keys entirely (a row without any gives zeros). Returns [B, N, S, Dv] float64, and
    with ``with_scores`` also the float32 scores [B, N, S, T] the softmax reads, a dropped key's
    the lowest float32 (onnxruntime's qk output)."""
    scores = (np.matmul(q, np.swapaxes(k, -1, -2)) * scale).astype(_S)
    if softcap > 0:
        scores = (softcap * np.tanh(scores.astype(_W) / softcap)).astype(_S)
    if mask is not None:
        scores = scores + mask.astype(_S)
    if bias is not None:
        scores = scores + bias.astype(_S)
    wide = scores.astype(_W)
    if allowed is not None:
        wide = np.where(allowed, wide, -np.inf)
    y = np.matmul(masked_softmax(wide), v)
    if not with_scores:
        return y
    if allowed is not None:
        scores = np.where(allowed, scores, np.finfo(_S).min).astype(_S)
    return y, np.broadcast_to(scores, q.shape[:3] + (k.shape[2],))


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


@kernel("Attention", domain="com.microsoft")
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

    Raises UnsupportedError for ``past_present_share_buffer``, ``do_rotary`` and a 4-D mask
    (onnxruntime's CPU kernel refuses the last two as well) and for non-float inputs;
    EvaluationError for shapes that do not fit.
    """
    op_type = "Attention"
    x = _float_input(x, op_type, "input")
    w = _float_input(weights, op_type, "weights")
    if int(ctx.attr("past_present_share_buffer", 0) or 0):
        raise UnsupportedError("Attention with past_present_share_buffer is not implemented")
    if int(ctx.attr("do_rotary", 0) or 0):
        raise UnsupportedError("Attention with do_rotary is not implemented: onnxruntime's CPU "
                               "kernel does not implement it either (MultiHeadAttention after "
                               "RotaryEmbedding computes it)")
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
            raise UnsupportedError("Attention with a 4-D mask_index [B, 1, max_sequence_length, "
                                   "max_sequence_length] is not implemented: onnxruntime's CPU "
                                   "kernel does not implement it either")
        mask = _key_padding(mask_index, b, s, total, filter_value, op_type)
    allowed = _causal(s, total) if int(ctx.attr("unidirectional", 0) or 0) else None
    extra = None if attention_bias is None else _bias4(attention_bias, b, n, s, total, op_type)
    y = _attend(q, k, v, _scale(ctx, head), mask, extra, allowed=allowed)
    return _from_heads(y).astype(x.dtype), present


def _mha_kv(x, heads: int, what: str):
    """K or V of MultiHeadAttention as [B, N, L, D]: 3-D [B, L, N * D] split into heads, 4-D
    [B, N, L, D] (BNSH, e.g. a cross-attention cache) as it is."""
    x = np.asarray(x)
    if x.ndim == 3:
        if x.shape[2] % heads:
            raise EvaluationError(f"MultiHeadAttention {what} last dim {x.shape[2]} is not a "
                                  f"multiple of {heads} heads")
        return _to_heads(x.astype(_W), heads), True
    if x.ndim == 4 and x.shape[1] == heads:
        return x.astype(_W), False
    raise EvaluationError(f"MultiHeadAttention {what} of shape {list(x.shape)}: [B, L, N * D] "
                          f"or [B, {heads}, L, D] is needed")


@kernel("MultiHeadAttention", domain="com.microsoft")
def ms_multi_head_attention(ctx, query, key=None, value=None, bias=None, key_padding_mask=None,
                            attention_bias=None, past_key=None, past_value=None,
                            past_sequence_length=None, cache_indirection=None):
    """com.microsoft MultiHeadAttention: attention of separate or packed Q, K, V.

    query [B, S, N * D] with key [B, L, N * D] and value [B, L, N * Dv] (or 4-D [B, N, L, D] /
    [B, N, L, Dv], taken as projected heads: ``bias`` is not added to them); query packed
    [B, S, N, 3, D] without key and value; key packed [B, L, N, 2, D] without value (the
    packed forms, which onnxruntime's CPU kernel refuses, follow the operator definition).
    ``bias`` [N*D + N*D + N*Dv] is added to Q, K, V. ``past_key`` / ``past_value``
    [B, N, P, D(v)] are prepended to K / V (with 3-D or packed key); present_key /
    present_value (outputs 1, 2) are the K / V used. ``key_padding_mask`` (int32: [B] lengths,
    [B, T] or [B, S, T] 0/1) adds ``mask_filter_value`` to a masked key's score;
    ``unidirectional`` (new keys as many as queries; else UnsupportedError) excludes keys after
    T - S + i; ``attention_bias`` [B or 1, N or 1, S, T]
    is added. ``scale`` defaults to 1/sqrt(D). Output [B, S, N * Dv]. Output 3, qk
    [B, N, S, T]: the scores the softmax reads (``scale`` Q K^T in float32, the mask's filter
    value and ``attention_bias`` added; a key ``unidirectional`` excludes holds the lowest
    float32), as onnxruntime's CPU kernel gives them. ``cache_indirection`` (beam search) raises
    UnsupportedError.
    """
    op_type = "MultiHeadAttention"
    query = _float_input(query, op_type, "query")
    n = _heads_attr(ctx, op_type)
    if cache_indirection is not None:
        raise UnsupportedError("MultiHeadAttention with cache_indirection is not implemented")
    qkv_bias = None if bias is None else np.asarray(bias).astype(_W)
    if query.ndim == 5:
        if key is not None or value is not None or query.shape[2:4] != (n, 3):
            raise EvaluationError(f"MultiHeadAttention packed query {list(query.shape)}: "
                                  f"[B, S, {n}, 3, D] without key and value is needed")
        parts = query.astype(_W)
        hd = parts.shape[4]
        if qkv_bias is not None:
            if qkv_bias.shape != (3 * n * hd,):
                raise EvaluationError(f"MultiHeadAttention bias of shape {list(qkv_bias.shape)}"
                                      f", [{3 * n * hd}] is needed")
            parts = parts + qkv_bias.reshape(3, n, hd).transpose(1, 0, 2)
        q, k, v = (parts[:, :, :, i].transpose(0, 2, 1, 3) for i in range(3))
        projected = True
    else:
        if query.ndim != 3 or query.shape[2] % n or key is None:
            raise EvaluationError(f"MultiHeadAttention query of shape {list(query.shape)} "
                                  f"needs [B, S, {n} * D] and a key")
        q = _to_heads(query.astype(_W), n)
        key = np.asarray(key)
        if key.ndim == 5:
            if value is not None or key.shape[2:4] != (n, 2):
                raise EvaluationError(f"MultiHeadAttention packed key {list(key.shape)}: "
                                      f"[B, L, {n}, 2, D] without value is needed")
            kv = key.astype(_W)
            k, v = (kv[:, :, :, i].transpose(0, 2, 1, 3) for i in range(2))
            projected = True
        else:
            if value is None:
                raise EvaluationError("MultiHeadAttention needs a value with an unpacked key")
            k, projected = _mha_kv(key, n, "key")
            v, projected_v = _mha_kv(value, n, "value")
            if projected != projected_v:
                raise EvaluationError("MultiHeadAttention key and value must both be 3-D or "
                                      "both 4-D")
        if qkv_bias is not None:
            hq, hk, hv = q.shape[3] * n, k.shape[3] * n, v.shape[3] * n
            if qkv_bias.shape != (hq + hk + hv,):
                raise EvaluationError(f"MultiHeadAttention bias of shape {list(qkv_bias.shape)}"
                                      f", [{hq + hk + hv}] is needed")
            q = q + qkv_bias[:hq].reshape(n, 1, -1)
            if projected:
                k = k + qkv_bias[hq:hq + hk].reshape(n, 1, -1)
                v = v + qkv_bias[hq + hk:].reshape(n, 1, -1)
    b, _, s, hd = q.shape
    if k.shape[0] != b or v.shape[:3] != k.shape[:3] or k.shape[3] != hd:
        raise EvaluationError(f"MultiHeadAttention Q, K, V heads {list(q.shape)}, "
                              f"{list(k.shape)}, {list(v.shape)} do not fit")
    if (past_key is None) != (past_value is None):
        raise EvaluationError("MultiHeadAttention needs both past_key and past_value or neither")
    kv_len = k.shape[2]
    if past_key is not None and projected:
        pk, pv = np.asarray(past_key), np.asarray(past_value)
        if pk.ndim != 4 or pk.shape[:2] != (b, n) or pk.shape[3] != hd or \
                pv.shape[:3] != pk.shape[:3] or pv.shape[3] != v.shape[3]:
            raise EvaluationError(f"MultiHeadAttention past_key {list(pk.shape)} / past_value "
                                  f"{list(pv.shape)} do not fit [{b}, {n}, P, D]")
        k = np.concatenate([pk.astype(_W), k], axis=2)
        v = np.concatenate([pv.astype(_W), v], axis=2)
    total = k.shape[2]
    mask = None
    if key_padding_mask is not None:
        m = np.asarray(key_padding_mask)
        if m.ndim == 1 and m.shape[0] != b:
            raise UnsupportedError(f"MultiHeadAttention key_padding_mask of shape "
                                   f"{list(m.shape)} (implemented: [B], [B, T], [B, S, T])")
        mask = _key_padding(m, b, s, total, float(ctx.attr("mask_filter_value", -10000.0)),
                            op_type)
    allowed = None
    if int(ctx.attr("unidirectional", 0) or 0):
        if kv_len != s:
            # "each token attends to previous tokens" needs the new keys to be the queries'
            # own positions; onnxruntime's CPU kernel gives an irregular mask otherwise
            raise UnsupportedError(f"MultiHeadAttention unidirectional with {kv_len} new keys "
                                   f"for {s} queries is not implemented")
        allowed = _causal(s, total)
    extra = None if attention_bias is None else _bias4(attention_bias, b, n, s, total, op_type)
    dt = query.dtype
    if ctx.num_outputs > 3:
        y, qk = _attend(q, k, v, _scale(ctx, hd), mask, extra, allowed=allowed,
                        with_scores=True)
        return _from_heads(y).astype(dt), k.astype(dt), v.astype(dt), qk.astype(dt)
    y = _attend(q, k, v, _scale(ctx, hd), mask, extra, allowed=allowed)
    return _from_heads(y).astype(dt), k.astype(dt), v.astype(dt)


def _positions(position_ids, b: int, s: int, cache_len: int, op_type: str) -> np.ndarray:
    """[B, S] positions of com.microsoft ``position_ids``: [B, S] as given, or [1] a start
    offset (positions offset .. offset + S - 1 in every batch entry); each must index the
    caches."""
    pos = np.asarray(position_ids).astype(np.int64)
    if pos.shape == (b, s):
        out = pos
    elif pos.size == 1:
        out = np.broadcast_to(pos.reshape(()) + np.arange(s)[None, :], (b, s))
    else:
        raise EvaluationError(f"{op_type} position_ids of shape {list(pos.shape)}: [{b}, {s}] "
                              "or [1] is needed")
    if out.size and (out.min() < 0 or out.max() >= cache_len):
        raise EvaluationError(f"{op_type} positions {out.min()}..{out.max()} exceed the "
                              f"{cache_len} cache rows")
    return out


def _rotate_bsnh(x: np.ndarray, pos: np.ndarray, cos, sin, rot: int,
                 interleaved: bool) -> np.ndarray:
    """x [B, S, N, D] (float64) with its first ``rot`` features of each head rotated by the
    cache rows ``pos`` [B, S] of cos / sin [max, >= rot / 2]."""
    half = rot // 2
    c = np.asarray(cos)[pos][..., :half].astype(_W)[:, :, None, :]
    sn = np.asarray(sin)[pos][..., :half].astype(_W)[:, :, None, :]
    out = x.copy()
    out[..., :rot] = rotate(x[..., :rot], c, sn, interleaved)
    return out


@kernel("RotaryEmbedding", domain="com.microsoft")
def ms_rotary_embedding(ctx, x, position_ids, cos_cache, sin_cache):
    """com.microsoft RotaryEmbedding: rotary position embedding of every head.

    input [B, S, N * D] or [B, N, S, D]; position_ids (int64) [B, S], or [1] a start offset;
    cos_cache / sin_cache [max_position, R / 2], R = ``rotary_embedding_dim`` (default the
    head size D, which without ``num_heads`` is 2 * the caches' last dim; with
    ``rotary_embedding_dim``, ``num_heads`` is required: else InvalidModelError). The first
    R features of each head are rotated in halves, or with ``interleaved`` in even/odd pairs;
    the rest pass through. Output: the input's shape and type.
    ``is_packed_batching`` (sequences of several lengths packed one after another along the
    sequence axis) changes nothing here: each token is rotated by the cache row its position id
    names, as onnxruntime's CPU kernel computes it (there the attribute only lifts its limit of
    a sequence no longer than the caches, which this kernel does not have).
    """
    op_type = "RotaryEmbedding"
    x = _float_input(x, op_type, "input")
    cos, sin = np.asarray(cos_cache), np.asarray(sin_cache)
    if cos.ndim != 2 or sin.shape != cos.shape:
        raise EvaluationError(f"RotaryEmbedding caches of shapes {list(cos.shape)} and "
                              f"{list(sin.shape)}: [max_position, R / 2] is needed")
    rot = int(ctx.attr("rotary_embedding_dim", 0) or 0)
    heads = int(ctx.attr("num_heads", 0) or 0)
    if rot and heads <= 0:
        raise InvalidModelError("RotaryEmbedding needs num_heads with rotary_embedding_dim")
    if x.ndim == 4:
        t = x.transpose(0, 2, 1, 3)
    elif x.ndim == 3:
        head = x.shape[2] // heads if heads else 2 * cos.shape[1]
        if not head or x.shape[2] % head:
            raise EvaluationError(f"RotaryEmbedding input {list(x.shape)}: its last dim is not "
                                  f"a multiple of the head size {head}")
        t = x.reshape(x.shape[0], x.shape[1], x.shape[2] // head, head)
    else:
        raise EvaluationError(f"RotaryEmbedding input must be 3-D or 4-D, not {list(x.shape)}")
    d = t.shape[3]
    rot = rot or d
    if rot > d or rot % 2 or rot // 2 > cos.shape[1]:
        raise EvaluationError(f"rotary_embedding_dim {rot} does not fit head size {d} and "
                              f"caches {list(cos.shape)}")
    pos = _positions(position_ids, t.shape[0], t.shape[1], cos.shape[0], op_type)
    out = _rotate_bsnh(t.astype(_W), pos, cos, sin, rot, bool(int(ctx.attr("interleaved", 0))))
    out = out.astype(x.dtype)
    return out.transpose(0, 2, 1, 3) if x.ndim == 4 else out.reshape(x.shape)


def _smooth_softmax(scores: np.ndarray, sink=0.0) -> np.ndarray:
    """Softmax with an extra logit ``sink`` (0 for ``smooth_softmax``; broadcast against the
    scores' rows) in the denominator, -inf entries excluded:
    ``exp(x - m) / (exp(sink - m) + sum exp(x - m))``, m = max(sink, max x)."""
    top = np.maximum(np.max(scores, axis=-1, keepdims=True), sink)
    e = np.where(np.isfinite(scores), np.exp(scores - top), 0.0)
    return e / (np.exp(sink - top) + e.sum(axis=-1, keepdims=True))


@kernel("GroupQueryAttention", domain="com.microsoft")
def ms_group_query_attention(ctx, query, key=None, value=None, past_key=None, past_value=None,
                             seqlens_k=None, total_sequence_length=None, cos_cache=None,
                             sin_cache=None, position_ids=None, attention_bias=None,
                             head_sink=None):
    """com.microsoft GroupQueryAttention: causal attention with ``kv_num_heads`` K/V heads
    shared by groups of the ``num_heads`` query heads, and a KV cache in BNSH.

    query [B, S, N * D] with key / value [B, S, Nkv * D], or packed [B, S, (N + 2 Nkv) * D]
    without them; past_key / past_value [B, Nkv, P, D] (optional); seqlens_k (int32) [B] the
    total length - 1 of each batch entry, total_sequence_length (int32 scalar) the longest.
    When S equals total_sequence_length the input is a prompt (no past is read); otherwise
    entry b has ``seqlens_k[b] + 1 - S`` past keys, the first of past_key. present_key /
    present_value [B, Nkv, max(total, P), D]: the past keys read, then the S new ones, then
    zeros. Query s of entry b (past p) sees keys j <= p + s with j < seqlens_k[b] + 1 (in a
    right-padded prompt the padding queries see every valid key, as onnxruntime computes), and
    with ``local_window_size`` w > 0 only the w keys j > p + s - w. ``do_rotary`` rotates Q
    and K (positions p + s) with cos_cache / sin_cache [max, R / 2] (``rotary_interleaved``)
    before the cache. Scores are ``scale`` (default 1/sqrt(D)) Q K^T, capped by ``softcap``
    (> 0: ``softcap * tanh(x / softcap)``), then a softmax (``smooth_softmax``: with an extra
    logit 0). Output [B, S, N * D].

    ``position_ids`` [B, S] (int64) replace the rotary positions; ``attention_bias``
    [B or 1, N or 1, S, total] is added to the capped scores; ``head_sink`` [N] is an extra
    logit of each head in the softmax's denominator. Raises UnsupportedError for non-float
    inputs; EvaluationError for shapes or lengths that do not fit.
    """
    op_type = "GroupQueryAttention"
    query = _float_input(query, op_type, "query")
    n = _heads_attr(ctx, op_type)
    kvn = int(ctx.attr("kv_num_heads", 0) or 0)
    if kvn <= 0 or n % kvn:
        raise InvalidModelError(f"GroupQueryAttention kv_num_heads {kvn} must be positive and "
                                f"divide num_heads {n}")
    if seqlens_k is None or total_sequence_length is None:
        raise EvaluationError("GroupQueryAttention needs seqlens_k and total_sequence_length")
    if query.ndim != 3:
        raise EvaluationError(f"GroupQueryAttention query of shape {list(query.shape)}: "
                              "[B, S, hidden] is needed")
    b, s, width = query.shape
    if key is None:
        if value is not None or width % (n + 2 * kvn):
            raise EvaluationError(f"GroupQueryAttention packed query width {width} is not "
                                  f"(num_heads + 2 * kv_num_heads) * head size")
        hd = width // (n + 2 * kvn)
        qkv = query.astype(_W)
        q3, k3, v3 = qkv[..., :n * hd], qkv[..., n * hd:(n + kvn) * hd], qkv[..., (n + kvn) * hd:]
    else:
        if value is None or width % n:
            raise EvaluationError("GroupQueryAttention needs a value with a key, and a query "
                                  "width that num_heads divides")
        hd = width // n
        k3, v3 = np.asarray(key).astype(_W), np.asarray(value).astype(_W)
        if k3.shape != (b, s, kvn * hd) or v3.shape != k3.shape:
            raise EvaluationError(f"GroupQueryAttention key {list(k3.shape)} / value "
                                  f"{list(v3.shape)}: [{b}, {s}, {kvn * hd}] is needed")
        q3 = query.astype(_W)
    q, k, v = _to_heads(q3, n), _to_heads(k3, kvn), _to_heads(v3, kvn)
    lens = np.asarray(seqlens_k).astype(np.int64).reshape(-1) + 1
    total = int(np.asarray(total_sequence_length).reshape(-1)[0])
    if lens.shape != (b,):
        raise EvaluationError(f"GroupQueryAttention seqlens_k has {lens.size} entries for "
                              f"batch {b}")
    past_buf = 0
    if (past_key is None) != (past_value is None):
        raise EvaluationError("GroupQueryAttention needs both past_key and past_value or "
                              "neither")
    if past_key is not None:
        pk, pv = np.asarray(past_key), np.asarray(past_value)
        if pk.ndim != 4 or pk.shape[:2] != (b, kvn) or pk.shape[3] != hd or pv.shape != pk.shape:
            raise EvaluationError(f"GroupQueryAttention past_key {list(pk.shape)} / past_value "
                                  f"{list(pv.shape)}: [{b}, {kvn}, P, {hd}] is needed")
        past_buf = pk.shape[2]
    prompt = s == total
    pasts = np.zeros(b, np.int64) if prompt else lens - s
    present_len = max(total, past_buf)
    if (pasts < 0).any() or (pasts + s > present_len).any() or (pasts > past_buf).any() or \
            (lens > present_len).any():
        raise EvaluationError(f"GroupQueryAttention seqlens_k {list(lens - 1)} do not fit "
                              f"{s} new tokens, {past_buf} cached and total {total}")
    if int(ctx.attr("do_rotary", 0) or 0):
        if cos_cache is None or sin_cache is None:
            raise EvaluationError("GroupQueryAttention do_rotary needs cos_cache and sin_cache")
        cos, sin = np.asarray(cos_cache), np.asarray(sin_cache)
        rot = 2 * cos.shape[1]
        if cos.ndim != 2 or sin.shape != cos.shape or rot > hd:
            raise EvaluationError(f"GroupQueryAttention caches {list(cos.shape)} do not fit "
                                  f"head size {hd}")
        pos = pasts[:, None] + np.arange(s)[None, :]
        if position_ids is not None:
            pos = np.asarray(position_ids).astype(np.int64)
            if pos.shape != (b, s):
                raise EvaluationError(f"GroupQueryAttention position_ids of shape "
                                      f"{list(pos.shape)}: [{b}, {s}] is needed")
        if pos.min(initial=0) < 0 or pos.max(initial=0) >= cos.shape[0]:
            raise EvaluationError(f"GroupQueryAttention positions up to {pos.max()} exceed the "
                                  f"{cos.shape[0]} cache rows")
        inter = bool(int(ctx.attr("rotary_interleaved", 0) or 0))
        q = _rotate_bsnh(q.transpose(0, 2, 1, 3), pos, cos, sin, rot, inter).transpose(0, 2, 1, 3)
        k = _rotate_bsnh(k.transpose(0, 2, 1, 3), pos, cos, sin, rot, inter).transpose(0, 2, 1, 3)
    pk_out = np.zeros((b, kvn, present_len, hd), _W)
    pv_out = np.zeros((b, kvn, present_len, hd), _W)
    for i in range(b):
        p = int(pasts[i])
        if p:
            pk_out[i, :, :p] = pk[i, :, :p]
            pv_out[i, :, :p] = pv[i, :, :p]
        pk_out[i, :, p:p + s] = k[i]
        pv_out[i, :, p:p + s] = v[i]
    group = n // kvn
    kr = np.repeat(pk_out, group, axis=1)
    vr = np.repeat(pv_out, group, axis=1)
    scale = _scale(ctx, hd)
    scores = (np.matmul(q, np.swapaxes(kr, -1, -2)) * scale).astype(_S).astype(_W)
    softcap = float(ctx.attr("softcap", 0.0) or 0.0)
    if softcap > 0:
        scores = softcap * np.tanh(scores / softcap)
    if attention_bias is not None:
        extra = _bias4(attention_bias, b, n, s, total, op_type).astype(_S)
        pad = [(0, 0)] * 3 + [(0, present_len - total)]
        scores = (scores.astype(_S) + np.pad(extra, pad)).astype(_W)
    j = np.arange(present_len)[None, None, None, :]
    last = (pasts[:, None] + np.arange(s)[None, :])[:, None, :, None]  # p + s
    allowed = (j <= last) & (j < lens[:, None, None, None])
    window = int(ctx.attr("local_window_size", -1))
    if window > 0:
        allowed = allowed & (j > last - window)
    scores = np.where(allowed, scores, -np.inf)
    smooth = int(ctx.attr("smooth_softmax", 0) or 0)
    if head_sink is not None:
        sink = np.asarray(head_sink).astype(_W).reshape(-1)
        if sink.shape != (n,):
            raise EvaluationError(f"GroupQueryAttention head_sink of shape "
                                  f"{list(np.shape(head_sink))}: [{n}] is needed")
        probs = _smooth_softmax(scores, sink.reshape(1, n, 1, 1))
    else:
        probs = _smooth_softmax(scores) if smooth else masked_softmax(scores)
    y = np.matmul(probs, vr)
    dt = query.dtype
    return _from_heads(y).astype(dt), pk_out.astype(dt), pv_out.astype(dt)
