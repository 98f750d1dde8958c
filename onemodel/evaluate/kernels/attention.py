"""Attention (opsets 23, 24, 25) and RotaryEmbedding (opset 23), default domain."""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, InvalidModelError
from ...ir.dtypes import INFO
from ...operators import kernel


def _heads(x: np.ndarray, heads: int | None, what: str) -> np.ndarray:
    """[B, S, H * D] -> [B, H, S, D] (3-D input), or the 4-D input itself."""
    if x.ndim == 4:
        return x
    if x.ndim != 3 or not heads or x.shape[2] % heads:
        raise EvaluationError(f"Attention {what} of shape {list(x.shape)} needs 4 dims or a "
                              f"num_heads attribute that divides its last dim")
    b, s, h = x.shape
    return x.reshape(b, s, heads, h // heads).transpose(0, 2, 1, 3)


def masked_softmax(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of float ``scores`` in their own precision, -inf entries
    excluded (probability 0); a row with no finite entry gives zeros, not NaN. Shared with
    the com.microsoft attention kernels (ms_attention.py)."""
    top = scores.max(axis=-1, keepdims=True)
    dead = ~np.isfinite(top)
    e = np.exp(scores - np.where(dead, 0, top))
    e = np.where(np.isfinite(scores), e, 0.0)
    total_e = e.sum(axis=-1, keepdims=True)
    return np.where(dead | (total_e == 0), 0.0, e / np.where(total_e == 0, 1, total_e))


def rotate(xr: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool) -> np.ndarray:
    """The rotary rotation of ``xr`` [..., R] (float64) by angles of ``cos`` / ``sin``
    [..., R / 2] (broadcast against it): feature pairs (i, i + R/2), or with ``interleaved``
    (2i, 2i + 1), become ``(a cos - c sin, c cos + a sin)``. Shared with the com.microsoft
    RotaryEmbedding and GroupQueryAttention kernels (ms_attention.py)."""
    if interleaved:
        a, c = xr[..., 0::2], xr[..., 1::2]
        out = np.empty(xr.shape, np.float64)
        out[..., 0::2] = a * cos - c * sin
        out[..., 1::2] = c * cos + a * sin
        return out
    half = xr.shape[-1] // 2
    a, c = xr[..., :half], xr[..., half:]
    return np.concatenate([a * cos - c * sin, c * cos + a * sin], axis=-1)


@kernel("Attention")
def attention(ctx, q, k, v, attn_mask=None, past_key=None, past_value=None,
              nonpad_kv_seqlen=None):
    """Attention: ``softmax(softcap(Q K^T * scale) + bias) V`` with multi-, grouped- and
    multi-query heads.

    Q [B, Hq, S, D] or [B, S, Hq * D] (``q_num_heads``); K, V [B, Hkv, L, D(v)] or 3-D
    (``kv_num_heads``). ``past_key`` / ``past_value`` are prepended to K / V (outputs
    present_key / present_value). The bias combines ``attn_mask`` (bool: False disallows;
    float: added; a last dim shorter than the total length is padded with disallowed
    positions), ``is_causal`` (query i sees key j iff j <= i + offset, offset the past length,
    or ``nonpad_kv_seqlen - S`` without past), ``nonpad_kv_seqlen`` (keys past it are padding)
    and, from opset 25, ``left_window_size`` / ``right_window_size``. ``scale`` defaults to
    1/sqrt(D); a fully masked query row gives zeros. Outputs: Y (3-D when Q is), present_key,
    present_value, qk_matmul_output (``qk_matmul_output_mode`` 0 raw scaled scores, 1 after
    softcap, 2 after the bias, 3 after softmax).
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    out_dtype = q.dtype
    three_d = q.ndim == 3
    qh = _heads(q, ctx.attr("q_num_heads", None), "Q")
    kh = _heads(k, ctx.attr("kv_num_heads", None), "K")
    vh = _heads(v, ctx.attr("kv_num_heads", None), "V")
    past_len = 0
    if past_key is not None:
        pk, pv = np.asarray(past_key), np.asarray(past_value)
        past_len = pk.shape[2]
        kh = np.concatenate([pk, kh], axis=2)
        vh = np.concatenate([pv, vh], axis=2)
    present_k, present_v = kh, vh
    b, n_q, s_q, d = qh.shape
    n_kv, total = kh.shape[1], kh.shape[2]
    if n_q % n_kv:
        raise EvaluationError(f"{n_q} query heads are not a multiple of {n_kv} key heads")
    work = np.float64
    kr = np.repeat(kh, n_q // n_kv, axis=1).astype(work)
    vr = np.repeat(vh, n_q // n_kv, axis=1).astype(work)
    scale = ctx.attr("scale", None)
    scale = 1 / math.sqrt(d) if scale is None else float(scale)
    root = math.sqrt(scale)
    scores = np.matmul(qh.astype(work) * root, np.swapaxes(kr * root, -1, -2))
    raw = scores
    softcap = float(ctx.attr("softcap") or 0.0)
    if softcap > 0:
        scores = softcap * np.tanh(scores / softcap)
    capped = scores
    allowed = np.ones((b, 1, s_q, total), dtype=bool)
    bias = np.zeros((1, 1, 1, 1))
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.shape[-1] < total:
            fill = False if m.dtype == np.bool_ else -np.inf
            pad = [(0, 0)] * (m.ndim - 1) + [(0, total - m.shape[-1])]
            m = np.pad(m, pad, constant_values=fill)
        if m.dtype == np.bool_:
            allowed = allowed & m
        else:
            bias = m.astype(work)
    j = np.arange(total)[None, None, None, :]
    i = np.arange(s_q)[None, None, :, None]
    if nonpad_kv_seqlen is not None:
        lens = np.asarray(nonpad_kv_seqlen).astype(np.int64).reshape(-1, 1, 1, 1)
        allowed = allowed & (j < lens)
        offset = lens - s_q if past_key is None else np.full((b, 1, 1, 1), past_len)
    else:
        offset = np.full((b, 1, 1, 1), past_len)
    if int(ctx.attr("is_causal")):
        allowed = allowed & (j <= i + offset)
    left = int(ctx.attr("left_window_size", -1))
    right = int(ctx.attr("right_window_size", -1))
    if left >= 0:
        allowed = allowed & (j >= i + offset - left)
    if right >= 0:
        allowed = allowed & (j <= i + offset + right)
    scores = np.where(allowed, scores + bias, -np.inf)
    biased = scores
    precision = ctx.attr("softmax_precision", None)
    sm_in = scores.astype(INFO[int(precision)].dtype).astype(work) if precision else scores
    probs = masked_softmax(sm_in)
    y = np.matmul(probs, vr)
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(b, s_q, -1)
    mode = int(ctx.attr("qk_matmul_output_mode"))
    qk_out = {0: raw, 1: capped, 2: biased, 3: probs}.get(mode)
    if qk_out is None:
        raise InvalidModelError(f"qk_matmul_output_mode {mode} is not 0, 1, 2 or 3")
    return (y.astype(out_dtype), present_k, present_v, qk_out.astype(out_dtype))


@kernel("RotaryEmbedding")
def rotary_embedding(ctx, x, cos_cache, sin_cache, position_ids=None):
    """RotaryEmbedding: rotate the first ``rotary_embedding_dim`` (default: all) features of
    every head by the angles whose cos / sin are given (indexed by ``position_ids`` when
    present), in halves or, with ``interleaved``, in even/odd pairs.

    X [B, H, S, D] or [B, S, H * D] (``num_heads``); caches [max_pos, R / 2] with position_ids
    [B, S], else [B, S, R / 2]. Output has X's shape and dtype.
    """
    x = np.asarray(x)
    shape = x.shape
    if x.ndim == 4:
        t = x.transpose(0, 2, 1, 3)
    elif x.ndim == 3:
        heads = int(ctx.attr("num_heads", 0) or 0)
        if not heads or shape[2] % heads:
            raise EvaluationError("RotaryEmbedding of a 3-D input needs num_heads dividing "
                                  "its last dim")
        t = x.reshape(shape[0], shape[1], heads, shape[2] // heads)
    else:
        raise EvaluationError(f"RotaryEmbedding input must be 3-D or 4-D, not {list(shape)}")
    d = t.shape[3]
    rot = int(ctx.attr("rotary_embedding_dim") or 0) or d
    if rot > d or rot % 2:
        raise EvaluationError(f"rotary_embedding_dim {rot} does not fit head size {d}")
    cos = np.asarray(cos_cache)
    sin = np.asarray(sin_cache)
    if position_ids is not None:
        pos = np.asarray(position_ids).astype(np.int64)
        if pos.size and (pos.min() < 0 or pos.max() >= cos.shape[0]):
            raise EvaluationError("RotaryEmbedding position_ids exceed the caches")
        cos, sin = cos[pos], sin[pos]
    half = rot // 2
    cos = cos[..., :half].astype(np.float64)[:, :, None, :]  # [B, S, 1, R/2]
    sin = sin[..., :half].astype(np.float64)[:, :, None, :]
    xr = t[..., :rot].astype(np.float64)
    out = rotate(xr, cos, sin, bool(int(ctx.attr("interleaved"))))
    res = np.concatenate([out.astype(x.dtype), t[..., rot:]], axis=-1)
    if x.ndim == 4:
        return res.transpose(0, 2, 1, 3)
    return res.reshape(shape)


@kernel("TensorScatter")
def tensor_scatter(ctx, past_cache, update, write_indices=None):
    """TensorScatter: a copy of ``past_cache`` with ``update`` written along ``axis`` (default
    -2, not the batch axis) from ``write_indices[b]`` (default 0) for each batch entry b;
    ``mode`` circular wraps the positions modulo the cache length, linear requires them to fit.
    """
    cache = np.asarray(past_cache)
    upd = np.asarray(update)
    axis = int(ctx.attr("axis"))
    if not -cache.ndim <= axis < cache.ndim or axis % cache.ndim == 0:
        raise EvaluationError(f"TensorScatter axis {axis} is not a non-batch axis of rank "
                              f"{cache.ndim}")
    axis %= cache.ndim
    if upd.ndim != cache.ndim or any(u != c for i, (u, c) in enumerate(zip(upd.shape,
                                                                         cache.shape))
                                     if i != axis):
        raise EvaluationError(f"TensorScatter update {list(upd.shape)} does not fit the "
                              f"cache {list(cache.shape)}")
    batch, length, seq = cache.shape[0], cache.shape[axis], upd.shape[axis]
    starts = np.zeros(batch, np.int64) if write_indices is None else \
        np.asarray(write_indices).astype(np.int64).reshape(-1)
    circular = ctx.attr("mode") == "circular"
    out = cache.copy()
    for b in range(batch):
        pos = starts[b] + np.arange(seq)
        if circular:
            pos = pos % length
        elif seq and (starts[b] < 0 or pos[-1] >= length):
            raise EvaluationError(f"TensorScatter writes positions {starts[b]}..{pos[-1]} of "
                                  f"a cache of {length}")
        target = np.moveaxis(out[b], axis - 1, 0)
        target[pos] = np.moveaxis(upd[b], axis - 1, 0)
    return out


@kernel("SwiGLU")
def swiglu(ctx, a, b):
    """SwiGLU: ``A * sigmoid(alpha * A) * B`` (A and B of one shape)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise EvaluationError(f"SwiGLU inputs have shapes {list(a.shape)} and {list(b.shape)}")
    alpha = float(ctx.attr("alpha"))
    af = a.astype(np.float64)
    e = np.exp(-np.abs(alpha * af))
    sig = np.where(alpha * af >= 0, 1 / (1 + e), e / (1 + e))
    return (af * sig * b.astype(np.float64)).astype(a.dtype)


@kernel("LinearAttention")
def linear_attention(ctx, query, key, value, past_state=None, decay=None, beta=None):
    """LinearAttention: the recurrence of ``update_rule`` run token by token.

    query [B, T, Hq * dk], key [B, T, Hkv * dk], value [B, T, Hkv * dv] (``q_num_heads``,
    ``kv_num_heads``); state S [B, Hkv, dk, dv] (``past_state``, default zeros). With
    g = ``decay`` (log space, per head or per key dimension) and b = ``beta``:
    linear ``S = S + k v^T``; gated ``S = e^g S + k v^T``; delta ``S = S + b k (v - S^T k)^T``;
    gated_delta ``S = e^g S + b k (v - e^g S^T k)^T``. Output ``scale * q^T S`` (scale 0:
    1/sqrt(dk)) as [B, T, Hq * dv], and the final state.
    """
    q, k, v = (np.asarray(t) for t in (query, key, value))
    hq, hkv = int(ctx.attrs["q_num_heads"]), int(ctx.attrs["kv_num_heads"])
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise EvaluationError(f"q_num_heads {hq} must be a positive multiple of "
                              f"kv_num_heads {hkv}")
    bsz, steps = q.shape[0], q.shape[1]
    dk, dv = q.shape[2] // hq, v.shape[2] // hkv
    if q.shape[2] != hq * dk or k.shape[2] != hkv * dk or v.shape[2] != hkv * dv:
        raise EvaluationError("LinearAttention head sizes do not divide the packed dims")
    rule = ctx.attr("update_rule")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise InvalidModelError(f"update_rule {rule!r} is not linear, gated, delta or "
                                "gated_delta")
    scale = float(ctx.attr("scale") or 0.0) or 1 / math.sqrt(dk)
    w = np.float64
    qh = q.reshape(bsz, steps, hq, dk).astype(w)
    kh = k.reshape(bsz, steps, hkv, dk).astype(w)
    vh = v.reshape(bsz, steps, hkv, dv).astype(w)
    state = np.zeros((bsz, hkv, dk, dv), w) if past_state is None else \
        np.asarray(past_state).astype(w).copy()
    gates = None
    if rule in ("gated", "gated_delta"):
        if decay is None:
            raise InvalidModelError(f"update_rule {rule} needs the decay input")
        g = np.asarray(decay).astype(w)
        gates = np.exp(g.reshape(bsz, steps, hkv, -1))  # [B, T, Hkv, 1 or dk]
    rates = None
    if rule in ("delta", "gated_delta"):
        if beta is None:
            raise InvalidModelError(f"update_rule {rule} needs the beta input")
        rates = np.broadcast_to(np.asarray(beta).astype(w).reshape(bsz, steps, -1),
                                (bsz, steps, hkv))
    group = hq // hkv
    out = np.empty((bsz, steps, hq, dv), w)
    for t in range(steps):
        kt, vt = kh[:, t], vh[:, t]  # [B, Hkv, dk], [B, Hkv, dv]
        if gates is not None:
            state = gates[:, t][..., None] * state  # per head or per key row
        if rates is None:
            state = state + kt[..., :, None] * vt[..., None, :]
        else:
            predicted = np.einsum("bhkv,bhk->bhv", state, kt)
            delta = rates[:, t][..., None] * (vt - predicted)
            state = state + kt[..., :, None] * delta[..., None, :]
        shared = np.repeat(state, group, axis=1)  # [B, Hq, dk, dv]
        out[:, t] = scale * np.einsum("bhk,bhkv->bhv", qh[:, t], shared)
    return out.reshape(bsz, steps, hq * dv).astype(q.dtype), state.astype(q.dtype)


@kernel("FlexAttention", domain="ai.onnx.preview")
def flex_attention(ctx, q, k, v):
    """FlexAttention (ai.onnx.preview): ``softmax(score_mod(Q K^T * scale)) -> prob_mod -> @ V``.

    Q [B, Hq, L, D], K [B, Hkv, S, D], V [B, Hkv, S, Dv] (K/V heads shared by contiguous
    groups of query heads). ``score_mod`` and ``prob_mod`` are optional one-input subgraphs
    applied to the [B, Hq, L, S] scores and probabilities, which are in ``softmax_precision``
    (float32, or float64 for double inputs). A row that is -inf everywhere gives NaN, as
    softmax does. Output [B, Hq, L, Dv] in Q's type.
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise EvaluationError("FlexAttention inputs must be rank 4")
    hq, hkv = q.shape[1], k.shape[1]
    if hq % hkv:
        raise EvaluationError(f"{hq} query heads are not a multiple of {hkv} key heads")
    precision = ctx.attr("softmax_precision", None)
    work = INFO[int(precision)].dtype if precision else \
        np.dtype(np.float64 if q.dtype == np.float64 else np.float32)
    scale = ctx.attr("scale", None)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    kr = np.repeat(k, hq // hkv, axis=1).astype(np.float64)
    vr = np.repeat(v, hq // hkv, axis=1).astype(np.float64)
    scores = (np.matmul(q.astype(np.float64), np.swapaxes(kr, -1, -2)) * scale).astype(work)
    score_mod = ctx.attr("score_mod", None)
    if score_mod is not None:
        (scores,) = ctx.run_graph(score_mod, [scores])
    s = np.asarray(scores).astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        probs = (e / e.sum(axis=-1, keepdims=True)).astype(work)
    prob_mod = ctx.attr("prob_mod", None)
    if prob_mod is not None:
        (probs,) = ctx.run_graph(prob_mod, [probs])
    return np.matmul(np.asarray(probs).astype(np.float64), vr).astype(q.dtype)
