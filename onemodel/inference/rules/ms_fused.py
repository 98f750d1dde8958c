"""Inference rules of the com.microsoft operators of ``onemodel/evaluate/kernels/ms_fused.py``
(same keys and versions): the fused activations, normalizations, matrix products and
convolutions.

Shapes (onnxruntime's contrib operator definitions; ONNX Part 1, Clause 14.3 for the keys):

* ``Gelu``, ``FastGelu``, ``BiasGelu``, ``QuickGelu``, ``Trilu`` (rank at least 2): X's
  shape; ``BiasAdd``: X's shape unified with skip's, ``[N, S, C]``.
* ``SkipLayerNormalization``, ``SkipSimplifiedLayerNormalization``: output and
  input_skip_bias_sum of input's shape (rank 2 or 3), mean and inv_std_var that shape with 1
  for the last extent, float.
* ``SimplifiedLayerNormalization``: Y of X's shape in scale's element type, inv_std_var of X's
  extents before ``axis`` and 1 from it on, of the ``stash_type`` (float or double).
* ``EmbedLayerNormalization``: output and embedding_sum ``[B, S, H]`` (input_ids ``[B, S]``,
  H word_embedding's second extent) in the embeddings' type, mask_index ``[B]`` int32.
* ``FusedMatMul``: numpy.matmul's shape of the operands as transBatch and trans read them.
* ``FusedConv``: Conv's shape; ``NhwcConv``: Conv's shape with channels last.

Element types are given by the rules (these operators have no ONNX definition whose type
constraints could bind them). Contradictions (Clause 9.4): ranks other than those above, an
axis out of range, unequal inner extents or channels.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D
from ..value import Value
from .conv import conv_shape
from .linalg import matmul_shape

MS = "com.microsoft"
_FLOAT, _DOUBLE, _INT32 = 1, 11, 6


def _shape(v):
    return None if v is None or v.shape is None else list(v.shape)


def _same(ctx, x, *_):
    """X's shape and element type."""
    return Value.tensor(x.elem, _shape(x))


for _name in ("Gelu", "FastGelu", "BiasGelu", "QuickGelu"):
    rule(_name, domain=MS)(_same)


@rule("BiasAdd", domain=MS)
def bias_add(ctx, x, bias, skip):
    """BiasAdd: ``[N, S, C]``, X's and skip's shapes unified, bias ``[C]``."""
    xs, ss = _shape(x), _shape(skip)
    for s, what in ((xs, "X"), (ss, "skip")):
        if s is not None and len(s) != 3:
            ctx.contradiction(f"{what} has shape {D.shape_text(s)}; rank 3 is needed")
            return Value.tensor(x.elem, None)
    if xs is None:
        xs = ss
    elif ss is not None:
        xs = [ctx.unify(a, b, "X and skip extents") for a, b in zip(xs, ss)]
    if xs is not None and bias is not None and bias.shape is not None and len(bias.shape) == 1:
        xs[2] = ctx.unify(xs[2], bias.shape[0], "channels and bias extent")
    return Value.tensor(x.elem, xs)


def _skip(ctx, x):
    s = _shape(x)
    if s is not None and len(s) not in (2, 3):
        ctx.contradiction(f"input has shape {D.shape_text(s)}; rank 2 or 3 is needed")
        s = None
    stat = None if s is None else s[:-1] + [1]
    return (Value.tensor(x.elem, s), Value.tensor(_FLOAT, stat), Value.tensor(_FLOAT, stat),
            Value.tensor(x.elem, s))


@rule("SkipLayerNormalization", domain=MS)
def skip_layer_normalization(ctx, x, skip, gamma, beta=None, bias=None):
    """SkipLayerNormalization: ``(output, mean, inv_std_var, input_skip_bias_sum)``."""
    return _skip(ctx, x)


@rule("SkipSimplifiedLayerNormalization", domain=MS)
def skip_simplified_layer_normalization(ctx, x, skip, gamma, bias=None):
    """SkipSimplifiedLayerNormalization: as SkipLayerNormalization."""
    return _skip(ctx, x)


@rule("SimplifiedLayerNormalization")
def simplified_layer_normalization(ctx, x, scale):
    """SimplifiedLayerNormalization: ``(Y, inv_std_var)`` (module doc)."""
    st = ctx.attr("stash_type", 1)
    elem = st if st in (_FLOAT, _DOUBLE) else None
    s = _shape(x)
    if s is None:
        return Value.tensor(scale.elem, None), Value.tensor(elem, None)
    axis = ctx.axis(ctx.attr("axis", -1), len(s))
    if axis is None:
        return Value.tensor(scale.elem, s), Value.tensor(elem, None)
    return Value.tensor(scale.elem, s), Value.tensor(elem, s[:axis] + [1] * (len(s) - axis))


