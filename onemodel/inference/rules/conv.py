"""Inference rules of the convolutions (the kernels of ``onemodel/evaluate/kernels/conv.py``,
same keys and versions): Conv, ConvTranspose, DeformConv, CausalConvWithState.

Shapes (ONNX Part 1, operator definitions of Clause 14.3; symbolic extents of Clause 9.3):
``X`` is ``[N, C, x1, ..., xn]`` and ``W`` ``[M, C/group, k1, ..., kn]`` (Conv) or
``[C, M/group, k1, ..., kn]`` (ConvTranspose); the kernel extents come from ``kernel_shape`` or
``W``. A spatial output extent of Conv with explicit ``pads`` (``auto_pad`` NOTSET) is
``floor((x + p_begin + p_end - d*(k-1) - 1) / s) + 1``, with ``SAME_UPPER``/``SAME_LOWER``
``ceil(x / s)``, with ``VALID`` ``floor((x - d*(k-1) - 1) / s) + 1``: expressions of the input's
extents where they are symbolic (the formulas of :mod:`onemodel.operators.geometry`, which the
kernels use too, computed with the arithmetic of :mod:`..dims`).
ConvTranspose gives ``output_shape`` when set, ``x * s`` with ``SAME_*``, else
``s*(x-1) + output_padding + d*(k-1) + 1 - p_begin - p_end``. Element types come from the type
constraints (Clause 10.4).

Contradictions (Clause 9.4): an input of rank under 3, ``X`` and ``W`` of different ranks,
``C != W.shape[1] * group`` (Conv) or ``C != W.shape[0]`` (ConvTranspose), ``M`` not a multiple
of ``group``, a bias that is not ``[M]``, ``kernel_shape`` that differs from ``W``'s extents,
``strides``/``dilations``/``pads`` without one value (two for pads) per spatial axis, a
``kernel_shape`` value, a kernel extent of ``W``, a stride or a dilation below 1 (the
definitions' window has at least one element and moves forward; onnx and onnxruntime refuse
them too, :func:`positive`), and a
window that does not fit: a spatial output extent that is an int below 1 (Conv and every
operator sharing :func:`window_extents`: ConvInteger, QLinearConv, DeformConv, the poolings; a
ConvTranspose extent or ``output_shape`` value below 1), reported with the input extents,
kernel, pads, strides and dilations it was computed from, the extent then unknown. An extent
that is an expression of the input's variables is kept: whether it fits depends on their values.
"""

from __future__ import annotations

from ...operators import geometry, rule
from .. import dims as D
from ._util import list_attr, shape_list


def _ints(ctx, name: str, n: int, fill: int | None, per: int = 1):
    """Attribute ``name`` as a list of ``per * n`` ints (``fill`` repeated when unset); None
    (and a contradiction) when it has another length, or when unset and ``fill`` is None."""
    v = ctx.attr(name, None)
    if not v:
        return None if fill is None else [fill] * (per * n)
    v = [int(a) for a in v]
    if len(v) != per * n:
        ctx.contradiction(f"{name} {v} does not have {per * n} values")
        return None
    return v


def positive(ctx, name: str, values) -> bool:
    """Whether every int of ``values`` (an attribute's or input's list of window extents,
    strides or dilations) is at least 1, as the definitions require; when not, a contradiction
    naming ``name``, the values and the ones below 1. Symbolic and unknown values pass."""
    bad = [v for v in values if type(v) is int and v < 1]
    if bad:
        ctx.contradiction(f"{name} {list(values)} has values that are not positive: {bad}")
        return False
    return True


def spatial_rank(ctx, x, w=None) -> int | None:
    """The number of spatial axes of a windowed operator on ``x`` [N, C, ...] (and weights
    ``w`` of the same rank): from the ranks, else from ``kernel_shape``; None when unknown.
    A rank under 3, or X and W of different ranks, is a contradiction."""
    rx = x.rank if x is not None else None
    rw = w.rank if w is not None else None
    for r, what in ((rx, "the input"), (rw, "the weights")):
        if r is not None and r < 3:
            ctx.contradiction(f"{what} has rank {r}; at least 3 is needed")
            return None
    if rx is not None and rw is not None and rx != rw:
        ctx.contradiction(f"the input has rank {rx} and the weights rank {rw}")
        return None
    r = rx if rx is not None else rw
    if r is not None:
        return r - 2
    k = ctx.attr("kernel_shape", None)
    return len(k) if k else None


