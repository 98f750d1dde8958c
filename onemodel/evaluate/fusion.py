"""Plan-time fusions: the attention chain ``MatMul -> Softmax -> MatMul``, ``Conv -> Relu`` and
``MatMul -> Add``.

Attention computes ``scores = q @ k`` ([..., m, n]), ``p = Softmax(scores)`` along the last axis
and ``p @ v``. Evaluated node by node, the scores and the probabilities are whole tensors
(batch x heads x m x n: 8 MiB for a batch of 32 sequences of 128 tokens and 4 heads) written and
read back from memory by every pass of the two products and the softmax. :func:`fuse_attention`
replaces the three steps of a plan by one whose kernel, :func:`attention_chain`, computes them a
block of the leading axis at a time (``BLOCK_BYTES`` of scores), so that the scores and
probabilities of a block stay in the cache. A block computes the scores with the built-in
product (``linalg.matmul_array``), their shifted exponentials and row sums as the built-in
Softmax does (``activations.shifted_exp_rows``: within spread x 2^-24 relative in float32, the
spread of a block), divides them by the row sums as Softmax does, and multiplies the
probabilities with ``v``; float32 operands run in the compiled kernel (``ckernels.attention``),
which computes the same six query rows at a time, reading the operands in place.
Results are therefore within the bounds of the nodes evaluated one by one (ONNX Part 1,
Clause 8.2: a runtime may evaluate a graph in any way that gives the semantics of its nodes).
A Mul that only the chain's first MatMul reads (exporters scale q and k by 1/sqrt(sqrt(d)) each)
runs inside the chain's step (:func:`scaled_attention_chain`): a float32 tensor times one float32
value is multiplied as the compiled kernel packs the operand, with the same float32 products;
any other Mul by its own kernel first. When a Transpose alone reads the chain's result (the
heads put back together), the compiled kernel writes the result in the Transpose's order, so
that the Transpose's view is packed and the Reshape after it needs no copy.

A chain is fused only when nothing else can see the two intermediate values: each is read by
exactly the next node of the chain, by no subgraph, and is no output the caller asked for; the
three nodes are in the default domain with the built-in kernels (no session or user kernel
replaces them), Softmax from opset 13 on along axis -1. Operands that are not float32 / float64
stacks of one batch shape are computed by the same kernels without blocks.

A Conv whose output only a Sigmoid and a Mul of the two read (SiLU: YOLO exports) runs with them
as one step (:func:`.kernels.conv.conv_silu`): the compiled Conv kernels apply ``y * sigmoid(y)``
as the outputs are stored, with the Sigmoid kernel's bits and the product the Mul rounds, so the
values are those of the three nodes.
A Conv whose output only a Relu reads runs with it as one step (:func:`.kernels.conv.conv_relu`,
with the Conv's attributes): the compiled Conv kernel applies the Relu to each output as it
stores it, which saves a pass over the output.

A MatMul whose product only an Add reads (the bias of a linear layer) runs with the Add as one
step that adds into the product's array (:func:`product_sum`): the same sums, one array fewer
written; with a Relu that alone reads the sum, the Relu too, in place (:func:`product_sum_relu`).
An Add whose sum only a LayerNormalization reads (the residual connection before a post-norm
transformer's LayerNormalization) runs with it (:func:`.kernels.norm.add_layer_norm`, with the
LayerNormalization's attributes): the compiled kernel forms each row's sum as it normalizes it.
A Reshape -> Transpose -> Reshape whose intermediates only the next node reads (an export
splitting heads out of a projection) runs as one step
(:func:`.kernels.shape.reshape_transpose_reshape`): a view of its input where the strides allow,
where the first Reshape alone would copy. A fused step fails as its nodes would (a ValueError
for shapes that do not fit, an EvaluationError of the step's last node whose message names every
fused node).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import EvaluationError
from . import ckernels, registry
from .kernels.activations import _softmax, _softmax_last, shifted_exp_rows
from .kernels.conv import conv_relu, conv_silu
from .kernels.linalg import matmul_array, memory_order
from .kernels.norm import add_layer_norm
from .kernels.shape import _ints, reshape_transpose_reshape

#: Bytes of scores one block of :func:`attention_chain` holds (within a level-2 cache).
BLOCK_BYTES = 1 << 19


def attention_chain(ctx, a, b, v, scale_a=None, scale_b=None, layout=None):
    """``MatMul(Softmax(MatMul(a, b), axis=-1), v)``, a block of the leading axis at a time.

    Args: ``a`` [..., m, k], ``b`` [..., k, n], ``v`` [..., n, d], of one element type;
    ``scale_a`` / ``scale_b``: None, or a float32 array of one value (and no more axes than the
    operand) that ``a`` / ``b`` is multiplied by first, as a Mul node before the chain computes
    it (the compiled kernel multiplies as it packs the operands); ``layout``: None, or the
    ``perm`` of the Transpose that alone reads the result: the compiled kernel lays the result
    out in that order, so that the Transpose's view is packed and a Reshape after it needs no
    copy. Returns the product [..., m, d]. Raises what the kernels raise (ValueError for
    shapes that do not multiply; the runner makes it an EvaluationError of the last node of the
    chain).
    """
    done = ckernels.attention(a, b, v, *(None if s is None else float(s.reshape(()))
                                          for s in (scale_a, scale_b)), layout=layout)
    if done is not None:  # the compiled kernel applies (float32)
        return done
    a = a if scale_a is None else np.multiply(a, scale_a)
    b = b if scale_b is None else np.multiply(b, scale_b)
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and isinstance(v, np.ndarray)
            and a.dtype in (np.float32, np.float64) and a.dtype == b.dtype == v.dtype
            and a.ndim >= 3 and a.ndim == b.ndim == v.ndim
            and a.shape[:-2] == b.shape[:-2] == v.shape[:-2]
            and a.shape[-1] == b.shape[-2] and b.shape[-1] == v.shape[-2] and a.size
            and b.size and v.size):
        s = matmul_array(a, b)
        return matmul_array(_softmax(s, s.ndim - 1), v)
    m, n = a.shape[-2], b.shape[-1]
    per_row = math.prod(a.shape[1:-2]) * m * n * a.itemsize  # scores of one leading index
    step = max(1, BLOCK_BYTES // max(per_row, 1))
    lead = a.shape[0]
    if step >= lead:
        return matmul_array(_softmax_last(matmul_array(a, b)), v)
    out = np.empty(a.shape[:-1] + (v.shape[-1],), dtype=a.dtype)
    # the operands packed once, each matrix contiguous (numpy multiplies a stack of scattered
    # matrices about twice as slowly); ``b`` as its transpose when its matrices are laid out by
    # columns (k of attention is usually a transposed view of [batch, seq, heads, d]): that copy
    # moves rows of d values, the other gathers single elements (measured: 0.12 ms against 1.4
    # for [32, 4, 16, 128]), and BLAS multiplies by the transpose as fast
    a, v = np.ascontiguousarray(a), np.ascontiguousarray(v)
    if b.strides[-2] < b.strides[-1]:
        b = np.swapaxes(np.ascontiguousarray(np.swapaxes(b, -1, -2)), -1, -2)
    else:
        b = np.ascontiguousarray(b)
    e = None
    for i in range(0, lead, step):
        s = matmul_array(a[i:i + step], b[i:i + step])
        if e is None or e.shape != s.shape:
            e = np.empty_like(s)
        e, sums = shifted_exp_rows(s, e)
        # the probabilities as Softmax rounds them (e / row sum), then their product with v:
        # dividing the product instead would overflow where |v| n exceeds the largest float
        np.divide(e, sums[..., None], out=e)
        np.matmul(e, v[i:i + step], out=out[i:i + step])
    return out


def _scale_operand(mul_step, x, y):
    """The operands of a Mul feeding the attention chain, as (tensor, scale) when one is a
    float32 array of one value with no more axes than the other, float32 tensor (the chain then
    multiplies, with the same float32 products: multiplication commutes); otherwise (the Mul's
    result by its own kernel, None)."""
    for t, sc in ((x, y), (y, x)):
        if (isinstance(t, np.ndarray) and isinstance(sc, np.ndarray) and t.dtype == np.float32
                and sc.dtype == np.float32 and sc.size == 1 and sc.ndim <= t.ndim):
            return t, sc
    ctx = mul_step.ctx
    return mul_step.fn(ctx if ctx is not None else _MulContext(mul_step), x, y), None


class _MulContext:
    """The context a Mul kernel is called with inside a fused step (Mul reads no attribute)."""

    def __init__(self, st):
        self.node, self.opset = st.node, st.opset

    def attr(self, name, default=None):
        return default


def scaled_attention_chain(mul_a, mul_b, layout=None):
    """The kernel of an attention chain whose ``a`` and / or ``b`` is the product of a Mul that
    only the chain reads (the scaling of q and k by 1/sqrt(sqrt(d)) that exporters emit):
    ``mul_a`` / ``mul_b`` are those Mul steps or None, and the kernel takes the Mul's two
    operands in place of each such input. A float32 tensor times one float32 value is scaled
    inside the chain (:func:`attention_chain`), which saves writing and reading the product.
    ``layout``: the perm of a Transpose that alone reads the chain's result (see
    :func:`attention_chain`)."""

    def kernel(ctx, *xs):
        xs = list(xs)
        a, sa = _scale_operand(mul_a, xs.pop(0), xs.pop(0)) if mul_a else (xs.pop(0), None)
        b, sb = _scale_operand(mul_b, xs.pop(0), xs.pop(0)) if mul_b else (xs.pop(0), None)
        return attention_chain(ctx, a, b, xs[0], sa, sb, layout)

    kernel.__name__ = kernel.__qualname__ = (
        "attention_chain" + ("_scaled" if mul_a or mul_b else "")
        + ("_laid_out" if layout is not None else ""))
    return kernel


def _builtin(st, op_type: str) -> bool:
    return (st.fn is not None and st.body is None
            and not registry.normalize_domain(st.node.domain)
            and st.node.op_type == op_type
            and st.fn is registry.lookup("", op_type, st.opset, user=False))


def fuse_attention(steps: list, captured: set[str], kept: set[str], make_step) -> list:
    """The plan's steps with each fusable ``MatMul -> Softmax -> MatMul`` chain replaced by one
    step at the place of its last node (see the module docstring for when a chain is fused).

    Also each ``MatMul -> Add`` whose product only the Add reads (:func:`product_sum`) and each
    ``Conv -> Relu`` whose output only the Relu reads (a step of the Conv with the Relu's
    outputs).
    ``captured``: names subgraphs read; ``kept``: names the plan returns; ``make_step(step, ins,
    kernel)``: a copy of ``step`` (the chain's last node, or the Conv of ``Conv -> Relu``)
    running ``kernel`` on ``ins``.
    """
    readers: dict[str, list[int]] = {}
    for pos, st in enumerate(steps):
        for name in st.ins:
            if name:
                readers.setdefault(name, []).append(pos)

    def only_reader(name: str) -> int | None:
        if not name or name in captured or name in kept:
            return None
        r = readers.get(name, [])
        return r[0] if len(r) == 1 else None

    drop: set[int] = set()
    replace: dict[int, object] = {}

    def free(pos: int) -> bool:  # not fused yet
        return pos not in drop and pos not in replace

    def next_step(name: str) -> int | None:  # the one reader of ``name``, if not fused yet
        j = only_reader(name)
        return j if j is not None and free(j) else None

    producer = {name: pos for pos, st in enumerate(steps) for name in st.outs if name}

    def scale_mul(name: str, reader: int) -> int | None:  # a Mul only ``reader`` reads
        p = producer.get(name)
        if p is None or not free(p) or only_reader(name) != reader:
            return None
        mul = steps[p]
        ok = (_builtin(mul, "Mul") and len(mul.ins) == 2 and all(mul.ins)
              and len(mul.outs) == 1 and mul.opset >= 7)
        return p if ok else None

    for pos, st in enumerate(steps):
        if not (free(pos) and _builtin(st, "MatMul") and len(st.ins) == 2 and all(st.ins)
                and len(st.outs) == 1):  # (the last MatMul of a chain starts none)
            continue
        j = next_step(st.outs[0])
        if j is None:
            continue
        sm = steps[j]
        if not (_builtin(sm, "Softmax") and sm.opset >= 13 and sm.attrs.get("axis", -1) == -1
                and len(sm.ins) == 1 and len(sm.outs) == 1):
            continue
        k = next_step(sm.outs[0])
        if k is None:
            continue
        last = steps[k]
        if not (_builtin(last, "MatMul") and len(last.ins) == 2 and last.ins[0] == sm.outs[0]
                and last.ins[1] and last.ins[1] != sm.outs[0]):
            continue
        drop.update((pos, j))
        muls = [scale_mul(name, pos) for name in st.ins]
        ins: list[str] = []
        for name, mp in zip(st.ins, muls):
            if mp is None:
                ins.append(name)
            else:
                drop.add(mp)
                ins.extend(steps[mp].ins)
        t = next_step(last.outs[0]) if len(last.outs) == 1 else None
        perm = steps[t].attrs.get("perm") if t is not None and _builtin(steps[t], "Transpose") \
            else None
        layout = tuple(int(i) for i in perm) if perm else None
        kernel = (attention_chain if muls == [None, None] and layout is None else
                  scaled_attention_chain(*(None if mp is None else steps[mp] for mp in muls),
                                         layout))
        chain = [steps[mp] for mp in muls if mp is not None] + [st, sm, last]
        replace[k] = make_step(last, ins + [last.ins[1]], _described(kernel, chain))
    for pos, st in enumerate(steps):
        if not (free(pos) and _builtin(st, "MatMul") and len(st.ins) == 2 and all(st.ins)
                and len(st.outs) == 1):
            continue
        j = next_step(st.outs[0])
        if j is None:
            continue
        add = steps[j]
        if not (_builtin(add, "Add") and add.opset >= 7 and len(add.ins) == 2
                and add.ins[0] != add.ins[1] and all(add.ins)):
            continue
        first = add.ins[0] == st.outs[0]
        other = add.ins[1] if first else add.ins[0]
        drop.add(pos)
        k = next_step(add.outs[0]) if len(add.outs) == 1 else None
        relu = steps[k] if k is not None else None
        if relu is not None and _builtin(relu, "Relu") and relu.ins == add.outs \
                and len(relu.outs) == 1:  # a linear layer and its activation
            drop.add(j)
            replace[k] = make_step(relu, [st.ins[0], st.ins[1], other], _described(
                product_sum_relu if first else sum_product_relu, [st, add, relu]))
            continue
        replace[j] = make_step(add, [st.ins[0], st.ins[1], other],
                               _described(product_sum if first else sum_product, [st, add]))
    for pos, st in enumerate(steps):
        if not (free(pos) and _builtin(st, "Conv") and 2 <= len(st.ins) <= 3
                and len(st.outs) == 1):
            continue
        j = next_step(st.outs[0])
        if j is None:
            continue
        relu = steps[j]
        if not (_builtin(relu, "Relu") and len(relu.ins) == 1 and len(relu.outs) == 1):
            continue
        fused = make_step(st, st.ins, _described(conv_relu, [st, relu]))
        fused.outs = list(relu.outs)
        drop.add(pos)
        replace[j] = fused
    for pos, st in enumerate(steps):  # Conv -> Sigmoid -> Mul(conv, sigmoid): SiLU
        if not (free(pos) and _builtin(st, "Conv") and 2 <= len(st.ins) <= 3
                and len(st.outs) == 1 and st.outs[0] and st.outs[0] not in captured
                and st.outs[0] not in kept):
            continue
        r = readers.get(st.outs[0], [])
        if len(r) != 2 or not all(free(i) for i in r):
            continue
        sig, mul = (steps[r[0]], steps[r[1]]) if _builtin(steps[r[0]], "Sigmoid") else \
            (steps[r[1]], steps[r[0]])
        i_sig, i_mul = (r[0], r[1]) if sig is steps[r[0]] else (r[1], r[0])
        if not (_builtin(sig, "Sigmoid") and sig.ins == st.outs and len(sig.outs) == 1
                and _builtin(mul, "Mul") and mul.opset >= 7 and len(mul.outs) == 1
                and sorted(mul.ins) == sorted([st.outs[0], sig.outs[0]])
                and only_reader(sig.outs[0]) == i_mul):
            continue
        fused = make_step(st, st.ins, _described(conv_silu, [st, sig, mul]))
        fused.outs = list(mul.outs)
        drop.update((pos, i_sig))
        replace[i_mul] = fused
    for pos, st in enumerate(steps):
        if not (free(pos) and _builtin(st, "Add") and st.opset >= 7 and len(st.ins) == 2
                and all(st.ins) and len(st.outs) == 1):
            continue
        j = next_step(st.outs[0])
        if j is None:
            continue
        ln = steps[j]
        if not (_builtin(ln, "LayerNormalization") and 2 <= len(ln.ins) <= 3
                and ln.ins[0] == st.outs[0] and st.outs[0] not in ln.ins[1:]):
            continue
        drop.add(pos)
        replace[j] = make_step(ln, list(st.ins) + list(ln.ins[1:]),
                               _described(add_layer_norm, [st, ln]))
    for pos, st in enumerate(steps):
        if not (free(pos) and _builtin(st, "Reshape") and st.opset >= 5 and len(st.ins) == 2
                and all(st.ins) and len(st.outs) == 1):
            continue
        j = next_step(st.outs[0])
        if j is None or not (_builtin(steps[j], "Transpose") and len(steps[j].outs) == 1):
            continue
        k = next_step(steps[j].outs[0])
        last = steps[k] if k is not None else None
        if not (last is not None and _builtin(last, "Reshape") and last.opset >= 5
                and len(last.ins) == 2 and all(last.ins) and last.ins[0] == steps[j].outs[0]):
            continue
        drop.update((pos, j))
        replace[k] = make_step(last, [st.ins[0], st.ins[1], last.ins[1]], _described(
            _view_chain(st, steps[j], last), [st, steps[j], last]))
    if not replace:
        return steps
    return [replace.get(pos, st) for pos, st in enumerate(steps) if pos not in drop]


def _view_chain(first, transpose, last):
    """The kernel of ``Reshape -> Transpose -> Reshape`` (:func:`.kernels.shape.
    reshape_transpose_reshape`: a view where the nodes one by one would copy), with the three
    nodes' attributes."""
    def allowzero(st):
        return int(st.attrs.get("allowzero", 0) or 0) if st.opset >= 14 else 0

    z1, z2 = allowzero(first), allowzero(last)
    perm = transpose.attrs.get("perm")

    def reshape_view_chain(ctx, x, shape1, shape2):
        for shape in (shape1, shape2):
            if np.ndim(shape) != 1:
                raise EvaluationError(f"a shape input is {np.ndim(shape)}-D, not 1-D")
        return reshape_transpose_reshape(x, _ints(shape1), z1, perm, _ints(shape2), z2)

    return reshape_view_chain


def _described(kernel, chain: list):
    """``kernel`` with a failure (ValueError: shapes that do not fit; EvaluationError: a
    kernel's own check) naming the fused nodes: the runner reports it as the step's last node's,
    the message says which node of the chain it may have been."""
    names = " -> ".join(f"{st.node.op_type}" + (f" '{st.node.name}'" if st.node.name else "")
                        + f" (node {st.index})" for st in chain)

    def fused(ctx, *args):
        try:
            return kernel(ctx, *args)
        except ValueError as e:
            raise ValueError(f"in the fused {names}: {e}") from e
        except EvaluationError as e:
            if e.path is not None:  # (described already where it happened)
                raise
            raise EvaluationError(f"in the fused {names}: {e.message}") from e

    fused.__name__ = fused.__qualname__ = kernel.__name__
    fused.fused = kernel
    return fused


def _sum_into_product(y, c, relu: bool, c_first: bool = False):
    """``y + c`` (``c + y`` when ``c_first``: the graph's order), then max(., 0) when ``relu``,
    into the product ``y``'s own new array when ``c`` broadcasts to it with its element type
    (float32 / float64), which saves writing a second array; otherwise ``numpy.add`` as the Add
    kernel computes it. A float32 bias along the last axis of a packed product (or of a
    permutation of one with its last axis last, as the product of a transposed view is) runs
    in the compiled kernel (``ckernels.bias_relu``: the sum and Relu in one pass). Same values
    either way."""
    packed = memory_order(y) if y.ndim >= 3 and not y.flags.c_contiguous else (y, None)
    if packed is not None and ckernels.bias_relu(packed[0], c, relu, out=packed[0]) is not None:
        return y  # (summed in place through its packed view)
    if (isinstance(c, np.ndarray) and y.dtype in (np.float32, np.float64) and c.dtype == y.dtype
            and c.ndim <= y.ndim and np.broadcast_shapes(y.shape, c.shape) == y.shape):
        s = np.add(c, y, out=y) if c_first else np.add(y, c, out=y)
    else:
        s = np.asarray(np.add(c, y) if c_first else np.add(y, c))
    return np.maximum(s, np.zeros((), s.dtype), out=s) if relu else s


def product_sum(ctx, a, b, c):
    """``Add(MatMul(a, b), c)`` (:func:`_sum_into_product`)."""
    # (1-D by 1-D: a numpy scalar, made a 0-d array)
    return _sum_into_product(np.asarray(matmul_array(a, b)), c, False)


def sum_product(ctx, a, b, c):
    """``Add(c, MatMul(a, b))``, as :func:`product_sum`."""
    return _sum_into_product(np.asarray(matmul_array(a, b)), c, False, c_first=True)


def product_sum_relu(ctx, a, b, c):
    """``Relu(Add(MatMul(a, b), c))``: the sum and max(., 0) in place on the product's new
    array (one array and one allocation fewer than the Relu node's). Same values."""
    return _sum_into_product(np.asarray(matmul_array(a, b)), c, True)


def sum_product_relu(ctx, a, b, c):
    """``Relu(Add(c, MatMul(a, b)))``, as :func:`product_sum_relu`."""
    return _sum_into_product(np.asarray(matmul_array(a, b)), c, True, c_first=True)
