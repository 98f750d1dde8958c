"""Inference rules of onnxruntime's com.microsoft attention operators (the kernels of
``onemodel/evaluate/kernels/ms_attention.py``, same keys and versions).

Shapes (onnxruntime's contrib operator definitions; Part 1, Clause 4.4 leaves operators of other
domains to their implementations):

* ``Attention``: input ``[B, S, In]``, weights ``[In, Hq + Hk + Hv]`` (``qkv_hidden_sizes``,
  default three equal parts); output ``[B, S, Hv]``; present ``[2, B, N, P + S, Hk / N]`` with
  past ``[2, B, N, P, Hk / N]`` (``P + S`` an expression when symbolic; ``S`` without past).
* ``MultiHeadAttention``: query ``[B, S, N * D]`` (or packed ``[B, S, N, 3, D]``), key and value
  ``[B, L, N * D(v)]`` or BNSH ``[B, N, L, D(v)]`` (or key packed ``[B, L, N, 2, D]``); output
  ``[B, S, N * Dv]``, present_key ``[B, N, P + L, D]``, present_value ``[B, N, P + L, Dv]``,
  qk ``[B, N, S, P + L]`` (past ``[B, N, P, D]`` joins only 3-D or packed keys).
* ``RotaryEmbedding``: the input's shape (3-D or 4-D); position_ids ``[B, S]`` unified with it.
* ``GroupQueryAttention``: query ``[B, S, N * D]`` (or packed ``[B, S, (N + 2 Nkv) * D]``), key
  and value ``[B, S, Nkv * D]``; output ``[B, S, N * D]``; present_key / present_value
  ``[B, Nkv, max(total_sequence_length, P), D]`` (the length known when total_sequence_length's
  value is, P the past's length).

Element types follow the input's (the com.microsoft constraint T binds every float input and
output). Contradictions (Clause 9.4): ranks other than those above, weights whose first extent
is not the input's last, a hidden size that the number of heads does not divide.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ._util import int_attr


def _rank(ctx, v, ranks, what):
    """v's shape when its rank is one of ``ranks``; None when unknown (a contradiction for
    another rank)."""
    s = v.shape if v is not None else None
    if s is None:
        return None
    if len(s) not in ranks:
        ctx.contradiction(f"{what} has rank {len(s)}; {' or '.join(map(str, ranks))} is needed")
        return None
    return list(s)


def _elem(v):
    """v's element type (None when v is absent or unknown): com.microsoft outputs take the
    input's type (constraint T)."""
    return v.elem if v is not None else None


def _div(ctx, extent, heads, what):
    """extent / heads (None when either is unknown; a contradiction when it does not divide)."""
    if extent is None or not heads:
        return None
    if type(extent) is int and extent % heads:
        ctx.contradiction(f"{what} {extent} is not a multiple of {heads} heads")
        return None
    return D.floordiv(extent, heads)


@rule("Attention", domain="com.microsoft")
def ms_attention(ctx, x, weights, bias=None, mask_index=None, past=None, attention_bias=None,
                 past_sequence_length=None):
    """Attention: output [B, S, Hv], present [2, B, N, P + S, Hk / N] (module doc)."""
    xs = _rank(ctx, x, (3,), "input")
    ws = _rank(ctx, weights, (2,), "weights")
    heads = int_attr(ctx, "num_heads", 0)
    if xs is not None and ws is not None:
        ctx.unify(xs[2], ws[0], "input and weights hidden sizes")
    sizes = ctx.attr("qkv_hidden_sizes")
    hk = hv = None
    if sizes is not None and len(sizes) == 3:
        hk, hv = int(sizes[1]), int(sizes[2])
    elif ws is not None and ws[1] is not None:
        if type(ws[1]) is int and ws[1] % 3:
            ctx.contradiction(f"weights extent {ws[1]} is not 3 equal parts")
        else:
            hk = hv = D.floordiv(ws[1], 3)
    b, s = (xs[0], xs[1]) if xs is not None else (None, None)
    head = _div(ctx, hk, heads, "K hidden size")
    _div(ctx, hv, heads, "V hidden size")
    total = s
    ps = _rank(ctx, past, (5,), "past")
    if past is not None:
        total = None
        if ps is not None:
            b = ctx.unify(b, ps[1], "batch sizes") if b is not None else ps[1]
            if ps[2] is not None and heads:
                ctx.unify(ps[2], heads, "past heads")
            if ps[4] is not None and head is not None:
                ctx.unify(ps[4], head, "past head sizes")
            if ps[3] is not None and s is not None:
                total = D.add(ps[3], s)
    elem = _elem(x)
    out = ctx.tensor([b, s, hv], elem=elem)
    present = ctx.tensor([2, b, heads or None, total, head], elem=elem)
    return out, present


def _kv_heads(ctx, v, heads, what):
    """(B, L, N, D) of a MultiHeadAttention key or value: 3-D [B, L, N * D] or 4-D
    [B, N, L, D]; None entries where unknown."""
    s = _rank(ctx, v, (3, 4), what)
    if s is None:
        return None, None, None, None
    if len(s) == 3:
        return s[0], s[1], heads or None, _div(ctx, s[2], heads, f"{what} hidden size")
    return s[0], s[2], s[1], s[3]


