"""Kernels of the fused activations, normalizations, convolutions and matrix products of
onnxruntime's com.microsoft domain (com.microsoft, opset 1).

These operators are not in the ONNX standard (ONNX Part 1, Clause 4.4: a domain other than
ai.onnx is an operator set its producer defines); their definitions are onnxruntime's contrib
operator schemas, and where a schema leaves the computation open its CPU kernels (onnxruntime
1.32) are the reference. Each one is a composition of standard operators, computed by calling
the default-domain kernels of this package (Gelu, LayerNormalization, RMSNormalization,
MatMul, Conv, the activations, Trilu) through :func:`_standard`:

* ``Gelu`` (erf), ``FastGelu`` (tanh approximation, optional ``bias`` added first),
  ``BiasGelu`` (``Gelu(A + B)``), ``QuickGelu`` (``x * Sigmoid(alpha * x)``, alpha 1.702),
  ``BiasAdd`` (``X + bias + skip``).
* ``SkipLayerNormalization``: ``s = input + skip (+ bias)``, then LayerNormalization of ``s``
  over the last axis with ``gamma`` (and ``beta``); outputs ``output``, ``mean``,
  ``inv_std_var`` (float, ``[..., 1]``) and ``input_skip_bias_sum`` (``s``). Input rank 2 or 3;
  skip of input's shape or broadcast over the batch (``[1, S, H]``, ``[S, H]``).
* ``SkipSimplifiedLayerNormalization``: the same with RMSNormalization (no ``beta``; ``mean``
  is zeros, as onnxruntime writes it: the normalization has no centering term).
* ``SimplifiedLayerNormalization`` (``axis`` -1, ``epsilon`` 1e-5, ``stash_type`` 1):
  RMSNormalization; ``Y`` in scale's element type, ``inv_std_var`` of the stash type.
  onnxruntime registers this schema in the default domain; it is served here in
  com.microsoft, where the transformer tools' models also name it.
* ``EmbedLayerNormalization``: ``word_embedding[input_ids] + position_embedding[p] (+
  segment_embedding[segment_ids])`` with ``p`` the position along the sequence (or
  ``position_ids``, ``[B, S]`` or ``[1, S]``), LayerNormalization over the hidden axis; outputs
  ``output [B, S, H]``, ``mask_index [B]`` int32 (the number of mask elements equal to 1 per
  batch row, zeros without a mask) and ``embedding_sum`` (the sum before normalization).
  An index outside its table is an EvaluationError, as in onnxruntime.
* ``FusedMatMul``: ``alpha * MatMul(A', B')`` where ``transBatchA`` moves A's axis 0 to
  position ``rank - 2`` (``[M, b1.., K]`` read as ``[b1.., M, K]``) and ``transA`` then swaps
  the last two axes; the same for B. transBatchA or transBatchB needs A and B of one rank of at
  least 3 (as onnxruntime requires).
* ``FusedConv``: ``activation(Conv(X, W, B) + Z)``; activations Relu, Tanh, Sigmoid, Silu,
  HardSwish, LeakyRelu (``activation_params`` [alpha]), Clip ([min, max]), HardSigmoid ([alpha,
  beta]); Z of the output's shape. Another activation is an UnsupportedError.
* ``NhwcConv``: Conv with channels last: X ``[N, D1.., C]``, W ``[M, k1.., C / group]``, Y
  ``[N, O1.., M]`` (the layout onnxruntime's NhwcConv fusion writes its weights in).
* ``Trilu``: the default-domain Trilu.

Precision: float32 inputs are computed in float32 (onnxruntime's CPU kernels do the same;
SkipLayerNormalization's statistics, which onnxruntime accumulates with Welford's method,
differ from ours by float32 rounding only), float64 in float64, float16 and bfloat16 in float32
with each output rounded once. Errors: EvaluationError for inputs whose shapes the definition
does not admit, UnsupportedError for attribute values it does not define.
"""

from __future__ import annotations

import numpy as np

from ...errors import EvaluationError, UnsupportedError
from ...operators import kernel
from ..context import definition_default
from ..registry import lookup
from ._util import back, wide, wide_all

MS = "com.microsoft"

_UNSET = object()

