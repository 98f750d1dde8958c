"""Naming how a model differs from the one signed: each tensor by name and path (changed,
added, removed, renamed, holding another signed tensor's contents), then each structural
difference (a node and its attribute, an opset import, a metadata entry), by comparing the
signed structure (``encode(M')`` of docs/content-digest.md, in the ``onemodel`` predicate
field) with the model's, field by field (:func:`onemodel.verify.compare_models`)."""

from __future__ import annotations

import hashlib
import re

#: At most this many structural differences are named (the rest counted).
MAX_NAMED = 20
#: At most this many field differences are compared (those inside a list whose elements were
#: added or removed are named by that list's difference, not one by one).
_COMPARED = 1000


def _keyed(tensors: dict) -> dict:
    """path -> (name, digest) keyed by (name, occurrence) for a named tensor (a name is what
    identifies it across an insertion or removal), by (None, path) for an unnamed one."""
    seen: dict[str, int] = {}
    out = {}
    for p, (n, d) in tensors.items():
        if n:
            k = (n, seen.get(n, 0))
            seen[n] = k[1] + 1
        else:
            k = (None, p)
        out[k] = (p, n, d)
    return out


def _label(n: str) -> str:
    return n or "(unnamed)"


def differences(model, actual: dict, read: set[str], signed) -> list[str]:
    """What differs between ``model`` (its tensors' digests ``actual``: path -> (name,
    digest), those of paths outside ``read`` taken from the signature, not read) and the signed
    ``signed`` (:class:`onemodel.signing.verify._Signed`), one sentence each: tensors first,
    then the structure (``structure: ...``; without signed structure octets, one sentence that
    it differs)."""
    s_keyed, a_keyed = _keyed(signed.tensors), _keyed(actual)
    missing = [k for k in s_keyed if k not in a_keyed]
    added = [k for k in a_keyed if k not in s_keyed]
    problems = []
    for k in list(added):  # a tensor renamed in place: another name at the signed path
        p, n, _ = a_keyed[k]
        old = next((m for m in missing if s_keyed[m][0] == p), None)
        if old is not None:
            problems.append(f"tensor {_label(s_keyed[old][1])} at {p} was renamed to "
                            f"{_label(n)}")
            missing.remove(old)
            added.remove(k)
    for k in missing:
        p, n, _ = s_keyed[k]
        problems.append(f"tensor {_label(n)} (signed at {p}) is missing")
    for k in added:
        p, n, _ = a_keyed[k]
        problems.append(f"tensor {_label(n)} at {p} was not signed (added)")
    by_digest = {d: (p, n) for p, (n, d) in signed.tensors.items()}
    for k, (p, n, d) in a_keyed.items():
        if k not in s_keyed or p not in read or s_keyed[k][2] == d:
            continue
        other = by_digest.get(d)
        also = (f": it holds the contents signed for tensor {_label(other[1])} at {other[0]}"
                if other is not None else "")
        problems.append(f"tensor {_label(n)} at {p} differs{also}")
    problems += _structure(model, actual, a_keyed, s_keyed, signed, bool(problems))
    return problems


def _structure(model, actual, a_keyed, s_keyed, signed, tensors_differ: bool) -> list[str]:
    """The structural differences: the model's structure built with the signed digest of
    every tensor matched by name (a changed tensor is named above, not here) compared with the
    signed structure."""
    from ..content_digest import MODEL_PREFIX, structure

    stubs = dict(actual)
    for k, (p, n, _) in a_keyed.items():
        if k in s_keyed:
            stubs[p] = (n, s_keyed[k][2])
    body = structure(model, stubs)
    if hashlib.sha256(MODEL_PREFIX + body).digest() == signed.digest:
        return []
    if signed.structure is None:
        return ["the structure differs (graph, nodes, attributes or metadata)"
                + ("" if tensors_differ else "; every tensor is as signed")
                + ": this bundle carries no signed structure to name what differs"]
    from ..formats.onnx.wire_decode import decode
    from ..verify import compare_models

    # the stubs' raw_data (32 octets of digest) is no tensor's contents: decoded unchecked
    s = decode(signed.structure, "ModelProto", source="the signed structure")
    a = decode(bytes(body), "ModelProto", source="the model's structure")
    found = compare_models(s, a, limit=_COMPARED)
    out = []
    shifted: list[str] = []  # lists whose elements were added or removed
    for d in found:
        if any(d.path.startswith(p + "[") for p in shifted):
            continue  # an element after an insertion or removal: named by it already
        items = _items(d.path, s, a)
        if items:
            shifted.append(d.path)
        out.append(f"structure: {describe(d.path, s, a)}: {d.message}{items}")
    if len(out) > MAX_NAMED:
        out = out[:MAX_NAMED] + [f"structure: more than {MAX_NAMED} differences, the first "
                                 f"{MAX_NAMED} named"]
    if not out:  # equal field by field, different octets: unknown fields, encoding
        out.append("structure: the encoding differs (unknown fields or field order)")
    return out


