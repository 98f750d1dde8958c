"""Shape and indexing operators: reshaping, slicing, gathering, scattering, padding, constants.

Kernels return views of their input where numpy allows (Reshape, Transpose, Squeeze, Slice,
Expand...), so no element is copied unless the operator computes something. Shapes taken from
input tensors are checked before anything is allocated: a negative extent or
``limits.MAX_ELEMENT_COUNT`` elements or more are refused (``ir.tensor.element_count``).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import EvaluationError, InvalidModelError, OneModelError, UnsupportedError
from ...ir.tensor import element_count
from ...operators import axes as axes_
from ...operators import kernel
from .. import memory
from ..memory import check_allocation
from ._util import axis_index


# -- helpers --------------------------------------------------------------------------------
def _ints(a) -> list[int]:
    """A 1-D int tensor (or None) as a list of Python ints."""
    if a is None:
        return []
    return [int(v) for v in np.asarray(a).reshape(-1)]


def _checked_shape(shape, what: str = "shape", dtype=None, array: str = "") -> tuple[int, ...]:
    """``shape`` as ints, its element count checked (errors start with ``what``); with ``dtype``
    (a type, or an int: the bytes per element), an array of that shape checked against the
    memory available too (:func:`..memory.check_allocation`: EvaluationError naming ``array``
    and the sizes)."""
    shape = tuple(int(d) for d in shape)
    try:
        count = element_count(shape)
    except OneModelError as e:
        raise type(e)(f"{what}: {e.message}") from None
    if dtype is not None:
        size = dtype if isinstance(dtype, int) else np.dtype(dtype).itemsize
        check_allocation(count * size, array or f"the {what}")
    return shape


# -- reshaping ------------------------------------------------------------------------------
def _reshape(x, shape, allowzero):
    shape = list(shape)
    if any(d < -1 for d in shape):  # (numpy would take any negative extent for -1)
        raise EvaluationError(f"shape {shape}: an extent below -1")
    if not allowzero:
        for i, d in enumerate(shape):
            if d == 0:
                if i >= x.ndim:
                    raise EvaluationError(f"shape {shape}: 0 at axis {i} has no input extent")
                shape[i] = x.shape[i]
    elif 0 in shape and -1 in shape:
        raise EvaluationError(f"shape {shape} has both 0 and -1 with allowzero=1")
    if shape.count(-1) > 1:
        raise EvaluationError(f"shape {shape} has more than one -1")
    return x.reshape(shape)


def _refinement(a: tuple, b: tuple):
    """The common refinement of two shapes of one element count (> 0): the finest shape ``f``
    whose axes, taken in consecutive groups, give ``a`` and give ``b`` (each axis of either a
    product of consecutive axes of ``f``; axes of extent 1 a group of none). Returns
    ``(f, groups of a, groups of b)`` as ranges of ``f``'s axes, or None where the two do not
    nest (as [2, 3] and [3, 2])."""
    f: list[int] = []
    groups: tuple[list[range], list[range]] = ([], [])
    pos = [0, 0]  # the next axis of a and of b
    left: list = [None, None]  # what is left of the current axis of each (None: the next starts)
    start = [0, 0]  # the first f axis of the current axis of each
    while True:
        for side, shape in enumerate((a, b)):
            while left[side] is None and pos[side] < len(shape):
                if shape[pos[side]] == 1:  # a group of no f axis
                    groups[side].append(range(len(f), len(f)))
                    pos[side] += 1
                else:
                    left[side], start[side] = shape[pos[side]], len(f)
        if left[0] is None or left[1] is None:
            return (f, *groups) if left[0] is None and left[1] is None else None
        step = min(left)
        if left[0] % step or left[1] % step:
            return None
        f.append(step)
        for side in (0, 1):
            left[side] //= step
            if left[side] == 1:
                groups[side].append(range(start[side], len(f)))
                pos[side] += 1
                left[side] = None


def reshape_transpose_reshape(x, shape1, allowzero1, perm, shape2, allowzero2):
    """``Reshape(Transpose(Reshape(x, shape1), perm), shape2)`` (each as its node computes it,
    ``perm`` None for the reversed axes): a view of ``x`` where its strides allow, where the
    nodes one by one would copy at the first Reshape (a merge of axes the Transpose then takes
    apart again, as an export's ``[seq, batch, heads * d] -> [seq, batch * heads, d] ->
    [batch * heads, seq, d] -> [batch, heads, seq, d]``). Raises what the nodes raise (the
    shapes are resolved by the Reshape kernel itself, on a view of no elements' worth)."""
    ghost = np.broadcast_to(np.zeros((), x.dtype), x.shape)  # the shapes, no element copied
    s1 = _reshape(ghost, shape1, allowzero1).shape
    perm = list(range(len(s1)))[::-1] if perm is None else [int(p) for p in perm]
    s2 = _reshape(np.transpose(ghost.reshape(s1), perm), shape2, allowzero2).shape
    fine = _refinement(x.shape, s1) if x.size else None
    if fine is None:
        return _reshape(np.transpose(x.reshape(s1), perm), shape2, allowzero2)
    f, _, groups = fine
    z = x.reshape(f)  # only splits x's axes (and drops those of 1): a view
    z = np.transpose(z, [k for p in perm for k in groups[p]])
    return z.reshape(s2)


@kernel("Reshape")
def reshape_attr(ctx, x):
    return _reshape(x, ctx.attr("shape", []), 0)


@kernel("Reshape", since=5)
def reshape(ctx, x, shape):
    if np.ndim(shape) != 1:
        raise EvaluationError(f"the shape input is {np.ndim(shape)}-D, not 1-D")
    return _reshape(x, _ints(shape), ctx.attr("allowzero") if ctx.opset >= 14 else 0)


@kernel("Transpose")
def transpose(ctx, x):
    perm = ctx.attr("perm")
    return np.transpose(x, perm if perm is not None else None)


@kernel("Squeeze")
def squeeze_attr(ctx, x):
    return _squeeze(x, ctx.attr("axes"))


@kernel("Squeeze", since=13)
def squeeze(ctx, x, axes=None):
    return _squeeze(x, None if axes is None else _ints(axes))


def _squeeze(x, axes):
    if axes is None:
        return np.squeeze(x)
    axes = tuple(axis_index(a, x.ndim) for a in axes)
    for a in axes:
        if x.shape[a] != 1:
            raise EvaluationError(f"Squeeze axis {a} has extent {x.shape[a]}, not 1")
    return np.squeeze(x, axis=axes)


@kernel("Unsqueeze")
def unsqueeze_attr(ctx, x):
    return _unsqueeze(x, ctx.attr("axes", []))


@kernel("Unsqueeze", since=13)
def unsqueeze(ctx, x, axes):
    return _unsqueeze(x, _ints(axes))


def _unsqueeze(x, axes):
    try:
        norm = axes_.unsqueeze_axes(axes, x.ndim)
    except axes_.AxisError as e:
        raise EvaluationError(str(e)) from None
    shape = list(x.shape)
    for a in norm:
        shape.insert(a, 1)
    return x.reshape(shape)


@kernel("Flatten")
def flatten(ctx, x):
    axis = axes_.flatten_axis(ctx.attr("axis"), x.ndim)
    if axis is None:
        raise EvaluationError(f"Flatten axis {ctx.attr('axis')} out of range for rank "
                              f"{x.ndim}")
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@kernel("Expand")
def expand(ctx, x, shape):
    target = np.broadcast_shapes(x.shape, _checked_shape(_ints(shape), "Expand shape"))
    # A broadcast view costs nothing, but nearly every consumer (and a graph output written
    # out) materializes it: refused here, where the node that asks for it can be named.
    _checked_shape(target, "Expand output shape", x.dtype, "the Expand output")
    return np.broadcast_to(x, target)


@kernel("Tile", since=6)
def tile(ctx, x, repeats):
    reps = _ints(repeats)
    if len(reps) != x.ndim:
        raise EvaluationError(f"Tile repeats {reps} do not match rank {x.ndim}")
    _checked_shape([a * b for a, b in zip(x.shape, reps)], "Tile output shape", x.dtype,
                   "the Tile output")
    return np.tile(x, reps)


@kernel("Tile")
def tile_v1(ctx, x, tiles, axis):
    reps = [1] * x.ndim
    a = axis_index(int(np.asarray(axis).reshape(-1)[0]), x.ndim)
    reps[a] = int(np.asarray(tiles).reshape(-1)[0])
    _checked_shape([a * b for a, b in zip(x.shape, reps)], "Tile output shape", x.dtype,
                   "the Tile output")
    return np.tile(x, reps)


# -- joining and splitting ------------------------------------------------------------------
@kernel("Concat")
def concat(ctx, *xs):
    xs = [x for x in xs if x is not None]
    axis = ctx.attr("axis", 1 if ctx.opset < 4 else None)
    if axis is None:
        raise InvalidModelError("Concat needs the axis attribute")
    total = sum(x.nbytes for x in xs)
    if total >= memory._floor:  # (a loop state concatenated each iteration grows: checked)
        check_allocation(total, "the Concat output")
    return np.concatenate(xs, axis=axis_index(axis, xs[0].ndim))


def _split_sizes(dim, n, split, equal_ceil):
    if split:
        if sum(split) != dim or any(s < 0 for s in split):
            raise EvaluationError(f"split {split} does not add up to extent {dim}")
        return split
    if equal_ceil:
        size = -(-dim // n) if n else 0
        sizes = [min(size, max(dim - i * size, 0)) for i in range(n)]
        return sizes
    if n == 0 or dim % n:
        raise EvaluationError(f"extent {dim} cannot be split into {n} equal parts")
    return [dim // n] * n


def _split(x, axis, sizes):
    bounds = np.cumsum([0] + list(sizes))
    idx = [slice(None)] * x.ndim
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        idx[axis] = slice(int(a), int(b))
        out.append(x[tuple(idx)])
    return tuple(out)


@kernel("Split")
def split_attr(ctx, x, split=None):
    axis = axis_index(ctx.attr("axis", 0), x.ndim)
    sizes = _ints(split) if split is not None else ctx.attr("split", [])
    return _split(x, axis, _split_sizes(x.shape[axis], ctx.num_outputs, sizes, False))


@kernel("Split", since=13)
def split(ctx, x, split=None):
    axis = axis_index(ctx.attr("axis"), x.ndim)
    sizes = _ints(split) if split is not None else []
    n = ctx.attr("num_outputs", None) if ctx.opset >= 18 else None
    if n is not None and sizes:
        raise InvalidModelError("Split has both the split input and num_outputs")
    count = n if n is not None else ctx.num_outputs
    if sizes and len(sizes) != ctx.num_outputs:
        raise EvaluationError(f"split {sizes} has {len(sizes)} parts for "
                              f"{ctx.num_outputs} outputs")
    return _split(x, axis, _split_sizes(x.shape[axis], count, sizes, n is not None))


# -- slicing and gathering ------------------------------------------------------------------
def _slice(x, starts, ends, axes, steps):
    if axes is None or len(axes) == 0:
        axes = list(range(len(starts)))
    if steps is None or len(steps) == 0:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise EvaluationError("Slice starts, ends, axes and steps differ in length")
    idx = [slice(None)] * x.ndim
    seen = set()
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = axis_index(a, x.ndim)
        if a in seen:
            raise EvaluationError(f"Slice repeats axis {a}")
        seen.add(a)
        if st == 0:
            raise EvaluationError("Slice step is 0")
        dim = x.shape[a]
        if s < 0:
            s += dim
        if e < 0:
            e += dim
        if st > 0:
            s = min(max(s, 0), dim)
            e = min(max(e, 0), dim)
            idx[a] = slice(s, e, st)
        else:
            s = min(max(s, 0), dim - 1)
            e = min(max(e, -1), dim - 1)
            idx[a] = slice(s, e if e >= 0 else None, st)
    return x[tuple(idx)]


@kernel("Slice")
def slice_attr(ctx, x):
    return _slice(x, ctx.attr("starts", []), ctx.attr("ends", []), ctx.attr("axes"), None)


@kernel("Slice", since=10)
def slice_(ctx, x, starts, ends, axes=None, steps=None):
    return _slice(x, _ints(starts), _ints(ends), None if axes is None else _ints(axes),
                  None if steps is None else _ints(steps))


def _check_indices(idx, dim, what):
    idx = np.asarray(idx)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise EvaluationError(f"{what} index out of range [-{dim}, {dim - 1}]")
    return np.where(idx < 0, idx + dim, idx) if idx.size and idx.min() < 0 else idx


@kernel("Gather")
def gather(ctx, x, indices):
    axis = axis_index(ctx.attr("axis"), x.ndim)
    # numpy counts negative indices from the end and raises IndexError out of range (the runner
    # reports it with the node's location), as Gather defines. A scalar index selects a view.
    if indices.ndim == 0 and indices.dtype.kind in "iu":
        return x[(slice(None),) * axis + (int(indices),)]
    return np.take(x, indices, axis=axis)


@kernel("GatherElements")
def gather_elements(ctx, x, indices):
    axis = axis_index(ctx.attr("axis"), x.ndim)
    idx = _check_indices(indices.astype(np.int64, copy=False), x.shape[axis], "GatherElements")
    return np.take_along_axis(x, idx, axis=axis)


def _nd_index(data, indices, batch_dims, what):
    """Index tuple (batch index, coordinates...) for GatherND/ScatterND-style indices."""
    k = indices.shape[-1]
    bshape = data.shape[:batch_dims]
    if indices.shape[:batch_dims] != bshape:
        raise EvaluationError(f"{what}: batch dims of indices {indices.shape} and data "
                              f"{data.shape} differ")
    if batch_dims + k > data.ndim:
        raise EvaluationError(f"{what}: index depth {k} exceeds the data rank {data.ndim}")
    coords = []
    for j in range(k):
        dim = data.shape[batch_dims + j]
        coords.append(_check_indices(indices[..., j].astype(np.int64, copy=False), dim, what))
    return k, coords


@kernel("GatherND")
def gather_nd(ctx, data, indices):
    b = ctx.attr("batch_dims") if ctx.opset >= 12 else 0
    k, coords = _nd_index(data, indices, b, "GatherND")
    B = math.prod(data.shape[:b])
    mid = indices.shape[b:-1]
    flat = data.reshape((B,) + data.shape[b:])
    cs = [c.reshape(B, -1) for c in coords]
    bidx = np.arange(B).reshape(B, 1)
    out = flat[(bidx,) + tuple(cs)]
    return out.reshape(data.shape[:b] + mid + data.shape[b + k:])


_REDUCE_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _reduction(ctx):
    r = ctx.attr("reduction", "none")
    if r != "none" and r not in _REDUCE_AT:
        raise UnsupportedError(f"reduction {r!r} is not one of none, add, mul, max, min")
    return r


@kernel("ScatterND")
def scatter_nd(ctx, data, indices, updates):
    r = _reduction(ctx)
    k, coords = _nd_index(data, indices, 0, "ScatterND")
    out = np.array(data, copy=True)
    index = tuple(coords)
    if r == "none":
        out[index] = updates
    else:
        _REDUCE_AT[r].at(out, index, updates)
    return out


def _elements_index(data, indices, axis, what):
    idx = _check_indices(indices.astype(np.int64, copy=False), data.shape[axis], what)
    grids = list(np.ogrid[tuple(slice(0, n) for n in indices.shape)])
    grids[axis] = idx
    return tuple(grids)


@kernel("ScatterElements")
def scatter_elements(ctx, data, indices, updates):
    r = _reduction(ctx)
    axis = axis_index(ctx.attr("axis"), data.ndim)
    index = _elements_index(data, indices, axis, "ScatterElements")
    out = np.array(data, copy=True)
    if r == "none":
        out[index] = updates
    else:
        _REDUCE_AT[r].at(out, index, updates)
    return out


@kernel("Scatter")
def scatter(ctx, data, indices, updates):
    axis = axis_index(ctx.attr("axis"), data.ndim)
    out = np.array(data, copy=True)
    out[_elements_index(data, indices, axis, "Scatter")] = updates
    return out


@kernel("Compress")
def compress(ctx, x, condition):
    axis = ctx.attr("axis")
    cond = np.asarray(condition, dtype=bool).reshape(-1)
    if axis is None:
        flat = x.reshape(-1)
        return flat[: cond.size][cond[: flat.size]]
    axis = axis_index(axis, x.ndim)
    return np.compress(cond, x, axis=axis)


# -- padding --------------------------------------------------------------------------------
def _pad(x, pads, mode, value, axes=None):
    rank = x.ndim
    if axes is None:
        axes = list(range(rank))
    else:
        axes = [axis_index(a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise EvaluationError(f"pads {pads} has not 2 x {len(axes)} values")
    begin = [0] * rank
    end = [0] * rank
    for i, a in enumerate(axes):
        begin[a] = pads[i]
        end[a] = pads[i + len(axes)]
    for a, (b, e) in enumerate(zip(begin, end)):
        if x.shape[a] + b + e < 0:
            raise EvaluationError(f"pads {pads} crop {-(b + e)} elements from axis {a} of "
                                  f"extent {x.shape[a]}")
    # negative pads crop
    crop = tuple(slice(max(-b, 0), x.shape[a] - max(-e, 0)) for a, (b, e) in
                 enumerate(zip(begin, end)))
    x = x[crop]
    width = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    _checked_shape([d + b + e for d, (b, e) in zip(x.shape, width)], "Pad output shape", x.dtype,
                   "the padded output")
    if not any(b or e for b, e in width):
        return x
    if mode == "constant":
        out = np.empty(tuple(d + b + e for d, (b, e) in zip(x.shape, width)), dtype=x.dtype)
        out[...] = value if value is not None else np.zeros((), x.dtype)
        out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, width))] = x
        return out
    if mode in ("reflect", "edge", "wrap"):
        return np.pad(x, width, mode=mode if mode != "wrap" else "wrap")
    raise UnsupportedError(f"Pad mode {mode!r} is not constant, reflect, edge or wrap")


@kernel("Pad")
def pad_v1(ctx, x):
    return _pad(x, ctx.attr("paddings", []), ctx.attr("mode"),
                np.asarray(ctx.attr("value"), x.dtype))


@kernel("Pad", since=2)
def pad_v2(ctx, x):
    return _pad(x, ctx.attr("pads", []), ctx.attr("mode"),
                np.asarray(ctx.attr("value"), x.dtype))


@kernel("Pad", since=11)
def pad(ctx, x, pads, constant_value=None, axes=None):
    value = None
    if constant_value is not None and constant_value.size:
        value = constant_value.reshape(-1)[0]
    return _pad(x, _ints(pads), ctx.attr("mode"), value,
                None if axes is None else _ints(axes))


@kernel("CenterCropPad")
def center_crop_pad(ctx, x, shape):
    target = _ints(shape)
    axes = ctx.attr("axes")
    axes = list(range(x.ndim)) if axes is None else [axis_index(a, x.ndim) for a in axes]
    if len(axes) != len(target):
        raise EvaluationError(f"CenterCropPad shape {target} does not match axes {axes}")
    crop = [slice(None)] * x.ndim
    width = [(0, 0)] * x.ndim
    for a, t in zip(axes, target):
        d = x.shape[a]
        if t < d:
            s = (d - t) // 2
            crop[a] = slice(s, s + t)
        elif t > d:
            b = (t - d) // 2
            width[a] = (b, t - d - b)
    y = x[tuple(crop)]
    if any(b or e for b, e in width):
        _checked_shape([d + b + e for d, (b, e) in zip(y.shape, width)],
                       "CenterCropPad output shape", y.dtype, "the CenterCropPad output")
        y = np.pad(y, width, mode="constant")
    return y


# -- generators -----------------------------------------------------------------------------
@kernel("Shape")
def shape(ctx, x):
    dims = x.shape
    if ctx.opset >= 15:
        r = len(dims)
        start = ctx.attr("start")
        end = ctx.attr("end", r)
        start = min(max(start + r if start < 0 else start, 0), r)
        end = min(max(end + r if end < 0 else end, 0), r)
        dims = dims[start:end]
    return np.array(dims, dtype=np.int64)


@kernel("Size")
def size(ctx, x):
    return np.array(x.size, dtype=np.int64)


@kernel("ConstantOfShape")
def constant_of_shape(ctx, shape):
    value = ctx.attr("value")
    if value is None:
        value = np.zeros(1, np.float32)
    if value.size != 1:
        raise EvaluationError("ConstantOfShape value must hold one element")
    dims = _checked_shape(_ints(shape), "ConstantOfShape shape", value.dtype,
                          "the ConstantOfShape output")
    out = np.empty(dims, dtype=value.dtype)
    out[...] = value.reshape(())
    return out


@kernel("Range")
def range_(ctx, start, limit, delta):
    s, l, d = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    dt = s.dtype
    if dt.kind in "iu":
        si, li, di = int(s), int(l), int(d)
        if di == 0:
            raise EvaluationError("Range delta is 0")
        n = max(-(-(li - si) // di), 0)
        _checked_shape([n], "Range output", 16, "the Range output")  # (arange, product)
        return (si + np.arange(n, dtype=np.int64) * di).astype(dt)
    work = dt
    if dt not in (np.float32, np.float64):
        work = np.dtype(np.float32)  # stash_type=1 (the default) for float16/bfloat16
    sw, lw, dw = (v.astype(work) for v in (s, l, d))
    if float(dw) == 0:
        raise EvaluationError("Range delta is 0")
    n = max(int(math.ceil((float(lw) - float(sw)) / float(dw))), 0)
    _checked_shape([n], "Range output", 2 * np.dtype(work).itemsize, "the Range output")
    return (sw + np.arange(n, dtype=work) * dw).astype(dt)


@kernel("EyeLike")
def eye_like(ctx, x):
    from ...ir.dtypes import INFO
    if x.ndim != 2:
        raise EvaluationError(f"EyeLike input has rank {x.ndim}, not 2")
    code = ctx.attr("dtype")
    dt = x.dtype if code is None else INFO[code].dtype
    _checked_shape(x.shape, "EyeLike output shape", dt, "the EyeLike output")
    return np.eye(x.shape[0], x.shape[1], k=ctx.attr("k"), dtype=dt)


@kernel("Trilu")
def trilu(ctx, x, k=None):
    kk = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    return np.triu(x, kk) if ctx.attr("upper") else np.tril(x, kk)


@kernel("OneHot")
def one_hot(ctx, indices, depth, values):
    d = int(np.asarray(depth).reshape(-1)[0])
    if d < 0:
        raise EvaluationError(f"OneHot depth {d} is negative")
    idx = np.asarray(indices)
    if idx.dtype.kind == "f":
        idx = np.trunc(idx)
    idx = idx.astype(np.int64)
    idx = np.where(idx < 0, idx + d, idx)
    axis = ctx.attr("axis")
    rank = idx.ndim + 1
    axis = axis_index(axis, rank)
    # (the comparison's booleans, then the output of the values' type)
    _checked_shape(idx.shape + (d,), "OneHot output", np.dtype(np.bool_).itemsize
                   + np.asarray(values).dtype.itemsize, "the OneHot output")
    vals = np.asarray(values).reshape(-1)
    hot = np.expand_dims(idx, axis) == np.arange(d).reshape(
        (1,) * axis + (d,) + (1,) * (rank - axis - 1))
    return np.where(hot, vals[1], vals[0]).astype(vals.dtype, copy=False)


@kernel("NonZero")
def non_zero(ctx, x):
    if x.ndim == 0:
        return np.zeros((0, 1 if bool(x) else 0), dtype=np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@kernel("Identity")
def identity(ctx, x):
    return x


_CONSTANT_ATTRS = ("value", "sparse_value", "value_float", "value_floats", "value_int",
                   "value_ints", "value_string", "value_strings")


@kernel("Constant")
def constant(ctx):
    given = [n for n in _CONSTANT_ATTRS if n in ctx.attrs]
    if len(given) != 1:
        raise InvalidModelError(f"Constant needs exactly one value attribute, has {given}")
    name = given[0]
    v = ctx.attrs[name]
    if name in ("value", "sparse_value"):
        return v
    if name == "value_float":
        return np.array(v, dtype=np.float32)
    if name == "value_floats":
        return np.array(v, dtype=np.float32).reshape(-1)
    if name == "value_int":
        return np.array(v, dtype=np.int64)
    if name == "value_ints":
        return np.array(v, dtype=np.int64).reshape(-1)
    if name == "value_string":
        return np.array(v, dtype=object)
    arr = np.empty(len(v), dtype=object)
    arr[:] = v
    return arr


# -- rearrangements -------------------------------------------------------------------------
@kernel("DepthToSpace")
def depth_to_space(ctx, x):
    bs = ctx.attr("blocksize")
    mode = ctx.attr("mode", "DCR")
    b, c, h, w = x.shape
    if not bs or c % (bs * bs):
        raise EvaluationError(f"DepthToSpace: {c} channels do not divide by blocksize^2")
    if mode == "DCR":
        t = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        t = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        raise UnsupportedError(f"DepthToSpace mode {mode!r} is neither DCR nor CRD")
    return t.reshape(b, c // (bs * bs), h * bs, w * bs)


@kernel("SpaceToDepth")
def space_to_depth(ctx, x):
    bs = ctx.attr("blocksize")
    mode = ctx.attr("mode") if ctx.opset >= 28 else "DCR"
    b, c, h, w = x.shape
    if not bs or h % bs or w % bs:
        raise EvaluationError(f"SpaceToDepth: {h}x{w} does not divide by blocksize {bs}")
    t = x.reshape(b, c, h // bs, bs, w // bs, bs)
    if mode == "DCR":
        t = t.transpose(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        t = t.transpose(0, 1, 3, 5, 2, 4)
    else:
        raise UnsupportedError(f"SpaceToDepth mode {mode!r} is neither DCR nor CRD")
    return t.reshape(b, c * bs * bs, h // bs, w // bs)


@kernel("ReverseSequence")
def reverse_sequence(ctx, x, sequence_lens):
    batch_axis = ctx.attr("batch_axis")
    time_axis = ctx.attr("time_axis")
    lens = np.asarray(sequence_lens, dtype=np.int64).reshape(-1)
    T = x.shape[time_axis]
    t = np.arange(T).reshape(T, 1)
    L = lens.reshape(1, -1)
    src = np.where(t < L, L - 1 - t, t)  # [T, B]
    shape = [1] * x.ndim
    shape[time_axis] = T
    shape[batch_axis] = lens.size
    src = src if time_axis < batch_axis else src.T
    idx = np.broadcast_to(src.reshape(shape), x.shape)
    return np.take_along_axis(x, idx, axis=time_axis)


@kernel("Unique")
def unique(ctx, x):
    axis = ctx.attr("axis")
    is_sorted = ctx.attr("sorted")
    if axis is not None:
        axis = axis_index(axis, x.ndim)
    y, first, inverse, counts = np.unique(x if axis is not None else x.reshape(-1),
                                          return_index=True, return_inverse=True,
                                          return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not is_sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = np.take(y, order, axis=0 if axis is None else axis)
        first = first[order]
        counts = counts[order]
        inverse = rank[inverse]
    i64 = np.int64
    return y, first.astype(i64), inverse.astype(i64), counts.astype(i64)