#: The default-domain definitions the kernels below compute with: op_type -> opset version.
_VERSION = {"Gelu": 20, "LayerNormalization": 17, "RMSNormalization": 23, "MatMul": 13,
            "Conv": 22, "Relu": 14, "Tanh": 13, "Sigmoid": 13, "LeakyRelu": 16, "Clip": 13,
            "HardSigmoid": 22, "HardSwish": 22, "Swish": 24, "Trilu": 14}


class _Standard:
    """The context a default-domain kernel is called with from a com.microsoft kernel:
    ``attrs`` as given, every other attribute the default of the standard definition
    (``op_type`` at ``opset``); the node, path and outputs those of the com.microsoft node."""

    __slots__ = ("node", "opset", "attrs", "num_outputs", "path", "_op", "_outer")

    def __init__(self, outer, op_type: str, attrs: dict, num_outputs: int = 1):
        self._outer = outer
        self._op = op_type
        self.node = outer.node
        self.opset = _VERSION[op_type]
        self.attrs = attrs
        self.num_outputs = num_outputs
        self.path = outer.path

    def attr(self, name: str, default=_UNSET):
        if name in self.attrs:
            return self.attrs[name]
        if default is _UNSET:
            return definition_default("", self._op, self.opset, name)
        return default

    def attr_bytes(self, name: str, default: bytes | None = None) -> bytes | None:
        return default

    def output_used(self, index: int) -> bool:
        return index < self.num_outputs


def _standard(ctx, op_type: str, *inputs, num_outputs: int = 1, **attrs):
    """The default-domain kernel of ``op_type`` (at the version of :data:`_VERSION`) applied to
    ``inputs`` with attributes ``attrs``: its return value as the kernel gives it."""
    fn = lookup("", op_type, _VERSION[op_type], user=False)
    return fn(_Standard(ctx, op_type, attrs, num_outputs), *inputs)


def _first(result):
    return result[0] if isinstance(result, tuple) else result


def _hidden(v, h: int, what: str, op_type: str):
    """Check that ``v`` (or None) is a 1-D tensor of ``h`` elements."""
    if v is not None and (v.ndim != 1 or v.shape[0] != h):
        raise EvaluationError(f"{op_type}: {what} has shape {list(v.shape)}; [{h}] is needed")


# -- activations ---------------------------------------------------------------------------


@kernel("Gelu", domain=MS)
def gelu(ctx, x):
    """Gelu: ``0.5 x (1 + erf(x / sqrt 2))``, the default-domain Gelu (approximate none)."""
    return _standard(ctx, "Gelu", x, approximate="none")


@kernel("FastGelu", domain=MS)
def fast_gelu(ctx, x, bias=None):
    """FastGelu: the tanh approximation of Gelu of ``X (+ bias)`` (bias broadcast to X)."""
    if bias is None:
        return _standard(ctx, "Gelu", x, approximate="tanh")
    (w, b), dt = wide_all(x, bias)
    return back(_standard(ctx, "Gelu", w + b.astype(w.dtype, copy=False), approximate="tanh"), dt)


@kernel("BiasGelu", domain=MS)
def bias_gelu(ctx, a, b):
    """BiasGelu: ``Gelu(A + B)`` (erf), B broadcast to A (onnxruntime: B 1-D, A's last axis)."""
    if b.ndim != 1 or not a.ndim or b.shape[0] != a.shape[-1]:
        raise EvaluationError(f"BiasGelu: B has shape {list(b.shape)}; it must be 1-D with "
                              f"A's last extent ({list(a.shape)})")
    (w, bb), dt = wide_all(a, b)
    return back(_standard(ctx, "Gelu", w + bb.astype(w.dtype, copy=False), approximate="none"),
                dt)


@kernel("QuickGelu", domain=MS)
def quick_gelu(ctx, x):
    """QuickGelu: ``x * Sigmoid(alpha * x)`` (alpha default 1.702): the default-domain Swish."""
    return _standard(ctx, "Swish", x, alpha=float(ctx.attr("alpha", 1.702)))