@rule("EmbedLayerNormalization", domain=MS)
def embed_layer_normalization(ctx, input_ids, segment_ids, word, position, segment, gamma,
                              beta, mask=None, position_ids=None):
    """EmbedLayerNormalization: ``(output, mask_index, embedding_sum)`` (module doc)."""
    ids = _shape(input_ids)
    if ids is not None and len(ids) != 2:
        ctx.contradiction(f"input_ids has shape {D.shape_text(ids)}; rank 2 is needed")
        ids = None
    for v, what in ((segment_ids, "segment_ids"), (mask, "mask")):
        vs = _shape(v)
        if ids is not None and vs is not None:
            if len(vs) != 2:
                ctx.contradiction(f"{what} has shape {D.shape_text(vs)}; rank 2 is needed")
            else:
                ids = [ctx.unify(a, b, f"input_ids and {what} extents") for a, b in zip(ids, vs)]
    ws = _shape(word)
    h = None
    if ws is not None:
        if len(ws) != 2:
            ctx.contradiction(f"word_embedding has shape {D.shape_text(ws)}; rank 2 is needed")
        else:
            h = ws[1]
    out = None if ids is None else ids + [h]
    return (Value.tensor(word.elem, out), Value.tensor(_INT32, None if ids is None else ids[:1]),
            Value.tensor(word.elem, out))


def _fused_read(s, batch: bool, trans: bool):
    """The shape FusedMatMul reads an operand of shape ``s`` as (None when unknown)."""
    if s is None:
        return None
    s = list(s)
    if batch and len(s) >= 3:
        s = s[1:-1] + [s[0], s[-1]]
    if trans and len(s) >= 2:
        s[-2], s[-1] = s[-1], s[-2]
    return s


@rule("FusedMatMul", domain=MS)
def fused_matmul(ctx, a, b):
    """FusedMatMul: numpy.matmul's shape of the operands as read (module doc)."""
    ba, bb = bool(ctx.attr("transBatchA", 0)), bool(ctx.attr("transBatchB", 0))
    sa, sb = _shape(a), _shape(b)
    if (ba or bb) and sa is not None and sb is not None and (len(sa) < 3 or len(sa) != len(sb)):
        ctx.contradiction("transBatchA or transBatchB needs operands of one rank of at least 3")
        return Value.tensor(a.elem, None)
    ra = Value.tensor(a.elem, _fused_read(sa, ba, bool(ctx.attr("transA", 0))))
    rb = Value.tensor(b.elem, _fused_read(sb, bb, bool(ctx.attr("transB", 0))))
    return Value.tensor(a.elem, matmul_shape(ctx, ra, rb))


@rule("FusedConv", domain=MS)
def fused_conv(ctx, x, w, b=None, z=None):
    """FusedConv: Conv's shape, in X's element type; Z of that shape."""
    out = conv_shape(ctx, x, w, b)
    zs = _shape(z)
    if out is not None and zs is not None:
        if len(zs) != len(out):
            ctx.contradiction(f"Z has shape {D.shape_text(zs)}; the output's rank is needed")
        else:
            out = [ctx.unify(o, e, "output and Z extents") for o, e in zip(out, zs)]
    return Value.tensor(x.elem, out)


def _channels_first(v):
    s = _shape(v)
    return Value.tensor(v.elem, None if s is None or len(s) < 2 else [s[0], s[-1]] + s[1:-1])


@rule("NhwcConv", domain=MS)
def nhwc_conv(ctx, x, w, b=None):
    """NhwcConv: Conv's shape of the channels-first operands, with channels last."""
    out = conv_shape(ctx, _channels_first(x), _channels_first(w), b)
    return Value.tensor(x.elem, None if out is None else [out[0]] + out[2:] + [out[1]])


@rule("Trilu", domain=MS)
def trilu(ctx, x, k=None):
    """Trilu: the input's shape (rank at least 2)."""
    if x.rank is not None and x.rank < 2:
        ctx.contradiction(f"Trilu input has rank {x.rank}, below 2")
        return Value.tensor(x.elem, None)
    return Value.tensor(x.elem, _shape(x))
