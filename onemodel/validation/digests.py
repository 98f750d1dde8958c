"""``OM207`` (``--full``): a OneModel file's tensors against the content digests its manifest
records (docs/format-extension.md section 9, docs/content-digest.md).

Without ``--full`` nothing is hashed (``check`` reads structure only). With it, every tensor
whose bytes carry a recorded digest is hashed (in threads, as ``onemodel hash`` does) and each
mismatch is one error naming the tensor, its manifest path and its byte range in the file;
when every tensor matches, the model digest is computed from them and compared with the one
recorded for the model.
"""

from __future__ import annotations

from ..content_digest import PARALLEL_BYTES, model_digest, tensor_digest
from ..formats.container.digests import blob_digest, format_digest, recorded_model_digest
from ..ir.walk import iter_tensors
from .codes import finding


def check_digests(model, ctx) -> list:
    """The OM207 findings of ``model`` (only under ``ctx["full"]``)."""
    if not ctx.get("full"):
        return []
    todo, seen = [], set()
    for _, t in iter_tensors(model):
        if id(t) not in seen and blob_digest(t) is not None:
            seen.add(id(t))
            todo.append(t)
    if not todo:
        return []
    import os
    from concurrent.futures import ThreadPoolExecutor

    def one(t):
        return tensor_digest(t, check=False)

    big = [t for t in todo if _nbytes(t) >= PARALLEL_BYTES]
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        got = dict(zip(map(id, big), pool.map(one, big)))
    out = []
    for t in todo:
        d = got.get(id(t)) or one(t)
        got[id(t)] = d
        want = blob_digest(t)
        if d != want:
            blob = t.external if t.is_external else t.raw_data
            c = blob._check
            out.append(finding(
                "OM207", f"tensor {t.name or ''!r}: bytes [{blob.offset}, "
                f"{blob.offset + blob.nbytes}) do not match its recorded digest "
                f"{format_digest(want)} (they hash to {format_digest(d)})", c[3], blob.offset))
    recorded = recorded_model_digest(model)
    if not out and recorded is not None:
        md = model_digest(model, known=got)
        if md.digest != recorded:
            out.append(finding("OM207", f"the model digest {md.hex} is not the recorded "
                                        f"{format_digest(recorded)}", "manifest.digests.model"))
    return out


def _nbytes(t) -> int:
    b = t.external if t.is_external else t.raw_data
    return b.nbytes
