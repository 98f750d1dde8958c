"""Duplicates across a fleet, from the content digests of a scan's rows (``--tensors
--duplicates``; docs/scan.md#duplicates).

Two models are content-identical when their content digests are equal (the same model
whatever its layout: inline, external data, OneModel, ``.zst``; docs/content-digest.md).
Tensors are shared when their tensor digests are equal (element type, dims and values). A
deduplicated store keeps each distinct tensor once: it saves the bytes of every other copy,
within a model (tied weights) and between models.
"""

from __future__ import annotations

#: How many groups of each kind a report lists (the totals count them all).
TOP = 20


def find_duplicates(rows: list[dict], top: int = TOP) -> dict:
    """Duplicates among ``rows`` (rows without a digest are left out).

    Returns a JSON-ready dict: ``identical`` (groups of two or more sources with the same
    content digest: ``{"digest", "sources"}``, largest groups first); ``tensors`` (tensor
    occurrences with a digest), ``tensor_bytes`` (their bytes), ``unique_tensor_bytes`` (each
    distinct tensor once) and ``saved_bytes`` (the difference: what a deduplicated store saves);
    ``shared`` (up to ``top`` groups of models sharing tensors, most bytes first:
    ``{"sources", "tensors", "bytes"}``, ``bytes`` counting each shared tensor once; a
    group's tensors appear in exactly these models); ``shared_groups``: how many such
    groups there are.
    """
    by_digest: dict[str, list[str]] = {}
    for r in rows:
        if r.get("digest") is not None:
            by_digest.setdefault(r["digest"], []).append(r["source"])
    identical = sorted(({"digest": d, "sources": sorted(s)} for d, s in by_digest.items()
                        if len(s) > 1), key=lambda g: (-len(g["sources"]), g["sources"]))
    tensor_models: dict[str, set[str]] = {}
    tensor_size: dict[str, int] = {}
    occurrences = total = 0
    for r in rows:
        for t in r.get("tensors") or ():
            occurrences += 1
            total += t["bytes"] or 0
            tensor_models.setdefault(t["digest"], set()).add(r["source"])
            tensor_size[t["digest"]] = t["bytes"] or 0
    unique = sum(tensor_size.values())
    groups: dict[tuple, list[int]] = {}
    for d, models in tensor_models.items():
        if len(models) > 1:
            g = groups.setdefault(tuple(sorted(models)), [0, 0])
            g[0] += 1
            g[1] += tensor_size[d]
    shared = sorted(({"sources": list(k), "tensors": n, "bytes": b}
                     for k, (n, b) in groups.items()),
                    key=lambda g: (-g["bytes"], g["sources"]))
    return {"identical": identical, "tensors": occurrences, "tensor_bytes": total,
            "unique_tensor_bytes": unique, "saved_bytes": total - unique,
            "shared": shared[:top], "shared_groups": len(shared)}
