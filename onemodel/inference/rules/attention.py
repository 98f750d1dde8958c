"""Inference rules of the attention operators (the kernels of
``onemodel/evaluate/kernels/attention.py``, same keys and versions): Attention,
RotaryEmbedding, TensorScatter, SwiGLU, LinearAttention, FlexAttention (ai.onnx.preview).

Shapes (ONNX Part 1, operator definitions of Clause 14.3):

* ``Attention`` (opsets 23-25): Q ``[B, Hq, S, D]`` or 3-D ``[B, S, Hq * D]`` (``q_num_heads``),
  K ``[B, Hkv, L, D]`` / ``[B, L, Hkv * D]``, V ``[B, Hkv, L, Dv]`` / ``[B, L, Hkv * Dv]``
  (``kv_num_heads``); past_key / past_value ``[B, Hkv, P, D(v)]``. Outputs: Y ``[B, Hq, S, Dv]``
  (``[B, S, Hq * Dv]`` when Q is 3-D), present_key ``[B, Hkv, P + L, D]``, present_value
  ``[B, Hkv, P + L, Dv]`` (the sum an expression when symbolic; ``L`` without a past), and
  qk_matmul_output ``[B, Hq, S, P + L]``. Batch and head extents are unified; Hq must be a
  multiple of Hkv; attn_mask broadcasts to the scores (its last axis at most P + L, padded).
* ``RotaryEmbedding``: X's shape (3-D or 4-D). ``TensorScatter``: past_cache's shape (update of
  the same rank, equal off the ``axis``). ``SwiGLU``: A's shape, B's equal to it.
* ``LinearAttention``: output ``[B, T, Hq * dv]`` and state ``[B, Hkv, dk, dv]`` (in the
  query's element type, also when no past_state binds its constraint), with
  ``dk = query[2] / Hq``, ``dv = value[2] / Hkv``.
* ``FlexAttention``: ``[B, Hq, L, Dv]`` in Q's type; the ``score_mod`` and ``prob_mod``
  subgraphs are inferred on the ``[B, Hq, L, S]`` scores in the softmax precision
  (``softmax_precision``, else float, double for double Q) and must keep their rank.

Contradictions (Clause 9.4): ranks other than those above, a packed extent that the number of
heads does not divide, query heads not a multiple of key heads, unequal batch or head sizes.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ..value import Value
from ._util import int_attr


def _split_heads(ctx, v, heads, what):
    """[B, H, L, D] of a 4-D input or of a 3-D ``[B, L, H * D]`` with ``heads``; None for an
    unknown rank (a contradiction for another rank or a packed extent heads do not divide)."""
    s = v.shape if v is not None else None
    if s is None:
        return None
    if len(s) == 4:
        return list(s)
    if len(s) != 3:
        ctx.contradiction(f"{what} has rank {len(s)}; 3 or 4 is needed")
        return None
    if not heads or heads <= 0:
        ctx.contradiction(f"{what} is 3-D and the number of heads is not given")
        return None
    last = s[2]
    if type(last) is int and last % heads:
        ctx.contradiction(f"{what} extent {last} is not a multiple of {heads} heads")
        return None
    return [s[0], heads, s[1], D.floordiv(last, heads) if last is not None else None]


def _unify(ctx, a, b, what):
    return ctx.unify(a, b, what) if a is not None or b is not None else None


def _head_ratio(ctx, hq, hkv):
    if type(hq) is int and type(hkv) is int and hkv > 0 and hq % hkv:
        ctx.contradiction(f"{hq} query heads are not a multiple of {hkv} key heads")


def _attend(ctx, qh, kh, vh):
    """(B, Hq, S, D, Hkv, L, Dv) of Q [B, Hq, S, D], K [B, Hkv, L, D], V [B, Hkv, L, Dv] (each
    a list or None), equal extents unified, Hq a multiple of Hkv."""
    b = qh[0] if qh else None
    for x in (kh, vh):
        if x is not None:
            b = _unify(ctx, b, x[0], "batch sizes")
    hkv = kh[1] if kh else None
    if vh is not None:
        hkv = _unify(ctx, hkv, vh[1], "key and value heads")
    length = kh[2] if kh else None
    if vh is not None:
        length = _unify(ctx, length, vh[2], "key and value lengths")
    d = qh[3] if qh else None
    if kh is not None:
        d = _unify(ctx, d, kh[3], "query and key head sizes")
    hq = qh[1] if qh else None
    _head_ratio(ctx, hq, hkv)
    return b, hq, qh[2] if qh else None, d, hkv, length, vh[3] if vh else None


@rule("Attention")
def attention(ctx, q, k, v, attn_mask=None, past_key=None, past_value=None,
              nonpad_kv_seqlen=None):
    """Attention: Y, present_key, present_value, qk_matmul_output (module doc)."""
    qh = _split_heads(ctx, q, int_attr(ctx, "q_num_heads", 0), "Q")
    kv_heads = int_attr(ctx, "kv_num_heads", 0)
    kh = _split_heads(ctx, k, kv_heads, "K")
    vh = _split_heads(ctx, v, kv_heads, "V")
    b, hq, s, d, hkv, length, dv = _attend(ctx, qh, kh, vh)
    total = length
    for past, dd in ((past_key, d), (past_value, dv)):
        ps = past.shape if past is not None else None
        if ps is None:
            if past is not None:
                total = None
            continue
        if len(ps) != 4:
            ctx.contradiction(f"a past cache has rank {len(ps)}; 4 is needed")
            total = None
            continue
        b = _unify(ctx, b, ps[0], "batch sizes")
        hkv = _unify(ctx, hkv, ps[1], "key heads")
        _unify(ctx, dd, ps[3], "head sizes")
    if past_key is not None:
        pk = past_key.shape
        p = pk[2] if pk is not None and len(pk) == 4 else None
        total = D.add(p, length) if p is not None and length is not None else None
    ms = attn_mask.shape if attn_mask is not None else None
    if ms:
        # the mask broadcasts to the [B, Hq, S, P + L] scores, its last axis padded to P + L
        if len(ms) > 4:
            ctx.contradiction(f"attn_mask has rank {len(ms)}; at most 4 is allowed")
        elif type(ms[-1]) is int and type(total) is int and ms[-1] > total:
            ctx.contradiction(f"attn_mask's last extent {ms[-1]} exceeds the {total} keys")
        else:
            ctx.broadcast(list(ms[:-1]) + [total], [b, hq, s, total], what="attn_mask and the "
                          "scores")
    if q.shape is not None and len(q.shape) == 3:
        y = [b, s, D.mul(hq, dv) if hq is not None and dv is not None else None]
    elif q.shape is not None and len(q.shape) == 4:
        y = [b, hq, s, dv]
    else:
        y = None
    return (y, [b, hkv, total, d], [b, hkv, total, dv], [b, hq, s, total])


@rule("RotaryEmbedding")
def rotary_embedding(ctx, x, cos_cache, sin_cache, position_ids=None):
    """RotaryEmbedding: X's shape (3-D with ``num_heads``, or 4-D); its batch and sequence
    extents unified with position_ids [B, S], or without them with the caches [B, S, R / 2],
    R the ``rotary_embedding_dim`` (default the head size)."""
    if x.shape is None:
        return None
    out = list(x.shape)
    if len(out) == 3:
        heads = _split_heads(ctx, x, int_attr(ctx, "num_heads", 0), "X")
        seq_axis = 1
    elif len(out) == 4:
        heads, seq_axis = out, 2
    else:
        ctx.contradiction(f"X has rank {len(out)}; 3 or 4 is needed")
        return out
    rot = int_attr(ctx, "rotary_embedding_dim", 0) or (heads[3] if heads else None)
    half = D.floordiv(rot, 2) if rot is not None else None
    pos = position_ids.shape if position_ids is not None else None
    if pos is not None and len(pos) == 2:
        out[0] = _unify(ctx, out[0], pos[0], "batch sizes")
        out[seq_axis] = _unify(ctx, out[seq_axis], pos[1], "sequence lengths")
    for cache in (cos_cache, sin_cache):
        cs = cache.shape if cache is not None else None
        if cs is None:
            continue
        if len(cs) != (2 if position_ids is not None else 3):
            ctx.contradiction(f"a cache has rank {len(cs)}; "
                              f"{2 if position_ids is not None else 3} is needed")
            continue
        if position_ids is None:
            out[0] = _unify(ctx, out[0], cs[0], "batch sizes")
            out[seq_axis] = _unify(ctx, out[seq_axis], cs[1], "sequence lengths")
        if half is not None and cs[-1] is not None:
            _unify(ctx, half, cs[-1], "rotary half size and cache extents")
    return out


@rule("TensorScatter")
def tensor_scatter(ctx, past_cache, update, write_indices=None):
    """TensorScatter: past_cache's shape; update equal to it off ``axis`` (not the batch)."""
    cs = past_cache.shape
    if cs is None:
        return None
    axis = ctx.axis(int_attr(ctx, "axis", -2), len(cs))
    if axis == 0:
        ctx.contradiction("axis 0 is the batch axis")
    out = list(cs)
    us = update.shape if update is not None else None
    if axis is not None and us is not None:
        if len(us) != len(cs):
            ctx.contradiction(f"update has rank {len(us)}, the cache {len(cs)}")
        else:
            for i, (u, c) in enumerate(zip(us, cs)):
                if i != axis:
                    out[i] = _unify(ctx, c, u, f"cache and update extents at axis {i}")
    return out