@kernel("BiasAdd", domain=MS)
def bias_add(ctx, x, bias, skip):
    """BiasAdd: ``(X + bias) + skip``; X and skip ``[N, S, C]``, bias ``[C]``."""
    if x.ndim != 3 or skip.shape != x.shape:
        raise EvaluationError(f"BiasAdd: X {list(x.shape)} and skip {list(skip.shape)} must "
                              f"have one 3-D shape")
    _hidden(bias, x.shape[2], "bias", "BiasAdd")
    (w, b, s), dt = wide_all(x, bias, skip)
    return back(w + b + s, dt)


# -- normalizations ------------------------------------------------------------------------


def _skip_sum(op_type, x, skip, gamma, beta, bias):
    """``input + skip (+ bias)`` in the compute type, its output dtype; shapes checked."""
    if x.ndim not in (2, 3):
        raise EvaluationError(f"{op_type}: input has rank {x.ndim}; 2 or 3 is needed")
    h = x.shape[-1]
    if h < 1:
        raise EvaluationError(f"{op_type}: the hidden size is 0")
    ok = skip.ndim in (2, 3) and skip.shape[-1] == h and (
        skip.shape == x.shape
        or (x.ndim == 3 and skip.shape in ((1,) + x.shape[1:], x.shape[1:])))
    if not ok:
        raise EvaluationError(f"{op_type}: skip has shape {list(skip.shape)}; input's "
                              f"{list(x.shape)}, or that without or with 1 for the batch, is "
                              f"needed")
    for v, what in ((gamma, "gamma"), (beta, "beta"), (bias, "bias")):
        _hidden(v, h, what, op_type)
    args, dt = wide_all(*(v for v in (x, skip, gamma, beta, bias) if v is not None))
    w = args[0] + args[1].astype(args[0].dtype, copy=False)
    if bias is not None:
        w = w + args[-1].astype(w.dtype, copy=False)
    return w, dt


@kernel("SkipLayerNormalization", domain=MS)
def skip_layer_norm(ctx, x, skip, gamma, beta=None, bias=None):
    """SkipLayerNormalization: ``(output, mean, inv_std_var, input_skip_bias_sum)`` (module
    doc); epsilon default 1e-12."""
    s, dt = _skip_sum("SkipLayerNormalization", x, skip, gamma, beta, bias)
    eps = float(ctx.attr("epsilon", 1e-12))
    y, mean, inv = _standard(ctx, "LayerNormalization", s, gamma.astype(s.dtype),
                             None if beta is None else beta.astype(s.dtype), num_outputs=3,
                             axis=-1, epsilon=eps, stash_type=1)
    return (back(y, dt), mean.astype(np.float32, copy=False), inv.astype(np.float32, copy=False),
            back(s, dt))


@kernel("SkipSimplifiedLayerNormalization", domain=MS)
def skip_simplified_layer_norm(ctx, x, skip, gamma, bias=None):
    """SkipSimplifiedLayerNormalization: ``(output, mean (zeros), inv_std_var,
    input_skip_bias_sum)`` (module doc); epsilon default 1e-12."""
    s, dt = _skip_sum("SkipSimplifiedLayerNormalization", x, skip, gamma, None, bias)
    eps = float(ctx.attr("epsilon", 1e-12))
    y, inv = _standard(ctx, "RMSNormalization", s, gamma.astype(s.dtype), axis=-1,
                       epsilon=eps, stash_type=1)
    inv = inv.astype(np.float32, copy=False)
    return back(y, dt), np.zeros_like(inv), inv, back(s, dt)


@kernel("SimplifiedLayerNormalization")
def simplified_layer_norm(ctx, x, scale):
    """SimplifiedLayerNormalization: ``(Y, inv_std_var)``: RMSNormalization over the axes
    from ``axis`` (default -1) with ``epsilon`` (1e-5) and ``stash_type`` (1: float, 11:
    double); Y has scale's element type (which may differ from X's)."""
    if x.dtype != scale.dtype:   # one rounding, to scale's type, at the end
        x = x.astype(np.float64 if np.float64 in (x.dtype, scale.dtype) else np.float32)
    y, inv = _standard(ctx, "RMSNormalization", x, scale, axis=int(ctx.attr("axis", -1)),
                       epsilon=float(ctx.attr("epsilon", 1e-5)),
                       stash_type=int(ctx.attr("stash_type", 1)))
    return y.astype(scale.dtype, copy=False), inv


