"""The files a model was read from, which nothing that writes may replace (issue 23: a
command never destroys its input; :func:`onemodel.storage.place.refuse_inputs_as_outputs`)."""

from __future__ import annotations

from typing import NamedTuple

from ..storage.place import local_path, target_of
from .layouts import companions


class InputFile(NamedTuple):
    """A file a model was read from: ``what`` words it for a message (``"the model file"``,
    ``"a data file of the model"``), ``target`` is its path or URL, ``model`` is True for the
    model file itself."""

    what: str
    target: str
    model: bool = False


def input_files(model) -> list[InputFile]:
    """Every file ``model`` was read from (its ``resources``, as the readers fill them): the
    model file first, then each external data file (safetensors shards included) and the files
    a layout plugin says belong to it (:func:`onemodel.formats.layouts.companions`: the index
    beside safetensors shards, ``<stem>.safetensors.index.json``, Hugging Face's name, when that
    file exists); bytes in memory name none."""
    found: list = []
    for i, source in enumerate(getattr(model, "resources", None) or []):
        target = target_of(source)
        if target is None:
            continue
        found.append(InputFile("the model file", target, True) if i == 0 else
                     InputFile("a data file of the model", target))
        path = local_path(target) if i else None
        for index in companions(path) if path is not None else ():
            if all(f.target != index for f in found):
                found.append(InputFile("the shard index of the model", index))
    return found


__all__ = ["InputFile", "input_files"]
