"""Inference rules of the com.microsoft operators of
``onemodel/evaluate/kernels/ms_transformers.py`` (same keys and versions): QAttention,
QEmbedLayerNormalization, FusedGemm.

Shapes (onnxruntime's contrib operator definitions; ONNX Part 1, Clause 14.3 for the keys):

* ``QAttention``: input ``[B, S, D]``, weight ``[D, 3H]``, bias ``[3H]``; output ``[B, S, H]``
  in the bias's element type, present ``[2, B, N, P + S, H / N]`` (``N = num_heads``, P the
  past's fourth extent, 0 without a past).
* ``QEmbedLayerNormalization``: input_ids ``[B, S]``, word embedding ``[V, H]``; output
  ``[B, S, H]`` in the word scale's element type (float), mask index ``[B]`` int32.
* ``FusedGemm``: ``[M, N]`` as Gemm, in A's element type.

Element types are given by the rules (these operators have no ONNX definition whose type
constraints could bind them). Contradictions (Clause 9.4): ranks other than those above,
unequal inner extents, a 3H not divisible by 3 or H by the number of heads.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ..value import Value

MS = "com.microsoft"
INT32 = 6


def _rank(ctx, v, rank: int, what: str):
    """v's shape when of ``rank``; None when unknown (a contradiction for another rank)."""
    s = v.shape if v is not None else None
    if s is None:
        return None
    if len(s) != rank:
        ctx.contradiction(f"{what} has shape {D.shape_text(s)}; rank {rank} is needed")
        return None
    return list(s)


@rule("QAttention", domain=MS)
def q_attention(ctx, x=None, weight=None, bias=None, input_scale=None, weight_scale=None,
                mask_index=None, input_zero_point=None, weight_zero_point=None, past=None):
    """QAttention: ``([B, S, H], [2, B, N, P + S, H / N])`` (module doc)."""
    xs = _rank(ctx, x, 3, "input")
    ws = _rank(ctx, weight, 2, "weight")
    bs = _rank(ctx, bias, 1, "bias")
    b = s = h3 = None
    if xs is not None:
        b, s = xs[0], xs[1]
    if ws is not None:
        if xs is not None:
            ctx.unify(xs[2], ws[0], "input and weight inner extents")
        h3 = ws[1]
    if bs is not None:
        h3 = ctx.unify(h3, bs[0], "weight and bias extents") if h3 is not None else bs[0]
    heads = ctx.attr("num_heads", None)
    h = hd = None
    if type(h3) is int:
        if h3 % 3:
            ctx.contradiction(f"the projection extent {h3} is not a multiple of 3")
        else:
            h = h3 // 3
            if type(heads) is int and heads > 0:
                if h % heads:
                    ctx.contradiction(f"hidden size {h} is not a multiple of {heads} heads")
                else:
                    hd = h // heads
    elif h3 is not None:
        h = D.floordiv(h3, 3)
    total = s
    ps = _rank(ctx, past, 5, "past") if past is not None else None
    if ps is not None:
        total = D.add(ps[3], s) if s is not None and ps[3] is not None else None
    elem = bias.elem if bias is not None else None
    n = heads if type(heads) is int and heads > 0 else None
    return (Value.tensor(elem, [b, s, h]),
            Value.tensor(elem, [2, b, n, total, hd]))


@rule("QEmbedLayerNormalization", domain=MS)
def q_embed_layer_normalization(ctx, input_ids=None, segment_ids=None, word=None, *rest):
    """QEmbedLayerNormalization: ``([B, S, H], [B])`` (module doc)."""
    ids = _rank(ctx, input_ids, 2, "input_ids")
    ws = _rank(ctx, word, 2, "word embedding") if word is not None else None
    b = s = h = None
    if ids is not None:
        b, s = ids
    if ws is not None:
        h = ws[1]
    scale = rest[5] if len(rest) > 5 else None  # word_embedding_scale (input 8)
    elem = scale.elem if scale is not None else None
    return Value.tensor(elem, [b, s, h]), Value.tensor(INT32, [b])


@rule("FusedGemm", domain=MS)
def fused_gemm(ctx, a=None, b=None, c=None):
    """FusedGemm: ``[M, N]`` (module doc)."""
    sa = _rank(ctx, a, 2, "A")
    sb = _rank(ctx, b, 2, "B")
    m = k1 = k2 = n = None
    if sa is not None:
        m, k1 = (sa[1], sa[0]) if ctx.attr("transA", 0) else (sa[0], sa[1])
    if sb is not None:
        k2, n = (sb[1], sb[0]) if ctx.attr("transB", 0) else (sb[0], sb[1])
    if k1 is not None and k2 is not None:
        ctx.unify(k1, k2, "inner extents")
    if c is not None and c.shape is not None:
        if len(c.shape) > 2:
            ctx.contradiction(f"C has shape {D.shape_text(c.shape)}; at most rank 2 is needed")
        else:
            full = [m, n]
            for i, e in enumerate(c.shape):
                j = 2 - len(c.shape) + i
                if type(e) is int and e != 1:
                    full[j] = ctx.unify(full[j], e, "C and output extents")
            m, n = full
    return Value.tensor(a.elem if a is not None else None, [m, n])