def _lookup_rows(table, ids, what: str):
    n = table.shape[0]
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise EvaluationError(f"EmbedLayerNormalization: a {what} index is outside "
                              f"[0, {n - 1}]")
    return table[ids]


@kernel("EmbedLayerNormalization", domain=MS)
def embed_layer_norm(ctx, input_ids, segment_ids, word, position, segment, gamma, beta,
                     mask=None, position_ids=None):
    """EmbedLayerNormalization: ``(output, mask_index, embedding_sum)`` (module doc);
    epsilon default 1e-12, ``mask_index_type`` (only for inference in onnxruntime) ignored."""
    if input_ids.ndim != 2:
        raise EvaluationError(f"EmbedLayerNormalization: input_ids has shape "
                              f"{list(input_ids.shape)}; [batch, sequence] is needed")
    b, s = input_ids.shape
    if word.ndim != 2 or position.ndim != 2 or (segment is not None and segment.ndim != 2):
        raise EvaluationError("EmbedLayerNormalization: the embeddings must be 2-D")
    h = word.shape[1]
    if position.shape[1] != h or (segment is not None and segment.shape[1] != h):
        raise EvaluationError("EmbedLayerNormalization: the embeddings' hidden sizes differ")
    if (segment_ids is None) != (segment is None):
        raise EvaluationError("EmbedLayerNormalization: segment_ids and segment_embedding go "
                              "together")
    for v, what in ((segment_ids, "segment_ids"), (mask, "mask")):
        if v is not None and v.shape != input_ids.shape:
            raise EvaluationError(f"EmbedLayerNormalization: {what} has shape "
                                  f"{list(v.shape)}; input_ids' {list(input_ids.shape)} is "
                                  f"needed")
    _hidden(gamma, h, "gamma", "EmbedLayerNormalization")
    _hidden(beta, h, "beta", "EmbedLayerNormalization")
    if position_ids is None:
        pos = np.broadcast_to(np.arange(s), (b, s))
    elif position_ids.shape in ((b, s), (1, s)):
        pos = np.broadcast_to(position_ids, (b, s))
    else:
        raise EvaluationError(f"EmbedLayerNormalization: position_ids has shape "
                              f"{list(position_ids.shape)}; [{b}, {s}] or [1, {s}] is needed")
    (we, pe, ga, be), dt = wide_all(word, position, gamma, beta)
    total = _lookup_rows(we, input_ids, "word") + _lookup_rows(pe, pos, "position")
    if segment is not None:
        total = total + _lookup_rows(wide(segment)[0], segment_ids, "segment")
    y = _first(_standard(ctx, "LayerNormalization", total, ga, be, axis=-1,
                         epsilon=float(ctx.attr("epsilon", 1e-12)), stash_type=1))
    if mask is None:
        mask_index = np.zeros(b, np.int32)
    else:
        mask_index = np.count_nonzero(mask == 1, axis=1).astype(np.int32)
    return back(y, dt), mask_index, back(total, dt)


# -- matrix products and convolutions ------------------------------------------------------


def _fused_operand(a, batch: bool, trans: bool):
    if batch:
        a = np.moveaxis(a, 0, a.ndim - 2)
    if trans:
        if a.ndim < 2:
            raise EvaluationError(f"FusedMatMul: a transposed operand has rank {a.ndim}")
        a = np.swapaxes(a, -1, -2)
    return a


@kernel("FusedMatMul", domain=MS)
def fused_matmul(ctx, a, b):
    """FusedMatMul: ``alpha * MatMul(A', B')`` (module doc: transA, transB, transBatchA,
    transBatchB; alpha default 1)."""
    batch_a, batch_b = bool(ctx.attr("transBatchA", 0)), bool(ctx.attr("transBatchB", 0))
    if (batch_a or batch_b) and (a.ndim < 3 or a.ndim != b.ndim):
        raise EvaluationError(f"FusedMatMul: transBatchA or transBatchB needs operands of one "
                              f"rank of at least 3, not {list(a.shape)} and {list(b.shape)}")
    a = _fused_operand(a, batch_a, bool(ctx.attr("transA", 0)))
    b = _fused_operand(b, batch_b, bool(ctx.attr("transB", 0)))
    if a.ndim and b.ndim and a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise EvaluationError(f"FusedMatMul: operands {list(a.shape)} and {list(b.shape)} "
                              f"(after the transpositions) do not multiply")
    alpha = float(ctx.attr("alpha", 1.0))
    (wa, wb), dt = wide_all(a, b)
    y = _standard(ctx, "MatMul", wa, wb)
    if alpha != 1.0:
        y = y * np.asarray(alpha, y.dtype)
    return back(y, dt)


