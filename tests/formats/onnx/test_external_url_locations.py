"""Locations under a URL (Clauses 13.2 and 15.3): the ONNX package's one rule,
``location_parts(location, url=True)``, refuses every escape from the model's directory, host or
bucket, and only then does storage join the location to the URL
(``onemodel.storage.place.join_location``, which judges nothing)."""

from __future__ import annotations

import uuid

import fsspec
import numpy as np
import pytest
from external_models import external_tensor, model_with

import onemodel
from onemodel.errors import InvalidModelError
from onemodel.formats.onnx.external_refs import location_parts
from onemodel.formats.onnx.external_sinks import data_file_target

#: Locations that leave the directory of a model at s3://b/dir/m.onnx, with the words of the
#: rule that refuses each.
ESCAPES = [
    ("", "is empty"),
    ("../w.bin", "parent-directory component '..'"),
    ("a/../../w.bin", "parent-directory component '..'"),
    ("a/..", "parent-directory component '..'"),
    ("/etc/passwd", "absolute path"),
    ("s3://other/w.bin", "names a scheme or drive"),
    ("https://evil/w.bin", "names a scheme or drive"),
    ("C:/w.bin", "Windows drive path"),
    ("c:w.bin", "Windows drive path"),
    ("a\\..\\w.bin", "backslash"),
    ("%2e%2e/w.bin", "parent-directory component '..' once percent-decoded"),
    ("a/%2E%2E/%2e%2e/w.bin", "parent-directory component '..' once percent-decoded"),
    ("%2fetc/passwd", "absolute path once percent-decoded"),
    ("a%5c..%5cw.bin", "parent-directory component '..' once percent-decoded"),
    ("dir/", "does not name a file"),
    ("w\x00.bin", "NUL character"),
    ("x::s3://b/k", "Windows drive path"),  # 'x:' is read as a drive first
    ("ab::s3://b/k", "names a scheme or drive"),
    ("ab1+.-:w.bin", "names a scheme or drive"),
]


@pytest.mark.parametrize("location,why", ESCAPES)
def test_the_rule_refuses_escapes_from_a_url(location, why):
    with pytest.raises(InvalidModelError) as e:
        location_parts(location, url=True)
    assert why in e.value.message
    with pytest.raises(InvalidModelError) as e:  # the write side asks the same rule
        data_file_target("s3://b/dir/", location)
    assert why in e.value.message


@pytest.mark.parametrize("location", ["%2e%2e/w.bin", "s3://other/w.bin", "ab::s3://b/k",
                                      "ab1+.-:w.bin", "%2fetc/passwd"])
def test_url_only_refusals_leave_files_on_disk_alone(location):
    """Percent signs and colons are plain characters of a file name on disk: the extra rules
    apply to URLs only (as before)."""
    assert location_parts(location) == tuple(p for p in location.split("/") if p)


@pytest.mark.parametrize("location,joined", [
    ("m.data", "s3://b/dir/m.data"),
    ("./w/part 1.bin", "s3://b/dir/w/part 1.bin"),
    ("a//b.bin", "s3://b/dir/a//b.bin"),  # components joined as written, as before
])
def test_legal_locations_are_joined_as_written(location, joined):
    location_parts(location, url=True)
    assert data_file_target("s3://b/dir/", location) == joined


@pytest.mark.parametrize("location,why", [e for e in ESCAPES if e[0]])
def test_a_remote_model_refuses_each_escape_naming_tensor_and_location(location, why):
    """Read from a URL, the refusal names the tensor and the location (the reader's path), and
    nothing outside the model's directory is opened."""
    fs = fsspec.filesystem("memory")
    root = f"/url-loc-{uuid.uuid4().hex}"
    try:
        fs.pipe(f"{root}/w.bin", np.zeros(4, np.float32).tobytes())
        t = external_tensor("w", [4], [("location", location)])
        fs.pipe(f"{root}/dir/m.onnx", model_with(t).SerializeToString())
        with pytest.raises(InvalidModelError) as e:
            onemodel.load(f"memory://{root}/dir/m.onnx")
        assert why in e.value.message
        assert "tensor 'w'" in e.value.message and repr(location) in e.value.message
        assert e.value.path == "ModelProto.graph.initializer[0]"
    finally:
        fs.rm(root, recursive=True)