@rule("MultiHeadAttention", domain="com.microsoft")
def ms_multi_head_attention(ctx, query, key=None, value=None, bias=None, key_padding_mask=None,
                            attention_bias=None, past_key=None, past_value=None,
                            past_sequence_length=None, cache_indirection=None):
    """MultiHeadAttention: output [B, S, N * Dv], present_key [B, N, P + L, D], present_value
    [B, N, P + L, Dv], qk [B, N, S, P + L] (query [B, S, N * D] or packed [B, S, N, 3, D];
    key and value 3-D, 4-D BNSH, or key packed [B, L, N, 2, D]; past only with 3-D or packed
    keys)."""
    heads = int_attr(ctx, "num_heads", 0)
    qs = _rank(ctx, query, (3, 5), "query")
    elem = _elem(query)
    b = s = d = length = dv = None
    projected = True
    if qs is not None:
        b, s = qs[0], qs[1]
        if len(qs) == 5:
            d = dv = qs[4]
            length = s
        else:
            d = _div(ctx, qs[2], heads, "query hidden size")
    ks = key.shape if key is not None else None
    if ks is not None and len(ks) == 5:
        b = ctx.unify(b, ks[0], "batch sizes")
        length, dv = ks[1], ks[4]
        d = ctx.unify(d, ks[4], "query and key head sizes")
    elif key is not None:
        kb, length, _, kd = _kv_heads(ctx, key, heads, "key")
        projected = ks is None or len(ks) == 3
        b = ctx.unify(b, kb, "batch sizes")
        d = ctx.unify(d, kd, "query and key head sizes")
        if value is not None:
            vb, vl, _, dv = _kv_heads(ctx, value, heads, "value")
            b = ctx.unify(b, vb, "batch sizes")
            length = ctx.unify(length, vl, "key and value lengths")
    total = length
    if past_key is not None and projected:
        ps = _rank(ctx, past_key, (4,), "past_key")
        total = None
        if ps is not None:
            b = ctx.unify(b, ps[0], "batch sizes")
            d = ctx.unify(d, ps[3], "head sizes")
            if ps[2] is not None and length is not None:
                total = D.add(ps[2], length)
    hv = D.mul(heads, dv) if heads and dv is not None else None
    n = heads or None
    return (ctx.tensor([b, s, hv], elem=elem), ctx.tensor([b, n, total, d], elem=elem),
            ctx.tensor([b, n, total, dv], elem=elem), ctx.tensor([b, n, s, total], elem=elem))


@rule("RotaryEmbedding", domain="com.microsoft")
def ms_rotary_embedding(ctx, x, position_ids=None, cos_cache=None, sin_cache=None):
    """RotaryEmbedding: the input's shape; a [B, S] position_ids' extents unified with its
    batch and sequence extents; caches of rank 2."""
    xs = _rank(ctx, x, (3, 4), "input")
    for cache, what in ((cos_cache, "cos_cache"), (sin_cache, "sin_cache")):
        _rank(ctx, cache, (2,), what)
    if xs is None:
        return None
    ps = position_ids.shape if position_ids is not None else None
    if ps is not None and len(ps) == 2:
        seq = 1 if len(xs) == 3 else 2
        xs[0] = ctx.unify(xs[0], ps[0], "batch sizes")
        xs[seq] = ctx.unify(xs[seq], ps[1], "sequence lengths")
    return ctx.tensor(xs, elem=_elem(x))


@rule("GroupQueryAttention", domain="com.microsoft")
def ms_group_query_attention(ctx, query, key=None, value=None, past_key=None, past_value=None,
                             seqlens_k=None, total_sequence_length=None, cos_cache=None,
                             sin_cache=None, position_ids=None, attention_bias=None,
                             head_sink=None):
    """GroupQueryAttention: output [B, S, N * D], presents [B, Nkv, max(total, P), D]."""
    heads = int_attr(ctx, "num_heads", 0)
    kv_heads = int_attr(ctx, "kv_num_heads", 0)
    if heads and kv_heads and heads % kv_heads:
        ctx.contradiction(f"{heads} query heads are not a multiple of {kv_heads} key heads")
    qs = _rank(ctx, query, (3,), "query")
    b = s = d = None
    if qs is not None:
        b, s = qs[0], qs[1]
        if key is None:
            d = _div(ctx, qs[2], heads + 2 * kv_heads if heads and kv_heads else 0,
                     "packed query width")
        else:
            d = _div(ctx, qs[2], heads, "query hidden size")
    for x, what in ((key, "key"), (value, "value")):
        xs = _rank(ctx, x, (3,), what)
        if xs is not None:
            b = ctx.unify(b, xs[0], "batch sizes")
            s = ctx.unify(s, xs[1], "sequence lengths")
            d = ctx.unify(d, _div(ctx, xs[2], kv_heads, f"{what} hidden size"), "head sizes")
    past = None
    for x, what in ((past_key, "past_key"), (past_value, "past_value")):
        ps = _rank(ctx, x, (4,), what)
        if ps is not None:
            b = ctx.unify(b, ps[0], "batch sizes")
            d = ctx.unify(d, ps[3], "head sizes")
            past = ps[2] if past is None else ctx.unify(past, ps[2], "past lengths")
    total = None
    if total_sequence_length is not None:
        got = ctx.ints(6)
        if got is not None and len(got) == 1:
            total = got[0]
    present = total
    if past_key is not None:
        present = D.dmax(total, past) if total is not None and past is not None else None
    elem = _elem(query)
    n_kv = kv_heads or None
    return (ctx.tensor([b, s, D.mul(heads, d) if heads and d is not None else None],
                       elem=elem),
            ctx.tensor([b, n_kv, present, d], elem=elem),
            ctx.tensor([b, n_kv, present, d], elem=elem))