@rule("SwiGLU")
def swiglu(ctx, a, b):
    """SwiGLU: A's shape; B's must equal it."""
    if a.shape is None or b is None or b.shape is None:
        sh = a.shape if a.shape is not None else (b.shape if b is not None else None)
        return None if sh is None else list(sh)
    if len(a.shape) != len(b.shape):
        ctx.contradiction(f"A has rank {len(a.shape)}, B {len(b.shape)}")
        return list(a.shape)
    return [_unify(ctx, x, y, "A and B extents") for x, y in zip(a.shape, b.shape)]


def _packed(ctx, v, heads, what):
    """(B, T, per-head extent) of ``[B, T, heads * d]``."""
    s = v.shape if v is not None else None
    if s is None:
        return None, None, None
    if len(s) != 3:
        ctx.contradiction(f"{what} has rank {len(s)}; 3 is needed")
        return None, None, None
    last = s[2]
    if not heads or heads <= 0:
        return s[0], s[1], None
    if type(last) is int and last % heads:
        ctx.contradiction(f"{what} extent {last} is not a multiple of {heads} heads")
        return s[0], s[1], None
    return s[0], s[1], D.floordiv(last, heads) if last is not None else None


@rule("LinearAttention")
def linear_attention(ctx, query, key, value, past_state=None, decay=None, beta=None):
    """LinearAttention: output [B, T, Hq * dv], state [B, Hkv, dk, dv] (module doc)."""
    hq = int_attr(ctx, "q_num_heads", 0) or None
    hkv = int_attr(ctx, "kv_num_heads", 0) or None
    if hq is not None and hkv is not None:
        _head_ratio(ctx, hq, hkv)
    b, t, dk = _packed(ctx, query, hq, "query")
    b2, t2, dk2 = _packed(ctx, key, hkv, "key")
    b3, t3, dv = _packed(ctx, value, hkv, "value")
    for x in (b2, b3):
        b = _unify(ctx, b, x, "batch sizes")
    for x in (t2, t3):
        t = _unify(ctx, t, x, "sequence lengths")
    dk = _unify(ctx, dk, dk2, "query and key head sizes")
    ps = past_state.shape if past_state is not None else None
    if ps is not None and len(ps) == 4:
        b = _unify(ctx, b, ps[0], "batch sizes")
        if hkv is not None:
            _unify(ctx, hkv, ps[1], "key heads")
        dk = _unify(ctx, dk, ps[2], "key head sizes")
        dv = _unify(ctx, dv, ps[3], "value head sizes")
    out = [b, t, D.mul(hq, dv) if hq is not None and dv is not None else None]
    # the state is in the query's type (the kernel's cast), also when no past_state binds S
    return out, ctx.tensor([b, hkv, dk, dv], elem=query.elem or ctx.elem(1), i=1)


