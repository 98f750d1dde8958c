"""What ``onemodel info`` shows: a model's header facts, interface, operators and weights.

:func:`summarize` returns plain data (JSON-ready); the CLI prints it.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter

from .ir import EXTERNAL, Model, all_tensors, iter_graphs
from .ir.dtypes import name_of
from .ir.entries import entries_to_dict, normalize_domain

_OP_KEY = attrgetter("domain", "op_type")
_DOMAIN, _OP_TYPE = attrgetter("domain"), attrgetter("op_type")


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
    pairs: Counter = Counter()  # (domain as written, op_type) -> nodes
    nodes = 0
    init_count, init_bytes = 0, 0
    by_code: dict[int, list[int]] = {}  # data_type -> [count, bytes] of the initializers
    nbytes: dict[int, int] = {}  # id(tensor) -> bytes, for the initializers (each sized once)
    if g is not None:
        for _, graph in iter_graphs(g):
            nodes += len(graph.nodes)
            if not any(map(normalize_domain, set(map(_DOMAIN, graph.nodes)))):
                # every node in the default domain (the usual graph): count op_types alone
                pairs.update({("", op): n for op, n in Counter(map(_OP_TYPE, graph.nodes)).items()})
            else:
                pairs.update(map(_OP_KEY, graph.nodes))
            for t in graph.initializers:
                nb = nbytes[id(t)] = t.nbytes
                init_count += 1
                init_bytes += nb
                e = by_code.get(t.data_type or 0)
                if e is None:
                    e = by_code[t.data_type or 0] = [0, 0]
                e[0] += 1
                e[1] += nb
    ops: Counter = Counter()
    for (domain, op_type), n in pairs.items():
        d = normalize_domain(domain)
        ops[f"{d}.{op_type}" if d else (op_type or "")] += n
    by_dtype: dict[str, dict] = {}
    for code, (count, nb) in by_code.items():  # two codes may print alike ("dtype(99)")
        e = by_dtype.setdefault(name_of(code), {"count": 0, "bytes": 0})
        e["count"] += count
        e["bytes"] += nb
    tensor_count, tensor_bytes, external = 0, 0, 0
    for t in all_tensors(model):  # every tensor once; the initializers are sized already
        nb = nbytes.get(id(t))
        tensor_bytes += t.nbytes if nb is None else nb
        tensor_count += 1
        if t.data_location == EXTERNAL:
            external += 1
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
        "tensors": {"count": tensor_count, "bytes": tensor_bytes, "external": external},
        "functions": [f"{f.domain or ''}.{f.name or ''}" for f in model.functions],
        "metadata": entries_to_dict(model.metadata_props),
    }