def window_extents(ctx, spatial, kernel, n: int, dilations_attr: bool = True,
                   ceil_mode: bool = False, auto_pad: str | None = None,
                   least: int = 1) -> list:
    """The output extents of a window sliding over ``spatial`` (input extents, or None) with
    ``kernel`` (extents, or None) and the node's ``strides``, ``dilations`` (when
    ``dilations_attr``), ``pads`` and ``auto_pad`` (see the module doc; ``ceil_mode`` takes the
    ceiling with explicit pads and drops a last window that would start in the end padding).
    One extent per axis, None where not determined; contradictions for malformed
    attributes and for an int extent below ``least`` (1 for the convolutions; 0 for the
    poolings, whose definitions make an extent of 0 an empty output)."""
    unknown = [None] * n
    strides = _ints(ctx, "strides", n, 1)
    dilations = _ints(ctx, "dilations", n, 1) if dilations_attr else [1] * n
    if strides is None or dilations is None:
        return unknown
    if not (positive(ctx, "strides", strides) & positive(ctx, "dilations", dilations)):
        return unknown
    if auto_pad is None:
        auto_pad = ctx.attr("auto_pad", "NOTSET")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode("utf-8", "replace")
    if auto_pad not in geometry.AUTO_PADS:
        ctx.contradiction(f"auto_pad {auto_pad!r} is not NOTSET, SAME_UPPER, SAME_LOWER or VALID")
        return unknown
    if spatial is None:
        spatial = unknown
    if kernel is None:
        kernel = unknown
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = geometry.window_counts(auto_pad, spatial, kernel, strides, dilations, None, None,
                                     ar=D)
        return fitting(ctx, "the window does not fit", out, spatial, kernel,
                       f"auto_pad {auto_pad}", strides, dilations, least)
    if auto_pad == "VALID":
        pads = [0] * (2 * n)
    else:
        pads = _ints(ctx, "pads", n, 0, per=2)
        if pads is None:
            return unknown
    out = geometry.window_counts(auto_pad, spatial, kernel, strides, dilations, pads[:n],
                                 pads[n:], ceil_mode, ar=D)
    return fitting(ctx, "the window does not fit", out, spatial, kernel, f"pads {pads}",
                   strides, dilations, least)


def _text(extents) -> str:
    """``extents`` (ints, expressions, None) as a list: ``[1, h + 2, ?]``."""
    return "[" + ", ".join(D.dim_text(d) for d in extents) + "]"


def fitting(ctx, what: str, out: list, spatial, kernel, pads: str, strides, dilations,
            least: int = 1, extra: str = "") -> list:
    """``out`` (computed spatial output extents) with each int below ``least`` made unknown;
    when there is one, a contradiction at the node: ``what``, the output extents and what they
    were computed from (input extents, kernel, ``pads`` as text, strides, dilations unless None,
    ``extra``). Symbolic extents are kept: whether they fit depends on the variables' values."""
    bad = [type(o) is int and o < least for o in out]
    if not any(bad):
        return out
    n = len(out)
    ctx.contradiction(f"{what}: output extents {_text(out)} (input "
                      f"{_text(spatial or [None] * n)}, kernel {_text(kernel or [None] * n)}, "
                      f"{pads}, strides {strides}"
                      + (f", dilations {dilations}" if dilations is not None else "")
                      + f"{extra})")
    return [None if b else o for o, b in zip(out, bad)]


def _kernel(ctx, w, n: int):
    """The kernel extents: ``kernel_shape`` when set (a contradiction when it differs from
    W's spatial extents), else W's; None when neither is known."""
    ws = w.shape if w is not None else None
    k = ctx.attr("kernel_shape", None)
    wk = list(ws[2:]) if ws is not None and len(ws) == n + 2 else None
    if k:
        k = [int(a) for a in k]
        if len(k) != n:
            ctx.contradiction(f"kernel_shape {k} does not have {n} values")
            return wk
        if not positive(ctx, "kernel_shape", k):
            return None
        if wk is not None:
            for a, b in zip(k, wk):
                if D.differ(a, b):
                    ctx.contradiction(f"kernel_shape {k} does not match the weights "
                                      f"{D.shape_text(ws)}")
                    break
        return k
    if wk is not None and any(type(d) is int and d < 1 for d in wk):
        ctx.contradiction(f"the weights {D.shape_text(ws)} have kernel extents that are not "
                          f"positive")
        return [d if type(d) is not int or d >= 1 else None for d in wk]
    return wk