@rule("FlexAttention", domain="ai.onnx.preview")
def flex_attention(ctx, q, k, v):
    """FlexAttention: [B, Hq, L, Dv] (module doc)."""
    shapes = []
    for x, what in ((q, "Q"), (k, "K"), (v, "V")):
        s = x.shape if x is not None else None
        if s is not None and len(s) != 4:
            ctx.contradiction(f"{what} has rank {len(s)}; 4 is needed")
            s = None
        shapes.append(s)
    qs, ks, vs = shapes
    b, hq, length, _, _, kv_len, dv = _attend(ctx, qs, ks, vs)
    if ctx.has_attr("score_mod") or ctx.has_attr("prob_mod"):
        # the modifiers take and give the [B, Hq, L, S] scores in the softmax precision
        work = int_attr(ctx, "softmax_precision", 0) or (11 if q.elem == 11 else 1)
        scores = Value.tensor(work, [b, hq, length, kv_len])
        for name in ("score_mod", "prob_mod"):
            outs = ctx.infer_graph(name, [scores])
            got = outs[0] if outs else None
            if got is not None and got.rank is not None and got.rank != 4:
                ctx.contradiction(f"{name} gives rank {got.rank}; the scores have rank 4")
    if qs is None and vs is None:
        return None
    return [b, hq, length, dv]
