"""``OM207`` (``--full``): a OneModel file's tensors against the content digests its manifest
records (docs/format-extension.md section 9, docs/content-digest.md).

Without ``--full`` nothing is hashed (``check`` reads structure only). With it, a model that
carries recorded digests is hashed whole, as ``onemodel hash`` does (every tensor once, in
threads), and each tensor whose bytes do not match the digest recorded for them is one error
naming the tensor, its manifest path and its byte range in the file; when every tensor matches,
the model digest is compared with the one recorded for the model.
"""

from __future__ import annotations

from .codes import finding


def check_digests(model, ctx) -> list:
    """The OM207 findings of ``model`` (only under ``ctx["full"]``; none for a model without
    recorded digests). Raises IoError when a tensor's bytes cannot be read."""
    if not ctx.get("full"):
        return []
    # (imported here: the container package and hashlib cost a plain check 10 ms)
    from ..formats.container.digests import blob_digest, format_digest, recorded_model_digest
    from ..formats.content_digest import model_digest
    from ..ir.walk import iter_tensors

    pairs = list(iter_tensors(model))
    if not any(blob_digest(t) is not None for _, t in pairs):
        return []
    md = model_digest(model, check=False)  # the bytes as they are, for the comparison here
    out, seen = [], set()
    for (_, t), (_, d) in zip(pairs, md.tensors.values()):
        want = blob_digest(t)
        if want is None or d == want or id(t) in seen:
            continue
        seen.add(id(t))
        blob = t.external if t.is_external else t.raw_data
        out.append(finding(
            "OM207", f"tensor {t.name or ''!r}: bytes [{blob.offset}, "
            f"{blob.offset + blob.nbytes}) do not match its recorded digest "
            f"{format_digest(want)} (they hash to {format_digest(d)})", blob.digest_path,
            blob.offset))
    recorded = recorded_model_digest(model)
    if not out and recorded is not None and md.digest != recorded:
        out.append(finding("OM207", f"the model digest {md.hex} is not the recorded "
                                    f"{format_digest(recorded)}", "manifest.digests.model"))
    return out