def _bias(ctx, b, m):
    """Unify a bias ``[M]``'s extent with ``m``; a contradiction when not rank 1."""
    if b is None or b.shape is None:
        return m
    if len(b.shape) != 1:
        ctx.contradiction(f"the bias has shape {D.shape_text(b.shape)}; [M] is needed")
        return m
    return ctx.unify(m, b.shape[0], "output channels and bias extents")


def _operands(ctx, x, w):
    """``(n, X's shape, W's shape, group)`` of a convolution: the spatial rank
    (:func:`spatial_rank`, None when unknown), the shapes when of rank ``n + 2`` (else None),
    ``group`` (None, and a contradiction, when not positive)."""
    n = spatial_rank(ctx, x, w)
    if n is None:
        return None, None, None, None
    xs = x.shape if x is not None and x.rank == n + 2 else None
    ws = w.shape if w is not None and w.rank == n + 2 else None
    group = ctx.attr("group", 1)
    if group is None or group < 1:
        ctx.contradiction(f"group {group} is not positive")
        group = None
    return n, xs, ws, group


def conv_shape(ctx, x, w, b=None) -> list | None:
    """The output shape of Conv (and of ConvInteger, QLinearConv, DeformConv before its
    offset): ``[N, M, *spatial]`` (module doc); None when the rank is not known."""
    n, xs, ws, group = _operands(ctx, x, w)
    if n is None:
        return None
    m = ws[0] if ws is not None else None
    if xs is not None and ws is not None and group is not None:
        ctx.unify(xs[1], D.mul(ws[1], group), "input channels and weight channels x group")
    if type(m) is int and group is not None and m % group:
        ctx.contradiction(f"{m} output channels are not a multiple of group {group}")
    m = _bias(ctx, b, m)
    kernel = _kernel(ctx, w, n)
    spatial = window_extents(ctx, xs[2:] if xs is not None else None, kernel, n)
    return [xs[0] if xs is not None else None, m] + spatial


@rule("Conv")
def conv(ctx, x, w, b=None):
    """Conv: ``[N, M, *spatial]`` (module doc)."""
    return conv_shape(ctx, x, w, b)


@rule("ConvTranspose")
def conv_transpose(ctx, x, w, b=None):
    """ConvTranspose: ``[N, W.shape[1] * group, *spatial]`` (module doc)."""
    n, xs, ws, group = _operands(ctx, x, w)
    if n is None:
        return None
    m = D.mul(ws[1], group) if ws is not None and group is not None else None
    if xs is not None and ws is not None:
        c = ctx.unify(xs[1], ws[0], "input channels and weight extent 0")
        if type(c) is int and group is not None and c % group:
            ctx.contradiction(f"{c} input channels are not a multiple of group {group}")
    m = _bias(ctx, b, m)
    head = [xs[0] if xs is not None else None, m]
    kernel = _kernel(ctx, w, n) or [None] * n
    strides = _ints(ctx, "strides", n, 1)
    dilations = _ints(ctx, "dilations", n, 1)
    out_pad = _ints(ctx, "output_padding", n, 0)
    if strides is not None and not positive(ctx, "strides", strides):
        strides = None
    if dilations is not None and not positive(ctx, "dilations", dilations):
        dilations = None
    shape = ctx.attr("output_shape", None)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if shape:
        shape = [int(a) for a in shape]
        if len(shape) < n:
            ctx.contradiction(f"output_shape {shape} has fewer than {n} values")
            return head + [None] * n
        bad = [o for o in shape[-n:] if o < 1]
        if bad:
            ctx.contradiction(f"output_shape {shape} has extents that are not positive: {bad}")
            return head + [o if o >= 1 else None for o in shape[-n:]]
        return head + shape[-n:]
    if strides is None or dilations is None or out_pad is None:
        return head + [None] * n
    spatial = list(xs[2:]) if xs is not None else [None] * n
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return head + fitting(ctx, "the output is empty",
                              [geometry.transposed_same_extent(x_, s, ar=D)
                               for x_, s in zip(spatial, strides)], spatial,
                              kernel, f"auto_pad {auto_pad}", strides, dilations)
    pads = [0] * (2 * n) if auto_pad == "VALID" else _ints(ctx, "pads", n, 0, per=2)
    if pads is None:
        return head + [None] * n
    out = [geometry.transposed_extent(spatial[i], kernel[i], strides[i], dilations[i],
                                      out_pad[i], pads[i], pads[n + i], ar=D) for i in range(n)]
    return head + fitting(ctx, "the output is empty or negative", out, spatial, kernel,
                          f"pads {pads}", strides, dilations,
                          extra=f", output_padding {out_pad}")


