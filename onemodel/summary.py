"""What ``onemodel info`` shows: a model's header facts, interface, operators and weights.

:func:`summarize` returns plain data (JSON-ready); the CLI prints it.
"""

from __future__ import annotations

from collections import Counter

from .ir import Model, iter_graphs, iter_tensors
from .ir.dtypes import name_of
from .ir.entries import entries_to_dict, normalize_domain


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
    prefixed when not the default), ``initializers`` ({count, bytes, by_dtype: {dtype: {count,
    bytes}}}), ``tensors`` (every tensor anywhere: count and bytes), ``functions``, ``metadata``.
    Bytes are raw-storage sizes.
    """
    g = model.graph
    ops: Counter = Counter()
    nodes = 0
    init_count, init_bytes = 0, 0
    by_dtype: dict[str, dict] = {}
    if g is not None:
        for _, graph in iter_graphs(g):
            for n in graph.nodes:
                nodes += 1
                d = normalize_domain(n.domain)
                ops[f"{d}.{n.op_type}" if d else (n.op_type or "")] += 1
            for t in graph.initializers:
                init_count += 1
                nb = t.nbytes
                init_bytes += nb
                e = by_dtype.setdefault(name_of(t.data_type or 0), {"count": 0, "bytes": 0})
                e["count"] += 1
                e["bytes"] += nb
    all_tensors = [t for _, t in iter_tensors(model)]
    external = sum(1 for t in all_tensors if t.is_external)
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
        "initializers": {"count": init_count, "bytes": init_bytes,
                         "by_dtype": dict(sorted(by_dtype.items()))},
        "tensors": {"count": len(all_tensors), "bytes": sum(t.nbytes for t in all_tensors),
                    "external": external},
        "functions": [f"{f.domain or ''}.{f.name or ''}" for f in model.functions],
        "metadata": entries_to_dict(model.metadata_props),
    }
