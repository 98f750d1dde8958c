"""Field paths in ONNX terms (``ModelProto.graph.node[3].attribute[0]``) for error messages."""

from __future__ import annotations

from .schema import BY_CLASS, MESSAGE


def proto_path(root, target, root_name: str | None = None) -> str | None:
    """The path from ``root`` to the record ``target`` (compared by identity), in proto field
    names, or ``None`` when ``target`` is not inside ``root``. Iterative: any depth is safe."""
    msg = BY_CLASS.get(type(root))
    if msg is None:
        return None
    name = root_name or msg.proto_name
    stack = [(root, name)]
    while stack:
        obj, path = stack.pop()
        if obj is target:
            return path
        m = BY_CLASS[type(obj)]
        for f in m.fields:
            if f.kind != MESSAGE:
                continue
            v = getattr(obj, f.name)
            if v is None:
                continue
            if f.repeated:
                for i, item in enumerate(v):
                    stack.append((item, f"{path}.{f.proto_name}[{i}]"))
            else:
                stack.append((v, f"{path}.{f.proto_name}"))
    return None