@rule("DeformConv")
def deform_conv(ctx, x, w, offset, b=None, mask=None):
    """DeformConv: Conv's output ``[N, M, *out]`` with explicit pads; ``offset`` is
    ``[N, offset_group * K * n, *out]`` and ``mask`` ``[N, offset_group * K, *out]`` (K the
    kernel's element count), their extents unified with the output's."""
    out = conv_shape(ctx, x, w, b)
    n = spatial_rank(ctx, x, w) if out is not None else None
    og = ctx.attr("offset_group", 1)
    kernel = _kernel(ctx, w, n) if n is not None else None
    K = 1
    for k in kernel or [None]:
        K = D.mul(K, k)
    for v, per, what in ((offset, n, "offset"), (mask, 1, "mask")):
        if v is None or v.shape is None or out is None or n is None:
            continue
        if len(v.shape) != n + 2:
            ctx.contradiction(f"the {what} has rank {len(v.shape)}; {n + 2} is needed")
            continue
        out[0] = ctx.unify(out[0], v.shape[0], f"batch and {what} extents")
        ctx.unify(v.shape[1], D.mul(D.mul(K, og), per), f"{what} channels")
        for i in range(n):
            out[2 + i] = ctx.unify(out[2 + i], v.shape[2 + i], f"output and {what} extents")
    return out


@rule("CausalConvWithState")
def causal_conv_with_state(ctx, x, w, b=None, past_state=None):
    """CausalConvWithState: ``(y [N, C, L], present_state [N, C, k-1])`` for ``x`` [N, C, L]
    and ``w`` [C, 1, k]; ``b`` [C] and ``past_state`` [N, C, k-1] unified with them.
    Contradictions: ranks other than 3, ``w.shape[1] != 1``, channel counts that differ."""
    xs, ws = x.shape, w.shape
    for v, what in ((xs, "the input"), (ws, "the weights")):
        if v is not None and len(v) != 3:
            ctx.contradiction(f"{what} has rank {len(v)}; 3 is needed")
            return None, None
    N, C, L = xs if xs is not None else (None, None, None)
    k = None
    if ws is not None:
        C = ctx.unify(C, ws[0], "input channels and weight extent 0")
        ctx.unify(ws[1], 1, "weight extent 1")
        k = ws[2]
    if b is not None and b.shape is not None:
        if len(b.shape) != 1:
            ctx.contradiction(f"the bias has shape {D.shape_text(b.shape)}; [C] is needed")
        else:
            C = ctx.unify(C, b.shape[0], "channels and bias extents")
    state = [N, C, D.sub(k, 1)]
    if past_state is not None and past_state.shape is not None:
        ps = past_state.shape
        if len(ps) != 3:
            ctx.contradiction(f"past_state has rank {len(ps)}; 3 is needed")
        else:
            state = [ctx.unify(a, c, "past_state extents") for a, c in zip(state, ps)]
            N, C = state[0], state[1]
    return [N, C, L], state


# -- Col2Im -----------------------------------------------------------------------------------
def _col2im_attr(ctx, name: str, n: int, fill: int, per: int = 1):
    """Col2Im's INTS attribute ``name`` as ``per * n`` ints (``fill`` each when unset); None,
    and a contradiction, when it has another length."""
    v = list_attr(ctx, name, int)
    if not v:
        return [fill] * (per * n)
    if len(v) != per * n:
        ctx.contradiction(f"{name} {v} does not have {per * n} values, "
                          f"{'two' if per == 2 else 'one'} per spatial axis")
        return None
    return v


