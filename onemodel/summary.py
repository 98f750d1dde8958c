"""What ``onemodel info`` shows: a model's header facts, interface, operators and weights.

:func:`summarize` returns plain data (JSON-ready); the CLI prints it.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain
from math import prod
from operator import attrgetter

from .errors import OneModelError
from .ir import EXTERNAL, INFO, Model, all_tensors, iter_graphs
from .ir.dtypes import name_of
from .ir.entries import entries_to_dict, normalize_domain
from .limits import MAX_ELEMENT_COUNT

_DOMAIN, _OP_TYPE = attrgetter("domain"), attrgetter("op_type")
_OP_KEY = attrgetter("domain", "op_type")
_DIMS, _CODE, _LOCATION = attrgetter("dims"), attrgetter("data_type"), attrgetter("data_location")


def _sizes(tensors: list) -> dict[int, list[int]]:
    """``{data_type: [tensors, bytes, elements]}`` of ``tensors`` (``data_type`` 0 when
    absent), bytes as :attr:`~onemodel.ir.Tensor.nbytes` gives them (raw storage, ``ceil(count
    * bits / 8)`` per tensor, 0 for STRING and tags outside Table 5).

    The element counts come from one ``math.prod`` per tensor and a few C-level passes over the
    lists; when a tensor has more than 16 dims, a negative one or 2^60 elements or more, every
    tensor is sized by ``nbytes`` and ``size`` instead, which raise what they raise for such
    dims.
    """
    if not tensors:
        return {}
    codes = list(map(_CODE, tensors))
    if None in codes:
        codes = [c or 0 for c in codes]
    dims = list(map(_DIMS, tensors))
    counts = None  # (16 dims below 2^64 each: a product of at most 1024 bits)
    if max(map(len, dims)) <= 16 and min(chain.from_iterable(dims), default=0) >= 0:
        counts = list(map(prod, dims))
        if max(counts) >= MAX_ELEMENT_COUNT:
            counts = None
    if counts is None:  # nbytes raises for bad dims (not for a tag outside Table 5, as before)
        per_code: dict[int, list[int]] = {}
        for code, t in zip(codes, tensors):
            e = per_code.setdefault(code, [0, 0, 0])
            e[0] += 1
            e[1] += t.nbytes
            e[2] += t.size if code in INFO else _count_or_zero(t)
        return per_code
    kinds = set(codes)
    if len(kinds) == 1:
        grouped = {codes[0]: counts}
    else:
        grouped = {code: [] for code in kinds}
        for code, n in zip(codes, counts):
            grouped[code].append(n)
    out = {}
    for code, ns in grouped.items():
        info = INFO.get(code)
        bits = info.bits if info is not None else 0
        if bits % 8 == 0:  # whole octets per element: the sum of the ceilings is exact
            nbytes = sum(ns) * bits // 8
        else:
            nbytes = sum((n * bits + 7) // 8 for n in ns)
        out[code] = [len(ns), nbytes, sum(ns)]
    return out


def _count_or_zero(t) -> int:
    """The element count of ``t``, or 0 where its dims give none (a tag outside Table 5 has
    no size, and is not refused for its dims, as ``nbytes`` does not look at them)."""
    try:
        return t.size
    except OneModelError:
        return 0


def _value(vi) -> dict:
    t = vi.type
    out = {"name": vi.name or "", "type": str(t) if t is not None else "?"}
    if t is not None and t.elem_type is not None:
        out["elem_type"] = name_of(t.elem_type)
        shape = t.shape
        out["shape"] = None if shape is None else shape.values
    return out


def summarize(model: Model) -> dict:
    """A JSON-ready summary of ``model``.

    Keys: ``format``, ``source``, ``ir_version``, ``opsets`` (list of {domain, version}),
    ``producer``, ``inputs`` / ``outputs`` (name, type, elem_type, shape with dims as int, str
    (dim_param) or None), ``nodes`` (total over every graph), ``ops`` ({op_type: count}, domain
    prefixed when not the default), ``initializers`` ({count, bytes, parameters (elements),
    by_dtype: {dtype: {count, bytes, parameters}}}), ``tensors`` (every tensor anywhere: count
    and bytes), ``functions``, ``metadata``.
    Bytes are raw-storage sizes.
    """
    g = model.graph
    pairs: Counter = Counter()  # (domain as written, op_type) -> nodes
    nodes = 0
    initializers: list = []  # of the graph and its subgraphs
    if g is not None:
        for _, graph in iter_graphs(g):
            nodes += len(graph.nodes)
            if not any(map(normalize_domain, set(map(_DOMAIN, graph.nodes)))):
                # every node in the default domain (the usual graph): count op_types alone
                pairs.update({("", op): n for op, n in Counter(map(_OP_TYPE, graph.nodes)).items()})
            else:
                pairs.update(map(_OP_KEY, graph.nodes))
            initializers += graph.initializers
    ops: Counter = Counter()
    for (domain, op_type), n in pairs.items():
        d = normalize_domain(domain)
        ops[f"{d}.{op_type}" if d else (op_type or "")] += n
    by_code = _sizes(initializers)
    by_dtype: dict[str, dict] = {}
    for code, (count, nb, elements) in by_code.items():  # two codes may print alike
        e = by_dtype.setdefault(name_of(code), {"count": 0, "bytes": 0, "parameters": 0})
        e["count"] += count
        e["bytes"] += nb
        e["parameters"] += elements
    init_bytes = sum(e[1] for e in by_code.values())
    tensors = all_tensors(model)  # every tensor once, the initializers among them
    # as many as the initializers: they are all there is (the usual model), sized already
    tensor_bytes = init_bytes if len(tensors) == len(initializers) else sum(
        e[1] for e in _sizes(tensors).values())
    external = list(map(_LOCATION, tensors)).count(EXTERNAL)
    return {
        "format": model.format,
        "source": model.source,
        "ir_version": model.ir_version,
        "opsets": [{"domain": o.domain or "", "version": o.version} for o in model.opset_imports],
        "producer": {"name": model.producer_name or "", "version": model.producer_version or ""},
        "domain": model.domain or "",
        "model_version": model.model_version,
        "graph": (g.name or "") if g is not None else None,
        "inputs": [_value(v) for v in g.inputs] if g is not None else [],
        "outputs": [_value(v) for v in g.outputs] if g is not None else [],
        "nodes": nodes,
        "ops": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "initializers": {"count": len(initializers), "bytes": init_bytes,
                         "parameters": sum(e[2] for e in by_code.values()),
                         "by_dtype": dict(sorted(by_dtype.items()))},
        "tensors": {"count": len(tensors), "bytes": tensor_bytes, "external": external},
        "functions": [f"{f.domain or ''}.{f.name or ''}" for f in model.functions],
        "metadata": entries_to_dict(model.metadata_props),
    }
