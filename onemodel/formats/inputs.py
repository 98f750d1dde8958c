"""The files a model was read from, which nothing that writes may replace (issue 23: a
command never destroys its input; :func:`onemodel.storage.place.refuse_inputs_as_outputs`)."""

from __future__ import annotations

import os

from ..storage.place import local_path, target_of
from .safetensors.layout import index_of_shard


def input_files(model) -> list[tuple[str, str]]:
    """``(what, path or URL)`` of every file ``model`` was read from (its ``resources``, as the
    readers fill them): the model file first, then each external data file (safetensors shards
    included) and the index beside shards (``<stem>.safetensors.index.json``, Hugging Face's
    name, when that file exists); bytes in memory name none. ``what`` words the file for a
    message (``"the model file"``, ``"a data file of the model"``)."""
    found: list = []
    for i, source in enumerate(getattr(model, "resources", None) or []):
        target = target_of(source)
        if target is None:
            continue
        found.append(("the model file" if i == 0 else "a data file of the model", target))
        path = local_path(target) if i else None
        index = index_of_shard(path) if path is not None else None
        if index is not None and os.path.isfile(index) and all(t != index for _, t in found):
            found.append(("the shard index of the model", index))
    return found


__all__ = ["input_files"]