def _col2im_blocks(ctx, img, blk, L) -> None:
    """Check Col2Im's block count ``L`` (X's last extent) against the sliding blocks of
    ``block_shape`` ``blk`` over ``image_shape`` ``img`` (lists of ints of one length) with the
    node's pads, strides and dilations: per axis ``floor((i + p_begin + p_end - d*(b-1) - 1) /
    s) + 1``, at least 1 (the dilated block fits the padded image), their product ``L``."""
    n = len(img)
    strides = _col2im_attr(ctx, "strides", n, 1)
    dilations = _col2im_attr(ctx, "dilations", n, 1)
    pads = _col2im_attr(ctx, "pads", n, 0, per=2)
    if strides is None or dilations is None or pads is None:
        return
    bad = [v for v in strides + dilations if v < 1]
    if bad:
        ctx.contradiction(f"strides {strides} and dilations {dilations} have values that are "
                          f"not positive: {bad}")
        return
    counts = [geometry.window_count(img[i], blk[i], strides[i], dilations[i], pads[i],
                                    pads[n + i]) for i in range(n)]
    given = (f"image_shape {img}, block_shape {blk}, pads {pads}, strides {strides}, "
             f"dilations {dilations}")
    if any(c < 1 for c in counts):
        ctx.contradiction(f"the dilated block does not fit the padded image: {counts} blocks "
                          f"per axis ({given})")
        return
    total = 1
    for c in counts:
        total *= c
    if type(L) is int and L != total:
        ctx.contradiction(f"X has {L} blocks on its last axis; {given} give {total} "
                          f"({' x '.join(map(str, counts))})")
    elif L is not None and type(L) is not int:
        ctx.unify(L, total, "X's block count and the sliding blocks")


@rule("Col2Im")
def col2im(ctx, x, image_shape, block_shape):
    """Col2Im (operator definition Col2Im-18): ``[N, C, *image_shape]`` with ``C = X[1] /
    prod(block_shape)``; X's last extent ``L`` is the number of sliding blocks, the product over
    the spatial axes of ``floor((image + p_begin + p_end - d*(block - 1) - 1) / s) + 1``.

    Contradictions (Clause 9.4): X of a rank other than 3, a channel extent the block does not
    divide, ``image_shape`` and ``block_shape`` of different lengths, a block extent, stride or
    dilation below 1, a negative image extent, ``strides``/``dilations``/``pads`` without one
    value (two for pads) per spatial axis, a dilated block larger than the padded image, and an
    int ``L`` other than the count of sliding blocks (onnxruntime refuses these models)."""
    img = ctx.ints(1)
    blk = ctx.ints(2)
    s = shape_list(x)
    n = c = None
    if s is not None:
        if len(s) != 3:
            ctx.contradiction(f"X has rank {len(s)}; [N, C * prod(block), L] is needed")
            s = None
        else:
            n = s[0]
    if img is not None and blk is not None and len(img) != len(blk):
        ctx.contradiction(f"image_shape {D.shape_text(img)} and block_shape "
                          f"{D.shape_text(blk)} have different lengths")
        return [n, None] + [None] * len(img)
    if blk is not None and any(type(b) is int and b < 1 for b in blk):
        ctx.contradiction(f"block_shape {D.shape_text(blk)} has values that are not positive")
        blk = None
    if img is not None and any(type(i) is int and i < 0 for i in img):
        ctx.contradiction(f"image_shape {D.shape_text(img)} has negative extents")
        img = [None if type(i) is int and i < 0 else i for i in img]
    if s is not None and blk is not None and all(type(b) is int for b in blk):
        size = 1
        for b in blk:
            size *= b
        if type(s[1]) is int and s[1] % size:
            ctx.contradiction(f"X's extent {s[1]} is not a multiple of the block size {size}")
        elif s[1] is not None:
            c = D.floordiv(s[1], size)
        if img is not None and all(type(i) is int for i in img):
            _col2im_blocks(ctx, img, blk, s[2])
    if img is None:
        spatial = image_shape.shape if image_shape is not None else None
        if spatial is None or len(spatial) != 1 or type(spatial[0]) is not int:
            return None
        return [n, c] + [None] * spatial[0]
    return [n, c] + list(img)
