"""The files a local model consists of: the model file and the external data files its tensors
name (Clause 13.2), each once, in the order first named."""

from __future__ import annotations

import os


def model_files(path: str, **load_options) -> list[str]:
    """The model file ``path`` and the data files its external tensors name (paths relative to
    the model's directory, as written, ``/``-separated), the model file first. Reads the model
    with :func:`onemodel.load` (raising its errors); the tensors' contents are not read."""
    from ..api import load
    from ..formats.onnx.external_refs import parse_reference
    from ..ir.walk import iter_tensors

    names = [os.path.basename(path)]
    with load(path, **load_options) as m:
        for _, t in iter_tensors(m):
            if t.is_external and t.external_data:
                loc = parse_reference(t.external_data).location
                if loc not in names:
                    names.append(loc)
    return names
