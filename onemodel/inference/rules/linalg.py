"""Inference rules of linear algebra (the kernels of ``onemodel/evaluate/kernels/linalg.py``,
same keys and versions): MatMul, Gemm, Einsum, Det.

Shapes (ONNX Part 1, operator definitions of Clause 14.3; broadcasting Clause 6.6):

* MatMul (numpy.matmul): a 1-D A is ``[1, K]`` and a 1-D B ``[K, 1]``, the added axis removed
  from the result; the batch axes (all but the last two) broadcast multidirectionally; the
  result ``[*batch, M, N]``. A's K and B's K must be equal (a contradiction when they cannot
  be), as must be ranks of at least 1.
* Gemm: A ``[M, K]`` (``[K, M]`` with ``transA``), B ``[K, N]`` (``[N, K]`` with ``transB``),
  the output ``[M, N]``; C must broadcast unidirectionally to it (Clause 6.6.3).
* Einsum: the equation's output term (explicit after ``->``, or the labels that occur once, in
  alphabetical order, after the broadcast ellipsis axes); a label's extent is the broadcast of
  its occurrences (numpy's einsum lets an extent 1 stretch), the ellipsis axes the broadcast of
  each input's. A term that does not match its input's rank is a contradiction.
* Det: ``[*, M, M]`` gives ``[*]``.
"""

from __future__ import annotations

from ...operators import rule
from .. import dims as D


def matmul_shape(ctx, a, b) -> list | None:
    """The shape of ``numpy.matmul(a, b)`` (module doc), or None when a rank is unknown."""
    sa, sb = a.shape, b.shape
    if sa is None or sb is None:
        return None
    if len(sa) == 0 or len(sb) == 0:
        ctx.contradiction("a MatMul operand has rank 0")
        return None
    xa = (1,) + tuple(sa) if len(sa) == 1 else tuple(sa)
    xb = tuple(sb) + (1,) if len(sb) == 1 else tuple(sb)
    ctx.unify(xa[-1], xb[-2], "inner extents")
    batch = ctx.broadcast(list(xa[:-2]), list(xb[:-2]), what="batch axes")
    if batch is None:
        return None
    out = batch + ([xa[-2]] if len(sa) > 1 else []) + ([xb[-1]] if len(sb) > 1 else [])
    return out


@rule("MatMul")
def matmul(ctx, a, b):
    """MatMul: numpy.matmul's shape (module doc)."""
    return matmul_shape(ctx, a, b)


@rule("Gemm")
def gemm(ctx, a, b, c=None):
    """Gemm: ``[M, N]`` (module doc)."""
    sa, sb = a.shape, b.shape
    for s, what in ((sa, "A"), (sb, "B")):
        if s is not None and len(s) != 2:
            ctx.contradiction(f"{what} has shape {D.shape_text(s)}; rank 2 is needed")
            return [None, None]
    m = k1 = k2 = n = None
    if sa is not None:
        m, k1 = (sa[1], sa[0]) if ctx.attr("transA") else (sa[0], sa[1])
    if sb is not None:
        k2, n = (sb[1], sb[0]) if ctx.attr("transB") else (sb[0], sb[1])
    ctx.unify(k1, k2, "inner extents")
    if c is not None and c.shape is not None:
        sc = c.shape
        if len(sc) > 2:
            ctx.contradiction(f"C has shape {D.shape_text(sc)}; at most rank 2 is needed")
        else:
            full = [m, n]
            for i, e in enumerate(sc):
                j = 2 - len(sc) + i
                if type(e) is int and e != 1:   # C's extent other than 1 is the output's
                    full[j] = ctx.unify(full[j], e, "C and output extents")
            m, n = full
    return [m, n]


def _parse(eq: str):
    """(input terms, output term or None) of an Einsum equation, each a list of labels with
    ``"..."`` for the ellipsis; None when malformed."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")

    def term(t):
        out = []
        i = 0
        while i < len(t):
            if t.startswith("...", i):
                if "..." in out:
                    return None
                out.append("...")
                i += 3
            elif t[i].isalpha():
                out.append(t[i])
                i += 1
            else:
                return None
        return out

    ins = [term(t) for t in lhs.split(",")]
    out = term(rhs) if arrow else None
    if any(t is None for t in ins) or (arrow and out is None):
        return None
    return ins, out


@rule("Einsum")
def einsum(ctx, *xs):
    """Einsum: the output term's extents (module doc)."""
    eq = ctx.attr("equation") or ""
    if isinstance(eq, bytes):
        eq = eq.decode("utf-8", "replace")
    parsed = _parse(eq)
    if parsed is None:
        ctx.contradiction(f"equation {eq!r} is not an Einsum equation")
        return None
    ins, out = parsed
    if len(ins) != len(xs):
        ctx.contradiction(f"equation {eq!r} has {len(ins)} terms for {len(xs)} inputs")
        return None
    if out is None:
        seen = [lab for t in ins for lab in t if lab != "..."]
        out = (["..."] if any("..." in t for t in ins) else []) + \
            sorted(lab for lab in set(seen) if seen.count(lab) == 1)
    labels: dict = {}
    ell = []
    ell_known = True
    for t, v in zip(ins, xs):
        s = v.shape if v is not None else None
        if s is None:
            ell_known = ell_known and "..." not in t
            for lab in t:
                labels.setdefault(lab, [])
                if lab != "...":
                    labels[lab].append(None)
            continue
        n_lab = len(t) - ("..." in t)
        if len(s) < n_lab or ("..." not in t and len(s) != n_lab):
            ctx.contradiction(f"term {''.join(t)!r} does not fit an input of rank {len(s)}")
            return None
        k = 0
        for lab in t:
            if lab == "...":
                n_e = len(s) - n_lab
                ell.append(list(s[k:k + n_e]))
                k += n_e
            else:
                labels.setdefault(lab, []).append(s[k])
                k += 1
    extent = {lab: (ctx.broadcast(*[[d] for d in ds], what=f"label {lab!r} extents") or [None])[0]
              if ds else None for lab, ds in labels.items() if lab != "..."}
    shape = []
    for lab in out:
        if lab == "...":
            if not ell_known:
                return None
            b = ctx.broadcast(*ell, what="ellipsis axes") if ell else []
            if b is None:
                return None
            shape += b
        elif lab not in extent:
            ctx.contradiction(f"output label {lab!r} is not in any input term")
            return None
        else:
            shape.append(extent[lab])
    return shape


@rule("Det")
def det(ctx, x):
    """Det: ``[*, M, M]`` gives ``[*]``."""
    s = x.shape
    if s is None:
        return None
    if len(s) < 2:
        ctx.contradiction(f"the input has shape {D.shape_text(s)}; at least rank 2 is needed")
        return None
    ctx.unify(s[-2], s[-1], "matrix extents")
    return list(s[:-2])