#: FusedConv's activations: name -> (standard kernel, its attributes from activation_params).
_ACTIVATIONS = {"Relu": ("Relu", ()), "Tanh": ("Tanh", ()), "Sigmoid": ("Sigmoid", ()),
                "Silu": ("Swish", ()), "HardSwish": ("HardSwish", ()),
                "LeakyRelu": ("LeakyRelu", ("alpha",)), "Clip": ("Clip", ("min", "max")),
                "HardSigmoid": ("HardSigmoid", ("alpha", "beta"))}

_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _conv_attrs(ctx) -> dict:
    return {k: v for k, v in ctx.attrs.items() if k in _CONV_ATTRS}


@kernel("FusedConv", domain=MS)
def fused_conv(ctx, x, w, b=None, z=None):
    """FusedConv: ``activation(Conv(X, W, B) + Z)`` (module doc); Conv's attributes."""
    name = ctx.attr("activation", None)
    params = list(ctx.attr("activation_params", None) or ())
    if name is not None and name not in _ACTIVATIONS:
        raise UnsupportedError(f"FusedConv activation {name!r} is not one of "
                               f"{', '.join(sorted(_ACTIVATIONS))}")
    if name is not None and len(params) != len(_ACTIVATIONS[name][1]):
        raise UnsupportedError(f"FusedConv activation {name} takes "
                               f"{len(_ACTIVATIONS[name][1])} activation_params, not "
                               f"{len(params)}")
    args, dt = wide_all(*(v for v in (x, w, b, z) if v is not None))
    wx, ww = args[0], args[1]
    wb = args[2] if b is not None else None
    y = _standard(ctx, "Conv", wx, ww, wb, **_conv_attrs(ctx))
    if z is not None:
        if z.shape != y.shape:
            raise EvaluationError(f"FusedConv: Z has shape {list(z.shape)}; the output's "
                                  f"{list(y.shape)} is needed")
        y = y + args[-1]
    if name is None:
        return back(y, dt)
    kernel, names = _ACTIVATIONS[name]
    if kernel == "Clip":
        lo, hi = (np.asarray(p, y.dtype) for p in params)
        y = _standard(ctx, "Clip", y, lo, hi)
    elif kernel == "Swish":
        y = _standard(ctx, "Swish", y, alpha=1.0)
    else:
        y = _standard(ctx, kernel, y, **dict(zip(names, (float(p) for p in params))))
    return back(y, dt)


@kernel("NhwcConv", domain=MS)
def nhwc_conv(ctx, x, w, b=None):
    """NhwcConv: Conv of channels-last X ``[N, D1.., C]`` and W ``[M, k1.., C / group]``,
    giving ``[N, O1.., M]`` (module doc); Conv's attributes."""
    if x.ndim < 3 or w.ndim != x.ndim:
        raise EvaluationError(f"NhwcConv: X {list(x.shape)} and W {list(w.shape)} must have "
                              f"one rank of at least 3")
    first = (0, x.ndim - 1) + tuple(range(1, x.ndim - 1))
    y = _standard(ctx, "Conv", np.transpose(x, first), np.transpose(w, first), b,
                  **_conv_attrs(ctx))
    return np.ascontiguousarray(np.moveaxis(y, 1, -1))


@kernel("Trilu", domain=MS)
def trilu(ctx, x, k=None):
    """Trilu: the default-domain Trilu (``upper`` default 1, optional ``k``)."""
    if x.ndim < 2:
        raise EvaluationError(f"Trilu input has rank {x.ndim}; at least 2 is needed")
    return _standard(ctx, "Trilu", x, k, upper=int(ctx.attr("upper", 1)))