_SEGMENT = re.compile(r"([A-Za-z_]\w*)(?:\[(\d+)\])?")


def describe(path: str, signed, actual) -> str:
    """``path`` (IR field names, ``graph.nodes[3].attributes[1].ints``) with what each indexed
    element is: ``graph node 3 (Conv 'conv1') attribute pads .ints``, a node's op type and
    name, an attribute's, a metadata entry's key, an opset import's domain, a tensor's or
    value's name, taken from the signed model (else the model, for an element it lacks)."""
    out = []
    objs = [signed, actual]
    for part in path.split("."):
        m = _SEGMENT.fullmatch(part)
        if m is None:
            out.append(part)
            objs = [None, None]
            continue
        field, index = m.group(1), m.group(2)
        nxt = []
        for o in objs:
            v = getattr(o, field, None) if o is not None else None
            if index is not None:
                v = v[int(index)] if isinstance(v, list) and int(index) < len(v) else None
            nxt.append(v)
        objs = nxt
        if index is None:
            out.append(field)
            continue
        what = next((_what(v) for v in objs if v is not None and _what(v)), "")
        noun = _NOUNS.get(field, field)
        out.append(f"{noun} {index}{' (' + what + ')' if what else ''}")
    return " ".join(out)


def _resolve(obj, path: str):
    for part in path.split("."):
        m = _SEGMENT.fullmatch(part)
        if m is None or obj is None:
            return None
        obj = getattr(obj, m.group(1), None)
        if m.group(2) is not None:
            i = int(m.group(2))
            obj = obj[i] if isinstance(obj, list) and i < len(obj) else None
    return obj


def _items(path: str, signed, actual) -> str:
    """For a list of records whose length differs (nodes, metadata entries, opset imports,
    attributes, ...): which elements were removed or added, by index and what they are."""
    import difflib

    a, b = _resolve(signed, path), _resolve(actual, path)
    if not (isinstance(a, list) and isinstance(b, list)) or len(a) == len(b):
        return ""
    noun = _NOUNS.get(path.rsplit(".", 1)[-1], "element")
    wa = [_what(x) or repr(x) for x in a]
    wb = [_what(x) or repr(x) for x in b]
    said = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if op in ("delete", "replace"):
            said += [f"removed {noun} {i} ({wa[i]})" for i in range(i1, i2)]
        if op in ("insert", "replace"):
            said += [f"added {noun} {j} ({wb[j]})" for j in range(j1, j2)]
    return (": " + "; ".join(said[:MAX_NAMED])) if said else ""


_NOUNS = {"nodes": "node", "attributes": "attribute", "opset_imports": "opset import",
          "metadata_props": "metadata entry", "initializers": "initializer",
          "inputs": "input", "outputs": "output", "value_info": "value_info",
          "functions": "function", "sparse_initializers": "sparse initializer"}


def _what(v) -> str:
    if hasattr(v, "version") and hasattr(v, "domain"):  # an opset import
        return f"{v.domain or 'ai.onnx'} version {v.version}"
    op = getattr(v, "op_type", None)
    if op is not None:
        name = getattr(v, "name", "")
        return f"{op} {name!r}" if name else op
    for f in ("key", "domain", "name"):
        x = getattr(v, f, None)
        if isinstance(x, str):
            return f"{f} {x!r}" if f != "name" else x
    return ""
